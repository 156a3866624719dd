/* SPDX-License-Identifier: MIT */
/* The egress routes: the emergency block, credentials, and a sandbox's network policy and
 * egress log (egress_api.c). */
#ifndef GBX_API_EGRESS_API_H
#define GBX_API_EGRESS_API_H

#include <event2/http.h>

#include "core/sandboxes.h"
#include "core/server.h"

/* /v1/egress, /v1/egress/block, /v1/secrets, /v1/secrets/{name} */
void gbx_api_egress(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                    const char *path);
/* GET, PUT /v1/sandboxes/{id}/network */
void gbx_api_sandbox_network(struct gbx_server *s, const struct gbx_actor *who,
                             struct evhttp_request *req, struct gbx_live *l);
/* GET /v1/sandboxes/{id}/egress */
void gbx_api_sandbox_egress(struct gbx_server *s, const struct gbx_actor *who,
                            struct evhttp_request *req, struct gbx_live *l);

#endif
