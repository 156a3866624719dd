/* SPDX-License-Identifier: MIT */
/* JSON strings of text that may not be UTF-8 (see jsontext.h). */
#include "base/jsontext.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/util.h"

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80             ? 1
                 : (s[0] & 0xE0) == 0xC0 ? 2
                 : (s[0] & 0xF0) == 0xE0 ? 3
                 : (s[0] & 0xF8) == 0xF0 ? 4
                                         : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    unsigned cp = len == 1 ? s[0] : len == 2 ? s[0] & 0x1F : len == 3 ? s[0] & 0x0F : s[0] & 0x07;
    for (size_t i = 1; i < len; i++)
        cp = cp << 6 | (s[i] & 0x3F);
    static const unsigned min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0; /* overlong, out of range, or a surrogate */
    return len;
}

json_t *gbx_json_text(const char *s)
{
    json_t *v = json_string(s);
    if (v)
        return v;
    size_t n = strlen(s);
    char *out = gbx_xmalloc(3 * n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len((const unsigned char *)s + i, n - i);
        if (l) {
            memcpy(out + o, s + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    v = json_string(out);
    free(out);
    GBX_BUG_ON(v == NULL);
    return v;
}
