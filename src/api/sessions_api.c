/* SPDX-License-Identifier: MIT */
/* The session routes (the engine is session/sessions.c):
 *
 *   POST   /v1/sessions                     {template?, memory?, ..., network?, workdir?} -> 201
 *   GET    /v1/sessions                     the caller's sessions
 *   GET    /v1/sessions/{id}                {id, sandbox_id, workdir, ...}
 *   DELETE /v1/sessions/{id}                its sandbox and its log
 *   GET    /v1/sessions/{id}/events         ?after=SEQ&limit=N; ?follow=1 (or SSE): live
 *   GET    /v1/sessions/{id}/verify         the log's hash chain checked
 *   POST   /v1/sessions/{id}/execute        {tool_use_id, name, input} -> {content, is_error}
 *
 * A tool's failure is a result with is_error, never an HTTP error. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/mem.h"
#include "base/query.h"
#include "core/actor.h"
#include "http/http.h"
#include "session/sessions.h"

/* ---- replies that come later ---------------------------------------------------------------- */

/* A create or delete: the request, unless its client left (arg: a gbx_http_later). */
static void reply_later(void *arg, json_t *body, const struct gbx_err *err, int status)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    if (req == NULL)
        json_decref(body); /* the client left: what was done is there for a list to find */
    else if (err)
        gbx_http_reply_err(req, err);
    else
        gbx_http_reply_json(req, status, body);
}

static void created(void *arg, json_t *body, const struct gbx_err *err)
{
    reply_later(arg, body, err, 201);
}

static void deleted(void *arg, json_t *body, const struct gbx_err *err)
{
    reply_later(arg, body, err, 204);
}

/* An execute's answer (arg: the request; evhttp keeps one whose client left until it is
 * answered). */
static void executed(void *arg, const json_t *result, int replayed, const struct gbx_err *err)
{
    struct evhttp_request *req = arg;
    if (err)
        return gbx_http_reply_err(req, err);
    if (replayed)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Glovebox-Replayed", "true");
    gbx_http_reply_json(req, 200, json_deep_copy(result));
}

/* ---- live events -------------------------------------------------------------------------- */

struct stream {
    struct evhttp_request *req;
    struct gbx_session_follower *f;
    int sse;
};

static void stream_event(void *arg, const json_t *ev)
{
    struct stream *st = arg;
    gbx_http_chunk_json(st->req, ev, st->sse, json_integer_value(json_object_get(ev, "seq")));
}

/* The session (or the daemon) ends: so does the stream. */
static void stream_end(void *arg)
{
    struct stream *st = arg;
    evhttp_connection_set_closecb(evhttp_request_get_connection(st->req), NULL, NULL);
    evhttp_send_reply_end(st->req);
    free(st);
}

static void stream_closed(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    struct stream *st = arg;
    gbx_session_unfollow(st->f);
    gbx_http_stream_abandoned(st->req);
    free(st);
}

static const struct gbx_session_follow_ops stream_ops = {.event = stream_event, .end = stream_end};

static void handle_events(struct evhttp_request *req, struct gbx_session *ses)
{
    uint64_t after = 0, limit = 1000;
    int follow = 0;
    const struct gbx_query_param params[] = {
        {.name = "after", .kind = GBX_QUERY_U64, .out = &after, .max = INT64_MAX},
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = 1000},
        {.name = "follow", .kind = GBX_QUERY_BOOL, .out = &follow},
    };
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct gbx_query q = {0};
    gbx_autoerr struct gbx_err *err = NULL;
    int bad = gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), 0, &err) < 0;
    gbx_query_release(&q);
    if (bad)
        return gbx_http_reply_err(req, err);
    const char *accept = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
    int sse = accept && strstr(accept, "text/event-stream");
    if (sse)
        follow = 1;
    int64_t last = 0;
    json_t *events =
        gbx_session_events(ses, (int64_t)after, follow ? 1000000 : (int)limit, &last, &err);
    if (events == NULL)
        return gbx_http_reply_err(req, err);
    if (!follow)
        return gbx_http_reply_json(
            req, 200, json_pack("{s:o,s:I}", "events", events, "next_after", (json_int_t)last));
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    evhttp_add_header(oh, "Content-Type", sse ? "text/event-stream" : "application/x-ndjson");
    evhttp_add_header(oh, "Cache-Control", "no-store");
    evhttp_send_reply_start(req, 200, "OK");
    struct stream *st = gbx_xcalloc(1, sizeof(*st));
    st->req = req;
    st->sse = sse;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        stream_event(st, ev);
    }
    json_decref(events);
    /* nothing is appended between the read and this: the loop is ours */
    st->f = gbx_session_follow(ses, &stream_ops, st);
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, st);
}

/* ---- the rest ------------------------------------------------------------------------------ */

static void handle_create(struct gbx_sessions *all, const struct gbx_actor *who,
                          struct evhttp_request *req)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    struct gbx_http_later *later = gbx_http_later_new(req);
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_sessions_create(all, who, body, created, later, &err) < 0) {
        gbx_http_later_take(later);
        gbx_http_reply_err(req, err);
    }
}

static void handle_delete(const struct gbx_actor *who, struct evhttp_request *req,
                          struct gbx_session *ses)
{
    struct gbx_http_later *later = gbx_http_later_new(req);
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_session_delete(ses, who, deleted, later, &err) < 0) {
        gbx_http_later_take(later);
        gbx_http_reply_err(req, err);
    }
}

static void handle_verify(struct evhttp_request *req, struct gbx_session *ses)
{
    gbx_autoerr struct gbx_err *err = NULL;
    json_t *j = gbx_session_verify(ses, &err);
    if (j == NULL)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, 200, j);
}

static void handle_execute(struct evhttp_request *req, struct gbx_session *ses)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"tool_use_id", "name", "input", NULL};
    if (gbx_http_only_fields(req, body, fields, "tool_use_id, name, input") < 0) {
        json_decref(body);
        return;
    }
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_session_execute(ses, json_string_value(json_object_get(body, "tool_use_id")),
                            json_string_value(json_object_get(body, "name")),
                            json_object_get(body, "input"), executed, req, &err) < 0)
        gbx_http_reply_err(req, err);
    json_decref(body);
}

static void not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed (use %s)", allow);
}

void gbx_api_sessions(struct gbx_sessions *all, const struct gbx_actor *who,
                      struct evhttp_request *req, const char *path)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(path, "/v1/sessions") == 0) {
        if (m == EVHTTP_REQ_POST)
            return handle_create(all, who, req);
        if (m == EVHTTP_REQ_GET)
            return gbx_http_reply_json(req, 200,
                                       json_pack("{s:o}", "sessions", gbx_sessions_list(all, who)));
        return not_allowed(req, "GET, POST");
    }
    const char *rest = path + strlen("/v1/sessions/");
    const char *slash = strchr(rest, '/');
    char id[32];
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n >= sizeof(id))
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such session");
    memcpy(id, rest, n);
    id[n] = '\0';
    struct gbx_session *ses = gbx_sessions_find(all, who, id);
    if (ses == NULL)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no session '%s'", id);
    const char *sub = slash ? slash : "";
    if (sub[0] == '\0') {
        if (m == EVHTTP_REQ_GET)
            return gbx_http_reply_json(req, 200, gbx_session_json(ses));
        if (m == EVHTTP_REQ_DELETE)
            return handle_delete(who, req, ses);
        return not_allowed(req, "GET, DELETE");
    }
    if (strcmp(sub, "/events") == 0)
        return m == EVHTTP_REQ_GET ? handle_events(req, ses) : not_allowed(req, "GET");
    if (strcmp(sub, "/verify") == 0)
        return m == EVHTTP_REQ_GET ? handle_verify(req, ses) : not_allowed(req, "GET");
    if (strcmp(sub, "/execute") == 0)
        return m == EVHTTP_REQ_POST ? handle_execute(req, ses) : not_allowed(req, "POST");
    gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
}
