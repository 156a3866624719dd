/* SPDX-License-Identifier: MIT */
/* A sandbox's browser (docs/browser.md): Debian's Chromium, headless, started inside the
 * sandbox as its user with its profile in the sandbox's home (so a logged-in browser is a
 * directory like any other: paused, snapshotted, cloned and hibernated with the rest), its
 * DevTools server on the sandbox's own loopback, reached from outside through ingress
 * (ingress/ingress.h rewrites what the DevTools server says about its own address). Its
 * traffic is the sandbox's: the same netns, DNS, egress policy and audit.
 *
 * Everything here is called on the loop; the DevTools calls (browser/cdp.h) run on worker
 * threads. */
#ifndef GBX_BROWSER_BROWSER_H
#define GBX_BROWSER_BROWSER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct gbx_live;
struct gbx_server;

#define GBX_BROWSER_PORT 9222
#define GBX_BROWSER_PROFILE "/home/user/.glovebox/browser"
#define GBX_BROWSER_LOG "/tmp/glovebox-browser.log"
#define GBX_BROWSER_START_MS 30000 /* Chromium's DevTools server must be up within */

struct gbx_browser_opts {
    unsigned port;       /* 0: GBX_BROWSER_PORT */
    const char *profile; /* NULL: GBX_BROWSER_PROFILE; an absolute path of [A-Za-z0-9._/-] */
};

/* Check o (port not one of the daemon's own, profile's form): 0, or -1 with *err INVALID. */
int gbx_browser_opts_check(const struct gbx_browser_opts *o, struct gbx_err **err) GBX_WUR;

/* The browser's state, as the routes answer it: {"running", "port", "profile", "version"
 * (Chromium's "Browser" when running), "log"}. err NULL: done. */
typedef void (*gbx_browser_fn)(void *arg, json_t *state, const struct gbx_err *err);

/* Start l's browser (idempotent: one already running with that profile is kept) and answer
 * once its DevTools server is up; NOT_FOUND when the template has no Chromium. o checked. */
void gbx_browser_start(struct gbx_server *s, struct gbx_live *l, const struct gbx_browser_opts *o,
                       gbx_browser_fn done, void *arg);
/* Ask the DevTools server whether it is up. */
void gbx_browser_status(struct gbx_server *s, struct gbx_live *l, gbx_browser_fn done, void *arg);
/* Close it (Browser.close: Chromium writes its profile out), killed when it does not go
 * within 5 s; "running": false. A browser not running is no error. */
void gbx_browser_stop(struct gbx_server *s, struct gbx_live *l, gbx_browser_fn done, void *arg);

/* A PNG of the browser's page (png NULL with err when not). */
typedef void (*gbx_browser_shot_fn)(void *arg, const uint8_t *png, size_t len,
                                    const struct gbx_err *err);
void gbx_browser_screenshot(struct gbx_server *s, struct gbx_live *l, gbx_browser_shot_fn done,
                            void *arg);

#endif
