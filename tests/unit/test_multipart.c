/* SPDX-License-Identifier: MIT */
/* multipart/form-data parsing (src/http/multipart.c): boundaries from Content-Type, parts and
 * their names, binary content, and the malformed bodies that must be refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http/multipart.h"

static int parse(const char *boundary, const char *body, size_t len, struct gbx_multipart *mp)
{
    const char *why = NULL;
    int r = gbx_multipart_parse(boundary, (const uint8_t *)body, len, 16, mp, &why);
    if (r < 0)
        assert_non_null(why);
    return r;
}

static void test_boundary(void **state)
{
    char b[GBX_MULTIPART_BOUNDARY_MAX + 1];
    assert_int_equal(gbx_multipart_boundary("multipart/form-data; boundary=abc123", b, sizeof(b)),
                     0);
    assert_string_equal(b, "abc123");
    assert_int_equal(gbx_multipart_boundary("Multipart/Form-Data;charset=utf-8; BOUNDARY=\"a b'c\"",
                                            b, sizeof(b)),
                     0);
    assert_string_equal(b, "a b'c");
    assert_int_equal(gbx_multipart_boundary("multipart/form-data", b, sizeof(b)), -EINVAL);
    assert_int_equal(gbx_multipart_boundary("text/plain; boundary=x", b, sizeof(b)), -EINVAL);
    assert_int_equal(gbx_multipart_boundary("multipart/form-data; boundary=", b, sizeof(b)),
                     -EINVAL);
    assert_int_equal(gbx_multipart_boundary("multipart/form-data; boundary=\"open", b, sizeof(b)),
                     -EINVAL);
    assert_int_equal(gbx_multipart_boundary("multipart/form-data; boundary=a{b", b, sizeof(b)),
                     -EINVAL);
    char longb[200] = "multipart/form-data; boundary=";
    memset(longb + strlen(longb), 'x', 71);
    assert_int_equal(gbx_multipart_boundary(longb, b, sizeof(b)), -EINVAL);
    assert_int_equal(gbx_multipart_boundary(NULL, b, sizeof(b)), -EINVAL);
}

static void test_two_files(void **state)
{
    static const char body[] =
        "preamble\r\n"
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"a\"; filename=\"one.txt\"\r\n"
        "Content-Type: text/plain\r\n"
        "\r\n"
        "hello\r\n"
        "--XyZ  \r\n"
        "content-disposition: form-data; filename=two.bin; name=b\r\n"
        "\r\n"
        "\0\1\r\n--XyZz\r\n"
        "--XyZ--\r\n"
        "epilogue";
    struct gbx_multipart mp;
    assert_int_equal(parse("XyZ", body, sizeof(body) - 1, &mp), 0);
    assert_int_equal(mp.n, 2);
    assert_string_equal(mp.parts[0].name, "a");
    assert_string_equal(mp.parts[0].filename, "one.txt");
    assert_string_equal(mp.parts[0].content_type, "text/plain");
    assert_int_equal(mp.parts[0].len, 5);
    assert_memory_equal(mp.parts[0].data, "hello", 5);
    assert_string_equal(mp.parts[1].name, "b");
    assert_string_equal(mp.parts[1].filename, "two.bin");
    assert_null(mp.parts[1].content_type);
    /* binary, and the boundary's text followed by more is data, not a delimiter */
    assert_int_equal(mp.parts[1].len, 10);
    assert_memory_equal(mp.parts[1].data, "\0\1\r\n--XyZz", 10);
    gbx_multipart_release(&mp);
    gbx_multipart_release(&mp); /* twice is fine */
}

static void test_edges(void **state)
{
    struct gbx_multipart mp;
    /* a field without filename, an empty part, escaped quotes */
    static const char a[] = "--b\r\nContent-Disposition: form-data; name=\"f\\\"x\"\r\n\r\n\r\n"
                            "--b\r\n\r\nno headers\r\n--b--";
    assert_int_equal(parse("b", a, sizeof(a) - 1, &mp), 0);
    assert_int_equal(mp.n, 2);
    assert_string_equal(mp.parts[0].name, "f\"x");
    assert_null(mp.parts[0].filename);
    assert_int_equal(mp.parts[0].len, 0);
    assert_null(mp.parts[1].name);
    assert_int_equal(mp.parts[1].len, 10);
    gbx_multipart_release(&mp);
    /* only the close delimiter: no parts */
    assert_int_equal(parse("b", "--b--\r\n", 7, &mp), 0);
    assert_int_equal(mp.n, 0);
    gbx_multipart_release(&mp);
}

static void test_malformed(void **state)
{
    struct gbx_multipart mp;
    static const char *const bad[] = {
        "",
        "no boundary at all",
        "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nunterminated",
        "--b\r\nContent-Disposition: form-data; name=a\r\nno end of headers",
        "--bX\r\n\r\nx\r\n--b--",
        "--b\r\nContent-Disposition: attachment; filename=x\r\n\r\nx\r\n--b--",
        "--b\r\nContent-Disposition: form-data; name=\"open\r\n\r\nx\r\n--b--",
        "--b\r\nContent-Disposition: form-data; name\r\n\r\nx\r\n--b--",
        "--b\r\nNoColon\r\n\r\nx\r\n--b--",
        "--b\r\nX: 1\r\n folded\r\n\r\nx\r\n--b--",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse("b", bad[i], strlen(bad[i]), &mp), -EINVAL);
        assert_int_equal(mp.n, 0);
        assert_null(mp.parts);
    }
    static const char ctl[] =
        "--b\r\nContent-Disposition: form-data; name=\"a\0b\"\r\n\r\nx\r\n--b--";
    assert_int_equal(parse("b", ctl, sizeof(ctl) - 1, &mp), -EINVAL);
}

static void test_limits(void **state)
{
    struct gbx_multipart mp;
    char body[4096] = "";
    for (int i = 0; i < 17; i++)
        strcat(body, "--b\r\n\r\nx\r\n");
    strcat(body, "--b--");
    assert_int_equal(parse("b", body, strlen(body), &mp), -E2BIG);
    assert_null(mp.parts);
    static char big[GBX_MULTIPART_HEADERS_MAX + 64];
    memset(big, 'h', sizeof(big));
    memcpy(big, "--b\r\nX: ", 8);
    assert_int_equal(parse("b", big, sizeof(big), &mp), -E2BIG);
    assert_int_equal(gbx_multipart_parse("", (const uint8_t *)"--\r\n", 4, 1, &mp, NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundary), cmocka_unit_test(test_two_files),
        cmocka_unit_test(test_edges),    cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
