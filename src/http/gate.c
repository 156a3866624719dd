/* SPDX-License-Identifier: MIT */
/* The HTTP front door (see gate.h). */
#include "http/gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"

struct gate_conn;

struct gbx_gate {
    struct gbx_gate *next_gate; /* in gates: every gate there is, for /metrics */
    struct event_base *base;
    struct gbx_gate_limits lim;
    int capped;
    char name[16];
    gbx_gate_allow_fn allow;
    void *arg;
    const struct gbx_gate_takeover *takeover; /* ingress: connections handed over whole */
    void *takeover_arg;
    struct gate_conn *conns; /* every connection not yet torn down */
    unsigned nconns;         /* of them, those counted against the caps */
    unsigned open;           /* of them, those set up (the /metrics gauge) */
    uint64_t refused, refused_unlogged;
    int64_t refused_logged_ns;
    uint64_t head_only;   /* requests forwarded without their body */
    uint64_t malformed;   /* connections closed on a malformed request */
    uint64_t timeouts[3]; /* closed: head, body, idle */
    uint64_t closes_unlogged;
    int64_t closes_logged_ns;
};

struct gate_conn {
    struct gate_conn *prev, *next;
    struct gbx_gate *g; /* NULL once the gate is gone (the daemon is stopping) */
    struct bufferevent *filter;
    struct gbx_http_relay *relay;
    struct event *timer;                /* the deadline of the current phase; also runs a close */
    struct event *wev;                  /* the socket is writable again */
    struct evbuffer_cb_entry *out_cb;   /* on the filter's output: on_output_added */
    int fd;                             /* -1 until set up */
    int counted;                        /* against the caps */
    int stopped;                        /* head-only forwarded, or malformed: input is dropped */
    int taken;                          /* handed over (takeover): nothing more is written */
    void *ticket;                       /* the takeover's claim on the first request */
    const struct gbx_gate_takeover *tk; /* whose claim it is (the gate's, when it was made) */
    void *tk_arg;
    struct evbuffer *raw; /* the bytes of the first head, as received */
    int closing;
    unsigned inflight; /* heads given to evhttp whose reply is not complete */
    uint64_t requests;
    enum gbx_http_relay_phase phase;
    int64_t start_ns, phase_ns, last_byte_ns;
    uint64_t body_bytes;
    char ip[INET6_ADDRSTRLEN];
};

/* Connections by descriptor, to find one from its request (gbx_gate_request_done). Like the
 * request metrics, process-wide: the daemon has one server. */
static struct gate_conn **by_fd;
static size_t by_fd_len;

static void by_fd_set(int fd, struct gate_conn *c)
{
    if (fd < 0)
        return;
    if ((size_t)fd >= by_fd_len) {
        size_t n = by_fd_len ? by_fd_len : 256;
        while (n <= (size_t)fd)
            n *= 2;
        by_fd = gbx_xrealloc(by_fd, n * sizeof(struct gate_conn *));
        memset(by_fd + by_fd_len, 0, (n - by_fd_len) * sizeof(struct gate_conn *));
        by_fd_len = n;
    }
    by_fd[fd] = c;
}

static const char *phase_name(enum gbx_http_relay_phase p)
{
    switch (p) {
    case GBX_HTTP_RELAY_IN_HEAD:
        return "header";
    case GBX_HTTP_RELAY_IN_BODY:
        return "body";
    case GBX_HTTP_RELAY_IDLE:
        return "idle";
    default:
        return "stopped";
    }
}

/* ---- closing -------------------------------------------------------------------------------- */

/* Write a short answer straight to the socket (what does not fit is dropped: the connection
 * closes right after). Only when no reply of evhttp's is on its way. */
static void direct_reply(struct gate_conn *c, int status, const char *reason, const char *kind,
                         const char *msg)
{
    if (c->fd < 0 || c->inflight > 0)
        return;
    char body[256], head[512];
    int bn = snprintf(body, sizeof(body), "{\"error\":{\"kind\":\"%s\",\"message\":\"%s\"}}\n",
                      kind, msg);
    if (bn < 0 || (size_t)bn >= sizeof(body))
        return;
    int hn = snprintf(head, sizeof(head),
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      "%sConnection: close\r\n\r\n",
                      status, reason, bn, status == 503 ? "Retry-After: 1\r\n" : "");
    if (hn < 0 || (size_t)hn >= sizeof(head))
        return;
    struct iovec iov[2] = {{head, (size_t)hn}, {body, (size_t)bn}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    (void)!sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Close the connection from the loop (never inside a filter callback): evhttp sees what it
 * sees when a client goes away, and frees the connection (and so this one, conn_free). */
static void conn_close(struct gate_conn *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = 1;
    c->stopped = 1;
    gbx_log_debug("http %s: closing the connection from '%s': %s", c->g ? c->g->name : "-",
                  c->ip[0] ? c->ip : "local", why);
    if (c->timer)
        event_active(c->timer, EV_TIMEOUT, 1);
}

/* ---- timers --------------------------------------------------------------------------------- */

static void conn_arm(struct gate_conn *c, int64_t now)
{
    if (c->closing || c->g == NULL || c->timer == NULL)
        return;
    enum gbx_http_relay_phase p = gbx_http_relay_phase(c->relay);
    if (p != c->phase) {
        c->phase = p;
        c->phase_ns = now;
        if (p == GBX_HTTP_RELAY_IN_BODY)
            c->last_byte_ns = now;
        else
            c->body_bytes = 0; /* counted from the feed that started the body */
    }
    const struct gbx_gate_limits *l = &c->g->lim;
    int64_t deadline = 0;
    switch (p) {
    case GBX_HTTP_RELAY_IN_HEAD:
        if (l->header_timeout_ms)
            deadline = c->phase_ns + (int64_t)l->header_timeout_ms * 1000000;
        if (c->requests == 0 && l->header_timeout_ms) /* the first head: from the start */
            deadline = c->start_ns + (int64_t)l->header_timeout_ms * 1000000;
        break;
    case GBX_HTTP_RELAY_IN_BODY:
        if (l->body_timeout_ms)
            deadline = c->last_byte_ns + (int64_t)l->body_timeout_ms * 1000000;
        if (l->body_min_rate && (deadline == 0 || deadline > now + 1000000000))
            deadline = now + 1000000000; /* look at the rate every second */
        break;
    case GBX_HTTP_RELAY_IDLE:
        if (c->inflight > 0)
            break; /* a reply is on its way (a stream may be long and quiet) */
        if (c->requests == 0 && l->header_timeout_ms)
            deadline = c->start_ns + (int64_t)l->header_timeout_ms * 1000000;
        else if (c->requests > 0 && l->idle_timeout_ms)
            deadline = c->phase_ns + (int64_t)l->idle_timeout_ms * 1000000;
        break;
    default:
        break;
    }
    if (deadline == 0) {
        event_del(c->timer);
        return;
    }
    int64_t left = deadline - now;
    if (left < 0)
        left = 0;
    struct timeval tv = {.tv_sec = left / 1000000000, .tv_usec = (left % 1000000000) / 1000};
    event_add(c->timer, &tv);
}

static void conn_setup(struct gate_conn *c);

/* Log a slow client's close, at most once a second per gate (a flood of slow clients must
 * not flood the log too; /metrics counts every one). */
static void close_log(struct gate_conn *c, const char *phase, const char *why)
{
    struct gbx_gate *g = c->g;
    int64_t now = gbx_monotonic_ns();
    if (g->closes_logged_ns && now - g->closes_logged_ns < 1000000000) {
        g->closes_unlogged++;
        return;
    }
    g->closes_logged_ns = now;
    if (g->closes_unlogged)
        gbx_log_info("http %s: closing the connection from '%s' in its %s: %s (and %llu more "
                     "slow clients since the last message)",
                     g->name, c->ip[0] ? c->ip : "local", phase, why,
                     (unsigned long long)g->closes_unlogged);
    else
        gbx_log_info("http %s: closing the connection from '%s' in its %s: %s", g->name,
                     c->ip[0] ? c->ip : "local", phase, why);
    g->closes_unlogged = 0;
}

/* A body older than the grace period whose average rate is under the minimum. */
static int body_too_slow(const struct gate_conn *c, int64_t now)
{
    uint64_t min = c->g ? c->g->lim.body_min_rate : 0;
    double secs = (double)(now - c->phase_ns) / 1e9;
    return min && c->phase == GBX_HTTP_RELAY_IN_BODY && secs >= GBX_GATE_RATE_GRACE_S &&
           (double)c->body_bytes < (double)min * secs;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct gate_conn *c = arg;
    conn_setup(c);
    if (c->closing) {
        /* what a client's leaving looks like to evhttp: it frees the connection */
        bufferevent_trigger_event(c->filter, BEV_EVENT_ERROR | BEV_EVENT_READING, 0);
        return; /* c may be gone (conn_free, when libevent finalizes the filter) */
    }
    if (c->g == NULL)
        return;
    const struct gbx_gate_limits *l = &c->g->lim;
    int64_t now = gbx_monotonic_ns();
    enum gbx_http_relay_phase p = gbx_http_relay_phase(c->relay);
    const char *why = NULL;
    if (p == GBX_HTTP_RELAY_IN_HEAD || (p == GBX_HTTP_RELAY_IDLE && c->requests == 0)) {
        int64_t from = c->requests == 0 ? c->start_ns : c->phase_ns;
        if (l->header_timeout_ms && now - from >= (int64_t)l->header_timeout_ms * 1000000)
            why = "the request head did not arrive in time (gloveboxd --header-timeout)";
    } else if (p == GBX_HTTP_RELAY_IN_BODY) {
        if (l->body_timeout_ms && now - c->last_byte_ns >= (int64_t)l->body_timeout_ms * 1000000)
            why = "the request body stalled (gloveboxd --body-timeout)";
        else if (body_too_slow(c, now))
            why = "the request body arrives too slowly (gloveboxd --body-min-rate)";
    } else if (p == GBX_HTTP_RELAY_IDLE && c->inflight == 0) {
        if (l->idle_timeout_ms && now - c->phase_ns >= (int64_t)l->idle_timeout_ms * 1000000)
            why = "idle (gloveboxd --idle-timeout)";
    }
    if (why) {
        c->g->timeouts[p == GBX_HTTP_RELAY_IN_BODY                   ? 1
                       : p == GBX_HTTP_RELAY_IDLE && c->requests > 0 ? 2
                                                                     : 0]++;
        if (p != GBX_HTTP_RELAY_IDLE)
            close_log(c, phase_name(p), why);
        conn_close(c, why);
        return;
    }
    conn_arm(c, now);
}

static void on_writable(evutil_socket_t fd, short what, void *arg);
static void on_output_added(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg);

/* ---- set-up and the caps -------------------------------------------------------------------- */

static unsigned conns_from(const struct gbx_gate *g, const char *ip)
{
    unsigned n = 0;
    for (const struct gate_conn *c = g->conns; c; c = c->next)
        n += c->counted && strcmp(c->ip, ip) == 0;
    return n;
}

static void refuse_log(struct gbx_gate *g, const char *ip, const char *which)
{
    int64_t now = gbx_monotonic_ns();
    g->refused++;
    if (g->refused_logged_ns && now - g->refused_logged_ns < 1000000000) {
        g->refused_unlogged++;
        return;
    }
    g->refused_logged_ns = now;
    if (g->refused_unlogged)
        gbx_log_warn("http %s: refused a connection from '%s': %s (and %llu more since the "
                     "last message)",
                     g->name, ip, which, (unsigned long long)g->refused_unlogged);
    else
        gbx_log_warn("http %s: refused a connection from '%s': %s", g->name, ip, which);
    g->refused_unlogged = 0;
}

/* Once evhttp has given the bufferevent its socket (right after the bevcb): learn the
 * client's address, apply the caps, start the header timer. Idempotent. */
static void conn_setup(struct gate_conn *c)
{
    if (c->fd >= 0 || c->g == NULL)
        return;
    c->fd = bufferevent_getfd(c->filter);
    if (c->fd < 0)
        return;
    by_fd_set(c->fd, c);
    c->g->open++;
    c->wev = event_new(c->g->base, c->fd, EV_WRITE, on_writable, c);
    GBX_BUG_ON(c->wev == NULL);
    struct gbx_gate *g = c->g;
    if (g->capped) {
        struct sockaddr_storage ss = {0};
        socklen_t sl = sizeof(ss);
        if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET) {
                inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, c->ip, sizeof(c->ip));
            } else if (ss.ss_family == AF_INET6) {
                const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
                if (IN6_IS_ADDR_V4MAPPED(a))
                    inet_ntop(AF_INET, &a->s6_addr[12], c->ip, sizeof(c->ip));
                else
                    inet_ntop(AF_INET6, a, c->ip, sizeof(c->ip));
            }
        }
        const char *which = NULL;
        if (g->lim.max_conns && g->nconns >= g->lim.max_conns)
            which = "too many open connections (gloveboxd --max-conns)";
        else if (g->lim.max_conns_per_ip && conns_from(g, c->ip) >= g->lim.max_conns_per_ip)
            which = "too many open connections from this address (gloveboxd --max-conns-per-ip)";
        if (which) {
            refuse_log(g, c->ip, which);
            char msg[160];
            snprintf(msg, sizeof(msg), "%s; try again later", which);
            direct_reply(c, 503, "Service Unavailable", "unavailable", msg);
            conn_close(c, which);
            return;
        }
        c->counted = 1;
        g->nconns++;
    }
    conn_arm(c, gbx_monotonic_ns());
}

/* ---- the filters ---------------------------------------------------------------------------- */

/* Is every reply of evhttp's on this connection written to the socket? */
static int replies_out(const struct gate_conn *c)
{
    if (c->inflight > 0)
        return 0;
    struct bufferevent *under = bufferevent_get_underlying(c->filter);
    return evbuffer_get_length(bufferevent_get_output(c->filter)) == 0 &&
           (under == NULL || evbuffer_get_length(bufferevent_get_output(under)) == 0);
}

static int on_head(void *arg, const struct gbx_http_req_info *req,
                   const struct gbx_http_header **hdrs, size_t *nhdrs)
{
    static const struct gbx_http_header close_hdr[] = {{"Connection", "close"}};
    struct gate_conn *c = arg;
    /* a request may claim the whole connection (ingress): nothing of it goes to evhttp. The
     * first one, or a later one once every reply before it is out on the socket (a client
     * that keeps its connections, like Node's fetch, asks the API and then a port) */
    if (c->raw && c->g && c->g->takeover && (c->requests == 0 || replies_out(c)) &&
        c->g->takeover->claim(c->g->takeover_arg, req, &c->ticket) == 1) {
        c->tk = c->g->takeover;
        c->tk_arg = c->g->takeover_arg;
        c->requests++;
        return -1;
    }
    c->inflight++;
    c->requests++;
    int upgrade = strcmp(req->method, "CONNECT") == 0;
    for (size_t i = 0; i < req->nheaders && !upgrade; i++)
        upgrade = strcasecmp(req->headers[i].name, "Upgrade") == 0;
    /* evhttp upgrades nothing: such a head goes alone, so the relay never passes bytes raw */
    int allow = !upgrade && (c->g == NULL || c->g->allow == NULL || c->g->allow(c->g->arg, req));
    if (allow)
        return 0;
    if (c->g)
        c->g->head_only++;
    gbx_log_debug("http %s: '%s %s' from '%s' may not carry a body: its head alone goes on",
                  c->g ? c->g->name : "-", req->method, req->path, c->ip[0] ? c->ip : "local");
    *hdrs = close_hdr;
    *nhdrs = 1;
    return 1;
}

/* The first request was claimed: the socket (a duplicate) and every byte received so far go
 * to the takeover; evhttp's side of the connection is closed and writes nothing more. */
static void take_over(struct gate_conn *c, struct evbuffer *src)
{
    void *ticket = c->ticket;
    c->ticket = NULL;
    c->stopped = c->taken = 1;
    struct evbuffer *pending = c->raw ? c->raw : evbuffer_new();
    c->raw = NULL;
    evbuffer_remove_buffer(src, pending, evbuffer_get_length(src));
    /* the socket itself moves to a descriptor of the takeover's, and evhttp's number for it
     * gets a socket of its own that leads nowhere: freeing evhttp's connection shuts that one
     * down (evhttp does), not the client's. Its events are dropped first, while the number
     * still names the client's socket (epoll would keep watching it otherwise). */
    int fd = -1;
    if (c->fd >= 0) {
        struct bufferevent *under = bufferevent_get_underlying(c->filter);
        if (under)
            bufferevent_disable(under, EV_READ | EV_WRITE);
        if (c->wev) {
            event_free(c->wev);
            c->wev = NULL;
        }
        fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
        int nowhere = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || nowhere < 0 || dup3(nowhere, c->fd, O_CLOEXEC) < 0) {
            if (fd >= 0)
                close(fd);
            fd = -1;
        }
        if (nowhere >= 0)
            close(nowhere);
    }
    if (fd < 0) {
        c->tk->drop(c->tk_arg, ticket);
        evbuffer_free(pending);
    } else {
        c->tk->take(c->tk_arg, ticket, fd, pending);
    }
    conn_close(c, "handed over");
}

static enum bufferevent_filter_result in_filter(struct evbuffer *src, struct evbuffer *dst,
                                                ev_ssize_t lim, enum bufferevent_flush_mode mode,
                                                void *arg)
{
    struct gate_conn *c = arg;
    conn_setup(c);
    size_t before = evbuffer_get_length(dst);
    int64_t now = gbx_monotonic_ns();
    while (evbuffer_get_length(src) > 0) {
        if (c->stopped) {
            evbuffer_drain(src, evbuffer_get_length(src)); /* never buffered */
            break;
        }
        struct evbuffer_iovec v;
        if (evbuffer_peek(src, -1, NULL, &v, 1) < 1)
            break;
        size_t n = v.iov_len;
        if (lim > 0 && n > (size_t)lim && lim >= 4096)
            n = (size_t)lim;
        enum gbx_http_relay_phase ph = gbx_http_relay_phase(c->relay);
        int in_body = ph == GBX_HTTP_RELAY_IN_BODY;
        if (c->g && c->g->takeover) {
            /* the bytes of a request that may be claimed (ingress): from a chunk that starts
             * a request while no reply is due, until its head is read */
            if (ph == GBX_HTTP_RELAY_IDLE && c->inflight == 0) {
                if (c->raw == NULL)
                    c->raw = evbuffer_new();
                evbuffer_drain(c->raw, evbuffer_get_length(c->raw));
            } else if (ph != GBX_HTTP_RELAY_IN_HEAD && c->raw) {
                evbuffer_free(c->raw);
                c->raw = NULL;
            }
            if (c->raw)
                evbuffer_add(c->raw, v.iov_base, n); /* the relay bounds a head at 16 KiB */
        }
        int r = gbx_http_relay_feed(c->relay, v.iov_base, n, dst);
        evbuffer_drain(src, n);
        if (r == GBX_HTTP_RELAY_DENIED && c->ticket && c->tk) {
            take_over(c, src);
            break;
        }
        if (c->raw && gbx_http_relay_phase(c->relay) != GBX_HTTP_RELAY_IN_HEAD) {
            evbuffer_free(c->raw); /* its head went to evhttp */
            c->raw = NULL;
        }
        if (in_body || gbx_http_relay_phase(c->relay) == GBX_HTTP_RELAY_IN_BODY) {
            c->body_bytes += n;
            c->last_byte_ns = now;
        }
        if (r == GBX_HTTP_RELAY_HEAD_ONLY) {
            c->stopped = 1; /* evhttp answers the head and closes */
        } else if (r != 0) {
            c->stopped = 1;
            if (c->g)
                c->g->malformed++;
            direct_reply(c, 400, "Bad Request", "invalid",
                         "malformed HTTP request (RFC 9112; heads of at most 16 KiB)");
            conn_close(c, "malformed request");
        }
        if (lim > 0 && evbuffer_get_length(dst) - before >= (size_t)lim)
            break;
    }
    if (c->stopped) {
        if (c->timer && !c->closing)
            event_del(c->timer); /* evhttp's answer ends it */
    } else {
        conn_arm(c, now);
        if (body_too_slow(c, now)) { /* a steady trickle never lets the timer run */
            close_log(c, "body", "the request body arrives too slowly (gloveboxd --body-min-rate)");
            c->g->timeouts[1]++;
            conn_close(c, "the request body arrives too slowly");
        }
    }
    return evbuffer_get_length(dst) > before ? BEV_OK : BEV_NEED_MORE;
}

/* Write what evhttp wrote straight to the socket: the filter reports the output written (its
 * write callback, on which evhttp frees a connection after a last reply) only once it all is.
 * Never from inside evhttp's own call that added the output (BEV_NORMAL, the filter's output
 * callback): evhttp sets what to do once it is written only after adding it (as
 * evhttp_send_reply_end does), so the writing waits for the loop (on_writable, BEV_FLUSH). */
static enum bufferevent_filter_result out_filter(struct evbuffer *src, struct evbuffer *dst,
                                                 ev_ssize_t lim, enum bufferevent_flush_mode mode,
                                                 void *arg)
{
    struct gate_conn *c = arg;
    conn_setup(c);
    if (c->taken) /* the socket is the takeover's now */
        evbuffer_drain(src, evbuffer_get_length(src));
    if (evbuffer_get_length(src) == 0)
        return BEV_NEED_MORE;
    if (c->fd < 0 || c->wev == NULL) { /* cannot be: evhttp sets the socket before it writes */
        evbuffer_remove_buffer(src, dst, evbuffer_get_length(src));
        return BEV_OK;
    }
    if (mode == BEV_NORMAL) {
        event_add(c->wev, NULL);
        return BEV_NEED_MORE;
    }
    while (evbuffer_get_length(src) > 0) {
        int n = evbuffer_write(src, c->fd);
        if (n > 0)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
            event_add(c->wev, NULL);
            return BEV_NEED_MORE;
        }
        /* the client is gone */
        evbuffer_drain(src, evbuffer_get_length(src));
        conn_close(c, "cannot write to the client");
        return BEV_ERROR;
    }
    return BEV_OK;
}

/* The socket can take more, or evhttp added output: write it. BEV_FLUSH, because evhttp
 * writes a reply before it enables writing, and enabling a filter does not process output
 * that is already there. */
static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    struct gate_conn *c = arg;
    if (evbuffer_get_length(bufferevent_get_output(c->filter)) > 0)
        bufferevent_flush(c->filter, EV_WRITE, BEV_FLUSH);
}

static void on_output_added(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
    struct gate_conn *c = arg;
    if (info->n_added > 0 && c->wev && !c->closing)
        event_add(c->wev, NULL);
}

/* libevent frees the filter (evhttp freed its connection): forget it. */
static void conn_free(void *arg)
{
    struct gate_conn *c = arg;
    if (c->fd >= 0 && (size_t)c->fd < by_fd_len && by_fd[c->fd] == c)
        by_fd[c->fd] = NULL;
    struct gbx_gate *g = c->g;
    if (g) {
        if (c->prev)
            c->prev->next = c->next;
        else
            g->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        if (c->counted)
            g->nconns--;
        if (c->fd >= 0)
            g->open--;
        if (c->timer)
            event_free(c->timer);
        if (c->wev)
            event_free(c->wev);
    }
    if (c->out_cb) /* the filter is being destroyed, not yet gone */
        evbuffer_remove_cb_entry(bufferevent_get_output(c->filter), c->out_cb);
    gbx_http_relay_free(c->relay);
    if (c->ticket)
        c->tk->drop(c->tk_arg, c->ticket);
    if (c->raw)
        evbuffer_free(c->raw);
    free(c);
}

static struct bufferevent *new_bev(struct event_base *base, void *arg)
{
    struct gbx_gate *g = arg;
    struct bufferevent *under = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    GBX_BUG_ON(under == NULL);
    struct gate_conn *c = gbx_xcalloc(1, sizeof(*c));
    c->g = g;
    c->fd = -1;
    c->relay = gbx_http_relay_new(on_head, c);
    c->start_ns = c->phase_ns = gbx_monotonic_ns();
    c->phase = GBX_HTTP_RELAY_IDLE;
    c->filter =
        bufferevent_filter_new(under, in_filter, out_filter, BEV_OPT_CLOSE_ON_FREE, conn_free, c);
    GBX_BUG_ON(c->filter == NULL);
    c->timer = evtimer_new(base, on_timer, c);
    GBX_BUG_ON(c->timer == NULL);
    c->out_cb = evbuffer_add_cb(bufferevent_get_output(c->filter), on_output_added, c);
    c->next = g->conns;
    if (g->conns)
        g->conns->prev = c;
    g->conns = c;
    /* evhttp sets the socket once this returns: the rest is done on the next turn */
    struct timeval now = {0, 0};
    event_add(c->timer, &now);
    return c->filter;
}

/* ---- the gate ------------------------------------------------------------------------------- */

/* Every gate there is (the daemon's listeners make one each), newest first: the loop's. */
static struct gbx_gate *gates;

struct gbx_gate *gbx_gate_new(struct event_base *base, const struct gbx_gate_limits *lim,
                              int capped, const char *name, gbx_gate_allow_fn allow, void *arg)
{
    struct gbx_gate *g = gbx_xcalloc(1, sizeof(*g));
    g->base = base;
    g->lim = *lim;
    g->capped = capped;
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->allow = allow;
    g->arg = arg;
    g->next_gate = gates;
    gates = g;
    return g;
}

void gbx_gate_set_limits(struct gbx_gate *g, const struct gbx_gate_limits *lim)
{
    if (g)
        g->lim = *lim;
}

void gbx_gate_set_takeover(struct gbx_gate *g, const struct gbx_gate_takeover *t, void *arg)
{
    g->takeover = t;
    g->takeover_arg = arg;
}

void gbx_gate_attach(struct gbx_gate *g, struct evhttp *http)
{
    evhttp_set_bevcb(http, new_bev, g);
}

void gbx_gate_free(struct gbx_gate *g)
{
    if (g == NULL)
        return;
    for (struct gbx_gate **pp = &gates; *pp; pp = &(*pp)->next_gate)
        if (*pp == g) {
            *pp = g->next_gate;
            break;
        }
    /* what is left is being finalized by libevent (conn_free runs without the gate) */
    for (struct gate_conn *c = g->conns; c; c = c->next) {
        c->g = NULL;
        if (c->timer)
            event_free(c->timer);
        c->timer = NULL;
        if (c->wev)
            event_free(c->wev);
        c->wev = NULL;
    }
    free(g);
}

void gbx_gate_request_done(struct evhttp_request *req)
{
    struct evhttp_connection *conn = req ? evhttp_request_get_connection(req) : NULL;
    struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
    int fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd < 0 || (size_t)fd >= by_fd_len || by_fd[fd] == NULL || by_fd[fd]->filter != bev)
        return;
    struct gate_conn *c = by_fd[fd];
    int64_t now = gbx_monotonic_ns();
    if (c->inflight > 0 && --c->inflight == 0 && c->phase == GBX_HTTP_RELAY_IDLE)
        c->phase_ns = now; /* idle from the end of the last reply, not of the last request */
    conn_arm(c, now);
}

void gbx_gate_metrics(const struct gbx_gate *g, struct evbuffer *b)
{
    if (g == NULL)
        return;
    const char *l = g->name;
    evbuffer_add_printf(b, "glovebox_http_connections{listener=\"%s\"} %u\n", l, g->open);
    evbuffer_add_printf(b, "glovebox_http_refused_total{listener=\"%s\"} %llu\n", l,
                        (unsigned long long)g->refused);
    evbuffer_add_printf(b, "glovebox_http_head_only_total{listener=\"%s\"} %llu\n", l,
                        (unsigned long long)g->head_only);
    evbuffer_add_printf(b, "glovebox_http_malformed_total{listener=\"%s\"} %llu\n", l,
                        (unsigned long long)g->malformed);
    static const char *const phase[3] = {"header", "body", "idle"};
    for (int i = 0; i < 3; i++)
        evbuffer_add_printf(b, "glovebox_http_timeouts_total{listener=\"%s\",phase=\"%s\"} %llu\n",
                            l, phase[i], (unsigned long long)g->timeouts[i]);
}

void gbx_gates_metrics(struct evbuffer *b)
{
    for (const struct gbx_gate *g = gates; g; g = g->next_gate)
        gbx_gate_metrics(g, b);
}
