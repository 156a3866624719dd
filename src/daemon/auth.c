/* SPDX-License-Identifier: MIT */
/* Who a TCP request is, from its headers alone: the one question that the HTTP gate (gate.c,
 * before it lets a body in) and dispatch_tcp (server.c, before it routes) both ask, and the
 * per-key request-rate limit that every authenticated TCP request passes. */
#include <sys/queue.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "e2b/e2b.h"
#include "http/gate.h"
#include "http/http.h"
#include "http/reqmetrics.h"
#include "core/sandboxes.h"
#include "core/server_int.h"
#include "daemon/listen.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/ratelimit.h"
#include "store/store.h"

const char *gbx_srv_request_key(const struct evkeyvalq *h)
{
    const char *v = evhttp_find_header(h, "X-API-Key");
    if (v)
        return v;
    v = evhttp_find_header(h, "Authorization");
    if (v && strncasecmp(v, "Bearer ", 7) == 0)
        return v + 7;
    return NULL;
}

int gbx_srv_authenticate(struct gbx_server *s, const struct evkeyvalq *in, enum evhttp_cmd_type m,
                         const char *path, const char *query, char *name, size_t namesz)
{
    /* E2B's data plane: the sandbox's credential, acting as its owner */
    if (evhttp_find_header(in, "E2b-Sandbox-Id") || (path && strcmp(path, "/files") == 0)) {
        struct gbx_live *l = gbx_e2b_credential(s, in, m, path, query);
        if (l == NULL)
            return 0;
        snprintf(name, namesz, "%s", l->owner);
        return 1;
    }
    const char *key = gbx_srv_request_key(in);
    if (key == NULL || strlen(key) > 256)
        return 0;
    return gbx_store_apikey_check(s->store, key, name, namesz) == 1;
}

/* The method evhttp will see (the relay gives its name). Not a table of names: the security
 * matrix (tests/security/matrix.py) reads such tables as routes. */
static enum evhttp_cmd_type method_of(const char *m)
{
    enum evhttp_cmd_type t = 0;
    if (strcmp(m, "GET") == 0)
        t = EVHTTP_REQ_GET;
    else if (strcmp(m, "POST") == 0)
        t = EVHTTP_REQ_POST;
    else if (strcmp(m, "PUT") == 0)
        t = EVHTTP_REQ_PUT;
    else if (strcmp(m, "DELETE") == 0)
        t = EVHTTP_REQ_DELETE;
    else if (strcmp(m, "PATCH") == 0)
        t = EVHTTP_REQ_PATCH;
    else if (strcmp(m, "HEAD") == 0)
        t = EVHTTP_REQ_HEAD;
    else if (strcmp(m, "OPTIONS") == 0)
        t = EVHTTP_REQ_OPTIONS;
    return t;
}

int gbx_srv_gate_allow(void *arg, const struct gbx_http_req_info *req)
{
    struct gbx_server *s = arg;
    struct evkeyvalq in;
    TAILQ_INIT(&in);
    for (size_t i = 0; i < req->nheaders; i++)
        (void)evhttp_add_header(&in, req->headers[i].name, req->headers[i].value);
    struct evhttp_uri *uri = evhttp_uri_parse_with_flags(req->path, 0);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    char name[GBX_ACTOR_MAX];
    int ok = gbx_srv_authenticate(s, &in, method_of(req->method), path, query, name, sizeof(name));
    /* /healthz needs no key, but nobody's body comes in without one */
    if (!ok && !req->has_body && path && strcmp(path, "/healthz") == 0)
        ok = 1;
    if (uri)
        evhttp_uri_free(uri);
    evhttp_clear_headers(&in);
    return ok;
}

/* ---- the rate limit ----------------------------------------------------------------------- */

static struct gbx_ratelimit limiter;

void gbx_srv_rate_init(double rate, double burst, int given)
{
    if (!given) {
        /* GLOVEBOX_E2B_RATE, the E2B control plane's limit before it covered every route */
        const char *v = getenv("GLOVEBOX_E2B_RATE");
        rate = 100;
        burst = 200;
        if (v && *v && gbx_ratelimit_parse(v, &rate, &burst) < 0) {
            gbx_log_warn("GLOVEBOX_E2B_RATE '%s': use RATE[/s][:BURST], e.g. 100/s:200, or off; "
                         "keeping 100/s:200",
                         v);
            rate = 100;
            burst = 200;
        }
    }
    gbx_ratelimit_init(&limiter, rate, burst);
    if (limiter.rate == 0)
        gbx_log_info("http: no request rate limit per API key");
    else
        gbx_log_info("http: at most %g requests/s per API key (burst %g)", limiter.rate,
                     limiter.burst);
}

void gbx_srv_rate_release(void)
{
    gbx_ratelimit_release(&limiter);
}

int gbx_srv_rate_take(const char *name, unsigned *retry_after, double *rate, double *burst)
{
    *rate = limiter.rate;
    *burst = limiter.burst;
    return gbx_ratelimit_take(&limiter, name, gbx_monotonic_ns(), retry_after);
}

int gbx_srv_rate_limited(struct evhttp_request *req, const char *name, int e2b, const char *path)
{
    unsigned retry = 0;
    double rate = 0, burst = 0;
    if (gbx_srv_rate_take(name, &retry, &rate, &burst) == 0)
        return 0;
    gbx_reqmetrics_track(req, path ? path : "", name);
    char v[16];
    snprintf(v, sizeof(v), "%u", retry);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", v);
    if (e2b) {
        gbx_e2b_error(req, 429,
                      "too many requests for this API key (at most %g/s, burst %g); retry in %u s",
                      rate, burst, retry);
        return 1;
    }
    gbx_autofree char *msg = gbx_asprintf("too many requests for API key '%s': at most %g/s "
                                          "(burst %g, gloveboxd --rate-limit); retry in %u s",
                                          name[0] ? name : "admin", rate, burst, retry);
    gbx_http_reply_json(req, 429,
                        json_pack("{s:{s:s,s:s,s:{s:f,s:f},s:i}}", "error", "kind", "limit",
                                  "message", msg, "limit", "rate", rate, "burst", burst,
                                  "retry_after", (json_int_t)retry));
    return 1;
}
