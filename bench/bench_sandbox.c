/* SPDX-License-Identifier: MIT */
/* Library-level benchmarks, each beside a peer measured in the same run:
 *   create -> ready   gbx_sandbox_create + agent HELLO answered   vs  bare clone3 with the
 *                     same namespace flags + exec /bin/true + wait (the kernel's floor)
 *   exec round trip   SPAWN true -> EXIT event in a live sandbox   vs  fork + exec + wait of
 *                     /bin/true on the host
 * Prints p50/p99 and the ratios. Usage: bench_sandbox [runs] (default 1000). */
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/client.h"
#include "base/mem.h"
#include "sandbox/backend.h"

static double now_us(void)
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

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof(double), cmp);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

static void die(struct gbx_err *err, const char *what)
{
    fprintf(stderr, "bench: %s: %s\n", what, err ? err->msg : "failed");
    exit(1);
}

static void report(const char *name, double *v, int n, double *peer, const char *peer_name,
                   double target_ms)
{
    double p50 = pct(v, n, 0.5), p99 = pct(v, n, 0.99);
    double q50 = pct(peer, n, 0.5), q99 = pct(peer, n, 0.99);
    printf("%-18s p50 %7.3f ms  p99 %7.3f ms   (target p50 <= %.1f ms: %s)\n", name, p50 / 1e3,
           p99 / 1e3, target_ms, p50 / 1e3 <= target_ms ? "met" : "MISSED");
    printf("%-18s p50 %7.3f ms  p99 %7.3f ms   [%s]\n", "  peer", q50 / 1e3, q99 / 1e3, peer_name);
    printf("%-18s %.2fx the peer at p50\n", "  ratio", p50 / q50);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (n < 10)
        n = 10;
    struct gbx_runtime rt;
    struct gbx_err *err = NULL;
    if (gbx_runtime_init(&rt, NULL, &err) < 0)
        die(err, "runtime");
    double *a = gbx_xcalloc((size_t)n, sizeof(double));
    double *b = gbx_xcalloc((size_t)n, sizeof(double));

    /* warm up: template generation, page cache */
    for (int i = 0; i < 5; i++) {
        struct gbx_sandbox_spec spec = {.id = "bench-warm"};
        struct gbx_sandbox *sb;
        if (gbx_sandbox_create(&rt, &spec, &sb, &err) < 0)
            die(err, "create");
        (void)!gbx_sandbox_destroy(sb, NULL);
    }

    /* create -> ready, interleaved with the peer so both see the same machine state */
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "bench-%d", i);
        struct gbx_sandbox_spec spec = {.id = id,
                                        .limits = {.memory_bytes = 512 << 20, .pids = 512}};
        struct gbx_sandbox *sb;
        struct gbx_agent *ag;
        double t0 = now_us();
        if (gbx_sandbox_create(&rt, &spec, &sb, &err) < 0)
            die(err, "create");
        if (gbx_agent_open(gbx_steal_fd(&sb->conn_fd), &ag, &err) < 0)
            die(err, "hello");
        a[i] = now_us() - t0;
        gbx_agent_free(ag);
        if (gbx_sandbox_destroy(sb, &err) < 0)
            die(err, "destroy");

        struct clone_args ca;
        memset(&ca, 0, sizeof(ca));
        ca.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
                   CLONE_NEWNET | 0x80 /* CLONE_NEWTIME */;
        ca.exit_signal = SIGCHLD;
        t0 = now_us();
        pid_t p = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
        if (p == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        waitpid(p, NULL, 0);
        b[i] = now_us() - t0;
    }
    report("create->ready", a, n, b, "clone3(same namespaces)+exec true+wait", 3.0);

    /* exec round trip in one live sandbox */
    struct gbx_sandbox_spec spec = {.id = "bench-exec"};
    struct gbx_sandbox *sb;
    struct gbx_agent *ag;
    if (gbx_sandbox_create(&rt, &spec, &sb, &err) < 0)
        die(err, "create");
    if (gbx_agent_open(gbx_steal_fd(&sb->conn_fd), &ag, &err) < 0)
        die(err, "hello");
    const char *argv_true[] = {"/bin/true", NULL};
    struct gbx_spawn_opts so = {.argv = argv_true};
    for (int i = 0; i < n; i++) {
        uint32_t proc;
        pid_t pid;
        double t0 = now_us();
        if (gbx_agent_spawn(ag, &so, &proc, &pid, &err) < 0)
            die(err, "spawn");
        for (;;) {
            struct gbx_event ev;
            if (gbx_agent_next_event(ag, &ev, 10000, &err) != 1)
                die(err, "wait exit");
            int done = ev.kind == GBX_EVENT_EXIT && ev.id == proc;
            gbx_event_release(&ev);
            if (done)
                break;
        }
        a[i] = now_us() - t0;

        t0 = now_us();
        pid_t p = fork();
        if (p == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        waitpid(p, NULL, 0);
        b[i] = now_us() - t0;
    }
    report("exec round trip", a, n, b, "fork+exec true+wait on the host", 1.0);
    gbx_agent_free(ag);
    (void)!gbx_sandbox_destroy(sb, NULL);

    /* idle memory: what 50 live sandboxes (init waiting, nothing else) are charged */
    enum { NIDLE = 50 };
    struct gbx_sandbox *idle[NIDLE];
    struct gbx_agent *idle_ag[NIDLE];
    uint64_t total = 0, init_rss_kb = 0;
    for (int i = 0; i < NIDLE; i++) {
        char id[32];
        snprintf(id, sizeof(id), "bench-idle-%d", i);
        struct gbx_sandbox_spec ispec = {.id = id};
        if (gbx_sandbox_create(&rt, &ispec, &idle[i], &err) < 0)
            die(err, "create");
        if (gbx_agent_open(gbx_steal_fd(&idle[i]->conn_fd), &idle_ag[i], &err) < 0)
            die(err, "hello");
    }
    for (int i = 0; i < NIDLE; i++) {
        struct gbx_cg_usage u;
        if (idle[i]->ops->usage(idle[i], &u, &err) < 0)
            die(err, "usage");
        total += u.memory_bytes;
        char path[64], line[128];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)idle[i]->init_pid);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof(line), f))
            if (strncmp(line, "VmRSS:", 6) == 0)
                init_rss_kb += strtoull(line + 6, NULL, 10);
        if (f)
            fclose(f);
    }
    printf("%-18s %7.0f KiB per sandbox charged to its memory cgroup; glovebox-init RSS %llu KiB "
           "(target <= 2048 KiB)\n",
           "idle memory", (double)total / NIDLE / 1024, (unsigned long long)(init_rss_kb / NIDLE));
    for (int i = 0; i < NIDLE; i++) {
        gbx_agent_free(idle_ag[i]);
        (void)!gbx_sandbox_destroy(idle[i], NULL);
    }

    free(a);
    free(b);
    gbx_runtime_release(&rt);
    return 0;
}
