/* SPDX-License-Identifier: MIT */
/* A DevTools server's /json answers re-addressed by ingress (src/ingress/cdp_json.c): the
 * loopback address in every string becomes the client's, a relative devtoolsFrontendUrl gets
 * the path form's prefix, an incomplete answer asks for more, and what is not HTTP is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ingress/cdp_json.h"

#define VERSION_BODY                                                                               \
    "{\"Browser\":\"Chrome/156.0\",\"webSocketDebuggerUrl\":"                                      \
    "\"ws://127.0.0.1:9222/devtools/browser/abc\"}"

/* The answer's body parsed; its head checked to say what the body is. */
static json_t *body_of(const char *out, size_t n)
{
    const char *b = strstr(out, "\r\n\r\n");
    assert_non_null(b);
    b += 4;
    const char *cl = strstr(out, "Content-Length: ");
    assert_non_null(cl);
    assert_true(cl < b);
    assert_int_equal(strtoul(cl + 16, NULL, 10), n - (size_t)(b - out));
    assert_non_null(strstr(out, "Connection: close\r\n"));
    json_t *j = json_loadb(b, n - (size_t)(b - out), JSON_DECODE_ANY, NULL);
    assert_non_null(j);
    return j;
}

static void test_host_form(void **state)
{
    (void)state;
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       "Content-Length: 92\r\n\r\n" VERSION_BODY;
    assert_int_equal(strlen(VERSION_BODY), 92);
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(
        gbx_ingress_cdp_answer(resp, strlen(resp), 0, 9222, "9222-sb-1.sbx.test", "", &out, &n), 0);
    assert_int_equal(strncmp(out, "HTTP/1.1 200 OK\r\n", 17), 0);
    json_t *j = body_of(out, n);
    assert_string_equal(json_string_value(json_object_get(j, "webSocketDebuggerUrl")),
                        "ws://9222-sb-1.sbx.test/devtools/browser/abc");
    assert_string_equal(json_string_value(json_object_get(j, "Browser")), "Chrome/156.0");
    json_decref(j);
    free(out);
}

static void test_path_form_list(void **state)
{
    (void)state;
    const char *body =
        "[{\"id\":\"P1\",\"devtoolsFrontendUrl\":\"/devtools/inspector.html?ws=127.0.0.1:9222/"
        "devtools/page/P1\",\"webSocketDebuggerUrl\":\"ws://127.0.0.1:9222/devtools/page/P1\","
        "\"url\":\"http://127.0.0.1:92220/keep\",\"n\":3},"
        "{\"id\":\"P2\",\"webSocketDebuggerUrl\":\"ws://127.0.0.1:9222/devtools/page/P2\"}]";
    char resp[2048];
    snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", strlen(body),
             body);
    const char *prefix = "/v1/sandboxes/sb-1/ports/9222";
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(
        gbx_ingress_cdp_answer(resp, strlen(resp), 0, 9222, "127.0.0.1:7070", prefix, &out, &n), 0);
    json_t *j = body_of(out, n);
    assert_true(json_is_array(j));
    assert_int_equal(json_array_size(j), 2);
    json_t *p1 = json_array_get(j, 0);
    assert_string_equal(json_string_value(json_object_get(p1, "webSocketDebuggerUrl")),
                        "ws://127.0.0.1:7070/v1/sandboxes/sb-1/ports/9222/devtools/page/P1");
    assert_string_equal(json_string_value(json_object_get(p1, "devtoolsFrontendUrl")),
                        "/v1/sandboxes/sb-1/ports/9222/devtools/inspector.html?ws=127.0.0.1:7070/"
                        "v1/sandboxes/sb-1/ports/9222/devtools/page/P1");
    /* another port's address is the page's own business: kept as it was */
    assert_string_equal(json_string_value(json_object_get(p1, "url")),
                        "http://127.0.0.1:92220/keep");
    assert_int_equal(json_integer_value(json_object_get(p1, "n")), 3);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(j, 1), "webSocketDebuggerUrl")),
        "ws://127.0.0.1:7070/v1/sandboxes/sb-1/ports/9222/devtools/page/P2");
    json_decref(j);
    free(out);
}

/* Chromium ignores "Connection: close": an answer is complete by its Content-Length, and one
 * cut short asks for more (or, at the end of the connection, is refused). */
static void test_incomplete(void **state)
{
    (void)state;
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 92\r\n\r\n" VERSION_BODY;
    char *out = NULL;
    size_t n = 0;
    for (size_t cut = 0; cut < strlen(resp); cut++) {
        assert_int_equal(gbx_ingress_cdp_answer(resp, cut, 0, 9222, "h", "", &out, &n), 1);
        assert_int_equal(gbx_ingress_cdp_answer(resp, cut, 1, 9222, "h", "", &out, &n), -1);
    }
    assert_null(out);
    /* no Content-Length: the body ends with the connection */
    const char *eof = "HTTP/1.0 200 OK\r\n\r\n{\"a\":\"ws://127.0.0.1:9222/x\"}";
    assert_int_equal(gbx_ingress_cdp_answer(eof, strlen(eof), 0, 9222, "h:1", "", &out, &n), 1);
    assert_int_equal(gbx_ingress_cdp_answer(eof, strlen(eof), 1, 9222, "h:1", "", &out, &n), 0);
    json_t *j = body_of(out, n);
    assert_string_equal(json_string_value(json_object_get(j, "a")), "ws://h:1/x");
    json_decref(j);
    free(out);
}

/* A chunked body (in more than one piece) is joined before it is read. */
static void test_chunked(void **state)
{
    (void)state;
    const char *resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "6\r\n{\"a\":\"\r\n15\r\nws://127.0.0.1:9222/y\r\n2\r\n\"}\r\n0\r\n\r\n";
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(gbx_ingress_cdp_answer(resp, strlen(resp), 0, 9222, "e", "/p", &out, &n), 0);
    json_t *j = body_of(out, n);
    assert_string_equal(json_string_value(json_object_get(j, "a")), "ws://e/p/y");
    json_decref(j);
    assert_null(strstr(out, "chunked"));
    free(out);
}

/* What is not JSON is passed on as it was, with its status; what is not HTTP is refused. */
static void test_not_json_not_http(void **state)
{
    (void)state;
    const char *resp = "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nno target";
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(gbx_ingress_cdp_answer(resp, strlen(resp), 0, 9222, "e", "", &out, &n), 0);
    assert_int_equal(strncmp(out, "HTTP/1.1 404 Not Found\r\n", 24), 0);
    assert_non_null(strstr(out, "Content-Length: 9\r\n"));
    assert_int_equal(n, strlen(out));
    assert_string_equal(out + n - 9, "no target");
    free(out);
    out = NULL;
    static const char *const bad[] = {"GET / HTTP/1.1\r\n\r\n", "SSH-2.0-x\r\n",
                                      "HTTP/1.1 99999 X\r\nContent-Length: 0\r\n\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gbx_ingress_cdp_answer(bad[i], strlen(bad[i]), 1, 9222, "e", "", &out, &n),
                         -1);
        assert_null(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_form),         cmocka_unit_test(test_path_form_list),
        cmocka_unit_test(test_incomplete),        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_not_json_not_http),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
