/* SPDX-License-Identifier: MIT */
#include "http/reqmetrics.h"
#include "http/gate.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"

static const char *const routes[] = {
    "other",
    "/healthz",
    "/metrics",
    "/version",
    "/v1/apikeys",
    "/v1/apikeys/{name}",
    "/v1/sandboxes",
    "/v1/sandboxes/{id}",
    "/v1/sandboxes/{id}/exec",
    "/v1/sandboxes/{id}/timeout",
    "/v1/sandboxes/{id}/files",
    "/v1/sandboxes/{id}/files/{op}",
    "/v1/sandboxes/{id}/processes",
    "/v1/sandboxes/{id}/processes/{proc}",
    "/v1/sandboxes/{id}/processes/{proc}/{op}",
    /* E2B (15-): the control plane, then envd */
    "/v2/sandboxes",
    "/v2/sandboxes/{id}/{op}",
    "/sandboxes/{id}",
    "/sandboxes/{id}/{op}",
    "/snapshots",
    "/templates/{id}",
    "/process.Process/{method}",
    "/filesystem.Filesystem/{method}",
    "/files",
    "/health",
};

static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                0.1,    0.25,  0.5,    1,     2.5,  5,     10};

struct series {
    struct series *next;
    uint8_t route;
    uint8_t method;
    uint16_t status;
    uint64_t count;
    double sum;
    uint64_t buckets[sizeof(bounds) / sizeof(bounds[0])];
};

static struct series *table;

static size_t count_slashes(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '/';
    return n;
}

static size_t route_index(const char *path)
{
    for (size_t i = 1; i <= 6; i++)
        if (strcmp(path, routes[i]) == 0)
            return i;
    if (strncmp(path, "/v1/apikeys/", 12) == 0 && count_slashes(path) == 3)
        return 5;
    if (strcmp(path, "/v2/sandboxes") == 0)
        return 15;
    if (strncmp(path, "/v2/sandboxes/", 14) == 0)
        return 16;
    if (strncmp(path, "/sandboxes/", 11) == 0)
        return strchr(path + 11, '/') ? 18 : 17;
    if (strncmp(path, "/snapshots", 10) == 0)
        return 19;
    if (strncmp(path, "/templates/", 11) == 0)
        return 20;
    if (strncmp(path, "/process.Process/", 17) == 0)
        return 21;
    if (strncmp(path, "/filesystem.Filesystem/", 23) == 0)
        return 22;
    if (strcmp(path, "/files") == 0)
        return 23;
    if (strcmp(path, "/health") == 0)
        return 24;
    if (strncmp(path, "/v1/sandboxes/", 14) != 0)
        return 0;
    const char *rest = strchr(path + 14, '/');
    if (rest == NULL)
        return 7;
    if (strcmp(rest, "/exec") == 0)
        return 8;
    if (strcmp(rest, "/timeout") == 0)
        return 9;
    if (strcmp(rest, "/files") == 0)
        return 10;
    if (strncmp(rest, "/files/", 7) == 0)
        return 11;
    if (strcmp(rest, "/processes") == 0)
        return 12;
    if (strncmp(rest, "/processes/", 11) == 0)
        return count_slashes(rest) == 2 ? 13 : 14;
    return 0;
}

static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "OTHER"};

static uint8_t method_index(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET:
        return 0;
    case EVHTTP_REQ_POST:
        return 1;
    case EVHTTP_REQ_PUT:
        return 2;
    case EVHTTP_REQ_DELETE:
        return 3;
    case EVHTTP_REQ_PATCH:
        return 4;
    default:
        return 5;
    }
}

/* Requests in flight, in a ring indexed by a sequence number. evhttp gets the number, not a
 * pointer: libevent 2.1 frees a request whose client left mid-reply without any callback, so
 * nothing may be owned by one. A request still running 8192 requests later has been
 * overwritten; its completion is then logged without a duration and not observed. */
#define RING 8192

struct tracked {
    uint64_t seq;
    int64_t start_ns;
    uint8_t route;
    uint8_t method;
    char actor[38];
};

static struct tracked ring[RING];
static uint64_t next_seq = 1;

static void observe(const struct tracked *t, int status, double secs)
{
    struct series *s;
    for (s = table; s; s = s->next)
        if (s->route == t->route && s->method == t->method && s->status == status)
            break;
    if (s == NULL) {
        s = gbx_xcalloc(1, sizeof(*s));
        s->route = t->route;
        s->method = t->method;
        s->status = (uint16_t)status;
        s->next = table;
        table = s;
    }
    s->count++;
    s->sum += secs;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(bounds); i++)
        if (secs <= bounds[i])
            s->buckets[i]++;
}

/* evhttp calls this once the whole reply is written, right before it frees req. */
static void on_complete(struct evhttp_request *req, void *arg)
{
    uint64_t seq = (uint64_t)(uintptr_t)arg;
    const struct tracked *t = &ring[seq % RING];
    gbx_gate_request_done(req); /* the connection's idle timer may start */
    int status = evhttp_request_get_response_code(req);
    int known = t->seq == seq;
    double secs = known ? (double)(gbx_monotonic_ns() - t->start_ns) / 1e9 : -1;
    if (known)
        observe(t, status, secs);
    const char *uri = evhttp_request_get_uri(req);
    gbx_log_fields(GBX_LOG_INFO, "request",
                   GBX_LOG_STR("method", methods[method_index(evhttp_request_get_command(req))]),
                   GBX_LOG_STR("path", uri ? uri : ""), GBX_LOG_INT("status", status),
                   known ? GBX_LOG_REAL("ms", secs * 1000, 3) : GBX_LOG_NONE("ms"),
                   GBX_LOG_STR("actor", known ? t->actor : ""));
}

void gbx_reqmetrics_track(struct evhttp_request *req, const char *path, const char *actor)
{
    uint64_t seq = next_seq++;
    struct tracked *t = &ring[seq % RING];
    t->seq = seq;
    t->start_ns = gbx_monotonic_ns();
    t->route = (uint8_t)route_index(path);
    t->method = method_index(evhttp_request_get_command(req));
    snprintf(t->actor, sizeof(t->actor), "%s", actor ? actor : "");
    evhttp_request_set_on_complete_cb(req, on_complete, (void *)(uintptr_t)seq);
}

void gbx_reqmetrics_render(struct evbuffer *out)
{
    evbuffer_add_printf(out, "# HELP glovebox_http_request_duration_seconds Time from a "
                             "request's dispatch to its complete reply (streams: to their end).\n"
                             "# TYPE glovebox_http_request_duration_seconds histogram\n");
    for (struct series *s = table; s; s = s->next) {
        char labels[160];
        snprintf(labels, sizeof(labels), "route=\"%s\",method=\"%s\",status=\"%u\"",
                 routes[s->route], methods[s->method], s->status);
        for (size_t i = 0; i < GBX_ARRAY_SIZE(bounds); i++)
            evbuffer_add_printf(out,
                                "glovebox_http_request_duration_seconds_bucket{%s,le=\"%g\"} "
                                "%llu\n",
                                labels, bounds[i], (unsigned long long)s->buckets[i]);
        evbuffer_add_printf(out,
                            "glovebox_http_request_duration_seconds_bucket{%s,le=\"+Inf\"} %llu\n"
                            "glovebox_http_request_duration_seconds_sum{%s} %.6f\n"
                            "glovebox_http_request_duration_seconds_count{%s} %llu\n",
                            labels, (unsigned long long)s->count, labels, s->sum, labels,
                            (unsigned long long)s->count);
    }
}

void gbx_reqmetrics_reset(void)
{
    while (table) {
        struct series *s = table;
        table = s->next;
        free(s);
    }
}
