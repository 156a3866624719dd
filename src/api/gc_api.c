/* SPDX-License-Identifier: MIT */
/* GET /v1/gc (the retention policy and the last pass) and POST /v1/gc {"dry_run"} (a pass
 * now), the admin's: the route over the retention collector (core/gc.c). */
#include <event2/http.h>
#include <jansson.h>

#include "api/api.h"
#include "core/actor.h"
#include "core/gc.h"
#include "http/http.h"

void gbx_api_gc(struct gbx_gc *gc, const struct gbx_actor *who, struct evhttp_request *req)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (!who->admin)
        return gbx_http_reply_error(req, GBX_ERR_PERMISSION,
                                    "retention is the admin's (the unix socket)");
    if (m == EVHTTP_REQ_GET)
        return gbx_http_reply_json(req, 200, gbx_gc_status(gc));
    if (m != EVHTTP_REQ_POST)
        return gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                           "method not allowed (allowed: GET, POST)");
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    json_t *dry = json_object_get(body, "dry_run");
    if (json_object_size(body) > (dry ? 1u : 0u) || (dry && !json_is_boolean(dry))) {
        json_decref(body);
        return gbx_http_reply_error(req, GBX_ERR_INVALID, "expected {\"dry_run\": true|false}");
    }
    int dry_run = dry && json_is_true(dry);
    json_decref(body);
    gbx_http_reply_json(req, 200, gbx_gc_run_report(gc, dry_run));
}
