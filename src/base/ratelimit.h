/* SPDX-License-Identifier: MIT */
/* Token buckets per key (an API key's name): at most `rate` requests a second on average and
 * `burst` at once. Pure: time is the caller's (nanoseconds of a monotonic clock), nothing is
 * printed; unit-tested (tests/unit/test_ratelimit.c). The buckets of the GBX_RATELIMIT_KEYS
 * most recently active keys are kept; a key beyond that takes the least recently used slot
 * and starts with a full bucket (a client cannot gain by it: it would need that many active
 * keys, each one a credential). */
#ifndef GBX_BASE_RATELIMIT_H
#define GBX_BASE_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

#define GBX_RATELIMIT_KEYS 1024
#define GBX_RATELIMIT_KEY_MAX 128 /* longer keys are cut (names are at most 63 bytes) */

struct gbx_ratelimit_bucket {
    char key[GBX_RATELIMIT_KEY_MAX];
    double tokens;
    int64_t at_ns; /* 0: an unused slot */
};

struct gbx_ratelimit {
    double rate;                          /* tokens per second; 0: no limit */
    double burst;                         /* the bucket's size, >= 1 */
    struct gbx_ratelimit_bucket *buckets; /* GBX_RATELIMIT_KEYS of them, allocated on first use */
};

/* A limit of rate requests/s with a burst of burst (0: twice the rate, at least 1); rate 0
 * means no limit. An all-zero struct is a valid "no limit". */
void gbx_ratelimit_init(struct gbx_ratelimit *rl, double rate, double burst);
void gbx_ratelimit_release(struct gbx_ratelimit *rl);

/* Take one token for key at now_ns: 0, or -1 with the whole seconds to wait (at least 1) in
 * *retry_after. */
int gbx_ratelimit_take(struct gbx_ratelimit *rl, const char *key, int64_t now_ns,
                       unsigned *retry_after) GBX_WUR;

/* Parse a limit: "N" (requests/s), "N/BURST", "N/s", "N/s:BURST", "N:BURST" (the form of
 * GLOVEBOX_E2B_RATE), "0" or "off" (no limit). N from 0 to 1e6, BURST from 1 to 1e9; a
 * missing burst is 0 (twice the rate). 0 or -EINVAL. */
int gbx_ratelimit_parse(const char *s, double *rate, double *burst) GBX_WUR;

#endif
