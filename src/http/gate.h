/* SPDX-License-Identifier: MIT */
/* The HTTP front door: every connection the daemon's evhttp servers accept runs through a
 * bufferevent filter (evhttp_set_bevcb) that parses each request head with http-parser (the
 * egress relay, egress/sniff.h) before evhttp sees a byte of it, and asks the server whether
 * that request may carry a body (a valid credential). One that may not is handed to evhttp as
 * its head alone, with "Content-Length: 0" and "Connection: close": the handler answers it as
 * it answers any request without a credential (401, or the data plane's 502), and not a byte
 * of its body is read into memory; the connection closes after that answer. Every request on
 * a connection is gated, pipelined ones too.
 *
 * The same filter enforces the timeouts (the whole head within header_timeout of its first
 * byte, or of the connection's start; no gap longer than body_timeout in a body, and at least
 * body_min_rate bytes/s on average once a body is GBX_GATE_RATE_GRACE_S seconds old; at most
 * idle_timeout between requests), and on the TCP listener the connection caps: max_conns in
 * all, max_conns_per_ip from one address; the connection over a cap is answered 503 and
 * closed, logged at most once a second. The admin socket is exempt from the caps (its
 * clients are the operator's: they must get in while the TCP side is flooded) but not from
 * the timeouts.
 *
 * Writes go straight to the socket (evbuffer_write) from the filter's output, which keeps
 * evhttp's "everything is written" callback honest: it fires only once the kernel has the
 * bytes, so a reply is never cut short by the close that follows it. */
#ifndef GBX_HTTP_GATE_H
#define GBX_HTTP_GATE_H

#include <stddef.h>
#include <stdint.h>

#include "egress/sniff.h"

struct event_base;
struct evbuffer;
struct evhttp;
struct evhttp_request;

#define GBX_GATE_RATE_GRACE_S 5

/* 0 in any field: that limit is off. */
struct gbx_gate_limits {
    unsigned max_conns;        /* open connections in all (TCP) */
    unsigned max_conns_per_ip; /* from one client address (TCP) */
    uint64_t header_timeout_ms;
    uint64_t body_timeout_ms;
    uint64_t body_min_rate; /* bytes/s */
    uint64_t idle_timeout_ms;
};

#define GBX_GATE_LIMITS_DEFAULT                                                                    \
    {                                                                                              \
        .max_conns = 1024, .max_conns_per_ip = 256, .header_timeout_ms = 10000,                    \
        .body_timeout_ms = 60000, .body_min_rate = 16384, .idle_timeout_ms = 60000                 \
    }

/* May this request carry its body? 1 yes (it is forwarded whole), 0 no (its head alone, and
 * the connection closes after the answer). req and its strings are valid during the call. */
typedef int (*gbx_gate_allow_fn)(void *arg, const struct gbx_http_req_info *req);

struct gbx_gate;

/* A gate for one listener (owned by the caller, gbx_gate_free). capped: the connection caps
 * apply (TCP). allow NULL: every request may carry a body (the admin socket). The limits are
 * copied; name ("tcp", "admin") is for the log. */
struct gbx_gate *gbx_gate_new(struct event_base *base, const struct gbx_gate_limits *lim,
                              int capped, const char *name, gbx_gate_allow_fn allow, void *arg);
/* A reload's new limits: checked against from now on, by open connections too (a timer
 * already running keeps its deadline). NULL-safe. */
void gbx_gate_set_limits(struct gbx_gate *g, const struct gbx_gate_limits *lim);
/* A takeover (the daemon's ingress): the first request head of each connection is offered to
 * claim (req valid during the call); 1 claims the whole connection (*ticket: the claimant's
 * note, given back to take or drop). Then nothing of it goes to evhttp: take gets a duplicate
 * of the socket (its own to close) and every byte received so far (the head as received and
 * whatever followed, its own to free), and evhttp's side of the connection is closed without
 * another byte written. drop: a claimed connection that went away before it could be taken. */
struct gbx_gate_takeover {
    int (*claim)(void *arg, const struct gbx_http_req_info *req, void **ticket);
    void (*take)(void *arg, void *ticket, int fd, struct evbuffer *pending);
    void (*drop)(void *arg, void *ticket);
};
void gbx_gate_set_takeover(struct gbx_gate *g, const struct gbx_gate_takeover *t, void *arg);
/* Route every connection http accepts from now on through g. */
void gbx_gate_attach(struct gbx_gate *g, struct evhttp *http);
/* After the evhttp servers are freed. Connections still being torn down by libevent finish
 * on their own. NULL-safe. */
void gbx_gate_free(struct gbx_gate *g);
/* A request's reply is complete (api/reqmetrics.c calls this for every tracked request): the
 * connection's idle timer may start. */
void gbx_gate_request_done(struct evhttp_request *req);
/* g's series for /metrics (the daemon's counters, admin only): open connections, refused over a
 * cap, requests forwarded without their body, connections closed on a malformed request or by a
 * timeout (by phase). NULL-safe. */
struct evbuffer;
void gbx_gate_metrics(const struct gbx_gate *g, struct evbuffer *b);
/* The same for every gate there is (newest first). */
void gbx_gates_metrics(struct evbuffer *b);

#endif
