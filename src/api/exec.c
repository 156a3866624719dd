/* SPDX-License-Identifier: MIT */
/* Exec streams. The request:
 *
 *   POST /v1/sandboxes/{id}/exec
 *   {"cmd": ["ls", "-l"] | "shell": "ls -l | wc -l", "env": {"K": "V"}, "cwd": "/tmp",
 *    "user": "user"}
 *
 * The reply is 200 with application/x-ndjson, one event per line, ending with exit:
 *
 *   {"type":"start","process":1,"pid":7}
 *   {"type":"stdout","data":"<base64>"}      binary-safe
 *   {"type":"stderr","data":"<base64>"}
 *   {"type":"exit","exit_code":0}            or {"type":"exit","signal":9}
 *
 * A program that cannot be started is a 400 before any streaming. Each stream opens its own
 * connection to the sandbox's agent: backpressure is per stream (when the HTTP client reads
 * slower than the process writes, we stop reading the agent, the agent stops reading the
 * process, and the process blocks), and a client that goes away leaves the process running.
 */
#include "base/clock.h"
#include "api/exec.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/frame.h"
#include "api/http.h"
#include "api/server.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/backend.h"

#define EXEC_MAX_ARGS 4096
#define EXEC_MAX_ENV 1024
/* bytes sent to the HTTP client and not yet written out, above which we stop reading */
#define EXEC_OUT_CAP (1u << 20)

enum { ID_HELLO = 1, ID_SPAWN = 2 };

struct stream {
    struct gbx_server *srv;
    char sandbox[GBX_ID_MAX + 1];
    char actor[128];
    json_t *what; /* argv, user, cwd: for the audit records */
    int64_t start_ns;
    uint64_t out_bytes, err_bytes;
    struct evhttp_request *req; /* NULL once the client is gone */
    struct bufferevent *agent;
    uint32_t proc;
    int started;
    int paused; /* not reading the agent until the client drains */
};

static void stream_free(struct stream *st)
{
    if (st->agent)
        bufferevent_free(st->agent);
    json_decref(st->what);
    free(st);
}

/* exec.end or exec.detach: what ran, how it ended, how much it said, how long it took. */
static void audit_end(struct stream *st, const char *kind, json_t *how)
{
    json_t *d = json_deep_copy(st->what);
    json_object_set_new(d, "process", json_integer(st->proc));
    json_object_set_new(d, "stdout_bytes", json_integer((json_int_t)st->out_bytes));
    json_object_set_new(d, "stderr_bytes", json_integer((json_int_t)st->err_bytes));
    json_object_set_new(d, "duration_ms",
                        json_integer((gbx_realtime_ns() - st->start_ns) / 1000000));
    if (how)
        json_object_update(d, how);
    json_decref(how);
    gbx_server_audit_as(st->srv, st->actor, kind, st->sandbox, d);
    gbx_server_exec_bytes(st->srv, st->out_bytes, st->err_bytes);
}

static void on_client_close(struct evhttp_connection *conn, void *arg)
{
    struct stream *st = arg;
    /* The process goes on in the sandbox; we stop listening to it. When the client went
     * away mid-reply, evhttp has detached the request from the connection and leaves it to
     * us: ending the reply is what frees it. */
    if (st->req && evhttp_request_get_connection(st->req) == NULL)
        evhttp_send_reply_end(st->req);
    st->req = NULL;
    if (st->started)
        audit_end(st, "exec.detach", json_pack("{s:s}", "reason", "the client went away"));
    stream_free(st);
}

static void detach_client(struct stream *st)
{
    if (st->req)
        evhttp_connection_set_closecb(evhttp_request_get_connection(st->req), NULL, NULL);
}

static void on_agent_read(struct bufferevent *bev, void *arg);

/* The client's connection has written out everything we gave it: read the agent again,
 * starting with what it already sent. */
static void drained(struct evhttp_connection *conn, void *arg)
{
    struct stream *st = arg;
    st->paused = 0;
    bufferevent_enable(st->agent, EV_READ);
    on_agent_read(st->agent, st);
}

static void send_line(struct stream *st, json_t *ev)
{
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    GBX_BUG_ON(text == NULL);
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    evbuffer_add(b, text, strlen(text));
    evbuffer_add(b, "\n", 1);
    free(text);
    /* Backpressure: once the client's connection holds more than the cap, stop reading the
     * agent until it has written everything out. evhttp keeps one "written" callback per
     * connection, replaced by each chunk sent with one (and by the end of the reply): it is
     * set only on the chunk that crosses the cap, and nothing else is sent until it fires. */
    struct evhttp_connection *conn = evhttp_request_get_connection(st->req);
    struct bufferevent *out = evhttp_connection_get_bufferevent(conn);
    size_t pending = evbuffer_get_length(bufferevent_get_output(out)) + evbuffer_get_length(b);
    if (!st->paused && pending > EXEC_OUT_CAP) {
        st->paused = 1;
        bufferevent_disable(st->agent, EV_READ);
        evhttp_send_reply_chunk_with_cb(st->req, b, drained, st);
    } else {
        evhttp_send_reply_chunk(st->req, b);
    }
    evbuffer_free(b);
}

static void finish(struct stream *st)
{
    if (st->req) {
        detach_client(st);
        evhttp_send_reply_end(st->req);
        st->req = NULL;
    }
    stream_free(st);
}

static void fail_stream(struct stream *st, const char *msg)
{
    if (st->req == NULL) {
        stream_free(st);
        return;
    }
    if (!st->started) {
        detach_client(st);
        gbx_http_reply_error(st->req, GBX_ERR_UNAVAILABLE, "%s", msg);
        st->req = NULL;
        stream_free(st);
        return;
    }
    send_line(st, json_pack("{s:s,s:s}", "type", "error", "message", msg));
    finish(st);
}

static char *b64(const uint8_t *data, size_t len)
{
    char *out = gbx_xmalloc(4 * ((len + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    return out;
}

/* Handle one frame from the agent. Returns 1 when the stream ended (st is gone). */
static int on_frame(struct stream *st, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    char msg[512];
    uint32_t v = 0;
    if (h->type == GBX_MSG_ERROR) {
        int r = gbx_attrs_get_str(p, h->len, GBX_A_MESSAGE, msg, sizeof(msg));
        if (r <= 0)
            snprintf(msg, sizeof(msg), "the sandbox's agent refused the request");
        if (h->id == ID_SPAWN && !st->started && st->req) {
            detach_client(st);
            gbx_http_reply_error(st->req, GBX_ERR_INVALID, "%s", msg);
            st->req = NULL;
            stream_free(st);
            return 1;
        }
        fail_stream(st, msg);
        return 1;
    }
    if (h->type == GBX_MSG_OK && h->id == ID_SPAWN) {
        if (gbx_attrs_get_u32(p, h->len, GBX_A_PROC, &st->proc) != 1) {
            fail_stream(st, "the sandbox's agent sent a malformed reply");
            return 1;
        }
        (void)!gbx_attrs_get_u32(p, h->len, GBX_A_PID, &v);
        st->started = 1;
        json_t *d = json_deep_copy(st->what);
        json_object_set_new(d, "process", json_integer(st->proc));
        json_object_set_new(d, "pid", json_integer(v));
        gbx_server_audit_as(st->srv, st->actor, "exec.start", st->sandbox, d);
        gbx_server_exec_started(st->srv);
        if (st->req == NULL)
            return 0;
        evhttp_add_header(evhttp_request_get_output_headers(st->req), "Content-Type",
                          "application/x-ndjson");
        evhttp_send_reply_start(st->req, 200, "OK");
        send_line(st, json_pack("{s:s,s:i,s:i}", "type", "start", "process", (json_int_t)st->proc,
                                "pid", (json_int_t)v));
        return 0;
    }
    if ((h->type == GBX_EV_STDOUT || h->type == GBX_EV_STDERR) && h->id == st->proc &&
        st->started) {
        struct gbx_attr a;
        if (gbx_attrs_find(p, h->len, GBX_A_DATA, &a) != 1)
            return 0;
        if (h->type == GBX_EV_STDOUT)
            st->out_bytes += a.len;
        else
            st->err_bytes += a.len;
        if (st->req) {
            gbx_autofree char *enc = b64(a.data, a.len);
            send_line(st, json_pack("{s:s,s:s}", "type",
                                    h->type == GBX_EV_STDOUT ? "stdout" : "stderr", "data", enc));
        }
        return 0;
    }
    if (h->type == GBX_EV_EXIT && h->id == st->proc && st->started) {
        uint32_t code = 0, sig = 0;
        int have_sig = gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_SIGNAL, &sig) == 1;
        (void)!gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_CODE, &code);
        json_t *how = have_sig ? json_pack("{s:i}", "signal", (json_int_t)sig)
                               : json_pack("{s:i}", "exit_code", (json_int_t)code);
        audit_end(st, "exec.end", json_deep_copy(how));
        if (st->req) {
            json_t *line = json_pack("{s:s}", "type", "exit");
            json_object_update(line, how);
            send_line(st, line);
        }
        json_decref(how);
        finish(st);
        return 1;
    }
    return 0; /* HELLO's OK, and anything else: nothing to do */
}

static void on_agent_read(struct bufferevent *bev, void *arg)
{
    struct stream *st = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    for (;;) {
        uint8_t hdr[GBX_FRAME_HDR_SIZE];
        if (evbuffer_copyout(in, hdr, sizeof(hdr)) < (ssize_t)sizeof(hdr))
            return;
        struct gbx_frame_hdr h;
        if (gbx_frame_decode_hdr(hdr, sizeof(hdr), &h) < 0) {
            fail_stream(st, "the sandbox's agent sent a malformed frame");
            return;
        }
        if (evbuffer_get_length(in) < GBX_FRAME_HDR_SIZE + (size_t)h.len)
            return;
        evbuffer_drain(in, GBX_FRAME_HDR_SIZE);
        uint8_t *payload = gbx_xmalloc(h.len ? h.len : 1);
        evbuffer_remove(in, payload, h.len);
        int ended = gbx_attrs_validate(payload, h.len) < 0 ? (fail_stream(st, "the sandbox's "
                                                                              "agent sent a "
                                                                              "malformed frame"),
                                                              1)
                                                           : on_frame(st, &h, payload);
        free(payload);
        if (ended)
            return;
        /* paused for backpressure: leave the rest buffered */
        if (!(bufferevent_get_enabled(bev) & EV_READ))
            return;
    }
}

static void on_agent_event(struct bufferevent *bev, short what, void *arg)
{
    struct stream *st = arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        fail_stream(st, "the sandbox went away");
}

/* ---- the request ---------------------------------------------------------------------- */

/* Build the SPAWN frame from the request body; replies 400 and returns -1 on bad input. */
static int build_spawn(struct evhttp_request *req, json_t *body, struct gbx_msg *m)
{
    const char *key;
    json_t *v, *cmd = NULL, *shell = NULL;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "cmd") == 0)
            cmd = v;
        else if (strcmp(key, "shell") == 0)
            shell = v;
        else if (strcmp(key, "env") != 0 && strcmp(key, "cwd") != 0 && strcmp(key, "user") != 0) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "unknown field '%s' (expected cmd or shell, env, cwd, user)", key);
            return -1;
        }
    }
    if ((cmd == NULL) == (shell == NULL)) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "give exactly one of 'cmd' (an array of strings) and 'shell' "
                             "(a string)");
        return -1;
    }
    if (shell) {
        if (!json_is_string(shell) || json_string_length(shell) == 0) {
            gbx_http_reply_error(req, GBX_ERR_INVALID, "'shell' must be a non-empty string");
            return -1;
        }
        gbx_msg_put_str(m, GBX_A_ARGV, "/bin/sh");
        gbx_msg_put_str(m, GBX_A_ARGV, "-c");
        gbx_msg_put_str(m, GBX_A_ARGV, json_string_value(shell));
    } else {
        size_t i;
        json_t *a;
        if (!json_is_array(cmd) || json_array_size(cmd) == 0 ||
            json_array_size(cmd) > EXEC_MAX_ARGS) {
            gbx_http_reply_error(req, GBX_ERR_INVALID, "'cmd' must be an array of 1 to %d strings",
                                 EXEC_MAX_ARGS);
            return -1;
        }
        json_array_foreach(cmd, i, a)
        {
            if (!json_is_string(a) || memchr(json_string_value(a), 0, json_string_length(a))) {
                gbx_http_reply_error(req, GBX_ERR_INVALID,
                                     "'cmd' must be an array of strings without NUL bytes");
                return -1;
            }
            gbx_msg_put_str(m, GBX_A_ARGV, json_string_value(a));
        }
    }
    json_t *env = json_object_get(body, "env");
    if (env) {
        if (!json_is_object(env) || json_object_size(env) > EXEC_MAX_ENV) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'env' must be an object of at most %d strings", EXEC_MAX_ENV);
            return -1;
        }
        json_object_foreach(env, key, v)
        {
            char kv[8192];
            if (!json_is_string(v) ||
                snprintf(kv, sizeof(kv), "%s=%s", key, json_string_value(v)) >= (int)sizeof(kv) ||
                gbx_env_valid(kv) < 0 || memchr(json_string_value(v), 0, json_string_length(v))) {
                gbx_http_reply_error(req, GBX_ERR_INVALID,
                                     "'env' entry '%s' must be a NAME with a string value "
                                     "(at most 8 KiB)",
                                     key);
                return -1;
            }
            gbx_msg_put_str(m, GBX_A_ENV, kv);
        }
    }
    const char *fields[] = {"cwd", "user"};
    uint16_t tags[] = {GBX_A_CWD, GBX_A_USER};
    for (int f = 0; f < 2; f++) {
        json_t *x = json_object_get(body, fields[f]);
        if (x == NULL)
            continue;
        if (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) > 4095) {
            gbx_http_reply_error(req, GBX_ERR_INVALID, "'%s' must be a non-empty string",
                                 fields[f]);
            return -1;
        }
        gbx_msg_put_str(m, tags[f], json_string_value(x));
    }
    if (gbx_msg_finish(m) < 0) {
        gbx_http_reply_error(req, GBX_ERR_LIMIT, "the command and its environment are too large");
        return -1;
    }
    return 0;
}

void gbx_api_exec(struct gbx_server *srv, struct event_base *base, struct evhttp_request *req,
                  struct gbx_sandbox *sb)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    size_t cap = GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD;
    gbx_autofree uint8_t *spawn = gbx_xmalloc(cap);
    struct gbx_msg m;
    gbx_msg_start(&m, spawn, cap, GBX_MSG_SPAWN, ID_SPAWN);
    int r = build_spawn(req, body, &m);
    if (r < 0) {
        json_decref(body);
        return;
    }
    /* what the audit records say ran (the environment's values stay out of the log) */
    json_t *what = json_object();
    json_t *cmd = json_object_get(body, "cmd");
    json_t *shell = json_object_get(body, "shell");
    json_object_set(what, cmd ? "cmd" : "shell", cmd ? cmd : shell);
    json_t *user = json_object_get(body, "user"), *cwd = json_object_get(body, "cwd");
    json_object_set_new(what, "user", user ? json_copy(user) : json_string("root"));
    if (cwd)
        json_object_set(what, "cwd", cwd);
    json_decref(body);

    int fd = -1;
    struct gbx_err *err = NULL;
    if (sb->ops->connect(sb, &fd, &err) < 0) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        json_decref(what);
        return;
    }
    evutil_make_socket_nonblocking(fd);
    struct stream *st = gbx_xcalloc(1, sizeof(*st));
    st->srv = srv;
    snprintf(st->sandbox, sizeof(st->sandbox), "%s", sb->id);
    snprintf(st->actor, sizeof(st->actor), "%s", gbx_server_actor(srv));
    st->what = what;
    st->start_ns = gbx_realtime_ns();
    st->req = req;
    st->agent = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    GBX_BUG_ON(st->agent == NULL);
    bufferevent_setcb(st->agent, on_agent_read, NULL, on_agent_event, st);
    bufferevent_enable(st->agent, EV_READ | EV_WRITE);
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_client_close, st);

    uint8_t hello[64];
    struct gbx_msg hm;
    gbx_msg_start(&hm, hello, sizeof(hello), GBX_MSG_HELLO, ID_HELLO);
    gbx_msg_put_u32(&hm, GBX_A_VERSION, GBX_AGENT_VERSION);
    long hlen = gbx_msg_finish(&hm);
    bufferevent_write(st->agent, hello, (size_t)hlen);
    bufferevent_write(st->agent, spawn, m.len);
}
