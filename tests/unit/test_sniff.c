/* SPDX-License-Identifier: MIT */
/* Unit tests for src/egress/sniff.c: the server name of real ClientHellos built by an OpenSSL
 * client, HTTP request heads, and the client-side HTTP/1.1 relay (rebuilt heads, header
 * injection, bodies passed through, refusals of anything that could smuggle). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "egress/sniff.h"

/* ---- TLS ---------------------------------------------------------------------------------- */

/* The first flight of an OpenSSL client: maxver 0 for any version, sni NULL for none. */
static size_t make_hello(uint8_t *buf, size_t bufsz, int maxver, const char *sni, int alpn)
{
    static const unsigned char protos[] = "\x02h2\x08http/1.1";
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(ctx);
    if (maxver)
        assert_int_equal(SSL_CTX_set_max_proto_version(ctx, maxver), 1);
    SSL *ssl = SSL_new(ctx);
    assert_non_null(ssl);
    BIO *rbio = BIO_new(BIO_s_mem());
    BIO *wbio = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(rbio, -1);
    SSL_set_bio(ssl, rbio, wbio);
    SSL_set_connect_state(ssl);
    if (sni) {
        char name[256]; /* the macro casts away const */
        snprintf(name, sizeof(name), "%s", sni);
        assert_int_equal(SSL_set_tlsext_host_name(ssl, name), 1);
    }
    if (alpn)
        assert_int_equal(SSL_set_alpn_protos(ssl, protos, sizeof(protos) - 1), 0);
    int r = SSL_do_handshake(ssl);
    assert_true(r <= 0);
    assert_int_equal(SSL_get_error(ssl, r), SSL_ERROR_WANT_READ);
    int n = BIO_read(wbio, buf, (int)bufsz);
    assert_true(n > 0 && (size_t)n < bufsz);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return (size_t)n;
}

static void test_tls_is_tls(void **state)
{
    static const uint8_t ok[] = {0x16, 0x03, 0x01}, v13[] = {0x16, 0x03, 0x04},
                         v5[] = {0x16, 0x03, 0x05}, app[] = {0x17, 0x03, 0x03};
    assert_int_equal(gbx_sniff_is_tls(ok, 3), 1);
    assert_int_equal(gbx_sniff_is_tls(v13, 3), 1);
    assert_int_equal(gbx_sniff_is_tls(ok, 2), 0);
    assert_int_equal(gbx_sniff_is_tls(v5, 3), 0);
    assert_int_equal(gbx_sniff_is_tls(app, 3), 0);
    assert_int_equal(gbx_sniff_is_tls((const uint8_t *)"GET / HTTP/1.1\r\n", 16), 0);
}

static void test_tls_sni(void **state)
{
    static const int versions[] = {TLS1_2_VERSION, TLS1_3_VERSION, 0};
    uint8_t buf[4096];
    char sni[256];

    for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++) {
        for (int alpn = 0; alpn <= 1; alpn++) {
            size_t n = make_hello(buf, sizeof(buf), versions[v], "example.com", alpn);
            assert_int_equal(gbx_sniff_is_tls(buf, n), 1);
            assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_OK);
            assert_string_equal(sni, "example.com");

            n = make_hello(buf, sizeof(buf), versions[v], NULL, alpn);
            memset(sni, 'x', sizeof(sni));
            assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_OK);
            assert_string_equal(sni, "");
        }
    }
    /* lowercased; bytes after the ClientHello do not matter */
    size_t n = make_hello(buf, sizeof(buf), 0, "API.Example.COM", 1);
    memcpy(buf + n, "\x17\x03\x03\x00\x01x", 6);
    assert_int_equal(gbx_sniff_tls_sni(buf, n + 6, sni, sizeof(sni)), GBX_SNIFF_OK);
    assert_string_equal(sni, "api.example.com");
}

static void test_tls_prefixes(void **state)
{
    uint8_t buf[4096];
    char sni[64];
    int versions[] = {TLS1_2_VERSION, 0};

    for (size_t v = 0; v < 2; v++) {
        size_t n = make_hello(buf, sizeof(buf), versions[v], "prefix.example.org", 1);
        for (size_t i = 0; i < n; i++) {
            int r = gbx_sniff_tls_sni(buf, i, sni, sizeof(sni));
            if (r != GBX_SNIFF_MORE)
                print_message("prefix %zu of %zu: %d\n", i, n, r);
            assert_int_equal(r, GBX_SNIFF_MORE);
            assert_string_equal(sni, "");
        }
        assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_OK);
        assert_string_equal(sni, "prefix.example.org");
    }
}

static void test_tls_sni_length(void **state)
{
    uint8_t buf[4096];
    char name[254];
    char sni[256];

    memset(name, 'a', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    for (size_t i = 60; i < sizeof(name) - 1; i += 61)
        name[i] = '.'; /* labels of at most 63 */
    size_t n = make_hello(buf, sizeof(buf), 0, name, 0);
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_OK);
    assert_string_equal(sni, name);
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, strlen(name) + 1), GBX_SNIFF_OK);
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, strlen(name)), GBX_SNIFF_BAD);
    assert_string_equal(sni, "");
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, 64), GBX_SNIFF_BAD);
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, 1), GBX_SNIFF_BAD);
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, 0), GBX_SNIFF_BAD);

    /* names that are not host names */
    static const char *bad[] = {"under_score.example", "sp ace.example", "a\x7f.example"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        n = make_hello(buf, sizeof(buf), 0, bad[i], 0);
        assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_BAD);
    }
}

static void test_tls_corrupt(void **state)
{
    uint8_t hello[4096], buf[4096];
    char sni[256];
    size_t n = make_hello(hello, sizeof(hello), 0, "corrupt.example", 1);
    uint8_t *name = memmem(hello, n, "corrupt.example", 15);
    assert_non_null(name);
    size_t off = (size_t)(name - hello);
    assert_true(off >= 9);
    /* the extension: type 0x0000, ext len, list len, name type, name len, name */
    assert_int_equal(hello[off - 9], 0);
    assert_int_equal(hello[off - 8], 0);
    assert_int_equal(hello[off - 3], 0);
    assert_int_equal(hello[off - 1], 15);

    static const struct {
        size_t back; /* offset before the name */
        int delta;
    } edits[] = {
        {5, 0}, {4, 1},  {4, -1}, /* list length */
        {3, 1},                   /* name type */
        {1, 1}, {1, -1},          /* name length */
        {2, 1},                   /* name length, high byte */
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        memcpy(buf, hello, n);
        if (edits[i].back == 5)
            buf[off - 5] = 0x80; /* list length far too long */
        else
            buf[off - edits[i].back] = (uint8_t)(buf[off - edits[i].back] + edits[i].delta);
        print_message("edit %zu\n", i);
        assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_BAD);
    }
    memcpy(buf, hello, n);
    name = buf + off;
    name[3] = '_';
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_BAD);
    name[3] = 0;
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_BAD);

    /* not a ClientHello: a ServerHello type, a record of another content type */
    memcpy(buf, hello, n);
    buf[5] = 2;
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_BAD);
    memcpy(buf, hello, n);
    buf[0] = 0x17;
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_BAD);
    /* a record shorter than the handshake message it starts, then another record type */
    memcpy(buf, hello, n);
    buf[3] = 0;
    buf[4] = 10;
    buf[15] = 0x17;
    assert_int_equal(gbx_sniff_tls_sni(buf, n, sni, sizeof(sni)), GBX_SNIFF_BAD);

    /* every single byte flipped: never a crash, never a name that is not a host name */
    for (size_t i = 0; i < n; i++) {
        memcpy(buf, hello, n);
        buf[i] ^= 0xff;
        int r = gbx_sniff_tls_sni(buf, n, sni, sizeof(sni));
        assert_true(r == GBX_SNIFF_OK || r == GBX_SNIFF_MORE || r == GBX_SNIFF_BAD);
        assert_int_equal(strspn(sni, "abcdefghijklmnopqrstuvwxyz0123456789.-"), strlen(sni));
        if (r != GBX_SNIFF_OK)
            assert_string_equal(sni, "");
    }
}

static void test_tls_not_tls(void **state)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    static const uint8_t sslv2[] = {0x80, 0x2e, 0x01, 0x00, 0x02, 0x00, 0x15};
    static const uint8_t p1[] = {0x16}, p2[] = {0x16, 0x03}, bad2[] = {0x16, 0x02};
    char sni[64];

    assert_int_equal(gbx_sniff_tls_sni((const uint8_t *)http, strlen(http), sni, sizeof(sni)),
                     GBX_SNIFF_BAD);
    assert_int_equal(gbx_sniff_tls_sni(sslv2, sizeof(sslv2), sni, sizeof(sni)), GBX_SNIFF_BAD);
    assert_int_equal(gbx_sniff_tls_sni(p1, 1, sni, sizeof(sni)), GBX_SNIFF_MORE);
    assert_int_equal(gbx_sniff_tls_sni(p2, 2, sni, sizeof(sni)), GBX_SNIFF_MORE);
    assert_int_equal(gbx_sniff_tls_sni(bad2, 2, sni, sizeof(sni)), GBX_SNIFF_BAD);
    assert_int_equal(gbx_sniff_tls_sni((const uint8_t *)"G", 1, sni, sizeof(sni)), GBX_SNIFF_BAD);
    assert_int_equal(gbx_sniff_tls_sni(NULL, 0, sni, sizeof(sni)), GBX_SNIFF_MORE);
}

static void test_tls_too_big(void **state)
{
    /* A handshake record of 16 KiB announcing a 64 KiB ClientHello: a prefix at first, BAD
     * once 16 KiB have arrived without the ClientHello being whole. */
    size_t len = GBX_SNIFF_TLS_MAX + 4096;
    uint8_t *buf = calloc(1, len);
    char sni[64];
    assert_non_null(buf);
    memcpy(buf, "\x16\x03\x01\x40\x00\x01\x01\x00\x00\x03\x03", 11);
    assert_int_equal(gbx_sniff_tls_sni(buf, 1000, sni, sizeof(sni)), GBX_SNIFF_MORE);
    assert_int_equal(gbx_sniff_tls_sni(buf, GBX_SNIFF_TLS_MAX - 1, sni, sizeof(sni)),
                     GBX_SNIFF_MORE);
    assert_int_equal(gbx_sniff_tls_sni(buf, GBX_SNIFF_TLS_MAX, sni, sizeof(sni)), GBX_SNIFF_BAD);
    assert_int_equal(gbx_sniff_tls_sni(buf, len, sni, sizeof(sni)), GBX_SNIFF_BAD);
    free(buf);
}

/* ---- HTTP heads --------------------------------------------------------------------------- */

static int head(const char *s, struct gbx_http_head *h)
{
    return gbx_sniff_http_head((const uint8_t *)s, strlen(s), h);
}

static void test_head_simple(void **state)
{
    struct gbx_http_head h;
    const char *req = "GET /x?y HTTP/1.1\r\nHost: Example.COM\r\nAccept: */*\r\n\r\n";
    assert_int_equal(head(req, &h), GBX_SNIFF_OK);
    assert_string_equal(h.method, "GET");
    assert_string_equal(h.path, "/x?y");
    assert_string_equal(h.host, "example.com");
    assert_int_equal(h.host_port, 0);
    assert_int_equal(h.head_len, strlen(req));

    /* a body after the head is not part of it */
    const char *post = "POST /up HTTP/1.1\r\nHost: a.example:8080\r\nContent-Length: 5\r\n\r\n";
    char buf[256];
    snprintf(buf, sizeof(buf), "%shello", post);
    assert_int_equal(head(buf, &h), GBX_SNIFF_OK);
    assert_string_equal(h.method, "POST");
    assert_string_equal(h.host, "a.example");
    assert_int_equal(h.host_port, 8080);
    assert_int_equal(h.head_len, strlen(post));

    assert_int_equal(head("GET / HTTP/1.0\r\n\r\n", &h), GBX_SNIFF_OK);
    assert_string_equal(h.host, "");
    assert_int_equal(h.host_port, 0);

    assert_int_equal(head("GET / HTTP/1.1\r\nHost: [2001:DB8::1]:8443\r\n\r\n", &h), GBX_SNIFF_OK);
    assert_string_equal(h.host, "2001:db8::1");
    assert_int_equal(h.host_port, 8443);

    assert_int_equal(head("OPTIONS * HTTP/1.1\r\nHost: o.example\r\n\r\n", &h), GBX_SNIFF_OK);
    assert_string_equal(h.path, "*");

    /* empty lines before the request line are skipped (RFC 9112 2.2) and counted */
    assert_int_equal(head("\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", &h), GBX_SNIFF_OK);
    assert_int_equal(h.head_len, 29);
}

static void test_head_absolute(void **state)
{
    struct gbx_http_head h;
    assert_int_equal(
        head("GET http://Example.com:81/x?q HTTP/1.1\r\nHost: example.com\r\n\r\n", &h),
        GBX_SNIFF_OK);
    assert_string_equal(h.path, "http://Example.com:81/x?q");
    assert_string_equal(h.host, "example.com");
    assert_int_equal(h.host_port, 81);

    assert_int_equal(head("GET http://u:p@h.example/ HTTP/1.1\r\n\r\n", &h), GBX_SNIFF_OK);
    assert_string_equal(h.host, "h.example");
    assert_int_equal(h.host_port, 0);

    assert_int_equal(head("GET http://[::1]:9/ HTTP/1.1\r\n\r\n", &h), GBX_SNIFF_OK);
    assert_string_equal(h.host, "::1");
    assert_int_equal(h.host_port, 9);

    /* the URL and the Host header disagree: refused */
    assert_int_equal(head("GET http://good.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", &h),
                     GBX_SNIFF_BAD);
    assert_int_equal(head("GET ftp://good.example/ HTTP/1.1\r\n\r\n", &h), GBX_SNIFF_BAD);
}

static void test_head_prefixes(void **state)
{
    struct gbx_http_head h;
    const char *req = "POST http://p.example/a HTTP/1.1\r\nHost: p.example\r\n"
                      "Content-Length: 3\r\nX-A: b\r\n\r\n";
    size_t n = strlen(req);
    for (size_t i = 0; i < n; i++) {
        int r = gbx_sniff_http_head((const uint8_t *)req, i, &h);
        if (r != GBX_SNIFF_MORE)
            print_message("prefix %zu: %d\n", i, r);
        assert_int_equal(r, GBX_SNIFF_MORE);
    }
    assert_int_equal(gbx_sniff_http_head((const uint8_t *)req, n, &h), GBX_SNIFF_OK);
    assert_int_equal(h.head_len, n);
}

/* "GET / HTTP/1.1\r\nHost: s.example\r\nX: aaaa...\r\n\r\n", total bytes long */
static char *head_of_size(size_t total)
{
    const char *pre = "GET / HTTP/1.1\r\nHost: s.example\r\nX: ";
    char *s = malloc(total + 1);
    assert_non_null(s);
    size_t p = strlen(pre);
    assert_true(total > p + 4);
    memcpy(s, pre, p);
    memset(s + p, 'a', total - p - 4);
    memcpy(s + total - 4, "\r\n\r\n", 5);
    return s;
}

static void test_head_limits(void **state)
{
    struct gbx_http_head h;
    char *s = head_of_size(GBX_SNIFF_HEAD_MAX);
    assert_int_equal(head(s, &h), GBX_SNIFF_OK);
    assert_int_equal(h.head_len, GBX_SNIFF_HEAD_MAX);
    free(s);
    s = head_of_size(GBX_SNIFF_HEAD_MAX + 1);
    assert_int_equal(head(s, &h), GBX_SNIFF_BAD);
    assert_int_equal(gbx_sniff_http_head((const uint8_t *)s, GBX_SNIFF_HEAD_MAX, &h),
                     GBX_SNIFF_BAD);
    assert_int_equal(gbx_sniff_http_head((const uint8_t *)s, GBX_SNIFF_HEAD_MAX - 1, &h),
                     GBX_SNIFF_MORE);
    free(s);

    /* a path that does not fit */
    char big[2200];
    int n = snprintf(big, sizeof(big), "GET /%02100d HTTP/1.1\r\n\r\n", 0);
    assert_true(n > 2048);
    assert_int_equal(head(big, &h), GBX_SNIFF_BAD);
    snprintf(big, sizeof(big), "GET /%02046d HTTP/1.1\r\n\r\n", 0);
    assert_int_equal(head(big, &h), GBX_SNIFF_OK);
    assert_int_equal(strlen(h.path), 2047);
    /* a host that does not fit */
    snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nHost: %0256d\r\n\r\n", 0);
    assert_int_equal(head(big, &h), GBX_SNIFF_BAD);
}

/* Heads every parser here refuses, with or without the relay. */
#define B(s)                                                                                       \
    {                                                                                              \
        s, sizeof(s) - 1                                                                           \
    }
static const struct {
    const char *s;
    size_t len;
} bad_heads[] = {
    B("GET / HTTP/1.1\r\nHost: a.example\r\nHost: a.example\r\n\r\n"),
    B("GET / HTTP/1.1\r\nHost: a.example\r\nhost: b.example\r\n\r\n"),
    B("GET / HTTP/1.1\nHost: a.example\n\n"),                            /* bare LF */
    B("GET / HTTP/1.1\r\nHost: a.example\nX: y\r\n\r\n"),                /* bare LF */
    B("GET / HTTP/1.1\r\nHost: a.example\r\nX: y\r\n \tfolded\r\n\r\n"), /* obs-fold */
    B("GET / HTTP/1.1\r\n Host: a.example\r\n\r\n"),
    B("GET / HTTP/1.1\r\nHost: a.example\r\nX: a\rY: b\r\n\r\n"), /* CR without LF */
    B("GET / HTTP/1.1\r\nHost: a.example\r\n\rX"),
    B("GET / HTTP/1.1\r\nContent Length: 5\r\n\r\n"),           /* not a token */
    B("GET / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n"), /* not a token */
    B("GET /a\tb HTTP/1.1\r\n\r\n"),
    B("GET /a\x80 HTTP/1.1\r\n\r\n"),
    B("GET / HTTP/2.0\r\n\r\n"),
    B("GET / HTTP/1.2\r\n\r\n"),
    B("GET / HQQQ/1.1\r\nX:\r\n\rX"), /* lenient http-parser accepts the version; the CR not */
    B("GET / HTTP/1.1\r\nX: a\x01\r\n\r\n"),
    B("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n"),
    B("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
    B("GET / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n"),
    B("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
    B("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
    B("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
    B("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
    B("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
    B("POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n"),
    B("POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n"),
    B("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"),
    B("GET / HTTP/1.1\r\nHost: a.example:0\r\n\r\n"),
    B("GET / HTTP/1.1\r\nHost: a.example:65536\r\n\r\n"),
    B("GET / HTTP/1.1\r\nHost: a.example:1x\r\n\r\n"),
    B("GET / HTTP/1.1\r\nHost: a.example@b.example\r\n\r\n"),
    B("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n"),
    B("GET / HTTP/1.1\r\nHost: [a.b]\r\n\r\n"),
    B("GET * HTTP/1.1\r\n\r\n"),
    B("GET x HTTP/1.1\r\n\r\n"),
    B("BREW / HTTP/1.1\r\n\r\n"),
    B("GET / HTTP/1.1\r\nX\x00: y\r\n\r\n"),
};

static void test_head_bad(void **state)
{
    struct gbx_http_head h;
    for (size_t i = 0; i < sizeof(bad_heads) / sizeof(bad_heads[0]); i++) {
        print_message("bad head %zu\n", i);
        assert_int_equal(gbx_sniff_http_head((const uint8_t *)bad_heads[i].s, bad_heads[i].len, &h),
                         GBX_SNIFF_BAD);
        assert_string_equal(h.method, "");
    }
    assert_int_equal(head("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n", &h),
                     GBX_SNIFF_BAD);
}

/* ---- relay -------------------------------------------------------------------------------- */

struct seen {
    char log[1024];                    /* "METHOD host:port path;" for every head */
    const struct gbx_http_header *add; /* headers the callback sets */
    size_t nadd;
    int deny_at;      /* refuse the request with this number (1-based), 0 never */
    int head_only_at; /* forward only the head of this one */
    int n;
    char headers[512]; /* "name=value;" of the last head, and whether it has a body */
};

static int on_head(void *arg, const struct gbx_http_req_info *req,
                   const struct gbx_http_header **hdrs, size_t *nhdrs)
{
    struct seen *s = arg;
    size_t used = strlen(s->log);
    snprintf(s->log + used, sizeof(s->log) - used, "%s %s:%u %s;", req->method, req->host,
             (unsigned)req->port, req->path);
    s->headers[0] = '\0';
    for (size_t i = 0; i < req->nheaders; i++) {
        size_t u = strlen(s->headers);
        snprintf(s->headers + u, sizeof(s->headers) - u, "%s=%s;", req->headers[i].name,
                 req->headers[i].value);
    }
    size_t u = strlen(s->headers);
    snprintf(s->headers + u, sizeof(s->headers) - u, "body=%d", req->has_body);
    if (++s->n == s->deny_at)
        return -1;
    *hdrs = s->add;
    *nhdrs = s->nadd;
    return s->n == s->head_only_at ? 1 : 0;
}

/* Feed text in pieces of `step` bytes (0: all at once); the relay's output as a string. */
static char *relay_run(const char *text, size_t len, size_t step, struct seen *s, int *rc,
                       uint64_t *nreq)
{
    struct gbx_http_relay *r = gbx_http_relay_new(on_head, s);
    struct evbuffer *out = evbuffer_new();
    assert_non_null(out);
    s->log[0] = '\0';
    s->n = 0;
    *rc = 0;
    if (step == 0)
        step = len ? len : 1;
    for (size_t i = 0; i < len && *rc == 0; i += step) {
        size_t n = len - i < step ? len - i : step;
        *rc = gbx_http_relay_feed(r, (const uint8_t *)text + i, n, out);
    }
    if (nreq)
        *nreq = gbx_http_relay_requests(r);
    size_t olen = evbuffer_get_length(out);
    char *o = malloc(olen + 1);
    assert_non_null(o);
    evbuffer_remove(out, o, olen);
    o[olen] = '\0';
    evbuffer_free(out);
    gbx_http_relay_free(r);
    return o;
}

static char *relay(const char *text, struct seen *s, int *rc)
{
    return relay_run(text, strlen(text), 0, s, rc, NULL);
}

static const char keepalive_in[] =
    "GET /one HTTP/1.1\r\nHost: API.example:8080\r\nProxy-Connection: keep-alive\r\n"
    "authorization: x\r\nAccept:  */*  \r\n\r\n"
    "POST http://api.example/two?q=1 HTTP/1.1\r\nHost: api.example\r\n"
    "Transfer-Encoding: chunked\r\nProxy-Authorization: Basic Zm9v\r\n\r\n"
    "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n"
    "PUT /three HTTP/1.0\r\nHost: api.example\r\nContent-Length: 8\r\nAUTHORIZATION: y\r\n"
    "Connection: keep-alive\r\n\r\n"
    "GET /x\r\n"
    "\r\nDELETE /four HTTP/1.1\r\nHost: api.example\r\n\r\n";

static const char keepalive_out[] =
    "GET /one HTTP/1.1\r\nHost: API.example:8080\r\nAccept: */*\r\n"
    "Authorization: Bearer s\r\nX-Gbx: 1\r\n\r\n"
    "POST http://api.example/two?q=1 HTTP/1.1\r\nHost: api.example\r\n"
    "Transfer-Encoding: chunked\r\nAuthorization: Bearer s\r\nX-Gbx: 1\r\n\r\n"
    "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n"
    "PUT /three HTTP/1.0\r\nHost: api.example\r\nContent-Length: 8\r\n"
    "Connection: keep-alive\r\nAuthorization: Bearer s\r\nX-Gbx: 1\r\n\r\n"
    "GET /x\r\n"
    "DELETE /four HTTP/1.1\r\nHost: api.example\r\nAuthorization: Bearer s\r\nX-Gbx: 1\r\n\r\n";

static const struct gbx_http_header inject[] = {
    {"Authorization", "Bearer s"},
    {"X-Gbx", "1"},
};

static void test_relay_keepalive(void **state)
{
    struct seen s = {.add = inject, .nadd = 2};
    int rc;
    uint64_t nreq;
    char *o = relay_run(keepalive_in, strlen(keepalive_in), 0, &s, &rc, &nreq);
    assert_int_equal(rc, 0);
    assert_string_equal(o, keepalive_out);
    assert_int_equal(nreq, 4);
    assert_string_equal(s.log, "GET api.example:8080 /one;"
                               "POST api.example:0 http://api.example/two?q=1;"
                               "PUT api.example:0 /three;DELETE api.example:0 /four;");
    free(o);
}

static void test_relay_splits(void **state)
{
    struct seen s = {.add = inject, .nadd = 2};
    size_t len = strlen(keepalive_in);
    int rc;
    /* every step size, then every split into two feeds */
    for (size_t step = 1; step <= len; step++) {
        char *o = relay_run(keepalive_in, len, step, &s, &rc, NULL);
        if (rc != 0 || strcmp(o, keepalive_out) != 0)
            print_message("step %zu\n", step);
        assert_int_equal(rc, 0);
        assert_string_equal(o, keepalive_out);
        free(o);
    }
    for (size_t cut = 1; cut < len; cut++) {
        struct gbx_http_relay *r = gbx_http_relay_new(on_head, &s);
        struct evbuffer *out = evbuffer_new();
        assert_int_equal(gbx_http_relay_feed(r, (const uint8_t *)keepalive_in, cut, out), 0);
        assert_int_equal(
            gbx_http_relay_feed(r, (const uint8_t *)keepalive_in + cut, len - cut, out), 0);
        assert_int_equal(evbuffer_get_length(out), strlen(keepalive_out));
        assert_memory_equal(evbuffer_pullup(out, -1), keepalive_out, strlen(keepalive_out));
        assert_int_equal(gbx_http_relay_requests(r), 4);
        evbuffer_free(out);
        gbx_http_relay_free(r);
    }
}

static void test_relay_replace(void **state)
{
    static const struct gbx_http_header auth[] = {{"Authorization", "Bearer s"}};
    struct seen s = {.add = auth, .nadd = 1};
    int rc;
    char *o = relay("GET / HTTP/1.1\r\nHost: h\r\nauthorization: x\r\nAUTHORIZATION: z\r\n"
                    "Proxy-Connection: close\r\nproxy-authorization: a\r\nX-Keep: 1\r\n\r\n",
                    &s, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(o, "GET / HTTP/1.1\r\nHost: h\r\nX-Keep: 1\r\n"
                           "Authorization: Bearer s\r\n\r\n");
    free(o);

    /* no headers to add: the client's pass, but for the hop-by-hop ones */
    s.nadd = 0;
    o = relay("GET / HTTP/1.1\r\nHost: h\r\nauthorization: x\r\nPROXY-CONNECTION: close\r\n"
              "X-Empty:\r\n\r\n",
              &s, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(o, "GET / HTTP/1.1\r\nHost: h\r\nauthorization: x\r\nX-Empty: \r\n\r\n");
    free(o);
}

static void test_relay_bodies(void **state)
{
    static const char smuggled[] = "GET /smuggled HTTP/1.1\r\nHost: e\r\nX: yyy\r\n\r\n";
    struct seen s = {0};
    char in[512];
    int rc;
    /* a Content-Length body that looks like a request is a body */
    snprintf(in, sizeof(in),
             "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: %zu\r\n\r\n%s"
             "GET /b HTTP/1.1\r\nHost: h\r\n\r\n",
             strlen(smuggled), smuggled);
    char *o = relay(in, &s, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(o, in);
    assert_string_equal(s.log, "POST h:0 /a;GET h:0 /b;");
    free(o);

    /* chunked, with a chunk that looks like a request, upper-case hex, an extension */
    snprintf(in, sizeof(in),
             "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
             "0000A\r\n0123456789\r\n%zX ; name=value\r\n%s\r\n0\r\n\r\n"
             "GET /d HTTP/1.1\r\nHost: h\r\n\r\n",
             strlen(smuggled), smuggled);
    for (size_t step = 0; step <= 1; step++) {
        o = relay_run(in, strlen(in), step, &s, &rc, NULL);
        assert_int_equal(rc, 0);
        assert_string_equal(o, in);
        assert_string_equal(s.log, "POST h:0 /c;GET h:0 /d;");
        free(o);
    }

    /* a NUL in a header value */
    static const char nul[] = "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n";
    o = relay_run(nul, sizeof(nul) - 1, 0, &s, &rc, NULL);
    assert_int_equal(rc, GBX_SNIFF_BAD);
    assert_string_equal(o, "");
    free(o);
}

static void test_relay_deny(void **state)
{
    struct seen s = {.add = inject, .nadd = 2, .deny_at = 2};
    const char *first = "GET /one HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok";
    char in[256];
    int rc;
    snprintf(in, sizeof(in), "%sGET /two HTTP/1.1\r\nHost: h\r\n\r\nGET /three HTTP/1.1\r\n\r\n",
             first);
    for (size_t step = 0; step <= 3; step++) {
        uint64_t nreq;
        char *o = relay_run(in, strlen(in), step, &s, &rc, &nreq);
        assert_int_equal(rc, GBX_HTTP_RELAY_DENIED);
        assert_string_equal(o, "GET /one HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n"
                               "Authorization: Bearer s\r\nX-Gbx: 1\r\n\r\nok");
        assert_int_equal(nreq, 2);
        assert_int_equal(s.n, 2);
        free(o);
    }

    /* stays refused */
    struct gbx_http_relay *r = gbx_http_relay_new(on_head, &s);
    struct evbuffer *out = evbuffer_new();
    s.n = 0;
    s.deny_at = 1;
    assert_int_equal(gbx_http_relay_feed(r, (const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18, out),
                     GBX_HTTP_RELAY_DENIED);
    assert_int_equal(gbx_http_relay_feed(r, (const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18, out),
                     GBX_HTTP_RELAY_DENIED);
    assert_int_equal(evbuffer_get_length(out), 0);
    assert_int_equal(s.n, 1);
    evbuffer_free(out);
    gbx_http_relay_free(r);
    gbx_http_relay_free(NULL);
}

static void test_relay_upgrade(void **state)
{
    struct seen s = {.add = inject, .nadd = 1};
    int rc;
    const char *ws = "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                     "\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"
                     "GET /raw HTTP/1.1\nHost: x\n \n\n";
    const char *ws_out = "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                         "Authorization: Bearer s\r\n\r\n"
                         "\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"
                         "GET /raw HTTP/1.1\nHost: x\n \n\n";
    for (size_t step = 0; step <= 2; step++) {
        uint64_t nreq;
        char *o = relay_run(ws, strlen(ws), step, &s, &rc, &nreq);
        assert_int_equal(rc, 0);
        assert_string_equal(o, ws_out);
        assert_int_equal(nreq, 1);
        free(o);
    }

    const char *connect = "CONNECT db.example:5432 HTTP/1.1\r\nHost: db.example:5432\r\n\r\n"
                          "\x16\x03\x01 raw bytes";
    s.nadd = 0;
    char *o = relay(connect, &s, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(o, connect);
    assert_string_equal(s.log, "CONNECT db.example:5432 db.example:5432;");
    free(o);

    /* Upgrade without Connection: upgrade is an ordinary request */
    const char *plain = "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n"
                        "GET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
    o = relay(plain, &s, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(o, plain);
    assert_string_equal(s.log, "GET h:0 /;GET h:0 /2;");
    free(o);
}

static void test_relay_hold_upgrades(void **state)
{
    struct seen s = {.add = inject, .nadd = 1};
    const char *ws =
        "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n";
    const char *ws_out = "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                         "Connection: upgrade\r\nAuthorization: Bearer s\r\n\r\n";
    const char *next = "GET /next HTTP/1.1\r\nHost: h\r\nauthorization: mine\r\n\r\n";
    const char *next_out = "GET /next HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer s\r\n\r\n";

    for (int switched = 0; switched <= 1; switched++) {
        for (size_t step = 0; step <= 1; step++) {
            struct gbx_http_relay *r = gbx_http_relay_new(on_head, &s);
            struct evbuffer *out = evbuffer_new();
            char in[512], expect[512];
            s.log[0] = '\0';
            s.n = 0;
            gbx_http_relay_hold_upgrades(r);
            snprintf(in, sizeof(in), "%s%s", ws, next);
            size_t len = strlen(in), st = step ? 1 : len;
            for (size_t i = 0; i < len; i += st)
                assert_int_equal(gbx_http_relay_feed(r, (const uint8_t *)in + i, st, out), 0);
            assert_int_equal(gbx_http_relay_upgrade_pending(r), 1);
            assert_int_equal(gbx_http_relay_is_raw(r), 0);
            assert_int_equal(evbuffer_get_length(out), strlen(ws_out));
            assert_int_equal(gbx_http_relay_upgrade_done(r, switched, out), 0);
            assert_int_equal(gbx_http_relay_upgrade_pending(r), 0);
            snprintf(expect, sizeof(expect), "%s%s", ws_out, switched ? next : next_out);
            assert_int_equal(evbuffer_get_length(out), strlen(expect));
            assert_memory_equal(evbuffer_pullup(out, -1), expect, strlen(expect));
            assert_int_equal(gbx_http_relay_is_raw(r), switched);
            assert_int_equal(gbx_http_relay_requests(r), switched ? 1 : 2);
            evbuffer_free(out);
            gbx_http_relay_free(r);
        }
    }

    /* refused, and what follows is no HTTP: BAD, nothing of it written */
    struct gbx_http_relay *r = gbx_http_relay_new(on_head, &s);
    struct evbuffer *out = evbuffer_new();
    gbx_http_relay_hold_upgrades(r);
    assert_int_equal(gbx_http_relay_feed(r, (const uint8_t *)ws, strlen(ws), out), 0);
    assert_int_equal(gbx_http_relay_feed(r, (const uint8_t *)"\x81\x85\x37\xfa", 4, out), 0);
    assert_int_equal(gbx_http_relay_upgrade_done(r, 0, out), GBX_SNIFF_BAD);
    assert_int_equal(evbuffer_get_length(out), strlen(ws_out));
    assert_int_equal(gbx_http_relay_upgrade_done(r, 1, out), GBX_SNIFF_BAD);
    evbuffer_free(out);
    gbx_http_relay_free(r);

    /* no more than a head's worth is held; a relay freed while holding frees what it held */
    r = gbx_http_relay_new(on_head, &s);
    out = evbuffer_new();
    gbx_http_relay_hold_upgrades(r);
    assert_int_equal(gbx_http_relay_feed(r, (const uint8_t *)ws, strlen(ws), out), 0);
    uint8_t *junk = calloc(1, GBX_SNIFF_HEAD_MAX + 1);
    assert_int_equal(gbx_http_relay_feed(r, junk, GBX_SNIFF_HEAD_MAX, out), 0);
    assert_int_equal(gbx_http_relay_feed(r, junk, 1, out), GBX_SNIFF_BAD);
    gbx_http_relay_free(r);
    r = gbx_http_relay_new(on_head, &s);
    gbx_http_relay_hold_upgrades(r);
    assert_int_equal(gbx_http_relay_feed(r, (const uint8_t *)ws, strlen(ws), out), 0);
    assert_int_equal(gbx_http_relay_feed(r, junk, 100, out), 0);
    gbx_http_relay_free(r);
    free(junk);

    /* a refused CONNECT, then an ordinary request; not pending: upgrade_done does nothing */
    r = gbx_http_relay_new(on_head, &s);
    gbx_http_relay_hold_upgrades(r);
    evbuffer_drain(out, evbuffer_get_length(out));
    assert_int_equal(gbx_http_relay_upgrade_done(r, 1, out), 0);
    const char *c = "CONNECT a.example:443 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\n";
    assert_int_equal(gbx_http_relay_feed(r, (const uint8_t *)c, strlen(c), out), 0);
    assert_int_equal(gbx_http_relay_upgrade_pending(r), 1);
    assert_int_equal(gbx_http_relay_upgrade_done(r, 0, out), 0);
    const char *c_out = "CONNECT a.example:443 HTTP/1.1\r\nAuthorization: Bearer s\r\n\r\n"
                        "GET / HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer s\r\n\r\n";
    assert_int_equal(evbuffer_get_length(out), strlen(c_out));
    assert_memory_equal(evbuffer_pullup(out, -1), c_out, strlen(c_out));
    evbuffer_free(out);
    gbx_http_relay_free(r);
}

static void test_relay_smuggling(void **state)
{
    static const struct {
        const char *in;
        const char *out; /* what was written before the refusal */
    } c[] = {
        /* a bad second head: the first request only */
        {"GET / HTTP/1.1\r\nHost: h\r\n\r\n"
         "GET /s HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 0\r\n\r\n",
         "GET / HTTP/1.1\r\nHost: h\r\n\r\n"},
        /* chunk extension with a bare LF that another parser ends the line at */
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5;a\nGET /s HTTP/1.1\r\nhello\r\n0\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;a"},
        /* anything but CRLF after chunk data (lenient http-parser takes any two bytes) */
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5\r\nhelloXY0\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello"},
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5\r\nhello\n0\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello"},
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5\rXhello\r\n0\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r"},
        /* trailers could carry a header past the relay */
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "0\r\nAuthorization: evil\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"},
        /* quotes and control characters in a chunk extension */
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "1;a=\"x\"\r\nz\r\n0\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;a="},
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "1 x\r\nz\r\n0\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1 "},
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "x\r\n",
         "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"},
        /* a header hidden behind a CR, a space before the colon, an obs-fold */
        {"GET / HTTP/1.1\r\nHost: h\r\nX: a\rContent-Length: 20\r\n\r\n", ""},
        {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length : 20\r\n\r\n", ""},
        {"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n Content-Length: 20\r\n\r\n", ""},
        {"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
         ""},
        {"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n", ""},
        {"GET /a\fb HTTP/1.1\r\nHost: h\r\n\r\n", ""},
    };
    struct seen s = {.add = inject, .nadd = 2};
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        size_t len = strlen(c[i].in);
        for (size_t step = 0; step <= 1; step++) {
            int rc;
            print_message("smuggle %zu step %zu\n", i, step);
            char *o = relay_run(c[i].in, len, step, &s, &rc, NULL);
            assert_int_equal(rc, GBX_SNIFF_BAD);
            /* injected headers in the first request aside */
            char expect[512];
            const char *hend = strstr(c[i].out, "\r\n\r\n");
            if (hend) {
                size_t hl = (size_t)(hend - c[i].out) + 2;
                snprintf(expect, sizeof(expect), "%.*sAuthorization: Bearer s\r\nX-Gbx: 1\r\n%s",
                         (int)hl, c[i].out, hend + 2);
            } else {
                snprintf(expect, sizeof(expect), "%s", c[i].out);
            }
            assert_string_equal(o, expect);
            assert_null(strstr(o, "/s HTTP"));
            assert_null(strstr(o, "evil"));
            free(o);
        }
    }
    for (size_t i = 0; i < sizeof(bad_heads) / sizeof(bad_heads[0]); i++) {
        int rc;
        char *o = relay_run(bad_heads[i].s, bad_heads[i].len, 1, &s, &rc, NULL);
        print_message("bad head %zu\n", i);
        assert_int_equal(rc, GBX_SNIFF_BAD);
        assert_string_equal(o, "");
        free(o);
    }
}

static void test_relay_bad_callback(void **state)
{
    static const struct gbx_http_header crlf[] = {{"X-A", "v\r\nInjected: 1"}};
    static const struct gbx_http_header space[] = {{"X A", "v"}};
    static const struct gbx_http_header cl[] = {{"content-length", "0"}};
    static const struct gbx_http_header te[] = {{"Transfer-Encoding", "chunked"}};
    static const struct gbx_http_header *const all[] = {crlf, space, cl, te};
    for (size_t i = 0; i < 4; i++) {
        struct seen s = {.add = all[i], .nadd = 1};
        int rc;
        char *o = relay("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &s, &rc);
        assert_int_equal(rc, GBX_SNIFF_BAD);
        assert_string_equal(o, "");
        free(o);
    }
}

static void test_relay_limits(void **state)
{
    struct seen s = {0};
    int rc;
    char *big = head_of_size(GBX_SNIFF_HEAD_MAX);
    char *o = relay_run(big, strlen(big), 1000, &s, &rc, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(strlen(o), GBX_SNIFF_HEAD_MAX);
    free(o);
    free(big);
    big = head_of_size(GBX_SNIFF_HEAD_MAX + 1);
    o = relay_run(big, strlen(big), 1000, &s, &rc, NULL);
    assert_int_equal(rc, GBX_SNIFF_BAD);
    assert_string_equal(o, "");
    free(o);
    o = relay_run(big, strlen(big), 0, &s, &rc, NULL);
    assert_int_equal(rc, GBX_SNIFF_BAD);
    free(o);
    free(big);

    /* empty lines forever are a head that never ends */
    size_t n = GBX_SNIFF_HEAD_MAX + 2;
    char *crlf = malloc(n + 1);
    for (size_t i = 0; i < n; i += 2)
        memcpy(crlf + i, "\r\n", 2);
    crlf[n] = '\0';
    o = relay_run(crlf, n, 7, &s, &rc, NULL);
    assert_int_equal(rc, GBX_SNIFF_BAD);
    free(o);
    free(crlf);
}

/* The daemon's gate: a head without its body, framing headers dropped, the body never
 * written, and nothing after it. */
static void test_relay_head_only(void **state)
{
    (void)state;
    static const char in[] = "GET /a HTTP/1.1\r\nHost: d\r\nX-Key: k1\r\n\r\n"
                             "PUT /up HTTP/1.1\r\nHost: d\r\nContent-Length: 10\r\n"
                             "Expect: 100-continue\r\nConnection: keep-alive\r\n\r\n0123456789"
                             "GET /b HTTP/1.1\r\nHost: d\r\n\r\n";
    static const struct gbx_http_header close_hdr[] = {{"Connection", "close"}};
    for (size_t step = 0; step <= 7; step += 7) {
        struct seen s = {.head_only_at = 2, .add = close_hdr, .nadd = 1};
        int rc;
        uint64_t n;
        char *o = relay_run(in, sizeof(in) - 1, step, &s, &rc, &n);
        assert_int_equal(rc, GBX_HTTP_RELAY_HEAD_ONLY);
        assert_int_equal(n, 2);
        assert_string_equal(o,
                            "GET /a HTTP/1.1\r\nHost: d\r\nX-Key: k1\r\nConnection: close\r\n\r\n"
                            "PUT /up HTTP/1.1\r\nHost: d\r\nConnection: close\r\n"
                            "Content-Length: 0\r\n\r\n");
        assert_string_equal(s.headers, "Host=d;Content-Length=10;Expect=100-continue;"
                                       "Connection=keep-alive;body=1");
        free(o);
    }
    /* chunked counts as a body; a Content-Length of 0 does not */
    struct seen s = {0};
    int rc;
    char *o = relay_run("POST / HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                        61, 0, &s, &rc, NULL);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(s.headers, "body=1"));
    free(o);
    o = relay_run("POST / HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\n\r\n", 47, 0, &s, &rc, NULL);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(s.headers, "body=0"));
    free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_is_tls),          cmocka_unit_test(test_tls_sni),
        cmocka_unit_test(test_tls_prefixes),        cmocka_unit_test(test_tls_sni_length),
        cmocka_unit_test(test_tls_corrupt),         cmocka_unit_test(test_tls_not_tls),
        cmocka_unit_test(test_tls_too_big),         cmocka_unit_test(test_head_simple),
        cmocka_unit_test(test_head_absolute),       cmocka_unit_test(test_head_prefixes),
        cmocka_unit_test(test_head_limits),         cmocka_unit_test(test_head_bad),
        cmocka_unit_test(test_relay_keepalive),     cmocka_unit_test(test_relay_splits),
        cmocka_unit_test(test_relay_replace),       cmocka_unit_test(test_relay_bodies),
        cmocka_unit_test(test_relay_deny),          cmocka_unit_test(test_relay_upgrade),
        cmocka_unit_test(test_relay_hold_upgrades), cmocka_unit_test(test_relay_smuggling),
        cmocka_unit_test(test_relay_bad_callback),  cmocka_unit_test(test_relay_limits),
        cmocka_unit_test(test_relay_head_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
