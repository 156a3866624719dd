/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the agent frame codec (src/agent/frame.c). The input is a byte
 * stream of frames, as glovebox-init or the daemon would read it from the socket: decode
 * each header, walk the attributes (nested ones up to GBX_MSG_MAX_NEST deep), call every
 * typed getter, and re-encode what was parsed with the builder. The codec is canonical,
 * so the re-encoded frame must be the input frame byte for byte (flags aside).
 * Any broken invariant traps. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/frame.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Typed getters on one attribute, with their documented contracts. */
static void check_getters(const struct gbx_attr *a)
{
    uint32_t u32 = 0x5a5a5a5a;
    uint64_t u64 = 0x5a5a5a5a5a5a5a5aull;
    int r = gbx_attr_u32(a, &u32);
    CHECK(r == (a->len == 4 ? 0 : -EBADMSG));
    if (r == 0)
        CHECK(u32 == le32(a->data));
    else
        CHECK(u32 == 0x5a5a5a5a);
    r = gbx_attr_u64(a, &u64);
    CHECK(r == (a->len == 8 ? 0 : -EBADMSG));
    if (r == 0)
        CHECK(u64 == ((uint64_t)le32(a->data) | ((uint64_t)le32(a->data + 4) << 32)));

    /* strings, into buffers of several sizes (heap, exact size, so ASan sees overruns) */
    int has_nul = a->len && memchr(a->data, 0, a->len) != NULL;
    size_t sizes[] = {0, 1, a->len, (size_t)a->len + 1, 256};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t outsz = sizes[i];
        char *out = malloc(outsz ? outsz : 1);
        CHECK(out != NULL);
        r = gbx_attr_str(a, out, outsz);
        if (has_nul) {
            CHECK(r == -EBADMSG);
        } else if (outsz == 0 || a->len >= outsz) {
            CHECK(r == -ENAMETOOLONG);
        } else {
            CHECK(r == 0);
            CHECK(strlen(out) == a->len);
            CHECK(memcmp(out, a->data, a->len) == 0);
        }
        free(out);
    }
}

/* Walk an attribute sequence at depth, check the iterator's invariants and the getters,
 * and append what was read to m (nested where the payload is itself a valid sequence and
 * the builder allows one more level). Returns the number of bytes of the sequence that
 * were well formed (the prefix that m now holds). */
static size_t walk(const uint8_t *p, size_t len, int depth, struct gbx_msg *m)
{
    struct gbx_attr_iter it;
    struct gbx_attr a;
    int r;
    size_t done = 0;
    int first_tag = -1;
    const uint8_t *first_data = NULL;

    gbx_attr_iter_init(&it, p, len);
    while ((r = gbx_attr_next(&it, &a)) == 1) {
        /* the attribute lies inside the sequence, right after the previous one */
        CHECK(a.data == p + done + GBX_ATTR_HDR_SIZE);
        CHECK(a.len <= len - done - GBX_ATTR_HDR_SIZE);
        CHECK(le32(p + done + 4) == a.len);
        CHECK(p[done + 2] == 0 && p[done + 3] == 0);
        done += GBX_ATTR_HDR_SIZE + a.len;
        CHECK(it.left == len - done);
        if (first_tag < 0) {
            first_tag = a.tag;
            first_data = a.data;
        }

        check_getters(&a);

        int nested = gbx_attrs_validate(a.data, a.len) == 0;
        if (nested && depth < GBX_MSG_MAX_NEST) {
            gbx_msg_nest_begin(m, a.tag);
            size_t inner = walk(a.data, a.len, depth + 1, m);
            CHECK(inner == a.len);
            gbx_msg_nest_end(m);
        } else if (a.len == 4) {
            uint32_t v;
            CHECK(gbx_attr_u32(&a, &v) == 0);
            gbx_msg_put_u32(m, a.tag, v);
        } else if (a.len == 8) {
            uint64_t v;
            CHECK(gbx_attr_u64(&a, &v) == 0);
            gbx_msg_put_u64(m, a.tag, v);
        } else if (a.len < 512 && (a.len == 0 || memchr(a.data, 0, a.len) == NULL)) {
            char s[512];
            CHECK(gbx_attr_str(&a, s, sizeof(s)) == 0);
            gbx_msg_put_str(m, a.tag, s);
        } else if (a.len % 2) {
            gbx_msg_put(m, a.tag, a.data, a.len);
        } else {
            int was_overflow = m->overflow;
            uint8_t *dst = gbx_msg_reserve(m, a.tag, a.len);
            CHECK((dst == NULL) == (m->overflow != 0));
            CHECK(!was_overflow || dst == NULL); /* overflow is sticky */
            if (dst != NULL)
                memcpy(dst, a.data, a.len);
        }
    }
    CHECK(r == 0 || r == -EBADMSG);
    CHECK((r == 0) == (done == len));
    CHECK(gbx_attrs_validate(p, len) == r);
    /* an error does not move the iterator: asking again gives the same answer */
    CHECK(gbx_attr_next(&it, &a) == r);

    /* find agrees with the walk */
    if (first_tag >= 0) {
        struct gbx_attr f;
        CHECK(gbx_attrs_find(p, len, (uint16_t)first_tag, &f) == 1);
        CHECK(f.data == first_data);
        uint32_t u32;
        uint64_t u64;
        char s[64];
        int g = gbx_attrs_get_u32(p, len, (uint16_t)first_tag, &u32);
        CHECK(g == (f.len == 4 ? 1 : -EBADMSG));
        g = gbx_attrs_get_u64(p, len, (uint16_t)first_tag, &u64);
        CHECK(g == (f.len == 8 ? 1 : -EBADMSG));
        g = gbx_attrs_get_str(p, len, (uint16_t)first_tag, s, sizeof(s));
        CHECK(g == 1 || g == -EBADMSG || g == -ENAMETOOLONG);
    } else if (r == 0) {
        struct gbx_attr f;
        CHECK(gbx_attrs_find(p, len, 1, &f) == 0);
    }
    return done;
}

static void one_frame(const struct gbx_frame_hdr *h, const uint8_t *frame)
{
    const uint8_t *payload = frame + GBX_FRAME_HDR_SIZE;
    size_t cap = GBX_FRAME_HDR_SIZE + h->len;
    uint8_t *buf = malloc(cap); /* exact size: ASan catches a builder overrun */
    CHECK(buf != NULL);
    struct gbx_msg m;
    gbx_msg_start(&m, buf, cap, h->type, h->id);
    size_t good = walk(payload, h->len, 0, &m);
    CHECK(!m.overflow);
    CHECK(m.depth == 0);
    CHECK(m.len == GBX_FRAME_HDR_SIZE + good);
    long n = gbx_msg_finish(&m);
    CHECK(n == (long)(GBX_FRAME_HDR_SIZE + good));

    /* the re-encoded header decodes to the same header (flags are always sent as 0) */
    struct gbx_frame_hdr h2;
    CHECK(gbx_frame_decode_hdr(buf, (size_t)n, &h2) == 0);
    CHECK(h2.type == h->type && h2.id == h->id && h2.flags == 0);
    CHECK(h2.len == good);
    CHECK(memcmp(buf + 4, frame + 4, 8) == 0); /* magic, version, type, id */
    /* and the attributes are the same bytes */
    CHECK(memcmp(buf + GBX_FRAME_HDR_SIZE, payload, good) == 0);
    free(buf);

    /* the same frame into a buffer one byte too small overflows cleanly */
    if (good > 0) {
        cap = GBX_FRAME_HDR_SIZE + good - 1;
        buf = malloc(cap);
        CHECK(buf != NULL);
        gbx_msg_start(&m, buf, cap, h->type, h->id);
        walk(payload, good, 0, &m);
        CHECK(gbx_msg_finish(&m) == -EMSGSIZE);
        free(buf);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    for (int frames = 0; frames < 64; frames++) {
        struct gbx_frame_hdr h;
        size_t avail = size - off;
        int r = gbx_frame_decode_hdr(data + off, avail, &h);
        const uint8_t *f = data + off;
        if (r == -EAGAIN) {
            CHECK(avail < GBX_FRAME_HDR_SIZE);
            break;
        }
        CHECK(avail >= GBX_FRAME_HDR_SIZE);
        if (r == -EPROTO) {
            CHECK(f[4] != GBX_FRAME_MAGIC || f[5] != GBX_AGENT_VERSION);
            break;
        }
        if (r == -EMSGSIZE) {
            CHECK(f[4] == GBX_FRAME_MAGIC && f[5] == GBX_AGENT_VERSION);
            CHECK(le32(f) > GBX_FRAME_MAX_PAYLOAD);
            break;
        }
        CHECK(r == 0);
        CHECK(h.len == le32(f) && h.len <= GBX_FRAME_MAX_PAYLOAD);
        CHECK(h.flags == le32(f + 12));

        /* header round trip */
        uint8_t hb[GBX_FRAME_HDR_SIZE];
        struct gbx_frame_hdr h2;
        gbx_frame_encode_hdr(hb, h.type, h.id, h.len);
        CHECK(gbx_frame_decode_hdr(hb, sizeof(hb), &h2) == 0);
        CHECK(h2.len == h.len && h2.type == h.type && h2.id == h.id && h2.flags == 0);
        CHECK(memcmp(hb, f, 12) == 0);

        if (avail - GBX_FRAME_HDR_SIZE < h.len)
            break; /* incomplete: a reader would wait for more */
        one_frame(&h, f);
        off += GBX_FRAME_HDR_SIZE + h.len;
    }
    return 0;
}
