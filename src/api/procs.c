/* SPDX-License-Identifier: MIT */
/* The processes of a sandbox (see docs/api.yaml):
 *
 *   GET  .../processes                      the running processes (the agent's PS)
 *   GET  .../processes?all=true             every process of the sandbox (its cgroup, read
 *                                           from /proc off the loop), the API's marked
 *   GET  .../processes/{proc}               one of them
 *   GET  .../processes/{proc}/stream        attach: its events from here on (exec.c)
 *   POST .../processes/{proc}/stdin         the raw body, written to its stdin
 *   POST .../processes/{proc}/close-stdin
 *   POST .../processes/{proc}/signal        {"signal": "TERM" | "SIGTERM" | 15, "group": true}
 *   POST .../processes/{proc}/resize        {"rows": N, "cols": N}
 *
 * Each request opens its own connection to the sandbox's agent (aconn.h), sends its request
 * and replies once the agent answered: nothing blocks the loop.
 */
#include "api/procs.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "agent/frame.h"
#include "agent/aconn.h"
#include "http/exec.h"
#include "http/http.h"
#include "http/recorded.h"
#include "core/offload.h"
#include "core/server.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/query.h"
#include "sandbox/backend.h"
#include "sandbox/cgroup.h"
#include "sandbox/proctree.h"

#define PROCS_PTY_MAX 1000

enum op { OP_PS, OP_PS_ALL, OP_GET, OP_STDIN, OP_CLOSE_STDIN, OP_SIGNAL, OP_RESIZE };

/* One short request in flight. */
struct call {
    struct gbx_server *srv;
    struct evhttp_request *req;
    struct gbx_aconn *agent;
    enum op op;
    uint32_t proc;
    int pending;      /* agent replies still to come */
    json_t *detail;   /* the audit record's detail, written on success */
    const char *kind; /* its kind, or NULL */
    char sandbox[GBX_ID_MAX + 1];
    char actor[128];
    struct gbx_proctree_src tree; /* OP_PS_ALL: what the host side reads */
};

static void call_free(struct call *c)
{
    gbx_aconn_free(c->agent);
    json_decref(c->detail);
    free(c->tree.cgroup_dir);
    free(c);
}

/* ---- every process (all=true) ------------------------------------------------------- */

/* The host's read of the tree, off the loop, then merged with the agent's list. */
struct tree_job {
    struct gbx_http_later *later;
    struct gbx_proctree_src src;
    json_t *api; /* the agent's processes (those started through the API) */
    json_t *out;
    struct gbx_err *err;
};

static void tree_work(void *arg)
{
    struct tree_job *j = arg;
    (void)!gbx_sandbox_proctree(&j->src, GBX_PROCTREE_MAX, &j->out, &j->err);
}

static void tree_done(void *arg)
{
    struct tree_job *j = arg;
    struct evhttp_request *req = gbx_http_later_take(j->later);
    if (req && j->err) {
        gbx_http_reply_err(req, j->err);
    } else if (req) {
        size_t i, k;
        json_t *p, *a;
        json_array_foreach(json_object_get(j->out, "processes"), i, p)
        {
            json_t *handle = json_null(), *pty = NULL;
            json_array_foreach(j->api, k, a)
            {
                if (json_integer_value(json_object_get(a, "pid")) ==
                    json_integer_value(json_object_get(p, "pid"))) {
                    handle = json_incref(json_object_get(a, "process"));
                    pty = json_object_get(a, "pty");
                }
            }
            if (!json_is_null(handle) &&
                strcmp(json_string_value(json_object_get(p, "kind")), "other") == 0)
                json_object_set_new(p, "kind", json_string("api"));
            json_object_set_new(p, "process", handle);
            if (pty)
                json_object_set(p, "pty", pty);
        }
        json_object_set_new(j->out, "limit", json_integer(GBX_PROCTREE_MAX));
        gbx_http_reply_json(req, 200, gbx_steal_ptr(&j->out));
    }
    json_decref(j->out);
    json_decref(j->api);
    gbx_err_free(j->err);
    free(j->src.cgroup_dir);
    free(j);
}

/* The agent answered its PS: now the host's view, off the loop. */
static void tree_start(struct call *c, json_t *api)
{
    struct tree_job *j = gbx_xcalloc(1, sizeof(*j));
    j->src = c->tree;
    c->tree.cgroup_dir = NULL;
    j->api = api;
    j->later = gbx_http_later_new(c->req);
    if (gbx_offload_submit(gbx_server_offload(c->srv), tree_work, tree_done, j) < 0) {
        gbx_err_set(&j->err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
        tree_done(j);
    }
}

/* ---- the processes list ------------------------------------------------------------- */

/* One nested PROCINFO as the API's JSON object. */
static json_t *procinfo_json(const uint8_t *p, size_t len)
{
    struct gbx_attr_iter it;
    struct gbx_attr a;
    uint32_t v;
    char s[4096];
    json_t *o = json_object(), *argv = json_array();
    gbx_attr_iter_init(&it, p, len);
    while (gbx_attr_next(&it, &a) == 1) {
        switch (a.tag) {
        case GBX_A_PROC:
            if (gbx_attr_u32(&a, &v) == 0)
                json_object_set_new(o, "process", json_integer(v));
            break;
        case GBX_A_PID:
            if (gbx_attr_u32(&a, &v) == 0)
                json_object_set_new(o, "pid", json_integer(v));
            break;
        case GBX_A_PTY:
            if (gbx_attr_u32(&a, &v) == 0)
                json_object_set_new(o, "pty", json_boolean(v));
            break;
        case GBX_A_ARGV:
        case GBX_A_CWD:
        case GBX_A_USER: {
            /* a string that does not fit or is not UTF-8 is shown mangled, not dropped */
            json_t *js = NULL;
            if (gbx_attr_str(&a, s, sizeof(s)) == 0)
                js = json_string(s);
            if (js == NULL)
                js = json_string("?");
            if (a.tag == GBX_A_ARGV)
                json_array_append_new(argv, js);
            else
                json_object_set_new(o, a.tag == GBX_A_CWD ? "cwd" : "user", js);
            break;
        }
        default:
            break;
        }
    }
    json_object_set_new(o, "cmd", argv);
    if (json_object_get(o, "process") == NULL || json_object_get(o, "pid") == NULL) {
        json_decref(o);
        return NULL;
    }
    if (json_object_get(o, "pty") == NULL)
        json_object_set_new(o, "pty", json_false());
    return o;
}

static json_t *ps_json(const uint8_t *p, size_t len)
{
    struct gbx_attr_iter it;
    struct gbx_attr a;
    json_t *arr = json_array();
    gbx_attr_iter_init(&it, p, len);
    while (gbx_attr_next(&it, &a) == 1) {
        if (a.tag != GBX_A_PROCINFO)
            continue;
        json_t *o = procinfo_json(a.data, a.len);
        if (o)
            json_array_append_new(arr, o);
    }
    return arr;
}

/* ---- replies -------------------------------------------------------------------------- */

/* The agent's ERROR as the API's error, with clearer words for the usual cases. */
static void reply_agent_error(struct call *c, const uint8_t *p, size_t len)
{
    char msg[512];
    int e = gbx_aconn_error_text(p, len, msg, sizeof(msg));
    enum gbx_err_kind kind = gbx_err_kind_from_errno(e);
    if (e == ESRCH) {
        snprintf(msg, sizeof(msg), "process %u not found (it never ran, or it has finished)",
                 c->proc);
    } else if (e == EPIPE && c->op == OP_STDIN) {
        kind = GBX_ERR_CONFLICT;
        snprintf(msg, sizeof(msg),
                 "process %u does not read stdin from here: start it with \"stdin\": true "
                 "(or its stdin was closed)",
                 c->proc);
    } else if (e == ENOTTY && c->op == OP_RESIZE) {
        kind = GBX_ERR_CONFLICT;
        snprintf(msg, sizeof(msg), "process %u has no terminal: start it with \"pty\"", c->proc);
    } else if (e == ENOBUFS) {
        kind = GBX_ERR_LIMIT;
    }
    gbx_http_reply_error(c->req, kind, "%s", msg);
}

static void on_reply(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct call *c = arg;
    if (!final)
        return;
    if (h == NULL) {
        gbx_http_reply_error(c->req, GBX_ERR_UNAVAILABLE, "the sandbox went away");
        call_free(c);
        return;
    }
    if (h->type != GBX_MSG_OK) {
        /* the first failure answers; the requests still queued are dropped with the
         * connection */
        reply_agent_error(c, p, h->len);
        call_free(c);
        return;
    }
    if (--c->pending > 0)
        return;
    if (c->op == OP_PS_ALL) {
        tree_start(c, ps_json(p, h->len));
    } else if (c->op == OP_PS || c->op == OP_GET) {
        json_t *arr = ps_json(p, h->len);
        if (c->op == OP_PS) {
            gbx_http_reply_json(c->req, 200, json_pack("{s:o}", "processes", arr));
        } else {
            size_t i;
            json_t *o, *found = NULL;
            json_array_foreach(arr, i, o)
            {
                if (json_integer_value(json_object_get(o, "process")) == c->proc)
                    found = json_incref(o);
            }
            json_decref(arr);
            if (found)
                gbx_http_reply_json(c->req, 200, found);
            else
                gbx_http_reply_error(c->req, GBX_ERR_NOT_FOUND,
                                     "process %u not found (it never ran, or it has finished)",
                                     c->proc);
        }
    } else if (c->kind) { /* answered once the record is durable (api/audit.c) */
        gbx_http_reply_recorded(c->srv, c->actor, c->kind, c->sandbox, gbx_steal_ptr(&c->detail),
                                c->req, 204, NULL);
        call_free(c);
        return;
    } else {
        gbx_http_reply_json(c->req, 204, NULL);
    }
    if (c->kind) {
        gbx_server_audit_as(c->srv, c->actor, c->kind, c->sandbox, c->detail);
        c->detail = NULL;
    }
    call_free(c);
}

static void on_close(void *arg, const char *why)
{
    /* pending requests have had their callbacks (and the call was freed there) */
    (void)arg;
    (void)why;
}

static struct call *call_open(struct gbx_server *srv, const struct gbx_actor *who,
                              struct event_base *base, struct evhttp_request *req,
                              struct gbx_sandbox *sb, enum op op, uint32_t proc)
{
    struct call *c = gbx_xcalloc(1, sizeof(*c));
    c->srv = srv;
    c->req = req;
    c->op = op;
    c->proc = proc;
    snprintf(c->sandbox, sizeof(c->sandbox), "%s", sb->id);
    snprintf(c->actor, sizeof(c->actor), "%s", who->name);
    struct gbx_err *err = NULL;
    if (gbx_aconn_open(base, sb, NULL, on_close, c, &c->agent, &err) < 0) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        call_free(c);
        return NULL;
    }
    return c;
}

/* Queue the request being built. On failure replies and frees c; returns -1. */
static int call_send(struct call *c)
{
    long r = gbx_aconn_send(c->agent, on_reply, c);
    if (r < 0) {
        gbx_http_reply_error(c->req, GBX_ERR_UNAVAILABLE, "the sandbox went away");
        call_free(c);
        return -1;
    }
    c->pending++;
    return 0;
}

/* ---- request bodies ----------------------------------------------------------------- */

static const struct {
    const char *name;
    int signo;
} signals[] = {
    {"HUP", SIGHUP},     {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2},   {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
    {"WINCH", SIGWINCH}, {"ALRM", SIGALRM}, {"PIPE", SIGPIPE},
};

/* "TERM", "SIGTERM" (any case) or a number from 1 to 64. */
static int signal_number(json_t *v)
{
    if (json_is_integer(v))
        return json_integer_value(v) >= 1 && json_integer_value(v) <= 64
                   ? (int)json_integer_value(v)
                   : -1;
    if (!json_is_string(v))
        return -1;
    const char *s = json_string_value(v);
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(signals); i++)
        if (strcasecmp(s, signals[i].name) == 0)
            return signals[i].signo;
    return -1;
}

static void do_signal(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                      struct evhttp_request *req, struct gbx_sandbox *sb, uint32_t proc)
{
    static const char *const keys[] = {"signal", "group", NULL};
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    json_t *group = json_object_get(body, "group");
    int signo = signal_number(json_object_get(body, "signal"));
    if (gbx_http_only_fields(req, body, keys, "signal, group") < 0) {
        json_decref(body);
        return;
    }
    if (signo < 0 || (group && !json_is_boolean(group))) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "'signal' must be a signal name (HUP INT QUIT KILL USR1 USR2 TERM "
                             "CONT STOP TSTP WINCH ALRM PIPE, with or without SIG) or a number "
                             "from 1 to 64; 'group' true or false");
        json_decref(body);
        return;
    }
    int whole = group == NULL || json_is_true(group);
    json_decref(body);
    struct call *c = call_open(srv, who, base, req, sb, OP_SIGNAL, proc);
    if (c == NULL)
        return;
    c->kind = "process.signal";
    c->detail =
        json_pack("{s:i,s:i,s:b}", "process", (json_int_t)proc, "signal", signo, "group", whole);
    struct gbx_msg *m = gbx_aconn_begin(c->agent, GBX_MSG_SIGNAL);
    gbx_msg_put_u32(m, GBX_A_PROC, proc);
    gbx_msg_put_u32(m, GBX_A_SIGNO, (uint32_t)signo);
    gbx_msg_put_u32(m, GBX_A_GROUP, (uint32_t)whole);
    (void)call_send(c);
}

static void do_resize(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                      struct evhttp_request *req, struct gbx_sandbox *sb, uint32_t proc)
{
    static const char *const keys[] = {"rows", "cols", NULL};
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    if (gbx_http_only_fields(req, body, keys, "rows, cols") < 0) {
        json_decref(body);
        return;
    }
    json_t *rows = json_object_get(body, "rows"), *cols = json_object_get(body, "cols");
    if (!json_is_integer(rows) || !json_is_integer(cols) || json_integer_value(rows) < 1 ||
        json_integer_value(rows) > PROCS_PTY_MAX || json_integer_value(cols) < 1 ||
        json_integer_value(cols) > PROCS_PTY_MAX) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "'rows' and 'cols' must be integers from 1 to %d", PROCS_PTY_MAX);
        json_decref(body);
        return;
    }
    uint32_t r = (uint32_t)json_integer_value(rows), k = (uint32_t)json_integer_value(cols);
    json_decref(body);
    struct call *c = call_open(srv, who, base, req, sb, OP_RESIZE, proc);
    if (c == NULL)
        return;
    struct gbx_msg *m = gbx_aconn_begin(c->agent, GBX_MSG_RESIZE);
    gbx_msg_put_u32(m, GBX_A_PROC, proc);
    gbx_msg_put_u32(m, GBX_A_PTY_ROWS, r);
    gbx_msg_put_u32(m, GBX_A_PTY_COLS, k);
    (void)call_send(c);
}

/* The raw body, in frames of at most GBX_FRAME_CHUNK bytes, all queued at once (the body is
 * bounded by the server's body limit); 204 once the agent acknowledged the last. */
static void do_stdin(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                     struct evhttp_request *req, struct gbx_sandbox *sb, uint32_t proc)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t total = evbuffer_get_length(in);
    struct call *c = call_open(srv, who, base, req, sb, OP_STDIN, proc);
    if (c == NULL)
        return;
    c->kind = "process.stdin";
    c->detail = json_pack("{s:i,s:i}", "process", (json_int_t)proc, "bytes", (json_int_t)total);
    gbx_exec_stdin_bytes(sb->id, proc, total);
    /* an empty body still asks the agent, so a process without stdin is reported */
    do {
        size_t n = evbuffer_get_length(in);
        if (n > GBX_FRAME_CHUNK)
            n = GBX_FRAME_CHUNK;
        struct gbx_msg *m = gbx_aconn_begin(c->agent, GBX_MSG_STDIN);
        gbx_msg_put_u32(m, GBX_A_PROC, proc);
        uint8_t *dst = gbx_msg_reserve(m, GBX_A_DATA, n);
        if (dst && n)
            evbuffer_remove(in, dst, n);
        if (call_send(c) < 0)
            return;
    } while (evbuffer_get_length(in) > 0);
}

static void do_simple(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                      struct evhttp_request *req, struct gbx_sandbox *sb, enum op op, uint32_t proc)
{
    struct call *c = call_open(srv, who, base, req, sb, op, proc);
    if (c == NULL)
        return;
    struct gbx_msg *m;
    if (op == OP_CLOSE_STDIN) {
        c->kind = "process.close_stdin";
        c->detail = json_pack("{s:i}", "process", (json_int_t)proc);
        m = gbx_aconn_begin(c->agent, GBX_MSG_CLOSE_STDIN);
        gbx_msg_put_u32(m, GBX_A_PROC, proc);
    } else {
        (void)gbx_aconn_begin(c->agent, GBX_MSG_PS);
    }
    (void)call_send(c);
}

/* GET .../processes[?all=true] */
static void do_list(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                    struct evhttp_request *req, struct gbx_sandbox *sb)
{
    int all = 0;
    const struct gbx_query_param params[] = {
        {.name = "all", .kind = GBX_QUERY_BOOL, .out = &all},
    };
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct gbx_query q = {0};
    gbx_autoerr struct gbx_err *err = NULL;
    int r =
        gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), GBX_QUERY_IGNORE_UNKNOWN, &err);
    gbx_query_release(&q);
    if (r < 0)
        return gbx_http_reply_err(req, err);
    if (!all)
        return do_simple(srv, who, base, req, sb, OP_PS, 0);
    const char *dir = gbx_cgroup_procs_dir(&sb->cg);
    if (dir == NULL || sb->init_pid <= 0)
        return gbx_http_reply_error(req, GBX_ERR_UNAVAILABLE,
                                    "sandbox '%s' has no processes to list", sb->id);
    struct call *c = call_open(srv, who, base, req, sb, OP_PS_ALL, 0);
    if (c == NULL)
        return;
    c->tree = (struct gbx_proctree_src){
        .init_pid = sb->init_pid, .host_uid = sb->host_uid, .cgroup_dir = gbx_xstrdup(dir)};
    (void)gbx_aconn_begin(c->agent, GBX_MSG_PS);
    (void)call_send(c);
}

/* ---- routing -------------------------------------------------------------------------- */

static void method_not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed here");
}

void gbx_api_procs(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                   struct evhttp_request *req, struct gbx_sandbox *sb, const char *sub)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (sub[0] == '\0' || strcmp(sub, "/") == 0) {
        if (m != EVHTTP_REQ_GET)
            return method_not_allowed(req, "GET");
        return do_list(srv, who, base, req, sb);
    }
    /* "/{proc}[/action]" */
    const char *p = sub + 1, *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    char num[16];
    uint64_t proc = 0;
    if (n == 0 || n >= sizeof(num)) {
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND,
                                    "no such process (a process handle is a number)");
    }
    memcpy(num, p, n);
    num[n] = '\0';
    if (gbx_parse_u64(num, 1, UINT32_MAX, &proc) < 0)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND,
                                    "no such process '%s' (a process handle is a number)", num);
    const char *action = slash ? slash + 1 : "";
    static const struct {
        const char *name;
        enum op op;
        int get;
    } routes[] = {
        {"", OP_GET, 1},          {"stream", OP_PS /* unused */, 1},
        {"stdin", OP_STDIN, 0},   {"close-stdin", OP_CLOSE_STDIN, 0},
        {"signal", OP_SIGNAL, 0}, {"resize", OP_RESIZE, 0},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(routes); i++) {
        if (strcmp(action, routes[i].name) != 0)
            continue;
        if (m != (routes[i].get ? EVHTTP_REQ_GET : EVHTTP_REQ_POST))
            return method_not_allowed(req, routes[i].get ? "GET" : "POST");
        uint32_t h = (uint32_t)proc;
        if (i == 1)
            return gbx_exec_attach(srv, who, base, req, sb, h);
        switch (routes[i].op) {
        case OP_SIGNAL:
            return do_signal(srv, who, base, req, sb, h);
        case OP_RESIZE:
            return do_resize(srv, who, base, req, sb, h);
        case OP_STDIN:
            return do_stdin(srv, who, base, req, sb, h);
        default: /* OP_GET, OP_CLOSE_STDIN */
            return do_simple(srv, who, base, req, sb, routes[i].op, h);
        }
    }
    gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for 'processes%s'", sub);
}
