/* SPDX-License-Identifier: MIT */
/* multipart/form-data (RFC 7578, RFC 2046 §5.1) over a body already in memory: a pure
 * parser, no I/O, fuzzed by tests/fuzz/fuzz_multipart.c. Parts point into the body; only
 * the header values (names) are copied. */
#ifndef GBX_HTTP_MULTIPART_H
#define GBX_HTTP_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

#define GBX_MULTIPART_BOUNDARY_MAX 70  /* RFC 2046 */
#define GBX_MULTIPART_HEADERS_MAX 8192 /* bytes of headers per part */

struct gbx_multipart_part {
    char *name;          /* the form field's name (owned), or NULL */
    char *filename;      /* the file's name as sent (owned), or NULL for a plain field */
    char *content_type;  /* owned, or NULL */
    const uint8_t *data; /* into the body given to gbx_multipart_parse */
    size_t len;
};

struct gbx_multipart {
    struct gbx_multipart_part *parts; /* owned */
    size_t n;
};

/* The boundary of a Content-Type header value "multipart/form-data; boundary=...", into
 * out (at least GBX_MULTIPART_BOUNDARY_MAX + 1 bytes). 0, or -EINVAL (not multipart/form-data,
 * no boundary, or a boundary that is empty, too long or quoted badly). */
int gbx_multipart_boundary(const char *content_type, char *out, size_t outsz);

/* Split body into its parts (at most max_parts). 0 with *mp filled (release it with
 * gbx_multipart_release), or -EINVAL for a malformed body, -E2BIG for too many parts or
 * headers too large; *why (may be NULL) then says what is wrong, as a static string.
 * On failure *mp is empty. */
int gbx_multipart_parse(const char *boundary, const uint8_t *body, size_t len, size_t max_parts,
                        struct gbx_multipart *mp, const char **why);
void gbx_multipart_release(struct gbx_multipart *mp);

#endif
