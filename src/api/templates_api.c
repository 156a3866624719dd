/* SPDX-License-Identifier: MIT */
/* The template routes (see templates_api.h and docs/api.yaml): each parses its request, calls
 * the templates service (core/templates.h) and writes the reply. An /events stream follows a
 * build through the service's watch: this file owns the request, and cancels the watch when
 * its client goes away. */
#include "api/templates_api.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "http/http.h"
#include "http/recorded.h"
#include "core/server.h"
#include "core/template_log.h"
#include "core/templates.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/debootstrap.h"
#include "sandbox/template.h"

static void not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed (use %s)", allow);
}

/* ---- /events ------------------------------------------------------------------------------- */

/* One NDJSON stream of a build's events: a line each, then the end of the reply. */
struct tstream {
    struct evhttp_request *req;
    struct gbx_templates_watch *watch;
};

static void stream_event(void *arg, const json_t *ev)
{
    struct tstream *st = arg;
    gbx_http_chunk_json(st->req, ev, 0, 0);
}

static void stream_end(void *arg)
{
    struct tstream *st = arg;
    evhttp_connection_set_closecb(evhttp_request_get_connection(st->req), NULL, NULL);
    evhttp_send_reply_end(st->req);
    free(st);
}

/* The client left: the watch goes, and the request (gbx_http_stream_abandoned). */
static void stream_closed(struct evhttp_connection *conn, void *arg)
{
    struct tstream *st = arg;
    (void)conn;
    gbx_templates_unwatch(st->watch);
    gbx_http_stream_abandoned(st->req);
    free(st);
}

static void handle_events(struct gbx_server *s, struct evhttp_request *req, const char *name)
{
    gbx_autoerr struct gbx_err *err = NULL;
    int r = gbx_templates_followable(s, name, &err);
    if (r < 0)
        return gbx_http_reply_err(req, err);
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    evhttp_add_header(oh, "Content-Type", "application/x-ndjson");
    evhttp_add_header(oh, "Cache-Control", "no-store");
    if (r == 0) { /* a template that was not built by this daemon: nothing to follow */
        json_t *ev = gbx_tlog_end_event(name, 0, NULL);
        gbx_autofree char *line = json_dumps(ev, JSON_COMPACT);
        json_decref(ev);
        struct evbuffer *out = evbuffer_new();
        GBX_BUG_ON(out == NULL || line == NULL);
        evbuffer_add_printf(out, "%s\n", line);
        evhttp_send_reply(req, 200, "OK", out);
        evbuffer_free(out);
        return;
    }
    evhttp_send_reply_start(req, 200, "OK");
    struct tstream *st = gbx_xcalloc(1, sizeof(*st));
    st->req = req;
    struct gbx_templates_watch *w = gbx_templates_watch(s, name, stream_event, stream_end, st);
    if (w == NULL)
        return; /* the build had ended: the whole history, then the end (st is gone) */
    st->watch = w;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, st);
}

/* ---- GET, DELETE -------------------------------------------------------------------------- */

static void handle_list(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req)
{
    gbx_autoerr struct gbx_err *err = NULL;
    json_t *arr = gbx_templates_list(s, who, &err);
    if (arr == NULL)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, 200, json_pack("{s:o}", "templates", arr));
}

static void handle_show(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req, const char *name)
{
    gbx_autoerr struct gbx_err *err = NULL;
    json_t *j = gbx_templates_show(s, who, name, &err);
    if (j == NULL)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, 200, j);
}

static void handle_delete(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req, const char *name)
{
    gbx_autoerr struct gbx_err *err = NULL;
    int r = gbx_templates_delete(s, who, name, &err);
    if (r < 0)
        return gbx_http_reply_err(req, err);
    if (r == GBX_TEMPLATES_FORGOTTEN) { /* a failed build's record; nothing was installed */
        evhttp_send_reply(req, 204, "No Content", NULL);
        return;
    }
    json_t *detail = r == GBX_TEMPLATES_CANCELLED
                         ? json_pack("{s:s,s:s}", "template", name, "state", "building")
                         : json_pack("{s:s}", "template", name);
    gbx_http_reply_recorded(s, who->name, "template.delete", NULL, detail, req, 204, NULL);
}

/* ---- POST --------------------------------------------------------------------------------- */

/* Start the build; 202 with its view once its record (template.create) is durable. */
static void build(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                  const char *shown, const struct gbx_templates_source *src)
{
    gbx_autofree char *stored = NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    json_t *view = gbx_templates_build(s, who, shown, src, &stored, &err);
    if (view == NULL)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_recorded(
        s, who->name, "template.create", NULL,
        json_pack("{s:s,s:O}", "template", stored, "source", json_object_get(view, "source")), req,
        202, view);
}

/* description, start and ready of a create body, as template.conf lines. */
static int extra_of(json_t *body, char **out, struct gbx_err **err)
{
    const char *keys[] = {"description", "start", "ready"};
    const char *v[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < 3; i++) {
        json_t *j = json_object_get(body, keys[i]);
        if (j && !json_is_string(j))
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "%s: expected a string", keys[i]);
        v[i] = json_string_value(j);
    }
    return gbx_template_conf_extra(v[0], v[1], v[2], out, err);
}

static void handle_create(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *from = json_object_get(body, "from");
    json_t *oci = json_object_get(from, "oci");
    json_t *deb = json_object_get(from, "debian");
    if (name == NULL || !json_is_object(from) || json_object_size(from) != 1 ||
        (!json_is_object(oci) && !json_is_object(deb))) {
        json_decref(body);
        return gbx_http_reply_error(
            req, GBX_ERR_INVALID,
            "expected {\"name\": ..., \"from\": {\"oci\": {\"path\": ...}} or {\"debian\": "
            "{\"suite\": ...}}}");
    }
    gbx_autofree char *extra = NULL;
    {
        gbx_autoerr struct gbx_err *err = NULL;
        if (extra_of(body, &extra, &err) < 0) {
            json_decref(body);
            return gbx_http_reply_err(req, err);
        }
    }
    if (!who->admin) {
        json_decref(body);
        return gbx_http_reply_error(
            req, GBX_ERR_PERMISSION,
            "building from a host path or from Debian is the admin's (use the unix socket); "
            "upload an image archive to POST /v1/templates/{name}/oci");
    }
    struct gbx_templates_source src = {.conf_extra = extra};
    struct gbx_deb_opts o = {0};
    gbx_autofree const char **names = NULL;
    if (oci) {
        const char *path = json_string_value(json_object_get(oci, "path"));
        if (path == NULL || path[0] != '/' || strchr(path, '\n') || strlen(path) > 4096) {
            json_decref(body);
            return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                        "from.oci.path: expected an absolute path on the host");
        }
        struct stat sb;
        if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
            json_decref(body);
            return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                        "from.oci.path: '%s' is not a readable file", path);
        }
        src.path = path;
    } else {
        o.suite = json_string_value(json_object_get(deb, "suite"));
        o.mirror = json_string_value(json_object_get(deb, "mirror"));
        o.variant = json_string_value(json_object_get(deb, "variant"));
        if (o.suite == NULL)
            o.suite = "bookworm";
        json_t *inc = json_object_get(deb, "include");
        if (inc && !json_is_array(inc)) {
            json_decref(body);
            return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                        "from.debian.include: expected an array of packages");
        }
        size_t n = json_array_size(inc);
        names = gbx_xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++) {
            names[i] = json_string_value(json_array_get(inc, i));
            if (names[i] == NULL) {
                json_decref(body);
                return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                            "from.debian.include: expected package names");
            }
        }
        o.include = names;
        o.n_include = n;
        src.debian = &o; /* checked, and copied, by the service */
    }
    build(s, who, req, name, &src);
    json_decref(body);
}

static void handle_upload(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req, const char *name)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    if (len == 0)
        return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                    "expected the image archive (docker save, or an OCI "
                                    "layout tar) as the request body");
    if (len > gbx_server_max_upload(s))
        return gbx_http_reply_error_status(req, 413, GBX_ERR_LIMIT,
                                           "the archive is larger than --max-upload (%zu bytes)",
                                           gbx_server_max_upload(s));
    struct evkeyvalq q;
    TAILQ_INIT(&q);
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (query && evhttp_parse_query_str(query, &q) < 0)
        return gbx_http_reply_error(req, GBX_ERR_INVALID, "malformed query string");
    const char *v[3] = {NULL, NULL, NULL};
    static const char *const keys[] = {"description", "start", "ready"};
    for (struct evkeyval *kv = q.tqh_first; kv; kv = kv->next.tqe_next) {
        size_t i = 0;
        while (i < 3 && strcmp(kv->key, keys[i]) != 0)
            i++;
        if (i == 3) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "query '%s': expected description=, start=, ready=", kv->key);
            evhttp_clear_headers(&q);
            return;
        }
        v[i] = kv->value;
    }
    gbx_autofree char *extra = NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    int bad = gbx_template_conf_extra(v[0], v[1], v[2], &extra, &err) < 0;
    evhttp_clear_headers(&q);
    if (bad)
        return gbx_http_reply_err(req, err);
    build(s, who, req, name, &(struct gbx_templates_source){.upload = in, .conf_extra = extra});
}

/* ---- the router --------------------------------------------------------------------------- */

void gbx_api_templates(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                       struct evhttp_request *req, const char *path)
{
    (void)base; /* the service keeps its timer on the server's loop, the same one */
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(path, "/v1/templates") == 0) {
        if (m == EVHTTP_REQ_GET)
            return handle_list(s, who, req);
        if (m == EVHTTP_REQ_POST)
            return handle_create(s, who, req);
        return not_allowed(req, "GET, POST");
    }
    const char *rest = path + strlen("/v1/templates/");
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    char shown[128];
    if (n == 0 || n >= sizeof(shown))
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such template");
    memcpy(shown, rest, n);
    shown[n] = '\0';
    /* a key names its own and the shared templates; the admin any stored name (NAME@KEY) */
    if ((who->admin ? gbx_template_name_valid(shown) : gbx_name_valid(shown)) < 0)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such template");
    if (slash && strcmp(slash, "/oci") == 0) {
        if (m != EVHTTP_REQ_POST)
            return not_allowed(req, "POST");
        return handle_upload(s, who, req, shown);
    }
    gbx_autofree char *name = gbx_templates_ref(s, who, shown);
    if (slash == NULL) {
        if (m == EVHTTP_REQ_GET)
            return handle_show(s, who, req, name);
        if (m == EVHTTP_REQ_DELETE)
            return handle_delete(s, who, req, name);
        return not_allowed(req, "GET, DELETE");
    }
    if (strcmp(slash, "/events") == 0) {
        if (m != EVHTTP_REQ_GET)
            return not_allowed(req, "GET");
        return handle_events(s, req, name);
    }
    gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
}
