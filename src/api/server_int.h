/* SPDX-License-Identifier: MIT */
/* The server's insides, shared by the files it is split into: server.c (listeners, routing,
 * the live sandboxes, lifecycle), core/create.c (parsing and making a sandbox, the warm
 * pool), adopt.c (the reaper and re-adoption at start), metrics.c (/healthz and /metrics),
 * quota.c (what a key holds against its quotas), apikeys_api.c (/v1/apikeys), admit.c
 * (admission on the state disk), audit.c (audit records). Nothing outside src/api/server*.c,
 * core/create.c, adopt.c, metrics.c, quota.c, apikeys_api.c, admit.c and audit.c includes
 * it. */
#ifndef GBX_API_SERVER_INT_H
#define GBX_API_SERVER_INT_H

#include <event2/http.h>
#include <event2/util.h>
#include <jansson.h>
#include <stdint.h>

#include "core/limits.h"
#include "core/sandboxes.h"
#include "api/server.h"
#include "base/diskguard.h"
#include "sandbox/backend.h"

#define GBX_DEFAULT_MAX_BODY (1u << 20)
#define GBX_DEFAULT_MAX_UPLOAD (64u << 20)
#define GBX_MAX_HEADERS (64u << 10)

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
    struct pool_fill *pool_filling; /* made, waiting on the loop for init's HELLO */
    struct evhttp *http;
    struct evconnlistener *unix_listener;
    char *sock_path;
    struct gbx_runtime rt;
    int rt_ready;
    int lock_fds[2]; /* <state>/gloveboxd.lock and <runtime>/gloveboxd.lock: one daemon each */
    struct gbx_store *store;         /* the loop's connection: reads, and rows that must be
                                        durable before a reply */
    struct gbx_store_writer *writer; /* everything else: audit, deletes, expiries (group commit) */
    struct event *writer_ev;
    size_t writes_pending;
    struct gbx_live *live;
    struct create_job *creating; /* creates on worker threads (their ids are taken) */
    struct reserved_id *going;   /* ids of sandboxes being taken down on worker threads */
    struct gbx_egress *egress;   /* DNS, proxy, policy and credentials of every sandbox */
    struct gbx_sessions *sessions;
    struct gbx_snapshots *snapshots;
    struct gbx_gc *gc;           /* retention */
    struct gbx_offload *offload; /* blocking work (copies, hashing, checkpoints) */
    struct event *reaper;        /* destroys sandboxes whose timeout passed */
    struct evhttp *http_tcp;     /* --listen: every request needs an API key */
    struct evhttp_bound_socket *unix_bound, *tcp_bound;
    size_t max_upload;         /* the largest upload body (--max-upload) */
    struct gbx_limits limits;  /* defaults, maximums and quotas (--default-*, --max-*, --quota-*) */
    char *pool_spec;           /* the limits pooled sandboxes are made with, as their rows say */
    struct gbx_diskguard disk; /* the state disk's reserve (admit.c) */
    struct gbx_gate *gate_admin, *gate_tcp; /* the HTTP front doors (gate.c) */
    struct metrics {
        uint64_t create_buckets[12]; /* cumulative counts per bound in create_bounds */
        double create_sum;
        uint64_t create_count, create_failed;
        uint64_t execs, exec_out_bytes, exec_err_bytes;
        uint64_t exec_buckets[12]; /* start latency, same bounds as create */
        double exec_sum;
        uint64_t expired, lost, timeout_paused;
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
/* Pooled sandboxes whose init died: removed (and made again). */
void gbx_srv_pool_reap(struct gbx_server *s);
void gbx_srv_pool_push(struct gbx_server *s, struct gbx_sandbox *sb, struct gbx_egress_sb *egress);
void gbx_srv_store_delete(struct gbx_server *s, const char *id);
void gbx_srv_pool_kick(struct gbx_server *s);
/* At shutdown: the creates and pool fills still waiting for init's HELLO end now (their
 * sandboxes are torn down; a create's caller hears that the daemon is stopping). */
void gbx_srv_creates_abort(struct gbx_server *s);
/* How long a new sandbox's init has to answer HELLO. */
#define GBX_HELLO_TIMEOUT_MS 30000
int gbx_srv_stack_template(struct gbx_server *s, const char *tmpl, char ***layers, size_t *n,
                           char **base, struct gbx_err **err);
void gbx_srv_handle_create(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req);
void gbx_srv_handle_metrics(struct gbx_server *s, const struct gbx_actor *who,
                            struct evhttp_request *req);
json_t *gbx_srv_health_json(const struct gbx_server *s, const struct gbx_actor *who);
int gbx_srv_adopt_all(struct gbx_server *s, struct gbx_err **err);
void gbx_srv_pool_fill_one(evutil_socket_t fd, short what, void *arg);
void gbx_srv_live_free(struct gbx_live *l);
void gbx_srv_reap_expired(evutil_socket_t fd, short what, void *arg);
/* auth.c: the key a TCP request carries ("Authorization: Bearer KEY" or "X-API-Key: KEY"). */
const char *gbx_srv_request_key(const struct evkeyvalq *h);
/* Does the request carry a valid credential for its route: an API key (the key's name in
 * name), or on E2B's data plane the sandbox's token or a URL signature (its owner's name)?
 * 1 or 0. Asked by the gate before a body is read and by dispatch_tcp before routing. */
int gbx_srv_authenticate(struct gbx_server *s, const struct evkeyvalq *in, enum evhttp_cmd_type m,
                         const char *path, const char *query, char *name, size_t namesz);
/* The TCP gate's gbx_gate_allow_fn (arg: the server). */
struct gbx_http_req_info;
int gbx_srv_gate_allow(void *arg, const struct gbx_http_req_info *req);
/* The per-key request-rate limit (--rate-limit; given 0: GLOVEBOX_E2B_RATE or 100/s burst
 * 200). _take: 0, or -1 with the seconds to wait; rate and burst say the limit. */
void gbx_srv_rate_init(double rate, double burst, int given);
void gbx_srv_rate_release(void);
int gbx_srv_rate_take(const char *name, unsigned *retry_after, double *rate, double *burst);
/* 429 (E2B's error form when e2b) when name's bucket is empty: 1 if answered. */
int gbx_srv_rate_limited(struct evhttp_request *req, const char *name, int e2b, const char *path);
/* quota.c: limits as a live sandbox's row keeps them, and what a key holds */
uint64_t gbx_srv_host_ram(void);
json_t *gbx_srv_limits_json(const struct gbx_cg_limits *cg, uint64_t disk);
char *gbx_srv_limits_spec(const struct gbx_cg_limits *cg, uint64_t disk);
void gbx_srv_limits_from_json(json_t *j, struct gbx_cg_limits *cg, uint64_t *disk);
uint64_t gbx_srv_quota_memory(const struct gbx_server *s, const struct gbx_cg_limits *cg);
void gbx_srv_quota_of(struct gbx_server *s, const char *owner, struct gbx_quota *q);
/* apikeys_api.c: /v1/apikeys and /v1/apikeys/... (path: the whole request path) */
void gbx_srv_handle_apikeys(struct gbx_server *s, const struct gbx_actor *who,
                            struct evhttp_request *req, const char *path);
/* core/create.c: what the creates still being made for owner add to use */
void gbx_srv_creating_use(const struct gbx_server *s, const char *owner, struct gbx_quota_use *use);

#endif
