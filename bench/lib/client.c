/* SPDX-License-Identifier: MIT */
/* What the daemon's benchmarks share: timing and percentiles, the result lines, and a libcurl
 * client on the admin socket (HTTP/1.1, one keep-alive connection). */
#include "client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/mem.h"

const char *bench_name = "bench";
int bench_label_width = 44;

/* ---- measurement helpers (as bench_api.c) ----------------------------------------------- */

double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* percentile p of v[0..n) in ms; sorts v */
double pct_ms(double *v, int n, double p)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), cmp);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i] / 1e3;
}

/* one result line; returns the p50 in ms */
double line(const char *name, double *v, int n, const char *note)
{
    double p50 = pct_ms(v, n, 0.5), p99 = pct_ms(v, n, 0.99);
    printf("  %-*s p50 %8.3f ms  p99 %8.3f ms  (n=%d)%s%s\n", bench_label_width, name, p50, p99, n,
           note ? "  " : "", note ? note : "");
    return p50;
}

void ratio(const char *what, double ours_ms, double peer_ms)
{
    printf("  %-*s %.2fx\n", bench_label_width, what, peer_ms > 0 ? ours_ms / peer_ms : 0);
}

void ratio_target(const char *what, double ours_ms, double peer_ms, double target)
{
    double r = peer_ms > 0 ? ours_ms / peer_ms : 0;
    printf("  %-*s %.2fx (target <= %.1fx: %s)\n", bench_label_width, what, r, target,
           r <= target ? "met" : "MISSED");
}

void target_ms(const char *what, double p50, double target)
{
    printf("  %-*s p50 %.3f ms vs target <= %.1f ms: %s\n", bench_label_width, what, p50, target,
           p50 <= target ? "met" : "MISSED");
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "%s: ", bench_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* ---- HTTP client over the admin socket ---------------------------------------------------- */

static size_t on_data(char *p, size_t sz, size_t nm, void *arg)
{
    struct client *c = arg;
    size_t n = sz * nm;
    if (c->len + n + 1 > c->cap) {
        c->cap = (c->len + n + 1) * 2;
        c->body = gbx_xrealloc(c->body, c->cap);
    }
    memcpy(c->body + c->len, p, n);
    c->len += n;
    c->body[c->len] = '\0';
    return n;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *arg)
{
    struct client *c = arg;
    size_t n = sz * nm;
    static const char name[] = "Glovebox-Replayed:";
    if (n > sizeof(name) - 1 && strncasecmp(p, name, sizeof(name) - 1) == 0) {
        const char *v = p + sizeof(name) - 1;
        while (*v == ' ')
            v++;
        c->replayed = strncmp(v, "true", 4) == 0;
    }
    return n;
}

void client_init(struct client *c, const char *sock)
{
    memset(c, 0, sizeof(*c));
    c->h = curl_easy_init();
    if (c->h == NULL)
        die("curl_easy_init failed");
    c->json_hdr = curl_slist_append(NULL, "Content-Type: application/json");
    c->json_hdr = curl_slist_append(c->json_hdr, "Expect:");
    curl_easy_setopt(c->h, CURLOPT_UNIX_SOCKET_PATH, sock);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c->h, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 120L);
}

void client_release(struct client *c)
{
    curl_easy_cleanup(c->h);
    curl_slist_free_all(c->json_hdr);
    free(c->body);
    memset(c, 0, sizeof(*c));
}

/* One request on the kept-alive connection; the reply body is in c->body, the status in
 * c->code. 0, or -1 when the transfer itself failed (c->errbuf says why). */
int call(struct client *c, const char *method, const char *path, const char *json)
{
    char url[1024];
    snprintf(url, sizeof(url), "http://glovebox%s", path);
    c->len = 0;
    if (c->body)
        c->body[0] = '\0';
    c->errbuf[0] = '\0';
    c->replayed = 0;
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    if (json) {
        curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, json);
        curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)strlen(json));
        curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->json_hdr);
    } else {
        curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, NULL);
    }
    curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, method);
    CURLcode rc = curl_easy_perform(c->h);
    c->code = 0;
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &c->code);
    if (rc != CURLE_OK) {
        if (c->errbuf[0] == '\0')
            snprintf(c->errbuf, sizeof(c->errbuf), "%s", curl_easy_strerror(rc));
        return -1;
    }
    return 0;
}

const char *what_failed(struct client *c)
{
    static __thread char msg[600]; /* bench_api calls it from several threads */
    if (c->errbuf[0])
        snprintf(msg, sizeof(msg), "transfer failed: %s", c->errbuf);
    else
        snprintf(msg, sizeof(msg), "HTTP %ld: %.500s", c->code, c->body ? c->body : "");
    return msg;
}
