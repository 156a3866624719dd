/* SPDX-License-Identifier: MIT */
/* The artifact routes of the native front end (the service: core/artifacts.h). */
#ifndef GBX_API_ARTIFACTS_API_H
#define GBX_API_ARTIFACTS_API_H

#include <event2/http.h>

#include "core/server.h"

/* POST /v1/sandboxes/{id}/artifacts (id as it appears in the path, unchecked). */
void gbx_api_sandbox_artifacts(struct gbx_server *s, const struct gbx_actor *who,
                               struct evhttp_request *req, const char *id);
/* /v1/artifacts, /v1/artifacts/{id}, /v1/artifacts/{id}/content */
void gbx_api_artifacts(struct gbx_server *s, const struct gbx_actor *who,
                       struct evhttp_request *req, const char *path);

#endif
