/* SPDX-License-Identifier: MIT */
#include "egress/auditrate.h"

#include <stdio.h>

int gbx_egress_bucket_take(struct gbx_egress_bucket *b, int64_t now_ns, unsigned rate,
                           unsigned burst)
{
    if (rate == 0)
        return 1;
    if (burst == 0)
        burst = 1;
    if (b->last_ns == 0) {
        b->tokens = burst;
        b->last_ns = now_ns;
    } else if (now_ns > b->last_ns) { /* (a time before the last gives nothing) */
        b->tokens += (double)(now_ns - b->last_ns) * rate / 1e9;
        if (b->tokens > burst)
            b->tokens = burst;
        b->last_ns = now_ns;
    }
    if (b->tokens < 1.0)
        return 0;
    b->tokens -= 1.0;
    return 1;
}

void gbx_egress_bucket_hold(struct gbx_egress_bucket *b, int denied, int64_t real_ns)
{
    if (b->allowed == 0 && b->denied == 0)
        b->since_ns = real_ns;
    if (denied)
        b->denied++;
    else
        b->allowed++;
}

/* n with thousands separators: "4,980" */
static void thousands(uint64_t n, char *buf, unsigned bufsz)
{
    char digits[32];
    int len = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n);
    unsigned o = 0;
    for (int i = 0; i < len && o + 1 < bufsz; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 2 < bufsz)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

int gbx_egress_bucket_summary(struct gbx_egress_bucket *b, const char *what, int64_t real_ns,
                              char *buf, unsigned bufsz, uint64_t *allowed, uint64_t *denied)
{
    uint64_t total = b->allowed + b->denied;
    if (total == 0)
        return 0;
    *allowed = b->allowed;
    *denied = b->denied;
    int64_t secs = (real_ns - b->since_ns + 999999999) / 1000000000;
    if (secs < 1)
        secs = 1;
    char t[32], d[32];
    thousands(total, t, sizeof(t));
    thousands(b->denied, d, sizeof(d));
    snprintf(buf, bufsz, "%s more %s (%s denied) not recorded individually in the last %lld s", t,
             what, d, (long long)secs);
    b->allowed = b->denied = 0;
    b->since_ns = 0;
    return 1;
}
