/* SPDX-License-Identifier: MIT */
/* Unit tests for src/core/limits.c: the shipped defaults, daemon settings, a create's limits
 * against the maximums (with the defaults filled in), quotas and their messages. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/limits.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static void test_init(void **state)
{
    (void)state;
    struct gbx_limits l;
    gbx_limits_init(&l, 24 * GIB, 2);
    assert_int_equal(l.dflt.memory_bytes, 512 * MIB);
    assert_int_equal(l.dflt.pids, 256);
    assert_int_equal(l.dflt.cpu_millis, 1000);
    assert_int_equal(l.dflt_disk, GIB);
    assert_int_equal(l.max.memory_bytes, 8 * GIB);
    assert_int_equal(l.max.pids, 4096);
    assert_int_equal(l.max.cpu_millis, 2000);
    assert_int_equal(l.max_disk, 64 * GIB);
    assert_int_equal(l.max_timeout_ms, 0);
    assert_int_equal(l.quota.sandboxes, 64);
    char why[200];
    assert_int_equal(gbx_limits_check(&l, why, sizeof(why)), 0);
    /* a small host: at most half its RAM, and the default under it */
    gbx_limits_init(&l, 512 * MIB, 1);
    assert_int_equal(l.max.memory_bytes, 256 * MIB);
    assert_int_equal(l.dflt.memory_bytes, 256 * MIB);
    assert_int_equal(gbx_limits_check(&l, why, sizeof(why)), 0);
}

static void test_set(void **state)
{
    (void)state;
    struct gbx_limits l;
    char why[200];
    gbx_limits_init(&l, 24 * GIB, 2);
    assert_int_equal(gbx_limits_set(&l, "default-memory", "1G", why, sizeof(why)), 0);
    assert_int_equal(l.dflt.memory_bytes, GIB);
    assert_int_equal(gbx_limits_set(&l, "max-cpus", "1.5", why, sizeof(why)), 0);
    assert_int_equal(l.max.cpu_millis, 1500);
    assert_int_equal(gbx_limits_set(&l, "max-timeout", "1h", why, sizeof(why)), 0);
    assert_int_equal(l.max_timeout_ms, 3600 * 1000);
    assert_int_equal(gbx_limits_set(&l, "quota-sandboxes", "0", why, sizeof(why)), 0);
    assert_int_equal(l.quota.sandboxes, 0);
    assert_int_equal(gbx_limits_set(&l, "quota-sandboxes", "lots", why, sizeof(why)), -1);
    assert_non_null(strstr(why, "quota-sandboxes must be"));
    assert_int_equal(gbx_limits_set(&l, "max-disk", "100000000T", why, sizeof(why)), -1);
    assert_int_equal(gbx_limits_set(&l, "max-body", "1M", why, sizeof(why)), 1); /* not ours */
    /* a default above its maximum */
    assert_int_equal(gbx_limits_set(&l, "default-pids", "5000", why, sizeof(why)), 0);
    assert_int_equal(gbx_limits_check(&l, why, sizeof(why)), -1);
    assert_string_equal(why, "default-pids 5000 is above max-pids 4096");
    assert_int_equal(gbx_limits_set(&l, "max-pids", "none", why, sizeof(why)), 0);
    assert_int_equal(gbx_limits_check(&l, why, sizeof(why)), 0);
}

static void test_resolve(void **state)
{
    (void)state;
    struct gbx_limits l;
    gbx_limits_init(&l, 24 * GIB, 2);
    struct gbx_err *err = NULL;
    /* nothing asked: the defaults */
    struct gbx_cg_limits cg = {0};
    uint64_t disk = 0, timeout = 0;
    assert_int_equal(gbx_limits_resolve(&l, &cg, &disk, &timeout, 0, &err), 0);
    assert_int_equal(cg.memory_bytes, 512 * MIB);
    assert_int_equal(cg.pids, 256);
    assert_int_equal(cg.cpu_millis, 1000);
    assert_int_equal(disk, GIB);
    assert_int_equal(timeout, 0);
    /* what is asked is kept */
    cg = (struct gbx_cg_limits){.memory_bytes = 64 * MIB};
    disk = 0;
    assert_int_equal(gbx_limits_resolve(&l, &cg, &disk, &timeout, 0, &err), 0);
    assert_int_equal(cg.memory_bytes, 64 * MIB);
    assert_int_equal(cg.pids, 256);
    /* above a maximum: INVALID, naming the field and the maximum */
    cg = (struct gbx_cg_limits){.memory_bytes = 9223372036854775807ull};
    assert_int_equal(gbx_limits_resolve(&l, &cg, &disk, &timeout, 0, &err), -1);
    assert_int_equal(err->kind, GBX_ERR_INVALID);
    assert_string_equal(err->msg,
                        "'memory' 9223372036854775807 exceeds this daemon's maximum of 8G");
    gbx_err_free(err);
    err = NULL;
    cg = (struct gbx_cg_limits){0};
    disk = 1000000ull << 40;
    assert_int_equal(gbx_limits_resolve(&l, &cg, &disk, &timeout, 0, &err), -1);
    assert_string_equal(err->msg, "'disk' 1000000T exceeds this daemon's maximum of 64G");
    gbx_err_free(err);
    err = NULL;
    disk = 0;
    cg = (struct gbx_cg_limits){.cpu_millis = 2500};
    assert_int_equal(gbx_limits_resolve(&l, &cg, &disk, &timeout, 0, &err), -1);
    assert_string_equal(err->msg, "'cpus' 2.500 exceeds this daemon's maximum of 2");
    gbx_err_free(err);
    err = NULL;
    /* a maximum timeout: given when none is asked, and no timeout is above it */
    l.max_timeout_ms = 3600 * 1000;
    cg = (struct gbx_cg_limits){0};
    timeout = 0;
    assert_int_equal(gbx_limits_resolve(&l, &cg, &disk, &timeout, 0, &err), 0);
    assert_int_equal(timeout, 3600 * 1000);
    timeout = 0;
    assert_int_equal(gbx_limits_resolve(&l, &cg, &disk, &timeout, 1, &err), -1);
    gbx_err_free(err);
    err = NULL;
    assert_int_equal(gbx_limits_check_timeout(&l, 7200 * 1000, &err), -1);
    assert_string_equal(err->msg, "'timeout' 7200s exceeds this daemon's maximum of 3600s");
    gbx_err_free(err);
    err = NULL;
    assert_int_equal(gbx_limits_check_timeout(&l, 60 * 1000, &err), 0);
}

static void test_quota(void **state)
{
    (void)state;
    struct gbx_quota q = {.sandboxes = 64, .memory = 32 * GIB};
    char why[200];
    assert_int_equal(gbx_quota_parse("sandboxes=3,artifact-bytes=1G", &q, why, sizeof(why)), 0);
    assert_int_equal(q.sandboxes, 3);
    assert_int_equal(q.memory, 32 * GIB); /* not named: unchanged */
    assert_int_equal(q.artifact_bytes, GIB);
    struct gbx_quota before = q;
    assert_int_equal(gbx_quota_parse("sandboxes=3,bogus=1", &q, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "unknown quota 'bogus'"));
    assert_memory_equal(&q, &before, sizeof(q)); /* untouched on error */
    assert_int_equal(gbx_quota_parse("", &q, why, sizeof(why)), -1);
    assert_int_equal(gbx_quota_parse("memory=lots", &q, why, sizeof(why)), -1);
    char *text = gbx_quota_format(&q);
    assert_non_null(strstr(text, "\"sandboxes\": 3"));
    free(text);

    struct gbx_err *err = NULL;
    struct gbx_quota_use use = {.sandboxes = 2, .memory = GIB};
    struct gbx_quota_use one = {.sandboxes = 1, .memory = 512 * MIB};
    assert_int_equal(gbx_quota_admit(&q, "team-a", &use, &one, &err), 0);
    use.sandboxes = 3;
    assert_int_equal(gbx_quota_admit(&q, "team-a", &use, &one, &err), -1);
    assert_int_equal(err->kind, GBX_ERR_LIMIT);
    assert_int_equal(err->errnum, EDQUOT);
    assert_non_null(strstr(err->msg, "quota 'sandboxes' of key 'team-a' reached: 3 of 3 live "
                                     "sandboxes"));
    gbx_err_free(err);
    err = NULL;
    q.sandboxes = 0; /* off */
    q.memory = 1536 * MIB;
    assert_int_equal(gbx_quota_admit(&q, "team-a", &use, &one, &err), 0);
    use.memory = 1536 * MIB;
    assert_int_equal(gbx_quota_admit(&q, "team-a", &use, &one, &err), -1);
    assert_non_null(strstr(err->msg, "quota 'memory' of key 'team-a' reached: 1.5G of 1.5G"));
    gbx_err_free(err);
}

static void test_fmt_size(void **state)
{
    (void)state;
    char b[32];
    gbx_limits_fmt_size(512 * MIB, b, sizeof(b));
    assert_string_equal(b, "512M");
    gbx_limits_fmt_size(8 * GIB, b, sizeof(b));
    assert_string_equal(b, "8G");
    gbx_limits_fmt_size(1536 * MIB, b, sizeof(b));
    assert_string_equal(b, "1.5G");
    gbx_limits_fmt_size(1000, b, sizeof(b));
    assert_string_equal(b, "1000");
    gbx_limits_fmt_size(UINT64_MAX, b, sizeof(b));
    assert_string_equal(b, "18446744073709551615");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),     cmocka_unit_test(test_set),
        cmocka_unit_test(test_resolve),  cmocka_unit_test(test_quota),
        cmocka_unit_test(test_fmt_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
