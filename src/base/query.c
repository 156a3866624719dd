/* SPDX-License-Identifier: MIT */
#include "base/query.h"

#include <errno.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/parse.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *gbx_pct_decode(const char *s, size_t n, int plus)
{
    char *out = gbx_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus) {
            out[o++] = ' ';
        } else if (c == '\0') {
            free(out);
            return NULL;
        } else {
            out[o++] = c;
        }
    }
    out[o] = '\0';
    return out;
}

/* Decode s in place (the text only shrinks). The native reading is libevent's decoder
 * (evhttp_parse_query_str's): '+' is a space and %XX its byte, a '%' not followed by two hex
 * digits stays as it is, and %00 ends the text. The form reading is gbx_pct_decode's, which
 * refuses both: 0, or -1 for a bad escape. */
static int decode(char *s, int form)
{
    char *d = form ? gbx_pct_decode(s, strlen(s), 1) : evhttp_uridecode(s, 1, NULL);
    if (d == NULL && form)
        return -1;
    GBX_BUG_ON(d == NULL);
    memmove(s, d, strlen(d) + 1);
    free(d);
    return 0;
}

/* Client text as a message may show it: at most 64 bytes, and a byte that is not printable
 * ASCII as '?' (messages go into JSON, which wants UTF-8). */
static const char *shown(const char *s, char out[72])
{
    size_t i = 0;
    for (; i < 64 && s[i]; i++)
        out[i] = (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f ? s[i] : '?';
    strcpy(out + i, s[i] ? "..." : "");
    return out;
}

static int malformed(const char *pair, const char *why, struct gbx_err **err)
{
    char buf[72];
    return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "malformed query string: '%s' %s",
                       shown(pair, buf), why);
}

/* "unknown query parameter 'x' (expected a, b, c)": the names of the table. */
static int unknown(const char *name, const struct gbx_query_param *params, size_t n,
                   struct gbx_err **err)
{
    gbx_autofree char *list = gbx_xstrdup(n ? "" : "none");
    for (size_t i = 0; i < n; i++) {
        char *l = gbx_asprintf("%s%s%s", list, i ? ", " : "", params[i].name);
        free(list);
        list = l;
    }
    char buf[72];
    return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "unknown query parameter '%s' (expected %s)",
                       shown(name, buf), list);
}

/* An integer outside what p takes (or none at all): say the range. A clamped parameter
 * takes any integer from min up, so only its lower end is said. */
static int bad_u64(const struct gbx_query_param *p, struct gbx_err **err)
{
    if (!p->clamp)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "'%s' must be an integer from %" PRIu64 " to %" PRIu64, p->name, p->min,
                           p->max);
    if (p->min <= 1)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'%s' must be a %s integer", p->name,
                           p->min == 0 ? "non-negative" : "positive");
    return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'%s' must be an integer of at least %" PRIu64,
                       p->name, p->min);
}

/* Check value (which lives as long as the struct gbx_query) against p and store it. */
static int apply(const struct gbx_query_param *p, const char *value, struct gbx_err **err)
{
    switch (p->kind) {
    case GBX_QUERY_U64: {
        uint64_t v;
        if (gbx_parse_u64(value, p->min, p->clamp ? UINT64_MAX : p->max, &v) < 0)
            return bad_u64(p, err);
        *(uint64_t *)p->out = p->clamp && v > p->max ? p->max : v;
        return 0;
    }
    case GBX_QUERY_STR:
        *(const char **)p->out = value;
        return 0;
    case GBX_QUERY_BOOL:
        if (strcmp(value, "1") == 0 || strcmp(value, "true") == 0)
            *(int *)p->out = 1;
        else if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0)
            *(int *)p->out = 0;
        else
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'%s' must be 1, true, 0 or false",
                               p->name);
        return 0;
    case GBX_QUERY_STRS:
        if (*p->count >= p->cap)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'%s' may be given at most %zu times",
                               p->name, p->cap);
        ((const char **)p->out)[(*p->count)++] = value;
        return 0;
    case GBX_QUERY_FN: {
        const char *why = p->fn(p->out, value);
        if (why)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'%s' must be %s", p->name, why);
        return 0;
    }
    }
    GBX_BUG_ON(1); /* a kind this file does not know: the table is wrong */
    return -1;
}

int gbx_query_parse(struct gbx_query *q, const char *query, const struct gbx_query_param *params,
                    size_t n, unsigned flags, struct gbx_err **err)
{
    gbx_query_release(q);
    for (size_t i = 0; i < n; i++)
        if (params[i].kind == GBX_QUERY_STRS)
            *params[i].count = 0;
    if (query == NULL || *query == '\0')
        return 0;
    int form = (flags & GBX_QUERY_FORM) != 0;
    q->buf = gbx_xstrdup(query);
    for (char *p = q->buf; p;) {
        char *pair = p, *amp = strchr(p, '&');
        p = amp ? amp + 1 : NULL;
        if (amp)
            *amp = '\0';
        /* evhttp_parse_query_str stops at a trailing '&' but refuses any other empty pair */
        if (*pair == '\0') {
            if (form || p == NULL)
                continue;
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "malformed query string: an empty parameter (expected NAME=VALUE "
                               "pairs joined by '&')");
        }
        char *eq = strchr(pair, '=');
        if (!form && eq == NULL)
            return malformed(pair, "is not NAME=VALUE", err);
        if (!form && eq == pair)
            return malformed(pair, "has no name (expected NAME=VALUE)", err);
        char *value = eq ? eq + 1 : pair + strlen(pair);
        if (eq)
            *eq = '\0';
        if ((form && decode(pair, 1) < 0) || decode(value, form) < 0) {
            if (eq)
                *eq = '='; /* the message shows the pair as it came (a failed decode left it) */
            return malformed(pair, "holds a bad escape (expected %XX, and not %00)", err);
        }
        const struct gbx_query_param *pp = NULL;
        for (size_t i = 0; i < n && pp == NULL; i++)
            if (strcmp(params[i].name, pair) == 0)
                pp = &params[i];
        if (pp == NULL) {
            if (flags & GBX_QUERY_IGNORE_UNKNOWN)
                continue;
            return unknown(pair, params, n, err);
        }
        if (apply(pp, value, err) < 0)
            return -1;
    }
    return 0;
}

void gbx_query_release(struct gbx_query *q)
{
    free(q->buf);
    q->buf = NULL;
}
