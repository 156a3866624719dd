/* SPDX-License-Identifier: MIT */
/* What a sandbox may use and what an API key may hold (docs/security.md "Defaults, ceilings
 * and quotas"): the limits a create that does not ask gets (--default-*), the most a create
 * may ask for (--max-*), and what the live sandboxes, snapshots, sessions and artifacts of one
 * key may add up to (--quota-*). Pure functions over values: no I/O, no server. */
#ifndef GBX_CORE_LIMITS_H
#define GBX_CORE_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "sandbox/cgroup.h"

/* Per API key. 0 in a field: that quota is off. */
struct gbx_quota {
    uint64_t sandboxes;      /* live sandboxes (running, paused, hibernated, being made) */
    uint64_t memory;         /* the sum of their memory limits, bytes */
    uint64_t disk;           /* the sum of their disk (writable layer) sizes, bytes */
    uint64_t snapshots;      /* snapshots and forks kept (not hibernation images) */
    uint64_t sessions;       /* sessions kept */
    uint64_t artifacts;      /* artifacts kept */
    uint64_t artifact_bytes; /* their total size, bytes */
    uint64_t templates;      /* its own templates (uploads; names per key) */
};

struct gbx_limits {
    struct gbx_cg_limits dflt; /* what a create that does not ask gets (0: no limit) */
    uint64_t dflt_disk;
    struct gbx_cg_limits max; /* the most a create may ask for (0: no maximum) */
    uint64_t max_disk;
    uint64_t max_timeout_ms; /* 0: none (a create may ask for no timeout) */
    struct gbx_quota quota;  /* every key's, unless its own says otherwise */
};

/* The shipped defaults, from the host's size: memory 512M (at most 8G, at most half the
 * host's RAM), pids 256 (at most 4096), 1 CPU (at most every CPU of the host), disk 1G (at
 * most 64G); per key 64 sandboxes, 32G of memory, 64G of disk (64 sandboxes of the default
 * limits), 256 snapshots, 256 sessions, 10000 artifacts of 16G in all, 32 templates. ram_bytes and
 * ncpus: the host's (0: unknown). */
void gbx_limits_init(struct gbx_limits *lim, uint64_t ram_bytes, unsigned ncpus);
/* Apply one daemon setting ("default-memory", "max-pids", "quota-sandboxes", ...; the value
 * as typed). 0 applied, 1 not a setting of limits (key unknown here), -1 with a message in
 * why. */
int gbx_limits_set(struct gbx_limits *lim, const char *key, const char *value, char *why,
                   size_t whysz);
/* The value in force of one such setting, as a person would write it ("512M", "0" for
 * none) into buf: 0, or 1 for a key that is not one of limits'. */
int gbx_limits_get(const struct gbx_limits *lim, const char *key, char *buf, size_t bufsz);
/* After every setting: a default above its maximum is an error (-1, why says which). */
int gbx_limits_check(const struct gbx_limits *lim, char *why, size_t whysz);
/* Parse "sandboxes=10,memory=4G,..." (the names of struct gbx_quota; "artifact-bytes") over
 * *q: the fields named change. 0 or -1 with why. */
int gbx_quota_parse(const char *text, struct gbx_quota *q, char *why, size_t whysz);
/* The quota as JSON text {"sandboxes": N, ...} (malloc'd). */
char *gbx_quota_format(const struct gbx_quota *q);

/* What a create asked for (0: not asked) against the maximums, then the defaults for what it
 * did not ask: *cg, *disk and *timeout_ms are updated in place. -1 with *err (INVALID, naming
 * the field and the maximum) when a value is above its maximum. timeout_asked: the request
 * said "timeout" (0 is then "no timeout", above any maximum). */
int gbx_limits_resolve(const struct gbx_limits *lim, struct gbx_cg_limits *cg, uint64_t *disk,
                       uint64_t *timeout_ms, int timeout_asked, struct gbx_err **err) GBX_WUR;
/* A timeout set later (0: none): -1 with *err (INVALID) above the maximum. */
int gbx_limits_check_timeout(const struct gbx_limits *lim, uint64_t timeout_ms,
                             struct gbx_err **err) GBX_WUR;

/* What one key holds now. */
struct gbx_quota_use {
    uint64_t sandboxes, memory, disk, snapshots, sessions, artifacts, artifact_bytes, templates;
};
/* Would adding add to use exceed q? -1 with *err (LIMIT, errno EDQUOT: "quota 'sandboxes' of
 * key 'k' reached: 64 of 64 live sandboxes; ...") for the first quota it would exceed. Only
 * the fields add sets (non-zero) are checked. */
int gbx_quota_admit(const struct gbx_quota *q, const char *key, const struct gbx_quota_use *use,
                    const struct gbx_quota_use *add, struct gbx_err **err) GBX_WUR;

/* "512M", "8G", "1.5G" or a number of bytes: a size as a person would write it. */
void gbx_limits_fmt_size(uint64_t bytes, char *buf, size_t bufsz);

#endif
