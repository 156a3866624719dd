/* SPDX-License-Identifier: MIT */
/* The egress routes:
 *
 *   GET    /v1/egress                        {blocked, default_mode, ca_certificate}
 *   POST   /v1/egress/block                  the emergency block: every live connection cut
 *   DELETE /v1/egress/block                  lift it
 *   GET    /v1/secrets                       names, hosts and header templates; never values
 *   POST   /v1/secrets                       {name, value, hosts, header} -> 201
 *   GET    /v1/secrets/{name}
 *   PUT    /v1/secrets/{name}                {value, hosts, header}: rotate
 *   DELETE /v1/secrets/{name}                revoke (the next request goes without it)
 *   GET    /v1/sandboxes/{id}/network        the sandbox's policy
 *   PUT    /v1/sandboxes/{id}/network        replace it, live
 *   GET    /v1/sandboxes/{id}/egress         policy, counters and the egress audit rows
 *
 * The block and the secrets are the admin's (the unix socket): an API key gets 403, and only
 * the admin may attach secrets to a sandbox. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>
#include <string.h>
#include <time.h>

#include "api/egress_api.h"
#include "http/http.h"
#include "http/recorded.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/query.h"
#include "egress/egress.h"
#include "store/store.h"

static void not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed (use %s)", allow);
}

static int admin_only(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req)
{
    if (who->admin)
        return 0;
    gbx_http_reply_error(req, GBX_ERR_PERMISSION,
                         "egress blocks and secrets are the admin's (use the unix socket)");
    return -1;
}

static void handle_egress_status(struct gbx_server *s, const struct gbx_actor *who,
                                 struct evhttp_request *req)
{
    struct gbx_egress *eg = gbx_server_egress(s);
    gbx_http_reply_json(req, 200,
                        json_pack("{s:b,s:s,s:s}", "blocked", gbx_egress_blocked(eg),
                                  "default_mode", gbx_egress_mode_name(gbx_egress_default_mode(eg)),
                                  "ca_certificate", gbx_egress_ca_pem(eg)));
}

static void handle_block(struct gbx_server *s, const struct gbx_actor *who,
                         struct evhttp_request *req)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (m != EVHTTP_REQ_POST && m != EVHTTP_REQ_DELETE)
        return not_allowed(req, "POST, DELETE");
    if (admin_only(s, who, req) < 0)
        return;
    int on = m == EVHTTP_REQ_POST;
    struct gbx_err *err = NULL;
    if (gbx_egress_block(gbx_server_egress(s), on, &err) < 0) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    gbx_http_reply_recorded(s, who->name, on ? "egress.block" : "egress.unblock", NULL, NULL, req,
                            200, json_pack("{s:b}", "blocked", on));
}

/* {name?, value, hosts, header}: name comes from the path for PUT */
static void secret_write(struct gbx_server *s, const struct gbx_actor *who,
                         struct evhttp_request *req, const char *name)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"name", "value", "hosts", "header", NULL};
    if (gbx_http_only_fields(req, body, fields, "name, value, hosts, header") < 0) {
        json_decref(body);
        return;
    }
    const char *bname = json_string_value(json_object_get(body, "name"));
    const char *value = json_string_value(json_object_get(body, "value"));
    const char *header = json_string_value(json_object_get(body, "header"));
    json_t *hosts = json_object_get(body, "hosts");
    if (name && bname && strcmp(name, bname) != 0) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'name' differs from the path");
        json_decref(body);
        return;
    }
    if ((name == NULL && bname == NULL) || value == NULL || header == NULL || hosts == NULL) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "a secret needs 'name', 'value', 'hosts' (a list of host names) "
                             "and 'header' (e.g. \"Authorization: Bearer ${secret}\")");
        json_decref(body);
        return;
    }
    const char *n = name ? name : bname;
    struct gbx_err *err = NULL;
    struct gbx_egress *eg = gbx_server_egress(s);
    if (gbx_egress_secret_put(eg, n, value, hosts, header, name != NULL, &err) < 0) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        json_decref(body);
        return;
    }
    gbx_http_reply_recorded(s, who->name, name ? "secret.replace" : "secret.create", NULL,
                            json_pack("{s:s}", "name", n), req, name ? 200 : 201,
                            gbx_egress_secret_info(eg, n));
    json_decref(body); /* n may point into it */
}

static void handle_secrets(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, const char *name)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (admin_only(s, who, req) < 0)
        return;
    struct gbx_egress *eg = gbx_server_egress(s);
    if (name == NULL) {
        if (m == EVHTTP_REQ_GET)
            return gbx_http_reply_json(req, 200,
                                       json_pack("{s:o}", "secrets", gbx_egress_secret_list(eg)));
        if (m == EVHTTP_REQ_POST)
            return secret_write(s, who, req, NULL);
        return not_allowed(req, "GET, POST");
    }
    if (gbx_egress_secret_name_valid(name) < 0)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no secret named '%.64s'", name);
    if (m == EVHTTP_REQ_GET) {
        json_t *info = gbx_egress_secret_info(eg, name);
        if (info == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no secret named '%s'", name);
        return gbx_http_reply_json(req, 200, info);
    }
    if (m == EVHTTP_REQ_PUT) {
        json_t *info = gbx_egress_secret_info(eg, name);
        if (info == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no secret named '%s'", name);
        json_decref(info);
        return secret_write(s, who, req, name);
    }
    if (m == EVHTTP_REQ_DELETE) {
        struct gbx_err *err = NULL;
        if (gbx_egress_secret_delete(eg, name, &err) < 0) {
            gbx_http_reply_err(req, err);
            gbx_err_free(err);
            return;
        }
        gbx_http_reply_recorded(s, who->name, "secret.revoke", NULL,
                                json_pack("{s:s}", "name", name), req, 204, NULL);
        return;
    }
    not_allowed(req, "GET, PUT, DELETE");
}

void gbx_api_egress(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                    const char *path)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(path, "/v1/egress") == 0) {
        if (m != EVHTTP_REQ_GET)
            return not_allowed(req, "GET");
        return handle_egress_status(s, who, req);
    }
    if (strcmp(path, "/v1/egress/block") == 0)
        return handle_block(s, who, req);
    if (strcmp(path, "/v1/secrets") == 0)
        return handle_secrets(s, who, req, NULL);
    if (strncmp(path, "/v1/secrets/", 12) == 0 && strchr(path + 12, '/') == NULL)
        return handle_secrets(s, who, req, path + 12);
    gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
}

/* ---- a sandbox's network ------------------------------------------------------------------- */

void gbx_api_sandbox_network(struct gbx_server *s, const struct gbx_actor *who,
                             struct evhttp_request *req, struct gbx_live *l)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    struct gbx_egress *eg = gbx_server_egress(s);
    if (m == EVHTTP_REQ_GET)
        return gbx_http_reply_json(
            req, 200,
            json_pack("{s:s,s:o}", "sandbox", l->sb->id, "network",
                      gbx_egress_policy_json(gbx_egress_policy_of(l->egress))));
    if (m != EVHTTP_REQ_PUT)
        return not_allowed(req, "GET, PUT");
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    struct gbx_egress_policy *p = NULL;
    struct gbx_err *err = NULL;
    if (gbx_egress_policy_parse(body, gbx_egress_default_mode(eg), &p, &err) < 0) {
        json_decref(body);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    json_decref(body);
    if (p->nsecrets && !who->admin) {
        gbx_egress_policy_free(p);
        return gbx_http_reply_error(req, GBX_ERR_PERMISSION,
                                    "only the admin may attach secrets to a sandbox");
    }
    if (gbx_egress_set_policy(l->egress, p, &err) < 0) {
        gbx_egress_policy_free(p);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    json_t *pj = gbx_egress_policy_json(p);
    gbx_egress_policy_free(p);
    gbx_sandboxes_set_attr(s, l, "network", json_incref(pj)); /* survives a restart */
    gbx_http_reply_recorded(s, who->name, "sandbox.network", l->sb->id, json_incref(pj), req, 200,
                            json_pack("{s:s,s:o}", "sandbox", l->sb->id, "network", pj));
}

struct log_ctx {
    json_t *events;
    int64_t last;
};

static int log_row(void *arg, const struct gbx_audit_row *r)
{
    struct log_ctx *c = arg;
    json_t *d = r->detail ? json_loads(r->detail, 0, NULL) : NULL;
    if (!json_is_object(d)) {
        json_decref(d);
        d = json_object();
    }
    gbx_autofree char *ts = gbx_rfc3339(r->ts_ns);
    json_object_set_new(d, "seq", json_integer(r->seq));
    json_object_set_new(d, "time", json_string(ts));
    json_object_set_new(d, "kind", json_string(r->kind ? r->kind + 7 : "")); /* "egress." */
    json_array_append_new(c->events, d);
    c->last = r->seq;
    return 0;
}

void gbx_api_sandbox_egress(struct gbx_server *s, const struct gbx_actor *who,
                            struct evhttp_request *req, struct gbx_live *l)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET)
        return not_allowed(req, "GET");
    uint64_t after = 0, limit = 100;
    const struct gbx_query_param params[] = {
        {.name = "after", .kind = GBX_QUERY_U64, .out = &after, .max = INT64_MAX},
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = 1000},
    };
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct gbx_query q = {0};
    struct gbx_err *err = NULL;
    int bad = gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), 0, &err) < 0;
    gbx_query_release(&q);
    if (bad) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    struct log_ctx c = {.events = json_array(), .last = (int64_t)after};
    if (gbx_store_audit_query(gbx_server_store(s), l->sb->id, "egress.", (int64_t)after, (int)limit,
                              log_row, &c, &err) < 0) {
        json_decref(c.events);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    struct gbx_egress *eg = gbx_server_egress(s);
    gbx_http_reply_json(req, 200,
                        json_pack("{s:s,s:o,s:o,s:b,s:o,s:I}", "sandbox", l->sb->id, "network",
                                  gbx_egress_policy_json(gbx_egress_policy_of(l->egress)), "stats",
                                  gbx_egress_sb_stats(l->egress), "blocked", gbx_egress_blocked(eg),
                                  "events", c.events, "next_after", (json_int_t)c.last));
}
