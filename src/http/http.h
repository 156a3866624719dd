/* SPDX-License-Identifier: MIT */
/* HTTP glue over libevent's evhttp: JSON replies, the error contract, request bodies. */
#ifndef GBX_HTTP_HTTP_H
#define GBX_HTTP_HTTP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/jsontext.h" /* gbx_json_text, for the handlers that use it */

struct evbuffer;
struct evhttp_request;

/* Map an error kind to its HTTP status (the only place that does). */
int gbx_http_status_for(enum gbx_err_kind kind);
/* The reason phrase for a status. */
const char *gbx_http_reason(int status);
/* Reply with a JSON value (stolen) and status. */
void gbx_http_reply_json(struct evhttp_request *req, int status, json_t *body);
/* Reply {"error":{"kind":..., "message":...}} with the status for kind. */
void gbx_http_reply_error(struct evhttp_request *req, enum gbx_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void gbx_http_reply_err(struct evhttp_request *req, const struct gbx_err *err);
/* The same with an explicit status (413, 416, ...) for cases the kind does not say. */
void gbx_http_reply_error_status(struct evhttp_request *req, int status, enum gbx_err_kind kind,
                                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Send one chunk of a streamed reply (b is copied out) with backpressure: when the client's
 * connection then holds more than cap bytes and *paused is clear, set *paused, pause the
 * agent connection ac (may be NULL) and have drained(conn, arg) called once everything is
 * written out — evhttp keeps one "written" callback per connection, so it is set only on
 * the chunk that crosses the cap, and the caller sends nothing more until it fires. */
struct gbx_aconn;
struct evhttp_connection;
void gbx_http_send_chunk(struct evhttp_request *req, struct evbuffer *b, size_t cap, int *paused,
                         struct gbx_aconn *ac, void (*drained)(struct evhttp_connection *, void *),
                         void *arg);
/* One JSON value as a chunk of a streamed reply: a line (NDJSON), or, when sse, a
 * server-sent event with that id. */
void gbx_http_chunk_json(struct evhttp_request *req, const json_t *v, int sse, long long id);
/* From a streamed reply's connection close callback: when the client left mid-reply, evhttp
 * has detached the request and leaves it to us; ending the reply is what frees it. */
void gbx_http_stream_abandoned(struct evhttp_request *req);
/* The largest JSON request body gbx_http_body_object accepts (413 beyond). */
void gbx_http_set_json_limit(size_t bytes);
/* Parse the request body as a JSON object (an empty body is {}). On failure replies 400
 * and returns NULL. Depth and size are bounded. */
json_t *gbx_http_body_object(struct evhttp_request *req);

/* Parse a Range header against size. 0: serve the whole thing (no header, or one we ignore:
 * malformed, several ranges, another unit); 1: off and len set; -1: unsatisfiable (416). */
int gbx_http_parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len);
/* Only the keys (NULL-terminated) in body; else replies 400 "unknown field '<key>' (expected
 * <expected>)" and returns -1. */
int gbx_http_only_fields(struct evhttp_request *req, json_t *body, const char *const *keys,
                         const char *expected);
/* A reply that comes later, once work off the loop is done. _take frees the handle and gives
 * the request back, or NULL when its client has gone away meanwhile (nothing to answer). */
struct gbx_http_later;
struct gbx_http_later *gbx_http_later_new(struct evhttp_request *req);
struct evhttp_request *gbx_http_later_take(struct gbx_http_later *l);

#endif
