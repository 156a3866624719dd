/* SPDX-License-Identifier: MIT */
/* Daemon-level benchmarks: a libcurl client on gloveboxd's admin socket (HTTP/1.1, one
 * keep-alive connection per client), each measurement beside a peer timed in the same run:
 *
 *   cold       POST /v1/sandboxes -> 201 (delete not timed)   vs  the library's create->ready
 *              (gbx_sandbox_create + agent HELLO) in this process, interleaved
 *   pooled     the same against a daemon started with --pool N, creates spaced so the pool
 *              refills, and a burst that empties it; same peer
 *   exec       POST .../exec {"cmd":["true"]} to the end of the stream   vs  fork+exec+wait
 *              of /bin/true on the host, interleaved
 *   roundtrip  create + exec true + delete   vs  the bwrap line of bench/run.sh, interleaved
 *   rate       create+delete loop for some seconds, one client, then two clients in parallel
 *   idle       N live idle sandboxes: daemon RSS, MemAvailable drop per sandbox, the sum of
 *              their cgroups' memory (GET /metrics); then delete all and recheck MemAvailable
 *
 * Usage: bench_api --socket PATH [--pid DAEMON_PID] [--runs N] [--idle N] [--rate-secs S]
 *                  [--pool N] [--bwrap 'CMD ARGS...'] TEST[=N]...
 * where N after a test overrides --runs (or --idle, --rate-secs) for that test.
 * Library peers use $GLOVEBOX_STATE_DIR and $GLOVEBOX_RUNTIME_DIR: give them the daemon's
 * dirs so both draw uid slots from the same lock file. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/client.h"
#include "base/mem.h"
#include "lib/client.h"
#include "sandbox/backend.h"

/* POST /v1/sandboxes {}: the new id (malloc'd) or NULL */
static char *api_create(struct client *c)
{
    if (call(c, "POST", "/v1/sandboxes", "{}") < 0 || c->code != 201)
        return NULL;
    json_t *j = json_loads(c->body, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "id"));
    char *out = id ? gbx_xstrdup(id) : NULL;
    json_decref(j);
    return out;
}

static int api_delete(struct client *c, const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    return call(c, "DELETE", path, NULL) < 0 || c->code != 204 ? -1 : 0;
}

/* exec true to the end of the stream: 0 when the last event is {"type":"exit","exit_code":0} */
static int api_exec_true(struct client *c, const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
    if (call(c, "POST", path, "{\"cmd\":[\"true\"]}") < 0 || c->code != 200)
        return -1;
    while (c->len > 0 && c->body[c->len - 1] == '\n')
        c->body[--c->len] = '\0';
    char *last = strrchr(c->body, '\n');
    json_t *j = json_loads(last ? last + 1 : c->body, 0, NULL);
    int ok = j && strcmp(json_string_value(json_object_get(j, "type")) ?: "", "exit") == 0 &&
             json_integer_value(json_object_get(j, "exit_code")) == 0 &&
             json_object_get(j, "exit_code") != NULL;
    json_decref(j);
    return ok ? 0 : -1;
}

/* ---- peers ------------------------------------------------------------------------------ */

static struct gbx_runtime rt;
static int rt_ready;

/* the library's create->ready, as the daemon does it (control socket on), in this process */
static double lib_create_us(int i)
{
    struct gbx_err *err = NULL;
    if (!rt_ready) {
        if (gbx_runtime_init(&rt, NULL, &err) < 0)
            die("library runtime: %s", err ? err->msg : "failed");
        rt_ready = 1;
    }
    char id[40];
    snprintf(id, sizeof(id), "bench-lib-%d-%d", (int)getpid(), i);
    struct gbx_sandbox_spec spec = {.id = id, .ctl_socket = 1};
    struct gbx_sandbox *sb;
    struct gbx_agent *ag;
    double t0 = now_us();
    if (gbx_sandbox_create(&rt, &spec, &sb, &err) < 0)
        die("library create: %s", err ? err->msg : "failed");
    if (gbx_agent_open(gbx_steal_fd(&sb->conn_fd), &ag, &err) < 0)
        die("library hello: %s", err ? err->msg : "failed");
    double t = now_us() - t0;
    gbx_agent_free(ag);
    (void)!gbx_sandbox_destroy(sb, NULL);
    return t;
}

/* fork + exec argv + wait; the exit status in *status */
static double spawn_us(char *const *argv, int *status)
{
    double t0 = now_us();
    pid_t p = fork();
    if (p == 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR)
        ;
    double t = now_us() - t0;
    *status = st;
    return t;
}

/* ---- daemon and host memory ---------------------------------------------------------------- */

static long status_kb(int pid, const char *key)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(buf, sizeof(buf), f))
        if (strncmp(buf, key, kl) == 0 && buf[kl] == ':')
            v = strtol(buf + kl + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static long meminfo_kb(const char *key)
{
    char buf[256];
    FILE *f = fopen("/proc/meminfo", "r");
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(buf, sizeof(buf), f))
        if (strncmp(buf, key, kl) == 0 && buf[kl] == ':')
            v = strtol(buf + kl + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

/* GET /metrics: the sum of every sample of metric `name` (any labels), and their count */
static double metric_sum(struct client *c, const char *name, int *count)
{
    *count = 0;
    if (call(c, "GET", "/metrics", NULL) < 0 || c->code != 200)
        return -1;
    double sum = 0;
    size_t nl = strlen(name);
    for (char *p = c->body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, nl) != 0 || (p[nl] != '{' && p[nl] != ' '))
            continue;
        char *sp = strchr(p, ' ');
        char *eol = strchr(p, '\n');
        if (p[nl] == '{') { /* the value follows the closing brace */
            char *rb = strchr(p, '}');
            sp = rb ? strchr(rb, ' ') : NULL;
        }
        if (sp == NULL || (eol && sp > eol))
            continue;
        sum += strtod(sp + 1, NULL);
        (*count)++;
    }
    return sum;
}

/* ---- the measurements -------------------------------------------------------------------- */

struct opts {
    const char *sock;
    int pid;
    int runs;
    int idle;
    int rate_secs;
    int pool;
    char **bwrap; /* argv, NULL-terminated, or NULL */
};

static void bench_http_floor(struct client *c, int n)
{
    double *a = gbx_xcalloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        if (call(c, "GET", "/healthz", NULL) < 0 || c->code != 200)
            die("GET /healthz: %s", what_failed(c));
        a[i] = now_us() - t0;
    }
    line("GET /healthz (HTTP floor)", a, n, "[one keep-alive connection]");
    free(a);
}

static void bench_cold(struct client *c, int n)
{
    printf("== API create->ready, cold (POST /v1/sandboxes -> 201; delete not timed)\n");
    double *a = gbx_xcalloc((size_t)n, sizeof(double));
    double *b = gbx_xcalloc((size_t)n, sizeof(double));
    for (int i = 0; i < 5; i++) { /* warm up */
        char *id = api_create(c);
        if (id == NULL || api_delete(c, id) < 0)
            die("warm-up create/delete: %s", what_failed(c));
        free(id);
        b[0] = lib_create_us(-1 - i);
    }
    bench_http_floor(c, n);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        char *id = api_create(c);
        a[i] = now_us() - t0;
        if (id == NULL)
            die("create #%d: %s", i + 1, what_failed(c));
        if (api_delete(c, id) < 0)
            die("delete '%s': %s", id, what_failed(c));
        free(id);
        b[i] = lib_create_us(i);
    }
    double *a2 = gbx_xcalloc((size_t)n, sizeof(double));
    memcpy(a2, a, (size_t)n * sizeof(double));
    double p50 = pct_ms(a2, n, 0.5), q50 = pct_ms(b, n, 0.5);
    line("API create->ready", a, n, NULL);
    line("peer: library create->ready", b, n, "[gbx_sandbox_create + HELLO, in-process]");
    ratio("API / library", p50, q50);
    target_ms("API create->ready", p50, 3.0);
    free(a);
    free(a2);
    free(b);
}

/* GET /metrics: the value of one exact sample ("name" or "name{labels}"), or -1 */
static double metric_value(struct client *c, const char *sample)
{
    if (call(c, "GET", "/metrics", NULL) < 0 || c->code != 200)
        return -1;
    size_t n = strlen(sample);
    for (char *p = c->body; p && *p;) {
        if (strncmp(p, sample, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return -1;
}

#define POOLED_SAMPLE "glovebox_sandboxes{state=\"pooled\"}"
#define HIT_SAMPLE "glovebox_pool_takes_total{result=\"hit\"}"

/* wait (up to 5 s) until the daemon's pool holds `target` sandboxes; 0 or -1 */
static int pool_wait_full(struct client *c, int target)
{
    for (int i = 0; i < 5000; i++) {
        if (metric_value(c, POOLED_SAMPLE) >= target)
            return 0;
        usleep(1000);
    }
    return -1;
}

static void bench_pooled(struct client *c, const struct opts *o)
{
    int n = o->runs;
    printf("== API create->ready, pooled (daemon --pool %d; delete not timed)\n", o->pool);
    if (metric_value(c, POOLED_SAMPLE) < 0 || metric_value(c, HIT_SAMPLE) < 0) {
        printf("  skipped: /metrics has no %s or %s\n", POOLED_SAMPLE, HIT_SAMPLE);
        return;
    }
    double *a = gbx_xcalloc((size_t)n, sizeof(double));
    double *miss = gbx_xcalloc((size_t)n, sizeof(double));
    double *b = gbx_xcalloc((size_t)n, sizeof(double));
    int nhit = 0, nmiss = 0, not_full = 0;
    /* spaced: wait for a full pool, one timed create, its delete, a full pool again, a
     * library create */
    for (int i = 0; i < n; i++) {
        if (pool_wait_full(c, o->pool) < 0)
            not_full++;
        double hits0 = metric_value(c, HIT_SAMPLE);
        double t0 = now_us();
        char *id = api_create(c);
        double t = now_us() - t0;
        if (id == NULL)
            die("create #%d: %s", i + 1, what_failed(c));
        if (metric_value(c, HIT_SAMPLE) > hits0)
            a[nhit++] = t;
        else
            miss[nmiss++] = t;
        if (api_delete(c, id) < 0)
            die("delete '%s': %s", id, what_failed(c));
        free(id);
        (void)!pool_wait_full(c, o->pool); /* the refill must not compete with the peer */
        b[i] = lib_create_us(i);
    }
    double p50 = nhit ? pct_ms(a, nhit, 0.5) : 0, q50 = pct_ms(b, n, 0.5);
    line("API create, pool hit", a, nhit, "[pool full before each create]");
    if (nmiss)
        line("API create, pool miss", miss, nmiss, "[the pool had none to give]");
    else
        printf("  %-28s none of %d (pool never ran dry)\n", "pool misses", n);
    if (not_full)
        printf("  %-28s %d times the pool was not full after 5 s\n", "pool refill slow", not_full);
    line("peer: library create->ready", b, n, "[cold, in-process]");
    ratio("pool hit / library cold", p50, q50);
    if (nhit)
        target_ms("API create, pool hit", p50, 1.0);

    /* burst: 3 * pool creates back to back, kept: the pool runs dry after about `pool` */
    int m = 3 * (o->pool > 0 ? o->pool : 8);
    char **ids = gbx_xcalloc((size_t)m, sizeof(char *));
    double *t = gbx_xcalloc((size_t)m, sizeof(double));
    (void)!pool_wait_full(c, o->pool);
    double hits0 = metric_value(c, HIT_SAMPLE);
    double miss0 = metric_value(c, "glovebox_pool_takes_total{result=\"miss\"}");
    for (int i = 0; i < m; i++) {
        double t0 = now_us();
        ids[i] = api_create(c);
        t[i] = (now_us() - t0) / 1e3;
        if (ids[i] == NULL)
            die("burst create: %s", what_failed(c));
    }
    double hits1 = metric_value(c, HIT_SAMPLE);
    double miss1 = metric_value(c, "glovebox_pool_takes_total{result=\"miss\"}");
    printf("  burst of %d creates back to back from a full pool (%.0f hits, %.0f misses), ms "
           "each:",
           m, hits1 - hits0, miss1 - miss0);
    for (int i = 0; i < m; i++)
        printf("%s%.2f", i % 8 ? " " : "\n    ", t[i]);
    printf("\n");
    for (int i = 0; i < m; i++) {
        if (api_delete(c, ids[i]) < 0)
            die("delete '%s': %s", ids[i], what_failed(c));
        free(ids[i]);
    }
    free(ids);
    free(t);
    free(a);
    free(miss);
    free(b);
}

static void bench_exec(struct client *c, int n)
{
    printf("== API exec round trip (POST exec {\"cmd\":[\"true\"]} to the end of the stream)\n");
    char *id = api_create(c);
    if (id == NULL)
        die("create: %s", what_failed(c));
    double *a = gbx_xcalloc((size_t)n, sizeof(double));
    double *b = gbx_xcalloc((size_t)n, sizeof(double));
    char true_path[] = "/bin/true";
    char *tru[] = {true_path, NULL};
    for (int i = 0; i < 10; i++)
        if (api_exec_true(c, id) < 0)
            die("exec true: %s", what_failed(c));
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        if (api_exec_true(c, id) < 0)
            die("exec true in '%s': %s", id, what_failed(c));
        a[i] = now_us() - t0;
        int st;
        b[i] = spawn_us(tru, &st);
    }
    double *a2 = gbx_xcalloc((size_t)n, sizeof(double));
    memcpy(a2, a, (size_t)n * sizeof(double));
    double p50 = pct_ms(a2, n, 0.5), q50 = pct_ms(b, n, 0.5);
    line("API exec true", a, n, NULL);
    line("peer: fork+exec true+wait", b, n, "[on the host]");
    ratio("API exec / host fork+exec", p50, q50);
    target_ms("API exec round trip", p50, 1.0);
    if (api_delete(c, id) < 0)
        die("delete '%s': %s", id, what_failed(c));
    free(id);
    free(a);
    free(a2);
    free(b);
}

static void bench_roundtrip(struct client *c, const struct opts *o)
{
    int n = o->runs;
    printf("== create + exec true + delete via the API vs bwrap true, interleaved\n");
    int st = 0;
    if (o->bwrap == NULL) {
        printf("  skipped: no --bwrap command given\n");
        return;
    }
    (void)spawn_us(o->bwrap, &st);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("  skipped: the bwrap peer does not run here (status %d)\n", st);
        return;
    }
    double *a = gbx_xcalloc((size_t)n, sizeof(double));
    double *b = gbx_xcalloc((size_t)n, sizeof(double));
    /* the three parts of each round trip, to say where its time goes */
    double *pc = gbx_xcalloc((size_t)n, sizeof(double));
    double *pe = gbx_xcalloc((size_t)n, sizeof(double));
    double *pd = gbx_xcalloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        char *id = api_create(c);
        if (id == NULL)
            die("create: %s", what_failed(c));
        double t1 = now_us();
        if (api_exec_true(c, id) < 0)
            die("exec true in '%s': %s", id, what_failed(c));
        double t2 = now_us();
        if (api_delete(c, id) < 0)
            die("delete '%s': %s", id, what_failed(c));
        a[i] = now_us() - t0;
        pc[i] = t1 - t0;
        pe[i] = t2 - t1;
        pd[i] = a[i] - (t2 - t0);
        free(id);
        b[i] = spawn_us(o->bwrap, &st);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            die("bwrap peer failed (status %d)", st);
    }
    double *a2 = gbx_xcalloc((size_t)n, sizeof(double));
    memcpy(a2, a, (size_t)n * sizeof(double));
    double p50 = pct_ms(a2, n, 0.5), q50 = pct_ms(b, n, 0.5);
    line("API create+exec+delete", a, n, NULL);
    line("  of which create", pc, n, NULL);
    line("  of which exec true", pe, n, NULL);
    line("  of which delete", pd, n, NULL);
    line("peer: bwrap true", b, n, "[fork+exec of run.sh's bwrap line + wait]");
    ratio_target("API round trip / bwrap", p50, q50, 1.0);
    free(pc);
    free(pe);
    free(pd);
    free(a);
    free(a2);
    free(b);
}

struct rate_arg {
    const char *sock;
    double until_us;
    long done;
    const char *error; /* static storage or NULL */
    char errbuf[600];
};

static void *rate_loop(void *arg)
{
    struct rate_arg *r = arg;
    struct client c;
    client_init(&c, r->sock);
    while (now_us() < r->until_us) {
        char *id = api_create(&c);
        if (id == NULL || api_delete(&c, id) < 0) {
            snprintf(r->errbuf, sizeof(r->errbuf), "%s%s",
                     id ? "delete: " : "create: ", what_failed(&c));
            r->error = r->errbuf;
            free(id);
            break;
        }
        free(id);
        r->done++;
    }
    client_release(&c);
    return NULL;
}

static void bench_rate(const struct opts *o)
{
    printf("== sustained creates: create+delete loop, %d s per line\n", o->rate_secs);
    for (int nclients = 1; nclients <= 2; nclients++) {
        struct rate_arg r[2];
        pthread_t th[2];
        memset(r, 0, sizeof(r));
        double t0 = now_us();
        for (int i = 0; i < nclients; i++) {
            r[i].sock = o->sock;
            r[i].until_us = t0 + o->rate_secs * 1e6;
            if (pthread_create(&th[i], NULL, rate_loop, &r[i]) != 0)
                die("pthread_create failed");
        }
        long total = 0;
        for (int i = 0; i < nclients; i++) {
            pthread_join(th[i], NULL);
            total += r[i].done;
            if (r[i].error)
                printf("  client %d stopped early: %s\n", i, r[i].error);
        }
        double secs = (now_us() - t0) / 1e6;
        printf("  %d client%s %-19s %7.1f creates/s (%ld create+delete pairs in %.1f s)\n",
               nclients, nclients > 1 ? "s" : " ", "", (double)total / secs, total, secs);
    }
}

static void bench_idle(struct client *c, const struct opts *o)
{
    int n = o->idle;
    printf("== %d live idle sandboxes (created through the API, kept)\n", n);
    if (o->pid <= 0) {
        printf("  skipped: no --pid for the daemon\n");
        return;
    }
    char **ids = gbx_xcalloc((size_t)n, sizeof(char *));
    sync();
    sleep(1);
    long avail0 = meminfo_kb("MemAvailable"), free0 = meminfo_kb("MemFree");
    long slab0 = meminfo_kb("Slab"), unrecl0 = meminfo_kb("SUnreclaim"),
         shmem0 = meminfo_kb("Shmem");
    long rss0 = status_kb(o->pid, "VmRSS");
    int got = 0;
    double t0 = now_us();
    for (; got < n; got++) {
        ids[got] = api_create(c);
        if (ids[got] == NULL) {
            printf("  FAILED at sandbox #%d (%d live): %s\n", got + 1, got, what_failed(c));
            break;
        }
    }
    double create_s = (now_us() - t0) / 1e6;
    sleep(1);
    long avail1 = meminfo_kb("MemAvailable"), free1 = meminfo_kb("MemFree");
    long slab1 = meminfo_kb("Slab"), unrecl1 = meminfo_kb("SUnreclaim"),
         shmem1 = meminfo_kb("Shmem");
    long rss1 = status_kb(o->pid, "VmRSS");
    int cnt = 0;
    double cg_bytes = metric_sum(c, "glovebox_sandbox_memory_bytes", &cnt);
    double running = metric_value(c, "glovebox_sandboxes{state=\"running\"}");
    printf("  live sandboxes               %d of %d (created in %.1f s, %.0f/s); /metrics "
           "running: %.0f\n",
           got, n, create_s, got / create_s, running);
    if (got > 0) {
        printf("  daemon RSS (VmRSS)           %ld KiB before, %ld KiB with %d live: %.1f KiB per "
               "sandbox\n",
               rss0, rss1, got, (double)(rss1 - rss0) / got);
        printf("  host MemAvailable drop       %ld MiB: %.0f KiB per sandbox (target <= 2048 KiB: "
               "%s)\n",
               (avail0 - avail1) / 1024, (double)(avail0 - avail1) / got,
               (double)(avail0 - avail1) / got <= 2048 ? "met" : "MISSED");
        printf("  host MemFree drop            %ld MiB: %.0f KiB per sandbox\n",
               (free0 - free1) / 1024, (double)(free0 - free1) / got);
        printf("  %-28s slab %.0f (unreclaimable %.0f), shmem %.0f\n",
               "  of which, KiB per sandbox:", (double)(slab1 - slab0) / got,
               (double)(unrecl1 - unrecl0) / got, (double)(shmem1 - shmem0) / got);
        if (cnt > 0)
            printf("  cgroup memory (sum, /metrics) %.1f MiB over %d sandboxes: %.0f KiB each\n",
                   cg_bytes / 1048576, cnt, cg_bytes / 1024 / cnt);
        printf("  target: %d live on this machine: %s\n", n, got == n ? "met" : "MISSED");
    }
    t0 = now_us();
    int del_failed = 0;
    for (int i = 0; i < got; i++) {
        if (api_delete(c, ids[i]) < 0 && del_failed++ < 3)
            printf("  delete '%s' failed: %s\n", ids[i], what_failed(c));
        free(ids[i]);
    }
    double del_s = (now_us() - t0) / 1e6;
    free(ids);
    /* namespaces and mounts are freed after RCU grace periods: give it up to 10 s */
    long avail2 = 0;
    int waited = 0;
    for (; waited < 10; waited++) {
        sleep(1);
        avail2 = meminfo_kb("MemAvailable");
        if (avail0 - avail2 < 16 * 1024)
            break;
    }
    long rss2 = status_kb(o->pid, "VmRSS");
    long slab2 = meminfo_kb("Slab"), unrecl2 = meminfo_kb("SUnreclaim");
    printf("  %-28s %d in %.1f s (%d failed); %d s later MemAvailable is %+ld MiB against "
           "before; daemon RSS %ld KiB\n",
           "deleting them all", got, del_s, del_failed, waited < 10 ? waited + 1 : 10,
           (avail2 - avail0) / 1024, rss2);
    printf("  %-28s slab %+ld MiB (unreclaimable %+ld MiB) against before\n", "",
           (slab2 - slab0) / 1024, (unrecl2 - unrecl0) / 1024);
}

static char **split_words(const char *s)
{
    char *copy = gbx_xstrdup(s);
    size_t n = 0, cap = 8;
    char **v = gbx_xcalloc(cap, sizeof(char *));
    for (char *save = NULL, *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (n + 2 > cap) {
            cap *= 2;
            v = gbx_xrealloc(v, cap * sizeof(char *));
        }
        v[n++] = w;
    }
    v[n] = NULL;
    if (n == 0) { /* an empty command: no peer */
        free(v);
        free(copy);
        return NULL;
    }
    return v; /* copy lives with v, for the life of the process */
}

int main(int argc, char **argv)
{
    bench_name = "bench_api";
    bench_label_width = 28;
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'},    {"pid", required_argument, NULL, 'p'},
        {"runs", required_argument, NULL, 'n'},      {"idle", required_argument, NULL, 'i'},
        {"rate-secs", required_argument, NULL, 'r'}, {"pool", required_argument, NULL, 'P'},
        {"bwrap", required_argument, NULL, 'b'},     {NULL, 0, NULL, 0},
    };
    struct opts o = {.runs = 300, .idle = 1000, .rate_secs = 10, .pool = 8};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            o.sock = optarg;
            break;
        case 'p':
            o.pid = atoi(optarg);
            break;
        case 'n':
            o.runs = atoi(optarg);
            break;
        case 'i':
            o.idle = atoi(optarg);
            break;
        case 'r':
            o.rate_secs = atoi(optarg);
            break;
        case 'P':
            o.pool = atoi(optarg);
            break;
        case 'b':
            o.bwrap = split_words(optarg);
            break;
        default:
            fprintf(stderr, "usage: bench_api --socket PATH [--pid PID] [--runs N] [--idle N] "
                            "[--rate-secs S] [--pool N] [--bwrap CMD] "
                            "cold|pooled|exec|roundtrip|rate|idle...\n");
            return 2;
        }
    }
    if (o.sock == NULL || optind == argc) {
        fprintf(stderr, "bench_api: --socket and at least one test are needed\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct client c;
    client_init(&c, o.sock);
    for (int i = optind; i < argc; i++) {
        /* TEST or TEST=N (N: runs, or sandboxes for idle, or seconds for rate) */
        char t[32];
        snprintf(t, sizeof(t), "%s", argv[i]);
        char *eq = strchr(t, '=');
        int n = o.runs;
        if (eq) {
            *eq = '\0';
            n = atoi(eq + 1);
        }
        struct opts to = o;
        to.runs = n < 10 ? 10 : n;
        if (strcmp(t, "cold") == 0)
            bench_cold(&c, to.runs);
        else if (strcmp(t, "pooled") == 0)
            bench_pooled(&c, &to);
        else if (strcmp(t, "exec") == 0)
            bench_exec(&c, to.runs);
        else if (strcmp(t, "roundtrip") == 0)
            bench_roundtrip(&c, &to);
        else if (strcmp(t, "rate") == 0) {
            to.rate_secs = eq ? n : o.rate_secs;
            bench_rate(&to);
        } else if (strcmp(t, "idle") == 0) {
            to.idle = eq ? n : o.idle;
            if (to.idle > 0)
                bench_idle(&c, &to);
            else
                printf("== live idle sandboxes: skipped (GBX_BENCH_IDLE=0)\n");
        } else
            die("unknown test '%s'", t);
        fflush(stdout);
    }
    client_release(&c);
    if (rt_ready)
        gbx_runtime_release(&rt);
    curl_global_cleanup();
    return 0;
}
