/* SPDX-License-Identifier: MIT */
/* envd's process.Process over Connect JSON (shared/protocols/e2b.md §4.2):
 *
 *   Start       server stream: spawn {cmd, args, envs, cwd} [pty] [stdin] as the request's
 *               user, then start{pid}, data{stdout|stderr|pty}, keepalive, end, end-of-stream
 *   Connect     server stream: attach to a running pid (a takeover, as the native attach)
 *   List        the sandbox's running processes, each with its config
 *   SendInput   stdin or pty bytes; SendSignal SIGKILL/SIGTERM; CloseStdin; Update (resize)
 *
 * The streams are exec.c's (one agent connection each, backpressure, a Connect-Timeout-Ms
 * that kills the process group even after the client left, a client disconnect that leaves
 * the process running and its output read and dropped as envd does, takeover, the daemon's
 * drain); this file gives them E2B's event form
 * (struct gbx_exec_ops). The agent addresses a process by its handle; E2B by its pid in the
 * sandbox: every call that names a pid asks the agent's PS first. Processes are selected by
 * pid only (the JS SDK never uses tag).
 */
#include "e2b/e2b.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/frame.h"
#include "agent/aconn.h"
#include "e2b/connect.h"
#include "http/exec.h"
#include "http/http.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"

/* envd's chunk sizes for output events */
#define PROC_CHUNK (32u << 10)
#define PROC_PTY_CHUNK (16u << 10)
#define PROC_MAX_ARGS 4096
#define PROC_MAX_ENV 1024
#define PROC_PTY_MAX 0xffffu
/* Keepalive-Ping-Interval when the header is missing or invalid (envd's), and at most */
#define PROC_KEEPALIVE_S 90
#define PROC_KEEPALIVE_MAX_S 3600

/* ---- events ----------------------------------------------------------------------------- */

static void put_event(struct evbuffer *b, const char *name, json_t *ev)
{
    gbx_e2b_put_envelope(b, 0, json_pack("{s:{s:o}}", "event", name, ev));
}

static void put_trailer(struct evbuffer *b, const char *code, const char *msg)
{
    gbx_e2b_put_envelope(
        b, GBX_CONNECT_FLAG_END,
        code ? json_pack("{s:{s:s,s:o}}", "error", "code", code, "message", gbx_json_text(msg))
             : json_object());
}

static void ev_begin(struct evhttp_request *req)
{
    gbx_e2b_stream_start(req);
}

static void ev_started(struct evbuffer *b, uint32_t pid)
{
    put_event(b, "start", json_pack("{s:I}", "pid", (json_int_t)pid));
}

static void ev_output(struct evbuffer *b, int is_stdout, int pty, const uint8_t *data, size_t len)
{
    const char *key = pty ? "pty" : is_stdout ? "stdout" : "stderr";
    size_t max = pty ? PROC_PTY_CHUNK : PROC_CHUNK;
    for (size_t off = 0; off < len; off += max) {
        size_t n = len - off < max ? len - off : max;
        char *enc = gbx_connect_b64(data + off, n);
        put_event(b, "data", json_pack("{s:s}", key, enc));
        free(enc);
    }
}

/* Go's names for signals (syscall.Signal.String), as ProcessState.String says them. */
static const char *signal_text(uint32_t sig)
{
    static const char *const names[] = {
        [SIGHUP] = "hangup",
        [SIGINT] = "interrupt",
        [SIGQUIT] = "quit",
        [SIGILL] = "illegal instruction",
        [SIGTRAP] = "trace/breakpoint trap",
        [SIGABRT] = "aborted",
        [SIGBUS] = "bus error",
        [SIGFPE] = "floating point exception",
        [SIGKILL] = "killed",
        [SIGUSR1] = "user defined signal 1",
        [SIGSEGV] = "segmentation fault",
        [SIGUSR2] = "user defined signal 2",
        [SIGPIPE] = "broken pipe",
        [SIGALRM] = "alarm clock",
        [SIGTERM] = "terminated",
        [SIGSTKFLT] = "stack fault",
        [SIGCHLD] = "child exited",
        [SIGCONT] = "continued",
        [SIGSTOP] = "stopped (signal)",
        [SIGTSTP] = "stopped",
        [SIGTTIN] = "stopped (tty input)",
        [SIGTTOU] = "stopped (tty output)",
        [SIGURG] = "urgent I/O condition",
        [SIGXCPU] = "CPU time limit exceeded",
        [SIGXFSZ] = "file size limit exceeded",
        [SIGVTALRM] = "virtual timer expired",
        [SIGPROF] = "profiling timer expired",
        [SIGWINCH] = "window changed",
        [SIGIO] = "I/O possible",
        [SIGPWR] = "power failure",
        [SIGSYS] = "bad system call",
    };
    return sig < GBX_ARRAY_SIZE(names) ? names[sig] : NULL;
}

static void ev_exited(struct evbuffer *b, int signaled, uint32_t code, int timed_out)
{
    char status[64];
    json_t *end;
    if (signaled) {
        const char *name = signal_text(code);
        if (name)
            snprintf(status, sizeof(status), "signal: %s", name);
        else
            snprintf(status, sizeof(status), "signal: signal %u", code);
        end = json_pack("{s:i,s:b,s:s,s:s}", "exitCode", -1, "exited", 0, "status", status, "error",
                        status);
    } else {
        snprintf(status, sizeof(status), "exit status %u", code);
        end =
            json_pack("{s:I,s:b,s:s}", "exitCode", (json_int_t)code, "exited", 1, "status", status);
        if (code != 0)
            json_object_set_new(end, "error", json_string(status));
    }
    put_event(b, "end", end);
    if (timed_out)
        put_trailer(b, "deadline_exceeded", "the process ran past its timeout and was killed");
    else
        put_trailer(b, NULL, NULL);
}

static const char *code_for_kind(enum gbx_err_kind kind)
{
    switch (kind) {
    case GBX_ERR_NOT_FOUND:
        return "not_found";
    case GBX_ERR_CONFLICT:
        return "aborted";
    case GBX_ERR_INVALID:
        return "invalid_argument";
    case GBX_ERR_PERMISSION:
        return "permission_denied";
    case GBX_ERR_UNAVAILABLE:
        return "unavailable";
    case GBX_ERR_LIMIT:
        return "resource_exhausted";
    default:
        return "internal";
    }
}

static void ev_error(struct evbuffer *b, enum gbx_err_kind kind, const char *msg)
{
    put_trailer(b, code_for_kind(kind), msg);
}

static void ev_keepalive(struct evbuffer *b)
{
    put_event(b, "keepalive", json_object());
}

/* A stream that fails before its first message: 200, then the end-of-stream frame with the
 * error (a stream's HTTP error status would lose the code: the SDK derives it from the status
 * alone). */
static void stream_fail(struct evhttp_request *req, const char *code, const char *msg)
{
    json_t *text = gbx_json_text(msg); /* an agent's message cut short may end mid-character */
    gbx_e2b_stream_start(req);
    gbx_e2b_stream_end(req, code, json_string_value(text));
    json_decref(text);
}

/* The agent's words for a failed SPAWN or ATTACH, in envd's. */
static void ev_fail(struct evhttp_request *req, uint32_t pid, enum gbx_err_kind kind, int errnum,
                    const char *msg)
{
    static const char user_pfx[] = "unknown user '", cwd_pfx[] = "cannot change directory to '";
    const char *code = errnum ? gbx_connect_code_for_errno(errnum) : code_for_kind(kind);
    char text[600];
    snprintf(text, sizeof(text), "%s", msg);
    if (strncmp(msg, user_pfx, sizeof(user_pfx) - 1) == 0) {
        code = "unauthenticated";
        snprintf(text, sizeof(text), "invalid username: '%s", msg + sizeof(user_pfx) - 1);
    } else if (strncmp(msg, cwd_pfx, sizeof(cwd_pfx) - 1) == 0 &&
               (errnum == ENOENT || errnum == ENOTDIR)) {
        /* "cannot change directory to '/x': No such file or directory" */
        const char *path = msg + sizeof(cwd_pfx) - 1, *q = strstr(path, "': ");
        code = "invalid_argument";
        snprintf(text, sizeof(text), "cwd '%.*s' does not exist",
                 (int)(q ? (size_t)(q - path) : strlen(path)), path);
    } else if (errnum == ESRCH && pid) {
        code = "not_found";
        snprintf(text, sizeof(text), "process with pid %u not found", pid);
    }
    stream_fail(req, code, text);
}

static const struct gbx_exec_ops e2b_ops = {
    .begin = ev_begin,
    .started = ev_started,
    .output = ev_output,
    .exited = ev_exited,
    .error = ev_error,
    .fail = ev_fail,
    .keepalive = ev_keepalive,
};

/* Keepalive-Ping-Interval (seconds) in ms. */
static uint64_t keepalive_ms(struct evhttp_request *req)
{
    const char *v =
        evhttp_find_header(evhttp_request_get_input_headers(req), "Keepalive-Ping-Interval");
    uint64_t secs = 0;
    if (v == NULL || gbx_parse_u64(v, 1, PROC_KEEPALIVE_MAX_S, &secs) < 0)
        secs = PROC_KEEPALIVE_S;
    return secs * 1000;
}

/* ---- Start ------------------------------------------------------------------------------ */

struct start {
    const char *user, *cwd; /* cwd: resolved, or NULL for the user's home */
    json_t *argv;           /* [cmd, args...] */
    json_t *env;            /* the sandbox's, then the request's */
    int pty, stdin_open;
    uint32_t rows, cols;
};

static void build_spawn(struct gbx_msg *m, void *arg)
{
    const struct start *o = arg;
    size_t i;
    const char *key;
    json_t *v;
    json_array_foreach(o->argv, i, v)
    {
        gbx_msg_put_str(m, GBX_A_ARGV, json_string_value(v));
    }
    json_object_foreach(o->env, key, v)
    {
        gbx_autofree char *kv = gbx_asprintf("%s=%s", key, json_string_value(v));
        gbx_msg_put_str(m, GBX_A_ENV, kv);
    }
    if (o->cwd)
        gbx_msg_put_str(m, GBX_A_CWD, o->cwd);
    gbx_msg_put_str(m, GBX_A_USER, o->user);
    if (o->pty) {
        gbx_msg_put_u32(m, GBX_A_PTY_ROWS, o->rows);
        gbx_msg_put_u32(m, GBX_A_PTY_COLS, o->cols);
    }
    if (o->stdin_open)
        gbx_msg_put_u32(m, GBX_A_STDIN, 1);
}

/* A field of a message; an explicit null is the default value, as if absent. */
static json_t *field(json_t *msg, const char *key)
{
    json_t *v = json_object_get(msg, key);
    return json_is_null(v) ? NULL : v;
}

static int str_ok(json_t *v)
{
    return json_is_string(v) && !memchr(json_string_value(v), 0, json_string_length(v));
}

/* Add the {"K": "V"} pairs of src to env; the name of the first bad one in *bad. */
static int env_add(json_t *env, json_t *src, const char **bad)
{
    const char *key;
    json_t *v;
    json_object_foreach(src, key, v)
    {
        char kv[8192];
        if (!str_ok(v) ||
            snprintf(kv, sizeof(kv), "%s=%s", key, json_string_value(v)) >= (int)sizeof(kv) ||
            gbx_env_valid(kv) < 0) {
            *bad = key;
            return -1;
        }
        json_object_set(env, key, v);
    }
    return 0;
}

/* A PTY's size; both within 1..65535 (80x24 when absent). */
static int pty_size(json_t *pty, uint32_t *rows, uint32_t *cols)
{
    json_t *size = field(pty, "size");
    int64_t r = 24, c = 80;
    if (size && !json_is_object(size))
        return -1;
    if (size && (gbx_connect_int(field(size, "rows"), 1, PROC_PTY_MAX, &r) < 0 ||
                 gbx_connect_int(field(size, "cols"), 1, PROC_PTY_MAX, &c) < 0))
        return -1;
    *rows = (uint32_t)r;
    *cols = (uint32_t)c;
    return 0;
}

static void do_start(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                     struct evhttp_request *req, struct gbx_live *l, json_t *body)
{
    char user[64];
    if (gbx_e2b_user(req, NULL, 1, user, sizeof(user)) < 0)
        return;
    json_t *proc = field(body, "process");
    json_t *cmd = field(proc, "cmd"), *args = field(proc, "args");
    json_t *envs = field(proc, "envs"), *cwd = field(proc, "cwd");
    json_t *pty = field(body, "pty"), *in = field(body, "stdin");
    struct start o = {.user = user};
    if (!json_is_object(proc) || !str_ok(cmd) || json_string_length(cmd) == 0)
        return stream_fail(req, "invalid_argument", "process.cmd must be a non-empty string");
    if (args && (!json_is_array(args) || json_array_size(args) >= PROC_MAX_ARGS))
        return stream_fail(req, "invalid_argument", "process.args must be an array of strings");
    size_t i;
    json_t *a;
    json_array_foreach(args, i, a)
    {
        if (!str_ok(a))
            return stream_fail(req, "invalid_argument",
                               "process.args must be an array of strings without NUL bytes");
    }
    if ((envs && !json_is_object(envs)) || json_object_size(envs) > PROC_MAX_ENV)
        return stream_fail(req, "invalid_argument", "process.envs must be a map of strings");
    if (cwd && !str_ok(cwd))
        return stream_fail(req, "invalid_argument", "process.cwd must be a string");
    if (pty && (!json_is_object(pty) || pty_size(pty, &o.rows, &o.cols) < 0))
        return stream_fail(req, "invalid_argument",
                           "pty.size must be {cols, rows}, each from 1 to 65535");
    o.pty = pty && json_is_object(pty);
    o.stdin_open = 1;
    if (in && gbx_connect_bool(in, &o.stdin_open) < 0)
        return stream_fail(req, "invalid_argument", "stdin must be true or false");

    gbx_autofree char *dir =
        cwd && json_string_length(cwd) ? gbx_e2b_path(user, json_string_value(cwd)) : NULL;
    o.cwd = dir;
    o.argv = json_array();
    json_array_append(o.argv, cmd);
    json_array_foreach(args, i, a)
    {
        json_array_append(o.argv, a);
    }
    /* Always an explicit environment, so that it does not depend on whether the sandbox has
     * envVars: the agent then adds HOME, USER, LOGNAME and PATH where missing (envd's base). */
    o.env = json_pack("{s:s}", "LANG", "C.UTF-8");
    const char *bad = NULL;
    if ((l->env && env_add(o.env, l->env, &bad) < 0) || (envs && env_add(o.env, envs, &bad) < 0)) {
        gbx_autofree char *msg = gbx_asprintf("process.envs: '%.100s' must be a variable name "
                                              "with a string value (at most 8 KiB)",
                                              bad);
        stream_fail(req, "invalid_argument", msg);
        json_decref(o.argv);
        json_decref(o.env);
        return;
    }

    json_t *what = json_pack("{s:O,s:s,s:s}", "cmd", o.argv, "user", user, "via", "e2b");
    if (o.cwd)
        json_object_set_new(what, "cwd", json_string(o.cwd));
    if (o.pty)
        json_object_set_new(what, "pty", json_true());
    if (o.stdin_open)
        json_object_set_new(what, "stdin", json_true());
    unsigned long timeout = gbx_e2b_timeout_ms(req);
    if (timeout)
        json_object_set_new(what, "timeout_ms", json_integer((json_int_t)timeout));
    struct gbx_exec_stream_opts so = {
        .ops = &e2b_ops,
        .what = what,
        .timeout_ms = timeout,
        .keepalive_ms = keepalive_ms(req),
        .pty = o.pty,
        .keep_reading = 1,
    };
    gbx_exec_spawn(s, who, base, req, l->sb, &so, build_spawn, &o);
    json_decref(o.argv);
    json_decref(o.env);
}

/* ---- the calls that name a pid ------------------------------------------------------------ */

enum op { OP_LIST, OP_CONNECT, OP_INPUT, OP_SIGNAL, OP_CLOSE_STDIN, OP_UPDATE };

/* One call: the agent's PS, then (but for List) the operation on the process found. */
struct call {
    struct gbx_server *srv;
    struct event_base *base;
    struct evhttp_request *req;
    struct gbx_aconn *agent;
    enum op op;
    uint32_t pid, proc;
    int pending;   /* agent replies still to come */
    uint8_t *data; /* SendInput's bytes */
    size_t len;
    uint32_t signo; /* SendSignal */
    int resize;     /* Update with a size */
    uint32_t rows, cols;
    char sandbox[GBX_ID_MAX + 1];
    char actor[128];
};

static void call_free(struct call *c)
{
    gbx_aconn_free(c->agent);
    free(c->data);
    free(c);
}

/* Reply with an error and end the call. */
static void call_fail(struct call *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void call_fail(struct call *c, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = gbx_vasprintf(fmt, ap);
    va_end(ap);
    json_t *text = gbx_json_text(msg); /* an agent's message cut short may end mid-character */
    gbx_e2b_rpc_error(c->req, code, "%s", json_string_value(text));
    json_decref(text);
    free(msg);
    call_free(c);
}

/* The agent's ERROR for c: "process with pid N not found" for a process that is gone. */
static void call_agent_error(struct call *c, const uint8_t *p, size_t len)
{
    char msg[512];
    int e = gbx_aconn_error_text(p, len, msg, sizeof(msg));
    if (e == ESRCH)
        return call_fail(c, "not_found", "process with pid %u not found", c->pid);
    if (e == EPIPE && c->op == OP_INPUT)
        return call_fail(c, "failed_precondition",
                         "the stdin of process with pid %u is closed (or was never opened: "
                         "start it with stdin)",
                         c->pid);
    if (e == ENOTTY)
        return call_fail(c, "failed_precondition", "process with pid %u has no pty", c->pid);
    call_fail(c, gbx_connect_code_for_errno(e), "%s", msg);
}

/* One running process as the agent's PS tells it. */
struct procinfo {
    uint32_t proc, pid, pty;
    json_t *argv; /* owned */
    char cwd[4096];
    int have_proc, have_pid;
};

static void procinfo_parse(const uint8_t *p, size_t len, struct procinfo *pi)
{
    struct gbx_attr_iter it;
    struct gbx_attr a;
    char s[4096];
    memset(pi, 0, sizeof(*pi));
    pi->argv = json_array();
    gbx_attr_iter_init(&it, p, len);
    while (gbx_attr_next(&it, &a) == 1) {
        switch (a.tag) {
        case GBX_A_PROC:
            pi->have_proc = gbx_attr_u32(&a, &pi->proc) == 0;
            break;
        case GBX_A_PID:
            pi->have_pid = gbx_attr_u32(&a, &pi->pid) == 0;
            break;
        case GBX_A_PTY:
            (void)gbx_attr_u32(&a, &pi->pty);
            break;
        case GBX_A_ARGV: {
            /* a string that does not fit or is not UTF-8 is shown mangled, not dropped */
            json_array_append_new(pi->argv,
                                  gbx_json_text(gbx_attr_str(&a, s, sizeof(s)) == 0 ? s : "?"));
            break;
        }
        case GBX_A_CWD:
            if (gbx_attr_str(&a, s, sizeof(s)) == 0)
                snprintf(pi->cwd, sizeof(pi->cwd), "%s", s);
            break;
        default:
            break;
        }
    }
}

/* ProcessInfo: {config: {cmd, args, envs, cwd}, pid}. The SDK reads config.args always. */
static json_t *procinfo_json(const struct procinfo *pi)
{
    json_t *args = json_array(), *cmd = json_array_get(pi->argv, 0);
    for (size_t i = 1; i < json_array_size(pi->argv); i++)
        json_array_append(args, json_array_get(pi->argv, i));
    json_t *config =
        json_pack("{s:s,s:o,s:{}}", "cmd", cmd ? json_string_value(cmd) : "", "args", args, "envs");
    if (pi->cwd[0])
        json_object_set_new(config, "cwd", gbx_json_text(pi->cwd));
    return json_pack("{s:o,s:I}", "config", config, "pid", (json_int_t)pi->pid);
}

static void on_done(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct call *c = arg;
    if (!final)
        return;
    if (h == NULL)
        return call_fail(c, "unavailable", "the sandbox went away");
    if (h->type != GBX_MSG_OK)
        return call_agent_error(c, p, h->len); /* the requests still queued are dropped */
    if (--c->pending > 0)
        return;
    json_t *d = json_pack("{s:I,s:I}", "process", (json_int_t)c->proc, "pid", (json_int_t)c->pid);
    const char *kind = NULL;
    if (c->op == OP_INPUT) {
        kind = "process.stdin";
        json_object_set_new(d, "bytes", json_integer((json_int_t)c->len));
    } else if (c->op == OP_SIGNAL) {
        kind = "process.signal";
        json_object_set_new(d, "signal", json_integer(c->signo));
        json_object_set_new(d, "group", json_true());
    } else if (c->op == OP_CLOSE_STDIN) {
        kind = "process.close_stdin";
    }
    if (kind)
        gbx_server_audit_as(c->srv, c->actor, kind, c->sandbox, d);
    else
        json_decref(d);
    gbx_e2b_rpc_reply(c->req, json_object());
    call_free(c);
}

static int call_send(struct call *c)
{
    if (gbx_aconn_send(c->agent, on_done, c) < 0) {
        call_fail(c, "unavailable", "the sandbox went away");
        return -1;
    }
    c->pending++;
    return 0;
}

/* The process was found: do what c asks. */
static void call_act(struct call *c, const struct procinfo *pi)
{
    struct gbx_msg *m;
    c->proc = pi->proc;
    switch (c->op) {
    case OP_INPUT: {
        /* in frames of at most GBX_FRAME_CHUNK bytes, all queued at once (the body is bounded
         * by the server's body limit); an empty input still asks the agent */
        size_t off = 0;
        gbx_exec_stdin_bytes(c->sandbox, c->proc, c->len);
        do {
            size_t n = c->len - off < GBX_FRAME_CHUNK ? c->len - off : GBX_FRAME_CHUNK;
            m = gbx_aconn_begin(c->agent, GBX_MSG_STDIN);
            gbx_msg_put_u32(m, GBX_A_PROC, c->proc);
            gbx_msg_put(m, GBX_A_DATA, c->data + off, n);
            if (call_send(c) < 0)
                return;
            off += n;
        } while (off < c->len);
        return;
    }
    case OP_SIGNAL:
        m = gbx_aconn_begin(c->agent, GBX_MSG_SIGNAL);
        gbx_msg_put_u32(m, GBX_A_PROC, c->proc);
        gbx_msg_put_u32(m, GBX_A_SIGNO, c->signo);
        gbx_msg_put_u32(m, GBX_A_GROUP, 1);
        (void)call_send(c);
        return;
    case OP_CLOSE_STDIN:
        m = gbx_aconn_begin(c->agent, GBX_MSG_CLOSE_STDIN);
        gbx_msg_put_u32(m, GBX_A_PROC, c->proc);
        (void)call_send(c);
        return;
    case OP_UPDATE:
        if (!c->resize) {
            gbx_e2b_rpc_reply(c->req, json_object());
            call_free(c);
            return;
        }
        m = gbx_aconn_begin(c->agent, GBX_MSG_RESIZE);
        gbx_msg_put_u32(m, GBX_A_PROC, c->proc);
        gbx_msg_put_u32(m, GBX_A_PTY_ROWS, c->rows);
        gbx_msg_put_u32(m, GBX_A_PTY_COLS, c->cols);
        (void)call_send(c);
        return;
    case OP_LIST:
    case OP_CONNECT: /* not a call: see do_connect */
        break;
    }
}

static void on_ps(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct call *c = arg;
    if (!final)
        return;
    if (h == NULL)
        return call_fail(c, "unavailable", "the sandbox went away");
    if (h->type != GBX_MSG_OK)
        return call_agent_error(c, p, h->len);
    struct gbx_attr_iter it;
    struct gbx_attr a;
    json_t *list = c->op == OP_LIST ? json_array() : NULL;
    gbx_attr_iter_init(&it, p, h->len);
    while (gbx_attr_next(&it, &a) == 1) {
        if (a.tag != GBX_A_PROCINFO)
            continue;
        struct procinfo pi;
        procinfo_parse(a.data, a.len, &pi);
        if (!pi.have_proc || !pi.have_pid) {
            json_decref(pi.argv);
            continue;
        }
        if (list) {
            json_array_append_new(list, procinfo_json(&pi));
        } else if (pi.pid == c->pid) {
            call_act(c, &pi);
            json_decref(pi.argv);
            return;
        }
        json_decref(pi.argv);
    }
    if (list == NULL)
        return call_fail(c, "not_found", "process with pid %u not found", c->pid);
    gbx_e2b_rpc_reply(c->req, json_pack("{s:o}", "processes", list));
    call_free(c);
}

static void on_agent_close(void *arg, const char *why)
{
    /* pending requests have had their callbacks (and the call was freed there) */
    (void)arg;
    (void)why;
}

/* Start c: ask the agent for its processes. Replies on failure. */
static void call_start(struct call *c, struct gbx_live *l)
{
    struct gbx_err *err = NULL;
    if (gbx_aconn_open(c->base, l->sb, NULL, on_agent_close, c, &c->agent, &err) < 0) {
        call_fail(c, code_for_kind(err->kind), "%s", err->msg);
        gbx_err_free(err);
        return;
    }
    (void)gbx_aconn_begin(c->agent, GBX_MSG_PS);
    if (gbx_aconn_send(c->agent, on_ps, c) < 0)
        call_fail(c, "unavailable", "the sandbox went away");
}

/* The ProcessSelector in body.process: a pid (tag is not supported). Replies on failure. */
static int selector(struct evhttp_request *req, json_t *body, int stream, uint32_t *pid)
{
    json_t *sel = field(body, "process");
    json_t *v = field(sel, "pid");
    int64_t x = 0;
    const char *msg = NULL;
    if (!json_is_object(sel))
        msg = "process must be a selector {pid}";
    else if (v == NULL && field(sel, "tag"))
        msg = "selecting a process by tag is not supported by Glovebox; use its pid";
    else if (gbx_connect_int(v, 0, UINT32_MAX, &x) < 0)
        msg = "process.pid must be a number";
    if (msg) {
        if (stream)
            stream_fail(req, "invalid_argument", msg);
        else
            gbx_e2b_rpc_error(req, "invalid_argument", "%s", msg);
        return -1;
    }
    *pid = (uint32_t)x;
    return 0;
}

static const char *const signal_names[16] = {
    [0] = "SIGNAL_UNSPECIFIED",
    [SIGKILL] = "SIGNAL_SIGKILL",
    [SIGTERM] = "SIGNAL_SIGTERM",
};

/* Check the request of a call that names a process; replies and returns -1 on bad input. */
static int parse_call(struct call *c, json_t *body)
{
    if (c->op == OP_LIST)
        return 0;
    if (selector(c->req, body, 0, &c->pid) < 0)
        return -1;
    if (c->op == OP_INPUT) {
        json_t *in = field(body, "input");
        json_t *v = field(in, "stdin");
        if (v == NULL)
            v = field(in, "pty");
        if (!json_is_object(in) || v == NULL || gbx_connect_bytes(v, &c->data, &c->len) < 0) {
            gbx_e2b_rpc_error(c->req, "invalid_argument",
                              "input must be {stdin: base64} or {pty: base64}");
            return -1;
        }
    } else if (c->op == OP_SIGNAL) {
        int sig = 0;
        if (gbx_connect_enum(field(body, "signal"), signal_names, GBX_ARRAY_SIZE(signal_names),
                             &sig) < 0 ||
            sig == 0) {
            gbx_e2b_rpc_error(c->req, "invalid_argument",
                              "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
            return -1;
        }
        c->signo = (uint32_t)sig;
    } else if (c->op == OP_UPDATE) {
        json_t *pty = field(body, "pty");
        if (pty) {
            if (!json_is_object(pty) || pty_size(pty, &c->rows, &c->cols) < 0) {
                gbx_e2b_rpc_error(c->req, "invalid_argument",
                                  "pty.size must be {cols, rows}, each from 1 to 65535");
                return -1;
            }
            c->resize = field(pty, "size") != NULL;
        }
    }
    return 0;
}

/* Connect: the exec stream finds the process by its pid and attaches to it. */
static void do_connect(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                       struct evhttp_request *req, struct gbx_live *l, json_t *body)
{
    uint32_t pid;
    if (selector(req, body, 1, &pid) < 0)
        return;
    struct gbx_exec_stream_opts so = {
        .ops = &e2b_ops,
        .what = json_pack("{s:b,s:I,s:s}", "attached", 1, "pid", (json_int_t)pid, "via", "e2b"),
        .keepalive_ms = keepalive_ms(req),
        .keep_reading = 1,
    };
    gbx_exec_attach_ops(s, who, base, req, l->sb, &so, pid);
}

/* ---- routing ------------------------------------------------------------------------------ */

void gbx_e2b_process(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                     struct evhttp_request *req, struct gbx_live *l, const char *method)
{
    static const struct {
        const char *name;
        enum op op;
    } calls[] = {
        {"List", OP_LIST},         {"Connect", OP_CONNECT},        {"SendInput", OP_INPUT},
        {"SendSignal", OP_SIGNAL}, {"CloseStdin", OP_CLOSE_STDIN}, {"Update", OP_UPDATE},
    };
    int start = strcmp(method, "Start") == 0;
    int known = start;
    enum op op = OP_LIST;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(calls); i++) {
        if (strcmp(method, calls[i].name) == 0) {
            op = calls[i].op;
            known = 1;
        }
    }
    if (!known)
        return gbx_e2b_rpc_error(req, "unimplemented", "process.Process/%s is not implemented",
                                 method);
    json_t *body = gbx_e2b_rpc_request(req);
    if (body == NULL)
        return;
    if (start || op == OP_CONNECT) {
        if (start)
            do_start(s, who, base, req, l, body);
        else
            do_connect(s, who, base, req, l, body);
        json_decref(body);
        return;
    }
    struct call *c = gbx_xcalloc(1, sizeof(*c));
    c->srv = s;
    c->base = base;
    c->req = req;
    c->op = op;
    snprintf(c->sandbox, sizeof(c->sandbox), "%s", l->sb->id);
    snprintf(c->actor, sizeof(c->actor), "%s", who->name);
    int r = parse_call(c, body);
    json_decref(body);
    if (r < 0) {
        call_free(c);
        return;
    }
    call_start(c, l);
}
