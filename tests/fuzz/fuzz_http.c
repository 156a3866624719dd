/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the HTTP request head parser and the client-side relay
 * (src/egress/sniff.c).
 *
 * gbx_sniff_http_head: whatever the bytes, OK comes with NUL-terminated fields that fit, a
 * head_len within the input and the limit, and a lowercased host of host-name characters.
 *
 * The relay, which injects two headers into every request, is fed the input whole, one byte
 * at a time, and in pseudo-random pieces: the three runs give the same result, the same
 * requests and the same output. Depending on a hash of the input it holds upgrades, and the
 * "upstream" switches or refuses each one (bits of the same hash); refused ones are parsed on. The
 * output is then read back by http-parser as an upstream server would: it must never fail to parse,
 * every request it finds must carry exactly the relay's injected headers (never one the input
 * supplied, never a Proxy-* header), every header line must be a token, ": ", a value without CR,
 * LF or NUL, CRLF, and the upstream must find exactly as many requests as the relay passed to its
 * callback. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "egress/sniff.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char host_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789._-:";

static void check_head(const uint8_t *data, size_t size)
{
    struct gbx_http_head h;
    int r = gbx_sniff_http_head(data, size, &h);
    CHECK(r == GBX_SNIFF_OK || r == GBX_SNIFF_MORE || r == GBX_SNIFF_BAD);
    if (r != GBX_SNIFF_OK) {
        CHECK(h.method[0] == '\0' && h.path[0] == '\0' && h.host[0] == '\0');
        if (r == GBX_SNIFF_MORE)
            CHECK(size < GBX_SNIFF_HEAD_MAX);
        return;
    }
    CHECK(h.head_len >= 18 && h.head_len <= size && h.head_len <= GBX_SNIFF_HEAD_MAX);
    CHECK(data[h.head_len - 1] == '\n' && data[h.head_len - 2] == '\r');
    size_t ml = strnlen(h.method, sizeof(h.method)), pl = strnlen(h.path, sizeof(h.path)),
           hl = strnlen(h.host, sizeof(h.host));
    CHECK(ml > 0 && ml < sizeof(h.method) && pl > 0 && pl < sizeof(h.path) && hl < sizeof(h.host));
    CHECK(strcmp(h.method, "CONNECT") != 0);
    for (size_t i = 0; i < pl; i++)
        CHECK(h.path[i] > 0x20 && h.path[i] < 0x7f);
    CHECK(strspn(h.host, host_chars) == hl);
    if (hl == 0)
        CHECK(h.host_port == 0);
    /* the same bytes with anything after the head: the same head */
    struct gbx_http_head h2;
    CHECK(gbx_sniff_http_head(data, h.head_len, &h2) == GBX_SNIFF_OK);
    CHECK(strcmp(h.method, h2.method) == 0 && strcmp(h.path, h2.path) == 0 &&
          strcmp(h.host, h2.host) == 0 && h.host_port == h2.host_port && h.head_len == h2.head_len);
}

/* ---- relay ---- */

static const struct gbx_http_header inject[] = {
    {"Authorization", "Bearer fuzz-secret"},
    {"X-Gbx-Sandbox", "sb-1"},
};

struct cb {
    uint64_t heads;
    bool deny_third;
};

static int on_head(void *arg, const struct gbx_http_req_info *req,
                   const struct gbx_http_header **hdrs, size_t *nhdrs)
{
    struct cb *c = arg;
    CHECK(req->method[0] != '\0' && req->path[0] != '\0');
    CHECK(strspn(req->host, host_chars) == strlen(req->host));
    if (++c->heads == 3 && c->deny_third)
        return -1;
    *hdrs = inject;
    *nhdrs = 2;
    return 0;
}

struct run {
    bool hold;    /* gbx_http_relay_hold_upgrades */
    uint64_t dec; /* bit k % 64: whether the upstream switched on the k-th upgrade */
    int rc;
    uint64_t requests;
    int raw;
    size_t len;
    unsigned char *out;
};

/* Answer a pending upgrade the way res->dec says. */
static int relay_answer(struct gbx_http_relay *r, struct run *res, unsigned *k,
                        struct evbuffer *out)
{
    int rc = 0;
    while (rc == 0 && gbx_http_relay_upgrade_pending(r)) {
        rc = gbx_http_relay_upgrade_done(r, (int)((res->dec >> (*k % 64)) & 1), out);
        ++*k;
    }
    return rc;
}

/* step 0: whole; 1: byte by byte; else pieces from a generator seeded with step */
static void relay_run(const uint8_t *data, size_t size, uint64_t step, bool deny, struct run *res)
{
    struct cb c = {.deny_third = deny};
    struct gbx_http_relay *r = gbx_http_relay_new(on_head, &c);
    struct evbuffer *out = evbuffer_new();
    uint64_t x = step | 1;
    size_t i = 0;
    unsigned k = 0;

    if (res->hold)
        gbx_http_relay_hold_upgrades(r);
    res->rc = 0;
    while (i < size) {
        size_t n = size - i;
        if (step == 1) {
            n = 1;
        } else if (step > 1) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t want = (x & 3) == 0 ? (x >> 8) % 4096 : 1 + (x >> 8) % 24;
            n = want < n ? want : n;
        }
        int rc = gbx_http_relay_feed(r, data + i, n, out);
        i += n;
        if (rc == 0)
            rc = relay_answer(r, res, &k, out);
        if (rc != 0) {
            res->rc = rc;
            CHECK(gbx_http_relay_feed(r, (const uint8_t *)"x", 1, out) == rc);
            break;
        }
    }
    if (res->rc == 0)
        res->rc = relay_answer(r, res, &k, out);
    CHECK(res->rc == 0 || res->rc == GBX_SNIFF_BAD || res->rc == GBX_HTTP_RELAY_DENIED);
    CHECK(!gbx_http_relay_upgrade_pending(r));
    CHECK(c.heads == gbx_http_relay_requests(r));
    res->requests = c.heads;
    res->raw = gbx_http_relay_is_raw(r);
    res->len = evbuffer_get_length(out);
    res->out = malloc(res->len + 1);
    CHECK(res->out != NULL);
    evbuffer_remove(out, res->out, res->len);
    evbuffer_free(out);
    gbx_http_relay_free(r);
}

/* The upstream's view of the relay's output. */
struct up {
    const struct run *res;
    bool in_head;
    unsigned upgrades;
    bool stop; /* the upstream switched protocols */
    uint64_t heads;
    int nauth, nsandbox;
    bool auth_ok, sandbox_ok;
    bool field; /* the last callback was a header field */
    char name[64];
    size_t name_len;
    char value[64];
    size_t value_len;
    bool value_long;
};

static void up_header_done(struct up *u)
{
    if (u->name_len == 0)
        return;
    if (u->name_len == 13 && strncasecmp(u->name, "authorization", 13) == 0) {
        u->nauth++;
        u->auth_ok =
            !u->value_long && u->value_len == 18 && !memcmp(u->value, "Bearer fuzz-secret", 18);
    } else if (u->name_len == 13 && strncasecmp(u->name, "x-gbx-sandbox", 13) == 0) {
        u->nsandbox++;
        u->sandbox_ok = !u->value_long && u->value_len == 4 && !memcmp(u->value, "sb-1", 4);
    } else if ((u->name_len == 16 && strncasecmp(u->name, "proxy-connection", 16) == 0) ||
               (u->name_len == 19 && strncasecmp(u->name, "proxy-authorization", 19) == 0)) {
        __builtin_trap();
    }
    u->name_len = 0;
    u->value_len = 0;
    u->value_long = false;
}

static int up_begin(http_parser *p)
{
    struct up *u = p->data;
    u->nauth = u->nsandbox = 0;
    u->auth_ok = u->sandbox_ok = false;
    u->name_len = u->value_len = 0;
    u->value_long = false;
    u->field = false;
    return 0;
}

static int up_field(http_parser *p, const char *at, size_t len)
{
    struct up *u = p->data;
    if (!u->field)
        up_header_done(u);
    u->field = true;
    if (u->name_len + len < sizeof(u->name)) {
        memcpy(u->name + u->name_len, at, len);
        u->name_len += len;
    } else {
        u->name_len = sizeof(u->name); /* longer than any name checked */
    }
    return 0;
}

static int up_value(http_parser *p, const char *at, size_t len)
{
    struct up *u = p->data;
    u->field = false;
    for (size_t i = 0; i < len; i++)
        CHECK(at[i] != '\r' && at[i] != '\n' && at[i] != '\0');
    if (u->value_len + len < sizeof(u->value)) {
        memcpy(u->value + u->value_len, at, len);
        u->value_len += len;
    } else {
        u->value_long = true;
    }
    return 0;
}

static int up_headers_complete(http_parser *p)
{
    struct up *u = p->data;
    up_header_done(u);
    u->in_head = false;
    u->heads++;
    CHECK(u->nauth == 1 && u->auth_ok && u->nsandbox == 1 && u->sandbox_ok);
    if (p->upgrade) {
        unsigned k = u->upgrades++;
        if (!u->res->hold || ((u->res->dec >> (k % 64)) & 1))
            u->stop = true;
    }
    return 0;
}

/* Every line of every head in out is well-formed, as the relay rebuilt it. */
static void check_head_lines(const unsigned char *s, size_t len)
{
    /* request line: no CR, LF or NUL before CRLF */
    size_t i = 0;
    while (i < len && s[i] != '\r') {
        CHECK(s[i] != '\n' && s[i] != '\0');
        i++;
    }
    if (i + 1 >= len)
        return;
    CHECK(s[i + 1] == '\n');
    i += 2;
    for (;;) {
        if (i + 1 >= len)
            return;
        if (s[i] == '\r') {
            CHECK(s[i + 1] == '\n');
            return; /* the end of the head */
        }
        size_t n = 0;
        while (i < len && s[i] != ':') {
            CHECK(strchr("!#$%&'*+-.^_`|~", s[i]) != NULL || (s[i] >= '0' && s[i] <= '9') ||
                  ((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z'));
            i++, n++;
        }
        if (i >= len)
            return;
        CHECK(n > 0);
        i++;
        if (i >= len)
            return;
        CHECK(s[i] == ' ');
        i++;
        while (i < len && s[i] != '\r') {
            CHECK(s[i] != '\n' && s[i] != '\0');
            i++;
        }
        if (i + 1 >= len)
            return;
        CHECK(s[i + 1] == '\n');
        i += 2;
    }
}

static int up_url(http_parser *p, const char *at, size_t len)
{
    struct up *u = p->data;
    if (!u->in_head) {
        /* the rebuilt request line is METHOD SP target SP version CRLF */
        const char *base = (const char *)u->res->out;
        const char *m = http_method_str((enum http_method)p->method);
        size_t ml = strlen(m);
        CHECK(at - base >= (ptrdiff_t)(ml + 1));
        const char *s = at - ml - 1;
        CHECK(memcmp(s, m, ml) == 0 && s[ml] == ' ');
        u->in_head = true;
        check_head_lines((const unsigned char *)s, u->res->len - (size_t)(s - base));
    }
    (void)len;
    return 0;
}

static void check_upstream(const struct run *res)
{
    static http_parser_settings st;
    struct up u = {.res = res};
    http_parser p;

    http_parser_settings_init(&st);
    st.on_message_begin = up_begin;
    st.on_url = up_url;
    st.on_header_field = up_field;
    st.on_header_value = up_value;
    st.on_headers_complete = up_headers_complete;
    http_parser_init(&p, HTTP_REQUEST);
    p.data = &u;
    /* after an Upgrade or CONNECT that the upstream refused, http-parser returns early and is
     * called again for the rest; after one that it accepted the rest is raw by design */
    size_t pos = 0;
    while (pos < res->len) {
        size_t n = http_parser_execute(&p, &st, (const char *)res->out + pos, res->len - pos);
        if (u.stop)
            break;
        CHECK(HTTP_PARSER_ERRNO(&p) == HPE_OK);
        CHECK(n > 0 && n <= res->len - pos);
        pos += n;
    }
    if (u.stop)
        CHECK(res->raw || res->rc != 0);
    CHECK(u.heads == res->requests - (res->rc == GBX_HTTP_RELAY_DENIED));
}

static uint64_t fnv(const uint8_t *d, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 1099511628211ull;
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_head(data, size);

    uint64_t hash = fnv(data, size);
    bool deny = size > 0 && (data[0] & 1);
    bool hold = (hash & 4) != 0;
    uint64_t dec = hash >> 3;
    struct run whole = {.hold = hold, .dec = dec}, bytes = whole, pieces = whole, denied = whole;
    relay_run(data, size, 0, deny, &whole);
    relay_run(data, size, 1, deny, &bytes);
    relay_run(data, size, hash | 2, deny, &pieces);
    const struct run *runs[] = {&bytes, &pieces};
    for (size_t i = 0; i < 2; i++) {
        CHECK(runs[i]->rc == whole.rc && runs[i]->requests == whole.requests &&
              runs[i]->raw == whole.raw);
        CHECK(runs[i]->len == whole.len && memcmp(runs[i]->out, whole.out, whole.len) == 0);
    }
    check_upstream(&whole);

    /* never denying: at least as far */
    relay_run(data, size, 0, false, &denied);
    if (deny && whole.rc == GBX_HTTP_RELAY_DENIED)
        CHECK(denied.len >= whole.len && memcmp(denied.out, whole.out, whole.len) == 0);
    free(denied.out);
    free(whole.out);
    free(bytes.out);
    free(pieces.out);
    return 0;
}
