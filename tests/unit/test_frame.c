/* SPDX-License-Identifier: MIT */
/* Unit tests for the agent frame codec (src/agent/frame.c): header encode/decode, the
 * message builder (nesting, sticky overflow), the attribute iterator and typed getters. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent/frame.h"

static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Write a raw attribute header (tag, reserved, len) at p. */
static void raw_attr(uint8_t *p, uint16_t tag, uint16_t reserved, uint32_t len)
{
    wr16(p, tag);
    wr16(p + 2, reserved);
    wr32(p + 4, len);
}

/* Finish m, check the result and the header, and return the payload length. */
static size_t finish_ok(struct gbx_msg *m, uint16_t type, uint32_t id)
{
    long n = gbx_msg_finish(m);
    assert_true(n >= GBX_FRAME_HDR_SIZE);
    assert_int_equal((size_t)n, m->len);
    struct gbx_frame_hdr h;
    assert_int_equal(gbx_frame_decode_hdr(m->buf, (size_t)n, &h), 0);
    assert_int_equal(h.len, (size_t)n - GBX_FRAME_HDR_SIZE);
    assert_int_equal(h.type, type);
    assert_int_equal(h.id, id);
    assert_int_equal(h.flags, 0);
    return h.len;
}

/* ---- header ------------------------------------------------------------------------- */

static void test_hdr_roundtrip(void **state)
{
    uint8_t b[GBX_FRAME_HDR_SIZE];
    struct gbx_frame_hdr h;
    (void)state;

    gbx_frame_encode_hdr(b, 0xbeef, 0x12345678, 0x01020304 & 0x3ffff);
    /* wire layout: u32 len | 'G' | version | u16 type | u32 id | u32 flags, little-endian */
    static const uint8_t want[GBX_FRAME_HDR_SIZE] = {
        0x04, 0x03, 0x02, 0x00, 'G', GBX_AGENT_VERSION, 0xef, 0xbe, 0x78, 0x56, 0x34,
        0x12, 0,    0,    0,    0,
    };
    assert_memory_equal(b, want, sizeof(want));
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), 0);
    assert_int_equal(h.len, 0x20304);
    assert_int_equal(h.type, 0xbeef);
    assert_int_equal(h.id, 0x12345678);
    assert_int_equal(h.flags, 0);

    /* extremes */
    gbx_frame_encode_hdr(b, 0xffff, 0xffffffff, GBX_FRAME_MAX_PAYLOAD);
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), 0);
    assert_int_equal(h.len, GBX_FRAME_MAX_PAYLOAD);
    assert_int_equal(h.type, 0xffff);
    assert_int_equal(h.id, 0xffffffff);
    gbx_frame_encode_hdr(b, 0, 0, 0);
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), 0);
    assert_int_equal(h.len, 0);
    assert_int_equal(h.type, 0);
    assert_int_equal(h.id, 0);

    /* flags are decoded as sent, even though the encoder always writes 0 */
    gbx_frame_encode_hdr(b, GBX_MSG_PING, 7, 0);
    wr32(b + 12, 0xa5a5a5a5);
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), 0);
    assert_int_equal(h.flags, 0xa5a5a5a5);

    /* extra bytes after the header are ignored */
    uint8_t big[64];
    memset(big, 0xee, sizeof(big));
    gbx_frame_encode_hdr(big, GBX_MSG_OK, 9, 48);
    assert_int_equal(gbx_frame_decode_hdr(big, sizeof(big), &h), 0);
    assert_int_equal(h.len, 48);
    assert_int_equal(h.id, 9);
}

static void test_hdr_decode_errors(void **state)
{
    uint8_t b[GBX_FRAME_HDR_SIZE];
    struct gbx_frame_hdr h;
    (void)state;

    gbx_frame_encode_hdr(b, GBX_MSG_HELLO, 1, 10);
    for (size_t n = 0; n < GBX_FRAME_HDR_SIZE; n++)
        assert_int_equal(gbx_frame_decode_hdr(b, n, &h), -EAGAIN);
    /* short input wins even over a bad magic: nothing can be judged yet */
    uint8_t junk[GBX_FRAME_HDR_SIZE] = {0};
    assert_int_equal(gbx_frame_decode_hdr(junk, GBX_FRAME_HDR_SIZE - 1, &h), -EAGAIN);
    assert_int_equal(gbx_frame_decode_hdr(NULL, 0, &h), -EAGAIN);

    /* bad magic */
    memset(&h, 0x5a, sizeof(h));
    b[4] = 'g';
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), -EPROTO);
    b[4] = 0;
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), -EPROTO);
    b[4] = GBX_FRAME_MAGIC;
    /* bad version */
    b[5] = GBX_AGENT_VERSION + 1;
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), -EPROTO);
    b[5] = 0;
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), -EPROTO);
    b[5] = GBX_AGENT_VERSION;
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), 0);

    /* payload length: the limit is accepted, one more is not */
    wr32(b, GBX_FRAME_MAX_PAYLOAD);
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), 0);
    assert_int_equal(h.len, GBX_FRAME_MAX_PAYLOAD);
    memset(&h, 0x5a, sizeof(h));
    wr32(b, GBX_FRAME_MAX_PAYLOAD + 1);
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), -EMSGSIZE);
    wr32(b, 0xffffffffu);
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), -EMSGSIZE);
    wr32(b, 0x80000000u);
    assert_int_equal(gbx_frame_decode_hdr(b, sizeof(b), &h), -EMSGSIZE);
    /* the output is untouched on error */
    struct gbx_frame_hdr untouched;
    memset(&untouched, 0x5a, sizeof(untouched));
    assert_memory_equal(&h, &untouched, sizeof(h));
}

/* ---- builder round trips ------------------------------------------------------------ */

static void test_msg_empty(void **state)
{
    uint8_t buf[64];
    struct gbx_msg m;
    (void)state;
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_PING, 42);
    assert_int_equal(m.len, GBX_FRAME_HDR_SIZE);
    assert_int_equal(finish_ok(&m, GBX_MSG_PING, 42), 0);
    assert_int_equal(gbx_msg_finish(&m), GBX_FRAME_HDR_SIZE); /* finish is idempotent */

    /* a buffer of exactly one header holds an empty message */
    uint8_t hdr[GBX_FRAME_HDR_SIZE];
    gbx_msg_start(&m, hdr, sizeof(hdr), GBX_MSG_OK, 1);
    assert_int_equal(gbx_msg_finish(&m), GBX_FRAME_HDR_SIZE);
}

static void test_msg_roundtrip_all(void **state)
{
    uint8_t buf[512];
    struct gbx_msg m;
    static const uint8_t raw[] = {0x00, 0x01, 0xff, 0x00, 0x7f};
    (void)state;

    memset(buf, 0xcc, sizeof(buf));
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_SPAWN, 0xabcdef01);
    gbx_msg_put_u32(&m, GBX_A_VERSION, 0xdeadbeef);
    gbx_msg_put_u64(&m, GBX_A_OFFSET, 0x0123456789abcdefull);
    gbx_msg_put_str(&m, GBX_A_ARGV, "echo");
    gbx_msg_put_str(&m, GBX_A_ARGV, "hello world");
    gbx_msg_put_str(&m, GBX_A_CWD, "");
    gbx_msg_put(&m, GBX_A_DATA, raw, sizeof(raw));
    gbx_msg_put(&m, GBX_A_DATA, NULL, 0);
    uint8_t *r = gbx_msg_reserve(&m, GBX_A_DATA, 3);
    assert_non_null(r);
    memcpy(r, "xyz", 3);
    gbx_msg_put_u32(&m, 0xffff, 0);
    gbx_msg_put_u64(&m, GBX_A_SIZE, UINT64_MAX);
    size_t plen = finish_ok(&m, GBX_MSG_SPAWN, 0xabcdef01);
    size_t want = 10 * GBX_ATTR_HDR_SIZE + 4 + 8 + 4 + 11 + 0 + 5 + 0 + 3 + 4 + 8;
    assert_int_equal(plen, want);

    /* exact bytes of the first attribute: tag, reserved 0, len, LE value */
    const uint8_t *p = buf + GBX_FRAME_HDR_SIZE;
    static const uint8_t a0[] = {GBX_A_VERSION, 0, 0, 0, 4, 0, 0, 0, 0xef, 0xbe, 0xad, 0xde};
    assert_memory_equal(p, a0, sizeof(a0));
    /* nothing was written past the end */
    assert_int_equal(buf[GBX_FRAME_HDR_SIZE + plen], 0xcc);

    assert_int_equal(gbx_attrs_validate(p, plen), 0);
    struct gbx_attr_iter it;
    struct gbx_attr a;
    uint32_t u32;
    uint64_t u64;
    char s[32];
    gbx_attr_iter_init(&it, p, plen);

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_VERSION);
    assert_int_equal(gbx_attr_u32(&a, &u32), 0);
    assert_int_equal(u32, 0xdeadbeef);

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_OFFSET);
    assert_int_equal(gbx_attr_u64(&a, &u64), 0);
    assert_int_equal(u64, 0x0123456789abcdefull);

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_ARGV);
    assert_int_equal(a.len, 4);
    assert_int_equal(gbx_attr_str(&a, s, sizeof(s)), 0);
    assert_string_equal(s, "echo");

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_ARGV);
    assert_int_equal(gbx_attr_str(&a, s, sizeof(s)), 0);
    assert_string_equal(s, "hello world");

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_CWD);
    assert_int_equal(a.len, 0);
    s[0] = 'x';
    assert_int_equal(gbx_attr_str(&a, s, sizeof(s)), 0);
    assert_string_equal(s, "");

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_DATA);
    assert_int_equal(a.len, sizeof(raw));
    assert_memory_equal(a.data, raw, sizeof(raw));
    /* raw bytes with NUL are not a string */
    assert_int_equal(gbx_attr_str(&a, s, sizeof(s)), -EBADMSG);

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_DATA);
    assert_int_equal(a.len, 0);

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_DATA);
    assert_int_equal(a.len, 3);
    assert_memory_equal(a.data, "xyz", 3);

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, 0xffff);
    assert_int_equal(gbx_attr_u32(&a, &u32), 0);
    assert_int_equal(u32, 0);

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_SIZE);
    assert_int_equal(gbx_attr_u64(&a, &u64), 0);
    assert_int_equal(u64, UINT64_MAX);

    assert_int_equal(gbx_attr_next(&it, &a), 0);
    assert_int_equal(gbx_attr_next(&it, &a), 0); /* the end stays the end */
}

static void test_msg_reserve(void **state)
{
    uint8_t buf[128];
    struct gbx_msg m;
    (void)state;
    gbx_msg_start(&m, buf, sizeof(buf), GBX_EV_STDOUT, 3);
    uint8_t *p0 = gbx_msg_reserve(&m, GBX_A_DATA, 0);
    assert_non_null(p0);
    assert_ptr_equal(p0, buf + GBX_FRAME_HDR_SIZE + GBX_ATTR_HDR_SIZE);
    uint8_t *p = gbx_msg_reserve(&m, GBX_A_DATA, 10);
    assert_ptr_equal(p, buf + GBX_FRAME_HDR_SIZE + 2 * GBX_ATTR_HDR_SIZE);
    for (int i = 0; i < 10; i++)
        p[i] = (uint8_t)(i * 3);
    assert_int_equal(m.len, GBX_FRAME_HDR_SIZE + 2 * GBX_ATTR_HDR_SIZE + 10);
    size_t plen = finish_ok(&m, GBX_EV_STDOUT, 3);

    struct gbx_attr a;
    struct gbx_attr_iter it;
    gbx_attr_iter_init(&it, buf + GBX_FRAME_HDR_SIZE, plen);
    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.len, 0);
    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.len, 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(a.data[i], i * 3);
    assert_int_equal(gbx_attr_next(&it, &a), 0);
}

static void test_msg_nested(void **state)
{
    uint8_t buf[512];
    struct gbx_msg m;
    (void)state;
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_OK, 5);
    gbx_msg_put_u32(&m, GBX_A_COUNT, 2);
    gbx_msg_nest_begin(&m, GBX_A_PROCINFO);
    gbx_msg_put_u32(&m, GBX_A_PROC, 1);
    gbx_msg_put_str(&m, GBX_A_ARGV, "sh");
    gbx_msg_nest_begin(&m, GBX_A_ENTRY);
    gbx_msg_put_str(&m, GBX_A_NAME, "inner");
    gbx_msg_nest_end(&m);
    gbx_msg_nest_begin(&m, GBX_A_ENTRY); /* empty nest */
    gbx_msg_nest_end(&m);
    gbx_msg_nest_end(&m);
    gbx_msg_nest_begin(&m, GBX_A_PROCINFO);
    gbx_msg_put_u32(&m, GBX_A_PROC, 2);
    gbx_msg_nest_end(&m);
    assert_int_equal(m.depth, 0);
    size_t plen = finish_ok(&m, GBX_MSG_OK, 5);
    const uint8_t *pl = buf + GBX_FRAME_HDR_SIZE;

    struct gbx_attr a, b, c;
    struct gbx_attr_iter it, it2, it3;
    uint32_t v;
    char s[16];
    gbx_attr_iter_init(&it, pl, plen);
    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_COUNT);

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_PROCINFO);
    /* PROC(4) + ARGV "sh"(2) + ENTRY{NAME "inner"(5)} + ENTRY{} */
    assert_int_equal(a.len, 8 + 4 + 8 + 2 + 8 + (8 + 5) + 8);
    assert_int_equal(gbx_attrs_validate(a.data, a.len), 0);
    assert_int_equal(gbx_attrs_get_u32(a.data, a.len, GBX_A_PROC, &v), 1);
    assert_int_equal(v, 1);
    gbx_attr_iter_init(&it2, a.data, a.len);
    assert_int_equal(gbx_attr_next(&it2, &b), 1);
    assert_int_equal(b.tag, GBX_A_PROC);
    assert_int_equal(gbx_attr_next(&it2, &b), 1);
    assert_int_equal(b.tag, GBX_A_ARGV);
    assert_int_equal(gbx_attr_next(&it2, &b), 1);
    assert_int_equal(b.tag, GBX_A_ENTRY);
    assert_int_equal(b.len, 8 + 5);
    gbx_attr_iter_init(&it3, b.data, b.len);
    assert_int_equal(gbx_attr_next(&it3, &c), 1);
    assert_int_equal(c.tag, GBX_A_NAME);
    assert_int_equal(gbx_attr_str(&c, s, sizeof(s)), 0);
    assert_string_equal(s, "inner");
    assert_int_equal(gbx_attr_next(&it3, &c), 0);
    assert_int_equal(gbx_attr_next(&it2, &b), 1);
    assert_int_equal(b.tag, GBX_A_ENTRY);
    assert_int_equal(b.len, 0);
    assert_int_equal(gbx_attr_next(&it2, &b), 0);

    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_PROCINFO);
    assert_int_equal(a.len, 8 + 4);
    assert_int_equal(gbx_attrs_get_u32(a.data, a.len, GBX_A_PROC, &v), 1);
    assert_int_equal(v, 2);
    assert_int_equal(gbx_attr_next(&it, &a), 0);
}

static void test_msg_nest_depth(void **state)
{
    uint8_t buf[512];
    struct gbx_msg m;
    (void)state;

    /* GBX_MSG_MAX_NEST levels are fine */
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_OK, 1);
    for (int i = 0; i < GBX_MSG_MAX_NEST; i++)
        gbx_msg_nest_begin(&m, (uint16_t)(100 + i));
    gbx_msg_put_u32(&m, GBX_A_PID, 77);
    for (int i = 0; i < GBX_MSG_MAX_NEST; i++)
        gbx_msg_nest_end(&m);
    size_t plen = finish_ok(&m, GBX_MSG_OK, 1);
    assert_int_equal(plen, GBX_MSG_MAX_NEST * GBX_ATTR_HDR_SIZE + GBX_ATTR_HDR_SIZE + 4);
    const uint8_t *p = buf + GBX_FRAME_HDR_SIZE;
    size_t len = plen;
    for (int i = 0; i < GBX_MSG_MAX_NEST; i++) {
        struct gbx_attr a;
        struct gbx_attr_iter it;
        gbx_attr_iter_init(&it, p, len);
        assert_int_equal(gbx_attr_next(&it, &a), 1);
        assert_int_equal(a.tag, 100 + i);
        assert_int_equal(a.len, len - GBX_ATTR_HDR_SIZE);
        assert_int_equal(gbx_attr_next(&it, &a), 0);
        gbx_attr_iter_init(&it, p, len);
        assert_int_equal(gbx_attr_next(&it, &a), 1);
        p = a.data;
        len = a.len;
    }
    uint32_t v;
    assert_int_equal(gbx_attrs_get_u32(p, len, GBX_A_PID, &v), 1);
    assert_int_equal(v, 77);

    /* one more level overflows, stickily */
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_OK, 1);
    for (int i = 0; i <= GBX_MSG_MAX_NEST; i++)
        gbx_msg_nest_begin(&m, 100);
    assert_true(m.overflow);
    for (int i = 0; i <= GBX_MSG_MAX_NEST; i++)
        gbx_msg_nest_end(&m);
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);
}

static void test_msg_nest_unbalanced(void **state)
{
    uint8_t buf[128];
    struct gbx_msg m;
    (void)state;

    /* nest_end without a begin */
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_OK, 1);
    gbx_msg_put_u32(&m, GBX_A_PID, 1);
    gbx_msg_nest_end(&m);
    assert_true(m.overflow);
    assert_int_equal(m.depth, 0);
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);

    /* one end too many */
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_OK, 1);
    gbx_msg_nest_begin(&m, GBX_A_ENTRY);
    gbx_msg_nest_end(&m);
    gbx_msg_nest_end(&m);
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);

    /* a nest left open */
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_OK, 1);
    gbx_msg_nest_begin(&m, GBX_A_ENTRY);
    gbx_msg_put_u32(&m, GBX_A_PID, 1);
    assert_int_equal(gbx_msg_finish(&m), -EINVAL);
    gbx_msg_nest_begin(&m, GBX_A_ENTRY);
    gbx_msg_nest_end(&m);
    assert_int_equal(gbx_msg_finish(&m), -EINVAL);
    gbx_msg_nest_end(&m);
    assert_int_equal(gbx_msg_finish(&m), 16 + 8 + 8 + 4 + 8);
}

/* ---- overflow ----------------------------------------------------------------------- */

static void test_msg_buffer_too_small(void **state)
{
    uint8_t buf[64];
    struct gbx_msg m;
    (void)state;

    /* no room for the header */
    memset(buf, 0xcc, sizeof(buf));
    gbx_msg_start(&m, buf, GBX_FRAME_HDR_SIZE - 1, GBX_MSG_OK, 1);
    assert_true(m.overflow);
    gbx_msg_put_u32(&m, GBX_A_PID, 1);
    assert_int_equal(gbx_msg_room(&m), 0);
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);
    assert_int_equal(buf[0], 0xcc); /* nothing written */
    gbx_msg_start(&m, NULL, 0, GBX_MSG_OK, 1);
    assert_null(gbx_msg_reserve(&m, GBX_A_DATA, 0));
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);

    /* exact fit: header + one u32 attribute = 28 bytes */
    memset(buf, 0xcc, sizeof(buf));
    gbx_msg_start(&m, buf, 28, GBX_MSG_OK, 1);
    gbx_msg_put_u32(&m, GBX_A_PID, 1);
    assert_false(m.overflow);
    assert_int_equal(gbx_msg_room(&m), 0);
    assert_int_equal(gbx_msg_finish(&m), 28);
    assert_int_equal(buf[28], 0xcc);

    /* one byte short */
    memset(buf, 0xcc, sizeof(buf));
    gbx_msg_start(&m, buf, 27, GBX_MSG_OK, 1);
    gbx_msg_put_u32(&m, GBX_A_PID, 1);
    assert_true(m.overflow);
    assert_int_equal(m.len, GBX_FRAME_HDR_SIZE);
    for (size_t i = GBX_FRAME_HDR_SIZE; i < sizeof(buf); i++)
        assert_int_equal(buf[i], 0xcc);
    /* sticky: a later attribute that would fit is refused too */
    gbx_msg_put(&m, GBX_A_DATA, NULL, 0);
    assert_null(gbx_msg_reserve(&m, GBX_A_DATA, 0));
    gbx_msg_nest_begin(&m, GBX_A_ENTRY);
    assert_int_equal(m.len, GBX_FRAME_HDR_SIZE);
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);

    /* strings and nests overflow the same way */
    gbx_msg_start(&m, buf, 32, GBX_MSG_OK, 1);
    gbx_msg_put_str(&m, GBX_A_PATH, "/a/path/that/is/too/long");
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);
    gbx_msg_start(&m, buf, 32, GBX_MSG_OK, 1);
    gbx_msg_nest_begin(&m, GBX_A_ENTRY);
    gbx_msg_put_u64(&m, GBX_A_SIZE, 1);
    gbx_msg_nest_end(&m);
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);
}

static void test_msg_payload_limit(void **state)
{
    static uint8_t buf[GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD + 4096];
    size_t cap = sizeof(buf);
    struct gbx_msg m;
    (void)state;

    /* a payload of exactly the limit */
    gbx_msg_start(&m, buf, cap, GBX_EV_DATA, 1);
    assert_int_equal(gbx_msg_room(&m), GBX_FRAME_MAX_PAYLOAD - GBX_ATTR_HDR_SIZE);
    uint8_t *p = gbx_msg_reserve(&m, GBX_A_DATA, GBX_FRAME_MAX_PAYLOAD - GBX_ATTR_HDR_SIZE);
    assert_non_null(p);
    memset(p, 'x', GBX_FRAME_MAX_PAYLOAD - GBX_ATTR_HDR_SIZE);
    assert_int_equal(gbx_msg_room(&m), 0);
    assert_int_equal(gbx_msg_finish(&m), GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD);
    struct gbx_frame_hdr h;
    assert_int_equal(gbx_frame_decode_hdr(buf, cap, &h), 0);
    assert_int_equal(h.len, GBX_FRAME_MAX_PAYLOAD);

    /* one byte over, although the buffer has room */
    gbx_msg_start(&m, buf, cap, GBX_EV_DATA, 1);
    assert_null(gbx_msg_reserve(&m, GBX_A_DATA, GBX_FRAME_MAX_PAYLOAD - GBX_ATTR_HDR_SIZE + 1));
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);

    /* reaching the limit in several steps */
    gbx_msg_start(&m, buf, cap, GBX_EV_DATA, 1);
    size_t used = 0;
    while (used + GBX_ATTR_HDR_SIZE + 1000 <= GBX_FRAME_MAX_PAYLOAD) {
        gbx_msg_reserve(&m, GBX_A_DATA, 1000);
        used += GBX_ATTR_HDR_SIZE + 1000;
    }
    assert_false(m.overflow);
    assert_int_equal(gbx_msg_room(&m), GBX_FRAME_MAX_PAYLOAD - used - GBX_ATTR_HDR_SIZE);
    gbx_msg_reserve(&m, GBX_A_DATA, 1000);
    assert_true(m.overflow);
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);

    /* absurd lengths must not wrap around the bounds checks */
    gbx_msg_start(&m, buf, cap, GBX_EV_DATA, 1);
    assert_null(gbx_msg_reserve(&m, GBX_A_DATA, SIZE_MAX));
    assert_true(m.overflow);
    assert_int_equal(m.len, GBX_FRAME_HDR_SIZE);
    for (size_t k = 0; k < GBX_ATTR_HDR_SIZE + 1; k++) {
        gbx_msg_start(&m, buf, cap, GBX_EV_DATA, 1);
        assert_null(gbx_msg_reserve(&m, GBX_A_DATA, SIZE_MAX - k));
        assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);
    }
    gbx_msg_start(&m, buf, cap, GBX_EV_DATA, 1);
    assert_null(gbx_msg_reserve(&m, GBX_A_DATA, (size_t)UINT32_MAX + 1));
    assert_int_equal(gbx_msg_finish(&m), -EMSGSIZE);
}

static void test_msg_room(void **state)
{
    uint8_t buf[100];
    struct gbx_msg m;
    (void)state;
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_OK, 1);
    assert_int_equal(gbx_msg_room(&m), 100 - 16 - 8);
    gbx_msg_put_u32(&m, GBX_A_PID, 1);
    size_t room = gbx_msg_room(&m);
    assert_int_equal(room, 100 - 16 - 12 - 8);
    /* exactly room fits */
    assert_non_null(gbx_msg_reserve(&m, GBX_A_DATA, room));
    assert_int_equal(m.len, 100);
    assert_int_equal(gbx_msg_room(&m), 0);
    assert_int_equal(gbx_msg_finish(&m), 100);

    /* room + 1 does not */
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_OK, 1);
    room = gbx_msg_room(&m);
    assert_null(gbx_msg_reserve(&m, GBX_A_DATA, room + 1));
    assert_int_equal(gbx_msg_room(&m), 0);

    /* with less than one attribute header left there is no room */
    gbx_msg_start(&m, buf, GBX_FRAME_HDR_SIZE + GBX_ATTR_HDR_SIZE - 1, GBX_MSG_OK, 1);
    assert_int_equal(gbx_msg_room(&m), 0);
}

/* ---- iterator over malformed input -------------------------------------------------- */

static void test_iter_malformed(void **state)
{
    uint8_t b[64] = {0};
    struct gbx_attr_iter it;
    struct gbx_attr a;
    (void)state;

    /* empty and NULL payloads end immediately */
    gbx_attr_iter_init(&it, b, 0);
    assert_int_equal(gbx_attr_next(&it, &a), 0);
    gbx_attr_iter_init(&it, NULL, 100);
    assert_int_equal(gbx_attr_next(&it, &a), 0);
    assert_int_equal(gbx_attrs_validate(NULL, 5), 0);

    /* a short attribute header */
    raw_attr(b, GBX_A_PID, 0, 0);
    for (size_t n = 1; n < GBX_ATTR_HDR_SIZE; n++) {
        gbx_attr_iter_init(&it, b, n);
        assert_int_equal(gbx_attr_next(&it, &a), -EBADMSG);
        assert_int_equal(gbx_attrs_validate(b, n), -EBADMSG);
    }
    gbx_attr_iter_init(&it, b, GBX_ATTR_HDR_SIZE);
    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.len, 0);

    /* a length past the end: by one byte, and a huge one that would wrap */
    raw_attr(b, GBX_A_PID, 0, 4);
    gbx_attr_iter_init(&it, b, GBX_ATTR_HDR_SIZE + 3);
    assert_int_equal(gbx_attr_next(&it, &a), -EBADMSG);
    gbx_attr_iter_init(&it, b, GBX_ATTR_HDR_SIZE + 4);
    assert_int_equal(gbx_attr_next(&it, &a), 1);
    raw_attr(b, GBX_A_PID, 0, 0xffffffffu);
    gbx_attr_iter_init(&it, b, sizeof(b));
    assert_int_equal(gbx_attr_next(&it, &a), -EBADMSG);
    raw_attr(b, GBX_A_PID, 0, 0xfffffff8u);
    assert_int_equal(gbx_attrs_validate(b, sizeof(b)), -EBADMSG);

    /* a nonzero reserved field */
    for (unsigned r = 1; r <= 0x8000; r <<= 1) {
        raw_attr(b, GBX_A_PID, (uint16_t)r, 0);
        gbx_attr_iter_init(&it, b, GBX_ATTR_HDR_SIZE);
        assert_int_equal(gbx_attr_next(&it, &a), -EBADMSG);
    }

    /* a good attribute followed by garbage: the first comes out, then the error, which
     * repeats (the iterator does not move past a bad attribute) */
    raw_attr(b, GBX_A_PID, 0, 4);
    wr32(b + 8, 1234);
    raw_attr(b + 12, GBX_A_PROC, 0, 100);
    gbx_attr_iter_init(&it, b, 12 + 8 + 4);
    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(a.tag, GBX_A_PID);
    assert_int_equal(gbx_attr_next(&it, &a), -EBADMSG);
    assert_int_equal(gbx_attr_next(&it, &a), -EBADMSG);
    assert_int_equal(gbx_attrs_validate(b, 12 + 8 + 4), -EBADMSG);
    /* trailing bytes shorter than a header after a good attribute */
    assert_int_equal(gbx_attrs_validate(b, 12 + 3), -EBADMSG);
    assert_int_equal(gbx_attrs_validate(b, 12), 0);

    /* a nested attribute whose inner sequence is malformed: the outer one is fine */
    raw_attr(b, GBX_A_ENTRY, 0, 10);
    raw_attr(b + 8, GBX_A_NAME, 0, 5); /* claims 5, only 2 inside */
    assert_int_equal(gbx_attrs_validate(b, 18), 0);
    gbx_attr_iter_init(&it, b, 18);
    assert_int_equal(gbx_attr_next(&it, &a), 1);
    assert_int_equal(gbx_attrs_validate(a.data, a.len), -EBADMSG);
}

/* ---- typed getters ------------------------------------------------------------------ */

static void test_typed_getters(void **state)
{
    uint8_t d[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    struct gbx_attr a = {.tag = 1, .data = d};
    uint32_t u32 = 77;
    uint64_t u64 = 77;
    char s[8];
    (void)state;

    for (uint32_t len = 0; len <= 9; len++) {
        a.len = len;
        if (len != 4)
            assert_int_equal(gbx_attr_u32(&a, &u32), -EBADMSG);
        if (len != 8)
            assert_int_equal(gbx_attr_u64(&a, &u64), -EBADMSG);
    }
    assert_int_equal(u32, 77);
    assert_int_equal(u64, 77);
    a.len = 4;
    assert_int_equal(gbx_attr_u32(&a, &u32), 0);
    assert_int_equal(u32, 0x04030201);
    a.len = 8;
    assert_int_equal(gbx_attr_u64(&a, &u64), 0);
    assert_int_equal(u64, 0x0807060504030201ull);

    /* strings */
    memcpy(d, "abcdefg", 7);
    a.len = 7; /* fills s exactly, with the terminator */
    memset(s, 'z', sizeof(s));
    assert_int_equal(gbx_attr_str(&a, s, sizeof(s)), 0);
    assert_string_equal(s, "abcdefg");
    a.len = 8;
    d[7] = 'h';
    assert_int_equal(gbx_attr_str(&a, s, sizeof(s)), -ENAMETOOLONG);
    assert_int_equal(gbx_attr_str(&a, s, 0), -ENAMETOOLONG);
    a.len = 0;
    assert_int_equal(gbx_attr_str(&a, s, 0), -ENAMETOOLONG); /* no room for "" either */
    assert_int_equal(gbx_attr_str(&a, s, 1), 0);
    assert_string_equal(s, "");
    /* a NUL anywhere makes it malformed, even if it would fit */
    memcpy(d, "ab\0d", 4);
    a.len = 4;
    assert_int_equal(gbx_attr_str(&a, s, sizeof(s)), -EBADMSG);
    memcpy(d, "abc\0", 4);
    assert_int_equal(gbx_attr_str(&a, s, sizeof(s)), -EBADMSG);
    d[0] = 0;
    a.len = 1;
    assert_int_equal(gbx_attr_str(&a, s, sizeof(s)), -EBADMSG);
}

static void test_find_and_get(void **state)
{
    uint8_t buf[256];
    struct gbx_msg m;
    (void)state;
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_OK, 1);
    gbx_msg_put_u32(&m, GBX_A_PID, 4242);
    gbx_msg_put_u64(&m, GBX_A_SIZE, 1ull << 40);
    gbx_msg_put_str(&m, GBX_A_PATH, "/etc/hostname");
    gbx_msg_put_str(&m, GBX_A_ARGV, "first");
    gbx_msg_put_str(&m, GBX_A_ARGV, "second");
    gbx_msg_put(&m, GBX_A_DATA, "a\0b", 3);
    size_t plen = finish_ok(&m, GBX_MSG_OK, 1);
    const uint8_t *pl = buf + GBX_FRAME_HDR_SIZE;

    struct gbx_attr a;
    uint32_t u32 = 77;
    uint64_t u64 = 77;
    char s[32];

    /* found */
    assert_int_equal(gbx_attrs_find(pl, plen, GBX_A_PATH, &a), 1);
    assert_int_equal(a.tag, GBX_A_PATH);
    assert_int_equal(a.len, 13);
    assert_memory_equal(a.data, "/etc/hostname", 13);
    assert_int_equal(gbx_attrs_get_u32(pl, plen, GBX_A_PID, &u32), 1);
    assert_int_equal(u32, 4242);
    assert_int_equal(gbx_attrs_get_u64(pl, plen, GBX_A_SIZE, &u64), 1);
    assert_int_equal(u64, 1ull << 40);
    assert_int_equal(gbx_attrs_get_str(pl, plen, GBX_A_PATH, s, sizeof(s)), 1);
    assert_string_equal(s, "/etc/hostname");
    /* the first of repeated attributes */
    assert_int_equal(gbx_attrs_get_str(pl, plen, GBX_A_ARGV, s, sizeof(s)), 1);
    assert_string_equal(s, "first");

    /* absent: 0 and the output untouched */
    u32 = 77, u64 = 77;
    strcpy(s, "keep");
    assert_int_equal(gbx_attrs_find(pl, plen, GBX_A_CWD, &a), 0);
    assert_int_equal(gbx_attrs_get_u32(pl, plen, GBX_A_UID, &u32), 0);
    assert_int_equal(gbx_attrs_get_u64(pl, plen, GBX_A_OFFSET, &u64), 0);
    assert_int_equal(gbx_attrs_get_str(pl, plen, GBX_A_CWD, s, sizeof(s)), 0);
    assert_int_equal(u32, 77);
    assert_int_equal(u64, 77);
    assert_string_equal(s, "keep");
    assert_int_equal(gbx_attrs_get_u32(NULL, 0, GBX_A_PID, &u32), 0);

    /* present with the wrong type */
    assert_int_equal(gbx_attrs_get_u32(pl, plen, GBX_A_SIZE, &u32), -EBADMSG);
    assert_int_equal(gbx_attrs_get_u64(pl, plen, GBX_A_PID, &u64), -EBADMSG);
    assert_int_equal(gbx_attrs_get_u32(pl, plen, GBX_A_PATH, &u32), -EBADMSG);
    assert_int_equal(gbx_attrs_get_str(pl, plen, GBX_A_DATA, s, sizeof(s)), -EBADMSG);
    assert_int_equal(gbx_attrs_get_str(pl, plen, GBX_A_PATH, s, 13), -ENAMETOOLONG);
    assert_int_equal(gbx_attrs_get_str(pl, plen, GBX_A_PATH, s, 14), 1);
    assert_int_equal(u32, 77);
    assert_int_equal(u64, 77);

    /* malformed: cut the payload in the middle of the PATH attribute */
    size_t cut = 12 + 16 + 5;
    assert_int_equal(gbx_attrs_find(pl, cut, GBX_A_PATH, &a), -EBADMSG);
    assert_int_equal(gbx_attrs_find(pl, cut, GBX_A_CWD, &a), -EBADMSG);
    assert_int_equal(gbx_attrs_get_str(pl, cut, GBX_A_PATH, s, sizeof(s)), -EBADMSG);
    assert_int_equal(gbx_attrs_get_u32(pl, cut, GBX_A_UID, &u32), -EBADMSG);
    assert_int_equal(gbx_attrs_get_u64(pl, cut, GBX_A_OFFSET, &u64), -EBADMSG);
    /* attributes before the damage are still found */
    assert_int_equal(gbx_attrs_get_u32(pl, cut, GBX_A_PID, &u32), 1);
    assert_int_equal(u32, 4242);
    assert_int_equal(gbx_attrs_get_u64(pl, cut, GBX_A_SIZE, &u64), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hdr_roundtrip),
        cmocka_unit_test(test_hdr_decode_errors),
        cmocka_unit_test(test_msg_empty),
        cmocka_unit_test(test_msg_roundtrip_all),
        cmocka_unit_test(test_msg_reserve),
        cmocka_unit_test(test_msg_nested),
        cmocka_unit_test(test_msg_nest_depth),
        cmocka_unit_test(test_msg_nest_unbalanced),
        cmocka_unit_test(test_msg_buffer_too_small),
        cmocka_unit_test(test_msg_payload_limit),
        cmocka_unit_test(test_msg_room),
        cmocka_unit_test(test_iter_malformed),
        cmocka_unit_test(test_typed_getters),
        cmocka_unit_test(test_find_and_get),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
