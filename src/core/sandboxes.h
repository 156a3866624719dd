/* SPDX-License-Identifier: MIT */
/* The daemon's sandboxes, as the HTTP front ends (native /v1 in server.c, E2B in e2b_*.c)
 * share them: create (from the warm pool when it can), find, destroy, timeouts, pause.
 * Everything here runs on the loop; what depends on who asks (what it may see, who owns
 * what it makes, what the audit log says) takes the actor (api/actor.h). Implemented in
 * server.c. */
#ifndef GBX_CORE_SANDBOXES_H
#define GBX_CORE_SANDBOXES_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/actor.h"
#include "core/limits.h"
#include "core/spec.h"
#include "base/err.h"
#include "sandbox/backend.h"

struct gbx_server;
struct gbx_egress_sb;
struct gbx_pending_delete;

/* A sandbox the daemon keeps. Strings and JSON are owned. */
struct gbx_live {
    struct gbx_live *next;
    struct gbx_sandbox *sb;
    char *template_name;
    struct gbx_cg_limits limits;
    uint64_t disk_bytes;
    int64_t created_ns;
    int64_t expires_ns; /* 0: no timeout */
    char *owner;        /* "" for the admin, else the API key's name */
    json_t *env;        /* {"K": "V"} for every process, or NULL */
    json_t *metadata;   /* {"k": "v"} kept for the caller, or NULL */
    json_t *labels;     /* {"k": "v"} to filter lists by, or NULL */
    char *idem_key;     /* the create's idempotency key, or NULL */
    char *spec_text;    /* the create request as stored (to compare a retried create) */
    char token[65];     /* a random secret for this sandbox (E2B's envd access token) */
    int paused;         /* frozen (E2B pause); resumed by connect */
    json_t *attrs;      /* what front ends remember about it ({"e2b.template": ...}), or NULL */
    struct gbx_egress_sb *egress; /* its DNS, proxy and policy */
    int busy;                     /* GBX_BUSY_*, or 0 */
    int restarting;               /* busy with a rollback (on a worker thread) */
    int hibernated; /* its processes and memory are on disk; sb is a stand-in (no processes) */
    int on_timeout_pause;      /* its timeout pauses it instead of destroying it */
    int public_traffic;        /* ingress takes requests to it without a credential */
    int auto_resume;           /* a request that needs it thaws it (gbx_sandboxes_wake) */
    uint64_t timeout_ms;       /* the timeout it was made with (an auto-resume re-arms it), 0 */
    unsigned browser_port;     /* its browser's DevTools port (browser/browser.h), 0: none */
    char browser_profile[256]; /* that browser's profile directory, in the sandbox */
    atomic_int *cancel;        /* set it to stop the job that holds it (GBX_BUSY_WORKER), or NULL */
    struct gbx_pending_delete *pending; /* deletes waiting for that job to end */
};

enum {
    GBX_BUSY_SNAPSHOT = 1, /* a snapshot is being taken: no second one, no rollback */
    GBX_BUSY_WORKER = 2,   /* hibernated or woken on a worker thread: no other use at all */
};

/* Create a sandbox from a native create body ({"template", "memory", "timeout", "env",
 * "metadata", "labels", "idempotency_key", ...}: docs/api.yaml SandboxCreate; body is
 * borrowed), off the loop: what can be checked is checked now, the sandbox is made on a worker
 * thread (the job keeps its own copy of who), its agent's HELLO is awaited on the loop without
 * blocking it, and done runs on the loop with the new sandbox (existed 0), the one an earlier
 * create with the same idempotency key made (existed 1; then, and for the warm pool's sandboxes
 * and every error found before any sandbox exists, done runs before this returns), or NULL and
 * err (INVALID for a bad body, CONFLICT for a taken id or a reused key, NOT_FOUND for an
 * unknown template). */
typedef void (*gbx_sandboxes_created_fn)(void *arg, struct gbx_live *l, int existed,
                                         const struct gbx_err *err);
void gbx_sandboxes_create_async(struct gbx_server *s, const struct gbx_actor *who, json_t *body,
                                gbx_sandboxes_created_fn done, void *arg);
/* The same from a spec a front end built (core/spec.h): copied, so the caller keeps and
 * clears its own. */
void gbx_sandboxes_create_spec_async(struct gbx_server *s, const struct gbx_actor *who,
                                     const struct gbx_create_spec *spec,
                                     gbx_sandboxes_created_fn done, void *arg);
/* count sandboxes from spec (copied), one after the other as above: each(arg, l, err) for
 * every one (l is valid only during the call), stopping at the first error unless keep_going,
 * then done(arg). */
typedef void (*gbx_sandboxes_each_fn)(void *arg, struct gbx_live *l, const struct gbx_err *err);
void gbx_sandboxes_create_many(struct gbx_server *s, const struct gbx_actor *who,
                               const struct gbx_create_spec *spec, int count, int keep_going,
                               gbx_sandboxes_each_fn each, void (*done)(void *arg), void *arg);
/* The order of lists (qsort over struct gbx_live *): newest first, ties broken by id, so
 * that a cursor names one place in the order. */
int gbx_sandboxes_cmp(const void *a, const void *b);
/* Is t the sandbox's secret token (E2B's envd access token, also its traffic token)? Compared
 * in constant time; NULL is no. */
int gbx_sandboxes_token_is(const struct gbx_live *l, const char *t);
/* The sandbox id, if who may see it; else NULL. */
struct gbx_live *gbx_sandboxes_find(struct gbx_server *s, const struct gbx_actor *who,
                                    const char *id);
/* Destroy it (kind: the audit record, "sandbox.delete"; detail stolen, may be NULL). The
 * sandbox is gone either way; -1 says what could not be cleaned up. */
int gbx_sandboxes_destroy(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                          const char *kind, json_t *detail, struct gbx_err **err);
/* Destroy it as soon as it can be: now, or, while a job holds it (a hibernate or a wake on a
 * worker thread), once that job has ended; a hibernate in progress is stopped first. done
 * runs exactly once: err NULL when the sandbox is gone, else what could not be cleaned up
 * (it is gone either way) or why it could not be deleted. detail is stolen. Audited as
 * who (copied: a delete that waits keeps it); visibility was checked by the caller. */
typedef void (*gbx_sandboxes_gone_fn)(void *arg, const struct gbx_err *err);
void gbx_sandboxes_destroy_later(struct gbx_server *s, const struct gbx_actor *who,
                                 struct gbx_live *l, const char *kind, json_t *detail,
                                 gbx_sandboxes_gone_fn done, void *arg);
/* The same when nobody waits for the answer (a timeout, the collector, a session's end):
 * what could not be cleaned up is logged. */
void gbx_sandboxes_destroy_bg(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                              const char *kind, json_t *detail);
/* The job that held it has ended (its result applied): it is idle again, and the deletes
 * that waited run now. l may be freed by this call. */
void gbx_sandboxes_idle(struct gbx_server *s, struct gbx_live *l);
/* Set when the reaper destroys it (0: never), recorded and audited (detail stolen). */
void gbx_sandboxes_set_expiry(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                              int64_t expires_ns, json_t *detail);
/* Freeze or thaw every process of the sandbox. A paused sandbox is not reaped when its
 * timeout passes (it waits to be resumed or destroyed); once resumed, an expired timeout
 * takes it at the reaper's next turn unless the caller sets a new one. */
int gbx_sandboxes_pause(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                        int paused, struct gbx_err **err) GBX_WUR;
/* A request that needs the sandbox's processes (front: "envd", "api", "ingress", for the
 * audit) found it paused: with auto_resume set, it is thawed now, as its owner, audited
 * ("sandbox.resume", reason "auto_resume"), and a timeout that had paused it starts again
 * (the one it was made with). 0: it runs (it did already, or was thawed); -1: it stays paused
 * (no auto_resume, hibernated, busy, or the thaw failed: logged). */
int gbx_sandboxes_wake(struct gbx_server *s, struct gbx_live *l, const char *front);
/* Remember a front end's attribute of the sandbox (value stolen; NULL removes it), in its
 * record: it survives a restart of the daemon. */
void gbx_sandboxes_set_attr(struct gbx_server *s, struct gbx_live *l, const char *key,
                            json_t *value);
/* Call fn for every sandbox who may see, newest first; a non-zero return stops. fn must not
 * create or destroy sandboxes. */
void gbx_sandboxes_each(struct gbx_server *s, const struct gbx_actor *who,
                        int (*fn)(void *arg, struct gbx_live *l), void *arg);
/* The same over every sandbox, whoever owns it (for the daemon's own bookkeeping). */
void gbx_sandboxes_each_any(struct gbx_server *s, int (*fn)(void *arg, struct gbx_live *l),
                            void *arg);
/* Whoever owns it. */
struct gbx_live *gbx_sandboxes_find_any(struct gbx_server *s, const char *id);
/* The native API's view of a sandbox (docs/api.yaml Sandbox). */
json_t *gbx_sandboxes_json(const struct gbx_live *l);
/* Write its row (state, attrs, pid) now; failures are logged. */
void gbx_sandboxes_save(struct gbx_server *s, struct gbx_live *l);
/* Say hello to a sandbox's agent on its creator's connection, then close it (it is ready). */
int gbx_sandboxes_hello(struct gbx_sandbox *sb, struct gbx_err **err) GBX_WUR;
/* Forget sandbox id whose processes are already gone (l->sb may be NULL): unlink, free,
 * delete its row, audit "sandbox.delete" with the reason (as the daemon: "system"). */
void gbx_sandboxes_drop(struct gbx_server *s, struct gbx_live *l, const char *id, const char *why);
/* What a sandbox of template tmpl started from snapshot (id or name, or NULL) stacks: the
 * read-only layers, top first (free with gbx_snapshots_layers_free), on the base template
 * (*base, owned) the library creates it from (a template made from a snapshot is its base
 * with layers). The snapshot must be one who may see. */
int gbx_sandboxes_layers(struct gbx_server *s, const struct gbx_actor *who, const char *tmpl,
                         const char *snapshot, char ***layers, size_t *n, char **base,
                         struct gbx_err **err) GBX_WUR;
/* Roll a sandbox back to a snapshot (id or name): its processes end and it starts again
 * with the same id, token, settings and network policy, its root filesystem the snapshot's.
 * What can be checked is checked now; the old tree's end, the new start and its HELLO run on
 * a worker thread (the sandbox is busy meanwhile), then done runs on the loop with l, or NULL
 * and err: when the new start fails, the sandbox is gone (destroyed) and err says why. */
typedef void (*gbx_sandboxes_rolled_fn)(void *arg, struct gbx_live *l, const struct gbx_err *err);
void gbx_sandboxes_rollback(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                            const char *snapshot, gbx_sandboxes_rolled_fn done, void *arg);

/* Would who holding add more stay within its key's quotas (the daemon's --quota-*, or the
 * key's own)? 0, or -1 with *err (LIMIT: the API's 429, naming the quota, its limit and what
 * is in use). The admin has no quota. Sandboxes count from the moment a create is admitted
 * (its reservation is dropped when the create fails). */
int gbx_sandboxes_quota_admit(struct gbx_server *s, const struct gbx_actor *who,
                              const struct gbx_quota_use *add, struct gbx_err **err) GBX_WUR;
/* A timeout set on a live sandbox (0: none) against --max-timeout: 0, or -1 with *err
 * (INVALID). */
int gbx_sandboxes_check_timeout(struct gbx_server *s, uint64_t timeout_ms,
                                struct gbx_err **err) GBX_WUR;

#endif
