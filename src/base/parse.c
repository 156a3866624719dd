/* SPDX-License-Identifier: MIT */
#include "base/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parse a non-negative decimal with up to 9 fractional digits into units of 1e-9. */
static int parse_fixed(const char *s, const char **end, uint64_t *whole, uint64_t *nano)
{
    const char *p = s;
    uint64_t w = 0, f = 0;
    int digits = 0, fdigits = 0;
    while (isdigit((unsigned char)*p)) {
        if (w > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return -ERANGE;
        w = w * 10 + (uint64_t)(*p - '0');
        p++, digits++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (fdigits < 9) {
                f = f * 10 + (uint64_t)(*p - '0');
                fdigits++;
            }
            p++, digits++;
        }
        for (int i = fdigits; i < 9; i++)
            f *= 10;
    }
    if (digits == 0)
        return -EINVAL;
    *end = p;
    *whole = w;
    *nano = f;
    return 0;
}

static int scale(uint64_t whole, uint64_t nano, uint64_t unit, uint64_t *out)
{
    if (unit && whole > UINT64_MAX / unit)
        return -ERANGE;
    uint64_t r = whole * unit;
    /* fractional part: nano * unit / 1e9 without overflow for units up to 2^50 */
    uint64_t frac = (uint64_t)((__uint128_t)nano * unit / 1000000000u);
    if (r > UINT64_MAX - frac)
        return -ERANGE;
    *out = r + frac;
    return 0;
}

int gbx_parse_size(const char *s, uint64_t *out)
{
    if (s == NULL)
        return -EINVAL;
    const char *p;
    uint64_t w, f;
    int r = parse_fixed(s, &p, &w, &f);
    if (r < 0)
        return r;
    uint64_t unit = 1;
    switch (toupper((unsigned char)*p)) {
    case '\0':
        break;
    case 'K':
        unit = 1ull << 10, p++;
        break;
    case 'M':
        unit = 1ull << 20, p++;
        break;
    case 'G':
        unit = 1ull << 30, p++;
        break;
    case 'T':
        unit = 1ull << 40, p++;
        break;
    case 'B':
        break;
    default:
        return -EINVAL;
    }
    if (strcasecmp(p, "ib") == 0 && unit > 1)
        p += 2;
    else if (strcasecmp(p, "b") == 0)
        p += 1;
    if (*p != '\0')
        return -EINVAL;
    if (unit == 1 && f != 0)
        return -EINVAL; /* fractional bytes */
    return scale(w, f, unit, out);
}

int gbx_parse_cpus(const char *s, uint32_t *out)
{
    if (s == NULL)
        return -EINVAL;
    const char *p;
    uint64_t w, f, v;
    int r = parse_fixed(s, &p, &w, &f);
    if (r < 0)
        return r;
    if (*p != '\0')
        return -EINVAL;
    if ((r = scale(w, f, 1000, &v)) < 0)
        return r;
    if (v == 0 && (w != 0 || f != 0))
        return -ERANGE; /* below a thousandth of a CPU */
    if (v == 0 || v > 1024 * 1000)
        return -ERANGE;
    *out = (uint32_t)v;
    return 0;
}

int gbx_parse_duration_ms(const char *s, uint64_t *out)
{
    if (s == NULL)
        return -EINVAL;
    const char *p;
    uint64_t w, f;
    int r = parse_fixed(s, &p, &w, &f);
    if (r < 0)
        return r;
    uint64_t unit;
    if (*p == '\0' || strcmp(p, "s") == 0)
        unit = 1000;
    else if (strcmp(p, "ms") == 0)
        unit = 1;
    else if (strcmp(p, "m") == 0)
        unit = 60 * 1000;
    else if (strcmp(p, "h") == 0)
        unit = 3600 * 1000;
    else
        return -EINVAL;
    return scale(w, f, unit, out);
}

int gbx_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (s == NULL || *s == '\0')
        return -EINVAL;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return -ERANGE;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int gbx_env_valid(const char *kv)
{
    if (kv == NULL)
        return -EINVAL;
    const char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv)
        return -EINVAL;
    for (const char *p = kv; p < eq; p++) {
        unsigned char c = (unsigned char)*p;
        if (!(isalpha(c) || c == '_' || (p > kv && isdigit(c))))
            return -EINVAL;
    }
    return 0;
}

int gbx_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 63)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && i > 0);
        if (!ok)
            return -EINVAL;
    }
    return 0;
}

char *gbx_url_escape(const char *s, const char *keep)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(strlen(s) * 3 + 1), *o = out;
    if (out == NULL)
        abort();
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            strchr("-._~", *c) || (keep && strchr(keep, *c))) {
            *o++ = (char)*c;
        } else {
            *o++ = '%';
            *o++ = hex[*c >> 4];
            *o++ = hex[*c & 15];
        }
    }
    *o = '\0';
    return out;
}
