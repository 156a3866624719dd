/* SPDX-License-Identifier: MIT */
/* TLS ClientHello server name (OpenSSL) and HTTP/1.x request heads (http-parser) for the egress
 * proxy, and the client-side HTTP/1.1 relay that rebuilds every head it forwards. */
#include "egress/sniff.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include <http_parser.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>

#include "base/mem.h"

/* ---- TLS ---------------------------------------------------------------------------------- */

int gbx_sniff_is_tls(const uint8_t *buf, size_t len)
{
    return len >= 3 && buf[0] == 0x16 && buf[1] == 0x03 && buf[2] <= 0x04;
}

static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static SSL_CTX *tls_ctx;

struct sni_state {
    bool ran;
    int result;
    char *sni;
    size_t snisz;
};

/* [a-z0-9.-] after lowercasing, copied into out[outsz]; -1 if empty, another byte, or too long. */
static int copy_dns_name(const uint8_t *name, size_t len, char *out, size_t outsz)
{
    if (len == 0 || len >= outsz)
        return -1;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = name[i];
        if (c >= 'A' && c <= 'Z')
            c = (uint8_t)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
            return -1;
        out[i] = (char)c;
    }
    out[len] = '\0';
    return 0;
}

/* RFC 6066 3: ServerNameList { uint16 len; { uint8 type; uint16 len; name } } with exactly one
 * host_name (type 0) entry filling the list. */
static int parse_server_name(const uint8_t *ext, size_t extlen, char *sni, size_t snisz)
{
    if (extlen < 2 || (((size_t)ext[0] << 8) | ext[1]) != extlen - 2)
        return -1;
    ext += 2;
    extlen -= 2;
    if (extlen < 3 || ext[0] != TLSEXT_NAMETYPE_host_name)
        return -1;
    size_t namelen = ((size_t)ext[1] << 8) | ext[2];
    if (namelen != extlen - 3)
        return -1;
    return copy_dns_name(ext + 3, namelen, sni, snisz);
}

static int client_hello_cb(SSL *ssl, int *al, void *arg)
{
    struct sni_state *st = SSL_get_app_data(ssl);
    const unsigned char *ext;
    size_t extlen;

    (void)arg;
    st->ran = true;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &extlen)) {
        st->sni[0] = '\0';
        st->result = GBX_SNIFF_OK;
    } else {
        st->result =
            parse_server_name(ext, extlen, st->sni, st->snisz) == 0 ? GBX_SNIFF_OK : GBX_SNIFF_BAD;
    }
    /* Stop here: the handshake never goes further. */
    *al = SSL_AD_HANDSHAKE_FAILURE;
    return SSL_CLIENT_HELLO_ERROR;
}

static void tls_ctx_init(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        ERR_clear_error();
        return;
    }
    /* Every version's ClientHello reaches the callback, which runs before version
     * negotiation; the security level is irrelevant for the same reason. */
    SSL_CTX_set_min_proto_version(ctx, 0);
    SSL_CTX_set_max_proto_version(ctx, 0);
    SSL_CTX_set_client_hello_cb(ctx, client_hello_cb, NULL);
    tls_ctx = ctx;
}

int gbx_sniff_tls_sni(const uint8_t *buf, size_t len, char *sni, size_t snisz)
{
    static const uint8_t start[3] = {0x16, 0x03, 0x00};

    if (snisz > 0)
        sni[0] = '\0';
    if (len < 3) /* a prefix of a TLS record header? */
        return len == 0 || memcmp(buf, start, len) == 0 ? GBX_SNIFF_MORE : GBX_SNIFF_BAD;
    if (!gbx_sniff_is_tls(buf, len) || snisz == 0)
        return GBX_SNIFF_BAD;

    pthread_once(&tls_once, tls_ctx_init);
    if (tls_ctx == NULL)
        return GBX_SNIFF_BAD;

    size_t feed = len < GBX_SNIFF_TLS_MAX ? len : GBX_SNIFF_TLS_MAX;
    struct sni_state st = {.ran = false, .result = GBX_SNIFF_BAD, .sni = sni, .snisz = snisz};
    int result = GBX_SNIFF_BAD;
    SSL *ssl = SSL_new(tls_ctx);
    BIO *rbio = BIO_new(BIO_s_mem());
    BIO *wbio = BIO_new(BIO_s_null()); /* alerts go nowhere */

    if (ssl == NULL || rbio == NULL || wbio == NULL)
        goto out;
    if (BIO_write(rbio, buf, (int)feed) != (int)feed)
        goto out;
    BIO_set_mem_eof_return(rbio, -1); /* the end of the copy reads as "want more" */
    SSL_set_bio(ssl, rbio, wbio);
    rbio = wbio = NULL; /* owned by ssl now */
    SSL_set_app_data(ssl, &st);
    SSL_set_accept_state(ssl);
    ERR_clear_error(); /* SSL_get_error reads the thread's queue: nothing stale in it */

    int r = SSL_accept(ssl);
    if (st.ran)
        result = st.result;
    else if (r < 0 && SSL_get_error(ssl, r) == SSL_ERROR_WANT_READ && feed < GBX_SNIFF_TLS_MAX)
        result = GBX_SNIFF_MORE;

out:
    SSL_free(ssl);
    BIO_free(rbio);
    BIO_free(wbio);
    ERR_clear_error(); /* the queue is per thread: leave nothing behind for other users */
    if (result != GBX_SNIFF_OK)
        sni[0] = '\0';
    return result;
}

/* ---- HTTP heads --------------------------------------------------------------------------- */

/* One header as offsets into struct hparse.text. */
struct hdr {
    uint32_t name, name_len, value, value_len;
};

enum piece { PIECE_NONE, PIECE_URL, PIECE_FIELD, PIECE_VALUE };
enum phase { PHASE_HEAD, PHASE_BODY };
/* Chunked framing: `HEX [SP/HT*] [; ext] CRLF` lines alternating with the CRLF after each
 * chunk's data (or, after the last chunk, the end of the empty trailer section). */
enum chunk_state { CF_SIZE0, CF_SIZE, CF_BWS, CF_EXT, CF_LINE_LF, CF_EMPTY_CR, CF_EMPTY_LF };

/* http-parser and what its callbacks collected; shared by gbx_sniff_http_head and the relay. */
struct hparse {
    http_parser parser;
    enum phase phase;
    /* head: the target and every header name and value, copied as the pieces arrive */
    char *text;
    size_t text_len, text_cap;
    struct hdr *hdrs;
    size_t nhdrs, hdrs_cap;
    uint32_t url_len; /* the target is text[0, url_len) */
    enum piece last;
    size_t head_bytes;   /* bytes of the current head consumed so far */
    uint8_t prev, prev2; /* the two bytes before the next one of the head */
    bool head_done;
    /* body */
    bool msg_done;
    enum chunk_state cf;
    const char *scan_from; /* framing bytes before here are checked */
    const char *bad;       /* the first framing byte that is wrong */
};

/* A complete head, checked. Pointers into struct hparse.text. */
struct req {
    const char *method;
    const char *target;
    size_t target_len;
    char host[256];
    uint16_t port;
    bool connect;
    bool upgrade;
};

static struct hparse *hp_of(http_parser *p)
{
    return p->data;
}

static void hparse_head_reset(struct hparse *h)
{
    h->text_len = 0;
    h->nhdrs = 0;
    h->url_len = 0;
    h->last = PIECE_NONE;
    h->head_bytes = 0;
    h->prev = h->prev2 = 0;
    h->head_done = false;
    h->phase = PHASE_HEAD;
}

static void hparse_init(struct hparse *h)
{
    memset(h, 0, sizeof(*h));
    http_parser_init(&h->parser, HTTP_REQUEST);
    h->parser.data = h;
    hparse_head_reset(h);
}

static void hparse_release(struct hparse *h)
{
    free(h->text);
    h->text = NULL;
    free(h->hdrs);
    h->hdrs = NULL;
    h->text_cap = h->hdrs_cap = 0;
}

static int text_add(struct hparse *h, const char *at, size_t len)
{
    if (len > GBX_SNIFF_HEAD_MAX - h->text_len)
        return -1; /* cannot be: the head is bounded first; a callback failure makes it BAD */
    if (h->text_len + len > h->text_cap) {
        size_t cap = h->text_cap ? h->text_cap : 512;
        while (cap < h->text_len + len)
            cap *= 2;
        h->text = gbx_xrealloc(h->text, cap);
        h->text_cap = cap;
    }
    memcpy(h->text + h->text_len, at, len);
    h->text_len += len;
    return 0;
}

static int on_message_begin(http_parser *p)
{
    struct hparse *h = hp_of(p);
    h->text_len = 0;
    h->nhdrs = 0;
    h->url_len = 0;
    h->last = PIECE_NONE;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct hparse *h = hp_of(p);
    if (h->phase != PHASE_HEAD || (h->last != PIECE_NONE && h->last != PIECE_URL))
        return -1;
    h->last = PIECE_URL;
    if (text_add(h, at, len) < 0)
        return -1;
    h->url_len = (uint32_t)h->text_len;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct hparse *h = hp_of(p);
    if (h->phase != PHASE_HEAD)
        return -1; /* a trailer */
    if (h->last != PIECE_FIELD) {
        if (h->nhdrs == h->hdrs_cap) {
            h->hdrs_cap = h->hdrs_cap ? h->hdrs_cap * 2 : 16;
            h->hdrs = gbx_xrealloc(h->hdrs, h->hdrs_cap * sizeof(*h->hdrs));
        }
        h->hdrs[h->nhdrs++] = (struct hdr){.name = (uint32_t)h->text_len};
        h->last = PIECE_FIELD;
    }
    if (text_add(h, at, len) < 0)
        return -1;
    h->hdrs[h->nhdrs - 1].name_len += (uint32_t)len;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    struct hparse *h = hp_of(p);
    if (h->phase != PHASE_HEAD || h->nhdrs == 0)
        return -1;
    struct hdr *hd = &h->hdrs[h->nhdrs - 1];
    if (h->last != PIECE_VALUE) {
        if (h->last != PIECE_FIELD)
            return -1;
        hd->value = (uint32_t)h->text_len;
        hd->value_len = 0;
        h->last = PIECE_VALUE;
    }
    if (text_add(h, at, len) < 0)
        return -1;
    hd->value_len += (uint32_t)len;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct hparse *h = hp_of(p);
    if (h->phase != PHASE_HEAD)
        return -1; /* the end of a trailer section goes through on_chunk_complete */
    h->head_done = true;
    http_parser_pause(p, 1); /* returns with the head's last byte (the LF) not consumed */
    return 0;
}

/* Check chunked framing bytes [from, to) (the bytes of a body that are not chunk data). */
static void chunk_scan(struct hparse *h, const char *from, const char *to)
{
    for (const char *s = from; s < to && h->bad == NULL; s++) {
        uint8_t c = (uint8_t)*s;
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        bool ok = false;
        switch (h->cf) {
        case CF_SIZE0:
            ok = hex;
            h->cf = CF_SIZE;
            break;
        case CF_SIZE:
        case CF_BWS:
            if (hex && h->cf == CF_SIZE)
                ok = true;
            else if (c == ' ' || c == '\t')
                ok = true, h->cf = CF_BWS;
            else if (c == ';')
                ok = true, h->cf = CF_EXT;
            else if (c == '\r')
                ok = true, h->cf = CF_LINE_LF;
            break;
        case CF_EXT:
            if (c == '\r')
                ok = true, h->cf = CF_LINE_LF;
            else
                ok = c != '"' && c != 0x7f && (c >= 0x20 || c == '\t');
            break;
        case CF_LINE_LF:
            ok = c == '\n';
            h->cf = CF_EMPTY_CR;
            break;
        case CF_EMPTY_CR:
            ok = c == '\r';
            h->cf = CF_EMPTY_LF;
            break;
        case CF_EMPTY_LF:
            ok = c == '\n';
            h->cf = CF_SIZE0;
            break;
        }
        if (!ok)
            h->bad = s;
    }
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct hparse *h = hp_of(p);
    if (h->phase != PHASE_BODY)
        return -1;
    chunk_scan(h, h->scan_from, at);
    h->scan_from = at + len;
    return h->bad ? -1 : 0;
}

static int on_message_complete(http_parser *p)
{
    struct hparse *h = hp_of(p);
    if (h->phase != PHASE_BODY)
        return -1;
    h->msg_done = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings hp_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* Line endings of a head: every LF after a CR, every CR before an LF, no line starting with SP
 * or HT (obs-fold, or whitespace before the first header). */
static int head_scan(struct hparse *h, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c == '\n' && h->prev != '\r')
            return -1;
        if (h->prev == '\r' && c != '\n')
            return -1;
        if ((c == ' ' || c == '\t') && h->prev == '\n' && h->prev2 == '\r')
            return -1;
        h->prev2 = h->prev;
        h->prev = c;
    }
    return 0;
}

/* Run http-parser over the head bytes at data[0, len). Returns GBX_SNIFF_OK with *used the
 * bytes of the head in data when the head is complete (the parser is paused with its last byte
 * not consumed), GBX_SNIFF_MORE when all len bytes belong to the head, or GBX_SNIFF_BAD. */
static int head_step(struct hparse *h, const char *data, size_t len, size_t *used)
{
    h->head_done = false;
    size_t n = http_parser_execute(&h->parser, &hp_settings, data, len);
    enum http_errno e = HTTP_PARSER_ERRNO(&h->parser);
    if (h->head_done ? e != HPE_PAUSED || n >= len : e != HPE_OK || n != len)
        return GBX_SNIFF_BAD;
    size_t seen = h->head_done ? n + 1 : n;
    if (head_scan(h, data, seen) < 0)
        return GBX_SNIFF_BAD;
    h->head_bytes += seen;
    if (h->head_bytes > GBX_SNIFF_HEAD_MAX ||
        (!h->head_done && h->head_bytes == GBX_SNIFF_HEAD_MAX))
        return GBX_SNIFF_BAD;
    *used = seen;
    return h->head_done ? GBX_SNIFF_OK : GBX_SNIFF_MORE;
}

static bool is_tchar(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool is_token(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_tchar((uint8_t)s[i]))
            return false;
    return true;
}

/* A field value http-parser let through still gets no control character but HT. */
static bool is_field_value(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

static bool name_is(const char *s, size_t len, const char *name)
{
    return strlen(name) == len && strncasecmp(s, name, len) == 0;
}

/* A host name ([a-z0-9._-], lowercased) or an IPv6 literal ([0-9a-f:.], given without
 * brackets) into host[256]. */
static int host_copy(const char *s, size_t len, bool ipv6, char host[256])
{
    if (len == 0 || len > 255)
        return -1;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        bool ok = (c >= '0' && c <= '9') || c == '.' ||
                  (ipv6 ? (c >= 'a' && c <= 'f') || c == ':'
                        : (c >= 'a' && c <= 'z') || c == '-' || c == '_');
        if (!ok)
            return -1;
        host[i] = c;
    }
    host[len] = '\0';
    return 0;
}

/* Host header value: host, host:port, [v6], [v6]:port; "" is no host. Port 0 if absent. */
static int host_parse(const char *s, size_t len, char host[256], uint16_t *port)
{
    size_t hostend;
    const char *name = s;
    size_t namelen;
    bool ipv6 = false;

    host[0] = '\0';
    *port = 0;
    if (len == 0)
        return 0;
    if (s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL)
            return -1;
        ipv6 = true;
        name = s + 1;
        namelen = (size_t)(close - name);
        hostend = (size_t)(close - s) + 1;
        if (memchr(name, ':', namelen) == NULL)
            return -1;
    } else {
        const char *colon = memchr(s, ':', len);
        hostend = colon ? (size_t)(colon - s) : len;
        namelen = hostend;
    }
    if (host_copy(name, namelen, ipv6, host) < 0)
        return -1;
    if (hostend == len)
        return 0;
    if (s[hostend] != ':' || len - hostend - 1 > 5)
        return -1;
    unsigned long v = 0;
    for (size_t i = hostend + 1; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (len - hostend - 1 > 0 && (v == 0 || v > 65535))
        return -1;
    *port = (uint16_t)v;
    return 0;
}

/* Host and port of an absolute-form (is_connect 0) or authority-form target. */
static int target_host(const char *t, size_t len, bool is_connect, char host[256], uint16_t *port)
{
    struct http_parser_url u;

    http_parser_url_init(&u);
    if (http_parser_parse_url(t, len, is_connect, &u) != 0 || !(u.field_set & (1 << UF_HOST)))
        return -1;
    if (!is_connect) {
        if (!(u.field_set & (1 << UF_SCHEMA)))
            return -1;
        const char *sch = t + u.field_data[UF_SCHEMA].off;
        size_t schlen = u.field_data[UF_SCHEMA].len;
        if (!name_is(sch, schlen, "http") && !name_is(sch, schlen, "https"))
            return -1;
    }
    const char *h = t + u.field_data[UF_HOST].off;
    size_t hlen = u.field_data[UF_HOST].len;
    if (host_copy(h, hlen, memchr(h, ':', hlen) != NULL, host) < 0)
        return -1;
    *port = 0;
    if (u.field_set & (1 << UF_PORT)) {
        if (u.port == 0)
            return -1;
        *port = u.port;
    }
    return 0;
}

/* Check a complete head and fill *q. Trims header values of trailing whitespace. */
static int head_check(struct hparse *h, struct req *q)
{
    http_parser *p = &h->parser;
    const char *target = h->text;
    size_t tlen = h->url_len;
    int nhost = 0, nte = 0, ncl = 0;
    uint16_t hport = 0;
    char hhost[256] = {0};

    memset(q, 0, sizeof(*q));
    if (p->http_major != 1 || p->http_minor > 1)
        return -1;
    q->method = http_method_str((enum http_method)p->method);
    q->connect = p->method == HTTP_CONNECT;
    q->upgrade = p->upgrade;
    q->target = target;
    q->target_len = tlen;
    if (tlen == 0)
        return -1;
    for (size_t i = 0; i < tlen; i++)
        if ((uint8_t)target[i] <= 0x20 || (uint8_t)target[i] >= 0x7f)
            return -1;

    for (size_t i = 0; i < h->nhdrs; i++) {
        struct hdr *hd = &h->hdrs[i];
        const char *name = h->text + hd->name;
        const char *value = h->text + hd->value;
        while (hd->value_len > 0 &&
               (value[hd->value_len - 1] == ' ' || value[hd->value_len - 1] == '\t'))
            hd->value_len--;
        if (!is_token(name, hd->name_len) || !is_field_value(value, hd->value_len))
            return -1;
        if (name_is(name, hd->name_len, "host")) {
            if (++nhost > 1 || host_parse(value, hd->value_len, hhost, &hport) < 0)
                return -1;
        } else if (name_is(name, hd->name_len, "transfer-encoding")) {
            if (++nte > 1 || !name_is(value, hd->value_len, "chunked"))
                return -1;
        } else if (name_is(name, hd->name_len, "content-length")) {
            ncl++;
        }
    }
    if (ncl > 1 || (ncl && nte))
        return -1; /* http-parser says so too; the relay's framing rests on it */
    /* The framing http-parser will use must be the one the rebuilt head says. It takes any
     * name starting with "Transfer-Encoding" for one (and fails the request after the head). */
    if (p->uses_transfer_encoding != (nte > 0) || !(p->flags & F_CHUNKED) != !nte ||
        !(p->flags & F_CONTENTLENGTH) != !ncl)
        return -1;

    if (q->connect) {
        if (target_host(target, tlen, true, q->host, &q->port) < 0)
            return -1;
    } else if (target[0] == '/') {
        memcpy(q->host, hhost, sizeof(q->host));
        q->port = hport;
        return 0;
    } else if (tlen == 1 && target[0] == '*') {
        if (p->method != HTTP_OPTIONS)
            return -1;
        memcpy(q->host, hhost, sizeof(q->host));
        q->port = hport;
        return 0;
    } else if (target_host(target, tlen, false, q->host, &q->port) < 0) {
        return -1;
    }
    /* absolute-form or authority-form: a Host header must name the same host */
    if (nhost && strcmp(hhost, q->host) != 0)
        return -1;
    return 0;
}

int gbx_sniff_http_head(const uint8_t *buf, size_t len, struct gbx_http_head *out)
{
    struct hparse h;
    struct req q;
    size_t used = 0;
    int r;

    memset(out, 0, sizeof(*out));
    if (len == 0)
        return GBX_SNIFF_MORE;
    hparse_init(&h);
    r = head_step(&h, (const char *)buf, len < GBX_SNIFF_HEAD_MAX ? len : GBX_SNIFF_HEAD_MAX,
                  &used);
    if (r == GBX_SNIFF_MORE && len >= GBX_SNIFF_HEAD_MAX)
        r = GBX_SNIFF_BAD;
    if (r == GBX_SNIFF_OK) {
        if (head_check(&h, &q) < 0 || q.connect || strlen(q.method) >= sizeof(out->method) ||
            q.target_len >= sizeof(out->path)) {
            r = GBX_SNIFF_BAD;
        } else {
            memcpy(out->method, q.method, strlen(q.method) + 1);
            memcpy(out->path, q.target, q.target_len);
            out->path[q.target_len] = '\0';
            memcpy(out->host, q.host, sizeof(out->host));
            out->host_port = q.port;
            out->head_len = used;
        }
    }
    hparse_release(&h);
    if (r != GBX_SNIFF_OK)
        memset(out, 0, sizeof(*out));
    return r;
}

/* ---- relay -------------------------------------------------------------------------------- */

enum relay_state {
    RELAY_HEAD,
    RELAY_BODY,
    RELAY_HOLD,
    RELAY_RAW,
    RELAY_BAD,
    RELAY_DENIED,
    RELAY_HEAD_ONLY
};

struct gbx_http_relay {
    struct hparse h;
    enum relay_state state;
    gbx_http_relay_head_fn on_head;
    void *arg;
    uint64_t requests;
    bool skip_lf; /* the next byte is the head's LF, left unconsumed by the pause */
    bool hold_upgrades;
    uint8_t *held; /* RELAY_HOLD: the head's LF, then what the client sent since */
    size_t held_len;
};

struct gbx_http_relay *gbx_http_relay_new(gbx_http_relay_head_fn on_head, void *arg)
{
    struct gbx_http_relay *r = gbx_xcalloc(1, sizeof(*r));
    hparse_init(&r->h);
    r->state = RELAY_HEAD;
    r->on_head = on_head;
    r->arg = arg;
    return r;
}

void gbx_http_relay_free(struct gbx_http_relay *r)
{
    if (r == NULL)
        return;
    hparse_release(&r->h);
    free(r->held);
    free(r);
}

uint64_t gbx_http_relay_requests(const struct gbx_http_relay *r)
{
    return r->requests;
}

int gbx_http_relay_is_raw(const struct gbx_http_relay *r)
{
    return r->state == RELAY_RAW;
}

void gbx_http_relay_hold_upgrades(struct gbx_http_relay *r)
{
    r->hold_upgrades = true;
}

int gbx_http_relay_upgrade_pending(const struct gbx_http_relay *r)
{
    return r->state == RELAY_HOLD;
}

static void out_add(struct evbuffer *out, const void *data, size_t len)
{
    if (len > 0 && evbuffer_add(out, data, len) != 0) {
        fprintf(stderr, "gloveboxd: out of memory in the egress relay\n");
        abort();
    }
}

static void out_str(struct evbuffer *out, const char *s)
{
    out_add(out, s, strlen(s));
}

static bool hdr_set_by(const char *name, size_t len, const struct gbx_http_header *add, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (name_is(name, len, add[i].name))
            return true;
    return false;
}

static int relay_emit_head(struct gbx_http_relay *r, const struct req *q,
                           const struct gbx_http_header *add, size_t nadd, bool head_only,
                           struct evbuffer *out)
{
    struct hparse *h = &r->h;
    char version[16];

    for (size_t i = 0; i < nadd; i++) {
        if (add[i].name == NULL || add[i].value == NULL ||
            !is_token(add[i].name, strlen(add[i].name)) ||
            !is_field_value(add[i].value, strlen(add[i].value)) ||
            strcasecmp(add[i].name, "content-length") == 0 ||
            strcasecmp(add[i].name, "transfer-encoding") == 0)
            return GBX_SNIFF_BAD;
    }
    snprintf(version, sizeof(version), " HTTP/1.%u\r\n", (unsigned)h->parser.http_minor);
    out_str(out, q->method);
    out_add(out, " ", 1);
    out_add(out, q->target, q->target_len);
    out_str(out, version);
    for (size_t i = 0; i < h->nhdrs; i++) {
        const struct hdr *hd = &h->hdrs[i];
        const char *name = h->text + hd->name;
        if (name_is(name, hd->name_len, "proxy-connection") ||
            name_is(name, hd->name_len, "proxy-authorization") ||
            hdr_set_by(name, hd->name_len, add, nadd))
            continue;
        if (head_only && (name_is(name, hd->name_len, "content-length") ||
                          name_is(name, hd->name_len, "transfer-encoding") ||
                          name_is(name, hd->name_len, "expect")))
            continue;
        out_add(out, name, hd->name_len);
        out_add(out, ": ", 2);
        out_add(out, h->text + hd->value, hd->value_len);
        out_add(out, "\r\n", 2);
    }
    for (size_t i = 0; i < nadd; i++) {
        out_str(out, add[i].name);
        out_add(out, ": ", 2);
        out_str(out, add[i].value);
        out_add(out, "\r\n", 2);
    }
    if (head_only)
        out_str(out, "Content-Length: 0\r\n");
    out_add(out, "\r\n", 2);
    return 0;
}

static void relay_enter_body(struct gbx_http_relay *r)
{
    r->skip_lf = true;
    r->h.phase = PHASE_BODY;
    r->h.cf = CF_SIZE0;
    r->h.msg_done = false;
    r->state = RELAY_BODY;
}

static int relay_head(struct gbx_http_relay *r, const uint8_t *data, size_t len, size_t *pos,
                      struct evbuffer *out)
{
    struct hparse *h = &r->h;
    const char *start = (const char *)data + *pos;
    size_t used = 0;
    struct req q;

    int rc = head_step(h, start, len - *pos, &used);
    if (rc == GBX_SNIFF_MORE) {
        *pos = len;
        return 0;
    }
    if (rc != GBX_SNIFF_OK || head_check(h, &q) < 0)
        return GBX_SNIFF_BAD;

    char *path = gbx_xstrndup(q.target, q.target_len);
    /* NUL-terminated copies of the headers for the callback, in one block */
    size_t text = 0;
    for (size_t i = 0; i < h->nhdrs; i++)
        text += h->hdrs[i].name_len + h->hdrs[i].value_len + 2;
    struct gbx_http_header *hv = gbx_xcalloc(h->nhdrs ? h->nhdrs : 1, sizeof(*hv));
    char *hb = gbx_xmalloc(text ? text : 1), *w = hb;
    for (size_t i = 0; i < h->nhdrs; i++) {
        const struct hdr *hd = &h->hdrs[i];
        hv[i].name = w;
        memcpy(w, h->text + hd->name, hd->name_len);
        w += hd->name_len;
        *w++ = '\0';
        hv[i].value = w;
        memcpy(w, h->text + hd->value, hd->value_len);
        w += hd->value_len;
        *w++ = '\0';
    }
    bool has_body = (h->parser.flags & F_CHUNKED) ||
                    ((h->parser.flags & F_CONTENTLENGTH) && h->parser.content_length > 0);
    struct gbx_http_req_info info = {.method = q.method,
                                     .path = path,
                                     .host = q.host,
                                     .port = q.port,
                                     .headers = hv,
                                     .nheaders = h->nhdrs,
                                     .has_body = has_body};
    const struct gbx_http_header *add = NULL;
    size_t nadd = 0;
    r->requests++;
    int verdict = r->on_head(r->arg, &info, &add, &nadd);
    free(path);
    free(hv);
    free(hb);
    if (verdict != 0 && verdict != 1)
        return GBX_HTTP_RELAY_DENIED;
    if (add == NULL)
        nadd = 0;
    if (relay_emit_head(r, &q, add, nadd, verdict == 1, out) < 0)
        return GBX_SNIFF_BAD;
    if (verdict == 1) {
        *pos = len;
        return GBX_HTTP_RELAY_HEAD_ONLY;
    }

    http_parser_pause(&h->parser, 0);
    if (q.upgrade && !r->hold_upgrades) {
        *pos += used; /* the rest is another protocol */
        r->state = RELAY_RAW;
        return 0;
    }
    *pos += used - 1; /* the parser has yet to consume the head's LF */
    if (q.upgrade) {
        r->held_len = 0;
        r->state = RELAY_HOLD; /* until the caller knows whether upstream switched */
        return 0;
    }
    relay_enter_body(r);
    return 0;
}

/* Keep what the client sends after an Upgrade or CONNECT head until the upstream's answer. */
static int relay_hold(struct gbx_http_relay *r, const uint8_t *data, size_t len)
{
    if (len > GBX_SNIFF_HEAD_MAX + 1 - r->held_len)
        return GBX_SNIFF_BAD;
    r->held = gbx_xrealloc(r->held, r->held_len + len);
    memcpy(r->held + r->held_len, data, len);
    r->held_len += len;
    return 0;
}

static int relay_body(struct gbx_http_relay *r, const uint8_t *data, size_t len, size_t *pos,
                      struct evbuffer *out)
{
    struct hparse *h = &r->h;
    const char *start = (const char *)data + *pos;
    size_t avail = len - *pos;
    size_t skip = r->skip_lf ? 1 : 0;

    r->skip_lf = false;
    h->msg_done = false;
    h->bad = NULL;
    h->scan_from = start + skip;
    size_t n = http_parser_execute(&h->parser, &hp_settings, start, avail);
    enum http_errno e = HTTP_PARSER_ERRNO(&h->parser);
    if (n > avail)
        return GBX_SNIFF_BAD;
    if (h->scan_from < start + n)
        chunk_scan(h, h->scan_from, start + n);
    const char *end = h->bad ? h->bad : start + n;
    if (end > start + skip)
        out_add(out, start + skip, (size_t)(end - (start + skip)));
    if (h->bad)
        return GBX_SNIFF_BAD;
    if (!h->msg_done) {
        if (e != HPE_OK || n != avail)
            return GBX_SNIFF_BAD;
        *pos = len;
        return 0;
    }
    if (e != HPE_PAUSED || h->cf != CF_SIZE0)
        return GBX_SNIFF_BAD;
    http_parser_pause(&h->parser, 0);
    hparse_head_reset(h);
    r->state = RELAY_HEAD;
    *pos += n;
    return 0;
}

int gbx_http_relay_feed(struct gbx_http_relay *r, const uint8_t *data, size_t len,
                        struct evbuffer *out)
{
    size_t pos = 0;

    while (pos < len) {
        int rc = 0;
        switch (r->state) {
        case RELAY_BAD:
            return GBX_SNIFF_BAD;
        case RELAY_DENIED:
            return GBX_HTTP_RELAY_DENIED;
        case RELAY_HEAD_ONLY:
            return GBX_HTTP_RELAY_HEAD_ONLY;
        case RELAY_RAW:
            out_add(out, data + pos, len - pos);
            return 0;
        case RELAY_HEAD:
            rc = relay_head(r, data, len, &pos, out);
            break;
        case RELAY_BODY:
            rc = relay_body(r, data, len, &pos, out);
            break;
        case RELAY_HOLD:
            rc = relay_hold(r, data + pos, len - pos);
            pos = len;
            break;
        }
        if (rc != 0) {
            r->state = rc == GBX_HTTP_RELAY_DENIED      ? RELAY_DENIED
                       : rc == GBX_HTTP_RELAY_HEAD_ONLY ? RELAY_HEAD_ONLY
                                                        : RELAY_BAD;
            return rc;
        }
    }
    if (r->state == RELAY_BAD)
        return GBX_SNIFF_BAD;
    if (r->state == RELAY_DENIED)
        return GBX_HTTP_RELAY_DENIED;
    if (r->state == RELAY_HEAD_ONLY)
        return GBX_HTTP_RELAY_HEAD_ONLY;
    return 0;
}

enum gbx_http_relay_phase gbx_http_relay_phase(const struct gbx_http_relay *r)
{
    switch (r->state) {
    case RELAY_HEAD:
        return r->h.head_bytes ? GBX_HTTP_RELAY_IN_HEAD : GBX_HTTP_RELAY_IDLE;
    case RELAY_BODY:
        return GBX_HTTP_RELAY_IN_BODY;
    default:
        return GBX_HTTP_RELAY_STOPPED;
    }
}

int gbx_http_relay_upgrade_done(struct gbx_http_relay *r, int switched, struct evbuffer *out)
{
    if (r->state != RELAY_HOLD)
        return r->state == RELAY_BAD         ? GBX_SNIFF_BAD
               : r->state == RELAY_DENIED    ? GBX_HTTP_RELAY_DENIED
               : r->state == RELAY_HEAD_ONLY ? GBX_HTTP_RELAY_HEAD_ONLY
                                             : 0;
    uint8_t *held = gbx_steal_ptr(&r->held);
    size_t len = r->held_len;
    int rc = 0;

    GBX_BUG_ON(held == NULL || len == 0);
    r->held_len = 0;
    if (switched) {
        out_add(out, held + 1, len - 1);
        r->state = RELAY_RAW;
    } else {
        relay_enter_body(r); /* http-parser ends the message as usual and goes on */
        rc = gbx_http_relay_feed(r, held, len, out);
    }
    free(held);
    return rc;
}
