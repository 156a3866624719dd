/* SPDX-License-Identifier: MIT */
/* Hibernate a sandbox (processes, memory, files) to disk and wake it again: docs/hibernate.md.
 *
 *   POST /v1/sandboxes/{id}/hibernate     -> 200 the sandbox, state "hibernated"
 *   POST /v1/sandboxes/{id}/resume        wakes a hibernated one (as it thaws a paused one)
 *
 * E2B's pause (keeping memory) maps to hibernate when CRIU is there, its connect to wake. */
#ifndef GBX_CORE_HIBERNATE_H
#define GBX_CORE_HIBERNATE_H

#include <sys/types.h>

#include "core/actor.h"

struct gbx_err;
struct gbx_live;
struct gbx_server;

/* Called on the loop when done: l is the sandbox (NULL on error: err says why; the sandbox
 * may be gone, then a GET says 404). A front end that answers a request keeps it in arg (its
 * gbx_http_later). */
typedef void (*gbx_hibernate_done_fn)(void *arg, struct gbx_live *l, const struct gbx_err *err);

/* Checkpoint l off the loop; its processes end, its image goes to <state>/hibernate/<id>. An
 * UNAVAILABLE error (nothing touched) when CRIU is not installed or cannot work on this
 * kernel (gbx_criu_probe). Any failure before the dump completed leaves the sandbox running
 * as it was (paused again if it was), with an error saying so; a delete meanwhile stops the
 * dump and waits for it (gbx_sandboxes_destroy_later). */
void gbx_hibernate(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                   gbx_hibernate_done_fn done, void *arg);
/* The same, for a caller that wants the sandbox paused either way (E2B pause): when
 * hibernating is unavailable here or fails with the sandbox running on, it is frozen in
 * place instead and done reports success (audited as sandbox.hibernate_failed). */
void gbx_hibernate_or_pause(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                            gbx_hibernate_done_fn done, void *arg);
/* Restore a hibernated l off the loop (a no-op for a running one). */
void gbx_hibernate_wake(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                        gbx_hibernate_done_fn done, void *arg);
/* Remove a hibernated sandbox's image (in the background). */
void gbx_hibernate_discard(struct gbx_server *s, const char *id);
/* At a daemon's start: the host pid of the init that a wake restored from id's image when
 * the daemon that woke it died before taking it back (the image's restore.pid names a live
 * process), else 0. */
pid_t gbx_hibernate_woken_pid(struct gbx_server *s, const char *id);
/* At a daemon's start: remove the image directory of id, which is not hibernated (a dump or a
 * wake that did not finish); 1 if there was one. */
int gbx_hibernate_remove_stale(struct gbx_server *s, const char *id);

#endif
