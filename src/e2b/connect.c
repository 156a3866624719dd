/* SPDX-License-Identifier: MIT */
#include "e2b/connect.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

long gbx_connect_envelope(const uint8_t *buf, size_t avail, size_t max, uint8_t *flags,
                          const uint8_t **payload, size_t *len)
{
    if (avail < GBX_CONNECT_HDR)
        return 0;
    uint8_t f = buf[0];
    if (f & ~(uint8_t)GBX_CONNECT_FLAG_END)
        return -EBADMSG; /* compressed (never negotiated) or unknown */
    uint32_t n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
    if (n > max)
        return -EMSGSIZE;
    if (avail - GBX_CONNECT_HDR < n)
        return 0;
    *flags = f;
    *payload = buf + GBX_CONNECT_HDR;
    *len = n;
    return (long)(GBX_CONNECT_HDR + n);
}

void gbx_connect_envelope_hdr(uint8_t hdr[GBX_CONNECT_HDR], uint8_t flags, uint32_t len)
{
    hdr[0] = flags;
    hdr[1] = (uint8_t)(len >> 24);
    hdr[2] = (uint8_t)(len >> 16);
    hdr[3] = (uint8_t)(len >> 8);
    hdr[4] = (uint8_t)len;
}

const char *gbx_connect_code_for_errno(int errnum)
{
    switch (errnum) {
    case ENOENT:
    case ESRCH:
        return "not_found";
    case EEXIST:
        return "already_exists";
    case EACCES:
    case EPERM:
        return "permission_denied";
    case EINVAL:
    case ENOTDIR:
    case EISDIR:
    case ENAMETOOLONG:
    case ELOOP:
    case ENOTEMPTY:
    case EXDEV:
        return "invalid_argument";
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case EAGAIN:
        return "resource_exhausted";
    case ETIMEDOUT:
        return "deadline_exceeded";
    case ECONNRESET:
    case ECONNREFUSED:
    case EPIPE:
    case ENOTCONN:
        return "unavailable";
    case ENOSYS:
    case EOPNOTSUPP:
        return "unimplemented";
    default:
        return "internal";
    }
}

int gbx_connect_http_status(const char *code)
{
    static const struct {
        const char *code;
        int status;
    } map[] = {
        {"canceled", 499},
        {"unknown", 500},
        {"invalid_argument", 400},
        {"deadline_exceeded", 504},
        {"not_found", 404},
        {"already_exists", 409},
        {"permission_denied", 403},
        {"resource_exhausted", 429},
        {"failed_precondition", 400},
        {"aborted", 409},
        {"out_of_range", 400},
        {"unimplemented", 501},
        {"internal", 500},
        {"unavailable", 503},
        {"data_loss", 500},
        {"unauthenticated", 401},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(map); i++)
        if (strcmp(code, map[i].code) == 0)
            return map[i].status;
    return 500;
}

int gbx_connect_int(json_t *v, int64_t min, int64_t max, int64_t *out)
{
    long long x = 0;
    if (v == NULL || json_is_null(v)) { /* proto3 JSON: null is the default */
        x = 0;
    } else if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end = NULL;
        if (!((s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] >= '0' && s[1] <= '9')) ||
            strlen(s) != json_string_length(v))
            return -EINVAL;
        errno = 0;
        x = strtoll(s, &end, 10);
        if (errno || *end != '\0')
            return -EINVAL;
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != (double)(long long)d)
            return -EINVAL;
        x = (long long)d;
    } else {
        return -EINVAL;
    }
    if (x < min || x > max)
        return -EINVAL;
    *out = x;
    return 0;
}

int gbx_connect_bool(json_t *v, int *out)
{
    if (v == NULL || json_is_null(v)) {
        *out = 0;
        return 0;
    }
    if (!json_is_boolean(v))
        return -EINVAL;
    *out = json_is_true(v);
    return 0;
}

int gbx_connect_bytes(json_t *v, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return -EINVAL;
    size_t n = json_string_length(v);
    if (n == 0)
        return 0;
    if (n > INT_MAX / 2)
        return -EINVAL;
    /* normalise: URL-safe alphabet to standard, padding restored */
    const char *s = json_string_value(v);
    size_t m = n;
    while (m > 0 && s[m - 1] == '=')
        m--;
    if (m % 4 == 1)
        return -EINVAL;
    size_t padded = (m + 3) / 4 * 4;
    gbx_autofree char *norm = gbx_xmalloc(padded + 1);
    for (size_t i = 0; i < m; i++) {
        char c = s[i];
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                   c == '+' || c == '/'))
            return -EINVAL;
        norm[i] = c;
    }
    for (size_t i = m; i < padded; i++)
        norm[i] = '=';
    norm[padded] = '\0';
    uint8_t *buf = gbx_xmalloc(padded / 4 * 3 + 1);
    int r = EVP_DecodeBlock(buf, (const unsigned char *)norm, (int)padded);
    if (r < 0) {
        free(buf);
        return -EINVAL;
    }
    /* EVP_DecodeBlock counts the padding as zero bytes */
    size_t pad = padded - m;
    *len = (size_t)r - pad;
    *out = buf;
    return 0;
}

int gbx_connect_enum(json_t *v, const char *const *names, size_t n, int *out)
{
    if (v == NULL || json_is_null(v)) {
        *out = 0;
        return 0;
    }
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x < 0 || (size_t)x >= n || names[x] == NULL)
            return -EINVAL;
        *out = (int)x;
        return 0;
    }
    if (!json_is_string(v))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (names[i] && strcmp(names[i], json_string_value(v)) == 0) {
            *out = (int)i;
            return 0;
        }
    }
    return -EINVAL;
}

char *gbx_connect_b64(const uint8_t *data, size_t len)
{
    char *out = gbx_xmalloc(4 * ((len + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    return out;
}
