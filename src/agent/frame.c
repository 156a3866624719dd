/* SPDX-License-Identifier: MIT */
#include "agent/frame.h"

#include <errno.h>
#include <string.h>

static void put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

int gbx_frame_decode_hdr(const uint8_t *buf, size_t avail, struct gbx_frame_hdr *out)
{
    if (avail < GBX_FRAME_HDR_SIZE)
        return -EAGAIN;
    if (buf[4] != GBX_FRAME_MAGIC || buf[5] != GBX_AGENT_VERSION)
        return -EPROTO;
    uint32_t len = get_le32(buf);
    if (len > GBX_FRAME_MAX_PAYLOAD)
        return -EMSGSIZE;
    out->len = len;
    out->type = get_le16(buf + 6);
    out->id = get_le32(buf + 8);
    out->flags = get_le32(buf + 12);
    return 0;
}

void gbx_frame_encode_hdr(uint8_t *out, uint16_t type, uint32_t id, uint32_t len)
{
    put_le32(out, len);
    out[4] = GBX_FRAME_MAGIC;
    out[5] = GBX_AGENT_VERSION;
    put_le16(out + 6, type);
    put_le32(out + 8, id);
    put_le32(out + 12, 0);
}

void gbx_msg_start(struct gbx_msg *m, uint8_t *buf, size_t cap, uint16_t type, uint32_t id)
{
    memset(m, 0, sizeof(*m));
    m->buf = buf;
    m->cap = cap;
    if (cap < GBX_FRAME_HDR_SIZE) {
        m->overflow = 1;
        return;
    }
    gbx_frame_encode_hdr(buf, type, id, 0);
    m->len = GBX_FRAME_HDR_SIZE;
}

static int msg_fits(struct gbx_msg *m, size_t n)
{
    if (m->overflow)
        return 0;
    size_t limit = m->cap;
    if (limit > GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD)
        limit = GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD;
    if (n > limit || m->len > limit - n) {
        m->overflow = 1;
        return 0;
    }
    return 1;
}

uint8_t *gbx_msg_reserve(struct gbx_msg *m, uint16_t tag, size_t len)
{
    if (!msg_fits(m, len > GBX_FRAME_MAX_PAYLOAD ? SIZE_MAX : GBX_ATTR_HDR_SIZE + len))
        return NULL;
    uint8_t *p = m->buf + m->len;
    put_le16(p, tag);
    put_le16(p + 2, 0);
    put_le32(p + 4, (uint32_t)len);
    m->len += GBX_ATTR_HDR_SIZE + len;
    return p + GBX_ATTR_HDR_SIZE;
}

void gbx_msg_put(struct gbx_msg *m, uint16_t tag, const void *data, size_t len)
{
    uint8_t *p = gbx_msg_reserve(m, tag, len);
    if (p != NULL && len)
        memcpy(p, data, len);
}

void gbx_msg_put_u32(struct gbx_msg *m, uint16_t tag, uint32_t v)
{
    uint8_t b[4];
    put_le32(b, v);
    gbx_msg_put(m, tag, b, 4);
}

void gbx_msg_put_u64(struct gbx_msg *m, uint16_t tag, uint64_t v)
{
    uint8_t b[8];
    put_le32(b, (uint32_t)v);
    put_le32(b + 4, (uint32_t)(v >> 32));
    gbx_msg_put(m, tag, b, 8);
}

void gbx_msg_put_str(struct gbx_msg *m, uint16_t tag, const char *s)
{
    gbx_msg_put(m, tag, s, strlen(s));
}

void gbx_msg_nest_begin(struct gbx_msg *m, uint16_t tag)
{
    if (m->depth >= GBX_MSG_MAX_NEST) {
        m->overflow = 1;
        return;
    }
    size_t at = m->len;
    if (gbx_msg_reserve(m, tag, 0) == NULL)
        return;
    m->nest[m->depth++] = at;
}

void gbx_msg_nest_end(struct gbx_msg *m)
{
    if (m->depth <= 0) {
        m->overflow = 1;
        return;
    }
    size_t at = m->nest[--m->depth];
    if (m->overflow)
        return;
    put_le32(m->buf + at + 4, (uint32_t)(m->len - at - GBX_ATTR_HDR_SIZE));
}

size_t gbx_msg_room(const struct gbx_msg *m)
{
    size_t limit = m->cap;
    if (limit > GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD)
        limit = GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD;
    if (m->overflow || m->len + GBX_ATTR_HDR_SIZE >= limit)
        return 0;
    return limit - m->len - GBX_ATTR_HDR_SIZE;
}

long gbx_msg_finish(struct gbx_msg *m)
{
    if (m->overflow)
        return -EMSGSIZE;
    if (m->depth != 0)
        return -EINVAL;
    put_le32(m->buf, (uint32_t)(m->len - GBX_FRAME_HDR_SIZE));
    return (long)m->len;
}

void gbx_attr_iter_init(struct gbx_attr_iter *it, const uint8_t *payload, size_t len)
{
    it->p = payload;
    it->left = payload ? len : 0;
}

int gbx_attr_next(struct gbx_attr_iter *it, struct gbx_attr *a)
{
    if (it->left == 0)
        return 0;
    if (it->left < GBX_ATTR_HDR_SIZE)
        return -EBADMSG;
    uint32_t len = get_le32(it->p + 4);
    if (get_le16(it->p + 2) != 0 || len > it->left - GBX_ATTR_HDR_SIZE)
        return -EBADMSG;
    a->tag = get_le16(it->p);
    a->len = len;
    a->data = it->p + GBX_ATTR_HDR_SIZE;
    it->p += GBX_ATTR_HDR_SIZE + len;
    it->left -= GBX_ATTR_HDR_SIZE + len;
    return 1;
}

int gbx_attrs_validate(const uint8_t *payload, size_t len)
{
    struct gbx_attr_iter it;
    struct gbx_attr a;
    int r;
    gbx_attr_iter_init(&it, payload, len);
    while ((r = gbx_attr_next(&it, &a)) > 0)
        ;
    return r;
}

int gbx_attrs_find(const uint8_t *payload, size_t len, uint16_t tag, struct gbx_attr *out)
{
    struct gbx_attr_iter it;
    int r;
    gbx_attr_iter_init(&it, payload, len);
    while ((r = gbx_attr_next(&it, out)) > 0) {
        if (out->tag == tag)
            return 1;
    }
    return r;
}

int gbx_attr_u32(const struct gbx_attr *a, uint32_t *out)
{
    if (a->len != 4)
        return -EBADMSG;
    *out = get_le32(a->data);
    return 0;
}

int gbx_attr_u64(const struct gbx_attr *a, uint64_t *out)
{
    if (a->len != 8)
        return -EBADMSG;
    *out = (uint64_t)get_le32(a->data) | ((uint64_t)get_le32(a->data + 4) << 32);
    return 0;
}

int gbx_attr_str(const struct gbx_attr *a, char *out, size_t outsz)
{
    if (memchr(a->data, 0, a->len) != NULL)
        return -EBADMSG;
    if (outsz == 0 || a->len >= outsz)
        return -ENAMETOOLONG;
    memcpy(out, a->data, a->len);
    out[a->len] = '\0';
    return 0;
}

int gbx_attrs_get_u32(const uint8_t *payload, size_t len, uint16_t tag, uint32_t *out)
{
    struct gbx_attr a;
    int r = gbx_attrs_find(payload, len, tag, &a);
    if (r <= 0)
        return r;
    r = gbx_attr_u32(&a, out);
    return r < 0 ? r : 1;
}

int gbx_attrs_get_u64(const uint8_t *payload, size_t len, uint16_t tag, uint64_t *out)
{
    struct gbx_attr a;
    int r = gbx_attrs_find(payload, len, tag, &a);
    if (r <= 0)
        return r;
    r = gbx_attr_u64(&a, out);
    return r < 0 ? r : 1;
}

int gbx_attrs_get_str(const uint8_t *payload, size_t len, uint16_t tag, char *out, size_t outsz)
{
    struct gbx_attr a;
    int r = gbx_attrs_find(payload, len, tag, &a);
    if (r <= 0)
        return r;
    r = gbx_attr_str(&a, out, outsz);
    return r < 0 ? r : 1;
}
