/* SPDX-License-Identifier: MIT */
/* Exec streams. The request:
 *
 *   POST /v1/sandboxes/{id}/exec
 *   {"cmd": ["ls", "-l"] | "shell": "ls -l | wc -l", "env": {"K": "V"}, "cwd": "/tmp",
 *    "user": "user", "stdin": true, "pty": {"rows": 24, "cols": 80}, "timeout": "30s",
 *    "wait": true, "max_output": 1048576, "kill_on_disconnect": true}
 *
 * The reply is 200 with application/x-ndjson (or text/event-stream when the client asks for
 * it with Accept), one event per line, ending with exit:
 *
 *   {"type":"start","process":1,"pid":7}
 *   {"type":"stdout","data":"<base64>"}      binary-safe
 *   {"type":"stderr","data":"<base64>"}
 *   {"type":"exit","exit_code":0}            or {"type":"exit","signal":9[,"timed_out":true]}
 *
 * With "wait": true there is no stream: the reply is one JSON object once the process has
 * exited, with its output captured up to max_output bytes per stream (the rest is read and
 * dropped, so the process never blocks on a full pipe).
 *
 * A program that cannot be started is a 400 before any streaming. Each stream opens its own
 * connection to the sandbox's agent (aconn.h): backpressure is per stream (when the HTTP
 * client reads slower than the process writes, we stop reading the agent, the agent stops
 * reading the process, and the process blocks), and a client that goes away leaves the
 * process running, unless the request said "kill_on_disconnect": then its process group is
 * killed (audited as exec.kill) and the stream reads on until the exit (exec.end). The same stream
 * code serves GET .../processes/{proc}/stream (attach), which takes the process's output over from
 * whichever connection had it.
 *
 * Another front end (E2B's process.Process, e2b/process.c) uses the same streams with its
 * own event form (struct gbx_exec_ops); its streams keep reading after their client left,
 * and its attaches follow a stream that already reads the process instead of taking over.
 */
#include "base/clock.h"
#include "http/exec.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/frame.h"
#include "agent/aconn.h"
#include "http/http.h"
#include "core/server.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/backend.h"

/* bytes sent to the HTTP client and not yet written out, above which we stop reading */
#define EXEC_OUT_CAP (1u << 20)

enum mode {
    MODE_STREAM, /* POST /exec: start, output, exit as NDJSON or SSE */
    MODE_WAIT,   /* POST /exec with "wait": one JSON object at the end */
    MODE_ATTACH, /* GET /processes/{proc}/stream: attached, output, exit */
};

/* What became of a stream's audit records: shared by the stream and the completions of its
 * exec.start and exec.end records (the stream may be gone by then: st is NULL once it is). An
 * exit is acknowledged (the wait reply, the exit event) only once both are durable. */
struct exec_rec {
    int refs;
    struct stream *st;
    int failed; /* a record could not be written: kind, msg */
    enum gbx_err_kind kind;
    char msg[512];
};

/* run-and-wait: one stream's captured output */
struct capture {
    uint8_t *buf;
    size_t len, cap;
    int truncated;
};

struct stream {
    struct stream *next; /* every stream of the daemon (streams, below) */
    struct gbx_server *srv;
    struct event_base *base;
    enum mode mode;
    char sandbox[GBX_ID_MAX + 1];
    char actor[128];
    json_t *what; /* argv, user, cwd (or the attached process): for the audit records */
    int64_t start_ns;
    int64_t mono_ns; /* when the request arrived, for the start latency */
    uint64_t out_bytes, err_bytes;
    uint64_t in_bytes;          /* written to its stdin through the process routes */
    struct evhttp_request *req; /* NULL once the client is gone */
    struct gbx_aconn *agent;
    struct event *timer;            /* the "timeout" of the process, while it runs */
    const struct gbx_exec_ops *ops; /* another front end's event form (NULL: NDJSON or SSE) */
    struct event *keepalive;        /* ops->keepalive when idle for keepalive_ms */
    uint64_t keepalive_ms;
    int64_t last_send_ns;
    uint32_t proc, pid;
    uint64_t timeout_ms;
    size_t max_output;
    struct capture out, err;
    int sse;
    int started;
    int paused; /* not reading the agent until the client drains */
    int timed_out;
    int pty;
    int keep_reading;       /* after the client left, read and drop the output (ops streams) */
    int kill_on_disconnect; /* kill the process group when the client leaves (native) */
    struct exec_rec *rec;   /* from the start (a reference) */
    int ending;             /* exited; the reply waits for its exec.end record */
    json_t *how;            /* while ending: how it ended */
    /* An ops stream may follow a process that another ops stream reads (its source) instead
     * of taking it over: the source sends it the events too. A subscriber has no agent. */
    struct stream *source;
    struct stream *subs, *sub_next;
};

/* Every live stream, so that an attach can end the stream it takes a process from. */
static struct stream *streams;

static void rec_unref(struct exec_rec *r)
{
    if (r && --r->refs == 0)
        free(r);
}

static void rec_fail(struct exec_rec *r, const struct gbx_err *err)
{
    if (r->failed)
        return;
    r->failed = 1;
    r->kind = err->kind == GBX_ERR_STORAGE ? GBX_ERR_STORAGE : GBX_ERR_INTERNAL;
    snprintf(r->msg, sizeof(r->msg), "%s", err->msg);
}

/* exec.start is durable, or could not be written (the stream may be gone) */
static void on_start_recorded(void *arg, const struct gbx_err *err)
{
    struct exec_rec *r = arg;
    if (err) {
        gbx_log_error("sandbox '%s': cannot record the start of process %u: %s",
                      r->st ? r->st->sandbox : "-", r->st ? r->st->proc : 0, err->msg);
        rec_fail(r, err);
    }
    rec_unref(r);
}

static void stream_free(struct stream *st)
{
    for (struct stream **pp = &streams; *pp; pp = &(*pp)->next) {
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    }
    if (st->source) {
        for (struct stream **pp = &st->source->subs; *pp; pp = &(*pp)->sub_next) {
            if (*pp == st) {
                *pp = st->sub_next;
                break;
            }
        }
    }
    /* subscribers left behind are ended by whoever ends this stream (they are in streams) */
    for (struct stream *x = st->subs; x; x = x->sub_next)
        x->source = NULL;
    if (st->timer)
        event_free(st->timer);
    if (st->keepalive)
        event_free(st->keepalive);
    gbx_aconn_free(st->agent);
    if (st->rec) {
        st->rec->st = NULL;
        rec_unref(st->rec);
    }
    json_decref(st->how);
    json_decref(st->what);
    free(st->out.buf);
    free(st->err.buf);
    free(st);
}

static struct stream *stream_new(struct gbx_server *srv, const struct gbx_actor *who,
                                 struct event_base *base, struct evhttp_request *req,
                                 const struct gbx_sandbox *sb, enum mode mode, json_t *what)
{
    struct stream *st = gbx_xcalloc(1, sizeof(*st));
    st->srv = srv;
    st->base = base;
    st->mode = mode;
    snprintf(st->sandbox, sizeof(st->sandbox), "%s", sb->id);
    snprintf(st->actor, sizeof(st->actor), "%s", who->name);
    st->what = what;
    st->start_ns = gbx_realtime_ns();
    st->mono_ns = gbx_monotonic_ns();
    st->req = req;
    const char *accept = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
    st->sse = mode != MODE_WAIT && accept && strstr(accept, "text/event-stream") != NULL;
    st->next = streams;
    streams = st;
    return st;
}

/* exec.end or exec.detach: what ran, how it ended, how much it said, how long it took; done
 * (may be NULL) once it is durable or could not be written. */
static void audit_end_then(struct stream *st, const char *kind, json_t *how,
                           gbx_server_audit_fn done, void *arg)
{
    json_t *d = json_deep_copy(st->what);
    json_object_set_new(d, "process", json_integer(st->proc));
    json_object_set_new(d, "stdout_bytes", json_integer((json_int_t)st->out_bytes));
    json_object_set_new(d, "stderr_bytes", json_integer((json_int_t)st->err_bytes));
    json_object_set_new(d, "stdin_bytes", json_integer((json_int_t)st->in_bytes));
    json_object_set_new(d, "duration_ms",
                        json_integer((gbx_realtime_ns() - st->start_ns) / 1000000));
    if (how)
        json_object_update(d, how);
    json_decref(how);
    gbx_server_audit_then(st->srv, st->actor, kind, st->sandbox, d, done, arg);
    gbx_server_exec_bytes(st->srv, st->out_bytes, st->err_bytes);
}

static void audit_end(struct stream *st, const char *kind, json_t *how)
{
    audit_end_then(st, kind, how, NULL, NULL);
}

static void detach_client(struct stream *st)
{
    if (st->req)
        evhttp_connection_set_closecb(evhttp_request_get_connection(st->req), NULL, NULL);
}

/* The process's timeout passed while nobody listened: kill it, then let go of the agent
 * once the request is on its way. */
static void detached_sent(void *arg)
{
    stream_free(arg);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct stream *st = arg;
    st->timed_out = 1;
    struct gbx_msg *m = gbx_aconn_begin(st->agent, GBX_MSG_SIGNAL);
    gbx_msg_put_u32(m, GBX_A_PROC, st->proc);
    gbx_msg_put_u32(m, GBX_A_SIGNO, SIGKILL);
    gbx_msg_put_u32(m, GBX_A_GROUP, 1);
    long r = gbx_aconn_send(st->agent, NULL, NULL);
    gbx_log_info("sandbox '%s': process %u ran past its timeout; killing it", st->sandbox,
                 st->proc);
    if (st->req || st->subs)
        return; /* the exit event follows */
    if (r < 0 || gbx_aconn_out_pending(st->agent) == 0)
        stream_free(st);
    else
        gbx_aconn_on_drain(st->agent, 0, detached_sent, st);
}

/* A stream whose client is gone or was taken over: keep it only while its timeout still has
 * to be enforced (not reading the agent meanwhile: the process blocks on its output as it
 * would without a client), else end it. A keep_reading stream instead goes on reading and
 * dropping the output until the process exits (or another client attaches to it). */
static void let_go(struct stream *st)
{
    st->req = NULL;
    if (st->started && st->keep_reading) {
        if (st->paused) {
            st->paused = 0;
            gbx_aconn_pause(st->agent, 0); /* may deliver frames, and end st */
        }
        return;
    }
    if (st->started && st->timer && evtimer_pending(st->timer, NULL)) {
        gbx_aconn_pause(st->agent, 1);
        return;
    }
    stream_free(st);
}

/* Read src's agent again unless src or one of its subscribers still waits for its client.
 * Resuming may deliver frames, and end src and its subscribers: nothing after this. */
static void resume_readers(struct stream *src)
{
    if (src->paused)
        return;
    for (const struct stream *x = src->subs; x; x = x->sub_next)
        if (x->paused)
            return;
    gbx_aconn_pause(src->agent, 0);
}

/* The agent answered the kill of an orphaned process: record it, unless the process had
 * exited already (then its exit event tells; nothing was signalled). */
static void on_kill_reply(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct stream *st = arg;
    if (!final || h == NULL)
        return;
    if (h->type != GBX_MSG_OK) {
        char msg[256];
        (void)gbx_aconn_error_text(p, h->len, msg, sizeof(msg));
        gbx_log_debug("sandbox '%s': process %u not killed: %s", st->sandbox, st->proc, msg);
        return;
    }
    gbx_log_info("sandbox '%s': the client of process %u went away; killed it", st->sandbox,
                 st->proc);
    gbx_server_audit_as(st->srv, st->actor, "exec.kill", st->sandbox,
                        json_pack("{s:i,s:i,s:i,s:b,s:s}", "process", (json_int_t)st->proc, "pid",
                                  (json_int_t)st->pid, "signal", SIGKILL, "group", 1, "reason",
                                  "the client went away (kill_on_disconnect)"));
}

/* The client of a kill_on_disconnect stream is gone: SIGKILL the process's group, then read
 * on (dropping the output) until its exit, which is recorded as exec.end and ends st. Before
 * the spawn's reply, that reply does this once it knows the process. */
static void kill_orphan(struct stream *st)
{
    st->keep_reading = 1;
    if (!st->started)
        return;
    st->kill_on_disconnect = 0;
    struct gbx_msg *m = gbx_aconn_begin(st->agent, GBX_MSG_SIGNAL);
    gbx_msg_put_u32(m, GBX_A_PROC, st->proc);
    gbx_msg_put_u32(m, GBX_A_SIGNO, SIGKILL);
    gbx_msg_put_u32(m, GBX_A_GROUP, 1);
    if (gbx_aconn_send(st->agent, on_kill_reply, st) < 0) {
        stream_free(st); /* the sandbox is gone, or this connection: nothing to read */
        return;
    }
    let_go(st); /* may deliver frames, and end st */
}

static void on_client_close(struct evhttp_connection *conn, void *arg)
{
    struct stream *st = arg;
    /* The process goes on in the sandbox; we stop listening to it (and let go of the
     * request, gbx_http_stream_abandoned). */
    if (st->req)
        gbx_http_stream_abandoned(st->req);
    st->req = NULL;
    if (st->ending)
        return; /* it exited: its exec.end record's completion ends it */
    if (st->kill_on_disconnect) {
        kill_orphan(st);
        return;
    }
    if (st->started)
        audit_end(st, "exec.detach", json_pack("{s:s}", "reason", "the client went away"));
    struct stream *src = st->paused ? st->source : NULL;
    let_go(st);
    if (src)
        resume_readers(src); /* may deliver frames, and end src */
}

static void on_frame_event(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p);

/* The client's connection has written out everything we gave it: read the agent again,
 * starting with what it already sent (once every reader of the process has drained). */
static void drained(struct evhttp_connection *conn, void *arg)
{
    struct stream *st = arg;
    st->paused = 0;
    resume_readers(st->source ? st->source : st); /* may end st: nothing after this */
}

/* Send the bytes of b (emptied) to the client. */
static void send_buf(struct stream *st, struct evbuffer *b)
{
    st->last_send_ns = gbx_monotonic_ns();
    /* Backpressure: once the client's connection holds more than the cap, stop reading the
     * agent until it has written everything out. evhttp keeps one "written" callback per
     * connection, replaced by each chunk sent with one (and by the end of the reply): it is
     * set only on the chunk that crosses the cap, and nothing else is sent until it fires. */
    /* (NULL agent: a subscriber whose source is gone, ending) */
    gbx_http_send_chunk(st->req, b, EXEC_OUT_CAP, &st->paused,
                        st->source ? st->source->agent : st->agent, drained, st);
}

static struct evbuffer *buf_new(void)
{
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    return b;
}

/* Send one event: an NDJSON line, or an SSE event named by its type. */
static void send_event(struct stream *st, json_t *ev)
{
    char *text = json_dumps(ev, JSON_COMPACT);
    if (text == NULL) { /* an event that could not be built (text that is not UTF-8) */
        json_decref(ev);
        return;
    }
    struct evbuffer *b = buf_new();
    if (st->sse)
        evbuffer_add_printf(b, "event: %s\ndata: %s\n\n",
                            json_string_value(json_object_get(ev, "type")), text);
    else
        evbuffer_add_printf(b, "%s\n", text);
    free(text);
    json_decref(ev);
    send_buf(st, b);
    evbuffer_free(b);
}

/* The other front end's events: ops_begin() gives the buffer to fill, ops_send() sends it. */
static void ops_send(struct stream *st, struct evbuffer *b)
{
    if (evbuffer_get_length(b))
        send_buf(st, b);
    evbuffer_free(b);
}

/* Nothing went out for keepalive_ms: send a keepalive (unless the client is not reading:
 * then output is on its way anyway). Re-armed for when the interval would next pass. */
static void on_keepalive(evutil_socket_t fd, short what, void *arg)
{
    struct stream *st = arg;
    if (st->req == NULL)
        return;
    int64_t idle_ms = (gbx_monotonic_ns() - st->last_send_ns) / 1000000;
    uint64_t next = st->keepalive_ms;
    if (idle_ms >= 0 && (uint64_t)idle_ms < st->keepalive_ms) {
        next = st->keepalive_ms - (uint64_t)idle_ms;
    } else if (!st->paused) {
        struct evbuffer *b = buf_new();
        st->ops->keepalive(b);
        ops_send(st, b);
    }
    struct timeval tv = {(time_t)(next / 1000), (suseconds_t)(next % 1000) * 1000};
    event_add(st->keepalive, &tv);
}

static void start_reply(struct stream *st)
{
    if (st->ops) {
        st->ops->begin(st->req);
        st->last_send_ns = gbx_monotonic_ns();
        if (st->keepalive_ms && st->ops->keepalive) {
            st->keepalive = event_new(st->base, -1, 0, on_keepalive, st);
            GBX_BUG_ON(st->keepalive == NULL);
            struct timeval tv = {(time_t)(st->keepalive_ms / 1000),
                                 (suseconds_t)(st->keepalive_ms % 1000) * 1000};
            event_add(st->keepalive, &tv);
        }
        return;
    }
    struct evkeyvalq *hdrs = evhttp_request_get_output_headers(st->req);
    evhttp_add_header(hdrs, "Content-Type", st->sse ? "text/event-stream" : "application/x-ndjson");
    if (st->sse)
        evhttp_add_header(hdrs, "Cache-Control", "no-cache");
    evhttp_send_reply_start(st->req, 200, "OK");
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

/* Reply with an error before anything was sent, and end (errnum: the agent's, or 0). */
static void fail_early(struct stream *st, enum gbx_err_kind kind, int errnum, const char *msg)
{
    if (st->req) {
        detach_client(st);
        if (st->ops)
            st->ops->fail(st->req, st->pid, kind, errnum, msg);
        else
            gbx_http_reply_error(st->req, kind, "%s", msg);
        st->req = NULL;
    }
    stream_free(st);
}

/* End a started stream of another front end with an error. */
static void ops_error(struct stream *st, enum gbx_err_kind kind, const char *msg)
{
    struct evbuffer *b = buf_new();
    st->ops->error(b, kind, msg);
    ops_send(st, b);
}

static void fail_stream(struct stream *st, const char *msg)
{
    if (st->ending)
        return; /* it exited (the agent may go now): its exec.end record's completion ends it */
    while (st->subs)
        fail_stream(st->subs, msg);
    if (st->req == NULL) {
        stream_free(st);
        return;
    }
    if (!st->started || st->mode == MODE_WAIT) {
        fail_early(st, GBX_ERR_UNAVAILABLE, 0, msg);
        return;
    }
    if (st->ops)
        ops_error(st, GBX_ERR_UNAVAILABLE, msg);
    else
        send_event(st, json_pack("{s:s,s:s}", "type", "error", "message", msg));
    finish(st);
}

static char *b64(const uint8_t *data, size_t len)
{
    char *out = gbx_xmalloc(4 * ((len + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    return out;
}

/* ---- run-and-wait output -------------------------------------------------------------- */

static void capture_add(struct capture *c, size_t max, const uint8_t *data, size_t len)
{
    size_t room = max - c->len;
    if (len > room) {
        c->truncated = 1;
        len = room;
    }
    if (len == 0)
        return;
    if (c->len + len > c->cap) {
        c->cap = c->len + len > 2 * c->cap ? c->len + len : 2 * c->cap;
        if (c->cap > max)
            c->cap = max;
        c->buf = gbx_xrealloc(c->buf, c->cap);
    }
    memcpy(c->buf + c->len, data, len);
    c->len += len;
}

/* The length of the UTF-8 sequence at s (1 to 4 bytes), 0 when it is invalid (overlong
 * forms, surrogates and code points above U+10FFFF included), -1 when the n bytes end inside
 * an otherwise valid sequence. */
static int utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    int len;
    uint32_t cp, min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, cp = c & 0x1fu, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, cp = c & 0x0fu, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, cp = c & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n)
            return -1;
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* Put a captured stream into the reply as "<name>" (text; bytes that are not UTF-8 become
 * U+FFFD) and, when the bytes were not valid UTF-8, "<name>_base64" (the exact bytes). A
 * character cut in half by max_output is left out of the text and does not count as
 * invalid. */
static void capture_json(json_t *obj, const char *name, const struct capture *c)
{
    char *text = gbx_xmalloc(c->len * 3 + 1);
    size_t n = 0;
    int valid = 1;
    for (size_t i = 0; i < c->len;) {
        int k = utf8_seq(c->buf + i, c->len - i);
        if (k > 0) {
            memcpy(text + n, c->buf + i, (size_t)k);
            n += (size_t)k;
            i += (size_t)k;
            continue;
        }
        if (k < 0 && c->truncated)
            break; /* the cap cut a character */
        valid = 0;
        memcpy(text + n, "\xef\xbf\xbd", 3);
        n += 3;
        i++;
    }
    json_t *s = json_stringn(text, n);
    GBX_BUG_ON(s == NULL);
    free(text);
    json_object_set_new(obj, name, s);
    if (!valid) {
        char key[32];
        snprintf(key, sizeof(key), "%s_base64", name);
        gbx_autofree char *enc = b64(c->buf, c->len);
        json_object_set_new(obj, key, json_string_nocheck(enc));
    }
}

/* ---- agent events --------------------------------------------------------------------- */

/* The exit, acknowledged once the process's records are durable: the wait reply, or the
 * exit event; or, when a record could not be written, an error saying that the process ran
 * and what could not be recorded (never a success the audit log does not have). */
static void exit_reply(struct stream *st)
{
    json_t *how = st->how;
    st->how = NULL;
    const struct exec_rec *rec = st->rec;
    if (st->req && rec && rec->failed) {
        char code[48];
        json_t *c = json_object_get(how, "exit_code");
        if (c)
            snprintf(code, sizeof(code), "exit code %lld", (long long)json_integer_value(c));
        else
            snprintf(code, sizeof(code), "signal %lld",
                     (long long)json_integer_value(json_object_get(how, "signal")));
        gbx_autofree char *msg = gbx_asprintf("process %u ran and ended (%s), but its audit "
                                              "record could not be written: %s",
                                              st->proc, code, rec->msg);
        if (st->mode == MODE_WAIT) {
            detach_client(st);
            gbx_http_reply_error(st->req, rec->kind, "%s", msg);
            st->req = NULL;
        } else if (st->ops) {
            ops_error(st, rec->kind, msg);
        } else {
            send_event(st, json_pack("{s:s,s:s,s:s,s:i}", "type", "error", "kind",
                                     gbx_err_kind_name(rec->kind), "message", msg, "process",
                                     (json_int_t)st->proc));
        }
    } else if (st->req && st->mode == MODE_WAIT) {
        json_t *r =
            json_pack("{s:i,s:i}", "process", (json_int_t)st->proc, "pid", (json_int_t)st->pid);
        json_object_update(r, how);
        capture_json(r, "stdout", &st->out);
        capture_json(r, "stderr", &st->err);
        json_object_set_new(r, "stdout_truncated", json_boolean(st->out.truncated));
        json_object_set_new(r, "stderr_truncated", json_boolean(st->err.truncated));
        json_object_set_new(r, "timed_out", json_boolean(st->timed_out));
        detach_client(st);
        gbx_http_reply_json(st->req, 200, r);
        st->req = NULL;
    } else if (st->req && st->ops) {
        struct evbuffer *b = buf_new();
        int have_sig = json_object_get(how, "signal") != NULL;
        st->ops->exited(
            b, have_sig,
            (uint32_t)json_integer_value(json_object_get(how, have_sig ? "signal" : "exit_code")),
            st->timed_out);
        ops_send(st, b);
    } else if (st->req) {
        json_t *line = json_pack("{s:s}", "type", "exit");
        json_object_update(line, how);
        json_object_del(line, "duration_ms");
        send_event(st, line);
    }
    json_decref(how);
    finish(st);
}

/* the exec.end record is durable, or could not be written */
static void on_end_recorded(void *arg, const struct gbx_err *err)
{
    struct exec_rec *r = arg;
    struct stream *st = r->st;
    if (err) {
        gbx_log_error("sandbox '%s': cannot record the end of process %u: %s",
                      st ? st->sandbox : "-", st ? st->proc : 0, err->msg);
        rec_fail(r, err);
    }
    if (st) {
        st->ending = 0;
        exit_reply(st);
    }
    rec_unref(r);
}

static void on_exit_event(struct stream *st, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    uint32_t code = 0, sig = 0;
    int have_sig = gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_SIGNAL, &sig) == 1;
    (void)!gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_CODE, &code);
    json_t *how = have_sig ? json_pack("{s:i}", "signal", (json_int_t)sig)
                           : json_pack("{s:i}", "exit_code", (json_int_t)code);
    if (st->timed_out)
        json_object_set_new(how, "timed_out", json_true());
    for (struct stream *x = st->subs, *next; x; x = next) {
        next = x->sub_next;
        audit_end(x, "exec.end", json_deep_copy(how));
        if (x->req) {
            struct evbuffer *b = buf_new();
            x->ops->exited(b, have_sig, have_sig ? sig : code, 0);
            ops_send(x, b);
        }
        finish(x);
    }
    if (st->req == NULL || st->rec == NULL) { /* nobody to acknowledge it to, or an attach */
        audit_end(st, "exec.end", json_deep_copy(how));
        st->how = how;
        exit_reply(st);
        return;
    }
    /* the process is gone: no timeout to enforce, nothing more to read */
    if (st->timer)
        event_del(st->timer);
    st->ending = 1;
    st->how = json_deep_copy(how);
    json_object_set_new(st->how, "duration_ms",
                        json_integer((gbx_realtime_ns() - st->start_ns) / 1000000));
    st->rec->refs++;
    audit_end_then(st, "exec.end", how, on_end_recorded, st->rec);
}

static void on_frame_event(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    struct stream *st = arg;
    if (!st->started || st->ending || h->id != st->proc)
        return;
    if (h->type == GBX_EV_STDOUT || h->type == GBX_EV_STDERR) {
        struct gbx_attr a;
        if (gbx_attrs_find(p, h->len, GBX_A_DATA, &a) != 1)
            return;
        int is_out = h->type == GBX_EV_STDOUT;
        if (is_out)
            st->out_bytes += a.len;
        else
            st->err_bytes += a.len;
        for (struct stream *x = st->subs; x; x = x->sub_next) {
            if (x->req == NULL)
                continue;
            struct evbuffer *b = buf_new();
            x->ops->output(b, is_out, x->pty, a.data, a.len);
            ops_send(x, b);
        }
        if (st->req == NULL)
            return;
        if (st->mode == MODE_WAIT) {
            capture_add(is_out ? &st->out : &st->err, st->max_output, a.data, a.len);
            return;
        }
        if (st->ops) {
            struct evbuffer *b = buf_new();
            st->ops->output(b, is_out, st->pty, a.data, a.len);
            ops_send(st, b);
            return;
        }
        gbx_autofree char *enc = b64(a.data, a.len);
        send_event(st, json_pack("{s:s,s:s}", "type", is_out ? "stdout" : "stderr", "data", enc));
        return;
    }
    if (h->type == GBX_EV_EXIT)
        on_exit_event(st, h, p);
}

static void on_agent_close(void *arg, const char *why)
{
    struct stream *st = arg;
    gbx_log_debug("sandbox '%s': exec stream lost its agent: %s", st->sandbox, why);
    /* the sandbox may be gone, or only this connection (the process then runs on) */
    gbx_autofree char *msg = gbx_asprintf("the connection to the sandbox was lost: %s", why);
    fail_stream(st, msg);
}

static void start_timer(struct stream *st)
{
    if (st->timeout_ms == 0)
        return;
    st->timer = event_new(st->base, -1, 0, on_timeout, st);
    GBX_BUG_ON(st->timer == NULL);
    struct timeval tv = {(time_t)(st->timeout_ms / 1000),
                         (suseconds_t)(st->timeout_ms % 1000) * 1000};
    event_add(st->timer, &tv);
}

static void on_spawn_reply(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct stream *st = arg;
    if (!final)
        return;
    if (h == NULL) {
        fail_early(st, GBX_ERR_UNAVAILABLE, 0, "the sandbox went away");
        return;
    }
    if (h->type != GBX_MSG_OK) {
        char msg[512];
        int e = gbx_aconn_error_text(p, h->len, msg, sizeof(msg));
        fail_early(st, GBX_ERR_INVALID, e, msg);
        return;
    }
    if (gbx_attrs_get_u32(p, h->len, GBX_A_PROC, &st->proc) != 1) {
        fail_early(st, GBX_ERR_INTERNAL, 0, "the sandbox's agent sent a malformed reply");
        return;
    }
    (void)!gbx_attrs_get_u32(p, h->len, GBX_A_PID, &st->pid);
    st->started = 1;
    json_t *d = json_deep_copy(st->what);
    json_object_set_new(d, "process", json_integer(st->proc));
    json_object_set_new(d, "pid", json_integer(st->pid));
    st->rec = gbx_xcalloc(1, sizeof(*st->rec));
    st->rec->refs = 2; /* the stream's, and the completion's */
    st->rec->st = st;
    gbx_server_audit_then(st->srv, st->actor, "exec.start", st->sandbox, d, on_start_recorded,
                          st->rec);
    gbx_server_exec_started(st->srv, (double)(gbx_monotonic_ns() - st->mono_ns) / 1e9);
    start_timer(st);
    if (st->req == NULL && st->kill_on_disconnect) {
        kill_orphan(st); /* its client left before it started */
        return;
    }
    if (st->req == NULL || st->mode == MODE_WAIT)
        return;
    start_reply(st);
    if (st->ops) {
        struct evbuffer *b = buf_new();
        st->ops->started(b, st->pid);
        ops_send(st, b);
        return;
    }
    send_event(st, json_pack("{s:s,s:i,s:i}", "type", "start", "process", (json_int_t)st->proc,
                             "pid", (json_int_t)st->pid));
}

/* st has just attached to its process: the streams that had it get nothing more from the
 * agent, so end them, saying why. */
static void take_over(struct stream *st)
{
    for (struct stream *o = streams; o;) {
        if (o == st || !o->started || o->ending || o->proc != st->proc ||
            strcmp(o->sandbox, st->sandbox) != 0 || (o->req == NULL && !o->keep_reading)) {
            o = o->next;
            continue;
        }
        o->keep_reading = 0; /* it gets nothing more from the agent */
        if (o->req) {
            char msg[96];
            snprintf(msg, sizeof(msg), "another client attached to process %u", o->proc);
            audit_end(o, "exec.detach", json_pack("{s:s}", "reason", msg));
            detach_client(o);
            if (o->mode == MODE_WAIT) {
                gbx_http_reply_error(o->req, GBX_ERR_CONFLICT, "%s", msg);
            } else if (o->ops) {
                ops_error(o, GBX_ERR_CONFLICT, msg);
                evhttp_send_reply_end(o->req);
            } else {
                send_event(o, json_pack("{s:s,s:s}", "type", "detached", "message", msg));
                evhttp_send_reply_end(o->req);
            }
        }
        /* o is freed, or kept without a client only to enforce its timeout (then skipped
         * above); its subscribers are ended in turn. Start over: the list changed. */
        let_go(o);
        o = streams;
    }
}

static void on_attach_reply(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct stream *st = arg;
    if (!final)
        return;
    if (h == NULL) {
        fail_early(st, GBX_ERR_UNAVAILABLE, 0, "the sandbox went away");
        return;
    }
    if (h->type != GBX_MSG_OK) {
        char msg[512];
        int e = gbx_aconn_error_text(p, h->len, msg, sizeof(msg));
        if (e == ESRCH)
            snprintf(msg, sizeof(msg), "process %u not found (it never ran, or it has finished)",
                     st->proc);
        fail_early(st, gbx_err_kind_from_errno(e), e, msg);
        return;
    }
    st->started = 1;
    gbx_server_audit_as(st->srv, st->actor, "process.attach", st->sandbox,
                        json_pack("{s:i}", "process", (json_int_t)st->proc));
    take_over(st);
    if (st->req == NULL)
        return;
    start_reply(st);
    if (st->ops) {
        struct evbuffer *b = buf_new();
        st->ops->started(b, st->pid);
        ops_send(st, b);
        return;
    }
    send_event(st, json_pack("{s:s,s:i}", "type", "attached", "process", (json_int_t)st->proc));
}

/* Open the stream's connection to the agent; replies and returns -1 on failure (st is gone). */
static int stream_connect(struct stream *st, struct event_base *base, struct gbx_sandbox *sb)
{
    struct gbx_err *err = NULL;
    if (gbx_aconn_open(base, sb, on_frame_event, on_agent_close, st, &st->agent, &err) < 0) {
        if (st->ops)
            st->ops->fail(st->req, st->pid, err->kind, err->errnum, err->msg);
        else
            gbx_http_reply_err(st->req, err);
        gbx_err_free(err);
        st->req = NULL;
        stream_free(st);
        return -1;
    }
    return 0;
}

/* Queue the request being built, with its reply callback; replies on failure. */
static int stream_send(struct stream *st, gbx_aconn_reply_fn fn)
{
    long r = gbx_aconn_send(st->agent, fn, st);
    if (r < 0) {
        if (r == -EMSGSIZE)
            fail_early(st, GBX_ERR_LIMIT, 0, "the command and its environment are too large");
        else
            fail_early(st, GBX_ERR_UNAVAILABLE, 0, "the sandbox went away");
        return -1;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(st->req), on_client_close, st);
    return 0;
}

size_t gbx_exec_drain(const char *why)
{
    size_t n = 0;
    for (struct stream *st = streams, *next; st; st = next) {
        next = st->next;
        if (st->req == NULL || st->ending) /* (an exit waits for its record: answered then) */
            continue;
        if (!st->started || st->mode == MODE_WAIT) {
            fail_early(st, GBX_ERR_UNAVAILABLE, 0, why);
            n++;
            continue;
        }
        /* the process goes on: a client can attach to it again once the daemon is back */
        audit_end(st, "exec.detach", json_pack("{s:s}", "reason", why));
        if (st->ops)
            ops_error(st, GBX_ERR_UNAVAILABLE, why);
        else
            send_event(st, json_pack("{s:s,s:s,s:i}", "type", "error", "message", why, "process",
                                     (json_int_t)st->proc));
        finish(st);
        n++;
    }
    return n;
}

void gbx_exec_stdin_bytes(const char *sandbox, uint32_t proc, size_t n)
{
    /* the stream that started the process (not followers or takers-over) counts them */
    for (struct stream *st = streams; st; st = st->next)
        if (st->proc == proc && st->started && strcmp(st->sandbox, sandbox) == 0) {
            st->in_bytes += n;
            return;
        }
}

void gbx_exec_shutdown(void)
{
    while (streams) {
        struct stream *st = streams;
        detach_client(st); /* a request still here is the HTTP server's to free */
        st->req = NULL;
        stream_free(st);
    }
}

void gbx_exec_attach(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                     struct evhttp_request *req, struct gbx_sandbox *sb, uint32_t proc)
{
    struct stream *st =
        stream_new(srv, who, base, req, sb, MODE_ATTACH, json_pack("{s:b}", "attached", 1));
    st->proc = proc;
    if (stream_connect(st, base, sb) < 0)
        return;
    struct gbx_msg *m = gbx_aconn_begin(st->agent, GBX_MSG_ATTACH);
    gbx_msg_put_u32(m, GBX_A_PROC, proc);
    (void)stream_send(st, on_attach_reply);
}

/* ---- the native API's exec (api/exec_api.c parsed the request) -------------------------- */

void gbx_exec_native(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                     struct evhttp_request *req, struct gbx_sandbox *sb,
                     const struct gbx_exec_native_opts *o,
                     void (*build)(struct gbx_msg *m, void *arg), void *arg)
{
    struct stream *st =
        stream_new(srv, who, base, req, sb, o->wait ? MODE_WAIT : MODE_STREAM, o->what);
    st->timeout_ms = o->timeout_ms;
    st->max_output = o->max_output;
    st->kill_on_disconnect = o->kill_on_disconnect;
    if (stream_connect(st, base, sb) < 0)
        return;
    build(gbx_aconn_begin(st->agent, GBX_MSG_SPAWN), arg);
    (void)stream_send(st, on_spawn_reply);
}

/* ---- other front ends ----------------------------------------------------------------- */

static struct stream *stream_new_ops(struct gbx_server *srv, const struct gbx_actor *who,
                                     struct event_base *base, struct evhttp_request *req,
                                     const struct gbx_sandbox *sb, enum mode mode,
                                     const struct gbx_exec_stream_opts *o)
{
    struct stream *st = stream_new(srv, who, base, req, sb, mode, o->what);
    st->sse = 0;
    st->ops = o->ops;
    st->timeout_ms = o->timeout_ms;
    st->keepalive_ms = o->keepalive_ms;
    st->pty = o->pty;
    st->keep_reading = o->keep_reading;
    return st;
}

void gbx_exec_spawn(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                    struct evhttp_request *req, struct gbx_sandbox *sb,
                    const struct gbx_exec_stream_opts *o,
                    void (*build)(struct gbx_msg *m, void *arg), void *arg)
{
    struct stream *st = stream_new_ops(srv, who, base, req, sb, MODE_STREAM, o);
    if (stream_connect(st, base, sb) < 0)
        return;
    build(gbx_aconn_begin(st->agent, GBX_MSG_SPAWN), arg);
    (void)stream_send(st, on_spawn_reply);
}

/* st follows src's process: src sends it the events from here on. Called in a callback of
 * st's agent connection, which it no longer needs. */
static void subscribe(struct stream *st, struct stream *src)
{
    gbx_aconn_free(st->agent); /* deferred until the callback returns */
    st->agent = NULL;
    st->source = src;
    st->sub_next = src->subs;
    src->subs = st;
    st->started = 1;
    st->keep_reading = 0;
    gbx_server_audit_as(st->srv, st->actor, "process.attach", st->sandbox,
                        json_pack("{s:i,s:b}", "process", (json_int_t)st->proc, "shared", 1));
    start_reply(st);
    struct evbuffer *b = buf_new();
    st->ops->started(b, st->pid);
    ops_send(st, b);
}

/* The agent's PS: find the process whose pid is st->pid, then attach to it. */
static void on_ps_reply(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct stream *st = arg;
    if (!final)
        return;
    if (h == NULL) {
        fail_early(st, GBX_ERR_UNAVAILABLE, 0, "the sandbox went away");
        return;
    }
    if (h->type != GBX_MSG_OK) {
        char msg[512];
        int e = gbx_aconn_error_text(p, h->len, msg, sizeof(msg));
        fail_early(st, gbx_err_kind_from_errno(e), e, msg);
        return;
    }
    struct gbx_attr_iter it;
    struct gbx_attr a;
    int found = 0;
    gbx_attr_iter_init(&it, p, h->len);
    while (!found && gbx_attr_next(&it, &a) == 1) {
        uint32_t pid = 0, proc = 0, pty = 0;
        if (a.tag != GBX_A_PROCINFO || gbx_attrs_get_u32(a.data, a.len, GBX_A_PID, &pid) != 1 ||
            pid != st->pid || gbx_attrs_get_u32(a.data, a.len, GBX_A_PROC, &proc) != 1)
            continue;
        (void)!gbx_attrs_get_u32(a.data, a.len, GBX_A_PTY, &pty);
        st->proc = proc;
        st->pty = pty != 0;
        found = 1;
    }
    if (!found) {
        char msg[96];
        snprintf(msg, sizeof(msg), "no process with pid %u in the sandbox", st->pid);
        fail_early(st, GBX_ERR_NOT_FOUND, ESRCH, msg);
        return;
    }
    /* Another ops stream reads the process: follow it along (envd lets every client that
     * connects see the output), rather than take the process over. */
    for (struct stream *o = streams; o; o = o->next) {
        if (o != st && o->ops && o->started && o->source == NULL && o->mode != MODE_WAIT &&
            o->proc == st->proc && strcmp(o->sandbox, st->sandbox) == 0 &&
            (o->req || o->keep_reading) && !gbx_aconn_lost(o->agent)) {
            subscribe(st, o);
            return;
        }
    }
    struct gbx_msg *m = gbx_aconn_begin(st->agent, GBX_MSG_ATTACH);
    gbx_msg_put_u32(m, GBX_A_PROC, st->proc);
    if (gbx_aconn_send(st->agent, on_attach_reply, st) < 0)
        fail_early(st, GBX_ERR_UNAVAILABLE, 0, "the sandbox went away");
}

void gbx_exec_attach_ops(struct gbx_server *srv, const struct gbx_actor *who,
                         struct event_base *base, struct evhttp_request *req,
                         struct gbx_sandbox *sb, const struct gbx_exec_stream_opts *o, uint32_t pid)
{
    struct stream *st = stream_new_ops(srv, who, base, req, sb, MODE_ATTACH, o);
    st->pid = pid;
    if (stream_connect(st, base, sb) < 0)
        return;
    (void)gbx_aconn_begin(st->agent, GBX_MSG_PS);
    (void)stream_send(st, on_ps_reply);
}
