/* SPDX-License-Identifier: MIT */
/* Clocks, in nanoseconds. */
#ifndef GBX_BASE_CLOCK_H
#define GBX_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Wall-clock time (for records people read). */
static inline int64_t gbx_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Monotonic time (for deadlines and durations). */
static inline int64_t gbx_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "2026-11-30T01:02:03.456Z" (UTC, milliseconds), malloc'd. */
char *gbx_rfc3339(int64_t ns);

#endif
