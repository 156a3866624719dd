/* SPDX-License-Identifier: MIT */
/* A template's start command and ready check, run when a sandbox of it is created (boot.c). */
#ifndef GBX_CORE_BOOT_H
#define GBX_CORE_BOOT_H

#include <stdint.h>

struct event_base;
struct gbx_err;
struct gbx_live;
struct gbx_server;

/* Does l's template name a start command or a ready check? Then *start and *ready (owned,
 * either may be NULL) are what to run. */
int gbx_boot_needed(struct gbx_server *s, const struct gbx_live *l, char **start, char **ready);
/* l ready (NULL and err: not ready in time, or its agent went away; the sandbox has been
 * destroyed). */
typedef void (*gbx_boot_fn)(void *arg, struct gbx_live *l, const struct gbx_err *err);
/* Start the start command, then run the ready check until it passes; start and ready are
 * taken over. done runs on the loop, possibly before this returns. */
void gbx_boot(struct gbx_server *s, struct event_base *base, struct gbx_live *l, char *start,
              char *ready, gbx_boot_fn done, void *arg);

/* The same for any long-running process of a sandbox (the browser, browser/browser.h). */
struct gbx_boot_spec {
    const char *start;      /* run in the background by /bin/sh -c, or NULL */
    const char *ready;      /* run every 50 ms until it exits 0, or NULL */
    const char *log;        /* the start command's stdout and stderr, in the sandbox */
    const char *user;       /* whom both run as; NULL: init's default */
    const char *what;       /* named in errors and the log: "browser" */
    int64_t timeout_ms;     /* the ready check must pass within */
    int destroy_on_fail;    /* not ready: destroy the sandbox (a create's boot) */
    int fail_on_start_exit; /* the start command exiting non-zero before ready fails at once
                             * (127: NOT_FOUND) */
};
/* Strings are copied. done runs on the loop, possibly before this returns. */
void gbx_boot_run(struct gbx_server *s, struct event_base *base, struct gbx_live *l,
                  const struct gbx_boot_spec *spec, gbx_boot_fn done, void *arg);

#endif
