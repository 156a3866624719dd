/* SPDX-License-Identifier: MIT */
/* The TCP proxy of one sandbox. Every outbound TCP connection inside the sandbox is
 * redirected to the daemon's listener there; for each accepted connection:
 *
 *   SO_ORIGINAL_DST -> the address the sandbox dialled -> the DNS name behind it (dns.c)
 *   policy on (name, port) -> deny (RST, audited) or go on
 *   ports 80 and 443, and any connection to be intercepted: peek (never consume) the first
 *     bytes: TLS ClientHello -> SNI, HTTP -> Host; a mismatch with the name is denied, and so
 *     is a connection to a name that says none (a ClientHello without SNI, a request without
 *     Host); plain HTTP to a name is relayed, not spliced, so that every request on the
 *     connection (a pipelined or keep-alive one too) has its Host checked
 *   resolve the name on the host; refuse loopback, private, link-local, metadata and the
 *     host's own addresses unless a rule names the address (DNS rebinding)
 *   connect, then either
 *     splice: bytes move kernel-side through a pipe per direction (splice(2)), half-close
 *       passed on, or
 *     relay (a credential to inject or request rules for this host): TLS terminated with a
 *       certificate from the daemon's CA, every request head checked and rewritten
 *       (sniff.c's relay), forwarded over TLS verified against the host's trust store
 *
 * and one audit row when it ends: name, address, port, decision, rule, bytes each way,
 * duration, and the secret's name when one was injected. The decision is one of verdict.h's:
 * allow; deny (the policy, SNI/Host enforcement, the block, a limit); upstream_failed (the
 * policy allowed, then resolving or connecting failed: a plain HTTP client is answered 502,
 * or 504 for a timeout, naming the reason); client_error (nothing sent, or what was sent does
 * not parse). Every connection that is not let through is otherwise reset: TLS and opaque TCP
 * have no way to carry a reason. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "egress/egress_int.h"
#include "egress/sniff.h"

#define PEEK_MAX 16384
#define PIPE_CHUNK (1u << 20) /* per splice call; the pipes are grown to match */
#define RELAY_HIGH (1u << 20)
#define SNIFF_TIMEOUT_S 10

enum conn_state { C_SNIFF, C_RESOLVE, C_CONNECT, C_SPLICE, C_RELAY, C_CLOSED };

struct gbx_egress_conn {
    struct gbx_egress_conn *prev, *next; /* the sandbox's live connections */
    struct gbx_egress_conn *reap_next;
    struct gbx_egress_sb *sb; /* NULL once the sandbox is gone */
    struct gbx_egress *eg;
    enum conn_state state;
    int down, up; /* sockets, until bufferevents own them */
    struct sockaddr_in dst;
    char name[256]; /* the DNS name, "" for a literal address */
    char seen[256]; /* SNI or Host the client sent */
    uint16_t port;
    struct in_addr up_addr;
    int rule, l7, intercept, allowed, orphan;
    enum gbx_egress_verdict verdict; /* how it ended, when not allowed */
    int answered;                    /* a plain HTTP answer was sent: close, do not reset */
    const char *refusal;             /* why the last request was refused (static) */
    const char *mode;                /* "splice", "tls", "http" */
    char secret[72];                 /* the last secret injected (its name) */
    char reason[160];                /* why it was denied or ended */
    struct event *ev_dr, *ev_dw, *ev_ur, *ev_uw, *timer;
    int p_du[2], p_ud[2]; /* splice pipes: down->up, up->down */
    size_t pend_du, pend_ud;
    int eof_du, eof_ud, shut_du, shut_ud;
    struct evdns_getaddrinfo_request *gai;
    struct bufferevent *bdown, *bup;
    struct gbx_http_relay *relay;
    int closing; /* relay: flushing what is left, then close */
    uint64_t bytes_up, bytes_down, requests;
    int64_t start_ns, last_ns;
};

static void conn_close(struct gbx_egress_conn *c, const char *reason);

/* ---- lifetime ------------------------------------------------------------------------------ */

static void conn_free(struct gbx_egress_conn *c)
{
    if (c->gai) { /* the resolver calls back once more (cancelled): free then */
        c->orphan = 1;
        return;
    }
    struct event **evs[] = {&c->ev_dr, &c->ev_dw, &c->ev_ur, &c->ev_uw, &c->timer};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(evs); i++)
        if (*evs[i])
            event_free(*evs[i]);
    if (c->bdown)
        bufferevent_free(c->bdown);
    if (c->bup)
        bufferevent_free(c->bup);
    int *fds[] = {&c->down, &c->up, &c->p_du[0], &c->p_du[1], &c->p_ud[0], &c->p_ud[1]};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(fds); i++)
        if (*fds[i] >= 0)
            close(*fds[i]);
    gbx_http_relay_free(c->relay);
    free(c);
}

void gbx_egress_proxy_reap(struct gbx_egress *eg)
{
    while (eg->reap) {
        struct gbx_egress_conn *c = eg->reap;
        eg->reap = c->reap_next;
        conn_free(c);
    }
}

static void audit_conn(struct gbx_egress_conn *c)
{
    struct gbx_egress_sb *sb = c->sb;
    char addr[INET_ADDRSTRLEN] = "";
    struct in_addr a = c->up_addr.s_addr ? c->up_addr : c->dst.sin_addr;
    inet_ntop(AF_INET, &a, addr, sizeof(addr));
    json_t *d =
        json_pack("{s:s,s:s,s:i,s:s}", "name", c->name, "addr", addr, "port", (int)c->port,
                  "decision", gbx_egress_verdict_name(c->allowed ? GBX_EGRESS_ALLOW : c->verdict));
    if (c->rule >= 0)
        json_object_set_new(d, "rule", json_integer(c->rule));
    if (c->reason[0])
        json_object_set_new(d, "reason", json_string(c->reason));
    if (c->allowed) {
        json_object_set_new(d, "mode", json_string(c->mode ? c->mode : "none"));
        json_object_set_new(d, "bytes_up", json_integer((json_int_t)c->bytes_up));
        json_object_set_new(d, "bytes_down", json_integer((json_int_t)c->bytes_down));
        json_object_set_new(d, "duration_ms",
                            json_integer((gbx_monotonic_ns() - c->start_ns) / 1000000));
    }
    if (c->seen[0])
        json_object_set_new(d, "sni_or_host", json_string(c->seen));
    if (c->requests)
        json_object_set_new(d, "requests", json_integer((json_int_t)c->requests));
    if (c->secret[0])
        json_object_set_new(d, "secret", json_string(c->secret));
    gbx_egress_audit(sb, "egress.conn", d);
}

static void count_verdict(struct gbx_egress_counters *k, enum gbx_egress_verdict v)
{
    if (v == GBX_EGRESS_UPSTREAM_FAILED)
        k->conn_upstream_failed++;
    else if (v == GBX_EGRESS_CLIENT_ERROR)
        k->conn_client_error++;
    else
        k->conn_deny++;
}

/* End a connection: audited, unlinked, every event stopped now; freed after dispatch. */
static void conn_close(struct gbx_egress_conn *c, const char *reason)
{
    if (c->state == C_CLOSED)
        return;
    struct gbx_egress_sb *sb = c->sb;
    struct gbx_egress *eg = c->eg;
    if (reason && !c->reason[0])
        snprintf(c->reason, sizeof(c->reason), "%s", reason);
    if (!c->allowed) {
        count_verdict(&eg->c, c->verdict);
        count_verdict(&sb->c, c->verdict);
        /* not let through: reset, so the client fails at once instead of seeing a clean EOF
         * (unless it was answered in HTTP: then the answer ends it) */
        struct linger lg = {1, 0};
        if (c->down >= 0 && !c->answered)
            (void)setsockopt(c->down, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    audit_conn(c);
    c->state = C_CLOSED;
    struct event *evs[] = {c->ev_dr, c->ev_dw, c->ev_ur, c->ev_uw, c->timer};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(evs); i++)
        if (evs[i])
            event_del(evs[i]);
    if (c->bdown) {
        bufferevent_disable(c->bdown, EV_READ | EV_WRITE);
        bufferevent_setcb(c->bdown, NULL, NULL, NULL, NULL);
    }
    if (c->bup) {
        bufferevent_disable(c->bup, EV_READ | EV_WRITE);
        bufferevent_setcb(c->bup, NULL, NULL, NULL, NULL);
    }
    if (c->gai)
        evdns_getaddrinfo_cancel(c->gai);
    if (c->prev)
        c->prev->next = c->next;
    else
        sb->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sb->nconns--;
    eg->open_conns--;
    c->sb = NULL;
    c->reap_next = eg->reap;
    eg->reap = c;
    event_active(eg->reap_ev, 0, 0);
}

/* A plain HTTP client whose request head was peeked (and nothing relayed yet) is told why in
 * HTTP: the request is read away (closing with unread bytes would reset the connection and
 * could lose the answer), the answer sent, the sending side shut. 0 when it cannot be. */
static int answer_http(struct gbx_egress_conn *c, int status)
{
    if (c->mode == NULL || strcmp(c->mode, "http") != 0 || c->down < 0 || c->bdown)
        return 0;
    char buf[GBX_EGRESS_VERDICT_HTTP_MAX];
    size_t len = gbx_egress_verdict_http(status, c->reason, buf, sizeof(buf));
    if (len == 0)
        return 0;
    char sink[4096];
    for (int i = 0; i < 64 && recv(c->down, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
        ;
    if (send(c->down, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
        return 0;
    (void)shutdown(c->down, SHUT_WR);
    return 1;
}

/* End a connection that is not let through: v says why (verdict.h); status: the HTTP answer
 * a plain HTTP client gets (0: a reset, as every other protocol gets). */
static void end_conn(struct gbx_egress_conn *c, enum gbx_egress_verdict v, int status,
                     const char *fmt, va_list ap) GBX_PRINTF(4, 0);
static void end_conn(struct gbx_egress_conn *c, enum gbx_egress_verdict v, int status,
                     const char *fmt, va_list ap)
{
    vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
    c->allowed = 0;
    c->verdict = v;
    c->answered = status && answer_http(c, status);
    conn_close(c, NULL);
}

/* The policy (or its enforcement, the block, a limit) refuses. */
static void deny(struct gbx_egress_conn *c, const char *fmt, ...) GBX_PRINTF(2, 3);
static void deny(struct gbx_egress_conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    end_conn(c, GBX_EGRESS_DENY, 0, fmt, ap);
    va_end(ap);
}

/* The policy allowed; the name did not resolve or the upstream could not be reached. */
static void upstream_failed(struct gbx_egress_conn *c, int timed_out, const char *fmt, ...)
    GBX_PRINTF(3, 4);
static void upstream_failed(struct gbx_egress_conn *c, int timed_out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    end_conn(c, GBX_EGRESS_UPSTREAM_FAILED, timed_out ? 504 : 502, fmt, ap);
    va_end(ap);
}

/* The client gave nothing to decide on, or nothing that parses. */
static void client_error(struct gbx_egress_conn *c, const char *fmt, ...) GBX_PRINTF(2, 3);
static void client_error(struct gbx_egress_conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    end_conn(c, GBX_EGRESS_CLIENT_ERROR, 0, fmt, ap);
    va_end(ap);
}

static void touch(struct gbx_egress_conn *c)
{
    c->last_ns = gbx_monotonic_ns();
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_egress_conn *c = arg;
    if (c->state == C_SNIFF)
        return client_error(c, "the client sent nothing to decide on within %d s", SNIFF_TIMEOUT_S);
    if (c->state == C_RESOLVE)
        return upstream_failed(c, 1, "resolving '%s' timed out", c->name);
    if (c->state == C_CONNECT)
        return upstream_failed(c, 1, "upstream connect timed out");
    int64_t idle = (int64_t)c->eg->idle_tv.tv_sec * 1000000000 + c->eg->idle_tv.tv_usec * 1000;
    int64_t left = c->last_ns + idle - gbx_monotonic_ns();
    if (left <= 0)
        return conn_close(c, "idle timeout");
    struct timeval tv = {left / 1000000000, (left % 1000000000) / 1000 + 1};
    event_add(c->timer, &tv);
}

/* ---- splice -------------------------------------------------------------------------------- */

/* Move what src offers into dst through the pipe; stop reading src while dst is full. */
static void pump(struct gbx_egress_conn *c, int up)
{
    int src = up ? c->down : c->up, dst = up ? c->up : c->down;
    int *pipe = up ? c->p_du : c->p_ud;
    size_t *pend = up ? &c->pend_du : &c->pend_ud;
    int *eof = up ? &c->eof_du : &c->eof_ud, *shut = up ? &c->shut_du : &c->shut_ud;
    struct event *rd = up ? c->ev_dr : c->ev_ur, *wr = up ? c->ev_uw : c->ev_dw;
    uint64_t *count = up ? &c->bytes_up : &c->bytes_down;
    uint64_t *total = up ? &c->eg->c.bytes_up : &c->eg->c.bytes_down;
    uint64_t *sbtotal = up ? &c->sb->c.bytes_up : &c->sb->c.bytes_down;
    touch(c);
    for (int rounds = 0; rounds < 16; rounds++) {
        while (*pend) {
            ssize_t n = splice(pipe[0], NULL, dst, NULL, *pend, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN) {
                event_del(rd);
                event_add(wr, NULL);
                return;
            }
            if (n <= 0)
                return conn_close(c, up ? "upstream write failed" : "sandbox write failed");
            *pend -= (size_t)n;
            *count += (uint64_t)n;
            *total += (uint64_t)n;
            *sbtotal += (uint64_t)n;
        }
        event_del(wr);
        if (*eof) {
            if (!*shut) {
                (void)shutdown(dst, SHUT_WR);
                *shut = 1;
                event_del(rd);
            }
            if (c->shut_du && c->shut_ud)
                conn_close(c, NULL);
            return;
        }
        ssize_t n = splice(src, NULL, pipe[1], NULL, PIPE_CHUNK, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            event_add(rd, NULL);
            return;
        }
        if (n < 0)
            return conn_close(c, up ? "sandbox side reset" : "upstream reset");
        if (n == 0)
            *eof = 1;
        *pend += (size_t)n;
    }
    /* a turn's share done, more may be ready: wait for whichever side can move it on (never
     * leave both events off: nothing would wake this direction again) */
    if (*pend) {
        event_del(rd);
        event_add(wr, NULL);
    } else {
        event_add(rd, NULL);
    }
}

static void on_down_r(evutil_socket_t fd, short what, void *arg)
{
    pump(arg, 1);
}

static void on_up_w(evutil_socket_t fd, short what, void *arg)
{
    pump(arg, 1);
}

static void on_up_r(evutil_socket_t fd, short what, void *arg)
{
    pump(arg, 0);
}

static void on_down_w(evutil_socket_t fd, short what, void *arg)
{
    pump(arg, 0);
}

static void start_splice(struct gbx_egress_conn *c)
{
    struct event_base *b = c->eg->base;
    if (pipe2(c->p_du, O_NONBLOCK | O_CLOEXEC) < 0 || pipe2(c->p_ud, O_NONBLOCK | O_CLOEXEC) < 0)
        return conn_close(c, "out of pipes");
    /* 1 MiB pipes: fewer system calls per byte on bulk transfers (the default is 64 KiB; a
     * refusal, e.g. past /proc/sys/fs/pipe-max-size, leaves the default) */
    (void)fcntl(c->p_du[1], F_SETPIPE_SZ, PIPE_CHUNK);
    (void)fcntl(c->p_ud[1], F_SETPIPE_SZ, PIPE_CHUNK);
    c->mode = "splice";
    c->state = C_SPLICE;
    if (c->ev_dr)
        event_free(c->ev_dr);
    c->ev_dr = event_new(b, c->down, EV_READ | EV_PERSIST, on_down_r, c);
    c->ev_dw = event_new(b, c->down, EV_WRITE | EV_PERSIST, on_down_w, c);
    c->ev_ur = event_new(b, c->up, EV_READ | EV_PERSIST, on_up_r, c);
    c->ev_uw = event_new(b, c->up, EV_WRITE | EV_PERSIST, on_up_w, c);
    event_add(c->ev_dr, NULL);
    event_add(c->ev_ur, NULL);
    touch(c);
    event_add(c->timer, &c->eg->idle_tv);
}

/* ---- relay (interception) ------------------------------------------------------------------ */

static void relay_finish_if_flushed(struct gbx_egress_conn *c)
{
    if (c->closing && evbuffer_get_length(bufferevent_get_output(c->bdown)) == 0 &&
        evbuffer_get_length(bufferevent_get_output(c->bup)) == 0)
        conn_close(c, NULL);
}

static int on_head(void *arg, const struct gbx_http_req_info *req,
                   const struct gbx_http_header **hdrs, size_t *nhdrs)
{
    struct gbx_egress_conn *c = arg;
    struct gbx_egress_sb *sb = c->sb;
    struct gbx_egress *eg = c->eg;
    static struct gbx_http_header inject;
    c->requests++;
    struct gbx_egress_decision d = {1, c->rule, 0};
    const char *reason = NULL;
    if (eg->blocked) {
        d.allow = 0;
        reason = "egress is blocked";
    } else if (strcmp(req->method, "CONNECT") == 0) {
        d.allow = 0;
        reason = "CONNECT through an intercepted connection";
    } else if (req->host == NULL || req->host[0] == '\0') {
        d.allow = 0;
        reason = "a request without a Host header";
    } else if (strcmp(req->host, c->name) != 0) {
        d.allow = 0;
        reason = "Host does not match the connection's name";
    } else if (c->l7) {
        gbx_egress_policy_check_request(sb->policy, c->name, c->port, req->method, req->path, &d);
        if (!d.allow)
            reason = "the request rules refuse this method or path";
    }
    const struct gbx_egress_secret *s = d.allow ? gbx_egress_secret_for(sb, c->name) : NULL;
    json_t *detail =
        json_pack("{s:s,s:i,s:s,s:s,s:s}", "name", c->name, "port", (int)c->port, "method",
                  req->method, "path", req->path, "decision", d.allow ? "allow" : "deny");
    if (d.rule >= 0)
        json_object_set_new(detail, "rule", json_integer(d.rule));
    if (reason)
        json_object_set_new(detail, "reason", json_string(reason));
    if (s)
        json_object_set_new(detail, "secret", json_string(s->name));
    gbx_egress_audit(sb, "egress.http", detail);
    if (!d.allow) {
        eg->c.http_deny++;
        sb->c.http_deny++;
        snprintf(c->reason, sizeof(c->reason), "request %s %.64s: %s", req->method, req->path,
                 reason);
        c->refusal = reason;
        return -1;
    }
    eg->c.http_allow++;
    sb->c.http_allow++;
    if (s) {
        inject.name = s->header_name;
        inject.value = s->header_value;
        *hdrs = &inject;
        *nhdrs = 1;
        snprintf(c->secret, sizeof(c->secret), "%s", s->name);
    }
    return 0;
}

static void refuse_request(struct gbx_egress_conn *c)
{
    char buf[GBX_EGRESS_VERDICT_HTTP_MAX];
    size_t len = gbx_egress_verdict_http(403, c->refusal, buf, sizeof(buf));
    evbuffer_add(bufferevent_get_output(c->bdown), buf, len);
    c->closing = 1;
    bufferevent_disable(c->bdown, EV_READ);
    bufferevent_disable(c->bup, EV_READ);
}

static void relay_down_read(struct bufferevent *bev, void *arg)
{
    struct gbx_egress_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer *out = bufferevent_get_output(c->bup);
    size_t before = evbuffer_get_length(out);
    touch(c);
    while (evbuffer_get_length(in) && !c->closing) {
        struct evbuffer_iovec v;
        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        int r = gbx_http_relay_feed(c->relay, v.iov_base, v.iov_len, out);
        evbuffer_drain(in, v.iov_len);
        if (r == GBX_HTTP_RELAY_DENIED) {
            refuse_request(c);
            break;
        }
        if (r < 0) {
            snprintf(c->reason, sizeof(c->reason), "malformed HTTP request");
            return conn_close(c, NULL);
        }
    }
    size_t added = evbuffer_get_length(out) - before;
    c->bytes_up += added;
    c->eg->c.bytes_up += added;
    c->sb->c.bytes_up += added;
    if (evbuffer_get_length(out) > RELAY_HIGH)
        bufferevent_disable(c->bdown, EV_READ);
}

/* After an Upgrade head the relay holds what the client sends next until the upstream's
 * status line says whether it switched protocols (101): only then may bytes pass unparsed. */
static int upgrade_answered(struct gbx_egress_conn *c, struct evbuffer *in)
{
    char line[12];
    if (evbuffer_copyout(in, line, sizeof(line)) < (ev_ssize_t)sizeof(line))
        return 0;
    int switched = memcmp(line, "HTTP/1.1 101", 12) == 0 || memcmp(line, "HTTP/1.0 101", 12) == 0;
    int r = gbx_http_relay_upgrade_done(c->relay, switched, bufferevent_get_output(c->bup));
    if (r == GBX_HTTP_RELAY_DENIED) {
        refuse_request(c);
        return -1;
    }
    if (r < 0) {
        snprintf(c->reason, sizeof(c->reason), "malformed HTTP request");
        conn_close(c, NULL);
        return -1;
    }
    return 1;
}

static void relay_up_read(struct bufferevent *bev, void *arg)
{
    struct gbx_egress_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer *out = bufferevent_get_output(c->bdown);
    if (!c->closing && gbx_http_relay_upgrade_pending(c->relay)) {
        int r = upgrade_answered(c, in);
        if (r <= 0)
            return; /* more of the status line to come, or the connection is gone */
    }
    size_t n = evbuffer_get_length(in);
    touch(c);
    if (c->closing) { /* a refused request: nothing more goes back */
        evbuffer_drain(in, n);
        return;
    }
    evbuffer_add_buffer(out, in);
    c->bytes_down += n;
    c->eg->c.bytes_down += n;
    c->sb->c.bytes_down += n;
    if (evbuffer_get_length(out) > RELAY_HIGH)
        bufferevent_disable(c->bup, EV_READ);
}

static void relay_down_written(struct bufferevent *bev, void *arg)
{
    struct gbx_egress_conn *c = arg;
    if (!c->closing)
        bufferevent_enable(c->bup, EV_READ);
    relay_finish_if_flushed(c);
}

static void relay_up_written(struct bufferevent *bev, void *arg)
{
    struct gbx_egress_conn *c = arg;
    if (!c->closing)
        bufferevent_enable(c->bdown, EV_READ);
    relay_finish_if_flushed(c);
}

static void ssl_reason(struct gbx_egress_conn *c, struct bufferevent *bev, const char *side)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long e = bufferevent_get_openssl_error(bev);
    if (vr != X509_V_OK)
        snprintf(c->reason, sizeof(c->reason), "%s certificate: %s", side,
                 X509_verify_cert_error_string(vr));
    else if (e)
        snprintf(c->reason, sizeof(c->reason), "%s TLS: %s", side, ERR_reason_error_string(e));
}

static void relay_event(struct gbx_egress_conn *c, struct bufferevent *bev, short what, int up)
{
    if (what & BEV_EVENT_CONNECTED)
        return;
    if ((what & BEV_EVENT_ERROR) && c->mode && strcmp(c->mode, "tls") == 0 && !c->reason[0])
        ssl_reason(c, bev, up ? "upstream" : "sandbox");
    /* one side ended: pass on what is buffered for the other, then close */
    c->closing = 1;
    bufferevent_disable(bev, EV_READ);
    struct bufferevent *other = up ? c->bdown : c->bup;
    if ((what & BEV_EVENT_ERROR) || evbuffer_get_length(bufferevent_get_output(other)) == 0)
        return conn_close(c, up ? "upstream closed" : "sandbox closed");
    if (up && evbuffer_get_length(bufferevent_get_input(bev)))
        relay_up_read(bev, c);
}

static void relay_down_event(struct bufferevent *bev, short what, void *arg)
{
    relay_event(arg, bev, what, 0);
}

static void relay_up_event(struct bufferevent *bev, short what, void *arg)
{
    relay_event(arg, bev, what, 1);
}

static void start_relay(struct gbx_egress_conn *c, int tls)
{
    struct gbx_egress *eg = c->eg;
    gbx_autoerr struct gbx_err *err = NULL;
    if (c->ev_dr) {
        event_free(c->ev_dr);
        c->ev_dr = NULL;
    }
    if (tls) {
        SSL_CTX *sctx = gbx_ca_server_ctx(eg->ca, c->name, &err);
        if (sctx == NULL)
            return conn_close(c, "cannot mint a certificate");
        SSL *ds = SSL_new(sctx);
        SSL_CTX_free(sctx);
        SSL *us = SSL_new(eg->client_ctx);
        if (ds == NULL || us == NULL || gbx_ca_client_prepare(us, c->name, &err) < 0) {
            SSL_free(ds);
            SSL_free(us);
            return conn_close(c, "cannot start TLS");
        }
        c->bdown = bufferevent_openssl_socket_new(eg->base, c->down, ds, BUFFEREVENT_SSL_ACCEPTING,
                                                  BEV_OPT_CLOSE_ON_FREE);
        c->down = -1;
        c->bup = bufferevent_openssl_socket_new(eg->base, c->up, us, BUFFEREVENT_SSL_CONNECTING,
                                                BEV_OPT_CLOSE_ON_FREE);
        c->up = -1;
        if (c->bdown)
            bufferevent_openssl_set_allow_dirty_shutdown(c->bdown, 1);
        if (c->bup)
            bufferevent_openssl_set_allow_dirty_shutdown(c->bup, 1);
        c->mode = "tls";
    } else {
        c->bdown = bufferevent_socket_new(eg->base, c->down, BEV_OPT_CLOSE_ON_FREE);
        c->down = -1;
        c->bup = bufferevent_socket_new(eg->base, c->up, BEV_OPT_CLOSE_ON_FREE);
        c->up = -1;
        c->mode = "http";
    }
    if (c->bdown == NULL || c->bup == NULL)
        return conn_close(c, "cannot start the relay");
    c->relay = gbx_http_relay_new(on_head, c);
    gbx_http_relay_hold_upgrades(c->relay);
    c->state = C_RELAY;
    bufferevent_setcb(c->bdown, relay_down_read, relay_down_written, relay_down_event, c);
    bufferevent_setcb(c->bup, relay_up_read, relay_up_written, relay_up_event, c);
    bufferevent_setwatermark(c->bdown, EV_WRITE, RELAY_HIGH / 4, 0);
    bufferevent_setwatermark(c->bup, EV_WRITE, RELAY_HIGH / 4, 0);
    bufferevent_enable(c->bdown, EV_READ | EV_WRITE);
    bufferevent_enable(c->bup, EV_READ | EV_WRITE);
    touch(c);
    event_add(c->timer, &eg->idle_tv);
}

/* ---- connect ------------------------------------------------------------------------------- */

static void on_connected(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_egress_conn *c = arg;
    int e = 0;
    socklen_t l = sizeof(e);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
        e = errno;
    if (e)
        return upstream_failed(c, 0, "upstream connect failed: %s", strerror(e));
    event_free(c->ev_uw);
    c->ev_uw = NULL;
    event_del(c->timer);
    int one = 1;
    (void)setsockopt(c->up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(c->down, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->allowed = 1;
    c->eg->c.conn_allow++;
    c->sb->c.conn_allow++;
    if (c->intercept)
        start_relay(c, strcmp(c->mode, "tls") == 0);
    else
        start_splice(c);
}

static void connect_upstream(struct gbx_egress_conn *c, struct in_addr a)
{
    struct gbx_egress_sb *sb = c->sb;
    c->up_addr = a;
    char txt[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, txt, sizeof(txt));
    if (gbx_egress_addr_special(&a) || gbx_egress_addr_own(c->eg, &a)) {
        int rule = -1;
        if (!gbx_egress_policy_names_addr(sb->policy, &a, c->port, &rule))
            return deny(c,
                        "address %s is loopback, private, link-local or the host's own; no "
                        "rule names it",
                        txt);
        c->rule = rule;
    }
    c->up = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->up < 0)
        return upstream_failed(c, 0, "cannot open a socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(c->port), .sin_addr = a};
    c->state = C_CONNECT;
    if (connect(c->up, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
        return upstream_failed(c, 0, "upstream connect failed: %s", strerror(errno));
    c->ev_uw = event_new(c->eg->base, c->up, EV_WRITE, on_connected, c);
    event_add(c->ev_uw, NULL);
    event_add(c->timer, &c->eg->connect_tv);
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    struct gbx_egress_conn *c = arg;
    c->gai = NULL;
    if (c->state == C_CLOSED) {
        if (res)
            evutil_freeaddrinfo(res);
        if (c->orphan)
            conn_free(c);
        return;
    }
    if (result != 0 || res == NULL) {
        if (res)
            evutil_freeaddrinfo(res);
        return upstream_failed(c, 0, "cannot resolve '%s': %s", c->name,
                               evutil_gai_strerror(result));
    }
    /* the first answer that is public, or that a rule names */
    struct in_addr pick = {0}, first = {0};
    for (struct evutil_addrinfo *i = res; i; i = i->ai_next) {
        if (i->ai_family != AF_INET)
            continue;
        struct in_addr a = ((struct sockaddr_in *)(void *)i->ai_addr)->sin_addr;
        if (first.s_addr == 0)
            first = a;
        int rule;
        if ((!gbx_egress_addr_special(&a) && !gbx_egress_addr_own(c->eg, &a)) ||
            gbx_egress_policy_names_addr(c->sb->policy, &a, c->port, &rule)) {
            pick = a;
            break;
        }
    }
    evutil_freeaddrinfo(res);
    if (first.s_addr == 0)
        return upstream_failed(c, 0, "'%s' has no IPv4 address", c->name);
    connect_upstream(c, pick.s_addr ? pick : first);
}

static void resolve(struct gbx_egress_conn *c)
{
    c->state = C_RESOLVE;
    event_del(c->timer);
    if (c->name[0] == '\0')
        return connect_upstream(c, c->dst.sin_addr);
    struct in_addr a;
    if (gbx_egress_host_lookup(c->eg, c->name, &a))
        return connect_upstream(c, a);
    struct evutil_addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    event_add(c->timer, &c->eg->connect_tv);
    struct evdns_getaddrinfo_request *req =
        evdns_getaddrinfo(c->eg->resolver, c->name, NULL, &hints, on_resolved, c);
    /* NULL: answered already (the callback ran) */
    if (req && c->state == C_RESOLVE)
        c->gai = req;
}

/* ---- first bytes --------------------------------------------------------------------------- */

static int looks_like_http(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n && i < 8; i++) {
        if (b[i] == ' ')
            return i > 0;
        if (b[i] < 'A' || b[i] > 'Z')
            return 0;
    }
    return n > 0;
}

static void on_sniff(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_egress_conn *c = arg;
    uint8_t buf[PEEK_MAX];
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0)
        return client_error(c, "the client closed before sending anything");
    size_t len = (size_t)n;
    int tls = gbx_sniff_is_tls(buf, len);
    if (len < 3 && !looks_like_http(buf, len))
        return; /* too little to tell */
    if (tls) {
        int r = gbx_sniff_tls_sni(buf, len, c->seen, sizeof(c->seen));
        if (r == GBX_SNIFF_MORE && len < sizeof(buf))
            return;
        if (r != GBX_SNIFF_OK)
            return client_error(c, "malformed TLS ClientHello");
        if (c->name[0] && c->seen[0] == '\0')
            return deny(c, "a TLS ClientHello without a server name (the connection is to '%s')",
                        c->name);
        if (c->name[0] && strcmp(c->seen, c->name) != 0)
            return deny(c, "TLS server name '%s' does not match '%s'", c->seen, c->name);
        c->mode = "tls";
    } else if (looks_like_http(buf, len)) {
        struct gbx_http_head h;
        int r = gbx_sniff_http_head(buf, len, &h);
        if (r == GBX_SNIFF_MORE && len < sizeof(buf))
            return;
        if (r != GBX_SNIFF_OK)
            return client_error(c, "malformed HTTP request");
        snprintf(c->seen, sizeof(c->seen), "%s", h.host);
        if (c->name[0] && h.host[0] == '\0')
            return deny(c, "an HTTP request without a Host header (the connection is to '%s')",
                        c->name);
        if (c->name[0] && strcmp(h.host, c->name) != 0)
            return deny(c, "HTTP Host '%s' does not match '%s'", h.host, c->name);
        c->mode = "http";
        if (c->name[0])
            c->intercept = 1; /* relayed: the next request's Host is checked too */
    } else {
        if (c->l7)
            return deny(c, "not HTTP: request rules cannot be applied");
        c->intercept = 0;
    }
    if (c->intercept && (c->name[0] == '\0' || c->mode == NULL))
        c->intercept = 0;
    event_del(c->ev_dr);
    resolve(c);
}

/* ---- accept -------------------------------------------------------------------------------- */

static void decide(struct gbx_egress_conn *c)
{
    struct gbx_egress_sb *sb = c->sb;
    char txt[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &c->dst.sin_addr, txt, sizeof(txt));
    int in_pool = 0;
    const char *name = gbx_egress_dns_name(sb, &c->dst.sin_addr, &in_pool);
    if (in_pool && name == NULL)
        return deny(c, "%s is not an address this sandbox's DNS gave out", txt);
    if (name)
        snprintf(c->name, sizeof(c->name), "%s", name);
    if (c->eg->blocked)
        return deny(c, "egress is blocked");
    struct gbx_egress_decision d = {0, -1, 0};
    gbx_egress_policy_check_conn(sb->policy, name, name ? NULL : &c->dst.sin_addr, c->port, &d);
    c->rule = d.rule;
    if (!d.allow)
        return deny(c, "denied by policy");
    c->l7 = d.l7;
    c->intercept = name && (d.l7 || gbx_egress_secret_for(sb, name) != NULL);
    if (c->intercept || c->port == 80 || c->port == 443) {
        c->state = C_SNIFF;
        c->ev_dr = event_new(c->eg->base, c->down, EV_READ | EV_PERSIST | EV_ET, on_sniff, c);
        event_add(c->ev_dr, NULL);
        struct timeval tv = {SNIFF_TIMEOUT_S, 0};
        event_add(c->timer, &tv);
        return;
    }
    resolve(c);
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct gbx_egress_sb *sb = arg;
    struct gbx_egress *eg = sb->eg;
    struct gbx_egress_conn *c = gbx_xcalloc(1, sizeof(*c));
    c->sb = sb;
    c->eg = eg;
    c->down = fd;
    c->up = -1;
    c->p_du[0] = c->p_du[1] = c->p_ud[0] = c->p_ud[1] = -1;
    c->rule = -1;
    c->verdict = GBX_EGRESS_DENY; /* closed before any other verdict: refused */
    c->start_ns = c->last_ns = gbx_monotonic_ns();
    c->timer = evtimer_new(eg->base, on_timer, c);
    c->next = sb->conns;
    if (sb->conns)
        sb->conns->prev = c;
    sb->conns = c;
    sb->nconns++;
    eg->open_conns++;
    socklen_t l = sizeof(c->dst);
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &c->dst, &l) < 0)
        return deny(c, "no original destination");
    c->port = ntohs(c->dst.sin_port);
    if (sb->nconns > eg->max_conns)
        return deny(c, "more than %u open connections", eg->max_conns);
    decide(c);
}

int gbx_egress_proxy_start(struct gbx_egress_sb *sb, struct gbx_err **err)
{
    sb->proxy_lis =
        evconnlistener_new(sb->eg->base, on_accept, sb,
                           LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, sb->socks.proxy_fd);
    if (sb->proxy_lis == NULL)
        return gbx_err_set(err, ENOMEM, GBX_ERR_INTERNAL, "cannot accept connections");
    sb->socks.proxy_fd = -1;
    return 0;
}

void gbx_egress_proxy_stop(struct gbx_egress_sb *sb)
{
    if (sb->proxy_lis)
        evconnlistener_free(sb->proxy_lis);
    sb->proxy_lis = NULL;
    while (sb->conns)
        conn_close(sb->conns, "sandbox stopped");
    gbx_egress_proxy_reap(sb->eg);
}

void gbx_egress_proxy_recheck(struct gbx_egress_sb *sb, int all)
{
    struct gbx_egress_conn *next;
    for (struct gbx_egress_conn *c = sb->conns; c; c = next) {
        next = c->next;
        if (all) {
            conn_close(c, "cut by the emergency block");
            continue;
        }
        struct gbx_egress_decision d = {0, -1, 0};
        gbx_egress_policy_check_conn(sb->policy, c->name[0] ? c->name : NULL,
                                     c->name[0] ? NULL : &c->dst.sin_addr, c->port, &d);
        if (!d.allow)
            conn_close(c, "cut by a policy change");
        else
            c->l7 = d.l7 || c->l7;
    }
}
