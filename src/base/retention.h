/* SPDX-License-Identifier: MIT */
/* Retention policies: which of a set of items (snapshots, artifacts, session logs, stopped
 * sandboxes) a keep-rule by age, count and total size lets go. Pure; the daemon's collector
 * (src/core/gc.c) applies it. */
#ifndef GBX_BASE_RETENTION_H
#define GBX_BASE_RETENTION_H

#include <stddef.h>
#include <stdint.h>

struct gbx_retention_rule {
    uint64_t max_age_ms; /* 0: no age limit */
    uint64_t max_count;  /* 0: no count limit */
    uint64_t max_bytes;  /* 0: no size limit */
};

/* Parse "age=7d,count=100,size=10G" (any subset, in any order; "" or "none" keeps
 * everything). Durations take ms, s, m, h, d; sizes binary units. allow_size: 0 when the
 * items have no size (then size= is an error). 0, or -1 with a message in err. */
int gbx_retention_parse(const char *s, int allow_size, struct gbx_retention_rule *r, char *err,
                        size_t errsz);
/* The rule as text (the form parse takes), into buf. */
void gbx_retention_format(const struct gbx_retention_rule *r, char *buf, size_t bufsz);

struct gbx_retention_item {
    int64_t ts_ns;  /* its age counts from here (created, or last active) */
    uint64_t bytes; /* its size, 0 if sizeless */
    int pinned;     /* in use: never let go, but counted */
    /* out */
    const char *drop; /* NULL: kept; else why: "age", "count" or "size" */
};

/* Mark the items the rule lets go. Items are ranked newest first (ties: input order); an
 * item goes when it is older than max_age, or more than max_count items are newer or as new,
 * or the items newer or as new, itself included, hold more than max_bytes. Pinned items
 * never go. Returns how many go. */
size_t gbx_retention_apply(const struct gbx_retention_rule *r, int64_t now_ns,
                           struct gbx_retention_item *items, size_t n);

#endif
