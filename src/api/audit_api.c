/* SPDX-License-Identifier: MIT */
/* GET /v1/audit: the audit log, read back.
 *
 *   ?sandbox=ID     records about that sandbox
 *   ?session=ID     records whose detail names that session ("session": session.create,
 *                   session.delete, its sandbox's delete; its calls are in its own log)
 *   ?key=NAME       records whose actor is NAME (an API key's name, "admin" or "system")
 *   ?kind=K         records of kind K exactly; "K*" (a final '*') for the kinds that start
 *                   with K ("egress.*", "sandbox.*")
 *   ?since=T        at or after T; ?until=T: before T (unix seconds, or RFC 3339 with a zone)
 *   ?after=SEQ      records after that sequence number (the cursor: the reply's next_after)
 *   ?limit=N        at most N records, 1 to 1000 (default 100)
 *
 * Reply: {"records": [{seq, time, actor, kind, sandbox (or null), detail (an object), hash}],
 * "next_after": the last record's seq (the request's after when there is none)}, oldest
 * first. The admin (the unix socket) reads every record; an API key only those it is the
 * actor of and those about the sandboxes it has (gbx_store_audit_find's visible_to). Any
 * other parameter, a time that is not one, or a limit out of range: 400. */
#include <event2/http.h>
#include <stdint.h>
#include <string.h>

#include "api/api.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/query.h"
#include "core/actor.h"
#include "core/server.h"
#include "http/http.h"
#include "store/store.h"

#define AUDIT_LIMIT_DEFAULT 100
#define AUDIT_LIMIT_MAX 1000

static const char *time_arg(void *out, const char *value)
{
    return gbx_parse_time_ns(value, out) < 0
               ? "unix seconds or an RFC 3339 time with a zone (2026-12-03T19:00:00Z)"
               : NULL;
}

static int add_row(void *arg, const struct gbx_audit_row *r)
{
    json_t *records = arg;
    json_t *d = r->detail && *r->detail ? json_loads(r->detail, 0, NULL) : NULL;
    if (!json_is_object(d)) {
        json_decref(d);
        d = json_object();
    }
    gbx_autofree char *ts = gbx_rfc3339(r->ts_ns);
    const char *sb = r->sandbox && *r->sandbox ? r->sandbox : NULL;
    json_array_append_new(
        records, json_pack("{s:I,s:s,s:s,s:s,s:s?,s:o,s:s}", "seq", (json_int_t)r->seq, "time", ts,
                           "actor", r->actor ? r->actor : "", "kind", r->kind ? r->kind : "",
                           "sandbox", sb, "detail", d, "hash", r->hash ? r->hash : ""));
    return 0;
}

void gbx_api_audit(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
        return gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                           "method not allowed (use GET)");
    }
    const char *sandbox = NULL, *session = NULL, *key = NULL, *kind = NULL;
    int64_t since = 0, until = 0;
    uint64_t after = 0, limit = AUDIT_LIMIT_DEFAULT;
    const struct gbx_query_param params[] = {
        {.name = "sandbox", .kind = GBX_QUERY_STR, .out = &sandbox},
        {.name = "session", .kind = GBX_QUERY_STR, .out = &session},
        {.name = "key", .kind = GBX_QUERY_STR, .out = &key},
        {.name = "kind", .kind = GBX_QUERY_STR, .out = &kind},
        {.name = "since", .kind = GBX_QUERY_FN, .out = &since, .fn = time_arg},
        {.name = "until", .kind = GBX_QUERY_FN, .out = &until, .fn = time_arg},
        {.name = "after", .kind = GBX_QUERY_U64, .out = &after, .max = INT64_MAX},
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = AUDIT_LIMIT_MAX},
    };
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct gbx_query q = {0};
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), 0, &err) < 0) {
        gbx_query_release(&q);
        return gbx_http_reply_err(req, err);
    }
    if (since && until && until <= since) {
        gbx_query_release(&q);
        return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                    "query parameter 'until' must be later than 'since'");
    }
    struct gbx_audit_filter f = {
        .sandbox = sandbox,
        .session = session,
        .actor = key,
        .since_ns = since,
        .until_ns = until,
        .after_seq = (int64_t)after,
        .limit = (int)limit,
        .visible_to = who->admin ? NULL : who->owner,
    };
    /* "egress.*": the kinds that start with "egress."; anything else is one kind */
    gbx_autofree char *prefix = NULL;
    if (kind && *kind && kind[strlen(kind) - 1] == '*') {
        prefix = gbx_xstrndup(kind, strlen(kind) - 1);
        f.kind = prefix;
        f.kind_prefix = 1;
    } else if (kind) {
        f.kind = kind;
    }
    json_t *records = json_array();
    int r = gbx_store_audit_find(gbx_server_store(s), &f, add_row, records, &err);
    gbx_query_release(&q);
    if (r < 0) {
        json_decref(records);
        return gbx_http_reply_err(req, err);
    }
    size_t n = json_array_size(records);
    json_int_t next = n ? json_integer_value(json_object_get(json_array_get(records, n - 1), "seq"))
                        : (json_int_t)after;
    gbx_http_reply_json(req, 200, json_pack("{s:o,s:I}", "records", records, "next_after", next));
}
