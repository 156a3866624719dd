/* SPDX-License-Identifier: MIT */
/* Writing one file into a sandbox over an agent connection (aconn.h) without blocking the
 * loop: the WRITE that opens it, its bytes as WRITE_DATA chunks of at most GBX_FRAME_CHUNK with
 * at most GBX_AWRITE_WINDOW of them unacknowledged, then WRITE_END with commit once the last
 * chunk is acknowledged. The native files API (api/files.c) and envd's /files (e2b/files.c)
 * both write through it; each keeps its own request, answers, audit and what follows a write.
 *
 * The end is reported once, through the done callback, and nothing more is sent after it.
 * done may free the struct (it is usually part of the caller's operation): nothing here
 * touches it after done returns. The struct must stay valid while the connection can still
 * deliver replies to it, that is until done has reported success, or until the connection is
 * freed (gbx_aconn_free), which a caller does when a write fails; replies that arrive for it
 * after a failure was reported are ignored. */
#ifndef GBX_AGENT_AWRITE_H
#define GBX_AGENT_AWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/frame.h"

struct evbuffer;
struct gbx_aconn;

/* WRITE_DATA chunks in flight to the agent */
#define GBX_AWRITE_WINDOW 4

/* How the write ended:
 *   err == 0, h an OK: WRITE_END's reply, the file is committed (GBX_A_SIZE: its size);
 *   err == 0, h an ERROR: the agent refused the request that w->step names;
 *   err == 0, h NULL: the connection was lost before the reply;
 *   err == -EMSGSIZE or -ENOTCONN (h NULL): a request could not be sent (gbx_aconn_send);
 *   err == -EBADMSG: WRITE's OK holds no handle (h, p are it). */
typedef void (*gbx_awrite_done_fn)(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p,
                                   long err);

/* The request the write is at. */
enum gbx_awrite_step {
    GBX_AWRITE_OPEN, /* WRITE, waiting for the handle */
    GBX_AWRITE_DATA, /* WRITE_DATA chunks */
    GBX_AWRITE_END,  /* WRITE_END with commit */
};

struct gbx_awrite {
    struct gbx_aconn *ac;
    const uint8_t *data;   /* the bytes, or NULL: removed from the front of body as sent */
    struct evbuffer *body; /* borrowed */
    size_t len, sent;
    uint32_t handle; /* from WRITE's reply */
    int inflight;    /* WRITE_DATA chunks not yet acknowledged */
    enum gbx_awrite_step step;
    int over; /* done has run: later replies are ignored */
    gbx_awrite_done_fn done;
    void *arg;
};

/* Set w up to write len bytes (from data when it is non-NULL, else from body) over ac; done
 * gets arg. Nothing is sent yet. A struct whose write is over can be set up again. */
void gbx_awrite_init(struct gbx_awrite *w, struct gbx_aconn *ac, const uint8_t *data,
                     struct evbuffer *body, size_t len, gbx_awrite_done_fn done, void *arg);

/* Finish m, the WRITE request being built on w's connection (the caller has put what names
 * the file: GBX_A_USER, GBX_A_PATH), with the file's mode and GBX_W_* flags, and send it; the
 * bytes follow once its handle arrives. A failure to send is reported through done before
 * this returns. */
void gbx_awrite_open(struct gbx_awrite *w, struct gbx_msg *m, uint32_t mode, uint32_t wflags);

#endif
