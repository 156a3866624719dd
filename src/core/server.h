/* SPDX-License-Identifier: MIT */
/* The daemon's core: the registry of live sandboxes and the services around it (the store,
 * the egress gateway, snapshots, sessions, retention, the worker threads), on one libevent
 * loop. The listeners and front ends that answer requests are above it (daemon/listen.h). */
#ifndef GBX_CORE_SERVER_H
#define GBX_CORE_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "core/actor.h"
#include "core/gc.h"
#include "base/err.h"

struct event_base;
struct gbx_server;
struct gbx_limits;

struct gbx_server_config {
    const char *state_dir;       /* NULL: $GLOVEBOX_STATE_DIR or /var/lib/glovebox */
    const char *runtime_dir;     /* NULL: $GLOVEBOX_RUNTIME_DIR or /run/glovebox */
    size_t max_upload;           /* largest file upload body (held in memory), bytes; 0: 64 MiB */
    size_t pool_size;            /* fresh sandboxes of the default template kept ready; 0: none */
    const char *egress_default;  /* "policy" (NULL), "none" or "open" */
    const char *ingress_domain;  /* "<port>-<id>.<this>" reaches a sandbox's port; NULL: off */
    const char *egress_hosts;    /* "name=IPv4 ..." upstream overrides, or NULL */
    const char *egress_resolver; /* "IPv4[:PORT]": nameserver for upstream names, or NULL */
    const char *egress_extra_ca; /* PEM file of extra upstream trust anchors, or NULL */
    unsigned egress_max_conns;   /* per sandbox; 0: 256 */
    unsigned audit_rate;         /* egress audit rows/s per sandbox per kind; 0: 20 */
    unsigned audit_burst;        /* 0: 100 */
    int audit_unlimited;         /* every egress row written (--audit-rate 0) */
    uint64_t state_reserve;      /* free bytes the state dir keeps (diskguard.h) */
    int state_reserve_set;       /* 0: the default (the smaller of 64 MiB and 1% of the fs) */
    int64_t criu_timeout_ms;     /* one criu dump or restore; 0: 2 minutes */
    int64_t helper_timeout_ms;   /* tar, debootstrap and other helpers; 0: 30 minutes */
    int64_t hello_timeout_ms;    /* a new sandbox's init answering HELLO; 0: 30 s */
    struct gbx_gc_policy retention;
    const struct gbx_limits *limits; /* defaults, maximums, quotas; NULL: gbx_limits_init's */
};

int gbx_server_new(struct event_base *base, const struct gbx_server_config *cfg,
                   struct gbx_server **out, struct gbx_err **err) GBX_WUR;
/* A reload: what a running daemon can change of cfg takes effect now (the warm pool's size,
 * and its sandboxes replaced when the defaults they were made with changed; the egress
 * default; defaults, maximums and quotas for what comes next; the helpers' deadlines; the
 * retention policies). The rest of cfg is not read. */
void gbx_server_reconfigure(struct gbx_server *s, const struct gbx_server_config *cfg);
/* What the daemon (gloveboxd.c) answers about its settings: GET /v1/daemon/config and POST
 * /v1/daemon/reload (the admin's). */
struct json_t;
struct gbx_actor;
struct gbx_daemon_ops {
    struct json_t *(*config)(void *arg);
    /* 0 and the report, or -1 with *err (nothing changed) */
    int (*reload)(void *arg, const struct gbx_actor *who, struct json_t **report,
                  struct gbx_err **err);
};
void gbx_server_set_daemon(struct gbx_server *s, const struct gbx_daemon_ops *ops, void *arg);
/* More series for the admin's /metrics (the daemon's front ends outside the core: ingress). */
struct evbuffer;
void gbx_server_set_metrics_extra(struct gbx_server *s, void (*fn)(void *arg, struct evbuffer *b),
                                  void *arg);
/* The ingress domain in force (E2B's "domain"), or NULL: the daemon's one server's. */
const char *gbx_server_ingress_domain_now(void);
/* The daemon is stopping, its loop still turning: creates waiting for their sandbox's HELLO
 * end now (torn down; their callers hear that the daemon is stopping, while replies can still
 * go out). Returns how many. */
size_t gbx_server_drain(struct gbx_server *s);
/* Stop; sandboxes keep running (kill_sandboxes: destroy them). The listeners stop first
 * (gbx_listen_stop). */
void gbx_server_shutdown(struct gbx_server *s, int kill_sandboxes);
void gbx_server_free(struct gbx_server *s);
/* Append an audit record as who (detail: a JSON object, stolen; may be NULL). Failures are
 * logged, never fatal to the request. */
struct json_t;
void gbx_server_audit(struct gbx_server *s, const struct gbx_actor *who, const char *kind,
                      const char *sandbox, struct json_t *detail);
/* The same on behalf of an actor named by its audit name (the egress gateway's records). */
void gbx_server_audit_as(struct gbx_server *s, const char *actor, const char *kind,
                         const char *sandbox, struct json_t *detail);
/* The same, and done runs (on the loop) once the record is durable (err NULL) or could not be
 * written (err says why: STORAGE for a full state disk); done may be NULL. Records complete in
 * the order they were queued. For a reply that acknowledges the record (api/audit.c). */
typedef void (*gbx_server_audit_fn)(void *arg, const struct gbx_err *err);
void gbx_server_audit_then(struct gbx_server *s, const char *actor, const char *kind,
                           const char *sandbox, struct json_t *detail, gbx_server_audit_fn done,
                           void *arg);
/* The error of a call that was done but whose audit record kind could not be written (aerr,
 * as gbx_server_audit_then's done got it): what a reply says instead of success. */
int gbx_server_unrecorded(struct gbx_err **err, const char *kind, const struct gbx_err *aerr);
/* Admission on the state disk (admit.c, base/diskguard.h), once the caller is known and
 * before the request runs: a delete may use the reserve file; new work is refused while the
 * disk is short (-1 with *err, STORAGE; *free_bytes says what is left). The front end that
 * asked answers the refusal (507) in its own form. */
enum gbx_admit_front {
    GBX_ADMIT_NATIVE,
    GBX_ADMIT_E2B_CONTROL,
    GBX_ADMIT_E2B_DATA,
    GBX_ADMIT_E2B_INTERP,
};
enum gbx_admit_method {
    GBX_ADMIT_READ,   /* GET, HEAD, OPTIONS */
    GBX_ADMIT_WRITE,  /* POST, PUT, PATCH */
    GBX_ADMIT_DELETE, /* DELETE */
};
int gbx_server_admit(struct gbx_server *s, enum gbx_admit_front front, enum gbx_admit_method m,
                     const char *path, int64_t *free_bytes, struct gbx_err **err) GBX_WUR;
/* The state directory and its reserve, bytes (for a refusal's body). */
const char *gbx_server_state_dir(const struct gbx_server *s, uint64_t *reserve);
/* The session engine (session/sessions.h), which is above the core: the daemon makes it
 * after the core and hands it over here with what the core may ask of it. The core counts
 * its sessions for quotas, hands retention its sessions and deletes, and stops it at
 * shutdown before the sandboxes go (its agent connections first). */
struct gbx_sessions;
struct gbx_session_info {
    const char *id;
    int64_t created_ns, last_ns; /* last: its newest event */
    int busy;                    /* a call is running or queued */
};
struct gbx_session_ops {
    void (*free)(struct gbx_sessions *all);
    uint64_t (*count)(const struct gbx_sessions *all, const char *owner);
    void (*each_info)(struct gbx_sessions *all,
                      void (*fn)(void *arg, const struct gbx_session_info *i), void *arg);
    /* 1 deleted, 0 not (no such session, or a call is running) */
    int (*remove)(struct gbx_sessions *all, const char *id, const char *why);
};
void gbx_server_set_sessions(struct gbx_server *s, struct gbx_sessions *all,
                             const struct gbx_session_ops *ops);
/* What the core may ask of the session engine (session_ops NULL: there is none yet). */
uint64_t gbx_server_sessions_count(const struct gbx_server *s, const char *owner);
void gbx_server_sessions_each(struct gbx_server *s,
                              void (*fn)(void *arg, const struct gbx_session_info *i), void *arg);
int gbx_server_sessions_delete(struct gbx_server *s, const char *id, const char *why);
/* Metrics hooks for the exec streams. */
/* A process started secs after its exec request arrived. */
void gbx_server_exec_started(struct gbx_server *s, double secs);
void gbx_server_exec_bytes(struct gbx_server *s, unsigned long long out, unsigned long long err);
/* The largest upload body, bytes (--max-upload): also the bound of a decompressed upload. */
size_t gbx_server_max_upload(const struct gbx_server *s);
/* The loop's store connection, for reads (owned by the server). */
struct gbx_store *gbx_server_store(const struct gbx_server *s);
/* The event loop (owned by the caller of gbx_server_new). */
struct event_base *gbx_server_base(const struct gbx_server *s);
/* The worker threads for blocking work (owned by the server; api/offload.h). */
struct gbx_offload *gbx_server_offload(const struct gbx_server *s);
/* The sandbox library's context: state and runtime dirs, uid slots (owned by the server). */
struct gbx_runtime *gbx_server_runtime(struct gbx_server *s);
/* The snapshot registry and the sessions (owned by the server). */
struct gbx_snapshots *gbx_server_snapshots(const struct gbx_server *s);
struct gbx_sessions *gbx_server_sessions(const struct gbx_server *s);
/* The egress gateway (owned by the server). */
struct gbx_egress *gbx_server_egress(const struct gbx_server *s);
/* The admin socket's path (owned by the server). */
const char *gbx_server_socket_path(const struct gbx_server *s);
/* The v1 cpu controller's directory the daemon's groups are made in (NULL without one), and
 * the prefix of this daemon's group names (its runtime dir's scope). */
const char *gbx_server_cpu_dir(const struct gbx_server *s, const char **scope);
/* Defaults, maximums and quotas (owned by the server). */
const struct gbx_limits *gbx_server_limits(const struct gbx_server *s);
/* The store writer thread's id (0 if it has not started). */
int gbx_server_writer_tid(const struct gbx_server *s);

#endif
