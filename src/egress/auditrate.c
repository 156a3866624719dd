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

static uint64_t held_total(const struct gbx_egress_bucket *b)
{
    uint64_t total = 0;
    for (int v = 0; v < GBX_EGRESS_NVERDICTS; v++)
        total += b->held[v];
    return total;
}

void gbx_egress_bucket_hold(struct gbx_egress_bucket *b, enum gbx_egress_verdict v, int64_t real_ns)
{
    if (held_total(b) == 0)
        b->since_ns = real_ns;
    if ((unsigned)v >= GBX_EGRESS_NVERDICTS)
        v = GBX_EGRESS_DENY;
    b->held[v]++;
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
                              char *buf, unsigned bufsz, uint64_t held[GBX_EGRESS_NVERDICTS])
{
    uint64_t total = held_total(b);
    if (total == 0)
        return 0;
    for (int v = 0; v < GBX_EGRESS_NVERDICTS; v++)
        held[v] = b->held[v];
    int64_t secs = (real_ns - b->since_ns + 999999999) / 1000000000;
    if (secs < 1)
        secs = 1;
    char t[32], d[32], f[64] = "", e[64] = "";
    thousands(total, t, sizeof(t));
    thousands(b->held[GBX_EGRESS_DENY], d, sizeof(d));
    uint64_t nf = b->held[GBX_EGRESS_UPSTREAM_FAILED], ne = b->held[GBX_EGRESS_CLIENT_ERROR];
    if (nf) {
        char n[32];
        thousands(nf, n, sizeof(n));
        snprintf(f, sizeof(f), ", %s upstream failed", n);
    }
    if (ne) {
        char n[32];
        thousands(ne, n, sizeof(n));
        snprintf(e, sizeof(e), ", %s client error%s", n, ne == 1 ? "" : "s");
    }
    snprintf(buf, bufsz, "%s more %s (%s denied%s%s) not recorded individually in the last %lld s",
             t, what, d, f, e, (long long)secs);
    for (int v = 0; v < GBX_EGRESS_NVERDICTS; v++)
        b->held[v] = 0;
    b->since_ns = 0;
    return 1;
}
