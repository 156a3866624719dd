/* SPDX-License-Identifier: MIT */
/* The Connect protocol (v1, JSON codec) as E2B's envd speaks it: envelope framing, error codes,
 * and the protobuf-JSON value forms the SDK sends. Pure functions over caller buffers: no I/O,
 * fuzzed (tests/fuzz/fuzz_connect.c). Spec: shared/protocols/e2b.md §3. */
#ifndef GBX_E2B_CONNECT_H
#define GBX_E2B_CONNECT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define GBX_CONNECT_HDR 5
#define GBX_CONNECT_FLAG_COMPRESSED 0x01
#define GBX_CONNECT_FLAG_END 0x02
/* largest request message we accept in an envelope */
#define GBX_CONNECT_MAX_MSG (4u << 20)

/* Parse one envelope at the start of buf. Returns the bytes it spans (header + payload) with
 * *flags, *payload and *len set; 0 when more bytes are needed; -EBADMSG for a compressed or
 * unknown-flag envelope; -EMSGSIZE when the payload is larger than max. */
long gbx_connect_envelope(const uint8_t *buf, size_t avail, size_t max, uint8_t *flags,
                          const uint8_t **payload, size_t *len);
/* Write an envelope header for a payload of len bytes. */
void gbx_connect_envelope_hdr(uint8_t hdr[GBX_CONNECT_HDR], uint8_t flags, uint32_t len);

/* The Connect code for an errno (ENOENT -> "not_found", EEXIST -> "already_exists", ...). */
const char *gbx_connect_code_for_errno(int errnum);
/* The HTTP status a unary error with this code goes out with (not_found -> 404, ...). */
int gbx_connect_http_status(const char *code);

/* Protobuf-JSON values. Each returns 0, or -EINVAL when v has the wrong form. A NULL v (the
 * field is absent) or a JSON null gives the default (0, "", false) and returns 0. */
/* integers: a JSON number or a decimal string ("3"), within [min, max] */
int gbx_connect_int(json_t *v, int64_t min, int64_t max, int64_t *out);
int gbx_connect_bool(json_t *v, int *out);
/* bytes: standard or URL-safe base64, padded or not. *out is malloc'ed (NULL for empty). */
int gbx_connect_bytes(json_t *v, uint8_t **out, size_t *len);
/* an enum: its name, or its number; names[i] is the name of value i (NULL for holes) */
int gbx_connect_enum(json_t *v, const char *const *names, size_t n, int *out);

/* Base64 (standard, padded) of len bytes: malloc'ed and NUL-terminated. */
char *gbx_connect_b64(const uint8_t *data, size_t len);

#endif
