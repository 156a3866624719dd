/* SPDX-License-Identifier: MIT */
#include "egress/ca.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "base/fileutil.h"
#include "base/mem.h"

#define CA_CACHE_MAX 1024
#define CA_CACHE_BUCKETS 2048 /* power of two, twice the entries */
#define CA_FILE_MAX (64 * 1024)
#define CA_BUNDLE_MAX (16 * 1024 * 1024)
#define DAY_SECONDS (24 * 60 * 60)
#define CA_DAYS 3653 /* ten years, leap days included */
#define LEAF_DAYS 30
#define LEAF_REMINT_SECONDS DAY_SECONDS
#define BACKDATE_SECONDS 3600 /* tolerate clients whose clock is a little behind */
#define CN_MAX 64             /* ub_common_name */
#define HOST_MAX 253

/* One cached host: in a hash chain and in the LRU list (most recent at the head). */
struct ca_entry {
    char *host; /* normalized: lowercase DNS name or canonical IP text */
    SSL_CTX *ctx;
    time_t not_after;
    struct ca_entry *hnext;
    struct ca_entry *prev, *next;
};

struct gbx_ca {
    EVP_PKEY *key; /* CA key */
    X509 *cert;    /* CA certificate */
    char *cert_pem;
    EVP_PKEY *leaf_key; /* shared by every leaf */
    EVP_PKEY *leaf_pub; /* its public half, for X509_set_pubkey (see leaf_pub_new) */
    /* Extensions every leaf carries, built once. */
    X509_EXTENSION *leaf_ext[4];
    struct ca_entry *buckets[CA_CACHE_BUCKETS];
    struct ca_entry *lru_head, *lru_tail;
    size_t count;
};

int gbx_egress_ssl_fail(struct gbx_err **err, enum gbx_err_kind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gbx_autofree char *msg = gbx_vasprintf(fmt, ap);
    va_end(ap);
    unsigned long e = ERR_peek_last_error();
    if (e != 0) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof(buf));
        gbx_err_set(err, 0, kind, "%s: %s", msg, buf);
    } else {
        gbx_err_set(err, 0, kind, "%s", msg);
    }
    ERR_clear_error();
    return -1;
}

/* ---- files ---- */

/* Read at most max bytes of fd into a NUL-terminated malloc'd buffer. -errno. */
static int read_fd(int fd, size_t max, char **out, size_t *len)
{
    char *buf = gbx_xmalloc(max + 1);
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, max + 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            OPENSSL_cleanse(buf, max + 1);
            free(buf);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            OPENSSL_cleanse(buf, max + 1);
            free(buf);
            return -EFBIG;
        }
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* ---- certificates ---- */

static int set_random_serial(X509 *x)
{
    unsigned char b[16];
    if (RAND_bytes(b, sizeof(b)) != 1)
        return -1;
    b[0] &= 0x7f; /* positive */
    b[0] |= 0x40; /* and always 16 bytes long */
    BIGNUM *bn = BN_bin2bn(b, sizeof(b), NULL);
    if (bn == NULL)
        return -1;
    ASN1_INTEGER *r = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    return r ? 0 : -1;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_nconf_nid(NULL, &v3, nid, value);
    if (ext == NULL)
        return -1;
    int ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

static const EVP_MD *sign_md(EVP_PKEY *key)
{
    if (EVP_PKEY_is_a(key, "ED25519") || EVP_PKEY_is_a(key, "ED448"))
        return NULL;
    return EVP_sha256();
}

static X509 *ca_cert_new(EVP_PKEY *key, struct gbx_err **err)
{
    char hostname[256] = "";
    if (gethostname(hostname, sizeof(hostname) - 1) < 0 || hostname[0] == '\0')
        snprintf(hostname, sizeof(hostname), "unknown");
    const char *prefix = "Glovebox egress CA (";
    int room = CN_MAX - (int)strlen(prefix) - 1;
    gbx_autofree char *cn = gbx_asprintf("%s%.*s)", prefix, room, hostname);

    X509 *x = X509_new();
    if (x == NULL)
        goto fail;
    X509_NAME *name = X509_get_subject_name(x);
    if (!X509_set_version(x, X509_VERSION_3) || set_random_serial(x) < 0 ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -BACKDATE_SECONDS) ||
        !X509_time_adj_ex(X509_getm_notAfter(x), CA_DAYS, 0, NULL) ||
        !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"Glovebox", -1,
                                    -1, 0) ||
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                    0) ||
        !X509_set_issuer_name(x, name) || !X509_set_pubkey(x, key) ||
        add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
        add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
        add_ext(x, x, NID_subject_key_identifier, "hash") < 0 || !X509_sign(x, key, sign_md(key)))
        goto fail;
    return x;
fail:
    X509_free(x);
    gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "create CA certificate");
    return NULL;
}

static char *cert_to_pem(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    GBX_BUG_ON(b == NULL);
    GBX_BUG_ON(!PEM_write_bio_X509(b, x));
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char *pem = gbx_xstrndup(data, (size_t)n);
    BIO_free(b);
    return pem;
}

/* Open and check ca.key: 0 with *key, 1 when absent, -1 with err. */
static int load_key(const char *path, EVP_PKEY **key, struct gbx_err **err)
{
    gbx_autoclose int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 1;
        return gbx_err_sys(err, errno, "cannot open CA key '%s'", path);
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return gbx_err_sys(err, errno, "cannot stat CA key '%s'", path);
    if (!S_ISREG(st.st_mode))
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "CA key '%s' is not a regular file", path);
    if (st.st_uid != geteuid())
        return gbx_err_set(err, 0, GBX_ERR_PERMISSION,
                           "CA key '%s' is owned by uid %u, not by the daemon's uid %u", path,
                           (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & 077)
        return gbx_err_set(err, 0, GBX_ERR_PERMISSION,
                           "CA key '%s' is accessible by group or others (mode %04o); "
                           "it must be 0600",
                           path, (unsigned)(st.st_mode & 07777));
    char *buf = NULL;
    size_t len = 0;
    int r = read_fd(fd, CA_FILE_MAX, &buf, &len);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot read CA key '%s'", path);
    BIO *b = BIO_new_mem_buf(buf, (int)len);
    GBX_BUG_ON(b == NULL);
    *key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    BIO_free(b);
    OPENSSL_cleanse(buf, len);
    free(buf);
    if (*key == NULL)
        return gbx_egress_ssl_fail(err, GBX_ERR_INVALID, "cannot parse CA key '%s'", path);
    return 0;
}

/* Open and parse ca.crt: 0 with *cert, 1 when absent, -1 with err. */
static int load_cert(const char *path, X509 **cert, struct gbx_err **err)
{
    gbx_autofree char *buf = NULL;
    size_t len;
    int r = gbx_read_file(path, CA_FILE_MAX, &buf, &len);
    if (r == -ENOENT)
        return 1;
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot read CA certificate '%s'", path);
    BIO *b = BIO_new_mem_buf(buf, (int)len);
    GBX_BUG_ON(b == NULL);
    *cert = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    if (*cert == NULL)
        return gbx_egress_ssl_fail(err, GBX_ERR_INVALID, "cannot parse CA certificate '%s'", path);
    return 0;
}

static int save_key(const char *path, EVP_PKEY *key, struct gbx_err **err)
{
    BIO *b = BIO_new(BIO_s_secmem()); /* cleansed on free */
    GBX_BUG_ON(b == NULL);
    if (!PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL)) {
        BIO_free(b);
        return gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "encode CA key");
    }
    char *data;
    long n = BIO_get_mem_data(b, &data);
    int r = gbx_write_file_durable(path, data, (size_t)n, 0600);
    BIO_free(b);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot write CA key '%s'", path);
    return 0;
}

static int save_cert(const char *path, const char *pem, struct gbx_err **err)
{
    int r = gbx_write_file_durable(path, pem, strlen(pem), 0644);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot write CA certificate '%s'", path);
    return 0;
}

static int check_pair(const char *key_path, const char *cert_path, EVP_PKEY *key, X509 *cert,
                      struct gbx_err **err)
{
    if (X509_check_private_key(cert, key) != 1) {
        ERR_clear_error();
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "CA certificate '%s' does not match the key '%s'", cert_path, key_path);
    }
    if (X509_check_ca(cert) == 0)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "'%s' is not a CA certificate", cert_path);
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0)
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "CA certificate '%s' has expired; delete it to have a new one issued "
                           "for the same key",
                           cert_path);
    return 0;
}

/* The public half of the leaf key as a legacy (EC_KEY-backed) EVP_PKEY. OpenSSL 3.0's
 * X509_set_pubkey runs a provider-backed key through an encoder and a decoder (about 240 us,
 * five times the signature); a legacy key takes the fast pub_encode path (about 5 us).
 * d2i_PublicKey with a P-256 parameter key is the non-deprecated way to get one. NULL when
 * this OpenSSL does not cooperate: the caller then uses the leaf key itself. */
static EVP_PKEY *leaf_pub_new(EVP_PKEY *leaf_key)
{
    unsigned char *point = NULL;
    size_t n = EVP_PKEY_get1_encoded_public_key(leaf_key, &point);
    EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *pub = NULL;
    if (n > 0 && pctx && EVP_PKEY_paramgen_init(pctx) > 0 &&
        EVP_PKEY_CTX_set_group_name(pctx, "P-256") > 0 && EVP_PKEY_paramgen(pctx, &pub) > 0) {
        const unsigned char *p = point;
        if (d2i_PublicKey(EVP_PKEY_EC, &pub, &p, (long)n) == NULL ||
            EVP_PKEY_eq(pub, leaf_key) != 1) {
            EVP_PKEY_free(pub);
            pub = NULL;
        }
    }
    EVP_PKEY_CTX_free(pctx);
    OPENSSL_free(point);
    ERR_clear_error();
    return pub;
}

static int leaf_exts_init(struct gbx_ca *ca, struct gbx_err **err)
{
    static const struct {
        int nid;
        const char *value;
    } exts[] = {
        {NID_basic_constraints, "critical,CA:FALSE"},
        {NID_key_usage, "critical,digitalSignature"},
        {NID_ext_key_usage, "serverAuth"},
        {NID_authority_key_identifier, "keyid:always"},
    };
    _Static_assert(GBX_ARRAY_SIZE(exts) == GBX_ARRAY_SIZE(ca->leaf_ext), "leaf extensions");
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, ca->cert, NULL, NULL, NULL, 0);
    for (size_t i = 0; i < GBX_ARRAY_SIZE(exts); i++) {
        ca->leaf_ext[i] = X509V3_EXT_nconf_nid(NULL, &v3, exts[i].nid, exts[i].value);
        if (ca->leaf_ext[i] == NULL)
            return gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "build leaf extension '%s'",
                                       OBJ_nid2sn(exts[i].nid));
    }
    return 0;
}

static int ca_load_or_create(struct gbx_ca *ca, const char *dir, struct gbx_err **err)
{
    int r = gbx_mkdir_p(dir, 0700);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot create '%s'", dir);
    gbx_autofree char *key_path = gbx_asprintf("%s/ca.key", dir);
    gbx_autofree char *cert_path = gbx_asprintf("%s/ca.crt", dir);

    int key_absent = load_key(key_path, &ca->key, err);
    if (key_absent < 0)
        return -1;
    int cert_absent = 1;
    if (!key_absent) {
        cert_absent = load_cert(cert_path, &ca->cert, err);
        if (cert_absent < 0)
            return -1;
    }
    if (key_absent) {
        ca->key = EVP_EC_gen("P-256");
        if (ca->key == NULL)
            return gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "generate CA key");
        if (save_key(key_path, ca->key, err) < 0)
            return -1;
    }
    if (cert_absent) {
        ca->cert = ca_cert_new(ca->key, err);
        if (ca->cert == NULL)
            return -1;
    }
    ca->cert_pem = cert_to_pem(ca->cert);
    if (cert_absent) {
        if (save_cert(cert_path, ca->cert_pem, err) < 0)
            return -1;
    }
    return check_pair(key_path, cert_path, ca->key, ca->cert, err);
}

int gbx_ca_open(const char *dir, struct gbx_ca **out, struct gbx_err **err)
{
    struct gbx_ca *ca = gbx_xcalloc(1, sizeof(*ca));
    if (ca_load_or_create(ca, dir, err) < 0)
        goto fail;
    ca->leaf_key = EVP_EC_gen("P-256");
    if (ca->leaf_key == NULL) {
        gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "generate leaf key");
        goto fail;
    }
    ca->leaf_pub = leaf_pub_new(ca->leaf_key);
    if (ca->leaf_pub == NULL) {
        GBX_BUG_ON(!EVP_PKEY_up_ref(ca->leaf_key));
        ca->leaf_pub = ca->leaf_key;
    }
    if (leaf_exts_init(ca, err) < 0)
        goto fail;
    *out = ca;
    return 0;
fail:
    gbx_ca_free(ca);
    return gbx_err_wrap(err, "TLS interception CA '%s'", dir);
}

static void entry_free(struct ca_entry *e)
{
    SSL_CTX_free(e->ctx);
    free(e->host);
    free(e);
}

void gbx_ca_free(struct gbx_ca *ca)
{
    if (ca == NULL)
        return;
    struct ca_entry *e = ca->lru_head;
    while (e) {
        struct ca_entry *next = e->next;
        entry_free(e);
        e = next;
    }
    for (size_t i = 0; i < GBX_ARRAY_SIZE(ca->leaf_ext); i++)
        X509_EXTENSION_free(ca->leaf_ext[i]);
    EVP_PKEY_free(ca->leaf_pub);
    EVP_PKEY_free(ca->leaf_key);
    X509_free(ca->cert);
    EVP_PKEY_free(ca->key);
    free(ca->cert_pem);
    free(ca);
}

const char *gbx_ca_cert_pem(const struct gbx_ca *ca)
{
    return ca->cert_pem;
}

/* ---- hosts ---- */

/* Normalize host into out (HOST_MAX + 1 bytes): an IP literal to its canonical text (*is_ip
 * set), a DNS name to lowercase without a trailing dot. -1 if it is neither. */
static int host_normalize(const char *host, char out[HOST_MAX + 1], int *is_ip)
{
    unsigned char addr[16];
    *is_ip = 1;
    if (inet_pton(AF_INET, host, addr) == 1)
        return inet_ntop(AF_INET, addr, out, HOST_MAX + 1) ? 0 : -1;
    if (inet_pton(AF_INET6, host, addr) == 1)
        return inet_ntop(AF_INET6, addr, out, HOST_MAX + 1) ? 0 : -1;
    *is_ip = 0;
    size_t n = strlen(host);
    if (n > 0 && host[n - 1] == '.')
        n--;
    if (n == 0 || n > HOST_MAX)
        return -1;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char c = host[i];
        if (c == '.') {
            if (label == 0)
                return -1;
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
            label++;
        } else if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
            label++;
        } else {
            return -1;
        }
        if (label > 63)
            return -1;
        out[i] = c;
    }
    if (label == 0)
        return -1;
    out[n] = '\0';
    return 0;
}

static uint32_t host_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void lru_unlink(struct gbx_ca *ca, struct ca_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        ca->lru_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        ca->lru_tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(struct gbx_ca *ca, struct ca_entry *e)
{
    e->prev = NULL;
    e->next = ca->lru_head;
    if (ca->lru_head)
        ca->lru_head->prev = e;
    ca->lru_head = e;
    if (ca->lru_tail == NULL)
        ca->lru_tail = e;
}

static struct ca_entry *cache_find(struct gbx_ca *ca, const char *host)
{
    struct ca_entry *e = ca->buckets[host_hash(host) & (CA_CACHE_BUCKETS - 1)];
    while (e && strcmp(e->host, host) != 0)
        e = e->hnext;
    return e;
}

static void cache_remove(struct gbx_ca *ca, struct ca_entry *e)
{
    struct ca_entry **pp = &ca->buckets[host_hash(e->host) & (CA_CACHE_BUCKETS - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(ca, e);
    ca->count--;
    entry_free(e);
}

static void cache_insert(struct gbx_ca *ca, struct ca_entry *e)
{
    if (ca->count >= CA_CACHE_MAX)
        cache_remove(ca, ca->lru_tail);
    struct ca_entry **b = &ca->buckets[host_hash(e->host) & (CA_CACHE_BUCKETS - 1)];
    e->hnext = *b;
    *b = e;
    lru_push_front(ca, e);
    ca->count++;
}

/* ---- leaves ---- */

static int add_san(X509 *x, const char *host, int is_ip)
{
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    GENERAL_NAME *gn = GENERAL_NAME_new();
    int ok = 0;
    if (gens == NULL || gn == NULL)
        goto out;
    if (is_ip) {
        ASN1_OCTET_STRING *ip = a2i_IPADDRESS(host);
        if (ip == NULL)
            goto out;
        GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
    } else {
        ASN1_IA5STRING *dns = ASN1_IA5STRING_new();
        if (dns == NULL || !ASN1_STRING_set(dns, host, -1)) {
            ASN1_IA5STRING_free(dns);
            goto out;
        }
        GENERAL_NAME_set0_value(gn, GEN_DNS, dns);
    }
    if (!sk_GENERAL_NAME_push(gens, gn))
        goto out;
    gn = NULL;
    ok = X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) == 1;
out:
    GENERAL_NAME_free(gn);
    GENERAL_NAMES_free(gens);
    return ok ? 0 : -1;
}

static X509 *leaf_new(struct gbx_ca *ca, const char *host, int is_ip, time_t now, time_t not_after)
{
    X509 *x = X509_new();
    if (x == NULL)
        return NULL;
    X509_NAME *name = X509_get_subject_name(x);
    if (!X509_set_version(x, X509_VERSION_3) || set_random_serial(x) < 0 ||
        !ASN1_TIME_set(X509_getm_notBefore(x), now - BACKDATE_SECONDS) ||
        !ASN1_TIME_set(X509_getm_notAfter(x), not_after) ||
        !X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) ||
        !X509_set_pubkey(x, ca->leaf_pub))
        goto fail;
    if (strlen(host) <= CN_MAX &&
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)host, -1, -1,
                                    0))
        goto fail;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(ca->leaf_ext); i++)
        if (!X509_add_ext(x, ca->leaf_ext[i], -1))
            goto fail;
    if (add_san(x, host, is_ip) < 0 || !X509_sign(x, ca->key, sign_md(ca->key)))
        goto fail;
    return x;
fail:
    X509_free(x);
    return NULL;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    static const char want[] = "http/1.1";
    unsigned int i = 0;
    while (i < inlen) {
        unsigned int len = in[i];
        if (len > inlen - i - 1)
            break;
        if (len == sizeof(want) - 1 && memcmp(in + i + 1, want, len) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)len;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + len;
    }
    return SSL_TLSEXT_ERR_NOACK; /* no ALPN: the client gets HTTP/1.1 anyway */
}

static SSL_CTX *server_ctx_new(struct gbx_ca *ca, const char *host, int is_ip, time_t now,
                               time_t not_after, struct gbx_err **err)
{
    X509 *leaf = leaf_new(ca, host, is_ip, now, not_after);
    if (leaf == NULL) {
        gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "mint certificate for '%s'", host);
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        !SSL_CTX_use_certificate(ctx, leaf) || !SSL_CTX_use_PrivateKey(ctx, ca->leaf_key) ||
        !SSL_CTX_add1_chain_cert(ctx, ca->cert)) {
        X509_free(leaf);
        SSL_CTX_free(ctx);
        gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "server TLS context for '%s'", host);
        return NULL;
    }
    X509_free(leaf);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_num_tickets(ctx, 0);
    /* a per-host ctx with the default cache would hold up to 20k sessions each */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    return ctx;
}

SSL_CTX *gbx_ca_server_ctx(struct gbx_ca *ca, const char *host, struct gbx_err **err)
{
    char norm[HOST_MAX + 1];
    int is_ip;
    if (host_normalize(host, norm, &is_ip) < 0) {
        gbx_err_set(err, 0, GBX_ERR_INVALID, "'%.*s' is not a host name or IP address", HOST_MAX,
                    host);
        return NULL;
    }
    time_t now = time(NULL);
    struct ca_entry *e = cache_find(ca, norm);
    if (e && e->not_after - now >= LEAF_REMINT_SECONDS) {
        if (ca->lru_head != e) {
            lru_unlink(ca, e);
            lru_push_front(ca, e);
        }
        SSL_CTX_up_ref(e->ctx);
        return e->ctx;
    }
    time_t not_after = now + (time_t)LEAF_DAYS * DAY_SECONDS;
    SSL_CTX *ctx = server_ctx_new(ca, norm, is_ip, now, not_after, err);
    if (ctx == NULL)
        return NULL;
    if (e) { /* expiring: replace; connections holding the old ctx keep it */
        SSL_CTX_free(e->ctx);
        e->ctx = ctx;
        e->not_after = not_after;
        lru_unlink(ca, e);
        lru_push_front(ca, e);
    } else {
        e = gbx_xcalloc(1, sizeof(*e));
        e->host = gbx_xstrdup(norm);
        e->ctx = ctx;
        e->not_after = not_after;
        cache_insert(ca, e);
    }
    SSL_CTX_up_ref(ctx);
    return ctx;
}

/* ---- upstream ---- */

/* Add every certificate in the PEM file path to ctx's trust store. */
static int add_ca_file(SSL_CTX *ctx, const char *path, struct gbx_err **err)
{
    gbx_autofree char *buf = NULL;
    size_t len;
    int r = gbx_read_file(path, CA_BUNDLE_MAX, &buf, &len);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot read CA certificates '%s'", path);
    BIO *b = BIO_new_mem_buf(buf, (int)len);
    GBX_BUG_ON(b == NULL);
    STACK_OF(X509_INFO) *infos = PEM_X509_INFO_read_bio(b, NULL, NULL, NULL);
    BIO_free(b);
    if (infos == NULL)
        return gbx_egress_ssl_fail(err, GBX_ERR_INVALID, "cannot parse CA certificates '%s'", path);
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    int n = 0;
    r = 0;
    for (int i = 0; i < sk_X509_INFO_num(infos) && r == 0; i++) {
        X509 *x = sk_X509_INFO_value(infos, i)->x509;
        if (x == NULL)
            continue;
        if (!X509_STORE_add_cert(store, x))
            r = gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "add CA certificate from '%s'", path);
        n++;
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    ERR_clear_error();
    if (r == 0 && n == 0)
        r = gbx_err_set(err, 0, GBX_ERR_INVALID, "no certificates in '%s'", path);
    return r;
}

SSL_CTX *gbx_ca_client_ctx_new(const char *extra_ca_file, struct gbx_err **err)
{
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        !SSL_CTX_set_default_verify_paths(ctx) ||
        SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0) {
        SSL_CTX_free(ctx);
        gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "upstream TLS context");
        return NULL;
    }
    if (extra_ca_file && add_ca_file(ctx, extra_ca_file, err) < 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    return ctx;
}

int gbx_ca_client_prepare(SSL *ssl, const char *host, struct gbx_err **err)
{
    char norm[HOST_MAX + 1];
    int is_ip;
    if (host_normalize(host, norm, &is_ip) < 0)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "'%.*s' is not a host name or IP address",
                           HOST_MAX, host);
    if (is_ip) {
        if (!X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), norm))
            return gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "verify IP address '%s'", norm);
        return 0;
    }
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (!SSL_set_tlsext_host_name(ssl, norm) || !SSL_set1_host(ssl, norm))
        return gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "server name '%s'", norm);
    return 0;
}
