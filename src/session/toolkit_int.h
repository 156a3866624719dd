/* SPDX-License-Identifier: MIT */
/* Helpers shared by the toolkit's files (toolkit.c, glob.c): a growable buffer and UTF-8. */
#ifndef GBX_SESSION_TOOLKIT_INT_H
#define GBX_SESSION_TOOLKIT_INT_H

#include <stddef.h>
#include <stdint.h>

struct sbuf {
    char *p;
    size_t len, cap;
};

void gbx_tk_sb_add(struct sbuf *b, const void *p, size_t n);
/* The buffer's text (NUL-terminated, malloc'ed); the buffer is empty after it. */
char *gbx_tk_sb_steal(struct sbuf *b);
/* Append p as valid UTF-8 without control characters (see toolkit.c); bytes appended. */
size_t gbx_tk_sanitize(struct sbuf *b, const uint8_t *p, size_t n);
/* The code point at p (invalid bytes as U+FFFD), its length in *adv. */
uint32_t gbx_tk_cp_next(const uint8_t *p, size_t n, size_t *adv);

#endif
