/* SPDX-License-Identifier: MIT */
/* State benchmark: gloveboxd's pause/resume, snapshots, clones and rollback over its admin
 * socket (libcurl, one keep-alive connection), each beside a peer doing the same work
 * without the daemon, in the same run:
 *
 *   pause      POST /v1/sandboxes/{id}/pause, then /resume, of a sandbox running a sleeping
 *              loop (and then a busy one)  vs  the kernel's own freezer on a cgroup made here
 *              with the same kind of child: write cgroup.freeze 1 and wait for "frozen 1" in
 *              cgroup.events (then 0); measured one after the other, never side by side
 *   snapshot   POST /v1/sandboxes/{id}/snapshots of a sandbox that wrote FILES files of
 *              FILE_BYTES (10 MB by default; each snapshot deleted again, not timed)
 *              vs  cp -a of the same files from a tmpfs into the state dir (what a copy of a
 *              writable layer costs done by hand; the daemon also pauses, shifts owners and
 *              resumes)
 *   clone      POST /v1/snapshots/{id}/clone {count:1}  vs  POST /v1/sandboxes {} (a fresh
 *              create); and {count:10}, per sandbox (the deletes are not timed)
 *   rollback   POST /v1/sandboxes/{id}/rollback to that snapshot  vs  the fresh create
 *   hibernate  POST /v1/sandboxes/{id}/hibernate of a sandbox whose process holds 16 MiB (and
 *              256 MiB) of touched memory, then POST .../resume (restore, the process running
 *              again)  vs  writing the same number of bytes from a tmpfs to a file in the
 *              state dir and reading them back (the floor of saving and loading that memory)
 *
 * Usage: bench_state --socket PATH --state-dir DIR [--runs N] [--snap-runs N] [--files N]
 *                    [--file-bytes B] [--hib-runs N]
 * Defaults: 200 pause/resume and clone/rollback runs, 30 snapshots, 10 files of 1000000 bytes,
 * 5 hibernate/restore cycles per size (0 skips them: no CRIU). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/mem.h"
#include "lib/client.h"

struct opts {
    const char *sock, *state_dir;
    int runs, snap_runs, files, hib_runs;
    long file_bytes;
};

static json_t *call_json(struct client *c, const char *method, const char *path, const char *body,
                         long want)
{
    if (call(c, method, path, body) < 0 || c->code != want)
        die("%s %s: %s", method, path, what_failed(c));
    if (c->len == 0)
        return NULL;
    json_t *j = json_loads(c->body, 0, NULL);
    if (j == NULL)
        die("%s %s: not JSON", method, path);
    return j;
}

static char *create(struct client *c, const char *body)
{
    json_t *j = call_json(c, "POST", "/v1/sandboxes", body, 201);
    char *id = gbx_xstrdup(json_string_value(json_object_get(j, "id")));
    json_decref(j);
    return id;
}

static void destroy(struct client *c, const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    json_decref(call_json(c, "DELETE", path, NULL, 204));
}

static void sh(struct client *c, const char *id, const char *cmd)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
    json_t *b = json_pack("{s:s,s:b}", "shell", cmd, "wait", 1);
    char *t = json_dumps(b, JSON_COMPACT);
    json_t *r = call_json(c, "POST", path, t, 200);
    if (json_integer_value(json_object_get(r, "exit_code")) != 0)
        die("'%s' failed in %s: %s", cmd, id, c->body);
    json_decref(r);
    json_decref(b);
    free(t);
}

/* ---- pause ------------------------------------------------------------------------------ */

static int cg_wait(const char *events, const char *want)
{
    char buf[256];
    for (int i = 0; i < 100000; i++) {
        int fd = open(events, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n > 0) {
            buf[n] = '\0';
            if (strstr(buf, want))
                return 0;
        }
    }
    return -1;
}

static void cg_write(const char *file, const char *v)
{
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, v, strlen(v)) < 0)
        die("write %s: %s", file, strerror(errno));
    close(fd);
}

/* The kernel's own freezer on a cgroup of ours holding one child (busy: a spinning loop,
 * else a sleeping one), n freeze/thaw pairs into kp/kr. 0, or -1 without cgroup v2. */
static int kernel_freeze(int n, int busy, double *kp, double *kr)
{
    const char *cg = "/sys/fs/cgroup/unified/gbx-bench-freeze";
    if (mkdir(cg, 0755) < 0 && errno != EEXIST)
        return -1;
    char procs[256], freeze[256], events[256];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
    snprintf(freeze, sizeof(freeze), "%s/cgroup.freeze", cg);
    snprintf(events, sizeof(events), "%s/cgroup.events", cg);
    pid_t child = fork();
    if (child == 0) {
        for (;;) {
            if (busy)
                __asm__ volatile("" ::: "memory");
            else
                usleep(20000);
        }
    }
    char pid[32];
    snprintf(pid, sizeof(pid), "%d", (int)child);
    cg_write(procs, pid);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        cg_write(freeze, "1");
        if (cg_wait(events, "frozen 1") < 0)
            die("the peer cgroup did not freeze");
        double t1 = now_us();
        cg_write(freeze, "0");
        if (cg_wait(events, "frozen 0") < 0)
            die("the peer cgroup did not thaw");
        kp[i] = t1 - t0;
        kr[i] = now_us() - t1;
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    (void)rmdir(cg);
    return 0;
}

/* pause/resume through the API of a sandbox running cmd, then the kernel floor alone */
static void pause_pair(struct client *c, const struct opts *o, int busy)
{
    char *id = create(c, "{}");
    sh(c, id,
       busy ? "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &"
            : "nohup sh -c 'while :; do sleep 0.02; done' >/dev/null 2>&1 &");
    int n = o->runs;
    double *p = gbx_xcalloc((size_t)n, sizeof(double));
    double *r = gbx_xcalloc((size_t)n, sizeof(double));
    double *kp = gbx_xcalloc((size_t)n, sizeof(double));
    double *kr = gbx_xcalloc((size_t)n, sizeof(double));
    char pp[128], rp[128];
    snprintf(pp, sizeof(pp), "/v1/sandboxes/%s/pause", id);
    snprintf(rp, sizeof(rp), "/v1/sandboxes/%s/resume", id);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        json_decref(call_json(c, "POST", pp, "{}", 200));
        double t1 = now_us();
        json_decref(call_json(c, "POST", rp, "{}", 200));
        p[i] = t1 - t0;
        r[i] = now_us() - t1;
    }
    destroy(c, id); /* its loop is gone before the peer runs */
    free(id);
    const char *what = busy ? "a busy loop" : "a sleeping loop";
    char a[96], b[96], d[96], e[96];
    snprintf(a, sizeof(a), "pause (API), %s inside", what);
    snprintf(b, sizeof(b), "resume (API), %s inside", what);
    snprintf(d, sizeof(d), "peer: cgroup.freeze 1 until frozen (%s)", busy ? "busy" : "sleeping");
    snprintf(e, sizeof(e), "peer: cgroup.freeze 0 until thawed (%s)", busy ? "busy" : "sleeping");
    double ours = line(a, p, n, NULL), ours_r = line(b, r, n, NULL);
    if (kernel_freeze(n, busy, kp, kr) == 0) {
        double peer = line(d, kp, n, NULL), peer_r = line(e, kr, n, NULL);
        ratio("pause / kernel freeze", ours, peer);
        ratio("resume / kernel thaw", ours_r, peer_r);
    }
    if (!busy)
        target_ms("pause", ours, 1.0);
    free(p);
    free(r);
    free(kp);
    free(kr);
}

static void bench_pause(struct client *c, const struct opts *o)
{
    pause_pair(c, o, 0);
    pause_pair(c, o, 1);
}

/* ---- snapshot, clone, rollback -------------------------------------------------------------- */

static double run_cmd(const char *cmd)
{
    double t0 = now_us();
    int rc = system(cmd);
    if (rc != 0)
        die("'%s' failed (%d)", cmd, rc);
    return now_us() - t0;
}

static void bench_snapshots(struct client *c, const struct opts *o)
{
    char *id = create(c, "{}");
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "mkdir -p /work && for i in $(seq %d); do head -c %ld /dev/urandom > /work/f$i; done",
             o->files, o->file_bytes);
    sh(c, id, cmd);
    char sp[128];
    snprintf(sp, sizeof(sp), "/v1/sandboxes/%s/snapshots", id);
    double *s = gbx_xcalloc((size_t)o->snap_runs, sizeof(double));
    double *peer = gbx_xcalloc((size_t)o->snap_runs, sizeof(double));
    /* the peer's source: the same files on a tmpfs (where the sandbox's writable layer is) */
    char src[256], dst[256];
    snprintf(src, sizeof(src), "/dev/shm/gbx-bench-snap-%d", (int)getpid());
    snprintf(dst, sizeof(dst), "%s/bench-cp", o->state_dir);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s/work && for i in $(seq %d); do head -c %ld /dev/urandom > %s/work/f$i; "
             "done",
             src, o->files, o->file_bytes, src);
    run_cmd(cmd);
    uint64_t bytes = 0;
    for (int i = 0; i < o->snap_runs; i++) {
        double t0 = now_us();
        json_t *j = call_json(c, "POST", sp, "{}", 201);
        s[i] = now_us() - t0;
        bytes = (uint64_t)json_integer_value(json_object_get(j, "size_bytes"));
        char dp[128];
        snprintf(dp, sizeof(dp), "/v1/snapshots/%s", json_string_value(json_object_get(j, "id")));
        json_decref(j);
        json_decref(call_json(c, "DELETE", dp, NULL, 204));
        snprintf(cmd, sizeof(cmd), "cp -a %s %s", src, dst);
        peer[i] = run_cmd(cmd);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dst);
        (void)run_cmd(cmd);
    }
    char note[96];
    snprintf(note, sizeof(note), "%d files, %.1f MB changed", o->files, (double)bytes / 1e6);
    double ours = line("snapshot (API: pause, copy out, resume)", s, o->snap_runs, note);
    double theirs = line("peer: cp -a of the same files (tmpfs -> disk)", peer, o->snap_runs, NULL);
    ratio("snapshot / cp -a", ours, theirs);
    target_ms("snapshot of 10 MB changed", ours, 20.0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", src);
    (void)run_cmd(cmd);

    /* the snapshot clones and rollbacks start from */
    json_t *j = call_json(c, "POST", sp, "{\"name\":\"bench-base\"}", 201);
    json_decref(j);
    int n = o->runs;
    double *cl = gbx_xcalloc((size_t)n, sizeof(double));
    double *cr = gbx_xcalloc((size_t)n, sizeof(double));
    double *rb = gbx_xcalloc((size_t)n, sizeof(double));
    char rp[128];
    snprintf(rp, sizeof(rp), "/v1/sandboxes/%s/rollback", id);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        json_t *r = call_json(c, "POST", "/v1/snapshots/bench-base/clone", "{\"count\":1}", 201);
        cl[i] = now_us() - t0;
        destroy(c, json_string_value(
                       json_object_get(json_array_get(json_object_get(r, "sandboxes"), 0), "id")));
        json_decref(r);
        t0 = now_us();
        char *fresh = create(c, "{}");
        cr[i] = now_us() - t0;
        destroy(c, fresh);
        free(fresh);
        t0 = now_us();
        json_decref(call_json(c, "POST", rp, "{\"snapshot\":\"bench-base\"}", 200));
        rb[i] = now_us() - t0;
    }
    double clone = line("clone of a 10 MB snapshot (count 1)", cl, n, NULL);
    double fresh = line("peer: a fresh create", cr, n, NULL);
    double roll = line("rollback to the snapshot", rb, n, NULL);
    ratio("clone / fresh create", clone, fresh);
    ratio("rollback / fresh create", roll, fresh);
    target_ms("clone", clone, 5.0);
    /* ten at once, per sandbox */
    int batches = n / 10 > 0 ? n / 10 : 1;
    double *b10 = gbx_xcalloc((size_t)batches, sizeof(double));
    for (int i = 0; i < batches; i++) {
        double t0 = now_us();
        json_t *r = call_json(c, "POST", "/v1/snapshots/bench-base/clone", "{\"count\":10}", 201);
        b10[i] = (now_us() - t0) / 10;
        size_t k;
        json_t *sb;
        json_array_foreach(json_object_get(r, "sandboxes"), k, sb)
        {
            destroy(c, json_string_value(json_object_get(sb, "id")));
        }
        json_decref(r);
    }
    line("clone, count 10, per sandbox", b10, batches, NULL);
    destroy(c, id);
    json_decref(call_json(c, "DELETE", "/v1/snapshots/bench-base", NULL, 204));
    free(id);
    free(s);
    free(peer);
    free(cl);
    free(cr);
    free(rb);
    free(b10);
}

static void bench_hibernate(struct client *c, const struct opts *o, int mib)
{
    int n = o->hib_runs;
    double *h = gbx_xcalloc((size_t)n, sizeof(double));
    double *w = gbx_xcalloc((size_t)n, sizeof(double));
    double *pw = gbx_xcalloc((size_t)n, sizeof(double));
    double *pr = gbx_xcalloc((size_t)n, sizeof(double));
    char *id = create(c, "{}");
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "nohup python3 -c 'import time; b = bytearray(%d << 20)\nfor i in range(0, len(b), "
             "4096): b[i] = 1\nopen(\"/tmp/ready\", \"w\").close()\ntime.sleep(1e9)' "
             ">/dev/null 2>&1 & while [ ! -e /tmp/ready ]; do sleep 0.01; done",
             mib);
    sh(c, id, cmd);
    char hp[128], rp[128];
    snprintf(hp, sizeof(hp), "/v1/sandboxes/%s/hibernate", id);
    snprintf(rp, sizeof(rp), "/v1/sandboxes/%s/resume", id);
    char src[128], dst[256];
    snprintf(src, sizeof(src), "/dev/shm/gbx-bench-mem-%d", (int)getpid());
    snprintf(dst, sizeof(dst), "%s/bench-mem", o->state_dir);
    snprintf(cmd, sizeof(cmd), "head -c %dM /dev/urandom > %s", mib, src);
    (void)run_cmd(cmd);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        json_decref(call_json(c, "POST", hp, "{}", 200));
        double t1 = now_us();
        json_decref(call_json(c, "POST", rp, "{}", 200));
        double t2 = now_us();
        h[i] = t1 - t0;
        w[i] = t2 - t1;
        sh(c, id, "test -e /tmp/ready"); /* it runs again */
        snprintf(cmd, sizeof(cmd), "cp %s %s && sync -f %s", src, dst, dst);
        pw[i] = run_cmd(cmd);
        snprintf(cmd, sizeof(cmd), "echo 1 > /proc/sys/vm/drop_caches; cat %s > /dev/null", dst);
        pr[i] = run_cmd(cmd);
        snprintf(cmd, sizeof(cmd), "rm -f %s", dst);
        (void)run_cmd(cmd);
    }
    char a[96], b[96], d[96], e[96];
    snprintf(a, sizeof(a), "hibernate, %d MiB touched", mib);
    snprintf(b, sizeof(b), "restore (resume), %d MiB", mib);
    snprintf(d, sizeof(d), "peer: %d MiB tmpfs -> state dir, synced", mib);
    snprintf(e, sizeof(e), "peer: %d MiB read back, cold cache", mib);
    double hib = line(a, h, n, NULL);
    double res = line(b, w, n, NULL);
    double pwm = line(d, pw, n, NULL);
    double prm = line(e, pr, n, NULL);
    ratio("hibernate / write the memory", hib, pwm);
    ratio("restore / read the memory", res, prm);
    if (mib == 16)
        target_ms("restore of 16 MiB", res, 50.0);
    snprintf(cmd, sizeof(cmd), "rm -f %s", src);
    (void)run_cmd(cmd);
    destroy(c, id);
    free(id);
    free(h);
    free(w);
    free(pw);
    free(pr);
}

int main(int argc, char **argv)
{
    bench_name = "bench_state";
    struct opts o = {
        .runs = 200, .snap_runs = 30, .files = 10, .file_bytes = 1000000, .hib_runs = 5};
    static const struct option lo[] = {
        {"socket", required_argument, NULL, 's'},   {"state-dir", required_argument, NULL, 'd'},
        {"runs", required_argument, NULL, 'n'},     {"snap-runs", required_argument, NULL, 'p'},
        {"files", required_argument, NULL, 'f'},    {"file-bytes", required_argument, NULL, 'b'},
        {"hib-runs", required_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 's':
            o.sock = optarg;
            break;
        case 'd':
            o.state_dir = optarg;
            break;
        case 'n':
            o.runs = atoi(optarg);
            break;
        case 'p':
            o.snap_runs = atoi(optarg);
            break;
        case 'f':
            o.files = atoi(optarg);
            break;
        case 'b':
            o.file_bytes = atol(optarg);
            break;
        case 'h':
            o.hib_runs = atoi(optarg);
            break;
        default:
            die("usage: bench_state --socket PATH --state-dir DIR [--runs N] [--snap-runs N] "
                "[--files N] [--file-bytes B]");
        }
    }
    if (o.sock == NULL || o.state_dir == NULL || o.runs < 1 || o.snap_runs < 1 || o.files < 1)
        die("usage: bench_state --socket PATH --state-dir DIR [--runs N] [--snap-runs N] "
            "[--files N] [--file-bytes B]");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct client c;
    client_init(&c, o.sock);
    bench_pause(&c, &o);
    bench_snapshots(&c, &o);
    if (o.hib_runs > 0) {
        bench_hibernate(&c, &o, 16);
        bench_hibernate(&c, &o, 256);
    }
    client_release(&c);
    curl_global_cleanup();
    return 0;
}
