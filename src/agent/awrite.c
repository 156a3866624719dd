/* SPDX-License-Identifier: MIT */
/* One file's write over an agent connection (see awrite.h). */
#include "agent/awrite.h"

#include <errno.h>

#include "agent/aconn.h"

void gbx_awrite_init(struct gbx_awrite *w, struct gbx_aconn *ac, const uint8_t *data,
                     struct evbuffer *body, size_t len, gbx_awrite_done_fn done, void *arg)
{
    *w = (struct gbx_awrite){
        .ac = ac,
        .data = data,
        .body = body,
        .len = len,
        .step = GBX_AWRITE_OPEN,
        .done = done,
        .arg = arg,
    };
}

/* Report the end. done may free w: the callers return straight after. */
static void end(struct gbx_awrite *w, const struct gbx_frame_hdr *h, const uint8_t *p, long err)
{
    w->over = 1;
    w->done(w->arg, h, p, err);
}

static void on_end(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_awrite *w = arg;
    if (!final || w->over)
        return;
    end(w, h, p, 0);
}

static void on_data(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final);

/* Keep up to GBX_AWRITE_WINDOW WRITE_DATA chunks in flight; once every byte is acknowledged,
 * WRITE_END with commit. */
static void pump(struct gbx_awrite *w)
{
    while (w->inflight < GBX_AWRITE_WINDOW && w->sent < w->len) {
        size_t n = w->len - w->sent;
        if (n > GBX_FRAME_CHUNK)
            n = GBX_FRAME_CHUNK;
        struct gbx_msg *m = gbx_aconn_begin(w->ac, GBX_MSG_WRITE_DATA);
        gbx_msg_put_u32(m, GBX_A_HANDLE, w->handle);
        gbx_aconn_put_data(m, w->data ? w->data + w->sent : NULL, w->body, n);
        long id = gbx_aconn_send(w->ac, on_data, w);
        if (id < 0)
            return end(w, NULL, NULL, id);
        w->sent += n;
        w->inflight++;
    }
    if (w->inflight == 0 && w->sent == w->len && w->step == GBX_AWRITE_DATA) {
        w->step = GBX_AWRITE_END;
        struct gbx_msg *m = gbx_aconn_begin(w->ac, GBX_MSG_WRITE_END);
        gbx_msg_put_u32(m, GBX_A_HANDLE, w->handle);
        gbx_msg_put_u32(m, GBX_A_COMMIT, 1);
        long id = gbx_aconn_send(w->ac, on_end, w);
        if (id < 0)
            return end(w, NULL, NULL, id);
    }
}

static void on_data(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_awrite *w = arg;
    if (!final || w->over)
        return;
    if (h == NULL || h->type != GBX_MSG_OK)
        return end(w, h, p, 0);
    w->inflight--;
    pump(w);
}

static void on_open(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_awrite *w = arg;
    if (!final || w->over)
        return;
    if (h == NULL || h->type != GBX_MSG_OK)
        return end(w, h, p, 0);
    if (gbx_attrs_get_u32(p, h->len, GBX_A_HANDLE, &w->handle) != 1)
        return end(w, h, p, -EBADMSG);
    w->step = GBX_AWRITE_DATA;
    pump(w);
}

void gbx_awrite_open(struct gbx_awrite *w, struct gbx_msg *m, uint32_t mode, uint32_t wflags)
{
    gbx_msg_put_u32(m, GBX_A_MODE, mode);
    gbx_msg_put_u32(m, GBX_A_WFLAGS, wflags);
    long id = gbx_aconn_send(w->ac, on_open, w);
    if (id < 0)
        end(w, NULL, NULL, id);
}
