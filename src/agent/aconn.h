/* SPDX-License-Identifier: MIT */
/* The daemon's event-driven connection to a sandbox's glovebox-init: the agent protocol
 * (docs/agent-protocol.md) over a libevent bufferevent, so no request ever blocks the loop.
 *
 * Requests are built in place and sent with a reply callback; the callback sees each frame
 * streamed for the request (READ's DATA, LIST's DIRENT events, final = 0) and then its OK or
 * ERROR reply (final = 1). Events not tied to a request (process output and exits, watch
 * events) go to the connection's event callback. When the connection is lost, every request
 * still waiting gets its callback once with h == NULL and final = 1, then the close callback
 * runs.
 *
 * Callbacks may call gbx_aconn_free() on their own connection: freeing is deferred until the
 * callback returns. Nothing is delivered after gbx_aconn_free(). */
#ifndef GBX_AGENT_ACONN_H
#define GBX_AGENT_ACONN_H

#include <stddef.h>
#include <stdint.h>

#include "agent/frame.h"
#include "base/err.h"

struct event_base;
struct evbuffer;
struct gbx_aconn;

/* A frame for request `arg` (h NULL: the connection was lost before its reply). */
typedef void (*gbx_aconn_reply_fn)(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p,
                                   int final);
/* An unsolicited event (GBX_EV_STDOUT, _STDERR, _EXIT, _WATCH). */
typedef void (*gbx_aconn_event_fn)(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p);
/* The connection is gone (EOF, error, a malformed frame); why says which. Pending requests
 * have had their callbacks already. The connection must still be freed by its owner. */
typedef void (*gbx_aconn_close_fn)(void *arg, const char *why);

/* Take over a connected stream socket to init (made non-blocking here) and send HELLO.
 * Callbacks get arg. Never fails: a dead socket shows up as the close callback. */
struct gbx_aconn *gbx_aconn_new(struct event_base *base, int fd, gbx_aconn_event_fn on_event,
                                gbx_aconn_close_fn on_close, void *arg);
void gbx_aconn_free(struct gbx_aconn *c);

/* Start a request of type; returns the builder (valid until gbx_aconn_send) with the id
 * assigned. Only one request can be built at a time. */
struct gbx_msg *gbx_aconn_begin(struct gbx_aconn *c, uint16_t type);
/* Finish and queue the request being built. fn may be NULL (the reply is dropped).
 * Returns the request id (> 0), or -EMSGSIZE when it overflowed (nothing is sent),
 * or -ENOTCONN when the connection is already lost. */
long gbx_aconn_send(struct gbx_aconn *c, gbx_aconn_reply_fn fn, void *arg);
/* Put n bytes of file data into the request being built as its DATA attribute: from data
 * when it is non-NULL, else removed from the front of body (which must hold them). */
void gbx_aconn_put_data(struct gbx_msg *m, const uint8_t *data, struct evbuffer *body, size_t n);

/* Flow control. While paused, nothing is read from the agent (it stops reading the process,
 * which blocks). Frames already buffered wait too; resuming delivers them, synchronously when
 * called outside a callback of this connection: those callbacks may free their owner, so the
 * caller must not touch its own state after gbx_aconn_pause(c, 0) returns. */
void gbx_aconn_pause(struct gbx_aconn *c, int paused);
/* Bytes queued for the agent and not yet written to the socket. */
size_t gbx_aconn_out_pending(const struct gbx_aconn *c);
/* Called once the queued output has dropped to at most low bytes (one-shot; NULL clears). */
void gbx_aconn_on_drain(struct gbx_aconn *c, size_t low, void (*fn)(void *arg), void *arg);
/* Non-zero once the connection is lost. */
int gbx_aconn_lost(const struct gbx_aconn *c);

/* Helpers for replies: the ERROR reply's message (and errno) as a gbx_err kind + text.
 * Fills msg (always terminated) and returns the errno the agent gave (EIO if none). */
int gbx_aconn_error_text(const uint8_t *p, size_t len, char *msg, size_t msgsz);

/* HELLO on a new connection to init (fd, taken over) and nothing more: the creator's
 * handshake, without blocking the loop. done runs once, on the loop, with err NULL when init
 * answered with this protocol's version, or with why not (UNAVAILABLE: the connection was lost
 * or refused, another version, or no answer within timeout_ms); the connection is closed
 * before done runs. gbx_aconn_hello_cancel before then: done never runs. */
struct gbx_aconn_hello;
typedef void (*gbx_aconn_hello_fn)(void *arg, const struct gbx_err *err);
struct gbx_aconn_hello *gbx_aconn_hello(struct event_base *base, int fd, int64_t timeout_ms,
                                        gbx_aconn_hello_fn done, void *arg);
void gbx_aconn_hello_cancel(struct gbx_aconn_hello *h);

#endif
