/* SPDX-License-Identifier: MIT */
/* Unit tests for src/egress/auditrate.c: the egress audit's token bucket and its summary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "egress/auditrate.h"

#define SEC 1000000000ll

static void test_burst_then_rate(void **state)
{
    struct gbx_egress_bucket b = {0};
    int64_t t = 5 * SEC;
    int taken = 0;
    for (int i = 0; i < 1000; i++)
        taken += gbx_egress_bucket_take(&b, t, 20, 100);
    assert_int_equal(taken, 100); /* the burst, all at once */
    assert_int_equal(gbx_egress_bucket_take(&b, t + SEC / 40, 20, 100), 0); /* half a token */
    assert_int_equal(gbx_egress_bucket_take(&b, t + SEC / 20, 20, 100), 1); /* one */
    /* a second later: 20 more, never more than the burst after a long pause */
    taken = 0;
    for (int i = 0; i < 1000; i++)
        taken += gbx_egress_bucket_take(&b, t + SEC / 20 + SEC, 20, 100);
    assert_int_equal(taken, 20);
    taken = 0;
    for (int i = 0; i < 1000; i++)
        taken += gbx_egress_bucket_take(&b, t + 3600 * SEC, 20, 100);
    assert_int_equal(taken, 100);
}

static void test_unlimited(void **state)
{
    struct gbx_egress_bucket b = {0};
    for (int i = 0; i < 100000; i++)
        assert_int_equal(gbx_egress_bucket_take(&b, SEC, 0, 100), 1);
}

static void test_clock_backwards(void **state)
{
    struct gbx_egress_bucket b = {0};
    for (int i = 0; i < 100; i++)
        (void)gbx_egress_bucket_take(&b, 10 * SEC, 20, 100);
    /* an earlier time gives no tokens (and takes none away) */
    assert_int_equal(gbx_egress_bucket_take(&b, SEC, 20, 100), 0);
    assert_int_equal(gbx_egress_bucket_take(&b, SEC + SEC / 20, 20, 100), 0);
    assert_int_equal(gbx_egress_bucket_take(&b, 10 * SEC + SEC / 20, 20, 100), 1);
}

static void test_summary(void **state)
{
    struct gbx_egress_bucket b = {0};
    char msg[160];
    uint64_t h[GBX_EGRESS_NVERDICTS] = {99, 99, 99, 99};
    assert_int_equal(gbx_egress_bucket_summary(&b, "queries", SEC, msg, sizeof(msg), h), 0);
    assert_int_equal(h[GBX_EGRESS_ALLOW], 99); /* nothing said: nothing written */
    for (int i = 0; i < 4980; i++)
        gbx_egress_bucket_hold(&b, i >= 5 ? GBX_EGRESS_DENY : GBX_EGRESS_ALLOW, 100 * SEC + i);
    assert_int_equal(gbx_egress_bucket_summary(&b, "queries", 110 * SEC, msg, sizeof(msg), h), 1);
    assert_int_equal(h[GBX_EGRESS_ALLOW], 5);
    assert_int_equal(h[GBX_EGRESS_DENY], 4975);
    assert_int_equal(h[GBX_EGRESS_UPSTREAM_FAILED], 0);
    assert_int_equal(h[GBX_EGRESS_CLIENT_ERROR], 0);
    assert_string_equal(msg,
                        "4,980 more queries (4,975 denied) not recorded individually in the last "
                        "10 s");
    /* reset: nothing more to say, and a new window starts with the next row */
    assert_int_equal(gbx_egress_bucket_summary(&b, "queries", SEC, msg, sizeof(msg), h), 0);
    gbx_egress_bucket_hold(&b, GBX_EGRESS_ALLOW, 200 * SEC);
    assert_int_equal(gbx_egress_bucket_summary(&b, "requests", 200 * SEC, msg, sizeof(msg), h), 1);
    assert_string_equal(msg,
                        "1 more requests (0 denied) not recorded individually in the last 1 s");
    gbx_egress_bucket_hold(&b, GBX_EGRESS_DENY, SEC);
    for (int i = 0; i < 1234566; i++)
        gbx_egress_bucket_hold(&b, GBX_EGRESS_DENY, SEC);
    assert_int_equal(gbx_egress_bucket_summary(&b, "connections", 2 * SEC, msg, sizeof(msg), h), 1);
    assert_string_equal(msg, "1,234,567 more connections (1,234,567 denied) not recorded "
                             "individually in the last 1 s");
}

/* Upstream failures and client errors are counted apart from refusals, and said only when
 * there were some; a verdict out of range counts as a refusal. */
static void test_summary_verdicts(void **state)
{
    struct gbx_egress_bucket b = {0};
    char msg[160];
    uint64_t h[GBX_EGRESS_NVERDICTS];
    for (int i = 0; i < 1500; i++)
        gbx_egress_bucket_hold(&b, GBX_EGRESS_UPSTREAM_FAILED, SEC);
    gbx_egress_bucket_hold(&b, GBX_EGRESS_CLIENT_ERROR, SEC);
    gbx_egress_bucket_hold(&b, GBX_EGRESS_ALLOW, SEC);
    gbx_egress_bucket_hold(&b, (enum gbx_egress_verdict)42, SEC);
    assert_int_equal(gbx_egress_bucket_summary(&b, "connections", 4 * SEC, msg, sizeof(msg), h), 1);
    assert_int_equal(h[GBX_EGRESS_ALLOW], 1);
    assert_int_equal(h[GBX_EGRESS_DENY], 1);
    assert_int_equal(h[GBX_EGRESS_UPSTREAM_FAILED], 1500);
    assert_int_equal(h[GBX_EGRESS_CLIENT_ERROR], 1);
    assert_string_equal(msg, "1,503 more connections (1 denied, 1,500 upstream failed, 1 client "
                             "error) not recorded individually in the last 3 s");
    gbx_egress_bucket_hold(&b, GBX_EGRESS_CLIENT_ERROR, SEC);
    gbx_egress_bucket_hold(&b, GBX_EGRESS_CLIENT_ERROR, SEC);
    assert_int_equal(gbx_egress_bucket_summary(&b, "connections", SEC, msg, sizeof(msg), h), 1);
    assert_int_equal(h[GBX_EGRESS_UPSTREAM_FAILED], 0);
    assert_string_equal(msg, "2 more connections (0 denied, 2 client errors) not recorded "
                             "individually in the last 1 s");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_rate),  cmocka_unit_test(test_unlimited),
        cmocka_unit_test(test_clock_backwards),  cmocka_unit_test(test_summary),
        cmocka_unit_test(test_summary_verdicts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
