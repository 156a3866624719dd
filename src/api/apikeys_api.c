/* SPDX-License-Identifier: MIT */
/* API keys, on the admin socket only (docs/api.yaml):
 *
 *   POST   /v1/apikeys               {name, quota?}   201 {name, key}: the key, shown once
 *   GET    /v1/apikeys                                200 {apikeys: [{name, revoked}]}
 *   DELETE /v1/apikeys/{name}                         204: revoked
 *   GET    /v1/apikeys/{name}/quota                   200 {name, own, quota, use}
 *   PUT    /v1/apikeys/{name}/quota  {quota}          200 the same, after setting its own
 *
 * A key's own quota ("sandboxes=10,memory=4G") is stored with it and overrides the daemon's
 * --quota-* for the quotas it names (api/limits.h). */
#include <errno.h>
#include <event2/http.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "http/recorded.h"
#include "core/limits.h"
#include "api/api.h"
#include "core/server_int.h"
#include "base/mem.h"
#include "base/parse.h"
#include "store/store.h"

static void method_not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "kind", "invalid", "message",
                             "method not allowed here");
    gbx_http_reply_json(req, 405, body);
}

static int list_key(void *arg, const struct gbx_apikey_info *k)
{
    json_t *arr = arg;
    json_t *o = json_pack("{s:s,s:b}", "name", k->name, "revoked", k->revoked_ns != 0);
    json_array_append_new(arr, o);
    return 0;
}

/* A key's own quota as given ("sandboxes=10,memory=4G"): checked, 0 or -1 with *err. */
static int quota_text_valid(json_t *v, struct gbx_err **err)
{
    struct gbx_quota q = {0};
    char why[200];
    if (!json_is_string(v) || json_string_length(v) > 512 ||
        gbx_quota_parse(json_string_value(v), &q, why, sizeof(why)) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'quota': %s",
                           json_is_string(v) ? why
                                             : "expected a string like \"sandboxes=10,memory=4G\"");
    return 0;
}

static json_t *quota_json(const struct gbx_quota *q)
{
    gbx_autofree char *text = gbx_quota_format(q);
    return json_loads(text, 0, NULL);
}

/* GET /v1/apikeys/{name}/quota: the quotas that apply to the key (its own over the daemon's)
 * and what it holds; PUT {"quota": "sandboxes=10,..."} sets its own ("" or null: none). */
static void handle_apikey_quota(struct gbx_server *s, const struct gbx_actor *who,
                                struct evhttp_request *req, const char *name)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    gbx_autoerr struct gbx_err *err = NULL;
    gbx_autofree char *own = NULL;
    if (!who->admin)
        return gbx_http_reply_error(req, GBX_ERR_PERMISSION,
                                    "API keys are managed on the admin socket only");
    if (m == EVHTTP_REQ_PUT) {
        json_t *body = gbx_http_body_object(req);
        if (body == NULL)
            return;
        json_t *v = json_object_get(body, "quota");
        if (json_object_size(body) != 1 || v == NULL ||
            (!json_is_null(v) && json_string_length(v) > 0 && quota_text_valid(v, &err) < 0)) {
            json_decref(body);
            if (err)
                return gbx_http_reply_err(req, err);
            return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                        "expected {\"quota\": \"sandboxes=10,memory=4G,...\"} "
                                        "(\"\" or null: the daemon's quotas)");
        }
        const char *text = json_is_string(v) ? json_string_value(v) : NULL;
        if (gbx_store_apikey_quota_set(s->store, name, text, &err) < 0) {
            json_decref(body);
            return gbx_http_reply_err(req, err);
        }
        gbx_server_audit(s, who, "apikey.quota", NULL,
                         json_pack("{s:s,s:s?}", "name", name, "quota", text));
        json_decref(body);
    } else if (m != EVHTTP_REQ_GET) {
        return method_not_allowed(req, "GET, PUT");
    }
    if (gbx_store_apikey_quota_get(s->store, name, &own) != 1)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no live API key named '%s'", name);
    struct gbx_quota q;
    gbx_srv_quota_of(s, name, &q);
    struct gbx_quota_use use = {0};
    for (const struct gbx_live *l = s->live; l; l = l->next) {
        if (strcmp(l->owner, name) != 0)
            continue;
        use.sandboxes++;
        use.memory += gbx_srv_quota_memory(s, &l->limits);
        use.disk += l->disk_bytes;
    }
    gbx_srv_creating_use(s, name, &use);
    json_t *u = json_pack("{s:I,s:I,s:I}", "sandboxes", (json_int_t)use.sandboxes, "memory",
                          (json_int_t)use.memory, "disk", (json_int_t)use.disk);
    gbx_http_reply_json(req, 200,
                        json_pack("{s:s,s:s?,s:o,s:o}", "name", name, "own", own, "quota",
                                  quota_json(&q), "use", u));
}

static void handle_apikeys(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, const char *name)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    struct gbx_err *err = NULL;
    if (!who->admin) {
        gbx_http_reply_error(req, GBX_ERR_PERMISSION,
                             "API keys are managed on the admin socket only");
        return;
    }
    if (name == NULL && m == EVHTTP_REQ_POST) {
        json_t *body = gbx_http_body_object(req);
        if (body == NULL)
            return;
        const char *n = json_string_value(json_object_get(body, "name"));
        json_t *quota = json_object_get(body, "quota");
        if (n == NULL || json_object_size(body) != 1u + (quota != NULL) || gbx_name_valid(n) < 0) {
            json_decref(body);
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "expected {\"name\": ..., \"quota\"?: ...}: a name of 1-63 of "
                                 "[a-z0-9-]");
            return;
        }
        if (quota && quota_text_valid(quota, &err) < 0) {
            json_decref(body);
            gbx_http_reply_err(req, err);
            gbx_err_free(err);
            return;
        }
        char key[GBX_APIKEY_LEN + 1];
        if (gbx_store_apikey_create(s->store, n, key, &err) < 0 ||
            (quota &&
             gbx_store_apikey_quota_set(s->store, n, json_string_value(quota), &err) < 0)) {
            gbx_http_reply_err(req, err);
            gbx_err_free(err);
        } else {
            /* answered once the record is durable (api/audit.c) */
            gbx_http_reply_recorded(
                s, who->name, "apikey.create", NULL,
                json_pack("{s:s,s:s?}", "name", n, "quota", json_string_value(quota)), req, 201,
                json_pack("{s:s,s:s}", "name", n, "key", key));
        }
        json_decref(body);
        return;
    }
    if (name == NULL && m == EVHTTP_REQ_GET) {
        json_t *arr = json_array();
        if (gbx_store_apikey_each(s->store, list_key, arr, &err) < 0) {
            json_decref(arr);
            gbx_http_reply_err(req, err);
            gbx_err_free(err);
            return;
        }
        gbx_http_reply_json(req, 200, json_pack("{s:o}", "apikeys", arr));
        return;
    }
    if (name && m == EVHTTP_REQ_DELETE) {
        if (gbx_store_apikey_revoke(s->store, name, &err) < 0) {
            gbx_http_reply_err(req, err);
            gbx_err_free(err);
            return;
        }
        gbx_http_reply_recorded(s, who->name, "apikey.revoke", NULL,
                                json_pack("{s:s}", "name", name), req, 204, NULL);
        return;
    }
    method_not_allowed(req, name ? "DELETE" : "GET, POST");
}

void gbx_srv_handle_apikeys(struct gbx_server *s, const struct gbx_actor *who,
                            struct evhttp_request *req, const char *path)
{
    if (strcmp(path, "/v1/apikeys") == 0)
        return handle_apikeys(s, who, req, NULL);
    const char *rest = path + 12, *slash = strchr(rest, '/');
    if (slash && strcmp(slash, "/quota") == 0 && (size_t)(slash - rest) < 64) {
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(slash - rest), rest);
        if (gbx_name_valid(name) < 0)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such API key");
        return handle_apikey_quota(s, who, req, name);
    }
    if (gbx_name_valid(rest) < 0)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such API key");
    handle_apikeys(s, who, req, rest);
}
