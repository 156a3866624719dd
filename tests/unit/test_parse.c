/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/parse.c: sizes, CPU counts, durations, integers, env names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "base/parse.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define TIB (1ull << 40)

struct size_case {
    const char *in;
    int ret;
    uint64_t want;
};

static void check_size_cases(const struct size_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0xdeadbeef;
        int r = gbx_parse_size(c[i].in, &v);
        print_message("size '%s' -> %d %llu\n", c[i].in, r, (unsigned long long)v);
        assert_int_equal(r, c[i].ret);
        if (c[i].ret == 0)
            assert_int_equal(v, c[i].want);
        else
            assert_int_equal(v, 0xdeadbeef); /* untouched on error */
    }
}

static void test_size_valid(void **state)
{
    static const struct size_case c[] = {
        {"0", 0, 0},
        {"1", 0, 1},
        {"1048576", 0, 1048576},
        {"512k", 0, 512 * KIB},
        {"512K", 0, 512 * KIB},
        {"64M", 0, 64 * MIB},
        {"64m", 0, 64 * MIB},
        {"1G", 0, GIB},
        {"1.5G", 0, 1610612736ull},
        {"2T", 0, 2 * TIB},
        {"0.5M", 0, 512 * KIB},
        {".5G", 0, GIB / 2},
        {"0.1K", 0, 102}, /* 102.4 truncated */
        {"1KB", 0, KIB},
        {"1kb", 0, KIB},
        {"1KiB", 0, KIB},
        {"1MiB", 0, MIB},
        {"1gib", 0, GIB},
        {"100B", 0, 100},
        {"100b", 0, 100},
        {"16777215T", 0, 16777215ull * TIB},
        {"18446744073709551615", 0, UINT64_MAX},
        {"18446744073709551615B", 0, UINT64_MAX},
        {"16777215.99999999T", 0, 18446744073709540620ull}, /* just below 2^64 */
    };
    (void)state;
    check_size_cases(c, sizeof(c) / sizeof(c[0]));
}

static void test_size_invalid(void **state)
{
    static const struct size_case c[] = {
        {"", -EINVAL, 0},
        {"abc", -EINVAL, 0},
        {"12x", -EINVAL, 0},
        {"-1", -EINVAL, 0},
        {"+1", -EINVAL, 0},
        {" 1", -EINVAL, 0},
        {"1 ", -EINVAL, 0},
        {".", -EINVAL, 0},
        {"G", -EINVAL, 0},
        {"1.5", -EINVAL, 0},  /* fractional bytes */
        {"1.5B", -EINVAL, 0}, /* fractional bytes */
        {"1iB", -EINVAL, 0},  /* "iB" needs a unit */
        {"1Bib", -EINVAL, 0},
        {"1KK", -EINVAL, 0},
        {"1KBB", -EINVAL, 0},
        {"1P", -EINVAL, 0},
        {"1e3", -EINVAL, 0},
        {"0x10", -EINVAL, 0},
        {"1,5G", -EINVAL, 0},
        {"18446744073709551616", -ERANGE, 0},
        {"99999999999999999999999", -ERANGE, 0},
        {"99999999999T", -ERANGE, 0},
        {"16777216T", -ERANGE, 0},
        {"17179869184G", -ERANGE, 0},
    };
    (void)state;
    check_size_cases(c, sizeof(c) / sizeof(c[0]));
    uint64_t v;
    assert_int_equal(gbx_parse_size(NULL, &v), -EINVAL);
}

static void test_cpus(void **state)
{
    static const struct {
        const char *in;
        int ret;
        uint32_t want;
    } c[] = {
        {"1", 0, 1000},
        {"0.5", 0, 500},
        {"2.25", 0, 2250},
        {"0.001", 0, 1},
        {"0.0015", 0, 1},
        {".5", 0, 500},
        {"1.", 0, 1000},
        {"1024", 0, 1024000},
        {"1024.000", 0, 1024000},
        {"0", -ERANGE, 0},
        {"0.0", -ERANGE, 0},
        {"0.0001", -ERANGE, 0},
        {"0.0000000001", -ERANGE, 0},
        {"1024.001", -ERANGE, 0},
        {"1025", -ERANGE, 0},
        {"18446744073709551615", -ERANGE, 0},
        {"18446744073709551616", -ERANGE, 0},
        {"", -EINVAL, 0},
        {"abc", -EINVAL, 0},
        {"-1", -EINVAL, 0},
        {"1x", -EINVAL, 0},
        {"1e3", -EINVAL, 0},
        {"1 ", -EINVAL, 0},
        {".", -EINVAL, 0},
        {"1G", -EINVAL, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        uint32_t v = 77;
        int r = gbx_parse_cpus(c[i].in, &v);
        print_message("cpus '%s' -> %d %u\n", c[i].in, r, v);
        assert_int_equal(r, c[i].ret);
        assert_int_equal(v, c[i].ret == 0 ? c[i].want : 77);
    }
    uint32_t v;
    assert_int_equal(gbx_parse_cpus(NULL, &v), -EINVAL);
}

static void test_duration(void **state)
{
    static const struct {
        const char *in;
        int ret;
        uint64_t want;
    } c[] = {
        {"30", 0, 30000},
        {"30s", 0, 30000},
        {"0", 0, 0},
        {"1500ms", 0, 1500},
        {"5m", 0, 300000},
        {"1.5m", 0, 90000},
        {"2h", 0, 7200000},
        {"0.5", 0, 500},
        {"0.5s", 0, 500},
        {"0.5ms", 0, 0}, /* sub-millisecond truncates */
        {"1.25h", 0, 4500000},
        {"18446744073709551615ms", 0, UINT64_MAX},
        {"18446744073709551616ms", -ERANGE, 0},
        {"18446744073709552s", -ERANGE, 0},
        {"99999999999999999h", -ERANGE, 0},
        {"", -EINVAL, 0},
        {"abc", -EINVAL, 0},
        {"12x", -EINVAL, 0},
        {"-1", -EINVAL, 0},
        {"1S", -EINVAL, 0}, /* units are case-sensitive */
        {"1M", -EINVAL, 0},
        {"1d", -EINVAL, 0},
        {"1 s", -EINVAL, 0},
        {"1sec", -EINVAL, 0},
        {"ms", -EINVAL, 0},
        {"1mss", -EINVAL, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        uint64_t v = 77;
        int r = gbx_parse_duration_ms(c[i].in, &v);
        print_message("duration '%s' -> %d %llu\n", c[i].in, r, (unsigned long long)v);
        assert_int_equal(r, c[i].ret);
        assert_int_equal(v, c[i].ret == 0 ? c[i].want : 77);
    }
    uint64_t v;
    assert_int_equal(gbx_parse_duration_ms(NULL, &v), -EINVAL);
}

static void test_u64(void **state)
{
    uint64_t v = 77;
    (void)state;
    assert_int_equal(gbx_parse_u64("123", 0, 1000, &v), 0);
    assert_int_equal(v, 123);
    assert_int_equal(gbx_parse_u64("0", 0, 0, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(gbx_parse_u64("007", 0, 10, &v), 0);
    assert_int_equal(v, 7);
    /* bounds are inclusive */
    assert_int_equal(gbx_parse_u64("1", 1, 4194304, &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(gbx_parse_u64("4194304", 1, 4194304, &v), 0);
    assert_int_equal(v, 4194304);
    assert_int_equal(gbx_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
    assert_int_equal(v, UINT64_MAX);
    assert_int_equal(gbx_parse_u64("18446744073709551610", 0, UINT64_MAX, &v), 0);
    assert_int_equal(v, UINT64_MAX - 5);
    assert_int_equal(gbx_parse_u64("18446744073709551609", 0, UINT64_MAX, &v), 0);
    assert_int_equal(v, UINT64_MAX - 6);

    v = 77;
    assert_int_equal(gbx_parse_u64("0", 1, 4194304, &v), -ERANGE);
    assert_int_equal(gbx_parse_u64("4194305", 1, 4194304, &v), -ERANGE);
    assert_int_equal(gbx_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
    assert_int_equal(gbx_parse_u64("18446744073709551620", 0, UINT64_MAX, &v), -ERANGE);
    assert_int_equal(gbx_parse_u64("99999999999999999999", 0, UINT64_MAX, &v), -ERANGE);
    assert_int_equal(gbx_parse_u64("", 0, 10, &v), -EINVAL);
    assert_int_equal(gbx_parse_u64(NULL, 0, 10, &v), -EINVAL);
    assert_int_equal(gbx_parse_u64("abc", 0, 10, &v), -EINVAL);
    assert_int_equal(gbx_parse_u64("12x", 0, 100, &v), -EINVAL);
    assert_int_equal(gbx_parse_u64("-1", 0, 10, &v), -EINVAL);
    assert_int_equal(gbx_parse_u64("+1", 0, 10, &v), -EINVAL);
    assert_int_equal(gbx_parse_u64(" 1", 0, 10, &v), -EINVAL);
    assert_int_equal(gbx_parse_u64("1.0", 0, 10, &v), -EINVAL);
    assert_int_equal(gbx_parse_u64("1k", 0, 10000, &v), -EINVAL);
    assert_int_equal(v, 77);
}

static void test_env_valid(void **state)
{
    static const char *const good[] = {
        "A=1",
        "_X=",
        "a=b",
        "PATH=/usr/bin:/bin",
        "A1_b2=x=y",
        "_=",
        "__=",
        "X==",
        "LONG_NAME_0123456789=value with spaces",
    };
    static const char *const bad[] = {
        "1A=x", "=x", "=", "A", "", "A-B=1", "A B=1", "A.B=1", "9=", "É=1", "A\t=1", "$A=1", "A$=1",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        print_message("env good '%s'\n", good[i]);
        assert_int_equal(gbx_env_valid(good[i]), 0);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("env bad '%s'\n", bad[i]);
        assert_int_equal(gbx_env_valid(bad[i]), -EINVAL);
    }
    assert_int_equal(gbx_env_valid(NULL), -EINVAL);
}

static void test_url_escape(void **state)
{
    (void)state;
    char *a = gbx_url_escape("a b/c?d=é~._-", NULL);
    assert_string_equal(a, "a%20b%2Fc%3Fd%3D%C3%A9~._-");
    free(a);
    char *b = gbx_url_escape("/work/a b", "/");
    assert_string_equal(b, "/work/a%20b");
    free(b);
    char *c = gbx_url_escape("", NULL);
    assert_string_equal(c, "");
    free(c);
}

static void test_time(void **state)
{
    int64_t ns = 0;
    assert_int_equal(gbx_parse_time_ns("0", &ns), 0);
    assert_int_equal(ns, 0);
    assert_int_equal(gbx_parse_time_ns("1764788400", &ns), 0);
    assert_int_equal(ns, 1764788400LL * 1000000000);
    assert_int_equal(gbx_parse_time_ns("2025-12-03T19:00:00Z", &ns), 0);
    assert_int_equal(ns, 1764788400LL * 1000000000);
    assert_int_equal(gbx_parse_time_ns("2025-12-03t20:30:00.25+01:30", &ns), 0);
    assert_int_equal(ns, 1764788400LL * 1000000000 + 250000000);
    assert_int_equal(gbx_parse_time_ns("2025-12-03T18:00:00.123456789123-01:00", &ns), 0);
    assert_int_equal(ns, 1764788400LL * 1000000000 + 123456789);
    static const char *const bad[] = {"",
                                      "-1",
                                      "1.5",
                                      "12a",
                                      "2025-12-03",
                                      "2025-12-03T19:00:00",
                                      "2025-12-03 19:00:00Z",
                                      "2025-13-03T19:00:00Z",
                                      "2025-04-31T19:00:00Z",
                                      "2025-02-29T00:00:00Z",
                                      "2025-12-03T24:00:00Z",
                                      "2025-12-03T19:00:00.Z",
                                      "2025-12-03T19:00:00+0100",
                                      "2025-12-03T19:00:00Zjunk",
                                      "1969-12-31T23:59:59Z",
                                      "yesterday"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("'%s'\n", bad[i]);
        assert_true(gbx_parse_time_ns(bad[i], &ns) < 0);
    }
    assert_int_equal(gbx_parse_time_ns("2024-02-29T00:00:00Z", &ns), 0);
    assert_int_equal(gbx_parse_time_ns("99999999999999", &ns), -ERANGE);
    /* nanoseconds fit an int64_t until 2262 */
    assert_int_equal(gbx_parse_time_ns("9223372035", &ns), 0);
    assert_int_equal(gbx_parse_time_ns("9223372036", &ns), -ERANGE);
    assert_int_equal(gbx_parse_time_ns("18446741616", &ns), -ERANGE);
    assert_int_equal(gbx_parse_time_ns("2262-04-11T23:47:15Z", &ns), 0);
    assert_int_equal(gbx_parse_time_ns("2262-04-11T23:47:16Z", &ns), -ERANGE);
    assert_int_equal(gbx_parse_time_ns("9999-12-31T23:59:59Z", &ns), -ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_valid), cmocka_unit_test(test_size_invalid),
        cmocka_unit_test(test_cpus),       cmocka_unit_test(test_duration),
        cmocka_unit_test(test_u64),        cmocka_unit_test(test_env_valid),
        cmocka_unit_test(test_url_escape), cmocka_unit_test(test_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
