/* SPDX-License-Identifier: MIT */
/* The native API's router and its /v1/sandboxes handlers (see docs/api.yaml): every request the
 * listeners (daemon/listen.c) do not hand to the E2B front end comes here, with who asks.
 *
 *   GET    /healthz                  the daemon serves
 *   GET    /version
 *   POST   /v1/sandboxes             create
 *   GET    /v1/sandboxes             list
 *   GET    /v1/sandboxes/{id}        get
 *   DELETE /v1/sandboxes/{id}        destroy
 *   POST   /v1/sandboxes/{id}/exec   run a process, stream its events (exec.c)
 *   POST   /v1/sandboxes/{id}/timeout   set or clear the timeout (the reaper destroys it)
 *   POST   /v1/sandboxes/{id}/pause | resume | hibernate
 *
 * The handlers parse the request, call the core (core/sandboxes.h) and write the reply; the
 * registry itself is core/server.c. */
#include <errno.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proto.h"
#include "api/api.h"
#include "api/artifacts_api.h"
#include "api/browser_api.h"
#include "api/egress_api.h"
#include "api/exec_api.h"
#include "http/exec.h"
#include "api/files.h"
#include "api/procs.h"
#include "api/snapshots_api.h"
#include "api/templates_api.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/query.h"
#include "core/boot.h"
#include "core/gc.h"
#include "core/hibernate.h"
#include "core/sandboxes.h"
#include "core/server_int.h"
#include "core/snapshots.h"
#include "http/admit.h"
#include "http/http.h"

static void method_not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "kind", "invalid", "message",
                             "method not allowed here");
    gbx_http_reply_json(req, 405, body);
}

#define LIST_DEFAULT_LIMIT 100
#define LIST_MAX_LIMIT 1000
#define LIST_MAX_LABELS 16

/* GET /v1/sandboxes?label=k=v&template=NAME&limit=N&cursor=C
 * Every label filter must match. The cursor is opaque to clients: "<created_ns>.<id>" of the
 * last sandbox of the previous page. */
static void handle_list(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    const char *labels[LIST_MAX_LABELS][2], *label_in[LIST_MAX_LABELS];
    char labelbuf[LIST_MAX_LABELS][260];
    size_t nlabels = 0;
    const char *template_name = NULL, *cursor = NULL;
    uint64_t limit = LIST_DEFAULT_LIMIT;
    const struct gbx_query_param params[] = {
        {.name = "label",
         .kind = GBX_QUERY_STRS,
         .out = label_in,
         .count = &nlabels,
         .cap = LIST_MAX_LABELS},
        {.name = "template", .kind = GBX_QUERY_STR, .out = &template_name},
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = LIST_MAX_LIMIT},
        {.name = "cursor", .kind = GBX_QUERY_STR, .out = &cursor},
    };
    struct gbx_query q = {0};
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), 0, &err) < 0) {
        gbx_http_reply_err(req, err);
        goto out;
    }
    for (size_t i = 0; i < nlabels; i++) {
        const char *eq = strchr(label_in[i], '=');
        if (eq == NULL || strlen(label_in[i]) >= sizeof(labelbuf[i])) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'label' must be KEY=VALUE (at most %d of them)", LIST_MAX_LABELS);
            goto out;
        }
        snprintf(labelbuf[i], sizeof(labelbuf[i]), "%s", label_in[i]);
        labelbuf[i][eq - label_in[i]] = '\0';
        labels[i][0] = labelbuf[i];
        labels[i][1] = labelbuf[i] + (eq - label_in[i]) + 1;
    }
    int64_t cur_ns = 0;
    const char *cur_id = NULL;
    if (cursor) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(cursor, &end, 10);
        if (errno || end == cursor || *end != '.' || v < 0 || gbx_sandbox_id_valid(end + 1) < 0) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'cursor' is not one this server gave (use next_cursor)");
            goto out;
        }
        cur_ns = v;
        cur_id = end + 1;
    }
    size_t n = 0;
    for (struct gbx_live *l = s->live; l; l = l->next)
        n++;
    struct gbx_live **v = gbx_xcalloc(n ? n : 1, sizeof(struct gbx_live *));
    size_t m = 0;
    for (struct gbx_live *l = s->live; l; l = l->next) {
        if (!gbx_actor_sees(who, l->owner) ||
            (template_name && !gbx_template_shown_is(l->template_name, template_name)))
            continue;
        size_t i;
        for (i = 0; i < nlabels; i++) {
            json_t *lv = json_object_get(l->labels, labels[i][0]);
            if (!json_is_string(lv) || strcmp(json_string_value(lv), labels[i][1]) != 0)
                break;
        }
        if (i == nlabels)
            v[m++] = l;
    }
    qsort(v, m, sizeof(struct gbx_live *), gbx_sandboxes_cmp);
    json_t *arr = json_array();
    size_t i = 0;
    if (cur_id) /* skip to the first after the cursor's place in the order */
        while (i < m && (v[i]->created_ns > cur_ns ||
                         (v[i]->created_ns == cur_ns && strcmp(v[i]->sb->id, cur_id) <= 0)))
            i++;
    size_t first = i;
    for (; i < m && i - first < limit; i++)
        json_array_append_new(arr, gbx_srv_sandbox_json(v[i]));
    json_t *next = json_null();
    if (i < m && i > first) {
        gbx_autofree char *c =
            gbx_asprintf("%lld.%s", (long long)v[i - 1]->created_ns, v[i - 1]->sb->id);
        next = json_string(c);
    }
    free(v);
    gbx_http_reply_json(req, 200, json_pack("{s:o,s:o}", "sandboxes", arr, "next_cursor", next));
out:
    gbx_query_release(&q);
}

static void deleted(void *arg, const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    if (req == NULL)
        return; /* the client left: the sandbox went anyway */
    if (err)
        gbx_http_reply_err(req, err);
    else
        gbx_http_reply_json(req, 204, NULL);
}

static void handle_delete(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req, const char *id)
{
    struct gbx_live *l = gbx_sandboxes_find(s, who, id);
    if (l == NULL) {
        gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        return;
    }
    /* a 204 means it is gone: while a hibernate holds it, the answer waits for that to stop */
    gbx_sandboxes_destroy_later(s, who, l, "sandbox.delete", NULL, deleted,
                                gbx_http_later_new(req));
}

/* POST /v1/sandboxes/{id}/pause | resume: freeze or thaw every process (idempotent). A
 * resume may carry {"timeout": ...}, the timeout from then on. */
static void replied_hibernate(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    if (req == NULL)
        return;
    if (err)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, 200, gbx_srv_sandbox_json(l));
}

/* POST /v1/sandboxes/{id}/hibernate {}: processes, memory and files to disk (CRIU). */
static void handle_hibernate(struct gbx_server *s, const struct gbx_actor *who,
                             struct evhttp_request *req, struct gbx_live *l)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
        return method_not_allowed(req, "POST");
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    size_t n = json_object_size(body);
    json_decref(body);
    if (n)
        return gbx_http_reply_error(req, GBX_ERR_INVALID, "hibernate takes no fields");
    gbx_hibernate(s, who, l, replied_hibernate, gbx_http_later_new(req));
}

static void handle_pause(struct gbx_server *s, const struct gbx_actor *who,
                         struct evhttp_request *req, struct gbx_live *l, int pause)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
        return method_not_allowed(req, "POST");
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    json_t *v = json_object_get(body, "timeout");
    uint64_t ms = 0;
    if (json_object_size(body) > (v ? 1u : 0u) ||
        (v && (pause || gbx_json_timeout_ms(v, &ms) < 0))) {
        json_decref(body);
        return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                    pause ? "pause takes no fields"
                                          : "expected {} or {\"timeout\": seconds or a "
                                            "duration like \"5m\"}");
    }
    struct gbx_err *err = NULL;
    if (v && gbx_sandboxes_check_timeout(s, ms, &err) < 0) {
        json_decref(body);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    if (l->busy) {
        json_decref(body);
        return gbx_http_reply_error(
            req, GBX_ERR_CONFLICT, "sandbox '%s' is busy with %s", l->sb->id,
            l->restarting                ? "a rollback"
            : l->busy == GBX_BUSY_WORKER ? (l->hibernated ? "waking" : "a hibernate")
                                         : "a snapshot");
    }
    if (l->hibernated && !pause) {
        if (v)
            gbx_sandboxes_set_expiry(s, who, l, ms ? gbx_realtime_ns() + (int64_t)ms * 1000000 : 0,
                                     json_incref(body));
        json_decref(body);
        return gbx_hibernate_wake(s, who, l, replied_hibernate, gbx_http_later_new(req));
    }
    if (gbx_sandboxes_pause(s, who, l, pause, &err) < 0) {
        json_decref(body);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    if (v)
        gbx_sandboxes_set_expiry(s, who, l, ms ? gbx_realtime_ns() + (int64_t)ms * 1000000 : 0,
                                 json_incref(body));
    else if (!pause && l->expires_ns && l->expires_ns <= gbx_realtime_ns() && l->on_timeout_pause)
        /* resumed after its timeout paused it: without a new timeout it would pause again at
         * once; it runs on with none, as if the caller had cleared it */
        gbx_sandboxes_set_expiry(s, who, l,
                                 s->limits.max_timeout_ms
                                     ? gbx_realtime_ns() +
                                           (int64_t)s->limits.max_timeout_ms * 1000000
                                     : 0,
                                 json_pack("{s:s}", "reason", "resumed"));
    json_decref(body);
    gbx_http_reply_json(req, 200, gbx_srv_sandbox_json(l));
}

static void handle_timeout(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    json_t *v = json_object_get(body, "timeout");
    uint64_t ms = 0;
    if (json_object_size(body) != 1 || v == NULL || gbx_json_timeout_ms(v, &ms) < 0) {
        json_decref(body);
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "expected {\"timeout\": seconds or a duration like \"5m\"}; 0 "
                             "removes the timeout");
        return;
    }
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_sandboxes_check_timeout(s, ms, &err) < 0) {
        json_decref(body);
        return gbx_http_reply_err(req, err);
    }
    gbx_sandboxes_set_expiry(s, who, l, ms ? gbx_realtime_ns() + (int64_t)ms * 1000000 : 0, body);
    gbx_http_reply_json(req, 200, gbx_srv_sandbox_json(l));
}

/* A create whose template has a start command or a ready check answers once it is ready. */
static void created_ready(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    if (req == NULL)
        return;
    if (err)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, 201, gbx_srv_sandbox_json(l));
}

struct create_reply {
    struct gbx_server *s;
    struct gbx_http_later *later;
};

static void created(void *arg, struct gbx_live *l, int existed, const struct gbx_err *err)
{
    struct create_reply *cr = arg;
    struct gbx_server *s = cr->s;
    struct gbx_http_later *later = cr->later;
    free(cr);
    char *start, *ready;
    if (l && !existed && gbx_boot_needed(s, l, &start, &ready))
        return gbx_boot(s, s->base, l, start, ready, created_ready, later);
    struct evhttp_request *req = gbx_http_later_take(later);
    if (req == NULL)
        return; /* the client left: the sandbox is there for a list to find */
    if (err)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, existed ? 200 : 201, gbx_srv_sandbox_json(l));
}

static void handle_create(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    /* the Idempotency-Key header is the same as the body's idempotency_key */
    const char *hkey = evhttp_find_header(evhttp_request_get_input_headers(req), "Idempotency-Key");
    if (hkey) {
        json_t *bkey = json_object_get(body, "idempotency_key");
        if (bkey && (!json_is_string(bkey) || strcmp(json_string_value(bkey), hkey) != 0)) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "the Idempotency-Key header and 'idempotency_key' differ");
            json_decref(body);
            return;
        }
        json_object_set_new(body, "idempotency_key", json_string(hkey));
    }
    /* made off the loop: the reply comes when the sandbox answers */
    struct create_reply *cr = gbx_xcalloc(1, sizeof(*cr));
    cr->s = s;
    cr->later = gbx_http_later_new(req);
    gbx_sandboxes_create_async(s, who, body, created, cr);
    json_decref(body);
}

/* The prefix "/name" of sub, followed by nothing or by '/': returns what follows, or NULL. */
static const char *sub_prefix(const char *sub, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(sub, name, n) != 0 || (sub[n] != '\0' && sub[n] != '/'))
        return NULL;
    return sub + n;
}

/* /v1/sandboxes/{id}/<sub...> */
static void route_sandbox_sub(struct gbx_server *s, const struct gbx_actor *who,
                              struct evhttp_request *req, const char *id, const char *sub,
                              const char *path)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *files = sub_prefix(sub, "/files");
    const char *procs = sub_prefix(sub, "/processes");
    int is_exec = strcmp(sub, "/exec") == 0, is_timeout = strcmp(sub, "/timeout") == 0;
    if (strcmp(sub, "/artifacts") == 0)
        return gbx_api_sandbox_artifacts(s, who, req, id);
    if (strcmp(sub, "/pause") == 0 || strcmp(sub, "/resume") == 0 ||
        strcmp(sub, "/hibernate") == 0) {
        struct gbx_live *l = gbx_sandboxes_find(s, who, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        if (sub[1] == 'h')
            return handle_hibernate(s, who, req, l);
        return handle_pause(s, who, req, l, sub[1] == 'p');
    }
    {
        /* a hibernated sandbox has no processes: it is woken first (POST .../resume) */
        struct gbx_live *l = gbx_sandboxes_find(s, who, id);
        /* what needs its processes thaws a paused one made with auto_resume, and is refused
         * by any other paused one (its frozen agent would answer nothing) */
        if (l && l->paused && (is_exec || files || procs) && gbx_sandboxes_wake(s, l, "api") < 0)
            return gbx_http_reply_error(req, GBX_ERR_CONFLICT,
                                        "sandbox '%s' is paused: resume it first (or create it "
                                        "with auto_resume)",
                                        id);
        if (l && (l->hibernated || l->busy == GBX_BUSY_WORKER) && strcmp(sub, "/snapshots") != 0)
            return gbx_http_reply_error(req, GBX_ERR_CONFLICT, "sandbox '%s' is %s", id,
                                        l->restarting   ? "being rolled back; try again when it "
                                                          "is done"
                                        : l->hibernated ? "hibernated; resume it first"
                                                        : "being hibernated; resume it first");
    }
    if (strcmp(sub, "/snapshots") == 0 || strcmp(sub, "/fork") == 0 ||
        strcmp(sub, "/rollback") == 0) {
        struct gbx_live *l = gbx_sandboxes_find(s, who, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        (void)gbx_api_snapshots_sandbox(s, who, req, l, sub);
        return;
    }
    const char *browser = sub_prefix(sub, "/browser");
    if (browser) {
        struct gbx_live *l = gbx_sandboxes_find(s, who, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        return gbx_api_sandbox_browser(s, who, req, l, browser);
    }
    if (strcmp(sub, "/network") == 0 || strcmp(sub, "/egress") == 0) {
        struct gbx_live *l = gbx_sandboxes_find(s, who, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        return sub[1] == 'n' ? gbx_api_sandbox_network(s, who, req, l)
                             : gbx_api_sandbox_egress(s, who, req, l);
    }
    if (!files && !procs && !is_exec && !is_timeout)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
    if ((is_exec || is_timeout) && m != EVHTTP_REQ_POST)
        return method_not_allowed(req, "POST");
    struct gbx_live *l = gbx_sandboxes_find(s, who, id);
    if (l == NULL)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
    if (is_exec)
        return gbx_api_exec(s, who, s->base, req, l->sb, l->env);
    if (is_timeout)
        return handle_timeout(s, who, req, l);
    if (files)
        return gbx_api_files(s, who, s->base, req, l->sb, files);
    return gbx_api_procs(s, who, s->base, req, l->sb, procs);
}

void gbx_api_route(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (path == NULL) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "malformed request URI");
        return;
    }
    if (strlen(path) > 1024) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "request path longer than 1024 bytes");
        return;
    }
    if (strcmp(path, "/healthz") == 0) {
        if (m != EVHTTP_REQ_GET)
            return method_not_allowed(req, "GET");
        return gbx_http_reply_json(req, 200, gbx_srv_health_json(s, who));
    }
    {
        int64_t room = 0;
        gbx_autoerr struct gbx_err *aerr = NULL;
        if (gbx_http_admit(s, req, path, GBX_ADMIT_NATIVE, &room, &aerr) < 0)
            return gbx_http_reply_refused(s, req, aerr, room);
    }
    if (strcmp(path, "/metrics") == 0) {
        if (m != EVHTTP_REQ_GET)
            return method_not_allowed(req, "GET");
        return gbx_srv_handle_metrics(s, who, req);
    }
    if (strcmp(path, "/version") == 0) {
        if (m != EVHTTP_REQ_GET)
            return method_not_allowed(req, "GET");
        return gbx_http_reply_json(
            req, 200,
            json_pack("{s:s,s:i}", "version", GBX_VERSION, "agent_protocol", GBX_AGENT_VERSION));
    }
    if (strcmp(path, "/v1/egress") == 0 || strncmp(path, "/v1/egress/", 11) == 0 ||
        strcmp(path, "/v1/secrets") == 0 || strncmp(path, "/v1/secrets/", 12) == 0)
        return gbx_api_egress(s, who, req, path);
    if (strcmp(path, "/v1/artifacts") == 0 || strncmp(path, "/v1/artifacts/", 14) == 0)
        return gbx_api_artifacts(s, who, req, path);
    if (strcmp(path, "/v1/sessions") == 0 || strncmp(path, "/v1/sessions/", 13) == 0)
        return gbx_api_sessions(s->sessions, who, req, path);
    if (strcmp(path, "/v1/gc") == 0)
        return gbx_api_gc(s->gc, who, req);
    if (strcmp(path, "/v1/audit") == 0)
        return gbx_api_audit(s, who, req);
    if (strncmp(path, "/v1/daemon/", 11) == 0)
        return gbx_api_daemon(s, who, req, path);
    if (strcmp(path, "/v1/snapshots") == 0 || strncmp(path, "/v1/snapshots/", 14) == 0)
        return gbx_api_snapshots(s, who, req, path);
    if (strcmp(path, "/v1/templates") == 0 || strncmp(path, "/v1/templates/", 14) == 0)
        return gbx_api_templates(s, who, s->base, req, path);
    if (strcmp(path, "/v1/apikeys") == 0 || strncmp(path, "/v1/apikeys/", 12) == 0)
        return gbx_srv_handle_apikeys(s, who, req, path);
    if (strcmp(path, "/v1/sandboxes") == 0) {
        if (m == EVHTTP_REQ_POST)
            return handle_create(s, who, req);
        if (m == EVHTTP_REQ_GET)
            return handle_list(s, who, req);
        return method_not_allowed(req, "GET, POST");
    }
    if (strncmp(path, "/v1/sandboxes/", 14) == 0) {
        char idbuf[GBX_ID_MAX + 1];
        const char *rest = path + 14;
        const char *slash = strchr(rest, '/');
        size_t idlen = slash ? (size_t)(slash - rest) : strlen(rest);
        if (idlen > GBX_ID_MAX) {
            gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such sandbox");
            return;
        }
        memcpy(idbuf, rest, idlen);
        idbuf[idlen] = '\0';
        const char *id = idbuf;
        if (slash)
            return route_sandbox_sub(s, who, req, id, slash, path);
        if (gbx_sandbox_id_valid(id) < 0) {
            gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such sandbox");
            return;
        }
        if (m == EVHTTP_REQ_GET) {
            struct gbx_live *l = gbx_sandboxes_find(s, who, id);
            if (l == NULL)
                return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
            return gbx_http_reply_json(req, 200, gbx_srv_sandbox_json(l));
        }
        if (m == EVHTTP_REQ_DELETE)
            return handle_delete(s, who, req, id);
        return method_not_allowed(req, "GET, DELETE");
    }
    gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
}
