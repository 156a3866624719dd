/* SPDX-License-Identifier: MIT */
#include "base/ratelimit.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

void gbx_ratelimit_init(struct gbx_ratelimit *rl, double rate, double burst)
{
    gbx_ratelimit_release(rl);
    rl->rate = rate > 0 ? rate : 0;
    rl->burst = burst >= 1 ? burst : (rl->rate * 2 < 1 ? 1 : rl->rate * 2);
}

void gbx_ratelimit_release(struct gbx_ratelimit *rl)
{
    free(rl->buckets);
    rl->buckets = NULL;
}

int gbx_ratelimit_take(struct gbx_ratelimit *rl, const char *key, int64_t now_ns,
                       unsigned *retry_after)
{
    if (rl->rate <= 0)
        return 0;
    if (rl->buckets == NULL)
        rl->buckets = gbx_xcalloc(GBX_RATELIMIT_KEYS, sizeof(*rl->buckets));
    if (now_ns <= 0)
        now_ns = 1; /* at_ns 0 marks a free slot */
    char k[GBX_RATELIMIT_KEY_MAX];
    snprintf(k, sizeof(k), "%s", key);
    struct gbx_ratelimit_bucket *b = NULL, *oldest = &rl->buckets[0];
    for (size_t i = 0; i < GBX_RATELIMIT_KEYS && b == NULL; i++) {
        struct gbx_ratelimit_bucket *c = &rl->buckets[i];
        if (c->at_ns && strcmp(c->key, k) == 0)
            b = c;
        else if (c->at_ns < oldest->at_ns)
            oldest = c;
    }
    if (b == NULL) {
        b = oldest;
        memcpy(b->key, k, sizeof(b->key));
        b->tokens = rl->burst;
        b->at_ns = now_ns;
    }
    if (now_ns > b->at_ns)
        b->tokens += (double)(now_ns - b->at_ns) / 1e9 * rl->rate;
    if (b->tokens > rl->burst)
        b->tokens = rl->burst;
    if (now_ns > b->at_ns)
        b->at_ns = now_ns;
    if (b->tokens >= 1) {
        b->tokens -= 1;
        return 0;
    }
    double wait = ceil((1 - b->tokens) / rl->rate);
    *retry_after = wait > 3600 ? 3600 : wait < 1 ? 1 : (unsigned)wait;
    return -1;
}

static int parse_num(const char *s, const char **end, double min, double max, double *out)
{
    char *e = NULL;
    if (*s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    double v = strtod(s, &e);
    if (errno || e == s || !(v >= min && v <= max))
        return -EINVAL;
    *end = e;
    *out = v;
    return 0;
}

int gbx_ratelimit_parse(const char *s, double *rate, double *burst)
{
    *rate = 0;
    *burst = 0;
    if (s == NULL || *s == '\0')
        return -EINVAL;
    if (strcmp(s, "off") == 0)
        return 0;
    const char *p = s;
    double r = 0, b = 0;
    if (parse_num(p, &p, 0, 1e6, &r) < 0)
        return -EINVAL;
    if (strncmp(p, "/s", 2) == 0 && (p[2] == '\0' || p[2] == ':'))
        p += 2;
    if (*p == '/' || *p == ':') {
        if (parse_num(p + 1, &p, 1, 1e9, &b) < 0)
            return -EINVAL;
    }
    if (*p != '\0')
        return -EINVAL;
    *rate = r;
    *burst = b;
    return 0;
}
