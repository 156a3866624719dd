/* SPDX-License-Identifier: MIT */
/* Agent frame codec: pure functions over caller buffers, no allocation, no I/O.
 * Used by glovebox-init (statically linked) and by the daemon side.
 *
 * Frame:     u32 payload_len | u8 magic 'G' | u8 version | u16 type | u32 id | u32 flags
 * Payload:   a sequence of attributes: u16 tag | u16 reserved (0) | u32 len | len bytes
 * All integers little-endian. Nested attributes carry an attribute sequence as payload. */
#ifndef GBX_AGENT_FRAME_H
#define GBX_AGENT_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "agent/proto.h"

#define GBX_ATTR_HDR_SIZE 8
#define GBX_MSG_MAX_NEST 4

struct gbx_frame_hdr {
    uint32_t len; /* payload length, <= GBX_FRAME_MAX_PAYLOAD */
    uint16_t type;
    uint32_t id;
    uint32_t flags;
};

/* Decode a header from the first bytes of buf.
 * Returns 0 when a valid header was read, -EAGAIN when fewer than GBX_FRAME_HDR_SIZE bytes
 * are available, -EPROTO on a wrong magic or version, -EMSGSIZE when the payload is too big.
 * On -EPROTO or -EMSGSIZE the stream cannot be resynchronised; the caller closes it. */
int gbx_frame_decode_hdr(const uint8_t *buf, size_t avail, struct gbx_frame_hdr *out);

/* Encode a header into out[GBX_FRAME_HDR_SIZE]. */
void gbx_frame_encode_hdr(uint8_t *out, uint16_t type, uint32_t id, uint32_t len);

/* Message builder over a caller-owned buffer of cap bytes (header included).
 * Overflow is sticky: the builder stops writing and gbx_msg_finish reports it. */
struct gbx_msg {
    uint8_t *buf;
    size_t cap;
    size_t len; /* bytes used, header included */
    int overflow;
    int depth;
    size_t nest[GBX_MSG_MAX_NEST]; /* offsets of open nested attribute headers */
};

void gbx_msg_start(struct gbx_msg *m, uint8_t *buf, size_t cap, uint16_t type, uint32_t id);
void gbx_msg_put(struct gbx_msg *m, uint16_t tag, const void *data, size_t len);
void gbx_msg_put_u32(struct gbx_msg *m, uint16_t tag, uint32_t v);
void gbx_msg_put_u64(struct gbx_msg *m, uint16_t tag, uint64_t v);
void gbx_msg_put_str(struct gbx_msg *m, uint16_t tag, const char *s);
/* Reserve room for len bytes of a DATA-like attribute and return where to write them. */
uint8_t *gbx_msg_reserve(struct gbx_msg *m, uint16_t tag, size_t len);
void gbx_msg_nest_begin(struct gbx_msg *m, uint16_t tag);
void gbx_msg_nest_end(struct gbx_msg *m);
/* Room left for one more attribute's payload. */
size_t gbx_msg_room(const struct gbx_msg *m);
/* Patch the payload length into the header. Returns the total frame size, or -EMSGSIZE
 * if anything overflowed (the payload limit or the buffer), or -EINVAL on an open nest. */
long gbx_msg_finish(struct gbx_msg *m);

struct gbx_attr {
    uint16_t tag;
    uint32_t len;
    const uint8_t *data;
};

struct gbx_attr_iter {
    const uint8_t *p;
    size_t left;
};

void gbx_attr_iter_init(struct gbx_attr_iter *it, const uint8_t *payload, size_t len);
/* Returns 1 with *a filled, 0 at the end, -EBADMSG on a truncated or malformed attribute. */
int gbx_attr_next(struct gbx_attr_iter *it, struct gbx_attr *a);
/* Walk a whole attribute sequence; 0 if well formed, -EBADMSG otherwise. */
int gbx_attrs_validate(const uint8_t *payload, size_t len);
/* Find the first attribute with tag. 1 found, 0 absent, -EBADMSG malformed. */
int gbx_attrs_find(const uint8_t *payload, size_t len, uint16_t tag, struct gbx_attr *out);

/* Typed accessors: -EBADMSG when the size is wrong or a string holds a NUL byte,
 * -ENAMETOOLONG when a string does not fit in outsz (terminator included). */
int gbx_attr_u32(const struct gbx_attr *a, uint32_t *out);
int gbx_attr_u64(const struct gbx_attr *a, uint64_t *out);
int gbx_attr_str(const struct gbx_attr *a, char *out, size_t outsz);

/* Convenience: find + typed read. 1 found, 0 absent (out untouched), <0 malformed. */
int gbx_attrs_get_u32(const uint8_t *payload, size_t len, uint16_t tag, uint32_t *out);
int gbx_attrs_get_u64(const uint8_t *payload, size_t len, uint16_t tag, uint64_t *out);
int gbx_attrs_get_str(const uint8_t *payload, size_t len, uint16_t tag, char *out, size_t outsz);

#endif
