/* SPDX-License-Identifier: MIT */
/* The E2B code interpreter (@e2b/code-interpreter; e2b.md §6), on port 49999 of a sandbox:
 *
 *   POST   /execute                {"code", "context_id"?, "language"?, "env_vars"?} -> NDJSON
 *   POST   /contexts               {"language"?, "cwd"?} -> {"id", "language", "cwd"}
 *   GET    /contexts               -> [context]
 *   DELETE /contexts/{id}
 *   POST   /contexts/{id}/restart
 *   GET    /health                 -> 204 (no access token needed past the data plane's check)
 *
 * A context is one persistent Python process in the sandbox (interp_kernel.py, run with
 * `python3 -u -c`, as the default user), driven over its stdin and stdout through an agent
 * connection the context keeps: a request is one JSON line, the reply is the /execute events,
 * one per line, ending with end_of_execution. Executions on a context run one at a time, in
 * order of arrival. Python only: that is what the kernel is (docs/e2b.md says what differs
 * from E2B's Jupyter kernels). */
#include "e2b/e2b.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/frame.h"
#include "agent/aconn.h"
#include "http/http.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "base/log.h"
#include "base/mem.h"

/* interp_blob.S: the kernel's source, NUL-terminated */
extern const char gbx_interp_kernel[];

#define OUT_CAP (1u << 20)
#define LINE_MAX_BYTES (16u << 20)

struct ctx;

/* One /execute request, waiting or running. */
struct run {
    struct run *next;
    struct ctx *ctx;
    struct evhttp_request *req; /* NULL once the client left */
    char *line;                 /* the request line for the kernel */
    int started;
    int paused;
};

struct ctx {
    struct ctx *next;
    struct gbx_server *srv;
    char sandbox[GBX_ID_MAX + 1];
    char id[40];
    char cwd[512];
    struct gbx_aconn *ac;
    uint32_t proc;
    uint32_t pid;
    int ready;            /* the kernel runs */
    int dead;             /* the kernel or its connection is gone */
    struct run *queue;    /* head: the running execution (when ready) */
    struct evbuffer *out; /* the kernel's stdout not yet split into lines */
    char actor[128];
};

static struct ctx *contexts;
static unsigned long next_ctx;

static struct ctx *ctx_find(const char *sandbox, const char *id)
{
    for (struct ctx *c = contexts; c; c = c->next)
        if (!c->dead && strcmp(c->sandbox, sandbox) == 0 && strcmp(c->id, id) == 0)
            return c;
    return NULL;
}

static void run_free(struct run *r)
{
    free(r->line);
    free(r);
}

/* ---- replies to /execute -------------------------------------------------------------------- */

static void on_run_client_close(struct evhttp_connection *conn, void *arg)
{
    struct run *r = arg;
    /* the execution goes on in the kernel; its events are dropped from here */
    if (r->req && evhttp_request_get_connection(r->req) == NULL)
        evhttp_send_reply_end(r->req);
    r->req = NULL;
    if (r->paused && r->ctx->ac) {
        r->paused = 0;
        gbx_aconn_pause(r->ctx->ac, 0);
    }
}

static void detach(struct run *r)
{
    if (r->req && evhttp_request_get_connection(r->req))
        evhttp_connection_set_closecb(evhttp_request_get_connection(r->req), NULL, NULL);
}

static void drained(struct evhttp_connection *conn, void *arg)
{
    struct run *r = arg;
    r->paused = 0;
    if (r->ctx->ac)
        gbx_aconn_pause(r->ctx->ac, 0); /* may deliver frames: nothing after this */
}

static void run_send(struct run *r, const char *line, size_t len)
{
    if (r->req == NULL)
        return;
    if (!r->started) {
        r->started = 1;
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type",
                          "application/x-ndjson");
        evhttp_send_reply_start(r->req, 200, "OK");
    }
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    evbuffer_add(b, line, len);
    evbuffer_add(b, "\n", 1);
    gbx_http_send_chunk(r->req, b, OUT_CAP, &r->paused, r->ctx->ac, drained, r);
    evbuffer_free(b);
}

/* End the running execution's reply (with an error event when why is set). */
static void run_end(struct run *r, const char *why)
{
    if (r->req) {
        if (why) {
            json_t *e = json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", "KernelError",
                                  "value", why, "traceback", "");
            char *t = json_dumps(e, JSON_COMPACT);
            json_decref(e);
            if (!r->started) {
                detach(r);
                gbx_e2b_error(r->req, 502, "%s", why);
                r->req = NULL;
            } else {
                run_send(r, t, strlen(t));
            }
            free(t);
        }
        if (r->req) {
            detach(r);
            evhttp_send_reply_end(r->req);
            r->req = NULL;
        }
    }
    run_free(r);
}

/* ---- the kernel ------------------------------------------------------------------------------ */

static void ctx_unlink(struct ctx *c)
{
    for (struct ctx **pp = &contexts; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            return;
        }
    }
}

/* The context is over: fail what waits, free it (never from inside its own connection's
 * callbacks: the connection is freed deferred by aconn). */
static void ctx_die(struct ctx *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = 1;
    ctx_unlink(c);
    while (c->queue) {
        struct run *r = c->queue;
        c->queue = r->next;
        run_end(r, why);
    }
    gbx_aconn_free(c->ac);
    c->ac = NULL;
    evbuffer_free(c->out);
    free(c);
}

static void ctx_start_next(struct ctx *c);

/* Send the request line of the execution at the head of the queue, in chunks. */
static void ctx_send(struct ctx *c, const char *line)
{
    size_t len = strlen(line), off = 0;
    while (off < len || off == 0) {
        size_t n = len - off > GBX_FRAME_CHUNK ? GBX_FRAME_CHUNK : len - off;
        struct gbx_msg *m = gbx_aconn_begin(c->ac, GBX_MSG_STDIN);
        gbx_msg_put_u32(m, GBX_A_PROC, c->proc);
        gbx_msg_put(m, GBX_A_DATA, line + off, n);
        (void)gbx_aconn_send(c->ac, NULL, NULL);
        off += n;
        if (n == 0)
            break;
    }
}

static void ctx_start_next(struct ctx *c)
{
    if (!c->ready || c->queue == NULL || c->queue->line == NULL)
        return;
    char *line = c->queue->line;
    c->queue->line = NULL; /* sent: the head is now running */
    ctx_send(c, line);
    free(line);
}

/* One line from the kernel: an event of the head execution. */
static void ctx_line(struct ctx *c, const char *line, size_t len)
{
    struct run *r = c->queue;
    if (r == NULL)
        return; /* nothing asked: not ours to show */
    int end = strstr(line, "\"type\": \"end_of_execution\"") != NULL;
    run_send(r, line, len);
    if (end) {
        c->queue = r->next;
        run_end(r, NULL);
        ctx_start_next(c);
    }
}

static void on_ctx_event(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    struct ctx *c = arg;
    if (c->dead || h->id != c->proc)
        return;
    struct gbx_attr a;
    if ((h->type == GBX_EV_STDOUT || h->type == GBX_EV_STDERR) &&
        gbx_attrs_find(p, h->len, GBX_A_DATA, &a) == 1) {
        if (h->type == GBX_EV_STDERR) {
            /* the kernel's own failures (the cell's stderr comes as events on stdout) */
            gbx_log_warn("sandbox '%s': interpreter context '%s': %.*s", c->sandbox, c->id,
                         (int)(a.len > 500 ? 500 : a.len), (const char *)a.data);
            return;
        }
        evbuffer_add(c->out, a.data, a.len);
        for (;;) {
            struct evbuffer_ptr nl = evbuffer_search(c->out, "\n", 1, NULL);
            if (nl.pos < 0) {
                if (evbuffer_get_length(c->out) > LINE_MAX_BYTES)
                    ctx_die(c, "the interpreter sent a line longer than 16 MiB");
                return;
            }
            size_t n = (size_t)nl.pos;
            char *line = gbx_xmalloc(n + 1);
            evbuffer_remove(c->out, line, n);
            evbuffer_drain(c->out, 1);
            line[n] = '\0';
            ctx_line(c, line, n);
            free(line);
        }
    }
    if (h->type == GBX_EV_EXIT)
        ctx_die(c, "the interpreter exited (restart the context)");
}

static void on_ctx_close(void *arg, const char *why)
{
    ctx_die(arg, why);
}

static void on_spawn(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct ctx *c = arg;
    if (h == NULL || h->type == GBX_MSG_ERROR) {
        char msg[512];
        (void)gbx_aconn_error_text(p, h ? h->len : 0, msg, sizeof(msg));
        gbx_log_warn("sandbox '%s': cannot start the interpreter: %s", c->sandbox, msg);
        ctx_die(c, "cannot start the interpreter (is python3 in the template?)");
        return;
    }
    (void)!gbx_attrs_get_u32(p, h->len, GBX_A_PROC, &c->proc);
    (void)!gbx_attrs_get_u32(p, h->len, GBX_A_PID, &c->pid);
    c->ready = 1;
    ctx_start_next(c);
}

/* Start a context's kernel; the context is usable at once (executions queue until it runs). */
static struct ctx *ctx_new(struct gbx_server *s, const struct gbx_actor *who,
                           struct event_base *base, struct gbx_live *l, const char *id,
                           const char *cwd, struct gbx_err **err)
{
    struct ctx *c = gbx_xcalloc(1, sizeof(*c));
    c->srv = s;
    snprintf(c->sandbox, sizeof(c->sandbox), "%s", l->sb->id);
    if (id)
        snprintf(c->id, sizeof(c->id), "%s", id);
    else
        snprintf(c->id, sizeof(c->id), "ctx-%lu", ++next_ctx);
    char home[128];
    gbx_e2b_home(GBX_E2B_DEFAULT_USER, home, sizeof(home));
    snprintf(c->cwd, sizeof(c->cwd), "%s", cwd ? cwd : home);
    snprintf(c->actor, sizeof(c->actor), "%s", who->name);
    c->out = evbuffer_new();
    GBX_BUG_ON(c->out == NULL);
    if (gbx_aconn_open(base, l->sb, on_ctx_event, on_ctx_close, c, &c->ac, err) < 0) {
        evbuffer_free(c->out);
        free(c);
        return NULL;
    }
    struct gbx_msg *m = gbx_aconn_begin(c->ac, GBX_MSG_SPAWN);
    gbx_msg_put_str(m, GBX_A_ARGV, "python3");
    gbx_msg_put_str(m, GBX_A_ARGV, "-u");
    gbx_msg_put_str(m, GBX_A_ARGV, "-c");
    gbx_msg_put_str(m, GBX_A_ARGV, gbx_interp_kernel);
    gbx_msg_put_str(m, GBX_A_USER, GBX_E2B_DEFAULT_USER);
    gbx_msg_put_str(m, GBX_A_CWD, c->cwd);
    gbx_msg_put_u32(m, GBX_A_STDIN, 1);
    const char *k;
    json_t *v;
    json_object_foreach(l->env, k, v)
    {
        char kv[8192];
        snprintf(kv, sizeof(kv), "%s=%s", k, json_string_value(v));
        gbx_msg_put_str(m, GBX_A_ENV, kv);
    }
    if (gbx_aconn_send(c->ac, on_spawn, c) < 0) {
        gbx_aconn_free(c->ac);
        evbuffer_free(c->out);
        free(c);
        return gbx_err_set(err, EIO, GBX_ERR_INTERNAL, "cannot start the interpreter"), NULL;
    }
    c->next = contexts;
    contexts = c;
    gbx_server_audit(s, who, "interp.context", c->sandbox, json_pack("{s:s}", "context", c->id));
    return c;
}

static void ctx_kill(struct ctx *c)
{
    if (c->ready && c->ac) {
        struct gbx_msg *m = gbx_aconn_begin(c->ac, GBX_MSG_SIGNAL);
        gbx_msg_put_u32(m, GBX_A_PROC, c->proc);
        gbx_msg_put_u32(m, GBX_A_SIGNO, SIGKILL);
        (void)gbx_aconn_send(c->ac, NULL, NULL);
    }
    ctx_die(c, "the context was removed");
}

static json_t *ctx_json(const struct ctx *c)
{
    return json_pack("{s:s,s:s,s:s}", "id", c->id, "language", "python", "cwd", c->cwd);
}

/* ---- the routes ------------------------------------------------------------------------------ */

static int language_ok(struct evhttp_request *req, json_t *lang)
{
    if (lang == NULL || json_is_null(lang) ||
        (json_is_string(lang) && strcmp(json_string_value(lang), "python") == 0))
        return 1;
    gbx_e2b_error(req, 400, "only the python language is available (see docs/e2b.md)");
    return 0;
}

static json_t *body_object(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n == 0)
        return json_object();
    json_t *v = json_loadb((const char *)evbuffer_pullup(in, -1), n, 0, NULL);
    if (!json_is_object(v)) {
        json_decref(v);
        gbx_e2b_error(req, 400, "the body must be a JSON object");
        return NULL;
    }
    return v;
}

static void handle_execute(struct gbx_server *s, const struct gbx_actor *who,
                           struct event_base *base, struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = body_object(req);
    if (body == NULL)
        return;
    json_t *code = json_object_get(body, "code");
    json_t *cid = json_object_get(body, "context_id");
    json_t *env = json_object_get(body, "env_vars");
    if (!json_is_string(code) || (cid && !json_is_null(cid) && !json_is_string(cid)) ||
        (env && !json_is_null(env) && !json_is_object(env))) {
        json_decref(body);
        return gbx_e2b_error(req, 400,
                             "expected {\"code\": str, \"context_id\"?: str, "
                             "\"env_vars\"?: {str: str}}");
    }
    if (!language_ok(req, json_object_get(body, "language"))) {
        json_decref(body);
        return;
    }
    struct ctx *c = NULL;
    if (json_is_string(cid)) {
        c = ctx_find(l->sb->id, json_string_value(cid));
        if (c == NULL) {
            gbx_e2b_error(req, 404, "context '%s' not found", json_string_value(cid));
            json_decref(body);
            return;
        }
    } else {
        c = ctx_find(l->sb->id, "default");
        struct gbx_err *err = NULL;
        if (c == NULL && (c = ctx_new(s, who, base, l, "default", NULL, &err)) == NULL) {
            gbx_e2b_error(req, 502, "%s", err->msg);
            gbx_err_free(err);
            json_decref(body);
            return;
        }
    }
    json_t *line = json_pack("{s:O}", "code", code);
    if (json_is_object(env))
        json_object_set(line, "env", env);
    struct run *r = gbx_xcalloc(1, sizeof(*r));
    r->ctx = c;
    r->req = req;
    r->line = json_dumps(line, JSON_COMPACT);
    json_decref(line);
    GBX_BUG_ON(r->line == NULL);
    size_t n = strlen(r->line);
    r->line = gbx_xrealloc(r->line, n + 2);
    memcpy(r->line + n, "\n", 2);
    gbx_server_audit(
        s, who, "interp.execute", l->sb->id,
        json_pack("{s:s,s:i}", "context", c->id, "bytes", (json_int_t)json_string_length(code)));
    json_decref(body);
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_run_client_close, r);
    struct run **pp = &c->queue;
    while (*pp)
        pp = &(*pp)->next;
    *pp = r;
    if (c->queue == r)
        ctx_start_next(c);
}

static void handle_contexts(struct gbx_server *s, const struct gbx_actor *who,
                            struct event_base *base, struct evhttp_request *req, struct gbx_live *l,
                            const char *rest)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (*rest == '\0') {
        if (m == EVHTTP_REQ_GET) {
            json_t *arr = json_array();
            for (struct ctx *c = contexts; c; c = c->next)
                if (!c->dead && strcmp(c->sandbox, l->sb->id) == 0)
                    json_array_append_new(arr, ctx_json(c));
            gbx_http_reply_json(req, 200, arr);
            return;
        }
        if (m != EVHTTP_REQ_POST)
            return gbx_e2b_error(req, 405, "method not allowed");
        json_t *body = body_object(req);
        if (body == NULL)
            return;
        json_t *cwd = json_object_get(body, "cwd");
        if (!language_ok(req, json_object_get(body, "language")) ||
            (cwd && !json_is_null(cwd) &&
             (!json_is_string(cwd) || json_string_value(cwd)[0] != '/'))) {
            if (cwd && !json_is_null(cwd) &&
                (!json_is_string(cwd) || json_string_value(cwd)[0] != '/'))
                gbx_e2b_error(req, 400, "'cwd' must be an absolute path");
            json_decref(body);
            return;
        }
        struct gbx_err *err = NULL;
        struct ctx *c = ctx_new(s, who, base, l, NULL,
                                json_is_string(cwd) ? json_string_value(cwd) : NULL, &err);
        json_decref(body);
        if (c == NULL) {
            gbx_e2b_error(req, 502, "%s", err->msg);
            gbx_err_free(err);
            return;
        }
        gbx_http_reply_json(req, 200, ctx_json(c));
        return;
    }
    /* /contexts/{id} and /contexts/{id}/restart */
    char id[40];
    const char *slash = strchr(rest + 1, '/');
    size_t n = slash ? (size_t)(slash - rest - 1) : strlen(rest + 1);
    if (n == 0 || n >= sizeof(id))
        return gbx_e2b_error(req, 404, "no such context");
    memcpy(id, rest + 1, n);
    id[n] = '\0';
    struct ctx *c = ctx_find(l->sb->id, id);
    if (c == NULL)
        return gbx_e2b_error(req, 404, "context '%s' not found", id);
    if (slash == NULL && m == EVHTTP_REQ_DELETE) {
        ctx_kill(c);
        evhttp_send_reply(req, 204, "No Content", NULL);
        return;
    }
    if (slash && strcmp(slash, "/restart") == 0 && m == EVHTTP_REQ_POST) {
        char cwd[512];
        snprintf(cwd, sizeof(cwd), "%s", c->cwd);
        ctx_kill(c);
        struct gbx_err *err = NULL;
        if (ctx_new(s, who, base, l, id, cwd, &err) == NULL) {
            gbx_e2b_error(req, 502, "%s", err->msg);
            gbx_err_free(err);
            return;
        }
        evhttp_send_reply(req, 204, "No Content", NULL);
        return;
    }
    gbx_e2b_error(req, slash ? 404 : 405, "no such route");
}

void gbx_e2b_interp(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                    struct evhttp_request *req, struct gbx_live *l, const char *path)
{
    if (strcmp(path, "/health") == 0) {
        if (evhttp_request_get_command(req) != EVHTTP_REQ_GET)
            return gbx_e2b_error(req, 405, "method not allowed");
        evhttp_send_reply(req, 204, "No Content", NULL);
        return;
    }
    /* every other route runs code or reaches a kernel in the sandbox: the sandbox's access
     * token first (contexts start a Python process with a caller-chosen cwd). The SDK sends
     * it as X-Access-Token on /execute, and only as E2B-Traffic-Access-Token on /contexts */
    if (!gbx_e2b_traffic_token_ok(req, l))
        return gbx_e2b_error(req, 401, "unauthorized access, please provide a valid access token");
    if (strcmp(path, "/execute") == 0) {
        if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
            return gbx_e2b_error(req, 405, "method not allowed");
        return handle_execute(s, who, base, req, l);
    }
    if (strncmp(path, "/contexts", 9) == 0 && (path[9] == '\0' || path[9] == '/'))
        return handle_contexts(s, who, base, req, l, path + 9);
    gbx_e2b_error(req, 404, "no code interpreter route '%s'", path);
}

size_t gbx_e2b_interp_shutdown(void)
{
    size_t n = 0;
    while (contexts) {
        for (struct run *r = contexts->queue; r; r = r->next)
            n += r->req != NULL;
        ctx_die(contexts, "the daemon is stopping");
    }
    return n;
}
