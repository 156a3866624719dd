/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/retention.h"

#define SEC 1000000000ll
#define NOW (1000000 * SEC)

static void parse_rules(void **state)
{
    (void)state;
    struct gbx_retention_rule r;
    char err[200];
    assert_int_equal(gbx_retention_parse("age=7d,count=100,size=10G", 1, &r, err, sizeof(err)), 0);
    assert_int_equal(r.max_age_ms, 7ull * 86400000);
    assert_int_equal(r.max_count, 100);
    assert_int_equal(r.max_bytes, 10ull << 30);
    assert_int_equal(gbx_retention_parse("count=3,age=90m", 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.max_age_ms, 90ull * 60000);
    assert_int_equal(r.max_bytes, 0);
    assert_int_equal(gbx_retention_parse("none", 1, &r, err, sizeof(err)), 0);
    assert_int_equal(r.max_age_ms + r.max_count + r.max_bytes, 0);
    assert_int_equal(gbx_retention_parse("", 1, &r, err, sizeof(err)), 0);
    /* errors say what is expected */
    assert_int_equal(gbx_retention_parse("size=1G", 0, &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "age=DURATION"));
    assert_int_equal(gbx_retention_parse("age=soon", 1, &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "'soon'"));
    assert_int_equal(gbx_retention_parse("count=0", 1, &r, err, sizeof(err)), -1);
    assert_int_equal(gbx_retention_parse("age", 1, &r, err, sizeof(err)), -1);
    assert_int_equal(gbx_retention_parse("age=0s", 1, &r, err, sizeof(err)), -1);
    assert_int_equal(gbx_retention_parse("colour=red", 1, &r, err, sizeof(err)), -1);
    char buf[64];
    gbx_retention_parse("age=2h,size=1M", 1, &r, err, sizeof(err));
    gbx_retention_format(&r, buf, sizeof(buf));
    assert_string_equal(buf, "age=7200s,size=1048576");
    /* an age finer than a second formats in ms, and parses back to the same rule (found by
     * fuzz_parse: it was "age=1s" and "age=0s", which parse rejects) */
    gbx_retention_parse("age=1500ms,count=2", 0, &r, err, sizeof(err));
    gbx_retention_format(&r, buf, sizeof(buf));
    assert_string_equal(buf, "age=1500ms,count=2");
    gbx_retention_parse("age=500ms", 0, &r, err, sizeof(err));
    gbx_retention_format(&r, buf, sizeof(buf));
    assert_string_equal(buf, "age=500ms");
    struct gbx_retention_rule back;
    assert_int_equal(gbx_retention_parse(buf, 0, &back, err, sizeof(err)), 0);
    assert_int_equal(back.max_age_ms, 500);
}

static void by_age(void **state)
{
    (void)state;
    struct gbx_retention_rule r = {.max_age_ms = 60000};
    struct gbx_retention_item it[] = {{.ts_ns = NOW - 30 * SEC},
                                      {.ts_ns = NOW - 61 * SEC},
                                      {.ts_ns = NOW - 3600 * SEC, .pinned = 1}};
    assert_int_equal(gbx_retention_apply(&r, NOW, it, 3), 1);
    assert_null(it[0].drop);
    assert_string_equal(it[1].drop, "age");
    assert_null(it[2].drop); /* in use: kept */
}

static void by_count_newest_kept(void **state)
{
    (void)state;
    struct gbx_retention_rule r = {.max_count = 2};
    /* out of order on purpose */
    struct gbx_retention_item it[] = {{.ts_ns = NOW - 3 * SEC},
                                      {.ts_ns = NOW - 1 * SEC},
                                      {.ts_ns = NOW - 4 * SEC},
                                      {.ts_ns = NOW - 2 * SEC}};
    assert_int_equal(gbx_retention_apply(&r, NOW, it, 4), 2);
    assert_null(it[1].drop);
    assert_null(it[3].drop);
    assert_string_equal(it[0].drop, "count");
    assert_string_equal(it[2].drop, "count");
}

static void by_size_and_pinned_counted(void **state)
{
    (void)state;
    struct gbx_retention_rule r = {.max_bytes = 100};
    struct gbx_retention_item it[] = {{.ts_ns = NOW - 1 * SEC, .bytes = 60},
                                      {.ts_ns = NOW - 2 * SEC, .bytes = 30, .pinned = 1},
                                      {.ts_ns = NOW - 3 * SEC, .bytes = 20},
                                      {.ts_ns = NOW - 4 * SEC, .bytes = 5}};
    /* 60, 90 (pinned), 110 > 100: the third goes, and the fourth (115) */
    assert_int_equal(gbx_retention_apply(&r, NOW, it, 4), 2);
    assert_null(it[0].drop);
    assert_null(it[1].drop);
    assert_string_equal(it[2].drop, "size");
    assert_string_equal(it[3].drop, "size");
    /* nothing to do */
    struct gbx_retention_rule none = {0};
    assert_int_equal(gbx_retention_apply(&none, NOW, it, 4), 0);
    assert_null(it[3].drop);
    assert_int_equal(gbx_retention_apply(&r, NOW, NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_rules),
        cmocka_unit_test(by_age),
        cmocka_unit_test(by_count_newest_kept),
        cmocka_unit_test(by_size_and_pinned_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
