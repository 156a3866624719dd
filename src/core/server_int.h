/* SPDX-License-Identifier: MIT */
/* The core's insides (struct gbx_server), shared by the files of the core that keep the
 * registry (server.c: the live sandboxes, their lifecycle, the daemon's start and stop;
 * create.c: making a sandbox, the warm pool; adopt.c: the reaper and re-adoption at start;
 * quota.c; audit.c; admit.c) and read by the front ends' status routes (api/metrics.c,
 * api/apikeys_api.c). No HTTP type: the listeners are the daemon's (daemon/listen.c). */
#ifndef GBX_CORE_SERVER_INT_H
#define GBX_CORE_SERVER_INT_H

#include <event2/util.h>
#include <jansson.h>
#include <stdint.h>

#include "core/limits.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "base/diskguard.h"
#include "sandbox/backend.h"

#define GBX_DEFAULT_MAX_UPLOAD (64u << 20)

struct create_job;
struct pool_fill;
struct reserved_id {
    struct reserved_id *next, **pprev; /* in s->going: removed in O(1) (a flood ends at once) */
    char *id;
};

/* A fresh sandbox of the default template, waiting in the warm pool. */
struct pooled {
    struct pooled *next;
    struct gbx_sandbox *sb;
    struct gbx_egress_sb *egress;
};

struct gbx_server {
    struct event_base *base;
    struct pooled *pool;
    size_t pool_len, pool_target;
    size_t pool_inflight;           /* created, row not yet durable */
    struct event *pool_ev;          /* refills the pool, one sandbox per turn of the loop */
    int pool_backoff;               /* the last refill failed: wait before the next */
    unsigned pool_gen;              /* bumped when a reload changes what pooled ones are */
    struct pool_fill *pool_filling; /* made, waiting on the loop for init's HELLO */
    int64_t hello_timeout_ms;       /* how long that may take (--hello-timeout) */
    char *sock_path;                /* <runtime>/api.sock, where the listeners serve the admin */
    struct gbx_runtime rt;
    int rt_ready;
    int lock_fds[2]; /* <state>/gloveboxd.lock and <runtime>/gloveboxd.lock: one daemon each */
    struct gbx_store *store;         /* the loop's connection: reads, and rows that must be
                                        durable before a reply */
    struct gbx_store_writer *writer; /* everything else: audit, deletes, expiries (group commit) */
    struct event *writer_ev;
    size_t writes_pending;
    struct gbx_live *live;
    struct create_job *creating;   /* creates on worker threads (their ids are taken) */
    struct reserved_id *going;     /* ids of sandboxes being taken down on worker threads */
    struct gbx_egress *egress;     /* DNS, proxy, policy and credentials of every sandbox */
    struct gbx_sessions *sessions; /* the session engine, above the core */
    const struct gbx_session_ops *session_ops; /* what the core asks of it (NULL: none yet) */
    const struct gbx_daemon_ops *daemon_ops;   /* the daemon's settings (NULL: a test's core) */
    void *daemon_arg;
    char *ingress_domain;                                 /* cfg's, copied; NULL: no ingress */
    void (*metrics_extra)(void *arg, struct evbuffer *b); /* more of the admin's /metrics */
    void *metrics_extra_arg;
    struct gbx_snapshots *snapshots;
    struct gbx_gc *gc;           /* retention */
    struct gbx_offload *offload; /* blocking work (copies, hashing, checkpoints) */
    struct event *reaper;        /* destroys sandboxes whose timeout passed */
    size_t max_upload;           /* the largest upload body (--max-upload) */
    struct gbx_limits limits;  /* defaults, maximums and quotas (--default-*, --max-*, --quota-*) */
    char *pool_spec;           /* the limits pooled sandboxes are made with, as their rows say */
    struct gbx_diskguard disk; /* the state disk's reserve (admit.c) */
    struct metrics {
        uint64_t create_buckets[12]; /* cumulative counts per bound in create_bounds */
        double create_sum;
        uint64_t create_count, create_failed;
        uint64_t execs, exec_out_bytes, exec_err_bytes;
        uint64_t exec_buckets[12]; /* start latency, same bounds as create */
        double exec_sum;
        uint64_t expired, lost, timeout_paused, auto_resumed;
        uint64_t pool_hits, pool_misses, pool_failed;
    } m;
};

/* Upper bounds of the create-latency histogram, in seconds (server.c). */
extern const double gbx_create_bounds[12];

/* Shared between the files of the server (prefixed gbx_srv_). */
struct gbx_egress_sb;
int gbx_srv_agent_hello(struct gbx_sandbox *sb, struct gbx_err **err);
struct gbx_live *gbx_srv_live_find_any(struct gbx_server *s, const char *id);
void gbx_srv_observe_create(struct gbx_server *s, double secs);
json_t *gbx_srv_sandbox_json(const struct gbx_live *l);
void gbx_srv_write_done(void *arg, int status, const char *msg);
void gbx_srv_env_add_trust(struct gbx_live *l);
void gbx_srv_live_set_extras(struct gbx_live *l, const struct gbx_create_spec *c);
void gbx_srv_new_token(char out[65]);
void gbx_srv_pool_drain(struct gbx_server *s);
/* reconfig.c: start refilling the pool (its event made when it is first needed); the
 * ingress domain (copied; NULL: none; E2B's replies read it). */
void gbx_srv_pool_start(struct gbx_server *s);
void gbx_srv_set_ingress_domain(struct gbx_server *s, const char *domain);
/* Down to pool_target: the extra pooled sandboxes destroyed. */
void gbx_srv_pool_trim(struct gbx_server *s);
/* Pooled sandboxes whose init died: removed (and made again). */
void gbx_srv_pool_reap(struct gbx_server *s);
void gbx_srv_pool_push(struct gbx_server *s, struct gbx_sandbox *sb, struct gbx_egress_sb *egress);
void gbx_srv_store_delete(struct gbx_server *s, const char *id);
void gbx_srv_pool_kick(struct gbx_server *s);
/* At shutdown: the creates and pool fills still waiting for init's HELLO end now (their
 * sandboxes are torn down; a create's caller hears that the daemon is stopping). */
size_t gbx_srv_creates_abort(struct gbx_server *s);
/* How long a new sandbox's init has to answer HELLO, unless --hello-timeout says. */
#define GBX_HELLO_TIMEOUT_MS 30000
int gbx_srv_stack_template(struct gbx_server *s, const char *tmpl, char ***layers, size_t *n,
                           char **base, struct gbx_err **err);
int gbx_srv_adopt_all(struct gbx_server *s, struct gbx_err **err);
void gbx_srv_pool_fill_one(evutil_socket_t fd, short what, void *arg);
void gbx_srv_live_free(struct gbx_live *l);
void gbx_srv_reap_expired(evutil_socket_t fd, short what, void *arg);
/* gbx_sandboxes_pause with the audit row's detail (stolen; NULL: none). */
int gbx_srv_pause(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l, int paused,
                  json_t *detail, struct gbx_err **err) GBX_WUR;
/* quota.c: limits as a live sandbox's row keeps them, and what a key holds */
uint64_t gbx_srv_host_ram(void);
json_t *gbx_srv_limits_json(const struct gbx_cg_limits *cg, uint64_t disk);
char *gbx_srv_limits_spec(const struct gbx_cg_limits *cg, uint64_t disk);
void gbx_srv_limits_from_json(json_t *j, struct gbx_cg_limits *cg, uint64_t *disk);
uint64_t gbx_srv_quota_memory(const struct gbx_server *s, const struct gbx_cg_limits *cg);
void gbx_srv_quota_of(struct gbx_server *s, const char *owner, struct gbx_quota *q);
/* core/create.c: what the creates still being made for owner add to use */
void gbx_srv_creating_use(const struct gbx_server *s, const char *owner, struct gbx_quota_use *use);

#endif
