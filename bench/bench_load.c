/* SPDX-License-Identifier: MIT */
/* Load, bounded: N clients (default 20) each loop create -> exec -> upload -> download ->
 * delete for S seconds (default 60) on the admin socket, a session harness loops
 * create -> execute (bash) x3 -> delete beside them, and a prober times GET /healthz every
 * 20 ms, first with the daemon idle, then under the load. (bench/run.sh runs an E2B SDK
 * client, bench/load_e2b.mjs, at the same time.) Afterwards, once every sandbox is gone, the
 * daemon's RSS and open descriptors are compared with those before.
 *
 *   bench_load SOCK DAEMON_PID [--clients N] [--seconds S] [--idle-seconds S] [--reuse 1]
 *              [--probe-nice N] [--probe-group DIR] [--probe-slice US]
 *
 * --reuse 1: each client makes one sandbox and then only execs, uploads and downloads in it
 * (the same calls without a create and a delete per cycle). --probe-nice N: the prober's thread
 * at nice N (a monitor beside the load, not one of its threads); --probe-group DIR: in that
 * cgroup v1 cpu group (made and weighted by the caller); --probe-slice US: with a time slice
 * of US microseconds (Linux 6.12's EEVDF slices: its wakeups preempt a thread in the middle of
 * a default slice, as the daemon's loop thread's do).
 *
 * Prints per call p50/p99 and counts, the throughput, /healthz p99 idle and under load with
 * the ratio (target <= 2x), RSS and fds before/after, and the errors by status. Exit 1 on
 * errors other than 429 (a limit said so), 0 otherwise. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/sched.h"
#include "lib/client.h"

#define MAX_CLIENTS 64
#define MAX_SAMPLES (1 << 20)

enum op {
    OP_CREATE,
    OP_EXEC,
    OP_PUT,
    OP_GET,
    OP_DELETE,
    OP_SES_CREATE,
    OP_SES_EXEC,
    OP_SES_DELETE,
    OP_HEALTH_IDLE,
    OP_HEALTH_LOAD,
    NOPS
};
static const char *const op_names[NOPS] = {"create",
                                           "exec (sh -c 'echo hi', wait)",
                                           "upload 4 KiB",
                                           "download 4 KiB",
                                           "delete",
                                           "session create",
                                           "session execute bash",
                                           "session delete",
                                           "/healthz, idle",
                                           "/healthz, under load"};

struct samples {
    pthread_mutex_t mu;
    double *v;
    int n;
};
static struct samples S[NOPS];
static atomic_int errors_limit, errors_other;
static atomic_long cycles;
static atomic_int stop;
static int probe_nice;          /* --probe-nice: the prober's thread at this nice value */
static const char *probe_group; /* --probe-group: a cgroup v1 cpu group the prober joins */
static int probe_slice_us;      /* --probe-slice: the prober's time slice (EEVDF), us */
static int reuse; /* --reuse: each client keeps one sandbox (exec, upload, download only) */
static const char *sock;
static char first_error[512];
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;

static void add(enum op o, double us)
{
    pthread_mutex_lock(&S[o].mu);
    if (S[o].n < MAX_SAMPLES)
        S[o].v[S[o].n++] = us;
    pthread_mutex_unlock(&S[o].mu);
}

/* One timed call; 0 when it answered want, else counted (and the first one kept). */
static int timed(struct client *c, enum op o, const char *method, const char *path,
                 const char *body, long want)
{
    double t0 = now_us();
    int r = call(c, method, path, body);
    double us = now_us() - t0;
    if (r == 0 && c->code == want) {
        add(o, us);
        return 0;
    }
    if (r == 0 && c->code == 429) {
        atomic_fetch_add(&errors_limit, 1);
        return -1;
    }
    atomic_fetch_add(&errors_other, 1);
    pthread_mutex_lock(&err_mu);
    if (first_error[0] == '\0')
        snprintf(first_error, sizeof(first_error), "%s %s: %s", method, path, what_failed(c));
    pthread_mutex_unlock(&err_mu);
    return -1;
}

/* "id" of a JSON reply, into out (no JSON library needed for one string field) */
static int reply_id(const struct client *c, char *out, size_t outsz)
{
    const char *p = c->body ? strstr(c->body, "\"id\":\"") : NULL;
    if (p == NULL)
        return -1;
    p += 6;
    size_t n = strcspn(p, "\"");
    if (n == 0 || n >= outsz)
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

static void *worker(void *arg)
{
    (void)arg;
    struct client c;
    client_init(&c, sock);
    char data[4097];
    memset(data, 'x', 4096);
    data[4096] = '\0';
    char id[64], path[256];
    int have = 0;
    while (!atomic_load(&stop)) {
        if (!have && (timed(&c, OP_CREATE, "POST", "/v1/sandboxes", "{}", 201) < 0 ||
                      reply_id(&c, id, sizeof(id)) < 0)) {
            usleep(10000);
            continue;
        }
        have = reuse;
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
        (void)timed(&c, OP_EXEC, "POST", path,
                    "{\"cmd\":[\"sh\",\"-c\",\"echo hi\"],\"wait\":true}", 200);
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=/tmp/f", id);
        (void)timed(&c, OP_PUT, "PUT", path, data, 201);
        (void)timed(&c, OP_GET, "GET", path, NULL, 200);
        snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
        if (reuse)
            atomic_fetch_add(&cycles, 1);
        else if (timed(&c, OP_DELETE, "DELETE", path, NULL, 204) == 0)
            atomic_fetch_add(&cycles, 1);
    }
    if (have) {
        snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
        (void)timed(&c, OP_DELETE, "DELETE", path, NULL, 204);
    }
    client_release(&c);
    return NULL;
}

static void *session_harness(void *arg)
{
    (void)arg;
    struct client c;
    client_init(&c, sock);
    char id[64], path[256], body[256];
    long n = 0;
    while (!atomic_load(&stop)) {
        if (timed(&c, OP_SES_CREATE, "POST", "/v1/sessions", "{}", 201) < 0 ||
            reply_id(&c, id, sizeof(id)) < 0) {
            usleep(10000);
            continue;
        }
        snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);
        for (int i = 0; i < 3; i++) {
            snprintf(body, sizeof(body),
                     "{\"tool_use_id\":\"toolu_%ld\",\"name\":\"bash\",\"input\":"
                     "{\"command\":\"echo call %d\"}}",
                     n++, i);
            (void)timed(&c, OP_SES_EXEC, "POST", path, body, 200);
        }
        snprintf(path, sizeof(path), "/v1/sessions/%s", id);
        (void)timed(&c, OP_SES_DELETE, "DELETE", path, NULL, 204);
    }
    client_release(&c);
    return NULL;
}

static atomic_int probe_op = OP_HEALTH_IDLE;

static void *prober(void *arg)
{
    (void)arg;
    if (probe_nice != 0 && setpriority(PRIO_PROCESS, (id_t)gettid(), probe_nice) < 0)
        fprintf(stderr, "bench_load: cannot renice the prober: %s\n", strerror(errno));
    int r = probe_slice_us > 0 ? gbx_sched_set_slice((uint64_t)probe_slice_us * 1000) : 0;
    if (r < 0)
        fprintf(stderr, "bench_load: cannot set the prober's time slice: %s\n", strerror(-r));
    if (probe_group) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/tasks", probe_group);
        FILE *f = fopen(path, "w");
        if (f == NULL || fputs("0", f) < 0 || fclose(f) != 0) /* 0: this thread */
            die("cannot move the prober into '%s': %s", probe_group, strerror(errno));
    }
    struct client c;
    client_init(&c, sock);
    while (!atomic_load(&stop)) {
        (void)timed(&c, (enum op)atomic_load(&probe_op), "GET", "/healthz", NULL, 200);
        usleep(20000);
    }
    client_release(&c);
    return NULL;
}

static long rss_kib(int pid)
{
    char p[64], line[256];
    snprintf(p, sizeof(p), "/proc/%d/status", pid);
    FILE *f = fopen(p, "r");
    long v = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            v = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static int fds(int pid)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/fd", pid);
    DIR *d = opendir(p);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static int live_sandboxes(struct client *c)
{
    if (call(c, "GET", "/v1/sandboxes", NULL) < 0 || c->code != 200)
        return -1;
    int n = 0;
    for (const char *p = c->body; (p = strstr(p, "\"id\":\"")) != NULL; p++)
        n++;
    return n;
}

int main(int argc, char **argv)
{
    bench_name = "bench_load";
    bench_label_width = 30;
    if (argc < 3)
        die("usage: bench_load SOCK DAEMON_PID [--clients N] [--seconds S] [--idle-seconds S]");
    sock = argv[1];
    int pid = atoi(argv[2]), clients = 20, seconds = 60, idle = 5;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--clients") == 0)
            clients = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--idle-seconds") == 0)
            idle = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--probe-group") == 0)
            probe_group = argv[i + 1];
        else if (strcmp(argv[i], "--probe-nice") == 0)
            probe_nice = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--probe-slice") == 0)
            probe_slice_us = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--reuse") == 0)
            reuse = atoi(argv[i + 1]);
    }
    if (clients < 1 || clients > MAX_CLIENTS || seconds < 1 || seconds > 3600 || idle < 1)
        die("--clients 1..%d, --seconds 1..3600, --idle-seconds >= 1", MAX_CLIENTS);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    for (int o = 0; o < NOPS; o++) {
        pthread_mutex_init(&S[o].mu, NULL);
        S[o].v = calloc(MAX_SAMPLES, sizeof(double));
        if (S[o].v == NULL)
            die("out of memory");
    }
    struct client c;
    client_init(&c, sock);
    /* a first create and delete: the template exists, the caches are warm */
    if (call(&c, "POST", "/v1/sandboxes", "{}") < 0 || c.code != 201)
        die("warm-up create: %s", what_failed(&c));
    char id[64], path[256];
    if (reply_id(&c, id, sizeof(id)) == 0) {
        snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
        (void)call(&c, "DELETE", path, NULL);
    }
    sleep(1);
    long rss0 = rss_kib(pid);
    int fd0 = fds(pid);

    pthread_t pt;
    pthread_create(&pt, NULL, prober, NULL);
    sleep((unsigned)idle);
    atomic_store(&probe_op, OP_HEALTH_LOAD);
    pthread_t w[MAX_CLIENTS + 1];
    double t0 = now_us();
    for (int i = 0; i < clients; i++)
        pthread_create(&w[i], NULL, worker, NULL);
    pthread_create(&w[clients], NULL, session_harness, NULL);
    sleep((unsigned)seconds);
    atomic_store(&stop, 1);
    for (int i = 0; i <= clients; i++)
        pthread_join(w[i], NULL);
    double secs = (now_us() - t0) / 1e6;
    pthread_join(pt, NULL);
    long rss_peak = rss_kib(pid);

    /* everything the load made is gone (deletes answered 204); wait for the store's writes */
    int left = -1;
    for (int i = 0; i < 100 && (left = live_sandboxes(&c)) != 0; i++)
        usleep(100000);
    sleep(2);
    long rss1 = rss_kib(pid);
    int fd1 = fds(pid);
    client_release(&c);

    printf("== load: %d clients x (create, exec, upload, download, delete) + a session harness, "
           "%.0f s\n",
           clients, secs);
    for (int o = 0; o < NOPS; o++)
        if (S[o].n)
            line(op_names[o], S[o].v, S[o].n, NULL);
    printf("  %-*s %.1f cycles/s (%ld cycles)\n", bench_label_width, "throughput",
           (double)atomic_load(&cycles) / secs, atomic_load(&cycles));
    double hi = pct_ms(S[OP_HEALTH_IDLE].v, S[OP_HEALTH_IDLE].n, 0.99);
    double hl = pct_ms(S[OP_HEALTH_LOAD].v, S[OP_HEALTH_LOAD].n, 0.99);
    printf("  /healthz p99 under load vs idle   %.3f ms vs %.3f ms\n", hl, hi);
    ratio_target("/healthz p99, load / idle", hl, hi, 2.0);
    printf("  %-*s %ld KiB before, %ld KiB at the end of the load, %ld KiB after (%+ld)\n",
           bench_label_width, "daemon RSS", rss0, rss_peak, rss1, rss1 - rss0);
    printf("  %-*s %d before, %d after (%+d)\n", bench_label_width, "daemon open fds", fd0, fd1,
           fd1 - fd0);
    printf("  %-*s %d left\n", bench_label_width, "sandboxes after the load", left);
    printf("  %-*s %d (429, a limit), %d other%s%s\n", bench_label_width, "errors",
           atomic_load(&errors_limit), atomic_load(&errors_other),
           first_error[0] ? "; first: " : "", first_error);
    return atomic_load(&errors_other) == 0 && left == 0 ? 0 : 1;
}
