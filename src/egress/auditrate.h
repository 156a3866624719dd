/* SPDX-License-Identifier: MIT */
/* The egress audit's rate limit: a token bucket per sandbox per kind of row (DNS answers,
 * connections, intercepted requests). A row the bucket has a token for is written; one it
 * has none for is counted by its decision (verdict.h), and the counts are written as one summary
 * row
 * ("egress.dns.suppressed") when the window ends or the sandbox goes: nothing vanishes
 * without a count. Pure: no I/O, no clock of its own (the caller passes the time). */
#ifndef GBX_EGRESS_AUDITRATE_H
#define GBX_EGRESS_AUDITRATE_H

#include <stdint.h>

#include "egress/verdict.h"

/* Rows per second per sandbox per kind, and the burst, when the daemon does not say. */
#define GBX_EGRESS_AUDIT_RATE 20
#define GBX_EGRESS_AUDIT_BURST 100
/* How long rows may be held back before their summary is written. */
#define GBX_EGRESS_AUDIT_WINDOW_NS (10ll * 1000000000)

struct gbx_egress_bucket {
    double tokens;   /* rows that may be written now (at most the burst) */
    int64_t last_ns; /* when tokens was last brought up to date (0: never: full) */
    uint64_t held[GBX_EGRESS_NVERDICTS]; /* rows held back since since_ns, by decision */
    int64_t since_ns; /* the first held-back row's time (realtime), 0 when none */
};

/* 1 when a row may be written at now_ns (monotonic), taking its token; 0 when it is to be
 * held back (the caller then counts it with gbx_egress_bucket_hold). rate 0: no limit. */
int gbx_egress_bucket_take(struct gbx_egress_bucket *b, int64_t now_ns, unsigned rate,
                           unsigned burst);
/* Count a row that was held back (v: its decision), at wall time real_ns. */
void gbx_egress_bucket_hold(struct gbx_egress_bucket *b, enum gbx_egress_verdict v,
                            int64_t real_ns);
/* The summary of what was held back, or 0 when nothing was: "4,980 more queries (4,975
 * denied) not recorded individually in the last 10 s" in buf (", 3 upstream failed" and ", 2
 * client errors" after "denied" when there were any); the counts by decision in held[], and
 * the bucket's reset. what is the plural noun ("queries"), real_ns the time now. */
int gbx_egress_bucket_summary(struct gbx_egress_bucket *b, const char *what, int64_t real_ns,
                              char *buf, unsigned bufsz, uint64_t held[GBX_EGRESS_NVERDICTS]);

#endif
