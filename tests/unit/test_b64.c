/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/b64.c, against OpenSSL's encoder for every length and byte. */
#include <errno.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/b64.h"

static void test_roundtrip_every_length(void **state)
{
    uint8_t raw[300], out[402];
    char enc[402];
    for (size_t i = 0; i < sizeof(raw); i++)
        raw[i] = (uint8_t)(i * 37 + 11);
    for (size_t n = 0; n <= sizeof(raw); n++) {
        int e = EVP_EncodeBlock((unsigned char *)enc, raw, (int)n);
        size_t got = 99999;
        assert_int_equal(gbx_b64_decode(enc, (size_t)e, out, &got), 0);
        assert_int_equal(got, n);
        assert_memory_equal(out, raw, n);
        /* without the padding too */
        size_t m = (size_t)e;
        while (m && enc[m - 1] == '=')
            m--;
        assert_int_equal(gbx_b64_decode(enc, m, out, &got), 0);
        assert_int_equal(got, n);
        assert_memory_equal(out, raw, n);
    }
}

static void test_rejects(void **state)
{
    static const char *const bad[] = {"a",    "a===", "ab=c",  "=abc",
                                      "ab c", "ab-_", "abc=d", "abcde"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t out[16];
        size_t n;
        print_message("'%s'\n", bad[i]);
        assert_int_equal(gbx_b64_decode(bad[i], strlen(bad[i]), out, &n), -EINVAL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_every_length),
        cmocka_unit_test(test_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
