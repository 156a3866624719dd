/* SPDX-License-Identifier: MIT */
/* Ingress routes (src/ingress/route.c): the host form and the path form, what is ingress's
 * and what is not, malformed ports and ids, and the path form's head rewritten. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ingress/route.h"

static void test_host(void **state)
{
    (void)state;
    struct gbx_ingress_route r;
    assert_int_equal(gbx_ingress_route_host("sbx.test", "8000-sb-1a2b.sbx.test", &r), 1);
    assert_null(r.error);
    assert_int_equal(r.port, 8000);
    assert_string_equal(r.id, "sb-1a2b");
    assert_int_equal(r.prefix_len, 0);
    /* not ingress's: another name, the domain itself, a deeper name's suffix only */
    assert_int_equal(gbx_ingress_route_host("sbx.test", "sbx.test", &r), 0);
    assert_int_equal(gbx_ingress_route_host("sbx.test", "api.example.com", &r), 0);
    assert_int_equal(gbx_ingress_route_host("sbx.test", "8000-a.xsbx.test", &r), 0);
    assert_int_equal(gbx_ingress_route_host("", "8000-a.", &r), 0);
    /* ingress's, malformed: said why */
    static const char *const bad[] = {"0-a.sbx.test",  "65536-a.sbx.test",  "http-a.sbx.test",
                                      "8000.sbx.test", "8000-.sbx.test",    "a.b.sbx.test",
                                      "-a.sbx.test",   "123456-a.sbx.test", "8000-a!b.sbx.test"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gbx_ingress_route_host("sbx.test", bad[i], &r), 1);
        assert_non_null(r.error);
    }
    assert_int_equal(gbx_ingress_route_host("sbx.test", "65535-x.sbx.test", &r), 1);
    assert_null(r.error);
    assert_int_equal(r.port, 65535);
}

static void test_path(void **state)
{
    (void)state;
    struct gbx_ingress_route r;
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes/sb-1/ports/8000/a/b?c=d", &r), 1);
    assert_null(r.error);
    assert_string_equal(r.id, "sb-1");
    assert_int_equal(r.port, 8000);
    assert_int_equal(r.prefix_len, strlen("/v1/sandboxes/sb-1/ports/8000"));
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes/sb-1/ports/8000", &r), 1);
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes/sb-1/ports/8000?x", &r), 1);
    /* the API's routes */
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes/sb-1", &r), 0);
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes/sb-1/exec", &r), 0);
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes", &r), 0);
    assert_int_equal(gbx_ingress_route_path("/healthz", &r), 0);
    /* ingress's, malformed */
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes/sb-1/ports/x/", &r), 1);
    assert_non_null(r.error);
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes/sb-1/ports/", &r), 1);
    assert_non_null(r.error);
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes//ports/80", &r), 1);
    assert_non_null(r.error);
    assert_int_equal(gbx_ingress_route_path("/v1/sandboxes/a%2Fb/ports/80", &r), 1);
    assert_non_null(r.error);
}

static void rewrite_as(const char *head, size_t prefix, int upgrade, const char *host,
                       const char *want)
{
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(gbx_ingress_rewrite_head(head, strlen(head), prefix, upgrade, host, &out, &n),
                     0);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(out, want, n);
    free(out);
}

static void rewrite(const char *head, size_t prefix, int upgrade, const char *want)
{
    rewrite_as(head, prefix, upgrade, NULL, want);
}

static void test_rewrite(void **state)
{
    (void)state;
    const char *p = "/v1/sandboxes/s/ports/80";
    size_t pl = strlen(p);
    rewrite("GET /v1/sandboxes/s/ports/80/a?b HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n"
            "Keep-Alive: timeout=5\r\nAccept: */*\r\n\r\n",
            pl, 0, "GET /a?b HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nConnection: close\r\n\r\n");
    rewrite("GET /v1/sandboxes/s/ports/80 HTTP/1.1\r\n\r\n", pl, 0,
            "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    rewrite("GET /v1/sandboxes/s/ports/80?q=1 HTTP/1.1\r\nHost: x\r\n\r\n", pl, 0,
            "GET /?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    /* an upgrade keeps its Connection */
    rewrite("GET /v1/sandboxes/s/ports/80/ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: "
            "websocket\r\n\r\n",
            pl, 1, "GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    /* a browser's DevTools port: its Host is the sandbox's loopback (every Host line) */
    rewrite_as("GET /v1/sandboxes/s/ports/80/json/version HTTP/1.1\r\nHost: a.b:1\r\nhost: c\r\n"
               "Accept: */*\r\n\r\n",
               pl, 0, "127.0.0.1:9222",
               "GET /json/version HTTP/1.1\r\nAccept: */*\r\nConnection: close\r\nHost: "
               "127.0.0.1:9222\r\n\r\n");
    rewrite_as(
        "GET /devtools/browser/x HTTP/1.1\r\nHost: 9222-s.d\r\nUpgrade: websocket\r\n\r\n", 0, 1,
        "127.0.0.1:9222",
        "GET /devtools/browser/x HTTP/1.1\r\nUpgrade: websocket\r\nHost: 127.0.0.1:9222\r\n\r\n");
    char *out = NULL;
    size_t n = 0;
    static const char *const bad[] = {"GET /v1/x HTTP/1.1\r\n\r\n", "GET\r\n\r\n",
                                      "GET /v1/sandboxes/s/ports/80 HTTP/1.1\r\n", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gbx_ingress_rewrite_head(bad[i], strlen(bad[i]), pl, 0, NULL, &out, &n),
                         -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_rewrite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
