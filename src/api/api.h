/* SPDX-License-Identifier: MIT */
/* The native /v1 front end, as the listeners (daemon/listen.c) see it: one router, and the
 * handlers of its files that the router calls by name. */
#ifndef GBX_API_API_H
#define GBX_API_API_H

#include <jansson.h>

struct evhttp_request;
struct gbx_actor;
struct gbx_server;

/* Answer req as who: every native route (sandboxes_api.c). */
void gbx_api_route(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req);
/* gc_api.c: /v1/gc */
struct gbx_gc;
void gbx_api_gc(struct gbx_gc *gc, const struct gbx_actor *who, struct evhttp_request *req);
/* metrics.c: GET /metrics, and the body of GET /healthz */
void gbx_srv_handle_metrics(struct gbx_server *s, const struct gbx_actor *who,
                            struct evhttp_request *req);
json_t *gbx_srv_health_json(const struct gbx_server *s, const struct gbx_actor *who);
/* sessions_api.c: /v1/sessions and below (path: the whole request path) */
struct gbx_sessions;
void gbx_api_sessions(struct gbx_sessions *all, const struct gbx_actor *who,
                      struct evhttp_request *req, const char *path);
/* audit_api.c: GET /v1/audit */
/* GET /v1/daemon/config, POST /v1/daemon/reload (daemon_api.c). */
void gbx_api_daemon(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                    const char *path);
void gbx_api_audit(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req);
/* apikeys_api.c: /v1/apikeys and /v1/apikeys/... (path: the whole request path) */
void gbx_srv_handle_apikeys(struct gbx_server *s, const struct gbx_actor *who,
                            struct evhttp_request *req, const char *path);

#endif
