/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the daemon's HTTP gate (src/http/gate.c): untrusted client bytes go
 * through the http-parser relay (src/egress/sniff.c) the way the gate drives it, and evhttp
 * reads what comes out.
 *
 * The callback sees every head's headers NUL-terminated (a token, then a value without CR, LF
 * or NUL) and decides by a hash of the input which request goes on as its head alone (what
 * the gate does for a request without a credential, and for every Upgrade or CONNECT). Fed whole,
 * byte by byte and in pseudo-random pieces, the input gives the same result and the same output.
 * The output is then parsed by http-parser as evhttp would: it never fails to parse; it holds
 * exactly the heads the callback passed; and after a head-only verdict the last request there has
 * no body (not chunked, Content-Length 0), says "Connection: close", and nothing follows it: not a
 * byte of the client's body reaches evhttp. */
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

static const struct gbx_http_header close_hdr[] = {{"Connection", "close"}};

struct cb {
    uint64_t verdicts; /* bit k: the k-th head goes alone */
    uint64_t heads;
    bool head_only;
};

static bool is_token(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", c)))
            return false;
    }
    return true;
}

static int on_head(void *arg, const struct gbx_http_req_info *req,
                   const struct gbx_http_header **hdrs, size_t *nhdrs)
{
    struct cb *c = arg;
    CHECK(req->method[0] != '\0' && req->path[0] != '\0');
    CHECK(req->nheaders == 0 || req->headers != NULL);
    for (size_t i = 0; i < req->nheaders; i++) {
        CHECK(is_token(req->headers[i].name));
        CHECK(strpbrk(req->headers[i].value, "\r\n") == NULL);
    }
    bool alone = (c->verdicts >> (c->heads % 64)) & 1;
    /* as the gate: an upgrade (or CONNECT) always goes alone, so nothing is ever passed raw */
    alone |= strcmp(req->method, "CONNECT") == 0;
    for (size_t i = 0; i < req->nheaders; i++)
        alone |= strcasecmp(req->headers[i].name, "Upgrade") == 0;
    c->heads++;
    if (!alone)
        return 0;
    c->head_only = true;
    *hdrs = close_hdr;
    *nhdrs = 1;
    return 1;
}

struct run {
    int rc;
    uint64_t heads;
    bool head_only;
    size_t len;
    unsigned char *out;
};

/* step 0: whole; 1: byte by byte; else pieces from a generator seeded with step */
static void relay_run(const uint8_t *data, size_t size, uint64_t step, uint64_t verdicts,
                      struct run *res)
{
    struct cb c = {.verdicts = verdicts};
    struct gbx_http_relay *r = gbx_http_relay_new(on_head, &c);
    struct evbuffer *out = evbuffer_new();
    uint64_t x = step | 1;
    size_t i = 0;

    CHECK(out != NULL);
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
        enum gbx_http_relay_phase before = gbx_http_relay_phase(r);
        int rc = gbx_http_relay_feed(r, data + i, n, out);
        i += n;
        if (rc != 0) {
            res->rc = rc;
            CHECK(gbx_http_relay_phase(r) == GBX_HTTP_RELAY_STOPPED);
            size_t had = evbuffer_get_length(out);
            CHECK(gbx_http_relay_feed(r, (const uint8_t *)"x", 1, out) == rc);
            CHECK(evbuffer_get_length(out) == had);
            break;
        }
        CHECK(before != GBX_HTTP_RELAY_STOPPED);
    }
    CHECK(res->rc == 0 || res->rc == GBX_SNIFF_BAD || res->rc == GBX_HTTP_RELAY_HEAD_ONLY);
    CHECK((res->rc == GBX_HTTP_RELAY_HEAD_ONLY) == c.head_only);
    CHECK(c.heads == gbx_http_relay_requests(r));
    res->heads = c.heads;
    res->head_only = c.head_only;
    res->len = evbuffer_get_length(out);
    res->out = malloc(res->len + 1);
    CHECK(res->out != NULL);
    evbuffer_remove(out, res->out, res->len);
    evbuffer_free(out);
    gbx_http_relay_free(r);
}

/* evhttp's view of the relay's output. */
struct up {
    uint64_t heads, done;
    bool field;
    char name[32];
    size_t name_len;
    char value[16];
    size_t value_len;
    bool conn_close; /* of the current head */
    bool last_close, last_body;
};

static void up_header_done(struct up *u)
{
    if (u->name_len == 10 && strncasecmp(u->name, "connection", 10) == 0 && u->value_len == 5 &&
        strncasecmp(u->value, "close", 5) == 0)
        u->conn_close = true;
    u->name_len = u->value_len = 0;
}

static int up_begin(http_parser *p)
{
    struct up *u = p->data;
    u->conn_close = false;
    u->field = false;
    u->name_len = u->value_len = 0;
    return 0;
}

static int up_field(http_parser *p, const char *at, size_t len)
{
    struct up *u = p->data;
    if (!u->field)
        up_header_done(u);
    u->field = true;
    size_t n = len < sizeof(u->name) - u->name_len ? len : sizeof(u->name) - u->name_len;
    memcpy(u->name + u->name_len, at, n);
    u->name_len += n;
    return 0;
}

static int up_value(http_parser *p, const char *at, size_t len)
{
    struct up *u = p->data;
    u->field = false;
    size_t n = len < sizeof(u->value) - u->value_len ? len : sizeof(u->value) - u->value_len;
    memcpy(u->value + u->value_len, at, n);
    u->value_len += n;
    return 0;
}

static int up_headers_complete(http_parser *p)
{
    struct up *u = p->data;
    up_header_done(u);
    u->heads++;
    u->last_close = u->conn_close;
    u->last_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENTLENGTH) && p->content_length);
    return 0;
}

static int up_complete(http_parser *p)
{
    struct up *u = p->data;
    u->done++;
    return 0;
}

static const http_parser_settings up_settings = {
    .on_message_begin = up_begin,
    .on_header_field = up_field,
    .on_header_value = up_value,
    .on_headers_complete = up_headers_complete,
    .on_message_complete = up_complete,
};

static void upstream_check(const struct run *res)
{
    struct up u = {0};
    http_parser p;
    http_parser_init(&p, HTTP_REQUEST);
    p.data = &u;
    size_t n = http_parser_execute(&p, &up_settings, (const char *)res->out, res->len);
    CHECK(HTTP_PARSER_ERRNO(&p) == HPE_OK && n == res->len);
    CHECK(u.heads == res->heads);
    if (res->head_only) {
        /* the last head is the head-only one, complete, bodiless, and the end of it all */
        CHECK(u.done == u.heads && u.last_close && !u.last_body);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    uint64_t verdicts = (h & 1) ? 0 : h; /* half the inputs: never alone */
    struct run a, b, c;
    relay_run(data, size, 0, verdicts, &a);
    relay_run(data, size, 1, verdicts, &b);
    relay_run(data, size, h | 2, verdicts, &c);
    CHECK(a.rc == b.rc && a.rc == c.rc);
    CHECK(a.heads == b.heads && a.heads == c.heads);
    CHECK(a.len == b.len && a.len == c.len);
    CHECK(memcmp(a.out, b.out, a.len) == 0 && memcmp(a.out, c.out, a.len) == 0);
    if (a.rc != GBX_SNIFF_BAD)
        upstream_check(&a);
    free(a.out);
    free(b.out);
    free(c.out);
    return 0;
}
