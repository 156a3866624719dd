/* SPDX-License-Identifier: MIT */
/* The E2B surface's router and shared helpers (see e2b.h). */
#include "e2b/e2b.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "e2b/connect.h"
#include "http/admit.h"
#include "http/http.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "base/mem.h"

int gbx_e2b_is_control_path(const char *path)
{
    static const char *const prefixes[] = {"/v2/sandboxes", "/v3/templates", "/sandboxes",
                                           "/snapshots", "/templates"};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(prefixes); i++) {
        size_t n = strlen(prefixes[i]);
        if (strncmp(path, prefixes[i], n) == 0 && (path[n] == '\0' || path[n] == '/'))
            return 1;
    }
    return 0;
}

/* ---- replies -------------------------------------------------------------------------------- */

void gbx_e2b_reply_json(struct evhttp_request *req, int status, json_t *body)
{
    if (body == NULL) /* a message that is not UTF-8 (it quoted the client's bytes) */
        body = json_pack("{s:i,s:s}", "code", status, "message",
                         "the request was refused (its details are not valid UTF-8)");
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    GBX_BUG_ON(text == NULL);
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    evbuffer_add(b, text, strlen(text));
    free(text);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, status, gbx_http_reason(status), b);
    evbuffer_free(b);
}

void gbx_e2b_error(struct evhttp_request *req, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = gbx_vasprintf(fmt, ap);
    va_end(ap);
    gbx_e2b_reply_json(req, status, json_pack("{s:i,s:s}", "code", status, "message", msg));
    free(msg);
}

void gbx_e2b_rpc_error(struct evhttp_request *req, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = gbx_vasprintf(fmt, ap);
    va_end(ap);
    gbx_e2b_reply_json(req, gbx_connect_http_status(code),
                       json_pack("{s:s,s:s}", "code", code, "message", msg));
    free(msg);
}

void gbx_e2b_rpc_reply(struct evhttp_request *req, json_t *msg)
{
    gbx_e2b_reply_json(req, 200, msg);
}

int gbx_e2b_is_stream(struct evhttp_request *req)
{
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    return ct && strncasecmp(ct, "application/connect+json", 24) == 0;
}

json_t *gbx_e2b_rpc_request(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    const uint8_t *p = n ? evbuffer_pullup(in, -1) : (const uint8_t *)"";
    const uint8_t *msg = p;
    size_t len = n;
    if (gbx_e2b_is_stream(req)) {
        uint8_t flags = 0;
        long used = gbx_connect_envelope(p, n, GBX_CONNECT_MAX_MSG, &flags, &msg, &len);
        if (used <= 0 || (size_t)used != n || flags != 0) {
            gbx_e2b_rpc_error(req, "invalid_argument",
                              "the request must be one uncompressed Connect envelope");
            return NULL;
        }
    }
    if (len == 0)
        return json_object();
    json_error_t jerr;
    json_t *v = json_loadb((const char *)msg, len, JSON_REJECT_DUPLICATES, &jerr);
    if (v == NULL || !json_is_object(v)) {
        json_decref(v);
        gbx_e2b_rpc_error(req, "invalid_argument", "the request message is not a JSON object");
        return NULL;
    }
    return v;
}

/* ---- streams -------------------------------------------------------------------------------- */

void gbx_e2b_stream_start(struct evhttp_request *req)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/connect+json");
    evhttp_send_reply_start(req, 200, "OK");
}

void gbx_e2b_put_envelope(struct evbuffer *b, uint8_t flags, json_t *msg)
{
    char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (text == NULL) /* a message that could not be built (text that is not UTF-8) */
        text = gbx_xstrdup(flags & GBX_CONNECT_FLAG_END ? "{}" : "{\"event\":{\"keepalive\":{}}}");
    size_t n = strlen(text);
    uint8_t hdr[GBX_CONNECT_HDR];
    gbx_connect_envelope_hdr(hdr, flags, (uint32_t)n);
    evbuffer_add(b, hdr, sizeof(hdr));
    evbuffer_add(b, text, n);
    free(text);
}

void gbx_e2b_stream_end(struct evhttp_request *req, const char *code, const char *message)
{
    json_t *end = code ? json_pack("{s:{s:s,s:s}}", "error", "code", code, "message",
                                   message ? message : code)
                       : json_object();
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    gbx_e2b_put_envelope(b, GBX_CONNECT_FLAG_END, end);
    evhttp_send_reply_chunk(req, b);
    evbuffer_free(b);
    evhttp_send_reply_end(req);
}

unsigned long gbx_e2b_timeout_ms(struct evhttp_request *req)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), "Connect-Timeout-Ms");
    if (v == NULL)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long ms = strtoul(v, &end, 10);
    if (errno || end == v || *end != '\0' || ms > 30ul * 24 * 3600 * 1000)
        return 0;
    return ms;
}

/* ---- users and paths ------------------------------------------------------------------------- */

static int user_name_ok(const char *u)
{
    if (*u == '\0' || strlen(u) > 32)
        return 0;
    for (const char *p = u; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.' || (*p == '$' && p[1] == '\0')))
            return 0;
    return 1;
}

int gbx_e2b_user(struct evhttp_request *req, const char *query_user, int rpc, char *user,
                 size_t usersz)
{
    const char *name = NULL;
    char decoded[128];
    if (query_user) {
        name = query_user;
    } else {
        const char *auth =
            evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
        if (auth) {
            if (strncasecmp(auth, "Basic ", 6) != 0)
                goto bad;
            json_t *s = json_string(auth + 6);
            uint8_t *raw = NULL;
            size_t len = 0;
            int r = s ? gbx_connect_bytes(s, &raw, &len) : -EINVAL;
            json_decref(s);
            if (r < 0 || len == 0 || len >= sizeof(decoded) || memchr(raw, 0, len)) {
                free(raw);
                goto bad;
            }
            memcpy(decoded, raw, len);
            decoded[len] = '\0';
            free(raw);
            char *colon = strchr(decoded, ':');
            if (colon)
                *colon = '\0';
            name = decoded;
        }
    }
    if (name == NULL || *name == '\0')
        name = GBX_E2B_DEFAULT_USER;
    if (!user_name_ok(name) || strlen(name) >= usersz)
        goto bad;
    snprintf(user, usersz, "%s", name);
    return 0;
bad:
    if (rpc)
        gbx_e2b_rpc_error(req, "unauthenticated", "invalid username");
    else
        gbx_e2b_error(req, 401, "invalid username");
    return -1;
}

void gbx_e2b_home(const char *user, char *out, size_t outsz)
{
    if (strcmp(user, "root") == 0 || strcmp(user, "0") == 0)
        snprintf(out, outsz, "/root");
    else
        snprintf(out, outsz, "/home/%s", user);
}

char *gbx_e2b_path(const char *user, const char *path)
{
    if (path == NULL || *path == '\0')
        return NULL;
    if (path[0] == '/')
        return gbx_xstrdup(path);
    char home[128];
    gbx_e2b_home(user, home, sizeof(home));
    if (strcmp(path, "~") == 0)
        return gbx_xstrdup(home);
    if (strncmp(path, "~/", 2) == 0)
        return gbx_asprintf("%s/%s", home, path + 2);
    return gbx_asprintf("%s/%s", home, path);
}

static int header_is_token(const struct evkeyvalq *in, const char *header, const struct gbx_live *l)
{
    return gbx_sandboxes_token_is(l, evhttp_find_header(in, header));
}

int gbx_e2b_headers_token_ok(const struct evkeyvalq *in, const struct gbx_live *l)
{
    return header_is_token(in, "X-Access-Token", l);
}

int gbx_e2b_token_ok(struct evhttp_request *req, const struct gbx_live *l)
{
    return header_is_token(evhttp_request_get_input_headers(req), "X-Access-Token", l);
}

int gbx_e2b_traffic_token_ok(struct evhttp_request *req, const struct gbx_live *l)
{
    const struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    return header_is_token(in, "X-Access-Token", l) ||
           header_is_token(in, "E2B-Traffic-Access-Token", l);
}

struct gbx_live *gbx_e2b_credential(struct gbx_server *s, const struct evkeyvalq *in,
                                    enum evhttp_cmd_type m, const char *path, const char *query)
{
    const char *sid = evhttp_find_header(in, "E2b-Sandbox-Id");
    int files = path && strcmp(path, "/files") == 0;
    struct gbx_live *l = NULL;
    if (sid == NULL) { /* a signed envd URL without the sandbox's id */
        l = files ? gbx_e2b_files_credential(s, in, m, query, NULL) : NULL;
        return l && gbx_sandboxes_wake(s, l, "envd") == 0 ? l : NULL;
    }
    /* any owner's: its access token decides, and the request acts as its owner */
    l = gbx_sandboxes_find_any(s, sid);
    if (l == NULL || l->hibernated)
        return NULL;
    if (files)
        l = gbx_e2b_files_credential(s, in, m, query, l);
    else if (!header_is_token(in, "X-Access-Token", l) &&
             !header_is_token(in, "E2B-Traffic-Access-Token", l))
        l = NULL;
    /* a paused one answers as E2B's edge does, unless it was made to wake (autoResume):
     * only a request with its credential thaws it */
    return l && gbx_sandboxes_wake(s, l, "envd") == 0 ? l : NULL;
}

/* ---- the data plane ------------------------------------------------------------------------- */

void gbx_e2b_not_found(struct evhttp_request *req, const char *sandbox_id)
{
    /* what E2B's edge answers for an unknown, killed or paused sandbox */
    gbx_e2b_reply_json(req, 502,
                       json_pack("{s:s,s:s,s:i}", "sandboxId",
                                 gbx_sandbox_id_valid(sandbox_id) == 0 ? sandbox_id : "", "message",
                                 "The sandbox was not found", "code", 502));
}

int gbx_e2b_admit(struct gbx_server *s, struct evhttp_request *req, const char *path,
                  enum gbx_admit_front front)
{
    int64_t room = 0;
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_http_admit(s, req, path, front, &room, &err) == 0)
        return 0;
    gbx_e2b_error(req, 507, "%s", err->msg);
    return -1;
}

void gbx_e2b_data(struct gbx_server *s, struct event_base *base, struct evhttp_request *req,
                  const char *sandbox_id)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    /* a request with no credential of this sandbox (its access token, its traffic token, or
     * for /files a URL signature) gets what an unknown id gets: the answer must not tell
     * whether the id exists. The HTTP gate (gate.c) asks the same question before it lets
     * the request's body in. */
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    struct gbx_live *l = gbx_e2b_credential(s, evhttp_request_get_input_headers(req),
                                            evhttp_request_get_command(req), path, query);
    if (l == NULL)
        return gbx_e2b_not_found(req, sandbox_id);
    struct gbx_actor owner;
    gbx_actor_for(&owner, l->owner);
    const struct gbx_actor *who = &owner;
    if (path == NULL)
        return gbx_e2b_error(req, 400, "malformed request URI");
    const char *port =
        evhttp_find_header(evhttp_request_get_input_headers(req), "E2b-Sandbox-Port");
    int interp = port && strcmp(port, "49999") == 0;
    if (gbx_e2b_admit(s, req, path, interp ? GBX_ADMIT_E2B_INTERP : GBX_ADMIT_E2B_DATA) < 0)
        return;
    if (interp)
        return gbx_e2b_interp(s, who, base, req, l, path);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(path, "/health") == 0) {
        if (m != EVHTTP_REQ_GET)
            return gbx_e2b_error(req, 405, "method not allowed");
        evhttp_send_reply(req, 204, "No Content", NULL);
        return;
    }
    if (strcmp(path, "/files") == 0)
        return gbx_e2b_files(s, base, req, l);
    if (!gbx_e2b_token_ok(req, l))
        return gbx_e2b_error(req, 401,
                             "unauthorized access, please provide a valid access token or "
                             "method signing if supported");
    if (strncmp(path, "/process.Process/", 17) == 0) {
        if (m != EVHTTP_REQ_POST)
            return gbx_e2b_error(req, 405, "method not allowed");
        return gbx_e2b_process(s, who, base, req, l, path + 17);
    }
    if (strncmp(path, "/filesystem.Filesystem/", 23) == 0) {
        if (m != EVHTTP_REQ_POST)
            return gbx_e2b_error(req, 405, "method not allowed");
        return gbx_e2b_filesystem(s, who, base, req, l, path + 23);
    }
    gbx_e2b_error(req, 404, "no envd route '%s'", path);
}
