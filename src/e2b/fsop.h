/* SPDX-License-Identifier: MIT */
/* What envd's two file surfaces share (e2b/fs.c: filesystem.Filesystem over Connect;
 * e2b/files.c: GET/POST /files): an operation with its own connection to the sandbox's agent,
 * under the lifetime rules of the native files API (files.c): the op is never freed inside
 * one of its callbacks, a client that leaves stops it (except a mutation already sent, which
 * goes on to be audited), and a lost agent answers or ends the reply. Also the EntryInfo
 * message and the mapping of agent errors to Connect codes and HTTP statuses. Private to
 * the E2B file services. */
#ifndef GBX_E2B_FSOP_H
#define GBX_E2B_FSOP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/frame.h"
#include "core/actor.h"
#include "agent/aconn.h"
#include "agent/awrite.h"
#include "http/multipart.h"
#include "sandbox/backend.h"

struct event;
struct event_base;
struct evbuffer;
struct evhttp_request;
struct gbx_aconn;
struct gbx_live;
struct gbx_server;

/* How the op answers: a unary Connect reply, a Connect server stream, or envd REST. */
enum gbx_e2b_form { GBX_E2B_UNARY, GBX_E2B_STREAM, GBX_E2B_REST };

/* One file of an upload. */
struct gbx_e2b_item {
    char *path;          /* owned, absolute */
    const uint8_t *data; /* into the multipart body, or NULL: read from op->body */
    size_t len;
};

struct gbx_e2b_fsop {
    enum gbx_e2b_form form;
    int kind; /* the service's own (e2b/fs.c, e2b/files.c) */
    struct gbx_server *srv;
    struct event_base *base;
    struct evhttp_request *req; /* NULL once answered, or once the client left */
    struct gbx_aconn *ac;
    char sandbox[GBX_ID_MAX + 1];
    char actor[128]; /* captured when the request arrived, for the audit */
    char user[64];   /* the envd user the op acts as */
    int busy;        /* inside one of our callbacks (or the handler): freeing waits */
    int dead;
    int mutation; /* a change was sent: it goes on when the client leaves */
    int started;  /* the reply's status and headers are out (stream, download) */
    int paused;   /* the agent is paused until the client drains */

    char *path, *path2; /* owned, absolute */
    int flag;           /* recursive, include entry, existed, ... (per service) */
    uint32_t depth, handle;
    json_t *entries; /* list results; watch: events waiting for their entry */
    size_t count;
    struct event *keepalive, *deadline; /* watch */

    uint64_t len, sent; /* download */

    struct gbx_e2b_item *items; /* upload */
    size_t nitems, cur;
    struct evbuffer *body; /* octet-stream body: borrowed from req, or owned when gunzipped */
    int own_body;
    struct gbx_multipart mp;
    struct gbx_awrite write; /* the item being written */
    int inflight;            /* STATs in flight for a list's names (e2b/fs.c) */
    json_t *written;

    struct gbx_e2b_fsop *next, **pprev;
};

/* A new op for req (busy until the handler calls gbx_e2b_fsop_leave). */
struct gbx_e2b_fsop *gbx_e2b_fsop_new(struct gbx_server *srv, const struct gbx_actor *who,
                                      struct event_base *base, struct evhttp_request *req,
                                      struct gbx_live *l, enum gbx_e2b_form form, int kind,
                                      const char *user);
void gbx_e2b_fsop_enter(struct gbx_e2b_fsop *op);
void gbx_e2b_fsop_leave(struct gbx_e2b_fsop *op);
/* The op is over: the agent connection goes (aborting unfinished writes, ending a watch);
 * memory goes when the last callback returns. */
void gbx_e2b_fsop_finish(struct gbx_e2b_fsop *op);
/* Connect to the sandbox's agent (watch events to on_event); on failure answers and
 * finishes the op, returns -1. */
int gbx_e2b_fsop_connect(struct gbx_e2b_fsop *op, struct gbx_live *l,
                         void (*on_event)(void *arg, const struct gbx_frame_hdr *h,
                                          const uint8_t *p));
/* Start a request as the op's user, with PATH when path is non-NULL. */
struct gbx_msg *gbx_e2b_fsop_begin(struct gbx_e2b_fsop *op, uint16_t type, const char *path);
/* Send it; on failure answer and finish the op. 0 or -1. */
int gbx_e2b_fsop_send(struct gbx_e2b_fsop *op, gbx_aconn_reply_fn fn);
/* What gbx_e2b_fsop_send does when gbx_aconn_send refuses a request with id (-EMSGSIZE or
 * -ENOTCONN): answer, and finish the op. */
void gbx_e2b_fsop_send_failed(struct gbx_e2b_fsop *op, long id);

/* An envd path for user (e2b.h gbx_e2b_path), lexically cleaned: malloc'ed, or NULL when it
 * is empty, longer than 4096 bytes or holds a NUL byte. */
char *gbx_e2b_fsop_path(const char *user, const char *raw);

/* Answers. code is a Connect code (unary and stream forms); status an HTTP status (REST).
 * A stream not started yet starts, so the error travels in its end-of-stream frame (the
 * SDK reads a stream's code from there, not from an HTTP status). No-ops once answered. */
void gbx_e2b_fsop_error(struct gbx_e2b_fsop *op, const char *code, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The agent's ERROR reply (h NULL: the agent went away), about path; then finish. */
void gbx_e2b_fsop_fail(struct gbx_e2b_fsop *op, const struct gbx_frame_hdr *h, const uint8_t *p,
                       const char *path);
/* A unary success (msg stolen) or a REST JSON reply with status; then finish. */
void gbx_e2b_fsop_reply(struct gbx_e2b_fsop *op, int status, json_t *msg);
/* The errno of an ERROR reply, and whether it says the user is unknown. */
int gbx_e2b_fsop_errno(const struct gbx_frame_hdr *h, const uint8_t *p, int *unknown_user);

/* Send b (drained) to the client, pausing the agent while the client's unsent bytes are over
 * the cap (resumed once they are written out). */
void gbx_e2b_fsop_send_chunk(struct gbx_e2b_fsop *op, struct evbuffer *b);
/* Audit a change as the actor of the request (detail stolen; the user is added). */
void gbx_e2b_fsop_audit(struct gbx_e2b_fsop *op, const char *kind, json_t *detail);

/* s as valid UTF-8 (each invalid byte becomes U+FFFD): malloc'ed. File names may hold any
 * byte, and JSON strings may not. */
char *gbx_e2b_utf8(const char *s);
/* The same as a JSON string (new reference). */
json_t *gbx_e2b_jstr(const char *s);
/* EntryInfo from STAT attributes, for the file at absolute path. */
json_t *gbx_e2b_entry_json(const uint8_t *p, size_t len, const char *path);
/* The file type a STAT reply gives (GBX_FT_*), or 0. */
uint32_t gbx_e2b_ftype(const uint8_t *p, size_t len);

/* Every open op, for the daemon's drain. */
struct gbx_e2b_fsop *gbx_e2b_fsop_first(void);

#endif
