/* SPDX-License-Identifier: MIT */
/* Per-request accounting: a latency histogram by route, method and status for /metrics, and
 * one structured log line per completed request. Like a Prometheus client's default registry,
 * the table is process-wide: the daemon has one server. */
#ifndef GBX_HTTP_REQMETRICS_H
#define GBX_HTTP_REQMETRICS_H

struct evbuffer;
struct evhttp_request;

/* Call when a request is dispatched: its completion is observed (status, duration) and
 * logged at info level with actor (copied). Requests whose client leaves before the reply is
 * complete are not observed. */
void gbx_reqmetrics_track(struct evhttp_request *req, const char *path, const char *actor);
/* Append the request families to a /metrics body. */
void gbx_reqmetrics_render(struct evbuffer *out);
void gbx_reqmetrics_reset(void);

#endif
