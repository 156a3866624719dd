/* SPDX-License-Identifier: MIT */
/* The templates service (templates.c): the templates each tenant sees by name, the builds
 * (OCI imports from a host path or an upload, Debian builds) that run on the worker threads
 * (core/offload.h) while the loop keeps their progress, watchers of that progress, and the
 * delete (refused while a sandbox or a snapshot uses the template; the tree is removed off the
 * loop). The routes are api/templates_api.c; this knows no HTTP: a front end follows a build
 * with gbx_templates_watch and writes what it is told in its own form.
 *
 * Template names are per tenant (sandbox/template.h, core/template_names.h): a key's own
 * template is "NAME@KEY" in the store, a shared one (the admin's) "NAME". Every name below is a
 * stored name unless it says "shown". Everything runs on the loop thread. */
#ifndef GBX_CORE_TEMPLATES_H
#define GBX_CORE_TEMPLATES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/actor.h"
#include "core/template_names.h" /* gbx_templates_visible */
#include "base/err.h"

struct evbuffer;
struct gbx_deb_opts;
struct gbx_server;

/* The stored name of the template who calls name: the key's own "NAME@KEY" when it has one
 * (installed or being built), else the shared "NAME" (which may not exist). The admin's names
 * are stored names as they are. Owned. */
char *gbx_templates_ref(struct gbx_server *s, const struct gbx_actor *who, const char *name);
/* How many templates a key has (stored, and being built). */
uint64_t gbx_templates_count(struct gbx_server *s, const char *owner);

/* Every template who sees, and the ones being built: an array of views (owned). */
json_t *gbx_templates_list(struct gbx_server *s, const struct gbx_actor *who, struct gbx_err **err);
/* One: a build's view (state "building", or "failed" when its template is not there), else
 * the installed template's (owned); NULL with *err. */
json_t *gbx_templates_show(struct gbx_server *s, const struct gbx_actor *who, const char *name,
                           struct gbx_err **err);

/* What a template is built from: one of path, upload, debian. */
struct gbx_templates_source {
    const char *path;                  /* an image archive on the host (the admin's), or */
    struct evbuffer *upload;           /* an uploaded archive: its chains are taken (no copy),
                                        * only when the build starts, or */
    const struct gbx_deb_opts *debian; /* Debian (suite, mirror, variant, include; copied) */
    const char *conf_extra; /* description=, start=, ready= lines (gbx_template_conf_extra) */
};
/* Start building who's template shown (a key's becomes "NAME@KEY"; a name the built-in
 * template or a shared template has is not for a key to take): INVALID for a bad name, a
 * CONFLICT when it is taken or being built, the key's template quota, one Debian build at a
 * time (UNAVAILABLE). Returns the build's view (state "building", owned) and its stored name
 * (*stored, owned), or NULL with *err. The build runs on a worker thread; its end is audited
 * (template.build) as who. */
json_t *gbx_templates_build(struct gbx_server *s, const struct gbx_actor *who, const char *shown,
                            const struct gbx_templates_source *src, char **stored,
                            struct gbx_err **err);

/* What a delete did. */
enum gbx_templates_deleted {
    GBX_TEMPLATES_DELETED,   /* out of use; its tree is removed on a worker thread */
    GBX_TEMPLATES_CANCELLED, /* it was being built: the build ends as failed ("cancelled"),
                              * nothing is installed */
    GBX_TEMPLATES_FORGOTTEN, /* only a failed build's record was left: it is gone */
};
/* Delete template name as who (a key deletes its own, the admin any): a CONFLICT while a
 * sandbox uses it, a snapshot was taken of a sandbox of it, or a template is made on it.
 * Returns what was done (enum gbx_templates_deleted), or -1 with *err. */
int gbx_templates_delete(struct gbx_server *s, const struct gbx_actor *who, const char *name,
                         struct gbx_err **err);

/* Following a build's progress. Is there something to follow for name? 1: a build of this
 * daemon (gbx_templates_watch it); 0: a template this daemon did not build (it is ready:
 * nothing to follow); -1 with *err: no such template. */
int gbx_templates_followable(struct gbx_server *s, const char *name, struct gbx_err **err);
/* Each event of the build (JSON objects: {"type": "progress" | "done" | "error", ...}; not
 * kept after the call), and the end of the stream, after the build's last event (it ended,
 * was deleted or replaced, or the daemon is stopping). On the loop. */
typedef void (*gbx_templates_event_fn)(void *arg, const json_t *ev);
typedef void (*gbx_templates_end_fn)(void *arg);
struct gbx_templates_watch;
/* Follow the build of name: on_event for every event it has had (a late watcher gets them
 * all), then for each as it comes; on_end once, after the last. Returns the watch; cancel it
 * with gbx_templates_unwatch when the watcher goes away first (never after on_end). Returns
 * NULL when the build has already ended: its events and on_end ran before this returned (as
 * on_end alone does when there is no build of name). */
struct gbx_templates_watch *gbx_templates_watch(struct gbx_server *s, const char *name,
                                                gbx_templates_event_fn on_event,
                                                gbx_templates_end_fn on_end, void *arg);
/* No more callbacks for w (it is freed by the service). */
void gbx_templates_unwatch(struct gbx_templates_watch *w);

/* The daemon is stopping: end every watch, ask every build to stop (its watchers are told
 * first). Returns the number of watches ended. */
size_t gbx_templates_drain(const char *why);
/* Before the worker threads are joined: cancel builds (debootstrap is killed); after this,
 * builds that finish touch nothing of the loop. Frees what the loop kept. */
void gbx_templates_shutdown(void);

#endif
