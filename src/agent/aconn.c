/* SPDX-License-Identifier: MIT */
/* Event-driven agent connection (see aconn.h). Frames are parsed straight out of the
 * bufferevent's input; a frame's payload is copied out only when it is not contiguous. */
#include "agent/aconn.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/proto.h"
#include "base/fault.h"
#include "base/mem.h"

#define FRAME_MAX (GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD)

struct pending {
    struct pending *next;
    uint32_t id;
    gbx_aconn_reply_fn fn;
    void *arg;
};

/* The request being built, for every connection: the loop builds one request at a time
 * (begin .. send runs without returning to the loop), so one buffer serves all, allocated
 * once instead of a frame-sized buffer (an mmap and munmap) per connection. */
static uint8_t *build_buf;
static struct gbx_aconn *builder;

struct gbx_aconn {
    struct bufferevent *bev;
    gbx_aconn_event_fn on_event;
    gbx_aconn_close_fn on_close;
    void *arg;
    struct pending *pending, **tail;
    uint32_t next_id;
    uint32_t hello_id;
    gbx_aconn_event_fn on_hello; /* HELLO's OK (gbx_aconn_hello), or NULL */
    int lost;
    int paused;
    int dispatching; /* inside a callback: free later */
    int doomed;      /* gbx_aconn_free was called while dispatching */
    struct gbx_msg msg;
    int building;
    size_t drain_low;
    void (*drain_fn)(void *arg);
    void *drain_arg;
};

static void destroy(struct gbx_aconn *c)
{
    while (c->pending) {
        struct pending *p = c->pending;
        c->pending = p->next;
        free(p);
    }
    if (c->bev)
        bufferevent_free(c->bev);
    if (builder == c)
        builder = NULL;
    free(c);
}

static struct pending *take_pending(struct gbx_aconn *c, uint32_t id)
{
    for (struct pending **pp = &c->pending; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            struct pending *p = *pp;
            *pp = p->next;
            if (c->tail == &p->next)
                c->tail = pp;
            return p;
        }
    }
    return NULL;
}

static struct pending *find_pending(struct gbx_aconn *c, uint32_t id)
{
    for (struct pending *p = c->pending; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

/* The connection is gone: fail every pending request, then tell the owner. */
static void lose(struct gbx_aconn *c, const char *why)
{
    if (c->lost)
        return;
    c->lost = 1;
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    while (c->pending && !c->doomed) {
        struct pending *p = c->pending;
        c->pending = p->next;
        if (c->pending == NULL)
            c->tail = &c->pending;
        if (p->fn)
            p->fn(p->arg, NULL, NULL, 1);
        free(p);
    }
    if (!c->doomed && c->on_close)
        c->on_close(c->arg, why);
}

static void dispatch(struct gbx_aconn *c, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    switch (h->type) {
    case GBX_MSG_OK:
    case GBX_MSG_ERROR: {
        if (h->type == GBX_MSG_ERROR && h->id == 0) {
            /* init refused the connection itself (too many, or a protocol error) */
            char msg[256], why[320];
            (void)gbx_aconn_error_text(p, h->len, msg, sizeof(msg));
            snprintf(why, sizeof(why), "the sandbox's agent refused the connection: %s", msg);
            lose(c, why);
            return;
        }
        if (h->id == c->hello_id) {
            c->hello_id = 0;
            if (h->type == GBX_MSG_ERROR)
                lose(c, "the sandbox's agent refused the connection (protocol version?)");
            else if (c->on_hello)
                c->on_hello(c->arg, h, p);
            return;
        }
        struct pending *pe = take_pending(c, h->id);
        if (pe && pe->fn)
            pe->fn(pe->arg, h, p, 1);
        free(pe);
        return;
    }
    case GBX_EV_DATA:
    case GBX_EV_DIRENT: {
        struct pending *pe = find_pending(c, h->id);
        if (pe && pe->fn)
            pe->fn(pe->arg, h, p, 0);
        return;
    }
    default:
        if (c->on_event)
            c->on_event(c->arg, h, p);
        return;
    }
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct gbx_aconn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    c->dispatching++;
    while (!c->lost && !c->doomed && !c->paused) {
        uint8_t hdr[GBX_FRAME_HDR_SIZE];
        if (evbuffer_copyout(in, hdr, sizeof(hdr)) < (ssize_t)sizeof(hdr))
            break;
        struct gbx_frame_hdr h;
        if (gbx_frame_decode_hdr(hdr, sizeof(hdr), &h) < 0) {
            lose(c, "the sandbox's agent sent a malformed frame");
            break;
        }
        size_t total = GBX_FRAME_HDR_SIZE + (size_t)h.len;
        if (evbuffer_get_length(in) < total)
            break;
        const uint8_t *frame = evbuffer_pullup(in, (ssize_t)total);
        GBX_BUG_ON(frame == NULL);
        const uint8_t *payload = frame + GBX_FRAME_HDR_SIZE;
        if (gbx_attrs_validate(payload, h.len) < 0) {
            lose(c, "the sandbox's agent sent a malformed frame");
            break;
        }
        /* the fault suite's cut connection: lost as if init's end had gone */
        if (h.type == GBX_EV_STDOUT && gbx_fault("agent.cut") < 0) {
            lose(c, "the connection to the sandbox's agent was cut");
            break;
        }
        /* the callback may pause, free, or send: the frame stays valid until drained */
        dispatch(c, &h, payload);
        if (c->doomed)
            break;
        evbuffer_drain(in, total);
    }
    c->dispatching--;
    if (c->doomed && c->dispatching == 0)
        destroy(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct gbx_aconn *c = arg;
    if (c->drain_fn == NULL || evbuffer_get_length(bufferevent_get_output(bev)) > c->drain_low)
        return;
    void (*fn)(void *) = c->drain_fn;
    c->drain_fn = NULL;
    c->dispatching++;
    fn(c->drain_arg);
    c->dispatching--;
    if (c->doomed && c->dispatching == 0)
        destroy(c);
}

static void on_bev_event(struct bufferevent *bev, short what, void *arg)
{
    struct gbx_aconn *c = arg;
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    c->dispatching++;
    lose(c, what & BEV_EVENT_EOF ? "the sandbox's agent closed the connection"
                                 : "the connection to the sandbox's agent failed");
    c->dispatching--;
    if (c->doomed && c->dispatching == 0)
        destroy(c);
}

struct gbx_aconn *gbx_aconn_new(struct event_base *base, int fd, gbx_aconn_event_fn on_event,
                                gbx_aconn_close_fn on_close, void *arg)
{
    struct gbx_aconn *c = gbx_xcalloc(1, sizeof(*c));
    evutil_make_socket_nonblocking(fd);
    evutil_make_socket_closeonexec(fd);
    c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    GBX_BUG_ON(c->bev == NULL);
    c->on_event = on_event;
    c->on_close = on_close;
    c->arg = arg;
    c->tail = &c->pending;
    c->next_id = 1;
    /* a frame never sits half-read for want of buffer room */
    bufferevent_setwatermark(c->bev, EV_READ, 0, 4 * FRAME_MAX);
    bufferevent_setcb(c->bev, on_read, on_write, on_bev_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    struct gbx_msg *m = gbx_aconn_begin(c, GBX_MSG_HELLO);
    gbx_msg_put_u32(m, GBX_A_VERSION, GBX_AGENT_VERSION);
    long id = gbx_aconn_send(c, NULL, NULL);
    c->hello_id = id > 0 ? (uint32_t)id : 0;
    /* HELLO has no pending entry: its reply is matched by hello_id */
    struct pending *p = take_pending(c, c->hello_id);
    free(p);
    return c;
}

void gbx_aconn_free(struct gbx_aconn *c)
{
    if (c == NULL)
        return;
    if (c->dispatching) {
        c->doomed = 1;
        c->on_event = NULL;
        c->on_close = NULL;
        c->drain_fn = NULL;
        bufferevent_disable(c->bev, EV_READ | EV_WRITE);
        return;
    }
    destroy(c);
}

struct gbx_msg *gbx_aconn_begin(struct gbx_aconn *c, uint16_t type)
{
    GBX_BUG_ON(c->building || builder != NULL);
    c->building = 1;
    builder = c;
    if (build_buf == NULL)
        build_buf = gbx_xmalloc(FRAME_MAX);
    uint32_t id = c->next_id++;
    if (c->next_id == 0)
        c->next_id = 1;
    gbx_msg_start(&c->msg, build_buf, FRAME_MAX, type, id);
    return &c->msg;
}

long gbx_aconn_send(struct gbx_aconn *c, gbx_aconn_reply_fn fn, void *arg)
{
    GBX_BUG_ON(!c->building);
    c->building = 0;
    builder = NULL;
    long n = gbx_msg_finish(&c->msg);
    if (n < 0)
        return -EMSGSIZE;
    if (c->lost || c->doomed)
        return -ENOTCONN;
    struct gbx_frame_hdr h;
    GBX_BUG_ON(gbx_frame_decode_hdr(build_buf, (size_t)n, &h) < 0);
    if (bufferevent_write(c->bev, build_buf, (size_t)n) < 0)
        return -ENOTCONN;
    struct pending *p = gbx_xcalloc(1, sizeof(*p));
    p->id = h.id;
    p->fn = fn;
    p->arg = arg;
    *c->tail = p;
    c->tail = &p->next;
    return (long)h.id;
}

void gbx_aconn_put_data(struct gbx_msg *m, const uint8_t *data, struct evbuffer *body, size_t n)
{
    uint8_t *dst = gbx_msg_reserve(m, GBX_A_DATA, n);
    if (dst == NULL)
        return; /* the overflow is sticky: gbx_aconn_send reports it */
    if (data)
        memcpy(dst, data, n);
    else
        GBX_BUG_ON(evbuffer_remove(body, dst, n) != (int)n);
}

void gbx_aconn_pause(struct gbx_aconn *c, int paused)
{
    if (c->lost || c->doomed || c->paused == !!paused)
        return;
    c->paused = !!paused;
    if (paused) {
        bufferevent_disable(c->bev, EV_READ);
        return;
    }
    bufferevent_enable(c->bev, EV_READ);
    /* deliver what was buffered while paused (the socket may have nothing new) */
    if (c->dispatching == 0)
        on_read(c->bev, c);
}

size_t gbx_aconn_out_pending(const struct gbx_aconn *c)
{
    return evbuffer_get_length(bufferevent_get_output(c->bev));
}

void gbx_aconn_on_drain(struct gbx_aconn *c, size_t low, void (*fn)(void *arg), void *arg)
{
    c->drain_low = low;
    c->drain_fn = fn;
    c->drain_arg = arg;
    bufferevent_setwatermark(c->bev, EV_WRITE, low, 0);
    if (fn && !c->lost && gbx_aconn_out_pending(c) <= low) {
        /* already drained: say so from the loop, not from inside the caller */
        bufferevent_trigger(c->bev, EV_WRITE, BEV_TRIG_DEFER_CALLBACKS);
    }
}

int gbx_aconn_lost(const struct gbx_aconn *c)
{
    return c->lost;
}

int gbx_aconn_error_text(const uint8_t *p, size_t len, char *msg, size_t msgsz)
{
    uint32_t e = EIO;
    if (p == NULL || gbx_attrs_get_u32(p, len, GBX_A_ERRNO, &e) != 1 || e == 0)
        e = EIO;
    if (p == NULL || gbx_attrs_get_str(p, len, GBX_A_MESSAGE, msg, msgsz) != 1)
        snprintf(msg, msgsz, "%s", p ? strerror((int)e) : "the sandbox's agent went away");
    return (int)e;
}

/* ---- HELLO alone ---------------------------------------------------------------------------- */

struct gbx_aconn_hello {
    struct gbx_aconn *c;
    struct event *timer;
    gbx_aconn_hello_fn done;
    void *arg;
};

static void hello_end(struct gbx_aconn_hello *h, const struct gbx_err *err)
{
    gbx_aconn_hello_fn done = h->done;
    void *arg = h->arg;
    gbx_aconn_hello_cancel(h);
    done(arg, err);
}

static void hello_fail(struct gbx_aconn_hello *h, int e, const char *why)
{
    struct gbx_err *err = NULL;
    gbx_err_set(&err, e, GBX_ERR_UNAVAILABLE, "agent hello: %s", why);
    hello_end(h, err);
    gbx_err_free(err);
}

static void hello_ok(void *arg, const struct gbx_frame_hdr *fh, const uint8_t *p)
{
    struct gbx_aconn_hello *h = arg;
    uint32_t v = 0;
    if (gbx_attrs_get_u32(p, fh->len, GBX_A_VERSION, &v) != 1 || v != GBX_AGENT_VERSION) {
        char why[64];
        snprintf(why, sizeof(why), "unsupported agent version %u", v);
        return hello_fail(h, EPROTO, why);
    }
    hello_end(h, NULL);
}

static void hello_lost(void *arg, const char *why)
{
    hello_fail(arg, ECONNRESET, why);
}

static void hello_late(evutil_socket_t fd, short what, void *arg)
{
    hello_fail(arg, ETIMEDOUT, "the sandbox's agent did not answer in time");
}

struct gbx_aconn_hello *gbx_aconn_hello(struct event_base *base, int fd, int64_t timeout_ms,
                                        gbx_aconn_hello_fn done, void *arg)
{
    struct gbx_aconn_hello *h = gbx_xcalloc(1, sizeof(*h));
    h->done = done;
    h->arg = arg;
    h->timer = evtimer_new(base, hello_late, h);
    GBX_BUG_ON(h->timer == NULL);
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    evtimer_add(h->timer, &tv);
    h->c = gbx_aconn_new(base, fd, NULL, hello_lost, h);
    h->c->on_hello = hello_ok;
    return h;
}

void gbx_aconn_hello_cancel(struct gbx_aconn_hello *h)
{
    if (h == NULL)
        return;
    gbx_aconn_free(h->c); /* deferred when inside its callback; nothing more is delivered */
    event_free(h->timer);
    free(h);
}
