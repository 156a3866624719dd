/* SPDX-License-Identifier: MIT */
/* Unit tests for src/e2b/connect.c: Connect envelopes, error codes, protobuf-JSON values. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "e2b/connect.h"

static void test_envelope_roundtrip(void **state)
{
    const char *msg = "{\"event\":{\"start\":{\"pid\":100}}}";
    uint8_t buf[64];
    gbx_connect_envelope_hdr(buf, 0, (uint32_t)strlen(msg));
    memcpy(buf + GBX_CONNECT_HDR, msg, strlen(msg));
    size_t total = GBX_CONNECT_HDR + strlen(msg);
    assert_int_equal(buf[0], 0);
    assert_int_equal(buf[4], 0x1f); /* the spec's example: 00 0000001f */
    uint8_t flags = 0xff;
    const uint8_t *p = NULL;
    size_t len = 0;
    assert_int_equal(gbx_connect_envelope(buf, total, 1024, &flags, &p, &len), (long)total);
    assert_int_equal(flags, 0);
    assert_int_equal(len, strlen(msg));
    assert_memory_equal(p, msg, len);
    /* every shorter prefix needs more bytes */
    for (size_t i = 0; i < total; i++)
        assert_int_equal(gbx_connect_envelope(buf, i, 1024, &flags, &p, &len), 0);
}

static void test_envelope_end_and_bad_flags(void **state)
{
    uint8_t buf[GBX_CONNECT_HDR + 2];
    gbx_connect_envelope_hdr(buf, GBX_CONNECT_FLAG_END, 2);
    memcpy(buf + GBX_CONNECT_HDR, "{}", 2);
    uint8_t flags;
    const uint8_t *p;
    size_t len;
    assert_int_equal(gbx_connect_envelope(buf, sizeof(buf), 16, &flags, &p, &len),
                     (long)sizeof(buf));
    assert_int_equal(flags, GBX_CONNECT_FLAG_END);
    buf[0] = GBX_CONNECT_FLAG_COMPRESSED;
    assert_int_equal(gbx_connect_envelope(buf, sizeof(buf), 16, &flags, &p, &len), -EBADMSG);
    buf[0] = 0x80;
    assert_int_equal(gbx_connect_envelope(buf, sizeof(buf), 16, &flags, &p, &len), -EBADMSG);
    gbx_connect_envelope_hdr(buf, 0, 17);
    assert_int_equal(gbx_connect_envelope(buf, sizeof(buf), 16, &flags, &p, &len), -EMSGSIZE);
}

static void test_codes(void **state)
{
    assert_string_equal(gbx_connect_code_for_errno(ENOENT), "not_found");
    assert_string_equal(gbx_connect_code_for_errno(EEXIST), "already_exists");
    assert_string_equal(gbx_connect_code_for_errno(ENOTDIR), "invalid_argument");
    assert_string_equal(gbx_connect_code_for_errno(EACCES), "permission_denied");
    assert_string_equal(gbx_connect_code_for_errno(12345), "internal");
    assert_int_equal(gbx_connect_http_status("not_found"), 404);
    assert_int_equal(gbx_connect_http_status("invalid_argument"), 400);
    assert_int_equal(gbx_connect_http_status("already_exists"), 409);
    assert_int_equal(gbx_connect_http_status("unauthenticated"), 401);
    assert_int_equal(gbx_connect_http_status("unavailable"), 503);
    assert_int_equal(gbx_connect_http_status("deadline_exceeded"), 504);
    assert_int_equal(gbx_connect_http_status("no-such-code"), 500);
}

static void test_ints(void **state)
{
    int64_t v = -1;
    json_t *j = json_string("3");
    assert_int_equal(gbx_connect_int(j, 0, 10, &v), 0);
    assert_int_equal(v, 3);
    json_decref(j);
    j = json_integer(42);
    assert_int_equal(gbx_connect_int(j, 0, 100, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(gbx_connect_int(j, 0, 10, &v), -EINVAL); /* out of range */
    json_decref(j);
    const char *bad[] = {"", "3x", " 3", "0x10", "1e3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = json_string(bad[i]);
        assert_int_equal(gbx_connect_int(j, -100, 100000, &v), -EINVAL);
        json_decref(j);
    }
    assert_int_equal(gbx_connect_int(NULL, 0, 10, &v), 0); /* absent: the default */
    assert_int_equal(v, 0);
    v = 5;
    j = json_null();
    assert_int_equal(gbx_connect_int(j, 0, 10, &v), 0); /* null: the default too */
    assert_int_equal(v, 0);
    int b = 1;
    assert_int_equal(gbx_connect_bool(j, &b), 0);
    assert_int_equal(b, 0);
    json_decref(j);
    j = json_true();
    assert_int_equal(gbx_connect_int(j, 0, 10, &v), -EINVAL);
    json_decref(j);
}

static void test_bytes(void **state)
{
    static const struct {
        const char *in;
        const char *out;
        size_t len;
    } ok[] = {
        {"aGkK", "hi\n", 3}, {"aGk=", "hi", 2}, {"aGk", "hi", 2},        {"aA==", "h", 1},
        {"aA", "h", 1},      {"", "", 0},       {"-_8=", "\xfb\xff", 2}, {"+/8=", "\xfb\xff", 2},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        json_t *j = json_string(ok[i].in);
        uint8_t *b = NULL;
        size_t n = 99;
        print_message("bytes '%s'\n", ok[i].in);
        assert_int_equal(gbx_connect_bytes(j, &b, &n), 0);
        assert_int_equal(n, ok[i].len);
        if (n)
            assert_memory_equal(b, ok[i].out, n);
        free(b);
        json_decref(j);
    }
    const char *bad[] = {"a", "a$==", "aGk!", "====a"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = json_string(bad[i]);
        uint8_t *b = NULL;
        size_t n;
        assert_int_equal(gbx_connect_bytes(j, &b, &n), -EINVAL);
        assert_null(b);
        json_decref(j);
    }
    char *enc = gbx_connect_b64((const uint8_t *)"hi\n", 3);
    assert_string_equal(enc, "aGkK");
    free(enc);
}

static void test_enum(void **state)
{
    static const char *const sig[16] = {
        [0] = "SIGNAL_UNSPECIFIED", [9] = "SIGNAL_SIGKILL", [15] = "SIGNAL_SIGTERM"};
    int v = -1;
    json_t *j = json_string("SIGNAL_SIGKILL");
    assert_int_equal(gbx_connect_enum(j, sig, 16, &v), 0);
    assert_int_equal(v, 9);
    json_decref(j);
    j = json_integer(15);
    assert_int_equal(gbx_connect_enum(j, sig, 16, &v), 0);
    assert_int_equal(v, 15);
    json_decref(j);
    j = json_integer(3); /* a hole */
    assert_int_equal(gbx_connect_enum(j, sig, 16, &v), -EINVAL);
    json_decref(j);
    j = json_string("SIGKILL");
    assert_int_equal(gbx_connect_enum(j, sig, 16, &v), -EINVAL);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_roundtrip),
        cmocka_unit_test(test_envelope_end_and_bad_flags),
        cmocka_unit_test(test_codes),
        cmocka_unit_test(test_ints),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_enum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
