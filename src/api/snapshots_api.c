/* SPDX-License-Identifier: MIT */
/* The snapshot routes (docs/snapshots.md; the service is core/snapshots.c):
 *
 *   GET    /v1/snapshots[?sandbox=&kind=]         list
 *   GET    /v1/snapshots/{id|name}                one
 *   DELETE /v1/snapshots/{id|name}                204, or 202 while sandboxes stack on it
 *   POST   /v1/snapshots/{id|name}/clone          {count, ...create fields} -> 201 sandboxes
 *   POST   /v1/snapshots/{id|name}/template       {name} -> 201 template (admin)
 *   POST   /v1/sandboxes/{id}/snapshots           {name?} -> 201 snapshot
 *   GET    /v1/sandboxes/{id}/snapshots           its snapshots
 *   POST   /v1/sandboxes/{id}/fork                {count, ...} -> 201 snapshot + sandboxes
 *   POST   /v1/sandboxes/{id}/rollback            {snapshot} -> 200 sandbox */
#include "api/snapshots_api.h"

#include <errno.h>
#include <event2/http.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/parse.h"
#include "base/query.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "core/snapshots.h"
#include "core/spec.h"
#include "http/http.h"
#include "http/recorded.h"

#define MAX_CLONES 64

/* the native API's replies */
struct snap_reply {
    struct gbx_snapshots *ss;
    struct gbx_http_later *later;
};

static struct snap_reply *snap_reply_new(struct gbx_snapshots *ss, struct evhttp_request *req)
{
    struct snap_reply *r = gbx_xcalloc(1, sizeof(*r));
    r->ss = ss;
    r->later = gbx_http_later_new(req);
    return r;
}

static void taken_native(void *arg, const char *id, const struct gbx_err *err)
{
    struct snap_reply *r = arg;
    struct evhttp_request *req = gbx_http_later_take(r->later);
    json_t *j = err || req == NULL ? NULL : gbx_snapshots_json(r->ss, id);
    if (req && j == NULL && err == NULL)
        gbx_http_reply_error(req, GBX_ERR_INTERNAL, "the snapshot went away");
    else if (req && j == NULL)
        gbx_http_reply_err(req, err);
    else if (req)
        gbx_http_reply_json(req, 201, j);
    free(r);
}

struct fork_req {
    struct gbx_server *s;
    struct gbx_http_later *later;
    struct gbx_actor who; /* the clones are made for who forked */
    json_t *body;
    int count;
};

static void clone_n(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                    const char *snap_id, json_t *body, int count, json_t *out);

static void taken_fork(void *arg, const char *id, const struct gbx_err *err)
{
    struct fork_req *f = arg;
    struct evhttp_request *req = gbx_http_later_take(f->later);
    json_t *j = err || req == NULL ? NULL : gbx_snapshots_json(gbx_server_snapshots(f->s), id);
    if (req && j == NULL && err == NULL)
        gbx_http_reply_error(req, GBX_ERR_INTERNAL, "the snapshot went away");
    else if (req && j == NULL)
        gbx_http_reply_err(req, err);
    else if (req)
        clone_n(f->s, &f->who, req, id, f->body, f->count, json_pack("{s:o}", "snapshot", j));
    json_decref(f->body);
    free(f);
}

/* ---- clones ------------------------------------------------------------------------------- */

/* count clones on their way: the reply once all are made, or one could not be. */
struct clones {
    struct gbx_http_later *later;
    json_t *out, *list;
    struct gbx_err *err; /* the first that failed */
};

static void clone_made(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct clones *c = arg;
    if (l)
        json_array_append_new(c->list, gbx_sandboxes_json(l));
    else
        gbx_err_set(&c->err, err->errnum, err->kind, "%s", err->msg);
}

/* the ones made before an error are kept and listed: the caller sees what exists */
static void clones_done(void *arg)
{
    struct clones *c = arg;
    struct evhttp_request *req = gbx_http_later_take(c->later);
    json_object_set_new(c->out, "sandboxes", c->list);
    int status = 201;
    if (c->err) {
        json_object_set_new(c->out, "error",
                            json_pack("{s:s,s:s}", "kind", gbx_err_kind_name(c->err->kind),
                                      "message", c->err->msg));
        status = json_array_size(c->list) ? 207 : gbx_http_status_for(c->err->kind);
    }
    if (req)
        gbx_http_reply_json(req, status, c->out);
    else
        json_decref(c->out);
    gbx_err_free(c->err);
    free(c);
}

/* Create count sandboxes from snapshot snap_id with body's create fields, off the loop;
 * answer 201 {...out, sandboxes}. out: stolen. */
static void clone_n(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                    const char *snap_id, json_t *body, int count, json_t *out)
{
    struct clones *c = gbx_xcalloc(1, sizeof(*c));
    c->out = out;
    c->list = json_array();
    c->later = gbx_http_later_new(req);
    /* one parse of the create fields; each clone is made from the same spec */
    struct gbx_create_spec spec;
    if (gbx_create_spec_parse(gbx_server_limits(s), body, &spec, &c->err) < 0)
        return clones_done(c);
    free(spec.snapshot);
    spec.snapshot = gbx_xstrdup(snap_id);
    gbx_sandboxes_create_many(s, who, &spec, count, 0, clone_made, clones_done, c);
    gbx_create_spec_clear(&spec);
}

static void rolled_back(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    if (req && err)
        gbx_http_reply_err(req, err);
    else if (req)
        gbx_http_reply_json(req, 200, gbx_sandboxes_json(l));
}

/* {count?, ...create fields}: the count (1..MAX_CLONES), and the fields left in body. */
static int parse_count(struct evhttp_request *req, json_t *body, int *count)
{
    json_t *c = json_object_get(body, "count");
    *count = 1;
    if (c) {
        if (!json_is_integer(c) || json_integer_value(c) < 1 ||
            json_integer_value(c) > MAX_CLONES) {
            gbx_http_reply_error(req, GBX_ERR_INVALID, "'count' must be an integer from 1 to %d",
                                 MAX_CLONES);
            return -1;
        }
        *count = (int)json_integer_value(c);
        json_object_del(body, "count");
    }
    if (json_object_get(body, "snapshot") || json_object_get(body, "id") ||
        json_object_get(body, "idempotency_key")) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "'snapshot', 'id' and 'idempotency_key' cannot be given here");
        return -1;
    }
    return 0;
}

/* ---- a template from a snapshot ---------------------------------------------------------- */

static void made_template(void *arg, const struct gbx_snapshot_template *t,
                          const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    if (req && err)
        gbx_http_reply_err(req, err);
    else if (req)
        gbx_http_reply_json(req, 201,
                            json_pack("{s:s,s:s,s:s,s:I}", "name", t->name, "base", t->base,
                                      "source", t->source, "layers", (json_int_t)t->nlayers));
}

/* POST /v1/snapshots/{ref}/template {"name"}: a template of the snapshot's files (its layers
 * copied, on the template the snapshot is of); admin only, as every template. */
static void make_template(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req, const char *snap_id)
{
    if (!who->admin)
        return gbx_http_reply_error(req, GBX_ERR_PERMISSION,
                                    "templates are the admin's (the unix socket)");
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    json_t *name = json_object_get(body, "name");
    if (!json_is_string(name) || json_object_size(body) != 1 ||
        gbx_name_valid(json_string_value(name)) < 0) {
        json_decref(body);
        return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                    "expected {\"name\": a template name (1-63 of [a-z0-9-])}");
    }
    gbx_snapshots_make_template(gbx_server_snapshots(s), who, snap_id, json_string_value(name),
                                made_template, gbx_http_later_new(req));
    json_decref(body);
}

/* ---- routes ------------------------------------------------------------------------------- */

static void reply_list(struct gbx_server *s, const struct gbx_actor *who,
                       struct evhttp_request *req, const char *sandbox)
{
    const char *qsb = NULL, *kind = NULL;
    const struct gbx_query_param params[] = {
        {.name = "sandbox", .kind = GBX_QUERY_STR, .out = &qsb},
        {.name = "kind", .kind = GBX_QUERY_STR, .out = &kind},
    };
    struct gbx_query q = {0};
    gbx_autoerr struct gbx_err *err = NULL;
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    /* other parameters are ignored, as this route always has */
    if (gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), GBX_QUERY_IGNORE_UNKNOWN, &err) <
        0) {
        gbx_query_release(&q);
        return gbx_http_reply_err(req, err);
    }
    json_t *arr =
        gbx_snapshots_list_json(gbx_server_snapshots(s), who, sandbox ? sandbox : qsb, kind);
    gbx_query_release(&q);
    gbx_http_reply_json(req, 200, json_pack("{s:o}", "snapshots", arr));
}

void gbx_api_snapshots(struct gbx_server *s, const struct gbx_actor *who,
                       struct evhttp_request *req, const char *path)
{
    struct gbx_snapshots *ss = gbx_server_snapshots(s);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(path, "/v1/snapshots") == 0) {
        if (m != EVHTTP_REQ_GET)
            return gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                               "method not allowed (allowed: GET)");
        return reply_list(s, who, req, NULL);
    }
    char ref[128];
    const char *rest = path + strlen("/v1/snapshots/");
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n == 0 || n >= sizeof(ref))
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such snapshot");
    memcpy(ref, rest, n);
    ref[n] = '\0';
    struct gbx_snapshot_ref p = gbx_snapshots_get(ss, who, ref);
    if (p.id == NULL)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "snapshot '%s' not found", ref);
    gbx_autofree char *id = gbx_xstrdup(p.id);
    if (slash == NULL) {
        if (m == EVHTTP_REQ_GET)
            return gbx_http_reply_json(req, 200, gbx_snapshots_json(ss, id));
        if (m != EVHTTP_REQ_DELETE)
            return gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                               "method not allowed (allowed: GET, DELETE)");
        int used = gbx_snapshots_in_use(ss, id);
        struct gbx_err *err = NULL;
        gbx_autofree char *sandbox = gbx_xstrdup(p.sandbox);
        if (gbx_snapshots_delete(ss, id, &err) < 0) {
            gbx_http_reply_err(req, err);
            gbx_err_free(err);
            return;
        }
        /* 202: hidden now, removed once the sandboxes and snapshots stacked on it are gone;
         * answered once the record is durable (api/audit.c) */
        return gbx_http_reply_recorded(
            s, who->name, "snapshot.delete", sandbox,
            json_pack("{s:s,s:b}", "snapshot", id, "in_use", used), req, used ? 202 : 204,
            used ? json_pack("{s:s,s:s}", "id", id, "state", "deleting") : NULL);
    }
    if (strcmp(slash, "/template") == 0) {
        if (m != EVHTTP_REQ_POST)
            return gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                               "method not allowed (allowed: POST)");
        return make_template(s, who, req, id);
    }
    if (strcmp(slash, "/clone") == 0) {
        if (m != EVHTTP_REQ_POST)
            return gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                               "method not allowed (allowed: POST)");
        json_t *body = gbx_http_body_object(req);
        int count;
        if (body == NULL)
            return;
        if (parse_count(req, body, &count) == 0)
            clone_n(s, who, req, id, body, count,
                    json_pack("{s:o}", "snapshot", gbx_snapshots_json(ss, id)));
        json_decref(body);
        return;
    }
    gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
}

/* The create fields of a fork: the source's own (template, limits, env, network, ...), then
 * what the request says. */
static json_t *fork_body(const struct gbx_live *l, json_t *req_body)
{
    json_t *b = json_loads(l->spec_text ? l->spec_text : "{}", 0, NULL);
    if (!json_is_object(b)) {
        json_decref(b);
        b = json_object();
    }
    static const char *const drop[] = {"id", "idempotency_key", "snapshot", "metadata"};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(drop); i++)
        json_object_del(b, drop[i]);
    json_t *net = json_object_get(l->attrs, "network"); /* the policy as changed live */
    if (net)
        json_object_set(b, "network", net);
    json_object_update(b, req_body);
    return b;
}

int gbx_api_snapshots_sandbox(struct gbx_server *s, const struct gbx_actor *who,
                              struct evhttp_request *req, struct gbx_live *l, const char *sub)
{
    struct gbx_snapshots *ss = gbx_server_snapshots(s);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(sub, "/snapshots") == 0) {
        if (m == EVHTTP_REQ_GET) {
            reply_list(s, who, req, l->sb->id);
            return 1;
        }
        if (m != EVHTTP_REQ_POST) {
            gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                        "method not allowed (allowed: GET, POST)");
            return 1;
        }
        json_t *body = gbx_http_body_object(req);
        if (body == NULL)
            return 1;
        json_t *name = json_object_get(body, "name");
        static const char *const fields[] = {"name", NULL};
        if (gbx_http_only_fields(req, body, fields, "name") < 0) {
            json_decref(body);
            return 1;
        }
        if (name && (!json_is_string(name) || gbx_name_valid(json_string_value(name)) < 0 ||
                     strncmp(json_string_value(name), "sn-", 3) == 0)) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'name' must be 1-63 of [a-z0-9-], not starting with 'sn-'");
            json_decref(body);
            return 1;
        }
        gbx_snapshots_take(ss, who, l, name ? json_string_value(name) : NULL, "snapshot",
                           taken_native, snap_reply_new(ss, req));
        json_decref(body);
        return 1;
    }
    if (strcmp(sub, "/fork") == 0) {
        if (m != EVHTTP_REQ_POST) {
            gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                        "method not allowed (allowed: POST)");
            return 1;
        }
        json_t *body = gbx_http_body_object(req);
        int count;
        if (body == NULL)
            return 1;
        if (parse_count(req, body, &count) == 0) {
            struct fork_req *f = gbx_xcalloc(1, sizeof(*f));
            f->s = s;
            f->later = gbx_http_later_new(req);
            f->who = *who;
            f->body = fork_body(l, body);
            f->count = count;
            gbx_snapshots_take(ss, who, l, NULL, "fork", taken_fork, f);
        }
        json_decref(body);
        return 1;
    }
    if (strcmp(sub, "/rollback") == 0) {
        if (m != EVHTTP_REQ_POST) {
            gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                        "method not allowed (allowed: POST)");
            return 1;
        }
        json_t *body = gbx_http_body_object(req);
        if (body == NULL)
            return 1;
        json_t *ref = json_object_get(body, "snapshot");
        if (!json_is_string(ref) || json_object_size(body) != 1) {
            gbx_http_reply_error(req, GBX_ERR_INVALID, "expected {\"snapshot\": id or name}");
            json_decref(body);
            return 1;
        }
        /* made again off the loop; the reply once it runs (or is gone) */
        gbx_sandboxes_rollback(s, who, l, json_string_value(ref), rolled_back,
                               gbx_http_later_new(req));
        json_decref(body);
        return 1;
    }
    return 0;
}
