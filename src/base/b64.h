/* SPDX-License-Identifier: MIT */
/* Base64 (RFC 4648, standard alphabet) decoding, for the CLI's exec streams: a small pure
 * function, so that the CLI does not load libcrypto for it. */
#ifndef GBX_BASE_B64_H
#define GBX_BASE_B64_H

#include <stddef.h>
#include <stdint.h>

/* Decode n characters of in (padding optional) into out, which has room for n / 4 * 3 + 2
 * bytes. Returns 0 with *outlen set, or -EINVAL for a character outside the alphabet, a
 * misplaced '=', or a length that cannot be base64. */
int gbx_b64_decode(const char *in, size_t n, uint8_t *out, size_t *outlen);

#endif
