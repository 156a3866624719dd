/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/ratelimit.h"

#define SEC 1000000000ll
#define T0 (1000 * SEC)

static void burst_then_refill(void **state)
{
    (void)state;
    struct gbx_ratelimit rl = {0};
    unsigned retry = 0;
    gbx_ratelimit_init(&rl, 10, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(gbx_ratelimit_take(&rl, "a", T0, &retry), 0);
    assert_int_equal(gbx_ratelimit_take(&rl, "a", T0, &retry), -1);
    assert_int_equal(retry, 1); /* a token comes in 0.1 s: rounded up to whole seconds */
    /* 0.1 s later, one token; 1 s later, the bucket is full again (not fuller) */
    assert_int_equal(gbx_ratelimit_take(&rl, "a", T0 + SEC / 10, &retry), 0);
    assert_int_equal(gbx_ratelimit_take(&rl, "a", T0 + SEC / 10, &retry), -1);
    for (int i = 0; i < 5; i++)
        assert_int_equal(gbx_ratelimit_take(&rl, "a", T0 + 10 * SEC, &retry), 0);
    assert_int_equal(gbx_ratelimit_take(&rl, "a", T0 + 10 * SEC, &retry), -1);
    gbx_ratelimit_release(&rl);
    gbx_ratelimit_release(&rl); /* twice is fine */
}

static void keys_are_separate(void **state)
{
    (void)state;
    struct gbx_ratelimit rl = {0};
    unsigned retry = 0;
    gbx_ratelimit_init(&rl, 1, 2);
    assert_int_equal(gbx_ratelimit_take(&rl, "a", T0, &retry), 0);
    assert_int_equal(gbx_ratelimit_take(&rl, "a", T0, &retry), 0);
    assert_int_equal(gbx_ratelimit_take(&rl, "a", T0, &retry), -1);
    assert_int_equal(gbx_ratelimit_take(&rl, "b", T0, &retry), 0);
    assert_int_equal(gbx_ratelimit_take(&rl, "", T0, &retry), 0); /* the admin's */
    gbx_ratelimit_release(&rl);
}

static void slow_rate_retry_after(void **state)
{
    (void)state;
    struct gbx_ratelimit rl = {0};
    unsigned retry = 0;
    gbx_ratelimit_init(&rl, 0.25, 1); /* one every 4 s */
    assert_int_equal(gbx_ratelimit_take(&rl, "k", T0, &retry), 0);
    assert_int_equal(gbx_ratelimit_take(&rl, "k", T0, &retry), -1);
    assert_int_equal(retry, 4);
    assert_int_equal(gbx_ratelimit_take(&rl, "k", T0 + 3 * SEC, &retry), -1);
    assert_int_equal(retry, 1);
    assert_int_equal(gbx_ratelimit_take(&rl, "k", T0 + 4 * SEC, &retry), 0);
    gbx_ratelimit_release(&rl);
}

static void off_and_defaults(void **state)
{
    (void)state;
    struct gbx_ratelimit rl = {0}; /* all zero: no limit */
    unsigned retry = 0;
    for (int i = 0; i < 1000; i++)
        assert_int_equal(gbx_ratelimit_take(&rl, "a", T0, &retry), 0);
    gbx_ratelimit_init(&rl, 3, 0); /* burst: twice the rate */
    assert_true(rl.burst == 6);
    gbx_ratelimit_init(&rl, 0.1, 0); /* at least 1 */
    assert_true(rl.burst == 1);
    gbx_ratelimit_init(&rl, 0, 0);
    assert_int_equal(gbx_ratelimit_take(&rl, "a", T0, &retry), 0);
    gbx_ratelimit_release(&rl);
}

static void many_keys_evict_the_oldest(void **state)
{
    (void)state;
    struct gbx_ratelimit rl = {0};
    unsigned retry = 0;
    char k[32];
    gbx_ratelimit_init(&rl, 1, 1);
    assert_int_equal(gbx_ratelimit_take(&rl, "first", T0, &retry), 0);
    assert_int_equal(gbx_ratelimit_take(&rl, "first", T0, &retry), -1);
    for (int i = 0; i < GBX_RATELIMIT_KEYS; i++) {
        snprintf(k, sizeof(k), "key-%d", i);
        assert_int_equal(gbx_ratelimit_take(&rl, k, T0 + 1 + i, &retry), 0);
    }
    /* "first" lost its slot: it starts again with a full bucket */
    assert_int_equal(gbx_ratelimit_take(&rl, "first", T0 + SEC / 2, &retry), 0);
    /* a long key is cut, consistently */
    char longkey[300];
    memset(longkey, 'x', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    assert_int_equal(gbx_ratelimit_take(&rl, longkey, T0 + 2 * SEC, &retry), 0);
    assert_int_equal(gbx_ratelimit_take(&rl, longkey, T0 + 2 * SEC, &retry), -1);
    gbx_ratelimit_release(&rl);
}

static void parse(void **state)
{
    (void)state;
    double r, b;
    assert_int_equal(gbx_ratelimit_parse("100", &r, &b), 0);
    assert_true(r == 100 && b == 0);
    assert_int_equal(gbx_ratelimit_parse("100/200", &r, &b), 0);
    assert_true(r == 100 && b == 200);
    assert_int_equal(gbx_ratelimit_parse("5/s", &r, &b), 0);
    assert_true(r == 5 && b == 0);
    assert_int_equal(gbx_ratelimit_parse("5/s:7", &r, &b), 0); /* GLOVEBOX_E2B_RATE's form */
    assert_true(r == 5 && b == 7);
    assert_int_equal(gbx_ratelimit_parse("2:2", &r, &b), 0);
    assert_true(r == 2 && b == 2);
    assert_int_equal(gbx_ratelimit_parse("0.5", &r, &b), 0);
    assert_true(r == 0.5);
    assert_int_equal(gbx_ratelimit_parse("0", &r, &b), 0);
    assert_true(r == 0);
    assert_int_equal(gbx_ratelimit_parse("off", &r, &b), 0);
    assert_true(r == 0);
    const char *bad[] = {"",    "x",      "-1", "1/",  "1/0", "1/s/2", "1:",
                         "1e9", "10/abc", " 1", "nan", "inf", "1/s:0", NULL};
    for (const char **p = bad; *p; p++)
        assert_int_equal(gbx_ratelimit_parse(*p, &r, &b), -22);
    assert_int_equal(gbx_ratelimit_parse(NULL, &r, &b), -22);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(burst_then_refill),          cmocka_unit_test(keys_are_separate),
        cmocka_unit_test(slow_rate_retry_after),      cmocka_unit_test(off_and_defaults),
        cmocka_unit_test(many_keys_evict_the_oldest), cmocka_unit_test(parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
