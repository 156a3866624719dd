/* SPDX-License-Identifier: MIT */
/* Unit tests for src/egress/verdict.c: the words for how an egress connection ended, and the
 * HTTP answer a plain HTTP client gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "egress/verdict.h"

static void test_names(void **state)
{
    assert_string_equal(gbx_egress_verdict_name(GBX_EGRESS_ALLOW), "allow");
    assert_string_equal(gbx_egress_verdict_name(GBX_EGRESS_DENY), "deny");
    assert_string_equal(gbx_egress_verdict_name(GBX_EGRESS_UPSTREAM_FAILED), "upstream_failed");
    assert_string_equal(gbx_egress_verdict_name(GBX_EGRESS_CLIENT_ERROR), "client_error");
    assert_string_equal(gbx_egress_verdict_name(GBX_EGRESS_NVERDICTS), "deny");
    /* every name reads back as its verdict */
    for (int v = 0; v < GBX_EGRESS_NVERDICTS; v++)
        assert_int_equal(gbx_egress_verdict_parse(gbx_egress_verdict_name(v)), v);
    /* anything else is a refusal */
    assert_int_equal(gbx_egress_verdict_parse(NULL), GBX_EGRESS_DENY);
    assert_int_equal(gbx_egress_verdict_parse(""), GBX_EGRESS_DENY);
    assert_int_equal(gbx_egress_verdict_parse("Allow"), GBX_EGRESS_DENY);
    assert_int_equal(gbx_egress_verdict_parse("upstream"), GBX_EGRESS_DENY);
}

/* the body a response carries, and that Content-Length says its length */
static const char *body_of(const char *resp)
{
    const char *b = strstr(resp, "\r\n\r\n");
    assert_non_null(b);
    b += 4;
    const char *cl = strstr(resp, "Content-Length: ");
    assert_non_null(cl);
    unsigned len = 0;
    assert_int_equal(sscanf(cl, "Content-Length: %u", &len), 1);
    assert_int_equal(len, strlen(b));
    return b;
}

static void test_http(void **state)
{
    char buf[GBX_EGRESS_VERDICT_HTTP_MAX];
    size_t n =
        gbx_egress_verdict_http(502, "cannot resolve 'pypi.org': no such name", buf, sizeof(buf));
    assert_int_equal(n, strlen(buf));
    assert_memory_equal(buf, "HTTP/1.1 502 Bad Gateway\r\n", 26);
    assert_non_null(strstr(buf, "\r\nConnection: close\r\n"));
    assert_string_equal(body_of(buf),
                        "glovebox egress: upstream failed: cannot resolve 'pypi.org': no such "
                        "name\n");
    n = gbx_egress_verdict_http(504, "upstream connect timed out", buf, sizeof(buf));
    assert_memory_equal(buf, "HTTP/1.1 504 Gateway Timeout\r\n", 30);
    assert_string_equal(body_of(buf), "glovebox egress: upstream timed out: upstream connect "
                                      "timed out\n");
    n = gbx_egress_verdict_http(403, NULL, buf, sizeof(buf));
    assert_memory_equal(buf, "HTTP/1.1 403 Forbidden\r\n", 24);
    assert_string_equal(body_of(buf), "glovebox egress: denied by policy\n");
    /* no answer for anything else, nor into a buffer too small */
    assert_int_equal(gbx_egress_verdict_http(200, "x", buf, sizeof(buf)), 0);
    assert_int_equal(gbx_egress_verdict_http(500, "x", buf, sizeof(buf)), 0);
    assert_int_equal(gbx_egress_verdict_http(502, "x", buf, 40), 0);
}

static void test_http_long_reason(void **state)
{
    char reason[1000], buf[GBX_EGRESS_VERDICT_HTTP_MAX];
    memset(reason, 'a', sizeof(reason) - 1);
    reason[sizeof(reason) - 1] = '\0';
    size_t n = gbx_egress_verdict_http(502, reason, buf, sizeof(buf));
    assert_true(n > 0 && n < sizeof(buf));
    const char *b = body_of(buf);
    assert_int_equal(strlen(b), 255);
    assert_int_equal(b[254], '\n');
    assert_null(strchr(b, '\r'));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_http_long_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
