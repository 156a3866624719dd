/* SPDX-License-Identifier: MIT */
/* Parsers for the values people type: sizes, CPU counts, durations, KEY=VALUE pairs.
 * Pure functions; -EINVAL on malformed input, -ERANGE when out of range. */
#ifndef GBX_BASE_PARSE_H
#define GBX_BASE_PARSE_H

#include <stdint.h>

/* "1048576", "512k", "64M", "1G", "1.5G", "2T" (binary units, optional trailing "B" or
 * "iB"). Result in bytes. */
int gbx_parse_size(const char *s, uint64_t *out);
/* "1", "0.5", "2.25" CPUs -> thousandths of a CPU (500 = half a CPU). At most 1024 CPUs. */
int gbx_parse_cpus(const char *s, uint32_t *out);
/* "30", "30s", "1500ms", "5m", "2h" -> milliseconds. A bare number is seconds. */
int gbx_parse_duration_ms(const char *s, uint64_t *out);
/* "123" -> unsigned integer within [min, max]. */
int gbx_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* A point in time, as nanoseconds since the epoch: unix seconds ("1764788400", digits only)
 * or RFC 3339 ("2026-12-03T19:00:00Z", "2026-12-03T20:00:00.5+01:00": a 'Z' or an offset is
 * required, a fraction is optional). From 1970 to 2262-04-11 (nanoseconds in an int64_t);
 * -ERANGE beyond. */
#define GBX_TIME_MAX_SECS 9223372035ULL
int gbx_parse_time_ns(const char *s, int64_t *out);
/* A name for a sandbox, template or snapshot: 1-63 of [a-z0-9-], not starting with '-'
 * (usable as a hostname label, a cgroup and a directory name). 0 or -EINVAL. */
int gbx_name_valid(const char *name);
/* "KEY=VALUE" with a valid environment name: [A-Za-z_][A-Za-z0-9_]*. 0 or -EINVAL. */
int gbx_env_valid(const char *kv);

/* Percent-encode s for a URL (query values, path segments): unreserved characters and those in
 * keep (may be NULL; "/" for a path) stay. malloc'd; aborts on exhaustion. */
char *gbx_url_escape(const char *s, const char *keep);

#endif
