/* SPDX-License-Identifier: MIT */
/* Unit tests for src/egress/ca.c (the TLS-interception CA, leaf minting, upstream client side)
 * and src/egress/seal.c (secrets at rest). Every test works in its own mkdtemp directory. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "base/err.h"
#include "base/fileutil.h"
#include "base/mem.h"
#include "egress/ca.h"
#include "egress/seal.h"

/* ---- helpers ---- */

static int setup_dir(void **state)
{
    char tmpl[] = "/tmp/gbx-test-ca-XXXXXX";
    if (mkdtemp(tmpl) == NULL)
        return -1;
    *state = gbx_xstrdup(tmpl);
    return 0;
}

static int teardown_dir(void **state)
{
    int r = gbx_rm_rf(*state);
    free(*state);
    return r;
}

static char *path_in(void **state, const char *name)
{
    return gbx_asprintf("%s/%s", (const char *)*state, name);
}

static struct gbx_ca *open_ok(const char *dir)
{
    struct gbx_ca *ca = NULL;
    struct gbx_err *err = NULL;
    int r = gbx_ca_open(dir, &ca, &err);
    if (r < 0)
        fail_msg("gbx_ca_open: %s", err->msg);
    assert_non_null(ca);
    return ca;
}

static X509 *pem_to_cert(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    assert_non_null(b);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(x);
    return x;
}

static X509 *file_to_cert(const char *path)
{
    char *pem;
    assert_int_equal(gbx_read_file(path, 1 << 20, &pem, NULL), 0);
    X509 *x = pem_to_cert(pem);
    free(pem);
    return x;
}

static void assert_same_serial(X509 *a, X509 *b, int same)
{
    int cmp = ASN1_INTEGER_cmp(X509_get0_serialNumber(a), X509_get0_serialNumber(b));
    if (same)
        assert_int_equal(cmp, 0);
    else
        assert_int_not_equal(cmp, 0);
}

static mode_t file_mode(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

static void assert_err(struct gbx_err *err, enum gbx_err_kind kind, const char *needle)
{
    assert_non_null(err);
    print_message("  error: %s\n", err->msg);
    assert_int_equal(err->kind, kind);
    assert_non_null(strstr(err->msg, needle));
}

static void write_bytes(const char *path, const void *data, size_t n, mode_t mode)
{
    unlink(path);
    assert_int_equal(gbx_write_file_atomic(path, data, n, mode), 0);
}

/* Verify leaf against ca alone, as a TLS server for host (or IP when ip is set). */
static int verify_leaf(X509 *ca, X509 *leaf, const char *host, int ip)
{
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *sctx = X509_STORE_CTX_new();
    assert_non_null(store);
    assert_non_null(sctx);
    assert_int_equal(X509_STORE_add_cert(store, ca), 1);
    assert_int_equal(X509_STORE_CTX_init(sctx, store, leaf, NULL), 1);
    assert_int_equal(X509_STORE_CTX_set_purpose(sctx, X509_PURPOSE_SSL_SERVER), 1);
    X509_VERIFY_PARAM *param = X509_STORE_CTX_get0_param(sctx);
    if (ip)
        assert_int_equal(X509_VERIFY_PARAM_set1_ip_asc(param, host), 1);
    else
        assert_int_equal(X509_VERIFY_PARAM_set1_host(param, host, 0), 1);
    int ok = X509_verify_cert(sctx);
    int e = X509_STORE_CTX_get_error(sctx);
    X509_STORE_CTX_free(sctx);
    X509_STORE_free(store);
    ERR_clear_error();
    return ok == 1 ? X509_V_OK : (e ? e : -1);
}

static SSL_CTX *server_ctx_ok(struct gbx_ca *ca, const char *host)
{
    struct gbx_err *err = NULL;
    SSL_CTX *ctx = gbx_ca_server_ctx(ca, host, &err);
    if (ctx == NULL)
        fail_msg("gbx_ca_server_ctx '%s': %s", host, err->msg);
    return ctx;
}

struct tls_pair {
    SSL *client, *server;
};

static void tls_pair_init(struct tls_pair *p, SSL_CTX *sctx, SSL_CTX *cctx, const char *host)
{
    struct gbx_err *err = NULL;
    BIO *bc, *bs;
    p->client = SSL_new(cctx);
    p->server = SSL_new(sctx);
    assert_non_null(p->client);
    assert_non_null(p->server);
    assert_int_equal(BIO_new_bio_pair(&bc, 0, &bs, 0), 1);
    SSL_set_bio(p->client, bc, bc);
    SSL_set_bio(p->server, bs, bs);
    SSL_set_connect_state(p->client);
    SSL_set_accept_state(p->server);
    if (gbx_ca_client_prepare(p->client, host, &err) < 0)
        fail_msg("gbx_ca_client_prepare: %s", err->msg);
}

static void tls_pair_release(struct tls_pair *p)
{
    SSL_free(p->client);
    SSL_free(p->server);
    ERR_clear_error();
}

static int step(SSL *ssl, int *done)
{
    if (*done)
        return 0;
    int r = SSL_do_handshake(ssl);
    if (r == 1) {
        *done = 1;
        return 0;
    }
    int e = SSL_get_error(ssl, r);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

/* Run the handshake to completion in memory: 0, or -1 when either side fails. */
static int tls_handshake(struct tls_pair *p)
{
    int cdone = 0, sdone = 0;
    for (int i = 0; i < 50 && !(cdone && sdone); i++) {
        if (step(p->client, &cdone) < 0 || step(p->server, &sdone) < 0)
            return -1;
    }
    return cdone && sdone ? 0 : -1;
}

static SSL_CTX *client_ctx_ok(const char *extra)
{
    struct gbx_err *err = NULL;
    SSL_CTX *ctx = gbx_ca_client_ctx_new(extra, &err);
    if (ctx == NULL)
        fail_msg("gbx_ca_client_ctx_new: %s", err->msg);
    return ctx;
}

/* ---- the CA ---- */

static void test_ca_create(void **state)
{
    gbx_autofree char *dir = path_in(state, "sub/ca");
    gbx_autofree char *key = path_in(state, "sub/ca/ca.key");
    gbx_autofree char *crt = path_in(state, "sub/ca/ca.crt");
    struct gbx_ca *ca = open_ok(dir);
    assert_int_equal(file_mode(dir), 0700);
    assert_int_equal(file_mode(key), 0600);
    assert_int_equal(file_mode(crt), 0644);

    const char *pem = gbx_ca_cert_pem(ca);
    assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE-----"));
    assert_null(strstr(pem, "PRIVATE"));
    X509 *x = pem_to_cert(pem);
    X509 *onfile = file_to_cert(crt);
    assert_int_equal(X509_cmp(x, onfile), 0);

    char cn[128], o[64];
    X509_NAME *name = X509_get_subject_name(x);
    assert_true(X509_NAME_get_text_by_NID(name, NID_commonName, cn, sizeof(cn)) > 0);
    assert_true(X509_NAME_get_text_by_NID(name, NID_organizationName, o, sizeof(o)) > 0);
    assert_int_equal(strncmp(cn, "Glovebox egress CA (", 20), 0);
    assert_int_equal(cn[strlen(cn) - 1], ')');
    assert_string_equal(o, "Glovebox");
    assert_int_equal(X509_NAME_cmp(name, X509_get_issuer_name(x)), 0);
    assert_int_equal(X509_get_version(x), X509_VERSION_3);
    assert_int_equal(X509_check_ca(x), 1);
    assert_int_equal(X509_get_pathlen(x), 0);
    assert_int_equal(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
    assert_non_null(X509_get0_subject_key_id(x));
    int i = X509_get_ext_by_NID(x, NID_basic_constraints, -1);
    assert_int_equal(X509_EXTENSION_get_critical(X509_get_ext(x, i)), 1);
    i = X509_get_ext_by_NID(x, NID_key_usage, -1);
    assert_int_equal(X509_EXTENSION_get_critical(X509_get_ext(x, i)), 1);
    assert_int_equal(ASN1_STRING_length(X509_get0_serialNumber(x)), 16);
    EVP_PKEY *pub = X509_get0_pubkey(x);
    assert_true(EVP_PKEY_is_a(pub, "EC"));
    assert_int_equal(EVP_PKEY_get_bits(pub), 256);
    /* notBefore about an hour ago, notAfter about ten years on */
    time_t now = time(NULL), t = now - 3500;
    assert_true(X509_cmp_time(X509_get0_notBefore(x), &t) < 0);
    t = now - 3700;
    assert_true(X509_cmp_time(X509_get0_notBefore(x), &t) > 0);
    t = now + 3650L * 86400;
    assert_true(X509_cmp_time(X509_get0_notAfter(x), &t) > 0);
    t = now + 3660L * 86400;
    assert_true(X509_cmp_time(X509_get0_notAfter(x), &t) < 0);
    X509_free(onfile);
    X509_free(x);
    gbx_ca_free(ca);
    gbx_ca_free(NULL);
}

static void test_ca_reopen(void **state)
{
    struct gbx_ca *ca = open_ok(*state);
    X509 *a = pem_to_cert(gbx_ca_cert_pem(ca));
    gbx_ca_free(ca);
    ca = open_ok(*state);
    X509 *b = pem_to_cert(gbx_ca_cert_pem(ca));
    assert_same_serial(a, b, 1);
    assert_int_equal(X509_cmp(a, b), 0);
    gbx_ca_free(ca);

    /* without ca.crt the same key gets a new certificate */
    gbx_autofree char *crt = path_in(state, "ca.crt");
    assert_int_equal(unlink(crt), 0);
    ca = open_ok(*state);
    X509 *c = pem_to_cert(gbx_ca_cert_pem(ca));
    assert_same_serial(a, c, 0);
    assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(a), X509_get0_pubkey(c)), 1);
    assert_int_equal(file_mode(crt), 0644);
    gbx_ca_free(ca);
    X509_free(a);
    X509_free(b);
    X509_free(c);
}

static void test_ca_key_refused(void **state)
{
    struct gbx_ca *ca = open_ok(*state);
    gbx_ca_free(ca);
    gbx_autofree char *key = path_in(state, "ca.key");

    struct gbx_err *err = NULL;
    assert_int_equal(chmod(key, 0644), 0);
    ca = NULL;
    assert_int_equal(gbx_ca_open(*state, &ca, &err), -1);
    assert_null(ca);
    assert_err(err, GBX_ERR_PERMISSION, "is accessible by group or others (mode 0644)");
    assert_non_null(strstr(err->msg, "ca.key"));
    gbx_err_free(err);
    err = NULL;

    assert_int_equal(chmod(key, 0640), 0);
    assert_int_equal(gbx_ca_open(*state, &ca, &err), -1);
    assert_err(err, GBX_ERR_PERMISSION, "mode 0640");
    gbx_err_free(err);
    err = NULL;

    assert_int_equal(chmod(key, 0600), 0);
    if (geteuid() == 0) { /* root can hand the key to someone else */
        assert_int_equal(chown(key, 4242, 4242), 0);
        assert_int_equal(gbx_ca_open(*state, &ca, &err), -1);
        assert_err(err, GBX_ERR_PERMISSION, "owned by uid 4242");
        gbx_err_free(err);
        err = NULL;
        assert_int_equal(chown(key, 0, 0), 0);
    }
    ca = open_ok(*state);
    gbx_ca_free(ca);
}

static void test_ca_mismatch(void **state)
{
    gbx_autofree char *a = path_in(state, "a");
    gbx_autofree char *b = path_in(state, "b");
    struct gbx_ca *ca = open_ok(a);
    gbx_ca_free(ca);
    ca = open_ok(b);
    gbx_autofree char *crt_a = path_in(state, "a/ca.crt");
    write_bytes(crt_a, gbx_ca_cert_pem(ca), strlen(gbx_ca_cert_pem(ca)), 0644);
    gbx_ca_free(ca);

    struct gbx_err *err = NULL;
    ca = NULL;
    assert_int_equal(gbx_ca_open(a, &ca, &err), -1);
    assert_null(ca);
    assert_err(err, GBX_ERR_INVALID, "does not match the key");
    gbx_err_free(err);
    err = NULL;

    /* garbage is refused, not replaced */
    write_bytes(crt_a, "junk\n", 5, 0644);
    assert_int_equal(gbx_ca_open(a, &ca, &err), -1);
    assert_err(err, GBX_ERR_INVALID, "cannot parse CA certificate");
    gbx_err_free(err);
}

/* ---- leaves ---- */

static void test_leaf_dns(void **state)
{
    struct gbx_ca *ca = open_ok(*state);
    X509 *cacert = pem_to_cert(gbx_ca_cert_pem(ca));
    SSL_CTX *ctx = server_ctx_ok(ca, "api.example.test");
    X509 *leaf = SSL_CTX_get0_certificate(ctx);
    assert_non_null(leaf);

    assert_int_equal(verify_leaf(cacert, leaf, "api.example.test", 0), X509_V_OK);
    assert_int_equal(verify_leaf(cacert, leaf, "other.example.test", 0),
                     X509_V_ERR_HOSTNAME_MISMATCH);

    GENERAL_NAMES *san = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
    assert_non_null(san);
    assert_int_equal(sk_GENERAL_NAME_num(san), 1);
    int type;
    ASN1_STRING *v = GENERAL_NAME_get0_value(sk_GENERAL_NAME_value(san, 0), &type);
    assert_int_equal(type, GEN_DNS);
    assert_int_equal(ASN1_STRING_length(v), strlen("api.example.test"));
    assert_memory_equal(ASN1_STRING_get0_data(v), "api.example.test", 16);
    GENERAL_NAMES_free(san);

    char cn[128];
    assert_true(
        X509_NAME_get_text_by_NID(X509_get_subject_name(leaf), NID_commonName, cn, sizeof(cn)) > 0);
    assert_string_equal(cn, "api.example.test");
    assert_int_equal(X509_get_extended_key_usage(leaf), XKU_SSL_SERVER);
    assert_int_equal(X509_get_key_usage(leaf), KU_DIGITAL_SIGNATURE);
    assert_int_equal(X509_check_ca(leaf), 0);
    assert_true(X509_get_ext_by_NID(leaf, NID_basic_constraints, -1) >= 0);
    assert_int_equal(
        ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(leaf), X509_get0_subject_key_id(cacert)),
        0);
    time_t now = time(NULL), t = now + 29L * 86400;
    assert_true(X509_cmp_time(X509_get0_notAfter(leaf), &t) > 0);
    t = now + 31L * 86400;
    assert_true(X509_cmp_time(X509_get0_notAfter(leaf), &t) < 0);
    t = now - 3500;
    assert_true(X509_cmp_time(X509_get0_notBefore(leaf), &t) < 0);

    STACK_OF(X509) *chain = NULL;
    assert_int_equal(SSL_CTX_get0_chain_certs(ctx, &chain), 1);
    assert_int_equal(sk_X509_num(chain), 1);
    assert_int_equal(X509_cmp(sk_X509_value(chain, 0), cacert), 0);

    /* a name longer than a CN may be goes in the SAN only */
    char longname[200];
    snprintf(longname, sizeof(longname), "%s.%s.example.test",
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    SSL_CTX *lctx = server_ctx_ok(ca, longname);
    X509 *lleaf = SSL_CTX_get0_certificate(lctx);
    assert_int_equal(X509_NAME_entry_count(X509_get_subject_name(lleaf)), 0);
    assert_int_equal(verify_leaf(cacert, lleaf, longname, 0), X509_V_OK);
    SSL_CTX_free(lctx);

    SSL_CTX_free(ctx);
    X509_free(cacert);
    gbx_ca_free(ca);
}

static void test_leaf_ip(void **state)
{
    static const struct {
        const char *host;
        size_t len;
        const char *bytes;
    } c[] = {
        {"127.0.0.1", 4, "\x7f\0\0\x01"},
        {"::1", 16, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01"},
    };
    struct gbx_ca *ca = open_ok(*state);
    X509 *cacert = pem_to_cert(gbx_ca_cert_pem(ca));
    for (size_t i = 0; i < GBX_ARRAY_SIZE(c); i++) {
        SSL_CTX *ctx = server_ctx_ok(ca, c[i].host);
        X509 *leaf = SSL_CTX_get0_certificate(ctx);
        GENERAL_NAMES *san = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
        assert_non_null(san);
        assert_int_equal(sk_GENERAL_NAME_num(san), 1);
        int type;
        ASN1_STRING *v = GENERAL_NAME_get0_value(sk_GENERAL_NAME_value(san, 0), &type);
        assert_int_equal(type, GEN_IPADD);
        assert_int_equal(ASN1_STRING_length(v), c[i].len);
        assert_memory_equal(ASN1_STRING_get0_data(v), c[i].bytes, c[i].len);
        GENERAL_NAMES_free(san);
        assert_int_equal(verify_leaf(cacert, leaf, c[i].host, 1), X509_V_OK);
        assert_int_not_equal(verify_leaf(cacert, leaf, "127.0.0.2", 1), X509_V_OK);
        SSL_CTX_free(ctx);
    }
    X509_free(cacert);
    gbx_ca_free(ca);
}

static void test_leaf_cache(void **state)
{
    struct gbx_ca *ca = open_ok(*state);
    SSL_CTX *a = server_ctx_ok(ca, "api.example.test");
    SSL_CTX *b = server_ctx_ok(ca, "api.example.test");
    SSL_CTX *c = server_ctx_ok(ca, "API.Example.Test.");
    SSL_CTX *d = server_ctx_ok(ca, "www.example.test");
    assert_ptr_equal(a, b);
    assert_ptr_equal(a, c);
    assert_ptr_equal(SSL_CTX_get0_certificate(a), SSL_CTX_get0_certificate(b));
    assert_ptr_not_equal(a, d);
    assert_same_serial(SSL_CTX_get0_certificate(a), SSL_CTX_get0_certificate(d), 0);
    /* every leaf shares one key */
    assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(SSL_CTX_get0_certificate(a)),
                                 X509_get0_pubkey(SSL_CTX_get0_certificate(d))),
                     1);
    SSL_CTX_free(a);
    SSL_CTX_free(b);
    SSL_CTX_free(c);
    SSL_CTX_free(d);

    static const char *const bad[] = {
        "",       ".",          "a..b",      ".a",    "bad host",      "x,DNS:evil.test",
        "*.test", "a/b",        "[::1]",     "a\nb",  "\xc3\xa9.test", "a:443",
        "a..",    "1.2.3.4:80", "example..", "%00.x",
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(bad); i++) {
        struct gbx_err *err = NULL;
        assert_null(gbx_ca_server_ctx(ca, bad[i], &err));
        assert_non_null(err);
        assert_int_equal(err->kind, GBX_ERR_INVALID);
        gbx_err_free(err);
    }
    char label64[80], toolong[300];
    memset(label64, 'a', 64);
    strcpy(label64 + 64, ".test");
    memset(toolong, 'a', sizeof(toolong) - 1);
    toolong[sizeof(toolong) - 1] = '\0';
    for (size_t i = 63; i < sizeof(toolong); i += 64)
        toolong[i] = '.';
    const char *const bad2[] = {label64, toolong};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(bad2); i++) {
        struct gbx_err *err = NULL;
        assert_null(gbx_ca_server_ctx(ca, bad2[i], &err));
        assert_err(err, GBX_ERR_INVALID, "is not a host name or IP address");
        gbx_err_free(err);
    }
    gbx_ca_free(ca);
}

/* ---- TLS ---- */

static void test_tls_handshake(void **state)
{
    gbx_autofree char *crt = path_in(state, "ca.crt");
    struct gbx_ca *ca = open_ok(*state);
    SSL_CTX *sctx = server_ctx_ok(ca, "api.example.test");
    SSL_CTX *cctx = client_ctx_ok(crt);
    gbx_ca_free(ca); /* the ctx outlives the CA */

    struct tls_pair p;
    tls_pair_init(&p, sctx, cctx, "api.example.test");
    static const unsigned char h2_h1[] = "\x02h2\x08http/1.1";
    assert_int_equal(SSL_set_alpn_protos(p.client, h2_h1, sizeof(h2_h1) - 1), 0);
    assert_int_equal(tls_handshake(&p), 0);
    assert_int_equal(SSL_get_verify_result(p.client), X509_V_OK);
    const unsigned char *proto;
    unsigned int len;
    SSL_get0_alpn_selected(p.client, &proto, &len);
    assert_int_equal(len, 8);
    assert_memory_equal(proto, "http/1.1", 8);
    assert_string_equal(SSL_get_servername(p.server, TLSEXT_NAMETYPE_host_name),
                        "api.example.test");
    assert_true(SSL_version(p.client) >= TLS1_2_VERSION);
    assert_null(SSL_get_current_compression(p.client));

    /* and data flows */
    char buf[16];
    assert_int_equal(SSL_write(p.client, "ping", 4), 4);
    assert_int_equal(SSL_read(p.server, buf, sizeof(buf)), 4);
    assert_memory_equal(buf, "ping", 4);
    assert_int_equal(SSL_write(p.server, "pong", 4), 4);
    assert_int_equal(SSL_read(p.client, buf, sizeof(buf)), 4);
    assert_memory_equal(buf, "pong", 4);
    tls_pair_release(&p);

    /* the client's own ALPN offer is http/1.1 only */
    tls_pair_init(&p, sctx, cctx, "api.example.test");
    assert_int_equal(tls_handshake(&p), 0);
    SSL_get0_alpn_selected(p.server, &proto, &len);
    assert_int_equal(len, 8);
    assert_memory_equal(proto, "http/1.1", 8);
    tls_pair_release(&p);

    /* a client that offers only h2 proceeds without ALPN */
    tls_pair_init(&p, sctx, cctx, "api.example.test");
    static const unsigned char h2[] = "\x02h2";
    assert_int_equal(SSL_set_alpn_protos(p.client, h2, sizeof(h2) - 1), 0);
    assert_int_equal(tls_handshake(&p), 0);
    SSL_get0_alpn_selected(p.client, &proto, &len);
    assert_int_equal(len, 0);
    tls_pair_release(&p);

    /* no resumption state is handed out */
    tls_pair_init(&p, sctx, cctx, "api.example.test");
    assert_int_equal(tls_handshake(&p), 0);
    assert_int_equal(SSL_write(p.server, "x", 1), 1);
    assert_int_equal(SSL_read(p.client, buf, sizeof(buf)), 1);
    SSL_SESSION *sess = SSL_get1_session(p.client);
    assert_int_equal(sess ? SSL_SESSION_is_resumable(sess) : 0, 0);
    SSL_SESSION_free(sess);
    tls_pair_release(&p);

    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
}

static void test_tls_ip(void **state)
{
    gbx_autofree char *crt = path_in(state, "ca.crt");
    struct gbx_ca *ca = open_ok(*state);
    SSL_CTX *sctx = server_ctx_ok(ca, "127.0.0.1");
    SSL_CTX *cctx = client_ctx_ok(crt);
    struct tls_pair p;
    tls_pair_init(&p, sctx, cctx, "127.0.0.1");
    assert_int_equal(tls_handshake(&p), 0);
    assert_int_equal(SSL_get_verify_result(p.client), X509_V_OK);
    assert_null(SSL_get_servername(p.server, TLSEXT_NAMETYPE_host_name)); /* no SNI for IPs */
    tls_pair_release(&p);

    tls_pair_init(&p, sctx, cctx, "127.0.0.2");
    assert_int_equal(tls_handshake(&p), -1);
    assert_int_equal(SSL_get_verify_result(p.client), X509_V_ERR_IP_ADDRESS_MISMATCH);
    tls_pair_release(&p);
    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
    gbx_ca_free(ca);
}

static void test_tls_refused(void **state)
{
    gbx_autofree char *crt = path_in(state, "ca.crt");
    struct gbx_ca *ca = open_ok(*state);
    SSL_CTX *sctx = server_ctx_ok(ca, "api.example.test");
    SSL_CTX *cctx = client_ctx_ok(crt);
    struct tls_pair p;

    /* the client expects another host */
    tls_pair_init(&p, sctx, cctx, "other.example.test");
    assert_int_equal(tls_handshake(&p), -1);
    assert_int_equal(SSL_get_verify_result(p.client), X509_V_ERR_HOSTNAME_MISMATCH);
    tls_pair_release(&p);

    /* the system trust store does not know our CA */
    SSL_CTX *sys = client_ctx_ok(NULL);
    tls_pair_init(&p, sctx, sys, "api.example.test");
    assert_int_equal(tls_handshake(&p), -1);
    long v = SSL_get_verify_result(p.client);
    print_message("  system store: %s\n", X509_verify_cert_error_string(v));
    assert_int_not_equal(v, X509_V_OK);
    tls_pair_release(&p);
    SSL_CTX_free(sys);

    /* a CA from another directory does not vouch for this one's leaves */
    gbx_autofree char *other = path_in(state, "other");
    gbx_autofree char *other_crt = path_in(state, "other/ca.crt");
    struct gbx_ca *ca2 = open_ok(other);
    SSL_CTX *cctx2 = client_ctx_ok(other_crt);
    tls_pair_init(&p, sctx, cctx2, "api.example.test");
    assert_int_equal(tls_handshake(&p), -1);
    assert_int_not_equal(SSL_get_verify_result(p.client), X509_V_OK);
    tls_pair_release(&p);
    SSL_CTX_free(cctx2);

    struct gbx_err *err = NULL;
    assert_null(gbx_ca_client_ctx_new("/nonexistent/ca.crt", &err));
    assert_err(err, GBX_ERR_NOT_FOUND,
               "cannot read CA certificates '/nonexistent/ca.crt': No such file or directory");
    gbx_err_free(err);
    err = NULL;
    gbx_autofree char *junk = path_in(state, "junk.pem");
    write_bytes(junk, "junk\n", 5, 0644);
    assert_null(gbx_ca_client_ctx_new(junk, &err));
    assert_err(err, GBX_ERR_INVALID, "no certificates in");
    gbx_err_free(err);
    err = NULL;
    /* a bundle: the other CA first, then ours */
    gbx_autofree char *bundle = path_in(state, "bundle.pem");
    gbx_autofree char *both = gbx_asprintf("%s%s", gbx_ca_cert_pem(ca2), gbx_ca_cert_pem(ca));
    write_bytes(bundle, both, strlen(both), 0644);
    SSL_CTX *cctx3 = client_ctx_ok(bundle);
    tls_pair_init(&p, sctx, cctx3, "api.example.test");
    assert_int_equal(tls_handshake(&p), 0);
    tls_pair_release(&p);
    SSL_CTX_free(cctx3);
    gbx_ca_free(ca2);

    SSL *ssl = SSL_new(cctx);
    assert_int_equal(gbx_ca_client_prepare(ssl, "bad host", &err), -1);
    assert_err(err, GBX_ERR_INVALID, "'bad host' is not a host name or IP address");
    gbx_err_free(err);
    SSL_free(ssl);

    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
    gbx_ca_free(ca);
}

static void test_leaf_lru(void **state)
{
    gbx_autofree char *crt = path_in(state, "ca.crt");
    struct gbx_ca *ca = open_ok(*state);
    SSL_CTX *first = server_ctx_ok(ca, "h0.example.test");
    SSL_CTX *last = NULL;
    char host[64];
    for (int i = 1; i <= 1024; i++) {
        snprintf(host, sizeof(host), "h%d.example.test", i);
        SSL_CTX *ctx = server_ctx_ok(ca, host);
        if (i == 1024)
            last = ctx;
        else
            SSL_CTX_free(ctx);
    }
    /* h0 was the least recently used: evicted and minted anew; h1024 still cached */
    SSL_CTX *again = server_ctx_ok(ca, "h0.example.test");
    assert_ptr_not_equal(again, first);
    assert_same_serial(SSL_CTX_get0_certificate(again), SSL_CTX_get0_certificate(first), 0);
    SSL_CTX *last2 = server_ctx_ok(ca, "h1024.example.test");
    assert_ptr_equal(last, last2);

    /* the evicted ctx still serves the connection holding it */
    gbx_ca_free(ca);
    SSL_CTX *cctx = client_ctx_ok(crt);
    struct tls_pair p;
    tls_pair_init(&p, first, cctx, "h0.example.test");
    assert_int_equal(tls_handshake(&p), 0);
    tls_pair_release(&p);
    SSL_CTX_free(cctx);
    SSL_CTX_free(first);
    SSL_CTX_free(again);
    SSL_CTX_free(last);
    SSL_CTX_free(last2);
}

/* ---- seal ---- */

static void seal_roundtrip(const uint8_t *key, const void *v, size_t n, const char *aad)
{
    struct gbx_err *err = NULL;
    uint8_t *blob;
    size_t blen;
    assert_int_equal(gbx_seal(key, v, n, aad, &blob, &blen, &err), 0);
    assert_int_equal(blen, n + GBX_SEAL_OVERHEAD);
    if (n >= 16)
        assert_memory_not_equal(blob + GBX_SEAL_NONCE_LEN, v, 16);
    char *plain;
    size_t plen;
    assert_int_equal(gbx_seal_open(key, blob, blen, aad, &plain, &plen, &err), 0);
    assert_int_equal(plen, n);
    assert_memory_equal(plain, v, n);
    assert_int_equal(plain[n], '\0');
    free(plain);
    free(blob);
}

static void test_seal_roundtrip(void **state)
{
    uint8_t key[GBX_SEAL_KEY_LEN];
    assert_int_equal(RAND_bytes(key, sizeof(key)), 1);
    seal_roundtrip(key, "", 0, "empty");
    seal_roundtrip(key, "", 0, NULL);
    seal_roundtrip(key, "hunter2", 7, "GITHUB_TOKEN");
    seal_roundtrip(key, "hunter2", 7, NULL);
    size_t big = 64 * 1024;
    uint8_t *v = gbx_xmalloc(big);
    assert_int_equal(RAND_bytes(v, (int)big), 1);
    seal_roundtrip(key, v, big, "big");
    free(v);

    /* same value, same key, same aad: different blobs */
    struct gbx_err *err = NULL;
    uint8_t *a, *b;
    size_t alen, blen;
    assert_int_equal(gbx_seal(key, "same", 4, "n", &a, &alen, &err), 0);
    assert_int_equal(gbx_seal(key, "same", 4, "n", &b, &blen, &err), 0);
    assert_int_equal(alen, blen);
    assert_memory_not_equal(a, b, GBX_SEAL_NONCE_LEN);
    assert_memory_not_equal(a + GBX_SEAL_NONCE_LEN, b + GBX_SEAL_NONCE_LEN,
                            alen - GBX_SEAL_NONCE_LEN);
    free(a);
    free(b);
}

static void open_fails(const uint8_t *key, const uint8_t *blob, size_t n, const char *aad)
{
    struct gbx_err *err = NULL;
    char *plain = NULL;
    size_t plen = 99;
    assert_int_equal(gbx_seal_open(key, blob, n, aad, &plain, &plen, &err), -1);
    assert_null(plain);
    assert_int_equal(plen, 99);
    assert_non_null(err);
    assert_int_equal(err->kind, GBX_ERR_INVALID);
    assert_string_equal(err->msg, "sealed value does not authenticate");
    gbx_err_free(err);
}

static void test_seal_tamper(void **state)
{
    uint8_t key[GBX_SEAL_KEY_LEN], key2[GBX_SEAL_KEY_LEN];
    assert_int_equal(RAND_bytes(key, sizeof(key)), 1);
    memcpy(key2, key, sizeof(key));
    key2[31] ^= 1;
    struct gbx_err *err = NULL;
    uint8_t *blob;
    size_t n;
    const char *secret = "sk-live-0123456789";
    assert_int_equal(gbx_seal(key, secret, strlen(secret), "OPENAI_API_KEY", &blob, &n, &err), 0);

    open_fails(key, blob, n, "ANTHROPIC_API_KEY");
    open_fails(key, blob, n, NULL);
    open_fails(key, blob, n, "");
    open_fails(key2, blob, n, "OPENAI_API_KEY");
    for (size_t i = 0; i < n; i++) { /* nonce, ciphertext and tag */
        for (int bit = 0; bit < 8; bit += 7) {
            blob[i] ^= (uint8_t)(1u << bit);
            open_fails(key, blob, n, "OPENAI_API_KEY");
            blob[i] ^= (uint8_t)(1u << bit);
        }
    }
    open_fails(key, blob, n - 1, "OPENAI_API_KEY");
    open_fails(key, blob + 1, n - 1, "OPENAI_API_KEY");
    open_fails(key, blob, GBX_SEAL_OVERHEAD, "OPENAI_API_KEY");
    open_fails(key, blob, GBX_SEAL_OVERHEAD - 1, "OPENAI_API_KEY");
    open_fails(key, blob, 0, "OPENAI_API_KEY");

    /* an intact blob still opens */
    char *plain;
    size_t plen;
    assert_int_equal(gbx_seal_open(key, blob, n, "OPENAI_API_KEY", &plain, &plen, &err), 0);
    assert_string_equal(plain, secret);
    free(plain);
    free(blob);

    /* aad NULL and "" are the same context */
    assert_int_equal(gbx_seal(key, "x", 1, NULL, &blob, &n, &err), 0);
    assert_int_equal(gbx_seal_open(key, blob, n, "", &plain, &plen, &err), 0);
    free(plain);
    open_fails(key, blob, n, "x");
    free(blob);
}

static void test_seal_key(void **state)
{
    gbx_autofree char *path = path_in(state, "seal.key");
    struct gbx_err *err = NULL;
    uint8_t k1[GBX_SEAL_KEY_LEN], k2[GBX_SEAL_KEY_LEN];
    mode_t old = umask(022);
    assert_int_equal(gbx_seal_key_load(path, k1, &err), 0);
    umask(old);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_size, GBX_SEAL_KEY_LEN);
    char *data;
    size_t len;
    assert_int_equal(gbx_read_file(path, 1024, &data, &len), 0);
    assert_int_equal(len, GBX_SEAL_KEY_LEN);
    assert_memory_equal(data, k1, len);
    free(data);
    assert_int_equal(gbx_seal_key_load(path, k2, &err), 0);
    assert_memory_equal(k1, k2, sizeof(k1));
    static const uint8_t zero[GBX_SEAL_KEY_LEN];
    assert_memory_not_equal(k1, zero, sizeof(k1));

    /* a second key file is another key */
    gbx_autofree char *path2 = path_in(state, "seal2.key");
    assert_int_equal(gbx_seal_key_load(path2, k2, &err), 0);
    assert_memory_not_equal(k1, k2, sizeof(k1));

    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(gbx_seal_key_load(path, k2, &err), -1);
    assert_err(err, GBX_ERR_PERMISSION, "accessible by group or others (mode 0640)");
    gbx_err_free(err);
    err = NULL;
    assert_int_equal(chmod(path, 0604), 0);
    assert_int_equal(gbx_seal_key_load(path, k2, &err), -1);
    assert_err(err, GBX_ERR_PERMISSION, "mode 0604");
    gbx_err_free(err);
    err = NULL;
    assert_int_equal(chmod(path, 0600), 0);
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 4242, 0), 0);
        assert_int_equal(gbx_seal_key_load(path, k2, &err), -1);
        assert_err(err, GBX_ERR_PERMISSION, "owned by uid 4242");
        gbx_err_free(err);
        err = NULL;
        assert_int_equal(chown(path, 0, 0), 0);
    }

    static const size_t sizes[] = {0, 31, 33, 64};
    uint8_t bytes[64] = {0};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(sizes); i++) {
        write_bytes(path, bytes, sizes[i], 0600);
        assert_int_equal(gbx_seal_key_load(path, k2, &err), -1);
        assert_err(err, GBX_ERR_INVALID, "bytes, not 32");
        gbx_err_free(err);
        err = NULL;
    }

    gbx_autofree char *dir = path_in(state, "adir");
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(gbx_seal_key_load(dir, k2, &err), -1);
    assert_err(err, GBX_ERR_INVALID, "not a regular file");
    gbx_err_free(err);
    err = NULL;
    gbx_autofree char *missing = path_in(state, "no/such/seal.key");
    assert_int_equal(gbx_seal_key_load(missing, k2, &err), -1);
    assert_err(err, GBX_ERR_NOT_FOUND, "cannot create seal key");
    gbx_err_free(err);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_dir, teardown_dir)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_ca_create),   T(test_ca_reopen),   T(test_ca_key_refused), T(test_ca_mismatch),
        T(test_leaf_dns),    T(test_leaf_ip),     T(test_leaf_cache),     T(test_tls_handshake),
        T(test_tls_ip),      T(test_tls_refused), T(test_leaf_lru),       T(test_seal_roundtrip),
        T(test_seal_tamper), T(test_seal_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
