/* SPDX-License-Identifier: MIT */
/* The daemon's listeners (listen.h): who is asking, and which front end answers. The admin
 * socket's requests act as the administrator and go to the native router; a TCP request is
 * authenticated from its headers (auth.c) and rate-limited per key, then goes to E2B's data
 * plane (E2b-Sandbox-Id, or a signed /files URL), E2B's control plane, or the native
 * router. Every connection first passes the front door (http/gate.c). */
#include "daemon/listen.h"

#include <errno.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/api.h"
#include "http/exec.h"
#include "api/files.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "core/actor.h"
#include "core/server.h"
#include "core/templates.h"
#include "e2b/e2b.h"
#include "http/gate.h"
#include "http/http.h"
#include "http/reqmetrics.h"
#include "session/sessions.h"

#define GBX_DEFAULT_MAX_BODY (1u << 20)
#define GBX_DEFAULT_MAX_UPLOAD (64u << 20)
#define GBX_MAX_HEADERS (64u << 10)

/* One TCP address served. */
struct tcp_bound {
    char *addr; /* "ADDR:PORT", as configured */
    struct evhttp_bound_socket *b;
};

struct gbx_listeners {
    struct gbx_server *s;
    struct event_base *base;
    const char *sock_path; /* the server's */
    struct evhttp *http;   /* the admin socket's server */
    struct evconnlistener *unix_listener;
    struct evhttp *http_tcp; /* --listen: every request needs an API key */
    struct evhttp_bound_socket *unix_bound;
    struct tcp_bound tcp[GBX_LISTEN_MAX];
    size_t ntcp;
    struct gbx_gate *gate_admin, *gate_tcp; /* the HTTP front doors (gate.c) */
    double rate_limit, rate_burst;          /* the rate limit in force (a reload compares) */
    int rate_limit_set;
};

static void dispatch_admin(struct evhttp_request *req, void *arg)
{
    struct gbx_listeners *n = arg;
    struct gbx_server *s = n->s;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    struct gbx_actor who;
    gbx_actor_for(&who, "");
    gbx_reqmetrics_track(req, path ? path : "", who.name);
    gbx_api_route(s, &who, req);
}

static void dispatch_tcp(struct evhttp_request *req, void *arg)
{
    struct gbx_listeners *n = arg;
    struct gbx_server *s = n->s;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    /* the same question the HTTP gate asked before it let the body in (auth.c) */
    char name[GBX_ACTOR_MAX];
    int authed = gbx_srv_authenticate(s, in, evhttp_request_get_command(req), path, query, name,
                                      sizeof(name));
    const char *sid = evhttp_find_header(in, "E2b-Sandbox-Id");
    int files = path && strcmp(path, "/files") == 0;
    int e2b = path && gbx_e2b_is_control_path(path);
    if (authed && gbx_srv_rate_limited(req, name, e2b || sid || files, path))
        return;
    /* E2B's data plane: the sandbox's access token decides (gbx_e2b_data), and the request
     * acts as the sandbox's owner (its actor is made there, once the sandbox is found) */
    if (sid) {
        gbx_reqmetrics_track(req, path ? path : "", "e2b");
        gbx_e2b_data(s, n->base, req, sid);
        return;
    }
    /* a signed envd URL (sbx.downloadUrl()/uploadUrl()) carries no sandbox id: e2b/files.c
     * finds the sandbox whose token made the signature */
    if (files) {
        gbx_reqmetrics_track(req, path, "e2b");
        if (gbx_e2b_admit(s, req, path, GBX_ADMIT_E2B_DATA) == 0)
            gbx_e2b_files(s, n->base, req, NULL);
        return;
    }
    /* no key: /healthz only (route answers nothing else to an actor that sees nothing) */
    struct gbx_actor who = {.admin = 0, .owner = "", .name = "-"};
    if (path == NULL || strcmp(path, "/healthz") != 0) {
        const char *key = gbx_srv_request_key(in);
        if (!authed) {
            gbx_reqmetrics_track(req, path ? path : "", "-");
            evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
            if (e2b)
                return gbx_e2b_error(req, 401,
                                     key ? "this API key is not valid (revoked?)"
                                         : "an API key is needed in X-API-KEY");
            gbx_http_reply_json(req, 401,
                                json_pack("{s:{s:s,s:s}}", "error", "kind", "permission", "message",
                                          key ? "this API key is not valid (revoked?)"
                                              : "an API key is needed: 'Authorization: Bearer "
                                                "KEY' or 'X-API-Key: KEY'"));
            return;
        }
        gbx_actor_for(&who, name);
    }
    gbx_reqmetrics_track(req, path ? path : "", who.name);
    if (e2b) {
        if (gbx_e2b_admit(s, req, path, GBX_ADMIT_E2B_CONTROL) == 0)
            gbx_e2b_control(s, &who, req, path);
    } else
        gbx_api_route(s, &who, req);
}

static int listen_unix(struct gbx_listeners *s, struct gbx_err **err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(s->sock_path) >= sizeof(sa.sun_path))
        return gbx_err_set(err, ENAMETOOLONG, GBX_ERR_INVALID, "socket path '%s' is too long",
                           s->sock_path);
    strcpy(sa.sun_path, s->sock_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return gbx_err_sys(err, errno, "cannot create socket");
    (void)unlink(s->sock_path); /* a stale socket of a previous run */
    mode_t old = umask(0177);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (r < 0 || chmod(s->sock_path, 0600) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        close(fd);
        return gbx_err_sys(err, e, "cannot listen on '%s'", s->sock_path);
    }
    /* backlog 0: listening already, with SOMAXCONN (libevent's -1 would make it 128) */
    s->unix_listener = evconnlistener_new(s->base, NULL, NULL,
                                          LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
    if (s->unix_listener == NULL) {
        close(fd);
        return gbx_err_set(err, 0, GBX_ERR_INTERNAL, "cannot listen on '%s'", s->sock_path);
    }
    if ((s->unix_bound = evhttp_bind_listener(s->http, s->unix_listener)) == NULL)
        return gbx_err_set(err, 0, GBX_ERR_INTERNAL, "cannot serve on '%s'", s->sock_path);
    s->unix_listener = NULL; /* owned by the http bound socket now */
    return 0;
}

/* An HTTP server with the daemon's limits, routing every request to cb. */
static struct evhttp *new_http(struct gbx_listeners *s, const struct gbx_listen_config *cfg,
                               void (*cb)(struct evhttp_request *, void *))
{
    struct evhttp *h = evhttp_new(s->base);
    GBX_BUG_ON(h == NULL);
    /* libevent 2.1 hands a handler the whole body, so the transport limit is the larger of
     * the two; JSON bodies are held to max_body by gbx_http_body_object */
    size_t json_max = cfg->max_body ? cfg->max_body : GBX_DEFAULT_MAX_BODY;
    size_t upload_max = cfg->max_upload ? cfg->max_upload : GBX_DEFAULT_MAX_UPLOAD;
    gbx_http_set_json_limit(json_max);
    evhttp_set_max_body_size(h, json_max > upload_max ? json_max : upload_max);
    /* answer 413 even to a client that keeps sending (no Expect: 100-continue) */
    evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_max_headers_size(h, GBX_MAX_HEADERS);
    evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE |
                                      EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(h, cb, s);
    return h;
}

/* The HTTP gate of a listener (gate.c): timeouts for both, caps and credentials on TCP. */
static void gate_http(struct gbx_listeners *s, const struct gbx_listen_config *cfg,
                      struct evhttp *h, int tcp)
{
    struct gbx_gate **g = tcp ? &s->gate_tcp : &s->gate_admin;
    if (*g == NULL) {
        *g = gbx_gate_new(s->base, &cfg->http, tcp, tcp ? "tcp" : "admin",
                          tcp ? gbx_srv_gate_allow : NULL, s->s);
        if (tcp && cfg->takeover)
            gbx_gate_set_takeover(*g, cfg->takeover, cfg->takeover_arg);
    }
    gbx_gate_attach(*g, h);
}

/* Split "ADDR:PORT[,ADDR:PORT...]" (commas or spaces) into out (at most GBX_LISTEN_MAX, each
 * checked and not repeated). 0, or -1 with *err. */
static int split_addrs(const char *list, char out[][80], size_t *n, struct gbx_err **err)
{
    *n = 0;
    for (const char *p = list ? list : ""; *p;) {
        size_t len = strcspn(p, ", \t");
        if (len == 0) {
            p++;
            continue;
        }
        if (*n == GBX_LISTEN_MAX)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "listen: at most %d addresses",
                               GBX_LISTEN_MAX);
        if (len >= 80)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "listen: '%.*s' is too long", (int)len,
                               p);
        memcpy(out[*n], p, len);
        out[*n][len] = '\0';
        const char *colon = strrchr(out[*n], ':');
        uint64_t port = 0;
        if (colon == NULL || colon == out[*n] || gbx_parse_u64(colon + 1, 1, 65535, &port) < 0)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "listen '%s': use ADDR:PORT, e.g. 127.0.0.1:7070", out[*n]);
        for (size_t i = 0; i < *n; i++)
            if (strcmp(out[i], out[*n]) == 0)
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "listen: '%s' is listed twice",
                                   out[*n]);
        (*n)++;
        p += len;
    }
    return 0;
}

/* Serve TCP on addrport ("ADDR:PORT", checked): *out, or -1 with *err. */
static int bind_tcp(struct gbx_listeners *s, const struct gbx_listen_config *cfg,
                    const char *addrport, struct evhttp_bound_socket **out, struct gbx_err **err)
{
    gbx_autofree char *addr = gbx_xstrdup(addrport);
    char *colon = strrchr(addr, ':');
    uint64_t port = 0;
    (void)gbx_parse_u64(colon + 1, 1, 65535, &port);
    *colon = '\0';
    if (s->http_tcp == NULL) {
        s->http_tcp = new_http(s, cfg, dispatch_tcp);
        gate_http(s, cfg, s->http_tcp, 1);
    }
    errno = 0;
    struct evhttp_bound_socket *b =
        evhttp_bind_socket_with_handle(s->http_tcp, addr, (uint16_t)port);
    if (b == NULL)
        return gbx_err_sys(err, errno ? errno : EADDRINUSE, "cannot listen on '%s'", addrport);
    /* a burst of clients (a thousand creates at once) waits in the kernel's queue rather than
     * being refused: libevent listens with a backlog of 128 */
    (void)listen(evhttp_bound_socket_get_fd(b), SOMAXCONN);
    /* streams write small frames one after another (a Connect stream's end, then its
     * trailer): without TCP_NODELAY, Nagle holds the second until the client's delayed ACK,
     * up to 40 ms. Accepted sockets inherit it from the listening one. */
    int one = 1;
    if (setsockopt(evhttp_bound_socket_get_fd(b), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
        gbx_log_warn("cannot set TCP_NODELAY on '%s': %s", addrport, strerror(errno));
    gbx_log_info("serving API keys' requests on %s", addrport);
    *out = b;
    return 0;
}

/* Serve exactly the addresses of list: those not served yet are bound first (if one fails,
 * those just bound are let go and nothing changed), then the ones no longer listed stop
 * accepting (their open connections go on). */
static int serve_tcp(struct gbx_listeners *s, const struct gbx_listen_config *cfg,
                     struct gbx_err **err)
{
    char want[GBX_LISTEN_MAX][80];
    size_t nwant = 0;
    if (split_addrs(cfg->listen_tcp, want, &nwant, err) < 0)
        return -1;
    struct tcp_bound next[GBX_LISTEN_MAX] = {{0}};
    int fresh[GBX_LISTEN_MAX] = {0};
    for (size_t i = 0; i < nwant; i++) {
        for (size_t j = 0; j < s->ntcp; j++)
            if (s->tcp[j].addr && strcmp(s->tcp[j].addr, want[i]) == 0)
                next[i] = s->tcp[j];
        if (next[i].b != NULL)
            continue;
        if (bind_tcp(s, cfg, want[i], &next[i].b, err) < 0) {
            for (size_t k = 0; k < i; k++)
                if (fresh[k]) {
                    evhttp_del_accept_socket(s->http_tcp, next[k].b);
                    free(next[k].addr);
                }
            return -1;
        }
        next[i].addr = gbx_xstrdup(want[i]);
        fresh[i] = 1;
    }
    for (size_t j = 0; j < s->ntcp; j++) {
        int kept = 0;
        for (size_t i = 0; i < nwant; i++)
            kept |= next[i].b == s->tcp[j].b;
        if (kept)
            continue;
        gbx_log_info("no longer accepting on %s (its open connections go on)", s->tcp[j].addr);
        evhttp_del_accept_socket(s->http_tcp, s->tcp[j].b);
        free(s->tcp[j].addr);
    }
    memcpy(s->tcp, next, sizeof(next));
    s->ntcp = nwant;
    return 0;
}

int gbx_listen_start(struct gbx_server *s, const struct gbx_listen_config *cfg,
                     struct gbx_listeners **out, struct gbx_err **err)
{
    struct gbx_listeners *n = gbx_xcalloc(1, sizeof(*n));
    n->s = s;
    n->base = gbx_server_base(s);
    n->sock_path = gbx_server_socket_path(s);
    *out = n;
    gbx_srv_rate_init(cfg->rate_limit, cfg->rate_burst, cfg->rate_limit_set);
    n->rate_limit = cfg->rate_limit;
    n->rate_burst = cfg->rate_burst;
    n->rate_limit_set = cfg->rate_limit_set;
    n->http = new_http(n, cfg, dispatch_admin);
    gate_http(n, cfg, n->http, 0);
    if (listen_unix(n, err) < 0 || serve_tcp(n, cfg, err) < 0)
        return gbx_err_wrap(err, "start gloveboxd");
    return 0;
}

int gbx_listen_reconfigure(struct gbx_listeners *n, const struct gbx_listen_config *cfg,
                           struct gbx_err **err)
{
    if (serve_tcp(n, cfg, err) < 0)
        return -1;
    gbx_gate_set_limits(n->gate_admin, &cfg->http);
    gbx_gate_set_limits(n->gate_tcp, &cfg->http);
    if (cfg->rate_limit != n->rate_limit || cfg->rate_burst != n->rate_burst ||
        cfg->rate_limit_set != n->rate_limit_set) {
        gbx_srv_rate_release();
        gbx_srv_rate_init(cfg->rate_limit, cfg->rate_burst, cfg->rate_limit_set);
        n->rate_limit = cfg->rate_limit;
        n->rate_burst = cfg->rate_burst;
        n->rate_limit_set = cfg->rate_limit_set;
    }
    return 0;
}

size_t gbx_listen_tcp_addrs(const struct gbx_listeners *n, const char **addrs, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; n && i < n->ntcp && k < max; i++)
        addrs[k++] = n->tcp[i].addr;
    return k;
}

int gbx_listen_drain(struct gbx_listeners *n)
{
    static const char why[] = "the daemon is stopping; the process goes on (attach to it when "
                              "the daemon is back)";
    if (n->unix_bound) {
        evhttp_del_accept_socket(n->http, n->unix_bound);
        n->unix_bound = NULL;
        (void)unlink(n->sock_path);
    }
    for (size_t i = 0; i < n->ntcp; i++) {
        if (n->tcp[i].b)
            evhttp_del_accept_socket(n->http_tcp, n->tcp[i].b);
        n->tcp[i].b = NULL;
    }
    size_t k = gbx_exec_drain(why) + gbx_api_files_drain(why) + gbx_e2b_interp_shutdown() +
               gbx_e2b_fs_drain(why) + gbx_sessions_drain(gbx_server_sessions(n->s)) +
               gbx_templates_drain(why) + gbx_server_drain(n->s);
    if (k)
        gbx_log_info("ended %zu open streams", k);
    return k > 0;
}

void gbx_listen_stop(struct gbx_listeners *n)
{
    if (n == NULL)
        return;
    gbx_templates_shutdown(); /* builds are cancelled before the worker threads join */
    if (n->http) {
        evhttp_free(n->http);
        n->http = NULL;
    }
    if (n->http_tcp) {
        evhttp_free(n->http_tcp);
        n->http_tcp = NULL;
    }
    if (n->unix_listener) {
        evconnlistener_free(n->unix_listener);
        n->unix_listener = NULL;
    }
    n->unix_bound = NULL; /* freed with their servers */
    for (size_t i = 0; i < n->ntcp; i++)
        n->tcp[i].b = NULL;
    gbx_exec_shutdown(); /* streams kept only to enforce a timeout after their client left */
    gbx_e2b_interp_shutdown();
    (void)unlink(n->sock_path);
}

void gbx_listen_free(struct gbx_listeners *n)
{
    if (n == NULL)
        return;
    gbx_listen_stop(n);
    gbx_gate_free(n->gate_admin); /* after the evhttp servers */
    gbx_gate_free(n->gate_tcp);
    for (size_t i = 0; i < n->ntcp; i++)
        free(n->tcp[i].addr);
    gbx_srv_rate_release();
    gbx_reqmetrics_reset();
    free(n);
}
