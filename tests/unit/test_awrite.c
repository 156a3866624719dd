/* SPDX-License-Identifier: MIT */
/* One file's write over an agent connection (src/agent/awrite.c), driven over a real socketpair
 * with a libevent loop, the test playing init's side with the frame codec: WRITE with the
 * caller's mode and flags, no more than GBX_AWRITE_WINDOW chunks unacknowledged, every byte in
 * order in chunks of at most GBX_FRAME_CHUNK (from a pointer and from an evbuffer), WRITE_END
 * with commit only after the last acknowledgement, and each way a write fails (an ERROR to
 * WRITE or to a chunk, WRITE's OK without a handle, a closed socket, a connection already
 * lost) reported once through the callback with nothing sent after it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "agent/aconn.h"
#include "agent/awrite.h"
#include "agent/frame.h"

#define HANDLE 7
#define MODE 0640
#define WFLAGS (GBX_W_CREATE | GBX_W_TRUNC | GBX_W_PARENTS)

/* A frame init received. */
struct frame {
    struct gbx_frame_hdr h;
    uint8_t p[GBX_FRAME_MAX_PAYLOAD];
};

/* What the done callback was given. */
struct result {
    int calls;
    long err;
    int had_h;
    struct gbx_frame_hdr h;
    uint8_t p[4096];
    enum gbx_awrite_step step;
};

struct fix {
    struct event_base *base;
    struct gbx_aconn *ac;
    int init_fd; /* init's end; -1 once closed */
    int closed;  /* the connection's close callback ran */
    uint8_t in[2 * (GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD)];
    size_t have;
    struct gbx_awrite w;
    struct result r;
};

static struct frame fr; /* the last one received (large: one at a time) */

static void on_close(void *arg, const char *why)
{
    struct fix *t = arg;
    (void)why;
    t->closed++;
}

static void on_done(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, long err)
{
    struct fix *t = arg;
    t->r.calls++;
    t->r.err = err;
    t->r.had_h = h != NULL;
    t->r.step = t->w.step;
    if (h) {
        t->r.h = *h;
        assert_true(h->len <= sizeof(t->r.p));
        memcpy(t->r.p, p, h->len);
    }
}

/* Read what init's end has into t->in (non-blocking). */
static void fill(struct fix *t)
{
    while (t->init_fd >= 0 && t->have < sizeof(t->in)) {
        ssize_t n = read(t->init_fd, t->in + t->have, sizeof(t->in) - t->have);
        if (n <= 0)
            break;
        t->have += (size_t)n;
    }
}

/* One whole frame from t->in into fr, if there is one. */
static int take(struct fix *t)
{
    if (t->have < GBX_FRAME_HDR_SIZE)
        return 0;
    assert_int_equal(gbx_frame_decode_hdr(t->in, t->have, &fr.h), 0);
    size_t total = GBX_FRAME_HDR_SIZE + fr.h.len;
    if (t->have < total)
        return 0;
    memcpy(fr.p, t->in + GBX_FRAME_HDR_SIZE, fr.h.len);
    assert_int_equal(gbx_attrs_validate(fr.p, fr.h.len), 0);
    memmove(t->in, t->in + total, t->have - total);
    t->have -= total;
    return 1;
}

/* Run the loop until init has a frame (1, in fr) or nothing more comes for a while (0). */
static int next_frame(struct fix *t)
{
    for (int idle = 0; idle < 200; idle++) {
        if (take(t))
            return 1;
        event_base_loop(t->base, EVLOOP_NONBLOCK);
        fill(t);
        if (take(t))
            return 1;
        if (idle > 20)
            usleep(200);
    }
    return 0;
}

/* Run the loop a while, for replies to be delivered. */
static void spin(struct fix *t)
{
    for (int i = 0; i < 50; i++) {
        event_base_loop(t->base, EVLOOP_NONBLOCK);
        fill(t);
    }
}

/* Send init's reply to request id: OK with one u32 or u64 attribute (tag 0: none), or ERROR
 * with errno e. */
static void reply(struct fix *t, uint16_t type, uint32_t id, uint16_t tag, uint64_t v, int e)
{
    uint8_t buf[256];
    struct gbx_msg m;
    gbx_msg_start(&m, buf, sizeof(buf), type, id);
    if (type == GBX_MSG_ERROR) {
        gbx_msg_put_u32(&m, GBX_A_ERRNO, (uint32_t)e);
        gbx_msg_put_str(&m, GBX_A_MESSAGE, strerror(e));
    } else if (tag == GBX_A_SIZE) {
        gbx_msg_put_u64(&m, tag, v);
    } else if (tag) {
        gbx_msg_put_u32(&m, tag, (uint32_t)v);
    }
    long n = gbx_msg_finish(&m);
    assert_true(n > 0);
    for (long off = 0; off < n;) {
        ssize_t w = write(t->init_fd, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EAGAIN) {
            spin(t);
            continue;
        }
        assert_true(w > 0);
        off += w;
    }
}

static uint32_t attr_u32(uint16_t tag)
{
    uint32_t v = 0xdeadbeef;
    assert_int_equal(gbx_attrs_get_u32(fr.p, fr.h.len, tag, &v), 1);
    return v;
}

/* A connection with HELLO answered, as init does. */
static int setup(void **state)
{
    static struct fix fx;
    struct fix *t = &fx;
    memset(t, 0, sizeof(*t));
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
    t->init_fd = sv[1];
    t->base = event_base_new();
    assert_non_null(t->base);
    t->ac = gbx_aconn_new(t->base, sv[0], NULL, on_close, t);
    assert_int_equal(next_frame(t), 1);
    assert_int_equal(fr.h.type, GBX_MSG_HELLO);
    reply(t, GBX_MSG_OK, fr.h.id, GBX_A_VERSION, GBX_AGENT_VERSION, 0);
    spin(t);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct fix *t = *state;
    gbx_aconn_free(t->ac);
    if (t->init_fd >= 0)
        close(t->init_fd);
    event_base_free(t->base);
    return 0;
}

/* Start writing len bytes (from data, or from body when data is NULL) to "/f"; check the
 * WRITE init receives and return its id. */
static uint32_t open_write(struct fix *t, const uint8_t *data, struct evbuffer *body, size_t len)
{
    gbx_awrite_init(&t->w, t->ac, data, body, len, on_done, t);
    struct gbx_msg *m = gbx_aconn_begin(t->ac, GBX_MSG_WRITE);
    gbx_msg_put_str(m, GBX_A_PATH, "/f");
    gbx_awrite_open(&t->w, m, MODE, WFLAGS);
    assert_int_equal(t->r.calls, 0);
    assert_int_equal(next_frame(t), 1);
    assert_int_equal(fr.h.type, GBX_MSG_WRITE);
    char path[16];
    assert_int_equal(gbx_attrs_get_str(fr.p, fr.h.len, GBX_A_PATH, path, sizeof(path)), 1);
    assert_string_equal(path, "/f");
    assert_int_equal(attr_u32(GBX_A_MODE), MODE);
    assert_int_equal(attr_u32(GBX_A_WFLAGS), WFLAGS);
    return fr.h.id;
}

/* Receive every chunk that comes now; their ids go to ids[*n...]. Checks each against want
 * at *got and that no more than the window is unacknowledged. 1 when a WRITE_END came (in fr),
 * 0 when nothing more comes. */
static int take_chunks(struct fix *t, const uint8_t *want, size_t *got, uint32_t *ids, size_t *n)
{
    while (next_frame(t)) {
        if (fr.h.type == GBX_MSG_WRITE_END)
            return 1;
        assert_int_equal(fr.h.type, GBX_MSG_WRITE_DATA);
        assert_int_equal(attr_u32(GBX_A_HANDLE), HANDLE);
        struct gbx_attr a;
        assert_int_equal(gbx_attrs_find(fr.p, fr.h.len, GBX_A_DATA, &a), 1);
        assert_true(a.len > 0 && a.len <= GBX_FRAME_CHUNK);
        assert_memory_equal(a.data, want + *got, a.len);
        *got += a.len;
        ids[(*n)++] = fr.h.id;
        assert_true(*n <= GBX_AWRITE_WINDOW);
    }
    return 0;
}

static uint8_t *pattern(size_t len)
{
    uint8_t *d = malloc(len ? len : 1);
    assert_non_null(d);
    for (size_t i = 0; i < len; i++)
        d[i] = (uint8_t)(i * 31 + i / 4093);
    return d;
}

/* A whole write of len bytes: the window holds, every byte arrives in order, and WRITE_END
 * with commit follows the last acknowledgement; done reports WRITE_END's OK. */
static void whole_write(struct fix *t, size_t len, int from_body)
{
    uint8_t *want = pattern(len);
    struct evbuffer *body = NULL;
    if (from_body) {
        body = evbuffer_new();
        assert_non_null(body);
        /* in pieces, as a request body arrives, so chunks span them */
        for (size_t off = 0; off < len; off += 10000)
            evbuffer_add(body, want + off, len - off < 10000 ? len - off : 10000);
    }
    reply(t, GBX_MSG_OK, open_write(t, from_body ? NULL : want, body, len), GBX_A_HANDLE, HANDLE,
          0);
    size_t got = 0, n = 0, round = 0;
    uint32_t ids[GBX_AWRITE_WINDOW];
    for (;;) {
        int ended = take_chunks(t, want, &got, ids, &n);
        assert_int_equal(t->r.calls, 0);
        if (ended) {
            /* WRITE_END only once every chunk is acknowledged */
            assert_int_equal(n, 0);
            break;
        }
        assert_true(n > 0); /* else the write has stalled */
        /* while bytes remain to be sent, the window is kept full */
        if (got < len)
            assert_int_equal(n, GBX_AWRITE_WINDOW);
        /* acknowledge one, or two at once every other round */
        size_t k = round++ % 2 && n > 1 ? 2 : 1;
        for (size_t i = 0; i < k; i++)
            reply(t, GBX_MSG_OK, ids[i], 0, 0, 0);
        n -= k;
        for (size_t i = 0; i < n; i++)
            ids[i] = ids[i + k];
    }
    assert_int_equal(got, len);
    assert_int_equal(t->w.sent, len);
    if (body) {
        assert_int_equal(evbuffer_get_length(body), 0); /* freed as it went */
        evbuffer_free(body);
    }
    assert_int_equal(attr_u32(GBX_A_HANDLE), HANDLE);
    assert_int_equal(attr_u32(GBX_A_COMMIT), 1);
    assert_int_equal(t->w.inflight, 0);
    assert_int_equal(t->r.calls, 0);
    reply(t, GBX_MSG_OK, fr.h.id, GBX_A_SIZE, len, 0);
    spin(t);
    assert_int_equal(t->r.calls, 1);
    assert_int_equal(t->r.err, 0);
    assert_true(t->r.had_h);
    assert_int_equal(t->r.h.type, GBX_MSG_OK);
    assert_int_equal(t->r.step, GBX_AWRITE_END);
    uint64_t size = 0;
    assert_int_equal(gbx_attrs_get_u64(t->r.p, t->r.h.len, GBX_A_SIZE, &size), 1);
    assert_int_equal(size, len);
    assert_int_equal(next_frame(t), 0); /* nothing after */
    assert_int_equal(t->closed, 0);
    free(want);
}

static void test_window_order_end(void **state)
{
    whole_write(*state, 10 * GBX_FRAME_CHUNK + 123, 0);
}

static void test_from_body(void **state)
{
    whole_write(*state, 6 * GBX_FRAME_CHUNK - 1, 1);
}

/* Fewer bytes than the window, and none: WRITE_END as soon as they are acknowledged. */
static void test_small_and_empty(void **state)
{
    struct fix *t = *state;
    whole_write(t, 1000, 0);
    memset(&t->r, 0, sizeof(t->r));
    whole_write(t, 0, 0); /* the same struct, set up again */
}

/* An ERROR to one chunk: reported once, late replies to the others ignored, nothing sent. */
static void test_error_on_data(void **state)
{
    struct fix *t = *state;
    size_t len = 10 * GBX_FRAME_CHUNK, got = 0, n = 0;
    uint8_t *want = pattern(len);
    reply(t, GBX_MSG_OK, open_write(t, want, NULL, len), GBX_A_HANDLE, HANDLE, 0);
    uint32_t ids[GBX_AWRITE_WINDOW];
    assert_int_equal(take_chunks(t, want, &got, ids, &n), 0);
    assert_int_equal(n, GBX_AWRITE_WINDOW);
    reply(t, GBX_MSG_ERROR, ids[1], 0, 0, ENOSPC);
    reply(t, GBX_MSG_OK, ids[0], 0, 0, 0);
    reply(t, GBX_MSG_ERROR, ids[2], 0, 0, EIO);
    reply(t, GBX_MSG_OK, ids[3], 0, 0, 0);
    spin(t);
    assert_int_equal(t->r.calls, 1);
    assert_int_equal(t->r.err, 0);
    assert_true(t->r.had_h);
    assert_int_equal(t->r.h.type, GBX_MSG_ERROR);
    assert_int_equal(t->r.step, GBX_AWRITE_DATA);
    char msg[128];
    assert_int_equal(gbx_aconn_error_text(t->r.p, t->r.h.len, msg, sizeof(msg)), ENOSPC);
    assert_int_equal(next_frame(t), 0); /* no more chunks, no WRITE_END */
    assert_int_equal(t->w.sent, got);
    assert_int_equal(t->closed, 0);
    free(want);
}

/* An ERROR to WRITE itself: reported with the step, and no chunk is sent. */
static void test_error_on_open(void **state)
{
    struct fix *t = *state;
    uint8_t data[100] = {1};
    reply(t, GBX_MSG_ERROR, open_write(t, data, NULL, sizeof(data)), 0, 0, EISDIR);
    spin(t);
    assert_int_equal(t->r.calls, 1);
    assert_int_equal(t->r.err, 0);
    assert_int_equal(t->r.h.type, GBX_MSG_ERROR);
    assert_int_equal(t->r.step, GBX_AWRITE_OPEN);
    char msg[128];
    assert_int_equal(gbx_aconn_error_text(t->r.p, t->r.h.len, msg, sizeof(msg)), EISDIR);
    assert_int_equal(next_frame(t), 0);
}

/* WRITE's OK without a handle: -EBADMSG, with the reply, and nothing sent. */
static void test_no_handle(void **state)
{
    struct fix *t = *state;
    uint8_t data[100] = {1};
    reply(t, GBX_MSG_OK, open_write(t, data, NULL, sizeof(data)), 0, 0, 0);
    spin(t);
    assert_int_equal(t->r.calls, 1);
    assert_int_equal(t->r.err, -EBADMSG);
    assert_true(t->r.had_h);
    assert_int_equal(t->r.h.type, GBX_MSG_OK);
    assert_int_equal(next_frame(t), 0);
}

/* init's end closed with chunks in flight: reported once, h NULL. */
static void test_closed_socket(void **state)
{
    struct fix *t = *state;
    size_t len = 10 * GBX_FRAME_CHUNK, got = 0, n = 0;
    uint8_t *want = pattern(len);
    reply(t, GBX_MSG_OK, open_write(t, want, NULL, len), GBX_A_HANDLE, HANDLE, 0);
    uint32_t ids[GBX_AWRITE_WINDOW];
    assert_int_equal(take_chunks(t, want, &got, ids, &n), 0);
    assert_int_equal(n, GBX_AWRITE_WINDOW);
    reply(t, GBX_MSG_OK, ids[0], 0, 0, 0); /* one more chunk goes out into a closing socket */
    close(t->init_fd);
    t->init_fd = -1;
    spin(t);
    assert_int_equal(t->r.calls, 1);
    assert_int_equal(t->r.err, 0);
    assert_false(t->r.had_h);
    assert_int_equal(t->r.step, GBX_AWRITE_DATA);
    assert_int_equal(t->closed, 1);
    assert_true(gbx_aconn_lost(t->ac));
    free(want);
}

/* init's end closed before WRITE's reply: reported at the open step. */
static void test_closed_before_handle(void **state)
{
    struct fix *t = *state;
    uint8_t data[100] = {1};
    (void)open_write(t, data, NULL, sizeof(data));
    close(t->init_fd);
    t->init_fd = -1;
    spin(t);
    assert_int_equal(t->r.calls, 1);
    assert_int_equal(t->r.err, 0);
    assert_false(t->r.had_h);
    assert_int_equal(t->r.step, GBX_AWRITE_OPEN);
}

/* On a connection already lost, WRITE cannot be sent: -ENOTCONN, before open returns. */
static void test_lost_before_open(void **state)
{
    struct fix *t = *state;
    close(t->init_fd);
    t->init_fd = -1;
    spin(t);
    assert_int_equal(t->closed, 1);
    uint8_t data[100] = {1};
    gbx_awrite_init(&t->w, t->ac, data, NULL, sizeof(data), on_done, t);
    gbx_awrite_open(&t->w, gbx_aconn_begin(t->ac, GBX_MSG_WRITE), MODE, WFLAGS);
    assert_int_equal(t->r.calls, 1);
    assert_int_equal(t->r.err, -ENOTCONN);
    assert_false(t->r.had_h);
    spin(t);
    assert_int_equal(t->r.calls, 1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* writes into a closed socket fail with EPIPE instead */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_window_order_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_from_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_and_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_on_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_on_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closed_socket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closed_before_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_before_open, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
