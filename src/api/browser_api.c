/* SPDX-License-Identifier: MIT */
/* /v1/sandboxes/{id}/browser: start (POST), state (GET), stop (DELETE) the sandbox's browser
 * (browser/browser.h); /browser/screenshot: a PNG of its page (GET), or saved as a file in
 * the sandbox (POST {"path"}), which POST /v1/sandboxes/{id}/artifacts then publishes. */
#include "api/browser_api.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/aconn.h"
#include "agent/awrite.h"
#include "agent/proto.h"
#include "base/mem.h"
#include "browser/browser.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "http/http.h"
#include "sandbox/backend.h"

struct call {
    struct gbx_server *s;
    struct gbx_actor who; /* its copy: the call outlives the handler */
    char id[64];
    char path[4096]; /* POST .../screenshot: where the PNG goes */
    struct gbx_http_later *later;
    const char *kind; /* the audit record: "browser.start", ... */
    /* saving a screenshot */
    struct gbx_aconn *ac;
    struct gbx_awrite write;
    uint8_t *png;
    size_t len;
};

static struct call *call_new(struct gbx_server *s, const struct gbx_actor *who,
                             struct evhttp_request *req, const struct gbx_live *l, const char *kind)
{
    struct call *c = gbx_xcalloc(1, sizeof(*c));
    c->s = s;
    c->who = *who;
    c->kind = kind;
    snprintf(c->id, sizeof(c->id), "%s", l->sb->id);
    c->later = gbx_http_later_new(req);
    return c;
}

static void call_free(struct call *c)
{
    gbx_aconn_free(c->ac);
    free(c->png);
    free(c);
}

/* Where the port is reached from outside: the host form under the ingress domain, and the
 * path form on whatever listener the client uses. */
static void add_urls(json_t *state, const char *id)
{
    int port = (int)json_integer_value(json_object_get(state, "port"));
    const char *domain = gbx_server_ingress_domain_now();
    if (domain && domain[0])
        json_object_set_new(state, "url", json_sprintf("http://%d-%s.%s/", port, id, domain));
    json_object_set_new(state, "ingress_path",
                        json_sprintf("/v1/sandboxes/%s/ports/%d/", id, port));
}

static void state_done(void *arg, json_t *state, const struct gbx_err *err)
{
    struct call *c = arg;
    struct evhttp_request *req = gbx_http_later_take(c->later);
    if (c->kind && err == NULL)
        gbx_server_audit(c->s, &c->who, c->kind, c->id, json_deep_copy(state));
    if (req && err)
        gbx_http_reply_err(req, err);
    else if (req) {
        json_t *o = json_deep_copy(state);
        add_urls(o, c->id);
        gbx_http_reply_json(req, 200, o);
    }
    call_free(c);
}

static void handle_start(struct gbx_server *s, const struct gbx_actor *who,
                         struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"port", "profile", NULL};
    json_t *jport = json_object_get(body, "port"), *jprof = json_object_get(body, "profile");
    struct gbx_browser_opts o = {0};
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_http_only_fields(req, body, fields, "port, profile") < 0)
        goto out;
    if ((jport && (!json_is_integer(jport) || json_integer_value(jport) < 1 ||
                   json_integer_value(jport) > 65535)) ||
        (jprof && !json_is_string(jprof))) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "'port' must be an integer (1-65535), 'profile' a string");
        goto out;
    }
    o.port = jport ? (unsigned)json_integer_value(jport) : 0;
    o.profile = json_string_value(jprof);
    if (o.profile && strlen(o.profile) != json_string_length(jprof))
        o.profile = "\n"; /* a NUL inside: refused by the check below */
    if (gbx_browser_opts_check(&o, &err) < 0) {
        gbx_http_reply_err(req, err);
        goto out;
    }
    gbx_browser_start(s, l, &o, state_done, call_new(s, who, req, l, "browser.start"));
out:
    json_decref(body);
}

/* ---- screenshots --------------------------------------------------------------------------- */

static void saved(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, long e)
{
    struct call *c = arg;
    struct evhttp_request *req = gbx_http_later_take(c->later);
    c->later = NULL;
    if (e == 0 && h && h->type == GBX_MSG_OK) {
        gbx_server_audit(c->s, &c->who, "browser.screenshot", c->id,
                         json_pack("{s:s,s:I}", "path", c->path, "bytes", (json_int_t)c->len));
        if (req)
            gbx_http_reply_json(req, 201,
                                json_pack("{s:s,s:I,s:s}", "path", c->path, "bytes",
                                          (json_int_t)c->len, "content_type", "image/png"));
    } else if (req) {
        char msg[256] = "the sandbox went away";
        if (h && h->type == GBX_MSG_ERROR)
            gbx_aconn_error_text(p, h->len, msg, sizeof(msg));
        gbx_http_reply_error(req, h ? GBX_ERR_INVALID : GBX_ERR_UNAVAILABLE,
                             "cannot write the screenshot to '%s': %s", c->path, msg);
    }
    call_free(c);
}

static void on_agent_event(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    (void)arg;
    (void)h;
    (void)p;
}

static void on_agent_close(void *arg, const char *why)
{
    (void)arg;
    (void)why; /* the write's done callback reports it (h NULL) */
}

static void shot_done(void *arg, const uint8_t *png, size_t len, const struct gbx_err *err)
{
    struct call *c = arg;
    if (err) {
        struct evhttp_request *req = gbx_http_later_take(c->later);
        if (req)
            gbx_http_reply_err(req, err);
        return call_free(c);
    }
    if (c->path[0] == '\0') { /* GET: the PNG itself */
        struct evhttp_request *req = gbx_http_later_take(c->later);
        gbx_server_audit(c->s, &c->who, "browser.screenshot", c->id,
                         json_pack("{s:I}", "bytes", (json_int_t)len));
        if (req) {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "image/png");
            struct evbuffer *b = evbuffer_new();
            evbuffer_add(b, png, len);
            evhttp_send_reply(req, 200, "OK", b);
            evbuffer_free(b);
        }
        return call_free(c);
    }
    /* POST: into the sandbox, as its user, atomically */
    struct gbx_live *l = gbx_sandboxes_find_any(c->s, c->id);
    struct gbx_err *e2 = NULL;
    if (l == NULL || gbx_aconn_open(gbx_server_base(c->s), l->sb, on_agent_event, on_agent_close, c,
                                    &c->ac, &e2) < 0) {
        struct evhttp_request *req = gbx_http_later_take(c->later);
        if (req && e2)
            gbx_http_reply_err(req, e2);
        else if (req)
            gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' is gone", c->id);
        gbx_err_free(e2);
        return call_free(c);
    }
    c->png = gbx_xmalloc(len ? len : 1);
    memcpy(c->png, png, len);
    c->len = len;
    struct gbx_msg *m = gbx_aconn_begin(c->ac, GBX_MSG_WRITE);
    gbx_msg_put_str(m, GBX_A_USER, "user");
    gbx_msg_put_str(m, GBX_A_PATH, c->path);
    gbx_awrite_init(&c->write, c->ac, c->png, NULL, c->len, saved, c);
    gbx_awrite_open(&c->write, m, 0644, GBX_W_CREATE | GBX_W_TRUNC | GBX_W_ATOMIC | GBX_W_PARENTS);
}

static void handle_screenshot(struct gbx_server *s, const struct gbx_actor *who,
                              struct evhttp_request *req, struct gbx_live *l, int post)
{
    char path[4096] = "";
    if (post) {
        json_t *body = gbx_http_body_object(req);
        if (body == NULL)
            return;
        static const char *const fields[] = {"path", NULL};
        json_t *jp = json_object_get(body, "path");
        int bad = gbx_http_only_fields(req, body, fields, "path") < 0;
        if (!bad && (!json_is_string(jp) || json_string_value(jp)[0] != '/' ||
                     json_string_length(jp) >= sizeof(path) ||
                     strlen(json_string_value(jp)) != json_string_length(jp))) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'path' must be an absolute path in the sandbox (a string)");
            bad = 1;
        }
        if (!bad)
            snprintf(path, sizeof(path), "%s", json_string_value(jp));
        json_decref(body);
        if (bad)
            return;
    }
    struct call *c = call_new(s, who, req, l, NULL);
    snprintf(c->path, sizeof(c->path), "%s", path);
    gbx_browser_screenshot(s, l, shot_done, c);
}

static void not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed (use %s)", allow);
}

void gbx_api_sandbox_browser(struct gbx_server *s, const struct gbx_actor *who,
                             struct evhttp_request *req, struct gbx_live *l, const char *rest)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    int shot = strcmp(rest, "/screenshot") == 0;
    if (!shot && rest[0] != '\0')
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND,
                                    "no route for '/v1/sandboxes/%s/browser%s'", l->sb->id, rest);
    if (l->paused)
        return gbx_http_reply_error(req, GBX_ERR_CONFLICT,
                                    "sandbox '%s' is paused: resume it first", l->sb->id);
    if (shot) {
        if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_POST)
            return not_allowed(req, "GET, POST");
        return handle_screenshot(s, who, req, l, m == EVHTTP_REQ_POST);
    }
    if (m == EVHTTP_REQ_POST)
        return handle_start(s, who, req, l);
    if (m == EVHTTP_REQ_GET)
        return gbx_browser_status(s, l, state_done, call_new(s, who, req, l, NULL));
    if (m == EVHTTP_REQ_DELETE)
        return gbx_browser_stop(s, l, state_done, call_new(s, who, req, l, "browser.stop"));
    not_allowed(req, "GET, POST, DELETE");
}
