/* SPDX-License-Identifier: MIT */
/* Ingress (ingress.h): claiming a connection by its Host, the credential, the socket inside
 * the sandbox, and the byte pump. */
#include "ingress/ingress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "core/server_int.h"
#include "egress/netns.h"
#include "http/gate.h"
#include "store/store.h"

/* A side holding this much unsent stops the other side from being read. */
#define HIGH_WATER (256u << 10)

struct ticket {
    char id[64];
    unsigned port;
    const char *error; /* a malformed host: answered 400 with this */
    char key[257];     /* an API key, or "" */
    char token[129];   /* a traffic token, or "" */
};

struct conn {
    struct conn *prev, *next;
    struct gbx_ingress *ig;
    struct bufferevent *client, *up;
    char sandbox[64], owner[GBX_ACTOR_MAX], ip[INET6_ADDRSTRLEN];
    unsigned port;
    int64_t start_ns;
    uint64_t bytes_in, bytes_out; /* client to sandbox, sandbox to client */
    int connected;                /* upstream answered */
    int closing;                  /* one side ended: the other's output drains, then both go */
};

struct gbx_ingress {
    struct gbx_server *s;
    char *domain; /* host part, lowercase; NULL: off */
    struct conn *conns;
    unsigned nconns;
    uint64_t proxied, refused, unreachable, bytes_in, bytes_out;
};

static struct gbx_ingress *current;

struct gbx_ingress *gbx_ingress_current(void)
{
    return current;
}

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

struct gbx_ingress *gbx_ingress_new(struct gbx_server *s, const char *domain)
{
    struct gbx_ingress *ig = gbx_xcalloc(1, sizeof(*ig));
    ig->s = s;
    gbx_ingress_set_domain(ig, domain);
    current = ig;
    return ig;
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
    if (c->connected) {
        int64_t ms = (gbx_monotonic_ns() - c->start_ns) / 1000000;
        ig->bytes_in += c->bytes_in;
        ig->bytes_out += c->bytes_out;
        gbx_server_audit_as(ig->s, c->owner[0] ? c->owner : "admin", "ingress.connection",
                            c->sandbox,
                            json_pack("{s:i,s:s,s:I,s:I,s:I}", "port", (int)c->port, "client",
                                      c->ip, "bytes_in", (json_int_t)c->bytes_in, "bytes_out",
                                      (json_int_t)c->bytes_out, "ms", (json_int_t)ms));
    }
    if (c->client)
        bufferevent_free(c->client);
    if (c->up)
        bufferevent_free(c->up);
    free(c);
}

void gbx_ingress_free(struct gbx_ingress *ig)
{
    if (ig == NULL)
        return;
    while (ig->conns)
        conn_free(ig->conns);
    if (current == ig)
        current = NULL;
    free(ig->domain);
    free(ig);
}

/* ---- claiming ------------------------------------------------------------------------------ */

/* Is host "<port>-<id>.<domain>"? 0 not ingress's; 1 with t filled (t->error set when the
 * label is malformed: the host is ingress's, the request is refused). */
static int parse_host(const struct gbx_ingress *ig, const char *host, struct ticket *t)
{
    size_t hl = strlen(host), dl = strlen(ig->domain);
    if (hl <= dl + 1 || host[hl - dl - 1] != '.' || strcmp(host + hl - dl, ig->domain) != 0)
        return 0;
    size_t ll = hl - dl - 1; /* the label before the domain */
    const char *dash = memchr(host, '-', ll);
    if (memchr(host, '.', ll) != NULL || dash == NULL || dash == host) {
        t->error = "the host must be <port>-<sandbox id>.<domain>";
        return 1;
    }
    unsigned long port = 0;
    for (const char *p = host; p < dash; p++) {
        if (!isdigit((unsigned char)*p) || port > 65535) {
            t->error = "the port must be a number from 1 to 65535";
            return 1;
        }
        port = port * 10 + (unsigned long)(*p - '0');
    }
    size_t idl = ll - (size_t)(dash + 1 - host);
    if (port == 0 || port > 65535) {
        t->error = "the port must be a number from 1 to 65535";
        return 1;
    }
    if (idl == 0 || idl >= sizeof(t->id)) {
        t->error = "the host must be <port>-<sandbox id>.<domain>";
        return 1;
    }
    memcpy(t->id, dash + 1, idl);
    t->id[idl] = '\0';
    t->port = (unsigned)port;
    return 1;
}

static int claim(void *arg, const struct gbx_http_req_info *req, void **out)
{
    struct gbx_ingress *ig = arg;
    if (ig->domain == NULL || req->host == NULL || req->host[0] == '\0')
        return 0;
    struct ticket t = {0};
    if (parse_host(ig, req->host, &t) == 0)
        return 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *n = req->headers[i].name, *v = req->headers[i].value;
        if (strcasecmp(n, "X-API-Key") == 0)
            snprintf(t.key, sizeof(t.key), "%s", v);
        else if (strcasecmp(n, "Authorization") == 0 && strncasecmp(v, "Bearer ", 7) == 0)
            snprintf(t.key, sizeof(t.key), "%s", v + 7);
        else if (strcasecmp(n, "E2B-Traffic-Access-Token") == 0)
            snprintf(t.token, sizeof(t.token), "%s", v);
    }
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

static void on_closing_written(struct bufferevent *bev, void *arg)
{
    conn_free(arg);
}

static void on_closing_event(struct bufferevent *bev, short what, void *arg)
{
    conn_free(arg);
}

/* Answer the client with an error and close once it is written. */
static void reply_error(struct conn *c, int status, const char *reason, const char *kind,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void reply_error(struct conn *c, int status, const char *reason, const char *kind,
                        const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "kind", kind, "message", msg);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    size_t n = text ? strlen(text) : 0;
    evbuffer_add_printf(bufferevent_get_output(c->client),
                        "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: "
                        "%zu\r\nConnection: close\r\n\r\n%s\n",
                        status, reason, n + 1, text ? text : "");
    free(text);
    if (c->up) {
        bufferevent_free(c->up);
        c->up = NULL;
    }
    bufferevent_setcb(c->client, NULL, on_closing_written, on_closing_event, c);
    bufferevent_disable(c->client, EV_READ);
    bufferevent_enable(c->client, EV_WRITE);
}

/* ---- the pump ------------------------------------------------------------------------------ */

static void pump(struct conn *c, struct bufferevent *from, struct bufferevent *to)
{
    struct evbuffer *in = bufferevent_get_input(from);
    size_t n = evbuffer_get_length(in);
    if (from == c->client)
        c->bytes_in += n;
    else
        c->bytes_out += n;
    evbuffer_remove_buffer(in, bufferevent_get_output(to), n);
    /* backpressure: stop reading until the other side has written most of it */
    if (evbuffer_get_length(bufferevent_get_output(to)) >= HIGH_WATER)
        bufferevent_disable(from, EV_READ);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (c->closing)
        return;
    pump(c, bev, bev == c->client ? c->up : c->client);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct bufferevent *other = bev == c->client ? c->up : c->client;
    if (c->closing) {
        if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
            conn_free(c);
        return;
    }
    bufferevent_enable(other, EV_READ); /* below the low-water mark again */
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    if (bev == c->up && (what & BEV_EVENT_CONNECTED)) {
        c->connected = 1;
        c->ig->proxied++;
        bufferevent_enable(c->up, EV_READ | EV_WRITE);
        bufferevent_enable(c->client, EV_READ | EV_WRITE);
        return;
    }
    if (bev == c->up && !c->connected) {
        c->ig->unreachable++;
        int e = EVUTIL_SOCKET_ERROR();
        reply_error(c, 502, "Bad Gateway", "unavailable",
                    "nobody listens on port %u in sandbox '%s' (%s)", c->port, c->sandbox,
                    strerror(e ? e : ECONNREFUSED));
        return;
    }
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    /* one side ended: what it sent goes out on the other, then both close */
    struct bufferevent *other = bev == c->client ? c->up : c->client;
    if (what & BEV_EVENT_EOF)
        pump(c, bev, other);
    c->closing = 1;
    bufferevent_disable(bev, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(other)) == 0)
        conn_free(c);
    else
        bufferevent_enable(other, EV_WRITE);
}

/* A TCP socket made inside the sandbox's network namespace (it keeps that namespace; the
 * loop thread is back in its own before this returns, or the daemon aborts). */
static int socket_in(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)pid);
    gbx_autoclose int target = open(p, O_RDONLY | O_CLOEXEC);
    if (target < 0)
        return -errno;
    gbx_autoclose int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        return -errno;
    if (setns(target, CLONE_NEWNET) < 0)
        return -errno;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int e = errno;
    if (setns(self, CLONE_NEWNET) < 0) {
        gbx_log_error("ingress: cannot return to the daemon's network namespace: %s",
                      strerror(errno));
        abort();
    }
    return fd < 0 ? -e : fd;
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
    c->start_ns = gbx_monotonic_ns();
    c->port = t->port;
    snprintf(c->sandbox, sizeof(c->sandbox), "%s", t->id);
    c->next = ig->conns;
    if (ig->conns)
        ig->conns->prev = c;
    ig->conns = c;
    ig->nconns++;
    struct sockaddr_storage ss = {0};
    socklen_t sl = sizeof(ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, c->ip, sizeof(c->ip));
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, c->ip, sizeof(c->ip));
    c->client = bufferevent_socket_new(ig->s->base, fd, BEV_OPT_CLOSE_ON_FREE);
    GBX_BUG_ON(c->client == NULL);
    bufferevent_setwatermark(c->client, EV_WRITE, HIGH_WATER / 4, 0);
    bufferevent_setcb(c->client, on_read, on_write, on_event, c);
    if (t->error) {
        ig->refused++;
        reply_error(c, 400, "Bad Request", "invalid", "ingress: %s", t->error);
        goto out;
    }
    if (ig->nconns > GBX_INGRESS_MAX_CONNS) {
        ig->refused++;
        reply_error(c, 503, "Service Unavailable", "unavailable",
                    "too many open ingress connections (%d); try again later",
                    GBX_INGRESS_MAX_CONNS);
        goto out;
    }
    if (t->key[0] == '\0' && t->token[0] == '\0') {
        ig->refused++;
        reply_error(c, 401, "Unauthorized", "permission",
                    "a credential is needed: the sandbox owner's API key (Authorization: Bearer "
                    "KEY) or its traffic token (E2B-Traffic-Access-Token)");
        goto out;
    }
    char name[GBX_ACTOR_MAX] = "";
    int by_key = key_owner(ig, t->key, name, sizeof(name));
    if (t->key[0] && !by_key && t->token[0] == '\0') {
        ig->refused++;
        reply_error(c, 401, "Unauthorized", "permission", "this API key is not valid (revoked?)");
        goto out;
    }
    struct gbx_live *l = gbx_sandboxes_find(ig->s, &gbx_actor_system, t->id);
    int ok = 0;
    if (l && by_key)
        ok = strcmp(l->owner, name) == 0;
    /* the traffic token E2B's create answers with (trafficAccessToken) */
    if (l && !ok && t->token[0])
        ok = strlen(t->token) == strlen(l->token) &&
             CRYPTO_memcmp(l->token, t->token, strlen(l->token)) == 0;
    if (!ok) { /* the same answer whether it exists or not */
        ig->refused++;
        reply_error(c, 404, "Not Found", "not_found",
                    "no sandbox '%s' reachable with this credential", t->id);
        goto out;
    }
    snprintf(c->owner, sizeof(c->owner), "%s", l->owner);
    if (l->paused || l->hibernated) {
        ig->refused++;
        reply_error(c, 409, "Conflict", "conflict",
                    "sandbox '%s' is %s: resume it first (glovebox resume, or E2B connect)", t->id,
                    l->hibernated ? "hibernated" : "paused");
        goto out;
    }
    if (t->port == GBX_EGRESS_PROXY_PORT || t->port == GBX_EGRESS_DNS_PORT) {
        ig->refused++;
        reply_error(c, 403, "Forbidden", "permission",
                    "port %u in a sandbox is the daemon's own (its egress gateway)", t->port);
        goto out;
    }
    int ufd = socket_in(l->sb->init_pid);
    if (ufd < 0) {
        ig->unreachable++;
        reply_error(c, 502, "Bad Gateway", "unavailable", "cannot reach sandbox '%s': %s", t->id,
                    strerror(-ufd));
        goto out;
    }
    c->up = bufferevent_socket_new(ig->s->base, ufd, BEV_OPT_CLOSE_ON_FREE);
    GBX_BUG_ON(c->up == NULL);
    bufferevent_setwatermark(c->up, EV_WRITE, HIGH_WATER / 4, 0);
    bufferevent_setcb(c->up, on_read, on_write, on_event, c);
    /* what the client sent so far (its first head and anything after it) goes first */
    c->bytes_in += evbuffer_get_length(pending);
    evbuffer_add_buffer(bufferevent_get_output(c->up), pending);
    bufferevent_disable(c->client, EV_READ);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bufferevent_socket_connect(c->up, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        ig->unreachable++;
        reply_error(c, 502, "Bad Gateway", "unavailable",
                    "nobody listens on port %u in sandbox '%s'", t->port, t->id);
    }
out:
    evbuffer_free(pending);
    free(t);
}

const struct gbx_gate_takeover gbx_ingress_takeover = {.claim = claim, .take = take, .drop = drop};

void gbx_ingress_metrics(const struct gbx_ingress *ig, struct evbuffer *b)
{
    if (ig == NULL)
        return;
    /* what the daemon holds now on behalf of open connections: bounded by the high-water
     * marks, however slow a side is */
    size_t held = 0;
    for (const struct conn *c = ig->conns; c; c = c->next) {
        if (c->client)
            held += evbuffer_get_length(bufferevent_get_output(c->client)) +
                    evbuffer_get_length(bufferevent_get_input(c->client));
        if (c->up)
            held += evbuffer_get_length(bufferevent_get_output(c->up)) +
                    evbuffer_get_length(bufferevent_get_input(c->up));
    }
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
