/* SPDX-License-Identifier: MIT */
/* GET /v1/daemon/config (the settings in force, and where each came from) and POST
 * /v1/daemon/reload (read the configuration file and the flags again, as SIGHUP does): the
 * admin's, answered by the daemon's settings (daemon/settings.c through gbx_daemon_ops). */
#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <string.h>

#include "api/api.h"
#include "base/err.h"
#include "core/actor.h"
#include "core/server_int.h"
#include "http/http.h"

void gbx_api_daemon(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                    const char *path)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    int config = strcmp(path, "/v1/daemon/config") == 0;
    int reload = strcmp(path, "/v1/daemon/reload") == 0;
    if (!config && !reload)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
    if (!who->admin)
        return gbx_http_reply_error(req, GBX_ERR_PERMISSION,
                                    "the daemon's settings are the admin's (the unix socket)");
    if (s->daemon_ops == NULL)
        return gbx_http_reply_error(req, GBX_ERR_UNAVAILABLE, "this server has no settings");
    if (config) {
        if (m != EVHTTP_REQ_GET)
            return gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                               "method not allowed (allowed: GET)");
        return gbx_http_reply_json(req, 200, s->daemon_ops->config(s->daemon_arg));
    }
    if (m != EVHTTP_REQ_POST)
        return gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                           "method not allowed (allowed: POST)");
    /* no body, or {} */
    if (evbuffer_get_length(evhttp_request_get_input_buffer(req)) > 0) {
        json_t *body = gbx_http_body_object(req);
        if (body == NULL)
            return;
        size_t n = json_object_size(body);
        json_decref(body);
        if (n != 0)
            return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                        "a reload takes no fields: it reads the configuration "
                                        "file and the daemon's flags again");
    }
    json_t *report = NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    if (s->daemon_ops->reload(s->daemon_arg, who, &report, &err) < 0)
        return gbx_http_reply_err(req, err);
    return gbx_http_reply_json(req, 200, report);
}
