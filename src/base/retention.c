/* SPDX-License-Identifier: MIT */
#include "base/retention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"

static int parse_age(const char *v, uint64_t *ms)
{
    size_t n = strlen(v);
    if (n >= 2 && v[n - 1] == 'd') {
        char num[32];
        if (n - 1 >= sizeof(num))
            return -1;
        memcpy(num, v, n - 1);
        num[n - 1] = '\0';
        uint64_t days;
        if (gbx_parse_u64(num, 1, 36500, &days) < 0)
            return -1;
        *ms = days * 86400000ull;
        return 0;
    }
    return gbx_parse_duration_ms(v, ms) < 0 || *ms == 0 ? -1 : 0;
}

int gbx_retention_parse(const char *s, int allow_size, struct gbx_retention_rule *r, char *err,
                        size_t errsz)
{
    memset(r, 0, sizeof(*r));
    if (s == NULL || s[0] == '\0' || strcmp(s, "none") == 0)
        return 0;
    char buf[256];
    if (strlen(s) >= sizeof(buf)) {
        snprintf(err, errsz, "retention rule too long");
        return -1;
    }
    snprintf(buf, sizeof(buf), "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (eq == NULL)
            goto bad;
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        if (strcmp(k, "age") == 0) {
            if (parse_age(v, &r->max_age_ms) < 0) {
                snprintf(err, errsz, "age must be a duration like 12h or 7d, not '%s'", v);
                return -1;
            }
        } else if (strcmp(k, "count") == 0) {
            if (gbx_parse_u64(v, 1, 100000000, &r->max_count) < 0) {
                snprintf(err, errsz, "count must be a number of at least 1, not '%s'", v);
                return -1;
            }
        } else if (strcmp(k, "size") == 0 && allow_size) {
            if (gbx_parse_size(v, &r->max_bytes) < 0 || r->max_bytes == 0) {
                snprintf(err, errsz, "size must be a size like 10G, not '%s'", v);
                return -1;
            }
        } else {
            goto bad;
        }
    }
    return 0;
bad:
    snprintf(err, errsz, "expected age=DURATION,count=N%s (any of them), or none",
             allow_size ? ",size=SIZE" : "");
    return -1;
}

void gbx_retention_format(const struct gbx_retention_rule *r, char *buf, size_t bufsz)
{
    size_t off = 0;
    buf[0] = '\0';
    /* whole seconds as such; anything finer in ms, so the text parses back to the same rule
     * (age=1500ms is not 1s, and age=500ms not 0s, which parse rejects) */
    if (r->max_age_ms % 1000 == 0 && r->max_age_ms)
        off += (size_t)snprintf(buf + off, bufsz - off, "age=%llus",
                                (unsigned long long)(r->max_age_ms / 1000));
    else if (r->max_age_ms)
        off += (size_t)snprintf(buf + off, bufsz - off, "age=%llums",
                                (unsigned long long)r->max_age_ms);
    if (r->max_count && off < bufsz)
        off += (size_t)snprintf(buf + off, bufsz - off, "%scount=%llu", off ? "," : "",
                                (unsigned long long)r->max_count);
    if (r->max_bytes && off < bufsz)
        off += (size_t)snprintf(buf + off, bufsz - off, "%ssize=%llu", off ? "," : "",
                                (unsigned long long)r->max_bytes);
    if (off == 0)
        snprintf(buf, bufsz, "none");
}

struct ranked {
    struct gbx_retention_item *it;
    size_t idx;
};

static int newest_first(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->it->ts_ns != y->it->ts_ns)
        return x->it->ts_ns > y->it->ts_ns ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

size_t gbx_retention_apply(const struct gbx_retention_rule *r, int64_t now_ns,
                           struct gbx_retention_item *items, size_t n)
{
    if (n == 0)
        return 0;
    struct ranked *v = calloc(n, sizeof(*v));
    if (v == NULL)
        return 0;
    for (size_t i = 0; i < n; i++) {
        items[i].drop = NULL;
        v[i] = (struct ranked){&items[i], i};
    }
    qsort(v, n, sizeof(*v), newest_first);
    uint64_t bytes = 0;
    size_t dropped = 0;
    for (size_t rank = 0; rank < n; rank++) {
        struct gbx_retention_item *it = v[rank].it;
        bytes += it->bytes;
        const char *why = NULL;
        if (r->max_age_ms && now_ns - it->ts_ns > (int64_t)(r->max_age_ms * 1000000ull))
            why = "age";
        else if (r->max_count && rank >= r->max_count)
            why = "count";
        else if (r->max_bytes && bytes > r->max_bytes)
            why = "size";
        if (why && !it->pinned) {
            it->drop = why;
            dropped++;
        }
    }
    free(v);
    return dropped;
}
