/* SPDX-License-Identifier: MIT */
#include "core/limits.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/parse.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define TIB (1ull << 40)
#define MAX_TIMEOUT_MS (30ull * 24 * 3600 * 1000) /* what a request can say at all */

void gbx_limits_init(struct gbx_limits *lim, uint64_t ram_bytes, unsigned ncpus)
{
    memset(lim, 0, sizeof(*lim));
    uint64_t max_mem = 8 * GIB;
    if (ram_bytes && ram_bytes / 2 < max_mem)
        max_mem = ram_bytes / 2 < 64 * MIB ? 64 * MIB : ram_bytes / 2;
    lim->max.memory_bytes = max_mem;
    lim->max.pids = 4096;
    lim->max.cpu_millis = (ncpus ? ncpus : 1) * 1000u;
    lim->max_disk = 64 * GIB;
    lim->dflt.memory_bytes = 512 * MIB < max_mem ? 512 * MIB : max_mem;
    lim->dflt.pids = 256;
    lim->dflt.cpu_millis = 1000;
    lim->dflt_disk = 1 * GIB;
    lim->quota = (struct gbx_quota){.sandboxes = 64,
                                    .memory = 32 * GIB, /* 64 of the default 512M */
                                    .disk = 64 * GIB,   /* 64 of the default 1G */
                                    .snapshots = 256,
                                    .sessions = 256,
                                    .artifacts = 10000,
                                    .artifact_bytes = 16 * GIB,
                                    .templates = 32};
}

void gbx_limits_fmt_size(uint64_t b, char *buf, size_t bufsz)
{
    static const struct {
        uint64_t unit;
        char c;
    } units[] = {{TIB, 'T'}, {GIB, 'G'}, {MIB, 'M'}, {KIB, 'K'}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        uint64_t u = units[i].unit;
        if (b < u)
            continue;
        if (b % u == 0) {
            snprintf(buf, bufsz, "%" PRIu64 "%c", b / u, units[i].c);
            return;
        }
        if ((b * 10) / 10 == b && (b * 10) % u == 0) { /* one decimal, exactly */
            snprintf(buf, bufsz, "%" PRIu64 ".%" PRIu64 "%c", b / u, (b * 10 / u) % 10, units[i].c);
            return;
        }
    }
    snprintf(buf, bufsz, "%" PRIu64, b);
}

static void fmt_cpus(uint32_t millis, char *buf, size_t bufsz)
{
    if (millis % 1000 == 0)
        snprintf(buf, bufsz, "%u", millis / 1000);
    else
        snprintf(buf, bufsz, "%u.%03u", millis / 1000, millis % 1000);
}

/* "0", "none" or "off": no limit; else a value parsed as its kind. */
static int is_off(const char *v)
{
    return strcmp(v, "0") == 0 || strcmp(v, "none") == 0 || strcmp(v, "off") == 0;
}

enum kind { SIZE, COUNT, CPUS, DURATION };

static int parse_value(enum kind k, const char *v, uint64_t *out)
{
    if (is_off(v)) {
        *out = 0;
        return 0;
    }
    uint32_t millis;
    switch (k) {
    case SIZE:
        return gbx_parse_size(v, out) < 0 || *out < MIB ? -1 : 0;
    case COUNT:
        return gbx_parse_u64(v, 1, 4194304, out) < 0 ? -1 : 0;
    case CPUS:
        if (gbx_parse_cpus(v, &millis) < 0)
            return -1;
        *out = millis;
        return 0;
    case DURATION:
        return gbx_parse_duration_ms(v, out) < 0 || *out < 1000 || *out > MAX_TIMEOUT_MS ? -1 : 0;
    }
    return -1;
}

static const char *kind_hint(enum kind k)
{
    switch (k) {
    case SIZE:
        return "a size of at least 1M (e.g. 512M, 8G), or 0 for none";
    case COUNT:
        return "a number from 1 to 4194304, or 0 for none";
    case CPUS:
        return "a number of CPUs (e.g. 1, 0.5), or 0 for none";
    case DURATION:
        return "a duration from 1s to 30 days (e.g. 1h, 600s), or 0 for none";
    }
    return "";
}

/* The settings of struct gbx_limits that are one uint64_t each (the CPUs are not). */
static const struct {
    const char *key;
    enum kind kind;
    size_t off; /* of the field in struct gbx_limits */
} fields[] = {
    {"default-memory", SIZE, offsetof(struct gbx_limits, dflt.memory_bytes)},
    {"default-pids", COUNT, offsetof(struct gbx_limits, dflt.pids)},
    {"default-disk", SIZE, offsetof(struct gbx_limits, dflt_disk)},
    {"max-memory", SIZE, offsetof(struct gbx_limits, max.memory_bytes)},
    {"max-pids", COUNT, offsetof(struct gbx_limits, max.pids)},
    {"max-disk", SIZE, offsetof(struct gbx_limits, max_disk)},
    {"max-timeout", DURATION, offsetof(struct gbx_limits, max_timeout_ms)},
    {"quota-sandboxes", COUNT, offsetof(struct gbx_limits, quota.sandboxes)},
    {"quota-memory", SIZE, offsetof(struct gbx_limits, quota.memory)},
    {"quota-disk", SIZE, offsetof(struct gbx_limits, quota.disk)},
    {"quota-snapshots", COUNT, offsetof(struct gbx_limits, quota.snapshots)},
    {"quota-sessions", COUNT, offsetof(struct gbx_limits, quota.sessions)},
    {"quota-artifacts", COUNT, offsetof(struct gbx_limits, quota.artifacts)},
    {"quota-artifact-bytes", SIZE, offsetof(struct gbx_limits, quota.artifact_bytes)},
    {"quota-templates", COUNT, offsetof(struct gbx_limits, quota.templates)},
};

int gbx_limits_set(struct gbx_limits *lim, const char *key, const char *value, char *why,
                   size_t whysz)
{
    uint64_t v;
    if (strcmp(key, "default-cpus") == 0 || strcmp(key, "max-cpus") == 0) {
        if (parse_value(CPUS, value, &v) < 0) {
            snprintf(why, whysz, "%s must be %s", key, kind_hint(CPUS));
            return -1;
        }
        if (key[0] == 'd')
            lim->dflt.cpu_millis = (uint32_t)v;
        else
            lim->max.cpu_millis = (uint32_t)v;
        return 0;
    }
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (strcmp(fields[i].key, key) != 0)
            continue;
        if (parse_value(fields[i].kind, value, &v) < 0) {
            snprintf(why, whysz, "%s must be %s", key, kind_hint(fields[i].kind));
            return -1;
        }
        *(uint64_t *)((char *)lim + fields[i].off) = v;
        return 0;
    }
    return 1;
}

int gbx_limits_get(const struct gbx_limits *lim, const char *key, char *buf, size_t bufsz)
{
    if (strcmp(key, "default-cpus") == 0 || strcmp(key, "max-cpus") == 0) {
        uint32_t m = key[0] == 'd' ? lim->dflt.cpu_millis : lim->max.cpu_millis;
        if (m == 0)
            snprintf(buf, bufsz, "0");
        else
            fmt_cpus(m, buf, bufsz);
        return 0;
    }
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (strcmp(fields[i].key, key) != 0)
            continue;
        uint64_t v = *(const uint64_t *)((const char *)lim + fields[i].off);
        if (v == 0)
            snprintf(buf, bufsz, "0");
        else if (fields[i].kind == SIZE)
            gbx_limits_fmt_size(v, buf, bufsz);
        else if (fields[i].kind == DURATION)
            snprintf(buf, bufsz, "%" PRIu64 "s", v / 1000);
        else
            snprintf(buf, bufsz, "%" PRIu64, v);
        return 0;
    }
    return 1;
}

static void fmt_count(uint64_t n, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%" PRIu64, n);
}

static void fmt_cpus64(uint64_t millis, char *buf, size_t bufsz)
{
    fmt_cpus((uint32_t)millis, buf, bufsz);
}

/* A default (0: no limit) above its maximum (0: none): -1 with why. */
static int dflt_over(const char *name, uint64_t dflt, uint64_t max,
                     void (*fmt)(uint64_t, char *, size_t), char *why, size_t whysz)
{
    if (max == 0 || (dflt != 0 && dflt <= max))
        return 0;
    char a[32] = "(none)", b[32];
    if (dflt)
        fmt(dflt, a, sizeof(a));
    fmt(max, b, sizeof(b));
    snprintf(why, whysz, "default-%s %s is above max-%s %s%s%s%s", name, a, name, b,
             dflt ? "" : " (no limit by default needs --max-", dflt ? "" : name,
             dflt ? "" : " 0 too)");
    return -1;
}

int gbx_limits_check(const struct gbx_limits *lim, char *why, size_t whysz)
{
    char a[32], b[32];
    if (dflt_over("memory", lim->dflt.memory_bytes, lim->max.memory_bytes, gbx_limits_fmt_size, why,
                  whysz) < 0 ||
        dflt_over("pids", lim->dflt.pids, lim->max.pids, fmt_count, why, whysz) < 0 ||
        dflt_over("cpus", lim->dflt.cpu_millis, lim->max.cpu_millis, fmt_cpus64, why, whysz) < 0)
        return -1;
    if (lim->dflt_disk == 0) {
        snprintf(why, whysz, "default-disk must be a size (the writable layer always has one)");
        return -1;
    }
    if (lim->max_disk && lim->dflt_disk > lim->max_disk) {
        gbx_limits_fmt_size(lim->dflt_disk, a, sizeof(a));
        gbx_limits_fmt_size(lim->max_disk, b, sizeof(b));
        snprintf(why, whysz, "default-disk %s is above max-disk %s", a, b);
        return -1;
    }
    return 0;
}

static const struct {
    const char *name;
    enum kind kind;
    size_t off;
} quota_fields[] = {
    {"sandboxes", COUNT, offsetof(struct gbx_quota, sandboxes)},
    {"memory", SIZE, offsetof(struct gbx_quota, memory)},
    {"disk", SIZE, offsetof(struct gbx_quota, disk)},
    {"snapshots", COUNT, offsetof(struct gbx_quota, snapshots)},
    {"sessions", COUNT, offsetof(struct gbx_quota, sessions)},
    {"artifacts", COUNT, offsetof(struct gbx_quota, artifacts)},
    {"artifact-bytes", SIZE, offsetof(struct gbx_quota, artifact_bytes)},
    {"templates", COUNT, offsetof(struct gbx_quota, templates)},
};
#define NQUOTA (sizeof(quota_fields) / sizeof(quota_fields[0]))

int gbx_quota_parse(const char *text, struct gbx_quota *q, char *why, size_t whysz)
{
    struct gbx_quota out = *q;
    gbx_autofree char *copy = gbx_xstrdup(text);
    char *save = NULL;
    int n = 0;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq == NULL) {
            snprintf(why, whysz, "expected name=value, not '%.64s'", item);
            return -1;
        }
        *eq = '\0';
        size_t i;
        for (i = 0; i < NQUOTA; i++)
            if (strcmp(quota_fields[i].name, item) == 0)
                break;
        if (i == NQUOTA) {
            snprintf(why, whysz,
                     "unknown quota '%.64s' (expected sandboxes, memory, disk, snapshots, "
                     "sessions, artifacts, artifact-bytes, templates)",
                     item);
            return -1;
        }
        uint64_t v;
        if (parse_value(quota_fields[i].kind, eq + 1, &v) < 0) {
            snprintf(why, whysz, "quota %s must be %s", item, kind_hint(quota_fields[i].kind));
            return -1;
        }
        *(uint64_t *)((char *)&out + quota_fields[i].off) = v;
        n++;
    }
    if (n == 0) {
        snprintf(why, whysz, "expected name=value[,name=value...]");
        return -1;
    }
    *q = out;
    return 0;
}

char *gbx_quota_format(const struct gbx_quota *q)
{
    char *out = gbx_xstrdup("{");
    for (size_t i = 0; i < NQUOTA; i++) {
        char *next = gbx_asprintf("%s%s\"%s\": %" PRIu64, out, i ? ", " : "", quota_fields[i].name,
                                  *(const uint64_t *)((const char *)q + quota_fields[i].off));
        free(out);
        out = next;
    }
    char *next = gbx_asprintf("%s}", out);
    free(out);
    return next;
}

static int above(struct gbx_err **err, const char *field, const char *asked, const char *max)
{
    return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'%s' %s exceeds this daemon's maximum of %s",
                       field, asked, max);
}

int gbx_limits_resolve(const struct gbx_limits *lim, struct gbx_cg_limits *cg, uint64_t *disk,
                       uint64_t *timeout_ms, int timeout_asked, struct gbx_err **err)
{
    char a[32], b[32];
    if (lim->max.memory_bytes && cg->memory_bytes > lim->max.memory_bytes) {
        gbx_limits_fmt_size(cg->memory_bytes, a, sizeof(a));
        gbx_limits_fmt_size(lim->max.memory_bytes, b, sizeof(b));
        return above(err, "memory", a, b);
    }
    if (lim->max.pids && cg->pids > lim->max.pids) {
        snprintf(a, sizeof(a), "%" PRIu64, cg->pids);
        snprintf(b, sizeof(b), "%" PRIu64, lim->max.pids);
        return above(err, "pids", a, b);
    }
    if (lim->max.cpu_millis && cg->cpu_millis > lim->max.cpu_millis) {
        fmt_cpus(cg->cpu_millis, a, sizeof(a));
        fmt_cpus(lim->max.cpu_millis, b, sizeof(b));
        return above(err, "cpus", a, b);
    }
    if (lim->max_disk && *disk > lim->max_disk) {
        gbx_limits_fmt_size(*disk, a, sizeof(a));
        gbx_limits_fmt_size(lim->max_disk, b, sizeof(b));
        return above(err, "disk", a, b);
    }
    if (timeout_asked && gbx_limits_check_timeout(lim, *timeout_ms, err) < 0)
        return -1;
    if (cg->memory_bytes == 0)
        cg->memory_bytes = lim->dflt.memory_bytes;
    if (cg->pids == 0)
        cg->pids = lim->dflt.pids;
    if (cg->cpu_millis == 0)
        cg->cpu_millis = lim->dflt.cpu_millis;
    if (*disk == 0)
        *disk = lim->dflt_disk;
    if (!timeout_asked && *timeout_ms == 0)
        *timeout_ms = lim->max_timeout_ms;
    return 0;
}

int gbx_limits_check_timeout(const struct gbx_limits *lim, uint64_t timeout_ms,
                             struct gbx_err **err)
{
    if (lim->max_timeout_ms == 0 || (timeout_ms && timeout_ms <= lim->max_timeout_ms))
        return 0;
    char b[32];
    snprintf(b, sizeof(b), "%" PRIu64 "s", lim->max_timeout_ms / 1000);
    if (timeout_ms == 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "'timeout' 0 (no timeout) exceeds this daemon's maximum of %s: give "
                           "a timeout of at most that",
                           b);
    char a[32];
    snprintf(a, sizeof(a), "%" PRIu64 "s", timeout_ms / 1000);
    return above(err, "timeout", a, b);
}

int gbx_quota_admit(const struct gbx_quota *q, const char *key, const struct gbx_quota_use *use,
                    const struct gbx_quota_use *add, struct gbx_err **err)
{
    static const struct {
        const char *name, *what;
        int size;
        size_t qoff, uoff;
    } f[] = {
        {"sandboxes", "live sandboxes", 0, offsetof(struct gbx_quota, sandboxes),
         offsetof(struct gbx_quota_use, sandboxes)},
        {"memory", "of memory in the limits of live sandboxes", 1,
         offsetof(struct gbx_quota, memory), offsetof(struct gbx_quota_use, memory)},
        {"disk", "of disk in the writable layers of live sandboxes", 1,
         offsetof(struct gbx_quota, disk), offsetof(struct gbx_quota_use, disk)},
        {"snapshots", "snapshots", 0, offsetof(struct gbx_quota, snapshots),
         offsetof(struct gbx_quota_use, snapshots)},
        {"sessions", "sessions", 0, offsetof(struct gbx_quota, sessions),
         offsetof(struct gbx_quota_use, sessions)},
        {"artifacts", "artifacts", 0, offsetof(struct gbx_quota, artifacts),
         offsetof(struct gbx_quota_use, artifacts)},
        {"artifact-bytes", "of artifacts", 1, offsetof(struct gbx_quota, artifact_bytes),
         offsetof(struct gbx_quota_use, artifact_bytes)},
        {"templates", "templates", 0, offsetof(struct gbx_quota, templates),
         offsetof(struct gbx_quota_use, templates)},
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        uint64_t limit = *(const uint64_t *)((const char *)q + f[i].qoff);
        uint64_t used = *(const uint64_t *)((const char *)use + f[i].uoff);
        uint64_t more = *(const uint64_t *)((const char *)add + f[i].uoff);
        if (limit == 0 || more == 0 || (used <= limit && more <= limit - used))
            continue;
        if (!f[i].size)
            return gbx_err_set(err, EDQUOT, GBX_ERR_LIMIT,
                               "quota '%s' of key '%s' reached: %" PRIu64 " of %" PRIu64
                               " %s; delete one, or ask the operator for a larger quota",
                               f[i].name, key, used, limit, f[i].what);
        char u[32], l[32], m[32];
        gbx_limits_fmt_size(used, u, sizeof(u));
        gbx_limits_fmt_size(limit, l, sizeof(l));
        gbx_limits_fmt_size(more, m, sizeof(m));
        return gbx_err_set(err, EDQUOT, GBX_ERR_LIMIT,
                           "quota '%s' of key '%s' reached: %s of %s %s in use, and this one "
                           "needs %s more; free some, or ask the operator for a larger quota",
                           f[i].name, key, u, l, f[i].what, m);
    }
    return 0;
}
