/* SPDX-License-Identifier: MIT */
/* Record as actor (its audit name), then reply to req: status with body (stolen, may be NULL)
 * once the record is durable, or an error saying what was done and that its record could not
 * be written (a client that went away meanwhile gets nothing). An acknowledged call is a
 * recorded call (core/server.h gbx_server_audit_then). */
#ifndef GBX_HTTP_RECORDED_H
#define GBX_HTTP_RECORDED_H

#include <jansson.h>

#include "core/server.h"

struct evhttp_request;

void gbx_http_reply_recorded(struct gbx_server *s, const char *actor, const char *kind,
                             const char *sandbox, json_t *detail, struct evhttp_request *req,
                             int status, json_t *body);

#endif
