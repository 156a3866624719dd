/* SPDX-License-Identifier: MIT */
/* HTTPS to the Managed Agents control plane with a dlopen'd libcurl (http.h). */
#include "worker/http.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "base/curl_dl.h"
#include "base/mem.h"
#include "base/parse.h"
#include "worker/worker.h"

#define REPLY_MAX (64u << 20)

static const struct gbx_curl *L;

int gbx_worker_http_load(struct gbx_err **err)
{
    char why[256];
    if (L == NULL && (L = gbx_curl_load(why, sizeof(why))) == NULL)
        return gbx_err_set(err, ENOENT, GBX_ERR_UNAVAILABLE,
                           "cannot load libcurl (install the libcurl4 package): %s", why);
    return 0;
}

struct xfer {
    const struct gbx_worker_http_req *r;
    CURL *curl;
    char *buf;
    size_t len, cap;
    long status;
    int opened, too_big;
};

static void xfer_open(struct xfer *x)
{
    if (x->opened)
        return;
    x->opened = 1;
    L->easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->r->on_open)
        x->r->on_open(x->r->arg, x->status);
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    struct xfer *x = arg;
    size_t len = size * n;
    long code = 0;
    /* the blank line that ends the final (not a 1xx) header block */
    if ((len == 2 && p[0] == '\r') || (len == 1 && p[0] == '\n')) {
        L->easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200)
            xfer_open(x);
    }
    return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct xfer *x = arg;
    size_t len = size * n;
    xfer_open(x);
    if (x->r->on_data && x->status / 100 == 2) {
        if (x->r->abort && x->r->abort(x->r->arg))
            return 0;
        x->r->on_data(x->r->arg, p, len);
        return len;
    }
    if (x->len + len > REPLY_MAX) {
        x->too_big = 1;
        return 0;
    }
    if (x->len + len + 1 > x->cap) {
        x->cap = (x->len + len + 1) * 2;
        x->buf = gbx_xrealloc(x->buf, x->cap);
    }
    memcpy(x->buf + x->len, p, len);
    x->len += len;
    x->buf[x->len] = '\0';
    return len;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    const struct xfer *x = arg;
    return x->r->abort && x->r->abort(x->r->arg) ? 1 : 0;
}

int gbx_worker_http(const struct gbx_worker_http_req *r, json_t **reply, struct gbx_err **err)
{
    *reply = NULL;
    if (gbx_worker_http_load(err) < 0)
        return -1;
    CURL *curl = L->easy_init();
    GBX_BUG_ON(curl == NULL);
    struct xfer x = {.r = r, .curl = curl};
    struct curl_slist *h = NULL;
    gbx_autofree char *auth = gbx_asprintf("Authorization: Bearer %s", r->token);
    gbx_autofree char *ver = gbx_asprintf("anthropic-version: %s", r->version);
    gbx_autofree char *wid =
        r->worker_id ? gbx_asprintf("Anthropic-Worker-ID: %s", r->worker_id) : NULL;
    gbx_autofree char *text = r->body ? json_dumps(r->body, JSON_COMPACT) : NULL;
    h = L->slist_append(h, auth);
    h = L->slist_append(h, "anthropic-beta: " GBX_WORKER_BETA);
    h = L->slist_append(h, ver);
    h = L->slist_append(h, r->on_data ? "Accept: text/event-stream" : "Accept: application/json");
    h = L->slist_append(h, "Expect:");
    if (wid)
        h = L->slist_append(h, wid);
    if (text)
        h = L->slist_append(h, "Content-Type: application/json");
    L->easy_setopt(curl, CURLOPT_URL, r->url);
    L->easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    L->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    L->easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    L->easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    L->easy_setopt(curl, CURLOPT_USERAGENT, "glovebox-worker/" GBX_VERSION);
    L->easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    L->easy_setopt(curl, CURLOPT_HEADERDATA, &x);
    L->easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    L->easy_setopt(curl, CURLOPT_WRITEDATA, &x);
    if (r->timeout_ms > 0)
        L->easy_setopt(curl, CURLOPT_TIMEOUT_MS, r->timeout_ms);
    if (r->abort) {
        L->easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        L->easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        L->easy_setopt(curl, CURLOPT_XFERINFODATA, &x);
    }
    if (strcmp(r->method, "POST") == 0) {
        L->easy_setopt(curl, CURLOPT_POST, 1L);
        L->easy_setopt(curl, CURLOPT_POSTFIELDSIZE, text ? (long)strlen(text) : 0L);
        L->easy_setopt(curl, CURLOPT_POSTFIELDS, text ? text : "");
    } else if (strcmp(r->method, "GET") != 0) {
        L->easy_setopt(curl, CURLOPT_CUSTOMREQUEST, r->method);
    }
    CURLcode rc = L->easy_perform(curl);
    int status = -1;
    if (x.too_big) {
        gbx_err_set(err, EMSGSIZE, GBX_ERR_LIMIT, "%s: answer larger than %u MiB", r->method,
                    REPLY_MAX >> 20);
    } else if (rc != CURLE_OK && !(r->on_data && rc == CURLE_WRITE_ERROR && x.opened)) {
        gbx_err_set(err, 0, GBX_ERR_UNAVAILABLE, "%s", L->easy_strerror(rc));
    } else {
        long code = 0;
        L->easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
        status = (int)code;
        if (x.len)
            *reply = json_loadb(x.buf, x.len, 0, NULL);
    }
    L->slist_free_all(h);
    L->easy_cleanup(curl);
    free(x.buf);
    return status;
}

char *gbx_worker_http_escape(const char *s)
{
    return gbx_url_escape(s, NULL);
}
