/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the value parsers (src/base/parse.c) and the retention rules of the
 * daemon's configuration (src/base/retention.c): every parser gets a NUL-terminated copy of
 * the input, and what they accept must satisfy their contracts (ranges, and printing the
 * value back parses to the same value). */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/parse.h"
#include "base/retention.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int is_env_char(char c, int first)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

static void check_all(const char *s)
{
    char back[64];
    int r;

    uint64_t size = 0x5a5a;
    r = gbx_parse_size(s, &size);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r == 0) {
        uint64_t again;
        snprintf(back, sizeof(back), "%" PRIu64, size);
        CHECK(gbx_parse_size(back, &again) == 0 && again == size);
        snprintf(back, sizeof(back), "%" PRIu64 "B", size);
        CHECK(gbx_parse_size(back, &again) == 0 && again == size);
    } else {
        CHECK(size == 0x5a5a);
    }

    uint32_t cpus = 0x5a5a;
    r = gbx_parse_cpus(s, &cpus);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r == 0) {
        CHECK(cpus >= 1 && cpus <= 1024 * 1000);
        uint32_t again;
        snprintf(back, sizeof(back), "%u.%03u", cpus / 1000, cpus % 1000);
        CHECK(gbx_parse_cpus(back, &again) == 0 && again == cpus);
    } else {
        CHECK(cpus == 0x5a5a);
    }

    uint64_t ms = 0x5a5a;
    r = gbx_parse_duration_ms(s, &ms);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r == 0) {
        uint64_t again;
        snprintf(back, sizeof(back), "%" PRIu64 "ms", ms);
        CHECK(gbx_parse_duration_ms(back, &again) == 0 && again == ms);
        if (ms % 1000 == 0) {
            snprintf(back, sizeof(back), "%" PRIu64, ms / 1000);
            CHECK(gbx_parse_duration_ms(back, &again) == 0 && again == ms);
        }
    } else {
        CHECK(ms == 0x5a5a);
    }

    uint64_t v = 0x5a5a;
    r = gbx_parse_u64(s, 0, UINT64_MAX, &v);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r == 0) {
        /* only digits; printing it back is the input without leading zeros */
        const char *p = s;
        while (*p == '0' && p[1] != '\0')
            p++;
        snprintf(back, sizeof(back), "%" PRIu64, v);
        CHECK(strcmp(back, p) == 0);
        uint64_t w;
        int r2 = gbx_parse_u64(s, 1, 4194304, &w);
        CHECK(r2 == (v >= 1 && v <= 4194304 ? 0 : -ERANGE));
        /* as a size or a duration, digits alone are bytes or seconds */
        uint64_t sz;
        CHECK(gbx_parse_size(s, &sz) == 0 && sz == v);
        r2 = gbx_parse_duration_ms(s, &ms);
        CHECK(r2 == (v <= UINT64_MAX / 1000 ? 0 : -ERANGE));
        if (r2 == 0)
            CHECK(ms == v * 1000);
    } else {
        CHECK(v == 0x5a5a);
    }

    /* a time is in its range, digits alone are unix seconds, and its RFC 3339 text in UTC
     * parses back to it */
    int64_t t = 0x5a5a;
    r = gbx_parse_time_ns(s, &t);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r == 0) {
        CHECK(t >= 0 && (uint64_t)t / 1000000000 <= GBX_TIME_MAX_SECS);
        if (gbx_parse_u64(s, 0, UINT64_MAX, &v) == 0)
            CHECK((uint64_t)t == v * 1000000000);
        time_t secs = (time_t)(t / 1000000000);
        struct tm tm;
        CHECK(gmtime_r(&secs, &tm) != NULL);
        char iso[64];
        size_t n = strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(iso + n, sizeof(iso) - n, ".%09lldZ", (long long)(t % 1000000000));
        int64_t t2;
        CHECK(gbx_parse_time_ns(iso, &t2) == 0 && t2 == t);
    } else {
        CHECK(t == 0x5a5a);
    }

    /* a retention rule formats to text that parses back to the same rule (in the buffer
     * size the daemon's status uses), and a failure says why */
    for (int sized = 0; sized < 2; sized++) {
        struct gbx_retention_rule rule, back_rule;
        char why[160] = "", text[96];
        r = gbx_retention_parse(s, sized, &rule, why, sizeof(why));
        CHECK(r == 0 || r == -1);
        if (r < 0) {
            CHECK(why[0] != '\0');
            continue;
        }
        CHECK(sized || rule.max_bytes == 0);
        gbx_retention_format(&rule, text, sizeof(text));
        CHECK(strlen(text) < sizeof(text) - 1); /* not truncated */
        CHECK(gbx_retention_parse(text, sized, &back_rule, why, sizeof(why)) == 0);
        CHECK(back_rule.max_age_ms == rule.max_age_ms && back_rule.max_count == rule.max_count &&
              back_rule.max_bytes == rule.max_bytes);
    }

    r = gbx_env_valid(s);
    CHECK(r == 0 || r == -EINVAL);
    const char *eq = strchr(s, '=');
    int want = eq != NULL && eq != s;
    for (const char *p = s; want && p < eq; p++)
        want = is_env_char(*p, p == s);
    CHECK((r == 0) == want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    check_all(s);
    /* and every NUL-separated piece on its own (the input may hold several values) */
    for (char *p = s; p < s + size; p += strlen(p) + 1)
        if (p != s)
            check_all(p);
    free(s);
    return 0;
}
