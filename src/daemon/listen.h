/* SPDX-License-Identifier: MIT */
/* The daemon's listeners: the admin socket (<runtime>/api.sock, mode 0600) and, with --listen,
 * TCP; who each request is, and which front end answers it (listen.c); the credentials and
 * the per-key rate limit of TCP requests (auth.c). */
#ifndef GBX_DAEMON_LISTEN_H
#define GBX_DAEMON_LISTEN_H

#include <event2/http.h>
#include <stddef.h>

#include "base/err.h"
#include "http/gate.h"

struct gbx_server;
struct gbx_listeners;

#define GBX_LISTEN_MAX 8

struct gbx_listen_config {
    const char *listen_tcp;        /* "ADDR:PORT[,ADDR:PORT...]", or NULL: the unix socket only */
    size_t max_body;               /* largest JSON body, bytes; 0: 1 MiB */
    size_t max_upload;             /* largest upload body, bytes; 0: 64 MiB */
    struct gbx_gate_limits http;   /* timeouts and connection caps (0: off; see gate.h) */
    double rate_limit, rate_burst; /* requests/s per API key, and the burst (0: twice) */
    int rate_limit_set;            /* else GLOVEBOX_E2B_RATE, or 100/s burst 200 */
    /* TCP connections whose first request another front end claims (ingress), or NULL */
    const struct gbx_gate_takeover *takeover;
    void *takeover_arg;
};

/* Serve s's API. On failure *out is still set (free it). */
int gbx_listen_start(struct gbx_server *s, const struct gbx_listen_config *cfg,
                     struct gbx_listeners **out, struct gbx_err **err) GBX_WUR;
/* A reload: serve TCP on exactly cfg's addresses (new ones bound first: if one cannot be,
 * -1 with *err and nothing changed; addresses no longer listed stop accepting, their open
 * connections go on), with cfg's connection limits and rate limit. Body limits are not
 * changed. */
int gbx_listen_reconfigure(struct gbx_listeners *n, const struct gbx_listen_config *cfg,
                           struct gbx_err **err) GBX_WUR;
/* The TCP addresses served now, at most max into addrs (valid until the next reload). */
size_t gbx_listen_tcp_addrs(const struct gbx_listeners *n, const char **addrs, size_t max);
/* The first step of a graceful stop: stop accepting, end every open stream with an event
 * saying why. 1 when streams were ended (give their last bytes a moment to go out by running
 * the loop a little longer), 0 otherwise. */
int gbx_listen_drain(struct gbx_listeners *n);
/* Stop serving: the HTTP servers freed, the front ends' streams and builds ended. Before
 * gbx_server_shutdown. */
void gbx_listen_stop(struct gbx_listeners *n);
void gbx_listen_free(struct gbx_listeners *n);

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

#endif
