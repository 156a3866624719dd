/* SPDX-License-Identifier: MIT */
#include "base/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int gbx_parse_time_ns(const char *s, int64_t *out)
{
    if (*s == '\0')
        return -EINVAL;
    if (strspn(s, "0123456789") == strlen(s)) { /* unix seconds */
        uint64_t secs;
        int r = gbx_parse_u64(s, 0, GBX_TIME_MAX_SECS, &secs);
        if (r < 0)
            return r;
        *out = (int64_t)secs * 1000000000;
        return 0;
    }
    /* RFC 3339: 2026-12-03T19:00:00[.fraction](Z|+hh:mm|-hh:mm) */
    int y, mo, d, h, mi, sec;
    if (strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) || s[7] != '-' ||
        digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) ||
        s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &sec))
        return -EINVAL;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 ||
        sec > 60)
        return -EINVAL;
    const char *p = s + 19;
    int64_t frac = 0;
    if (*p == '.') {
        p++;
        int n = 0;
        for (; isdigit((unsigned char)*p); p++, n++)
            if (n < 9)
                frac = frac * 10 + (*p - '0');
        if (n == 0)
            return -EINVAL;
        for (; n < 9; n++)
            frac *= 10;
    }
    int off = 0;
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        off = 0;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        int oh, om;
        if (digits(p + 1, 2, &oh) || digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return -EINVAL;
        off = (*p == '-' ? -1 : 1) * (oh * 3600 + om * 60);
    } else {
        return -EINVAL;
    }
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    if (tm.tm_mday != d) /* 31 April, 29 February of a common year */
        return -EINVAL;
    t -= off;
    if (t < 0 || (uint64_t)t > GBX_TIME_MAX_SECS)
        return -ERANGE;
    *out = (int64_t)t * 1000000000 + frac;
    return 0;
}
