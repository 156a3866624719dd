/* SPDX-License-Identifier: MIT */
/* POST /v1/sandboxes/{id}/exec: start a process and stream its events (NDJSON or SSE), or
 * run it and reply with its output once it exited ("wait"). Also the attach stream of
 * GET /v1/sandboxes/{id}/processes/{proc}/stream. */
#ifndef GBX_HTTP_EXEC_H
#define GBX_HTTP_EXEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/actor.h"
#include "base/err.h"

struct event_base;
struct evbuffer;
struct evhttp_request;
struct gbx_msg;
struct gbx_sandbox;
struct gbx_server;

/* The native API's exec stream (api/exec_api.c parsed and checked the request): NDJSON, or
 * SSE when the client asks with Accept; with wait, one JSON object once the process has
 * exited, its output captured up to max_output bytes per stream. With kill_on_disconnect,
 * a client that leaves before the exit has the process group killed (audited as exec.kill;
 * not after another client attached to the process). build fills the SPAWN request; what
 * (stolen) is the exec.start record's detail. */
struct gbx_exec_native_opts {
    int wait;
    uint64_t timeout_ms;    /* 0: none */
    size_t max_output;      /* wait: bytes kept per stream */
    int kill_on_disconnect; /* the client leaves before the exit: SIGKILL the process group */
    json_t *what;
};
void gbx_exec_native(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                     struct evhttp_request *req, struct gbx_sandbox *sb,
                     const struct gbx_exec_native_opts *o,
                     void (*build)(struct gbx_msg *m, void *arg), void *arg);

/* Attach to the running process proc of sb and stream its events from here on. This is a
 * takeover: the stream that had the process's output ends with a "detached" event.
 * An unknown or finished process is a 404. Audited as process.attach. */
void gbx_exec_attach(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                     struct evhttp_request *req, struct gbx_sandbox *sb, uint32_t proc);

/* Let go of every stream still open, those kept only to enforce a timeout after their
 * client left included (those timeouts are then not enforced). For the daemon's shutdown,
 * after its HTTP servers were freed, before the event base is. */
void gbx_exec_shutdown(void);
/* n bytes were written to process proc's stdin (for its exec.end audit record). */
void gbx_exec_stdin_bytes(const char *sandbox, uint32_t proc, size_t n);
/* The daemon is stopping: end every stream cleanly with an error event saying why (and the
 * process handle to attach to later); requests still waiting get a 503. */
size_t gbx_exec_drain(const char *why);

/* ---- the same streams for another front end (E2B's process.Process, e2b/process.c) ---------- */

/* How a stream's events go out when not as the native NDJSON or SSE. Each event callback
 * appends the bytes of one event to b; exec.c sends them (with its backpressure) and ends
 * the reply after exited and error. */
struct gbx_exec_ops {
    /* Start the 200 reply (headers, status). */
    void (*begin)(struct evhttp_request *req);
    /* The process was spawned or attached; pid is its pid in the sandbox. */
    void (*started)(struct evbuffer *b, uint32_t pid);
    /* Output (on a PTY, everything is stdout). */
    void (*output)(struct evbuffer *b, int is_stdout, int pty, const uint8_t *data, size_t len);
    /* The process ended: by a signal (signaled, code = the signal) or with an exit code;
     * timed_out when it was killed for running past its timeout. The reply's last bytes. */
    void (*exited)(struct evbuffer *b, int signaled, uint32_t code, int timed_out);
    /* The stream ends for another reason after begin: CONFLICT when another client took
     * the process over, UNAVAILABLE when the sandbox or the daemon goes away. Last bytes. */
    void (*error)(struct evbuffer *b, enum gbx_err_kind kind, const char *msg);
    /* Nothing was sent yet: reply with the error (errnum: the agent's errno, or 0; pid:
     * the process attached to, or 0). */
    void (*fail)(struct evhttp_request *req, uint32_t pid, enum gbx_err_kind kind, int errnum,
                 const char *msg);
    /* Nothing was sent for keepalive_ms. */
    void (*keepalive)(struct evbuffer *b);
};

struct gbx_exec_stream_opts {
    const struct gbx_exec_ops *ops;
    json_t *what;          /* what ran, for the audit records (stolen) */
    uint64_t timeout_ms;   /* kill the process group after this, client or not (0: never) */
    uint64_t keepalive_ms; /* 0: no keepalives */
    int pty;               /* the process has a terminal */
    int keep_reading;      /* when the client leaves, read and drop the output (as envd does) until
                            * the process exits, so it never blocks on a full pipe */
};

/* Spawn a process and stream its events through o->ops; build fills the SPAWN request
 * (ARGV, ENV, ...) on the stream's own agent connection. Audited like the native exec. */
void gbx_exec_spawn(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                    struct evhttp_request *req, struct gbx_sandbox *sb,
                    const struct gbx_exec_stream_opts *o,
                    void (*build)(struct gbx_msg *m, void *arg), void *arg);
/* Attach to the process whose pid in the sandbox is pid (found with the agent's PS on the
 * stream's own connection; o->pty is taken from there) and stream its events through o->ops.
 * When another ops stream already reads the process (its client there or gone, with
 * keep_reading), follow it along: both get the events from here on, the slower client holds
 * both back. Else a takeover, as gbx_exec_attach. An unknown pid fails with ESRCH. */
void gbx_exec_attach_ops(struct gbx_server *srv, const struct gbx_actor *who,
                         struct event_base *base, struct evhttp_request *req,
                         struct gbx_sandbox *sb, const struct gbx_exec_stream_opts *o,
                         uint32_t pid);

#endif
