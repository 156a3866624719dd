/* SPDX-License-Identifier: MIT */
#include "http/http.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/aconn.h"
#include "base/mem.h"

#define GBX_JSON_MAX_DEPTH 32

int gbx_http_status_for(enum gbx_err_kind kind)
{
    switch (kind) {
    case GBX_ERR_NOT_FOUND:
        return 404;
    case GBX_ERR_CONFLICT:
        return 409;
    case GBX_ERR_INVALID:
        return 400;
    case GBX_ERR_PERMISSION:
        return 403;
    case GBX_ERR_UNAVAILABLE:
        return 503;
    case GBX_ERR_LIMIT:
        return 429;
    case GBX_ERR_STORAGE:
        return 507;
    case GBX_ERR_INTERNAL:
    default:
        return 500;
    }
}

const char *gbx_http_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 416:
        return "Range Not Satisfiable";
    case 429:
        return "Too Many Requests";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 504:
        return "Gateway Timeout";
    case 507:
        return "Insufficient Storage";
    case 503:
        return "Service Unavailable";
    default:
        return "Internal Server Error";
    }
}

void gbx_http_reply_json(struct evhttp_request *req, int status, json_t *body)
{
    struct evbuffer *buf = evbuffer_new();
    GBX_BUG_ON(buf == NULL);
    if (body) {
        char *text = json_dumps(body, JSON_COMPACT);
        GBX_BUG_ON(text == NULL);
        evbuffer_add(buf, text, strlen(text));
        evbuffer_add(buf, "\n", 1);
        free(text);
        json_decref(body);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "application/json");
    }
    evhttp_send_reply(req, status, gbx_http_reason(status), buf);
    evbuffer_free(buf);
}

static void reply_error_v(struct evhttp_request *req, int status, enum gbx_err_kind kind,
                          const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

static void reply_error_v(struct evhttp_request *req, int status, enum gbx_err_kind kind,
                          const char *fmt, va_list ap)
{
    char *msg = gbx_vasprintf(fmt, ap);
    json_t *body =
        json_pack("{s:{s:s,s:s}}", "error", "kind", gbx_err_kind_name(kind), "message", msg);
    free(msg);
    gbx_http_reply_json(req, status, body);
}

void gbx_http_reply_error(struct evhttp_request *req, enum gbx_err_kind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(req, gbx_http_status_for(kind), kind, fmt, ap);
    va_end(ap);
}

void gbx_http_reply_error_status(struct evhttp_request *req, int status, enum gbx_err_kind kind,
                                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(req, status, kind, fmt, ap);
    va_end(ap);
}

void gbx_http_reply_err(struct evhttp_request *req, const struct gbx_err *err)
{
    gbx_http_reply_error(req, err->kind, "%s", err->msg);
}

/* Deepest nesting of a JSON text, counted on the raw bytes before parsing. */
static int json_depth(const char *p, size_t n)
{
    int depth = 0, max = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > max)
                max = depth;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return max;
}

void gbx_http_chunk_json(struct evhttp_request *req, const json_t *v, int sse, long long id)
{
    gbx_autofree char *t = json_dumps(v, JSON_COMPACT);
    if (t == NULL)
        return;
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    if (sse)
        evbuffer_add_printf(b, "id: %lld\ndata: %s\n\n", id, t);
    else
        evbuffer_add_printf(b, "%s\n", t);
    evhttp_send_reply_chunk(req, b);
    evbuffer_free(b);
}

void gbx_http_stream_abandoned(struct evhttp_request *req)
{
    if (evhttp_request_get_connection(req) == NULL)
        evhttp_send_reply_end(req);
}

void gbx_http_send_chunk(struct evhttp_request *req, struct evbuffer *b, size_t cap, int *paused,
                         struct gbx_aconn *ac, void (*drained)(struct evhttp_connection *, void *),
                         void *arg)
{
    struct evhttp_connection *conn = evhttp_request_get_connection(req);
    if (conn == NULL)
        return;
    struct bufferevent *out = evhttp_connection_get_bufferevent(conn);
    size_t pending = evbuffer_get_length(bufferevent_get_output(out)) + evbuffer_get_length(b);
    if (!*paused && pending > cap) {
        *paused = 1;
        if (ac)
            gbx_aconn_pause(ac, 1);
        evhttp_send_reply_chunk_with_cb(req, b, drained, arg);
    } else {
        evhttp_send_reply_chunk(req, b);
    }
}

static size_t json_limit = 1u << 20;

void gbx_http_set_json_limit(size_t bytes)
{
    json_limit = bytes;
}

json_t *gbx_http_body_object(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n == 0)
        return json_object();
    if (n > json_limit) {
        gbx_http_reply_error_status(req, 413, GBX_ERR_LIMIT,
                                    "request body larger than %zu bytes (gloveboxd --max-body)",
                                    json_limit);
        return NULL;
    }
    const char *p = (const char *)evbuffer_pullup(in, -1);
    if (json_depth(p, n) > GBX_JSON_MAX_DEPTH) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "request body nests deeper than %d levels",
                             GBX_JSON_MAX_DEPTH);
        return NULL;
    }
    json_error_t jerr;
    json_t *v = json_loadb(p, n, JSON_REJECT_DUPLICATES, &jerr);
    if (v == NULL) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "request body is not valid JSON: %s (line %d)",
                             jerr.text, jerr.line);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        gbx_http_reply_error(req, GBX_ERR_INVALID, "request body must be a JSON object");
        return NULL;
    }
    return v;
}

struct gbx_http_later {
    struct evhttp_request *req; /* NULL once the client went away */
};

static void later_closed(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    struct gbx_http_later *l = arg;
    l->req = NULL;
}

struct gbx_http_later *gbx_http_later_new(struct evhttp_request *req)
{
    struct gbx_http_later *l = gbx_xcalloc(1, sizeof(*l));
    l->req = req;
    if (req) /* NULL: an internal caller, nobody to answer */
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), later_closed, l);
    return l;
}

struct evhttp_request *gbx_http_later_take(struct gbx_http_later *l)
{
    struct evhttp_request *req = l->req;
    if (req)
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), NULL, NULL);
    free(l);
    return req;
}

/* Parse a Range header against size. 0: serve the whole file (no header, or one we ignore:
 * malformed, multiple ranges, another unit); 1: off and len set; -1: unsatisfiable (416). */
int gbx_http_parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
    if (h == NULL)
        return 0;
    while (*h == ' ' || *h == '\t')
        h++;
    if (strncasecmp(h, "bytes=", 6) != 0)
        return 0;
    h += 6;
    while (*h == ' ')
        h++;
    if (strchr(h, ','))
        return 0; /* multiple ranges: RFC 9110 lets us answer with the whole file */
    const char *dash = strchr(h, '-');
    if (dash == NULL)
        return 0;
    uint64_t a = 0, b = 0;
    int has_a = dash > h, has_b = 0;
    const char *c;
    for (c = h; c < dash; c++) {
        if (*c < '0' || *c > '9' || a > (UINT64_MAX - 9) / 10)
            return 0;
        a = a * 10 + (uint64_t)(*c - '0');
    }
    for (c = dash + 1; *c && *c != ' ' && *c != '\t'; c++) {
        if (*c < '0' || *c > '9' || b > (UINT64_MAX - 9) / 10)
            return 0;
        b = b * 10 + (uint64_t)(*c - '0');
        has_b = 1;
    }
    while (*c == ' ' || *c == '\t')
        c++;
    if (*c != '\0' || (!has_a && !has_b))
        return 0;
    if (!has_a) { /* suffix: the last b bytes */
        if (b == 0 || size == 0)
            return -1;
        *len = b < size ? b : size;
        *off = size - *len;
        return 1;
    }
    if (has_b && b < a)
        return 0; /* invalid: ignored */
    if (a >= size)
        return -1;
    uint64_t last = has_b && b < size - 1 ? b : size - 1;
    *off = a;
    *len = last - a + 1;
    return 1;
}

int gbx_http_only_fields(struct evhttp_request *req, json_t *body, const char *const *keys,
                         const char *expected)
{
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        int known = 0;
        for (const char *const *k = keys; *k; k++)
            known |= strcmp(key, *k) == 0;
        if (!known) {
            gbx_http_reply_error(req, GBX_ERR_INVALID, "unknown field '%s' (expected %s)", key,
                                 expected);
            return -1;
        }
    }
    return 0;
}
