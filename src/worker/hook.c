/* SPDX-License-Identifier: MIT */
/* Webhook mode I/O: dlopen'd libcrypto HMAC and an http-parser request reader (hook.h). */
#include "worker/hook.h"

#include <errno.h>
#include <http_parser.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/dl.h"
#include "base/mem.h"

#define HEADERS_MAX (64u << 10)

static struct {
    const void *(*sha256)(void);
    unsigned char *(*hmac)(const void *md, const void *key, int klen, const unsigned char *d,
                           size_t n, unsigned char *out, unsigned int *outlen);
    int (*memcmp)(const void *a, const void *b, size_t n);
} C;

static int crypto_hmac(const uint8_t *key, size_t klen, const uint8_t *msg, size_t mlen,
                       uint8_t out[32])
{
    unsigned int n = 0;
    if (klen > 1024 || C.hmac(C.sha256(), key, (int)klen, msg, mlen, out, &n) == NULL || n != 32)
        return -1;
    return 0;
}

static int crypto_memcmp(const void *a, const void *b, size_t n)
{
    return C.memcmp(a, b, n);
}

int gbx_worker_crypto_load(struct gbx_worker_crypto *c, struct gbx_err **err)
{
    if (C.hmac == NULL) {
        const struct gbx_dl_sym syms[] = {
            {(void **)&C.sha256, "EVP_sha256"},
            {(void **)&C.memcmp, "CRYPTO_memcmp"},
            {(void **)&C.hmac, "HMAC"},
        };
        char why[256];
        if (gbx_dl_load("libcrypto.so.3", syms, GBX_ARRAY_SIZE(syms), why, sizeof(why)) < 0)
            return gbx_err_set(err, ENOENT, GBX_ERR_UNAVAILABLE,
                               "cannot load libcrypto for webhook signatures (install the "
                               "libssl3 package): %s",
                               why);
    }
    c->hmac = crypto_hmac;
    c->memcmp = crypto_memcmp;
    return 0;
}

/* ---- one request ---- */

struct rd {
    struct gbx_worker_hook_req *r;
    char *field, *value; /* the header being read */
    size_t flen, vlen, hdr_total;
    size_t body_cap;
    int in_value, done, status;
};

static int rd_flush(struct rd *d)
{
    if (d->field && gbx_worker_hook_header(&d->r->h, d->field, d->flen, d->value ? d->value : "",
                                           d->vlen) < 0) {
        d->status = 400;
        return -1;
    }
    free(d->field);
    free(d->value);
    d->field = d->value = NULL;
    d->flen = d->vlen = 0;
    d->in_value = 0;
    return 0;
}

static int rd_append(struct rd *d, char **s, size_t *n, const char *at, size_t len)
{
    d->hdr_total += len;
    if (d->hdr_total > HEADERS_MAX) {
        d->status = 413;
        return -1;
    }
    *s = gbx_xrealloc(*s, *n + len + 1);
    memcpy(*s + *n, at, len);
    *n += len;
    (*s)[*n] = '\0';
    return 0;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
    struct rd *d = p->data;
    if (d->in_value && rd_flush(d) < 0)
        return -1;
    return rd_append(d, &d->field, &d->flen, at, len);
}

static int on_value(http_parser *p, const char *at, size_t len)
{
    struct rd *d = p->data;
    d->in_value = 1;
    return rd_append(d, &d->value, &d->vlen, at, len);
}

static int on_headers_complete(http_parser *p)
{
    struct rd *d = p->data;
    if (rd_flush(d) < 0)
        return -1;
    if (p->content_length != ULLONG_MAX && p->content_length > GBX_WORKER_HOOK_BODY_MAX) {
        d->status = 413;
        return -1;
    }
    d->r->post = p->method == HTTP_POST;
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct rd *d = p->data;
    struct gbx_worker_hook_req *r = d->r;
    if (r->len + len > GBX_WORKER_HOOK_BODY_MAX) {
        d->status = 413;
        return -1;
    }
    if (r->len + len + 1 > d->body_cap) {
        d->body_cap = (r->len + len + 1) * 2;
        r->body = gbx_xrealloc(r->body, d->body_cap);
    }
    memcpy(r->body + r->len, at, len);
    r->len += len;
    r->body[r->len] = '\0';
    return 0;
}

static int on_complete(http_parser *p)
{
    struct rd *d = p->data;
    d->done = 1;
    http_parser_pause(p, 1); /* one request per connection */
    return 0;
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int gbx_worker_hook_read(int fd, long timeout_ms, struct gbx_worker_hook_req *r)
{
    memset(r, 0, sizeof(*r));
    r->body = gbx_xstrdup("");
    http_parser_settings s;
    http_parser_settings_init(&s);
    s.on_header_field = on_field;
    s.on_header_value = on_value;
    s.on_headers_complete = on_headers_complete;
    s.on_body = on_body;
    s.on_message_complete = on_complete;
    http_parser p;
    http_parser_init(&p, HTTP_REQUEST);
    struct rd d = {.r = r, .body_cap = 1};
    p.data = &d;
    long long deadline = mono_ms() + timeout_ms;
    char buf[16384];
    int rc = 0;
    while (!d.done) {
        long long left = deadline - mono_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
            rc = 408;
            break;
        }
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0) {
            rc = 408;
            break;
        }
        size_t used = http_parser_execute(&p, &s, buf, (size_t)n);
        if (d.done)
            break;
        if (d.status) {
            rc = d.status;
            break;
        }
        if (HTTP_PARSER_ERRNO(&p) != HPE_OK || used != (size_t)n) {
            rc = 400;
            break;
        }
        if (n == 0) { /* EOF before the request was whole */
            rc = 408;
            break;
        }
    }
    free(d.field);
    free(d.value);
    return rc;
}

void gbx_worker_hook_req_release(struct gbx_worker_hook_req *r)
{
    gbx_worker_hook_release(&r->h);
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

void gbx_worker_hook_answer(int fd, int status, const char *text)
{
    const char *reason = status == 200   ? "OK"
                         : status == 204 ? "No Content"
                         : status == 400 ? "Bad Request"
                         : status == 401 ? "Unauthorized"
                         : status == 405 ? "Method Not Allowed"
                         : status == 408 ? "Request Timeout"
                         : status == 413 ? "Payload Too Large"
                                         : "Error";
    size_t tl = status == 204 || text == NULL ? 0 : strlen(text);
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, tl);
    if (n > 0 && write(fd, head, (size_t)n) < 0)
        return;
    if (tl && write(fd, text, tl) < 0)
        return;
}
