/* SPDX-License-Identifier: MIT */
#include "base/b64.h"

#include <errno.h>

static int value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int gbx_b64_decode(const char *in, size_t n, uint8_t *out, size_t *outlen)
{
    /* padding: at most two '=' at the very end, on a whole quantum */
    size_t pad = 0;
    while (pad < n && pad < 2 && in[n - 1 - pad] == '=')
        pad++;
    if (pad && n % 4 != 0)
        return -EINVAL;
    size_t m = n - pad;
    if (m % 4 == 1)
        return -EINVAL;
    uint32_t acc = 0;
    size_t bits = 0, o = 0;
    for (size_t i = 0; i < m; i++) {
        int v = value(in[i]);
        if (v < 0)
            return -EINVAL;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    *outlen = o;
    return 0;
}
