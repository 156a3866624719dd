/* SPDX-License-Identifier: MIT */
/* Ingress (ingress.h): claiming a connection by its Host, the credential, the socket inside
 * the sandbox, and the byte pump. */
#include "ingress/ingress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "core/server_int.h"
#include "egress/netns.h"
#include "http/gate.h"
#include "ingress/cdp_json.h"
#include "ingress/route.h"
#include "sandbox/ns.h"
#include "store/store.h"

/* The pipe of each direction: at most this much is held for a connection (each way). */
#define GBX_INGRESS_PIPE (1u << 20)

struct ticket {
    struct gbx_ingress_route r; /* where to (or why it is malformed: answered 400) */
    int upgrade;                /* the first request asks for an Upgrade (a WebSocket) */
    char key[257];              /* an API key, or "" */
    char token[129];            /* a traffic token, or "" */
    char host[256];             /* the Host header as sent, or "" */
    int json;                   /* a GET of /json... (the browser's DevTools port) */
};

/* One direction of a proxied connection: bytes move from -> pipe -> to with splice(2),
 * never through the daemon's memory; the pipe (at most its size) is all that is held. */
struct dir {
    int from, to;
    int pipe[2];
    size_t inpipe;     /* bytes in the pipe, not yet written to to */
    struct event *rev; /* from is readable */
    struct event *wev; /* to is writable again */
    int eof;           /* from ended: to is shut down for writing once the pipe is empty */
    int done;
    uint64_t bytes;
};

struct conn {
    struct conn *prev, *next;
    struct gbx_ingress *ig;
    int cfd, ufd;             /* the client's socket, the one inside the sandbox */
    struct event *connect_ev; /* ufd's connect finished */
    struct evbuffer *head;    /* what the client sent before the takeover, for ufd first */
    struct dir c2u, u2c;
    char sandbox[64], owner[GBX_ACTOR_MAX], ip[INET6_ADDRSTRLEN];
    unsigned port;
    size_t prefix_len; /* the path form: the first head's target is rewritten (route.h) */
    int upgrade;
    /* the sandbox's browser's DevTools port (cdp_json.h): Host is rewritten, and a /json
     * request is answered re-addressed: its response read whole into resp, sent from out */
    int cdp, json, rewritten;
    char ext[256], prefix[160];
    struct evbuffer *resp, *out;
    struct event *out_ev;
    int64_t start_ns;
    int connected; /* upstream answered */
};

struct gbx_ingress {
    struct gbx_server *s;
    char *domain; /* host part, lowercase; NULL: off */
    struct conn *conns;
    unsigned nconns;
    unsigned max_per_ip; /* 0: no cap */
    uint64_t proxied, refused, unreachable, bytes_in, bytes_out;
};

void gbx_ingress_set_domain(struct gbx_ingress *ig, const char *domain)
{
    free(ig->domain);
    ig->domain = NULL;
    if (domain == NULL || domain[0] == '\0')
        return;
    ig->domain = gbx_xstrdup(domain);
    char *colon = strchr(ig->domain, ':');
    if (colon)
        *colon = '\0';
    for (char *p = ig->domain; *p; p++)
        *p = (char)tolower((unsigned char)*p);
}

void gbx_ingress_set_max_per_ip(struct gbx_ingress *ig, unsigned n)
{
    ig->max_per_ip = n;
}

/* Open connections from ip, c not counted. */
static unsigned conns_from(const struct gbx_ingress *ig, const struct conn *c)
{
    unsigned n = 0;
    for (const struct conn *o = ig->conns; o; o = o->next)
        n += o != c && strcmp(o->ip, c->ip) == 0;
    return n;
}

struct gbx_ingress *gbx_ingress_new(struct gbx_server *s, const char *domain)
{
    struct gbx_ingress *ig = gbx_xcalloc(1, sizeof(*ig));
    ig->s = s;
    gbx_ingress_set_domain(ig, domain);
    return ig;
}

static void dir_release(struct dir *d)
{
    if (d->rev)
        event_free(d->rev);
    if (d->wev)
        event_free(d->wev);
    for (int i = 0; i < 2; i++)
        if (d->pipe[i] >= 0)
            close(d->pipe[i]);
}

static void conn_free(struct conn *c)
{
    struct gbx_ingress *ig = c->ig;
    if (c->prev)
        c->prev->next = c->next;
    else
        ig->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    ig->nconns--;
    uint64_t in = c->c2u.bytes, out = c->u2c.bytes;
    if (c->connected) {
        int64_t ms = (gbx_monotonic_ns() - c->start_ns) / 1000000;
        ig->bytes_in += in;
        ig->bytes_out += out;
        gbx_server_audit_as(
            ig->s, c->owner[0] ? c->owner : "admin", "ingress.connection", c->sandbox,
            json_pack("{s:i,s:s,s:I,s:I,s:I}", "port", (int)c->port, "client", c->ip, "bytes_in",
                      (json_int_t)in, "bytes_out", (json_int_t)out, "ms", (json_int_t)ms));
    }
    dir_release(&c->c2u);
    dir_release(&c->u2c);
    if (c->connect_ev)
        event_free(c->connect_ev);
    if (c->head)
        evbuffer_free(c->head);
    if (c->resp)
        evbuffer_free(c->resp);
    if (c->out)
        evbuffer_free(c->out);
    if (c->out_ev)
        event_free(c->out_ev);
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    free(c);
}

void gbx_ingress_free(struct gbx_ingress *ig)
{
    if (ig == NULL)
        return;
    for (struct conn *c = ig->conns, *next; c; c = next) {
        next = c->next;
        conn_free(c);
    }
    free(ig->domain);
    free(ig);
}

/* ---- claiming ------------------------------------------------------------------------------ */

static int claim(void *arg, const struct gbx_http_req_info *req, void **out)
{
    struct gbx_ingress *ig = arg;
    struct ticket t = {0};
    /* the path form always; the host form under the ingress domain */
    if (!gbx_ingress_route_path(req->path, &t.r) &&
        (ig->domain == NULL || req->host == NULL ||
         !gbx_ingress_route_host(ig->domain, req->host, &t.r)))
        return 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *n = req->headers[i].name, *v = req->headers[i].value;
        if (strcasecmp(n, "X-API-Key") == 0)
            snprintf(t.key, sizeof(t.key), "%s", v);
        else if (strcasecmp(n, "Authorization") == 0 && strncasecmp(v, "Bearer ", 7) == 0)
            snprintf(t.key, sizeof(t.key), "%s", v + 7);
        else if (strcasecmp(n, "E2B-Traffic-Access-Token") == 0)
            snprintf(t.token, sizeof(t.token), "%s", v);
        else if (strcasecmp(n, "Upgrade") == 0)
            t.upgrade = 1;
        else if (strcasecmp(n, "Host") == 0)
            snprintf(t.host, sizeof(t.host), "%s", v);
    }
    /* (what is after the path form's prefix) */
    const char *rest = t.r.error ? "" : req->path + t.r.prefix_len;
    t.json = strncmp(rest, "/json", 5) == 0 && (rest[5] == '\0' || strchr("/?", rest[5]));
    struct ticket *copy = gbx_xcalloc(1, sizeof(*copy));
    *copy = t;
    *out = copy;
    return 1;
}

static void drop(void *arg, void *ticket)
{
    (void)arg;
    free(ticket);
}

/* ---- answering ----------------------------------------------------------------------------- */

/* Answer the client with an error (a short reply straight to its socket: what does not fit
 * is dropped) and close the connection. */
static void reply_error(struct conn *c, int status, const char *reason, const char *kind,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void reply_error(struct conn *c, int status, const char *reason, const char *kind,
                        const char *fmt, ...)
{
    char msg[384], head[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "kind", kind, "message", msg);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    size_t n = text ? strlen(text) : 0;
    int hn = snprintf(head, sizeof(head),
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: "
                      "%zu\r\nConnection: close\r\n\r\n",
                      status, reason, n + 1);
    char nl[] = "\n", none[] = "";
    struct iovec iov[3] = {{head, (size_t)hn}, {text ? text : none, n}, {nl, 1}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 3};
    (void)!sendmsg(c->cfd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    free(text);
    /* the client may still be sending its request: say we are done, then let it go */
    shutdown(c->cfd, SHUT_WR);
    conn_free(c);
}

/* ---- the pump ------------------------------------------------------------------------------ */

static void pump(struct conn *c, struct dir *d);

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    pump(c, c->c2u.from == fd ? &c->c2u : &c->u2c);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    pump(c, c->c2u.to == fd ? &c->c2u : &c->u2c);
}

/* Move what can move now: from into the pipe (while it has room), the pipe into to. When to
 * cannot take more, from is not read until it can (backpressure). 0, or -1 once the
 * connection is gone. */
static void pump(struct conn *c, struct dir *d)
{
    for (;;) {
        if (d->inpipe > 0) {
            ssize_t m =
                splice(d->pipe[0], NULL, d->to, NULL, d->inpipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (m > 0) {
                d->inpipe -= (size_t)m;
                d->bytes += (uint64_t)m;
                continue;
            }
            if (m < 0 && errno == EINTR)
                continue;
            if (m < 0 && errno == EAGAIN) { /* to is full: wait for it, read no more */
                event_del(d->rev);
                event_add(d->wev, NULL);
                return;
            }
            goto gone; /* to is gone */
        }
        if (d->eof)
            break;
        ssize_t n = splice(d->from, NULL, d->pipe[1], NULL, GBX_INGRESS_PIPE,
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) {
            d->inpipe += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) { /* nothing more to read now */
            event_del(d->wev);
            event_add(d->rev, NULL);
            return;
        }
        if (n < 0 && errno != ECONNRESET)
            goto gone;
        d->eof = 1; /* (a reset ends this direction like an end of file) */
    }
    /* from ended and everything went out: half-close to, and the connection ends with both */
    event_del(d->rev);
    event_del(d->wev);
    if (!d->done) {
        d->done = 1;
        shutdown(d->to, SHUT_WR);
    }
    if (c->c2u.done && c->u2c.done)
        conn_free(c);
    return;
gone:
    conn_free(c);
}

static int dir_init(struct conn *c, struct dir *d, int from, int to)
{
    struct event_base *base = c->ig->s->base;
    d->from = from;
    d->to = to;
    if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        d->pipe[0] = d->pipe[1] = -1;
        return -errno;
    }
    (void)fcntl(d->pipe[1], F_SETPIPE_SZ, GBX_INGRESS_PIPE); /* else 64 KiB */
    d->rev = event_new(base, from, EV_READ | EV_PERSIST, on_readable, c);
    d->wev = event_new(base, to, EV_WRITE | EV_PERSIST, on_writable, c);
    GBX_BUG_ON(d->rev == NULL || d->wev == NULL);
    return 0;
}

/* The path form: the first head's target without its /v1/sandboxes/ID/ports/PORT prefix,
 * and "Connection: close" (route.h); a DevTools port's Host. 0, or -1 for a head that is not
 * one. */
static int rewrite_head(struct conn *c)
{
    struct evbuffer_ptr end = evbuffer_search(c->head, "\r\n\r\n", 4, NULL);
    if (end.pos < 0)
        return -1;
    size_t hl = (size_t)end.pos + 4;
    const char *head = (const char *)evbuffer_pullup(c->head, (ev_ssize_t)hl);
    char *nh = NULL;
    size_t nl = 0;
    char host[32];
    snprintf(host, sizeof(host), "127.0.0.1:%u", c->port);
    if (head == NULL || gbx_ingress_rewrite_head(head, hl, c->prefix_len, c->upgrade,
                                                 c->cdp ? host : NULL, &nh, &nl) < 0)
        return -1;
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, nh, nl);
    free(nh);
    evbuffer_drain(c->head, hl);
    evbuffer_add_buffer(b, c->head);
    evbuffer_free(c->head);
    c->head = b;
    c->rewritten = 1;
    return 0;
}

/* ---- a DevTools server's /json answers, re-addressed ---------------------------------------- */

#define JSON_TIMEOUT_S 10

static void json_write(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    while (evbuffer_get_length(c->out) > 0) {
        int n = evbuffer_write(c->out, c->cfd);
        if (n > 0) {
            c->u2c.bytes += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN && !(what & EV_TIMEOUT)) {
            struct timeval tv = {JSON_TIMEOUT_S, 0};
            event_add(c->out_ev, &tv);
            return;
        }
        return conn_free(c); /* gone, or too slow */
    }
    shutdown(c->cfd, SHUT_WR);
    conn_free(c);
}

static void json_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    if (what & EV_TIMEOUT)
        return reply_error(c, 504, "Gateway Timeout", "unavailable",
                           "the browser in sandbox '%s' did not answer in time", c->sandbox);
    int eof = 0;
    for (;;) {
        int n = evbuffer_read(c->resp, c->ufd, 65536);
        if (n < 0 && errno == EINTR)
            continue;
        if (evbuffer_get_length(c->resp) > GBX_INGRESS_CDP_MAX)
            return reply_error(c, 502, "Bad Gateway", "unavailable",
                               "the browser's answer is larger than %u bytes", GBX_INGRESS_CDP_MAX);
        if (n > 0)
            continue;
        eof = !(n < 0 && errno == EAGAIN); /* the end, or an error: what came is all there is */
        break;
    }
    /* complete once its Content-Length is in (Chromium keeps the connection open) */
    size_t len = evbuffer_get_length(c->resp), outlen = 0;
    const char *r = (const char *)evbuffer_pullup(c->resp, -1);
    char *o = NULL;
    int rc = r ? gbx_ingress_cdp_answer(r, len, eof, c->port, c->ext, c->prefix, &o, &outlen) : -1;
    if (rc == 1 && !eof)
        return; /* more later */
    event_del(c->connect_ev);
    if (rc != 0)
        return reply_error(c, 502, "Bad Gateway", "unavailable",
                           "the server on port %u in sandbox '%s' sent no complete answer", c->port,
                           c->sandbox);
    c->out = evbuffer_new();
    evbuffer_add(c->out, o, outlen);
    free(o);
    c->out_ev = event_new(c->ig->s->base, c->cfd, EV_WRITE, json_write, c);
    GBX_BUG_ON(c->out_ev == NULL);
    json_write(c->cfd, EV_WRITE, c);
}

/* The request is out (with Connection: close): read the answer whole. */
static void json_start(struct conn *c)
{
    c->resp = evbuffer_new();
    event_assign(c->connect_ev, c->ig->s->base, c->ufd, EV_READ | EV_PERSIST, json_read, c);
    struct timeval tv = {JSON_TIMEOUT_S, 0};
    event_add(c->connect_ev, &tv);
}

/* ufd connected (or not): the client's first bytes go first, then both directions pump. */
static void on_connected(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    int e = 0;
    socklen_t el = sizeof(e);
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
        e = errno;
    if (e != 0) {
        c->ig->unreachable++;
        return reply_error(c, 502, "Bad Gateway", "unavailable",
                           "nobody listens on port %u in sandbox '%s' (%s)", c->port, c->sandbox,
                           strerror(e));
    }
    if ((c->prefix_len || c->cdp) && !c->rewritten && rewrite_head(c) < 0) {
        c->ig->refused++;
        return reply_error(c, 400, "Bad Request", "invalid", "ingress: a malformed request head");
    }
    /* the head: small (the gate bounds it at 16 KiB), written before anything is spliced */
    while (evbuffer_get_length(c->head) > 0) {
        int n = evbuffer_write(c->head, c->ufd);
        if (n > 0) {
            c->c2u.bytes += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            event_assign(c->connect_ev, c->ig->s->base, c->ufd, EV_WRITE, on_connected, c);
            event_add(c->connect_ev, NULL);
            return;
        }
        c->ig->unreachable++;
        return reply_error(c, 502, "Bad Gateway", "unavailable",
                           "the server on port %u in sandbox '%s' went away", c->port, c->sandbox);
    }
    if (!c->connected) {
        c->connected = 1;
        c->ig->proxied++;
    }
    if (c->json)
        return json_start(c);
    if (dir_init(c, &c->c2u, c->cfd, c->ufd) < 0 || dir_init(c, &c->u2c, c->ufd, c->cfd) < 0)
        return reply_error(c, 503, "Service Unavailable", "unavailable",
                           "out of pipes for ingress connections");
    event_add(c->c2u.rev, NULL);
    event_add(c->u2c.rev, NULL);
}

/* The owner of the key, into name: 1, or 0 for a key that is not valid. */
static int key_owner(struct gbx_ingress *ig, const char *key, char *name, size_t namesz)
{
    return key[0] && gbx_store_apikey_check(ig->s->store, key, name, namesz) == 1;
}

static void take(void *arg, void *ticket, int fd, struct evbuffer *pending)
{
    struct gbx_ingress *ig = arg;
    struct ticket *t = ticket;
    struct conn *c = gbx_xcalloc(1, sizeof(*c));
    c->ig = ig;
    c->cfd = fd;
    c->ufd = -1;
    c->c2u.pipe[0] = c->c2u.pipe[1] = c->u2c.pipe[0] = c->u2c.pipe[1] = -1;
    c->head = pending;
    c->start_ns = gbx_monotonic_ns();
    c->port = t->r.port;
    c->prefix_len = t->r.prefix_len;
    c->upgrade = t->upgrade;
    snprintf(c->sandbox, sizeof(c->sandbox), "%s", t->r.id);
    c->next = ig->conns;
    if (ig->conns)
        ig->conns->prev = c;
    ig->conns = c;
    ig->nconns++;
    (void)evutil_make_socket_nonblocking(fd);
    struct sockaddr_storage ss = {0};
    socklen_t sl = sizeof(ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, c->ip, sizeof(c->ip));
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, c->ip, sizeof(c->ip));
    struct ticket tk = *t;
    free(t);
    if (tk.r.error) {
        ig->refused++;
        return reply_error(c, 400, "Bad Request", "invalid", "ingress: %s", tk.r.error);
    }
    if (ig->nconns > GBX_INGRESS_MAX_CONNS) {
        ig->refused++;
        return reply_error(c, 503, "Service Unavailable", "unavailable",
                           "too many open ingress connections (%d); try again later",
                           GBX_INGRESS_MAX_CONNS);
    }
    if (ig->max_per_ip && conns_from(ig, c) >= ig->max_per_ip) {
        ig->refused++;
        return reply_error(c, 503, "Service Unavailable", "unavailable",
                           "too many open ingress connections from this address (%u, gloveboxd "
                           "--max-conns-per-ip); try again later",
                           ig->max_per_ip);
    }
    struct gbx_live *l = gbx_sandboxes_find(ig->s, &gbx_actor_system, tk.r.id);
    int ok = l && l->public_traffic; /* created public: any request */
    if (!ok && tk.key[0] == '\0' && tk.token[0] == '\0') {
        ig->refused++;
        return reply_error(c, 401, "Unauthorized", "permission",
                           "a credential is needed: the sandbox owner's API key (Authorization: "
                           "Bearer KEY) or its traffic token (E2B-Traffic-Access-Token)");
    }
    char name[GBX_ACTOR_MAX] = "";
    int by_key = key_owner(ig, tk.key, name, sizeof(name));
    if (!ok && tk.key[0] && !by_key && tk.token[0] == '\0') {
        ig->refused++;
        return reply_error(c, 401, "Unauthorized", "permission",
                           "this API key is not valid (revoked?)");
    }
    if (l && !ok && by_key)
        ok = strcmp(l->owner, name) == 0;
    /* the traffic token E2B's create answers with (trafficAccessToken) */
    if (l && !ok && tk.token[0])
        ok = gbx_sandboxes_token_is(l, tk.token);
    if (!ok) { /* the same answer whether it exists or not */
        ig->refused++;
        return reply_error(c, 404, "Not Found", "not_found",
                           "no sandbox '%s' reachable with this credential", tk.r.id);
    }
    snprintf(c->owner, sizeof(c->owner), "%s", l->owner);
    if (l->browser_port && tk.r.port == l->browser_port) {
        c->cdp = 1;
        c->json = tk.json && !tk.upgrade;
        snprintf(c->ext, sizeof(c->ext), "%s", tk.host[0] ? tk.host : "localhost");
        if (tk.r.prefix_len)
            snprintf(c->prefix, sizeof(c->prefix), "/v1/sandboxes/%s/ports/%u", tk.r.id, tk.r.port);
    }
    if ((l->paused || l->hibernated) && gbx_sandboxes_wake(ig->s, l, "ingress") < 0) {
        ig->refused++;
        return reply_error(c, 409, "Conflict", "conflict",
                           "sandbox '%s' is %s: resume it first (glovebox resume, or E2B connect)",
                           tk.r.id, l->hibernated ? "hibernated" : "paused");
    }
    if (tk.r.port == GBX_EGRESS_PROXY_PORT || tk.r.port == GBX_EGRESS_DNS_PORT) {
        ig->refused++;
        return reply_error(c, 403, "Forbidden", "permission",
                           "port %u in a sandbox is the daemon's own (its egress gateway)",
                           tk.r.port);
    }
    c->ufd =
        gbx_ns_socket_in(l->sb->init_pid, AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->ufd < 0) {
        int e = -c->ufd;
        c->ufd = -1;
        ig->unreachable++;
        return reply_error(c, 502, "Bad Gateway", "unavailable", "cannot reach sandbox '%s': %s",
                           tk.r.id, strerror(e));
    }
    int one = 1;
    (void)setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(c->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(c->cfd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tk.r.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->connect_ev = event_new(ig->s->base, c->ufd, EV_WRITE, on_connected, c);
    GBX_BUG_ON(c->connect_ev == NULL);
    if (connect(c->ufd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        ig->unreachable++;
        return reply_error(c, 502, "Bad Gateway", "unavailable",
                           "nobody listens on port %u in sandbox '%s' (%s)", tk.r.port, tk.r.id,
                           strerror(errno));
    }
    event_add(c->connect_ev, NULL);
}

const struct gbx_gate_takeover gbx_ingress_takeover = {.claim = claim, .take = take, .drop = drop};

void gbx_ingress_metrics(const struct gbx_ingress *ig, struct evbuffer *b)
{
    if (ig == NULL)
        return;
    /* what the daemon holds now on behalf of open connections: bounded by the high-water
     * marks, however slow a side is */
    size_t held = 0;
    for (const struct conn *c = ig->conns; c; c = c->next)
        held += c->c2u.inpipe + c->u2c.inpipe + (c->head ? evbuffer_get_length(c->head) : 0);
    evbuffer_add_printf(b,
                        "# HELP glovebox_ingress_buffered_bytes Bytes the daemon holds for open "
                        "ingress connections.\n"
                        "# TYPE glovebox_ingress_buffered_bytes gauge\n"
                        "glovebox_ingress_buffered_bytes %zu\n",
                        held);
    evbuffer_add_printf(
        b,
        "# HELP glovebox_ingress_connections_total Ingress connections by result: proxied to a "
        "port inside a sandbox, refused (credential, host, state), unreachable (nobody "
        "listens).\n"
        "# TYPE glovebox_ingress_connections_total counter\n"
        "glovebox_ingress_connections_total{result=\"proxied\"} %llu\n"
        "glovebox_ingress_connections_total{result=\"refused\"} %llu\n"
        "glovebox_ingress_connections_total{result=\"unreachable\"} %llu\n"
        "# HELP glovebox_ingress_open Open ingress connections.\n"
        "# TYPE glovebox_ingress_open gauge\n"
        "glovebox_ingress_open %u\n"
        "# HELP glovebox_ingress_bytes_total Bytes of closed ingress connections, by direction.\n"
        "# TYPE glovebox_ingress_bytes_total counter\n"
        "glovebox_ingress_bytes_total{direction=\"in\"} %llu\n"
        "glovebox_ingress_bytes_total{direction=\"out\"} %llu\n",
        (unsigned long long)ig->proxied, (unsigned long long)ig->refused,
        (unsigned long long)ig->unreachable, ig->nconns, (unsigned long long)ig->bytes_in,
        (unsigned long long)ig->bytes_out);
}
