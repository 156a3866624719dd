/* SPDX-License-Identifier: MIT */
/* A create flood (issue 14 #10): N creates (default 1000) sent at once on the admin socket,
 * each on its own connection (libcurl multi), while a prober on a connection of its own times
 * GET /healthz every 10 ms; first the daemon idle for a second, then during the flood, then
 * the N deletes, again all at once. The daemon's event loop must keep answering: the target
 * is /healthz p99 <= 10 ms during the flood, and the ratio to idle is printed beside it.
 *
 *   bench_flood SOCK [--creates N] [--body JSON]
 *
 * Prints the flood's wall time and creates per second, the statuses, /healthz p50/p99 idle and
 * during the flood with the ratio, and the verdict. Exit 1 when a create failed for another
 * reason than a limit the daemon named (429). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/client.h"

#define MAX_SAMPLES 100000

static const char *sock;
static atomic_int stop;
static double idle_v[MAX_SAMPLES], flood_v[MAX_SAMPLES];
static atomic_int n_idle, n_flood;
static atomic_int flooding;

static void *prober(void *arg)
{
    (void)arg;
    struct client c;
    client_init(&c, sock);
    while (!atomic_load(&stop)) {
        double t0 = now_us();
        if (call(&c, "GET", "/healthz", NULL) < 0 || c.code != 200)
            die("GET /healthz: %s", what_failed(&c));
        double d = now_us() - t0;
        if (atomic_load(&flooding)) {
            int i = atomic_fetch_add(&n_flood, 1);
            if (i < MAX_SAMPLES)
                flood_v[i] = d;
        } else {
            int i = atomic_fetch_add(&n_idle, 1);
            if (i < MAX_SAMPLES)
                idle_v[i] = d;
        }
        usleep(10000);
    }
    client_release(&c);
    return NULL;
}

struct xfer {
    CURL *h;
    char *body;
    size_t len;
    long code;
};

static size_t on_data(char *p, size_t sz, size_t n, void *arg)
{
    struct xfer *x = arg;
    char *b = realloc(x->body, x->len + sz * n + 1);
    if (b == NULL)
        return 0;
    memcpy(b + x->len, p, sz * n);
    x->len += sz * n;
    b[x->len] = '\0';
    x->body = b;
    return sz * n;
}

/* n requests at once, each on its own connection; statuses into x[i].code. Seconds taken. */
static double all_at_once(struct xfer *x, int n, const char *method, char **paths, const char *json)
{
    CURLM *m = curl_multi_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    for (int i = 0; i < n; i++) {
        x[i].h = curl_easy_init();
        if (x[i].h == NULL)
            die("curl_easy_init");
        char url[512];
        snprintf(url, sizeof(url), "http://glovebox%s", paths[i]);
        curl_easy_setopt(x[i].h, CURLOPT_UNIX_SOCKET_PATH, sock);
        curl_easy_setopt(x[i].h, CURLOPT_URL, url);
        curl_easy_setopt(x[i].h, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(x[i].h, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(x[i].h, CURLOPT_TIMEOUT, 300L);
        curl_easy_setopt(x[i].h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(x[i].h, CURLOPT_WRITEDATA, &x[i]);
        if (json) {
            curl_easy_setopt(x[i].h, CURLOPT_HTTPHEADER, hdr);
            curl_easy_setopt(x[i].h, CURLOPT_POSTFIELDS, json);
        }
        curl_multi_add_handle(m, x[i].h);
    }
    double t0 = now_us();
    int running = 1;
    while (running) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            die("curl_multi_perform");
        if (running && curl_multi_poll(m, NULL, 0, 100, NULL) != CURLM_OK)
            die("curl_multi_poll");
    }
    double secs = (now_us() - t0) / 1e6;
    CURLMsg *msg;
    int left, shown = 0;
    while ((msg = curl_multi_info_read(m, &left)) != NULL)
        if (msg->msg == CURLMSG_DONE && msg->data.result != CURLE_OK && shown++ < 3)
            fprintf(stderr, "bench_flood: %s %s: %s\n", method, paths[0],
                    curl_easy_strerror(msg->data.result));
    for (int i = 0; i < n; i++) {
        curl_easy_getinfo(x[i].h, CURLINFO_RESPONSE_CODE, &x[i].code);
        curl_multi_remove_handle(m, x[i].h);
        curl_easy_cleanup(x[i].h);
    }
    curl_slist_free_all(hdr);
    curl_multi_cleanup(m);
    return secs;
}

/* "201 x998, 429 x2" */
static void statuses(const struct xfer *x, int n, char *out, size_t outsz)
{
    long seen[16];
    int count[16], k = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < k && seen[j] != x[i].code)
            j++;
        if (j == k && k < 16) {
            seen[k] = x[i].code;
            count[k++] = 0;
        }
        if (j < k)
            count[j]++;
    }
    size_t off = 0;
    out[0] = '\0';
    for (int j = 0; j < k && off < outsz; j++)
        off +=
            (size_t)snprintf(out + off, outsz - off, "%s%ld x%d", j ? ", " : "", seen[j], count[j]);
}

int main(int argc, char **argv)
{
    bench_name = "bench_flood";
    if (argc < 2)
        die("usage: bench_flood SOCK [--creates N] [--body JSON]");
    sock = argv[1];
    int n = 1000;
    const char *body = "{\"timeout\":600}";
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--creates") == 0)
            n = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--body") == 0)
            body = argv[i + 1];
        else
            die("unknown option '%s'", argv[i]);
    }
    if (n < 1 || n > 100000)
        die("--creates: 1 to 100000");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_t pt;
    pthread_create(&pt, NULL, prober, NULL);
    sleep(1);
    struct xfer *x = calloc((size_t)n, sizeof(*x));
    char **paths = calloc((size_t)n, sizeof(char *));
    if (x == NULL || paths == NULL)
        die("out of memory");
    static char create_path[] = "/v1/sandboxes";
    for (int i = 0; i < n; i++)
        paths[i] = create_path;
    atomic_store(&flooding, 1);
    double secs = all_at_once(x, n, "POST", paths, body);
    atomic_store(&flooding, 0);
    char st[256];
    statuses(x, n, st, sizeof(st));
    int made = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        json_t *j = x[i].code == 201 ? json_loads(x[i].body ? x[i].body : "", 0, NULL) : NULL;
        const char *id = json_string_value(json_object_get(j, "id"));
        if (id) {
            paths[made] = NULL;
            if (asprintf(&paths[made], "/v1/sandboxes/%s", id) < 0)
                die("out of memory");
            made++;
        } else if (x[i].code != 429) {
            bad++;
        }
        json_decref(j);
        free(x[i].body);
        x[i].body = NULL;
        x[i].len = 0;
    }
    /* a few idle samples after the flood too, before the deletes */
    usleep(300000);
    atomic_store(&stop, 1);
    pthread_join(pt, NULL);
    double dsecs = all_at_once(x, made, "DELETE", paths, NULL);
    char dst[256];
    statuses(x, made, dst, sizeof(dst));
    for (int i = 0; i < made; i++) {
        free(paths[i]);
        free(x[i].body);
    }
    int ni = atomic_load(&n_idle), nf = atomic_load(&n_flood);
    ni = ni < MAX_SAMPLES ? ni : MAX_SAMPLES;
    nf = nf < MAX_SAMPLES ? nf : MAX_SAMPLES;
    printf("  %d creates at once: %.2f s (%.0f/s), statuses %s\n", n, secs,
           secs > 0 ? made / secs : 0, st);
    printf("  %d deletes at once: %.2f s, statuses %s\n", made, dsecs, dst);
    line("/healthz, idle", idle_v, ni, NULL);
    line("/healthz, during the create flood", flood_v, nf, NULL);
    double p99i = pct_ms(idle_v, ni, 0.99), p99f = pct_ms(flood_v, nf, 0.99);
    ratio("/healthz p99, flood / idle", p99f, p99i);
    printf("  %-*s p99 %.3f ms vs target <= 10.0 ms: %s\n", bench_label_width,
           "/healthz during the flood", p99f, p99f <= 10.0 ? "met" : "MISSED");
    free(x);
    free(paths);
    curl_global_cleanup();
    return bad ? 1 : 0;
}
