/* SPDX-License-Identifier: MIT */
/* What the daemon's benchmarks share (bench/lib/client.c). */
#ifndef GBX_BENCH_LIB_CLIENT_H
#define GBX_BENCH_LIB_CLIENT_H

#include <curl/curl.h>
#include <stddef.h>

extern const char *bench_name; /* prefixes die()'s message */
extern int bench_label_width;  /* of the labels of line(), ratio(), target_ms() */

double now_us(void);
/* percentile p of v[0..n) in ms; sorts v */
double pct_ms(double *v, int n, double p);
/* one result line; returns the p50 in ms */
double line(const char *name, double *v, int n, const char *note);
void ratio(const char *what, double ours_ms, double peer_ms);
/* the same with the verdict against a ratio target */
void ratio_target(const char *what, double ours_ms, double peer_ms, double target);
void target_ms(const char *what, double p50, double target);
__attribute__((format(printf, 1, 2), noreturn)) void die(const char *fmt, ...);

struct client {
    CURL *h;
    struct curl_slist *json_hdr;
    char *body;
    size_t len, cap;
    long code;
    int replayed; /* the reply had Glovebox-Replayed: true */
    char errbuf[CURL_ERROR_SIZE];
};
void client_init(struct client *c, const char *sock);
void client_release(struct client *c);
/* One request on the kept-alive connection; the reply body is in c->body, the status in
 * c->code. 0, or -1 when the transfer itself failed (c->errbuf says why). */
int call(struct client *c, const char *method, const char *path, const char *json);
const char *what_failed(struct client *c);

#endif
