/* SPDX-License-Identifier: MIT */
/* The worker's HTTPS client for the Managed Agents control plane: libcurl, loaded with dlopen
 * on first use like the CLI's admin-socket client (src/cli/api.c), so that no other glovebox
 * command pays for it. One request per call, each with its own handle: thread-safe once
 * gbx_worker_http_load has succeeded. */
#ifndef GBX_WORKER_HTTP_H
#define GBX_WORKER_HTTP_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"
#include "base/util.h"

struct gbx_worker_http_req {
    const char *method;    /* GET, POST */
    const char *url;       /* absolute */
    const char *token;     /* Authorization: Bearer TOKEN (never logged) */
    const char *version;   /* anthropic-version */
    const char *worker_id; /* Anthropic-Worker-ID, or NULL */
    json_t *body;          /* borrowed; NULL: no body (a POST then sends an empty one) */
    long timeout_ms;       /* the whole request; 0: none */
    /* A streaming request (on_data set): the body of a 2xx answer goes to on_data as it
     * arrives instead of *reply; on_open is called once with the status when the headers
     * are in; the request ends when abort returns non-zero (checked about every second and
     * at each piece of data). */
    void (*on_open)(void *arg, long status);
    void (*on_data)(void *arg, const char *buf, size_t len);
    int (*abort)(void *arg);
    void *arg;
};

/* Load libcurl and initialise it; call once before any thread starts. */
int gbx_worker_http_load(struct gbx_err **err) GBX_WUR;

/* One request. Returns the HTTP status with *reply (may be NULL) set to the parsed JSON
 * body (NULL when empty or not JSON, or when streamed), or -1 with *err set when there was
 * no answer (connection, TLS, timeout, abort). Bodies over 64 MiB are cut off (-1). */
int gbx_worker_http(const struct gbx_worker_http_req *r, json_t **reply, struct gbx_err **err);

/* Percent-encode s for a query string (unreserved characters kept). Caller frees. */
char *gbx_worker_http_escape(const char *s);

#endif
