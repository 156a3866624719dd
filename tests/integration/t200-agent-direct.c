/* SPDX-License-Identifier: MIT */
/* glovebox-init driven directly through the agent client, without a sandbox: init runs
 * as an ordinary (subreaper) process with one end of a socketpair on fd 4. Covers
 * processes (pipes, PTY, stdin, signals, ps, attach, orphans, 100 MB of output), file
 * operations in a temporary directory, in-root path resolution (GBX_INIT_ROOT), and
 * malformed frames. Needs root (file operations switch users). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/client.h"
#include "agent/frame.h"

static char tmpdir[256];
static char init_bin[4096];

struct fix {
    struct gbx_agent *a;
    pid_t init_pid;
};

/* ---- helpers ------------------------------------------------------------------------ */

static void tpath(char *out, size_t sz, const char *fmt, ...) GBX_PRINTF(3, 4);
static void tpath(char *out, size_t sz, const char *fmt, ...)
{
    char rel[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    int n = snprintf(out, sz, "%s/%s", tmpdir, rel);
    assert_true(n > 0 && (size_t)n < sz);
}

/* Start init with a socketpair end on fd 4 (and optionally a listening socket on fd 3).
 * Returns our end of the socketpair. */
static int spawn_init(const char *root, int listen_fd, pid_t *pid)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        /* an init with a listener outlives its connections: never outlive the test */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        /* Move both out of the way first: dup2 onto itself would keep CLOEXEC. */
        int l = listen_fd >= 0 ? fcntl(listen_fd, F_DUPFD, 10) : -1;
        int c = fcntl(sv[1], F_DUPFD, 10);
        if (c < 0 || (l >= 0 && dup2(l, 3) < 0) || dup2(c, 4) < 0)
            _exit(126);
        if (root)
            setenv("GBX_INIT_ROOT", root, 1);
        else
            unsetenv("GBX_INIT_ROOT");
        execl(init_bin, "glovebox-init", (char *)NULL);
        _exit(127);
    }
    close(sv[1]);
    *pid = p;
    return sv[0];
}

static struct gbx_agent *open_agent(int fd)
{
    struct gbx_agent *a = NULL;
    struct gbx_err *e = NULL;
    if (gbx_agent_open(fd, &a, &e) < 0)
        fail_msg("agent open: %s", e->msg);
    gbx_agent_set_timeout(a, 20000);
    return a;
}

static int wait_exit(pid_t pid, int timeout_ms)
{
    for (int i = 0; i < timeout_ms / 10; i++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    fail_msg("process %d did not exit", (int)pid);
    return -1;
}

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof(*f));
    int fd = spawn_init(NULL, -1, &f->init_pid);
    f->a = open_agent(fd);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    if (gbx_agent_shutdown(f->a, &e) < 0) {
        gbx_err_free(e);
        kill(f->init_pid, SIGKILL);
    }
    gbx_agent_free(f->a);
    int st = wait_exit(f->init_pid, 5000);
    free(f);
    return WIFEXITED(st) ? 0 : -1;
}

static void expect_err(int r, struct gbx_err **ep, int errnum, const char *substr)
{
    struct gbx_err *e = *ep;
    *ep = NULL;
    assert_int_equal(r, -1);
    assert_non_null(e);
    if (e->errnum != errnum || (substr && !strstr(e->msg, substr)))
        fail_msg("expected errno %d ('%s'), got %d: %s", errnum, substr ? substr : "", e->errnum,
                 e->msg);
    gbx_err_free(e);
}

struct result {
    uint8_t *out, *err;
    size_t out_len, err_len;
    int exit_code, exit_signal;
    uint64_t hash; /* FNV-1a of stdout (hash_only: stdout is not kept) */
    int hash_only;
};

static void append(uint8_t **buf, size_t *len, const uint8_t *d, size_t n)
{
    *buf = realloc(*buf, *len + n + 1);
    memcpy(*buf + *len, d, n);
    *len += n;
    (*buf)[*len] = 0;
}

static uint64_t fnv(uint64_t h, const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= d[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define FNV_INIT 0xcbf29ce484222325ull

/* Collect events of proc until its EXIT. */
static void collect(struct gbx_agent *a, uint32_t proc, struct result *r)
{
    r->hash = FNV_INIT;
    for (;;) {
        struct gbx_event ev;
        struct gbx_err *e = NULL;
        int k = gbx_agent_next_event(a, &ev, 30000, &e);
        if (k <= 0)
            fail_msg("no event: %s", k < 0 ? e->msg : "timeout");
        if (ev.id != proc || ev.kind == GBX_EVENT_WATCH) {
            gbx_event_release(&ev);
            continue;
        }
        if (ev.kind == GBX_EVENT_STDOUT) {
            r->hash = fnv(r->hash, ev.data, ev.len);
            if (r->hash_only)
                r->out_len += ev.len;
            else
                append(&r->out, &r->out_len, ev.data, ev.len);
        } else if (ev.kind == GBX_EVENT_STDERR) {
            append(&r->err, &r->err_len, ev.data, ev.len);
        } else if (ev.kind == GBX_EVENT_EXIT) {
            r->exit_code = ev.exit_code;
            r->exit_signal = ev.exit_signal;
            gbx_event_release(&ev);
            return;
        }
        gbx_event_release(&ev);
    }
}

static void result_release(struct result *r)
{
    free(r->out);
    free(r->err);
}

static uint32_t spawn(struct gbx_agent *a, const struct gbx_spawn_opts *o)
{
    uint32_t proc;
    pid_t pid;
    struct gbx_err *e = NULL;
    if (gbx_agent_spawn(a, o, &proc, &pid, &e) < 0)
        fail_msg("spawn %s: %s", o->argv[0], e->msg);
    assert_true(pid > 0);
    return proc;
}

static void run_sh(struct gbx_agent *a, const char *script, struct result *r)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    memset(r, 0, sizeof(*r));
    collect(a, spawn(a, &o), r);
}

/* ---- session and processes -------------------------------------------------------------- */

static void test_hello_and_ping(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    assert_int_equal(gbx_agent_ping(f->a, &e), 0);
    assert_int_equal(gbx_agent_ping(f->a, &e), 0);
}

static void test_spawn_echo_stdout_and_exit_0(void **state)
{
    struct fix *f = *state;
    const char *argv[] = {"echo", "hello", "world", NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    struct result r = {0};
    collect(f->a, spawn(f->a, &o), &r);
    assert_string_equal((char *)r.out, "hello world\n");
    assert_int_equal(r.err_len, 0);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(r.exit_signal, 0);
    result_release(&r);
}

static void test_spawn_stderr_and_exit_code(void **state)
{
    struct fix *f = *state;
    struct result r;
    run_sh(f->a, "echo out; echo err >&2; exit 3", &r);
    assert_string_equal((char *)r.out, "out\n");
    assert_string_equal((char *)r.err, "err\n");
    assert_int_equal(r.exit_code, 3);
    result_release(&r);
}

static void test_spawn_killed_by_signal(void **state)
{
    struct fix *f = *state;
    struct result r;
    run_sh(f->a, "kill -KILL $$", &r);
    assert_int_equal(r.exit_code, -1);
    assert_int_equal(r.exit_signal, SIGKILL);
    result_release(&r);
}

static void test_spawn_default_env_and_cwd(void **state)
{
    struct fix *f = *state;
    struct result r;
    run_sh(f->a,
           "echo \"$PATH|$HOME|$USER|$LOGNAME|$LANG|${TERM-unset}\"; pwd; "
           "test -t 0 || echo notty; cat </dev/stdin",
           &r);
    assert_string_equal((char *)r.out,
                        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|/root|root|"
                        "root|C.UTF-8|unset\n/root\nnotty\n");
    result_release(&r);
}

static void test_spawn_explicit_env_cwd_user(void **state)
{
    struct fix *f = *state;
    const char *argv[] = {"sh", "-c", "echo \"$FOO|$HOME|$USER|$PATH\"; pwd; id -u; id -g", NULL};
    const char *env[] = {"FOO=bar", "PATH=/usr/bin:/bin", NULL};
    struct gbx_spawn_opts o = {.argv = argv, .env = env, .cwd = "/tmp", .user = "nobody"};
    struct result r = {0};
    collect(f->a, spawn(f->a, &o), &r);
    assert_string_equal((char *)r.out,
                        "bar|/nonexistent|nobody|/usr/bin:/bin\n/tmp\n65534\n65534\n");
    result_release(&r);

    const char *argv2[] = {"id", "-u", NULL};
    struct gbx_spawn_opts o2 = {.argv = argv2, .user = "1234:4321"};
    memset(&r, 0, sizeof(r));
    collect(f->a, spawn(f->a, &o2), &r);
    assert_string_equal((char *)r.out, "1234\n");
    result_release(&r);
}

static void test_spawn_exec_failure_is_an_error_reply(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    uint32_t proc;
    pid_t pid;
    const char *argv[] = {"no-such-command-gbx", NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    expect_err(gbx_agent_spawn(f->a, &o, &proc, &pid, &e), &e, ENOENT,
               "cannot run 'no-such-command-gbx': No such file or directory");
    e = NULL;
    const char *argv2[] = {"/etc/passwd", NULL};
    o.argv = argv2;
    expect_err(gbx_agent_spawn(f->a, &o, &proc, &pid, &e), &e, EACCES, "cannot run");
    e = NULL;
    const char *argv3[] = {"true", NULL};
    struct gbx_spawn_opts o3 = {.argv = argv3, .cwd = "/no/such/dir"};
    expect_err(gbx_agent_spawn(f->a, &o3, &proc, &pid, &e), &e, ENOENT, "change directory");
    e = NULL;
    o3.cwd = NULL;
    o3.user = "no-such-user-gbx";
    expect_err(gbx_agent_spawn(f->a, &o3, &proc, &pid, &e), &e, ENOENT, "unknown user");
    /* and the agent still works */
    assert_int_equal(gbx_agent_ping(f->a, &e), 0);
}

static void test_stdin_binary_roundtrip_1mib(void **state)
{
    struct fix *f = *state;
    size_t n = 1 << 20;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 7 + (i >> 8)); /* every byte value, in varied order */
    const char *argv[] = {"cat", NULL};
    struct gbx_spawn_opts o = {.argv = argv, .stdin_open = 1};
    uint32_t proc = spawn(f->a, &o);
    struct gbx_err *e = NULL;
    if (gbx_agent_stdin(f->a, proc, data, n, &e) < 0)
        fail_msg("stdin: %s", e->msg);
    assert_int_equal(gbx_agent_close_stdin(f->a, proc, &e), 0);
    struct result r = {0};
    collect(f->a, proc, &r);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(r.out_len, n);
    assert_memory_equal(r.out, data, n);
    result_release(&r);
    free(data);
}

static void test_stdin_to_closed_reader_is_epipe(void **state)
{
    struct fix *f = *state;
    const char *argv[] = {"sh", "-c", "exec 0<&-; echo ready; sleep 2", NULL};
    struct gbx_spawn_opts o = {.argv = argv, .stdin_open = 1};
    uint32_t proc = spawn(f->a, &o);
    struct gbx_event ev;
    struct gbx_err *e = NULL;
    assert_int_equal(gbx_agent_next_event(f->a, &ev, 5000, &e), 1);
    assert_int_equal(ev.kind, GBX_EVENT_STDOUT);
    gbx_event_release(&ev);
    expect_err(gbx_agent_stdin(f->a, proc, "x", 1, &e), &e, EPIPE, "stdin");
    e = NULL;
    assert_int_equal(gbx_agent_signal(f->a, proc, SIGKILL, &e), 0);
    struct result r = {0};
    collect(f->a, proc, &r);
    assert_int_equal(r.exit_signal, SIGKILL);
    result_release(&r);
}

static long vm_hwm_kib(pid_t pid)
{
    char p[64], line[256];
    snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
    FILE *fp = fopen(p, "r");
    long v = -1;
    while (fp && fgets(line, sizeof(line), fp))
        if (sscanf(line, "VmHWM: %ld", &v) == 1)
            break;
    if (fp)
        fclose(fp);
    return v;
}

static void test_stdout_100mb_lossless_with_bounded_memory(void **state)
{
    struct fix *f = *state;
    const long count = 12500000;
    /* expected stream: "1\n2\n...count\n" */
    uint64_t h = FNV_INIT;
    size_t total = 0;
    char buf[32];
    for (long i = 1; i <= count; i++) {
        int k = snprintf(buf, sizeof(buf), "%ld\n", i);
        h = fnv(h, (uint8_t *)buf, (size_t)k);
        total += (size_t)k;
    }
    assert_true(total > 100000000);
    const char *argv[] = {"seq", "1", "12500000", NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    struct result r = {.hash_only = 1};
    uint32_t proc = spawn(f->a, &o);
    r.hash_only = 1;
    collect(f->a, proc, &r);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(r.out_len, total);
    assert_true(r.hash == h);
    /* (a custom, e.g. sanitized, init binary has its own memory overhead) */
    long hwm = vm_hwm_kib(f->init_pid);
    if (getenv("GBX_INIT") == NULL && (hwm < 0 || hwm > 24 * 1024))
        fail_msg("init peak RSS %ld KiB: output is not bounded", hwm);
}

static void test_slow_reader_backpressure(void **state)
{
    /* The client does not read for a while: init must stop reading the child's pipe
     * (the child blocks), not buffer everything. */
    struct fix *f = *state;
    const char *argv[] = {"head", "-c", "50000000", "/dev/zero", NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    uint32_t proc = spawn(f->a, &o);
    usleep(500000);
    long hwm = vm_hwm_kib(f->init_pid);
    struct result r = {.hash_only = 1};
    collect(f->a, proc, &r);
    assert_int_equal(r.out_len, 50000000);
    if (getenv("GBX_INIT") == NULL && (hwm < 0 || hwm > 24 * 1024))
        fail_msg("init peak RSS %ld KiB while the reader stalled", hwm);
}

static void test_pty_spawn_and_resize(void **state)
{
    struct fix *f = *state;
    const char *argv[] = {
        "sh", "-c", "test -t 0 && echo tty; echo \"T=$TERM\"; stty size; read x; stty size", NULL};
    struct gbx_spawn_opts o = {.argv = argv, .pty = 1, .rows = 30, .cols = 100};
    uint32_t proc = spawn(f->a, &o);
    uint8_t *out = NULL;
    size_t len = 0;
    struct gbx_err *e = NULL;
    while (!(out && strstr((char *)out, "30 100"))) {
        struct gbx_event ev;
        if (gbx_agent_next_event(f->a, &ev, 10000, &e) != 1)
            fail_msg("pty output: %s", out ? (char *)out : "(none)");
        assert_int_equal(ev.kind, GBX_EVENT_STDOUT);
        append(&out, &len, ev.data, ev.len);
        gbx_event_release(&ev);
    }
    assert_non_null(strstr((char *)out, "tty\r\n"));
    assert_non_null(strstr((char *)out, "T=xterm-256color"));
    assert_int_equal(gbx_agent_resize(f->a, proc, 40, 120, &e), 0);
    assert_int_equal(gbx_agent_stdin(f->a, proc, "go\n", 3, &e), 0);
    struct result r = {0};
    collect(f->a, proc, &r);
    assert_int_equal(r.exit_code, 0);
    assert_non_null(strstr((char *)r.out, "40 120"));
    result_release(&r);
    free(out);

    /* resize of a process without a terminal */
    const char *argv2[] = {"sleep", "5", NULL};
    struct gbx_spawn_opts o2 = {.argv = argv2};
    proc = spawn(f->a, &o2);
    expect_err(gbx_agent_resize(f->a, proc, 1, 1, &e), &e, ENOTTY, "terminal");
    e = NULL;
    assert_int_equal(gbx_agent_signal(f->a, proc, SIGKILL, &e), 0);
    memset(&r, 0, sizeof(r));
    collect(f->a, proc, &r);
}

static int pid_alive(pid_t pid)
{
    char p[64], buf[512] = "";
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(p, "r");
    if (fp == NULL)
        return 0;
    size_t k = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[k] = 0;
    fclose(fp);
    char *rp = strrchr(buf, ')');
    return rp && rp[2] != 'Z';
}

static void test_signal_reaches_process_group(void **state)
{
    struct fix *f = *state;
    /* The shell's background child is in its process group: a group signal ends both. */
    const char *argv[] = {"sh", "-c", "sleep 30 & echo $!; wait", NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    uint32_t proc = spawn(f->a, &o);
    struct gbx_event ev;
    struct gbx_err *e = NULL;
    assert_int_equal(gbx_agent_next_event(f->a, &ev, 5000, &e), 1);
    assert_int_equal(ev.kind, GBX_EVENT_STDOUT);
    pid_t child = (pid_t)strtol((char *)ev.data, NULL, 10);
    gbx_event_release(&ev);
    assert_true(child > 0 && pid_alive(child));
    assert_int_equal(gbx_agent_signal(f->a, proc, SIGTERM, &e), 0);
    struct result r = {0};
    collect(f->a, proc, &r);
    assert_int_equal(r.exit_code, -1);
    assert_int_equal(r.exit_signal, SIGTERM);
    result_release(&r);
    for (int i = 0; i < 100 && pid_alive(child); i++)
        usleep(10000);
    assert_false(pid_alive(child));
    expect_err(gbx_agent_signal(f->a, proc, SIGTERM, &e), &e, ESRCH, NULL);
}

static void test_ps_lists_live_processes(void **state)
{
    struct fix *f = *state;
    const char *argv[] = {"sleep", "30", NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    uint32_t p1 = spawn(f->a, &o), p2 = spawn(f->a, &o);
    assert_true(p2 > p1);
    struct gbx_proc_info *v;
    size_t n;
    struct gbx_err *e = NULL;
    assert_int_equal(gbx_agent_ps(f->a, &v, &n, &e), 0);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        assert_true(v[i].proc == p1 || v[i].proc == p2);
        assert_string_equal(v[i].cmdline, "sleep 30");
        assert_int_equal(v[i].pty, 0);
        assert_int_equal(kill(v[i].pid, 0), 0);
    }
    gbx_proc_info_free(v, n);
    struct result r = {0};
    assert_int_equal(gbx_agent_signal(f->a, p1, SIGKILL, &e), 0);
    collect(f->a, p1, &r);
    assert_int_equal(gbx_agent_signal(f->a, p2, SIGKILL, &e), 0);
    collect(f->a, p2, &r);
    assert_int_equal(gbx_agent_ps(f->a, &v, &n, &e), 0);
    assert_int_equal(n, 0);
    gbx_proc_info_free(v, n);
    /* handles are never reused */
    uint32_t p3 = spawn(f->a, &o);
    assert_true(p3 > p2);
    assert_int_equal(gbx_agent_signal(f->a, p3, SIGKILL, &e), 0);
    collect(f->a, p3, &r);
}

static int count_zombie_children(pid_t parent, int *children)
{
    int zombies = 0;
    *children = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char p[300], buf[512];
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
        FILE *fp = fopen(p, "r");
        if (!fp)
            continue;
        size_t k = fread(buf, 1, sizeof(buf) - 1, fp);
        fclose(fp);
        buf[k] = 0;
        char *rp = strrchr(buf, ')');
        char st;
        int ppid;
        if (!rp || sscanf(rp + 2, "%c %d", &st, &ppid) != 2 || ppid != parent)
            continue;
        (*children)++;
        zombies += st == 'Z';
    }
    closedir(d);
    return zombies;
}

static void test_orphans_are_reaped(void **state)
{
    struct fix *f = *state;
    for (int i = 0; i < 20; i++) {
        struct result r;
        run_sh(f->a, "sleep 0.3 & exit 0", &r);
        assert_int_equal(r.exit_code, 0);
        result_release(&r);
    }
    int children;
    count_zombie_children(f->init_pid, &children);
    assert_true(children >= 1); /* the sleeps were reparented to init (subreaper) */
    usleep(800000);
    int zombies = count_zombie_children(f->init_pid, &children);
    assert_int_equal(zombies, 0);
    assert_int_equal(children, 0);
}

static void test_attach_after_reconnect_delivers_output_and_exit(void **state)
{
    (void)state;
    char sock[300];
    tpath(sock, sizeof(sock), "init.sock");
    unlink(sock);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(sock) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(l, 8), 0);
    pid_t ipid;
    int fd = spawn_init(NULL, l, &ipid);
    close(l);
    struct gbx_agent *a1 = open_agent(fd);
    const char *argv[] = {"sh", "-c", "sleep 0.2; echo early; sleep 0.2; echo late; exit 5", NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    uint32_t proc = spawn(a1, &o);
    gbx_agent_free(a1); /* the process keeps running, its output waits */
    usleep(800000);     /* ...and it exits while nobody is attached */

    struct gbx_agent *a2 = NULL;
    struct gbx_err *e = NULL;
    if (gbx_agent_connect(sock, &a2, &e) < 0)
        fail_msg("connect: %s", e->msg);
    struct gbx_proc_info *v;
    size_t n;
    assert_int_equal(gbx_agent_ps(a2, &v, &n, &e), 0);
    assert_int_equal(n, 0); /* exited: not live any more, but its record waits */
    gbx_proc_info_free(v, n);
    assert_int_equal(gbx_agent_attach(a2, proc, &e), 0);
    struct result r = {0};
    collect(a2, proc, &r);
    assert_string_equal((char *)r.out, "early\nlate\n");
    assert_int_equal(r.exit_code, 5);
    result_release(&r);
    /* delivered once: the record is gone */
    expect_err(gbx_agent_attach(a2, proc, &e), &e, ESRCH, NULL);
    e = NULL;
    assert_int_equal(gbx_agent_shutdown(a2, &e), 0);
    gbx_agent_free(a2);
    int st = wait_exit(ipid, 5000);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_shutdown_kills_processes(void **state)
{
    (void)state;
    pid_t ipid;
    struct gbx_agent *a = open_agent(spawn_init(NULL, -1, &ipid));
    const char *argv[] = {"sleep", "60", NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    uint32_t proc;
    pid_t pid;
    struct gbx_err *e = NULL;
    assert_int_equal(gbx_agent_spawn(a, &o, &proc, &pid, &e), 0);
    assert_int_equal(gbx_agent_shutdown(a, &e), 0);
    int st = wait_exit(ipid, 5000);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* the sleep was killed; as our subreaper orphan it may linger as a zombie */
    usleep(100000);
    waitpid(pid, NULL, WNOHANG);
    char p[64], buf[256] = "";
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(p, "r");
    if (fp) {
        size_t k = fread(buf, 1, sizeof(buf) - 1, fp);
        buf[k] = 0;
        fclose(fp);
        char *rp = strrchr(buf, ')');
        assert_true(rp && rp[2] == 'Z');
    }
    /* the connection is gone */
    expect_err(gbx_agent_ping(a, &e), &e, ECONNRESET, "connection");
    gbx_agent_free(a);
}

static void test_sigterm_kills_processes_and_exits_0(void **state)
{
    (void)state;
    pid_t ipid;
    struct gbx_agent *a = open_agent(spawn_init(NULL, -1, &ipid));
    const char *argv[] = {"sleep", "60", NULL};
    struct gbx_spawn_opts o = {.argv = argv};
    uint32_t proc;
    pid_t pid;
    struct gbx_err *e = NULL;
    assert_int_equal(gbx_agent_spawn(a, &o, &proc, &pid, &e), 0);
    assert_true(pid_alive(pid));
    assert_int_equal(kill(ipid, SIGTERM), 0);
    int st = wait_exit(ipid, 5000);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    for (int i = 0; i < 100 && pid_alive(pid); i++)
        usleep(10000);
    assert_false(pid_alive(pid));
    waitpid(pid, NULL, WNOHANG);
    gbx_agent_free(a);
}

static void test_sixteen_connections_then_refused(void **state)
{
    (void)state;
    char sock[300];
    tpath(sock, sizeof(sock), "limit.sock");
    unlink(sock);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(sock) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(l, 32), 0);
    pid_t ipid;
    struct gbx_agent *conns[GBX_AGENT_MAX_CONNS];
    conns[0] = open_agent(spawn_init(NULL, l, &ipid));
    close(l);
    struct gbx_err *e = NULL;
    for (int i = 1; i < GBX_AGENT_MAX_CONNS; i++)
        if (gbx_agent_connect(sock, &conns[i], &e) < 0)
            fail_msg("connection %d: %s", i, e->msg);
    struct gbx_agent *extra = NULL;
    /* refused: init closes it (after an EMFILE error frame), which the client sees as a
     * lost connection, on recv or already on send */
    assert_int_equal(gbx_agent_connect(sock, &extra, &e), -1);
    assert_int_equal(e->kind, GBX_ERR_UNAVAILABLE);
    assert_non_null(strstr(e->msg, "connection lost"));
    gbx_err_free(e);
    e = NULL;
    /* every admitted connection works */
    for (int i = 0; i < GBX_AGENT_MAX_CONNS; i++)
        assert_int_equal(gbx_agent_ping(conns[i], &e), 0);
    /* a slot frees up when a connection closes */
    gbx_agent_free(conns[5]);
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) {
        ok = gbx_agent_connect(sock, &conns[5], &e) == 0;
        if (!ok) {
            gbx_err_free(e);
            e = NULL;
            usleep(10000);
        }
    }
    assert_true(ok);
    assert_int_equal(gbx_agent_shutdown(conns[0], &e), 0);
    for (int i = 0; i < GBX_AGENT_MAX_CONNS; i++)
        gbx_agent_free(conns[i]);
    int st = wait_exit(ipid, 5000);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- files -------------------------------------------------------------------------------- */

static void write_host(const char *path, const void *d, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, d, n), (ssize_t)n);
    close(fd);
}

struct read_ctx {
    uint8_t buf[300000];
    size_t len;
};

static int collect_cb(void *arg, const uint8_t *d, size_t n)
{
    struct read_ctx *c = arg;
    if (n > sizeof(c->buf) - c->len)
        return 1;
    memcpy(c->buf + c->len, d, n);
    c->len += n;
    return 0;
}

static void test_file_write_read_binary_and_20mb(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    char p[512];
    tpath(p, sizeof(p), "bin.dat");
    uint8_t small[256];
    for (int i = 0; i < 256; i++)
        small[i] = (uint8_t)i;
    assert_int_equal(gbx_agent_write_all(f->a, NULL, p, 0640, small, sizeof(small), &e), 0);
    uint8_t *d;
    size_t n;
    assert_int_equal(gbx_agent_read_all(f->a, NULL, p, 1 << 20, &d, &n, &e), 0);
    assert_int_equal(n, 256);
    assert_memory_equal(d, small, 256);
    free(d);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);

    size_t big = 20u << 20;
    uint8_t *data = malloc(big);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < big; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data[i] = (uint8_t)x;
    }
    tpath(p, sizeof(p), "big.dat");
    assert_int_equal(gbx_agent_write_all(f->a, NULL, p, 0644, data, big, &e), 0);
    assert_int_equal(gbx_agent_read_all(f->a, NULL, p, big, &d, &n, &e), 0);
    assert_int_equal(n, big);
    assert_memory_equal(d, data, big);
    free(d);
    /* read_all bounded by max */
    expect_err(gbx_agent_read_all(f->a, NULL, p, big - 1, &d, &n, &e), &e, EFBIG, NULL);
    e = NULL;
    /* offset + length */
    assert_int_equal(gbx_agent_read_all(f->a, NULL, p, big, &d, &n, &e), 0);
    free(d);
    struct read_ctx *c = calloc(1, sizeof(*c));
    assert_int_equal(gbx_agent_read(f->a, NULL, p, 1000001, 200000, collect_cb, c, &e), 0);
    assert_int_equal(c->len, 200000);
    assert_memory_equal(c->buf, data + 1000001, 200000);
    free(c);
    free(data);
    /* no temporary files left behind */
    DIR *dir = opendir(tmpdir);
    struct dirent *de;
    while ((de = readdir(dir)) != NULL)
        assert_null(strstr(de->d_name, ".gbx-"));
    closedir(dir);
}

static void test_file_write_flags(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    char p[512], q[512];
    uint32_t h;
    uint64_t size;
    tpath(p, sizeof(p), "flags.txt");
    write_host(p, "old", 3);
    /* EXCL on an existing file */
    expect_err(gbx_agent_write_open(f->a, NULL, p, 0644, GBX_W_CREATE | GBX_W_EXCL, &h, &e), &e,
               EEXIST, "cannot open");
    e = NULL;
    /* APPEND */
    assert_int_equal(gbx_agent_write_open(f->a, NULL, p, 0644, GBX_W_APPEND, &h, &e), 0);
    assert_int_equal(gbx_agent_write_data(f->a, h, "+new", 4, &e), 0);
    assert_int_equal(gbx_agent_write_end(f->a, h, 1, &size, &e), 0);
    assert_int_equal(size, 4);
    uint8_t *d;
    size_t n;
    assert_int_equal(gbx_agent_read_all(f->a, NULL, p, 100, &d, &n, &e), 0);
    assert_int_equal(n, 7);
    assert_memory_equal(d, "old+new", 7);
    free(d);
    /* an aborted atomic write leaves the target alone and no temp file */
    assert_int_equal(gbx_agent_write_open(f->a, NULL, p, 0644,
                                          GBX_W_CREATE | GBX_W_TRUNC | GBX_W_ATOMIC, &h, &e),
                     0);
    assert_int_equal(gbx_agent_write_data(f->a, h, "replaced", 8, &e), 0);
    assert_int_equal(gbx_agent_write_end(f->a, h, 0, &size, &e), 0);
    assert_int_equal(gbx_agent_read_all(f->a, NULL, p, 100, &d, &n, &e), 0);
    assert_memory_equal(d, "old+new", 7);
    free(d);
    /* PARENTS */
    tpath(q, sizeof(q), "deep/er/file");
    assert_int_equal(gbx_agent_write_open(f->a, NULL, q, 0600,
                                          GBX_W_CREATE | GBX_W_ATOMIC | GBX_W_PARENTS, &h, &e),
                     0);
    assert_int_equal(gbx_agent_write_end(f->a, h, 1, &size, &e), 0);
    struct stat st;
    assert_int_equal(stat(q, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* without PARENTS */
    tpath(q, sizeof(q), "nodir/file");
    expect_err(gbx_agent_write_all(f->a, NULL, q, 0644, "x", 1, &e), &e, ENOENT, "nodir/file");
    e = NULL;
    /* writing or reading a directory */
    expect_err(gbx_agent_write_all(f->a, NULL, tmpdir, 0644, "x", 1, &e), &e, EISDIR, NULL);
    e = NULL;
    expect_err(gbx_agent_read_all(f->a, NULL, tmpdir, 100, &d, &n, &e), &e, EISDIR, NULL);
    e = NULL;
    /* unknown handle */
    expect_err(gbx_agent_write_data(f->a, 999, "x", 1, &e), &e, EBADF, NULL);
    e = NULL;
    /* 64 open handles, then EMFILE */
    uint32_t hs[64];
    for (int i = 0; i < 64; i++) {
        tpath(q, sizeof(q), "many-%d", i);
        assert_int_equal(
            gbx_agent_write_open(f->a, NULL, q, 0644, GBX_W_CREATE | GBX_W_ATOMIC, &hs[i], &e), 0);
    }
    tpath(q, sizeof(q), "many-64");
    expect_err(gbx_agent_write_open(f->a, NULL, q, 0644, GBX_W_CREATE, &h, &e), &e, EMFILE, NULL);
    e = NULL;
    for (int i = 0; i < 64; i++)
        assert_int_equal(gbx_agent_write_end(f->a, hs[i], 0, NULL, &e), 0);
    tpath(q, sizeof(q), "many-0");
    assert_int_equal(access(q, F_OK), -1);
    /* too long a path */
    char *longp = malloc(5000);
    memset(longp, 'a', 4999);
    longp[0] = '/';
    longp[4999] = 0;
    struct gbx_file_stat fs;
    expect_err(gbx_agent_stat(f->a, NULL, longp, 1, &fs, &e), &e, ENAMETOOLONG, NULL);
    free(longp);
}

static void test_file_write_as_user_uses_their_credentials(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    char d1[512], d2[512], p[600];
    tpath(d1, sizeof(d1), "private");
    tpath(d2, sizeof(d2), "shared");
    assert_int_equal(mkdir(d1, 0700), 0);
    assert_int_equal(mkdir(d2, 0777), 0);
    chmod(d2, 0777);
    snprintf(p, sizeof(p), "%s/x", d1);
    expect_err(gbx_agent_write_all(f->a, "nobody", p, 0644, "x", 1, &e), &e, EACCES,
               "Permission denied");
    e = NULL;
    snprintf(p, sizeof(p), "%s/x", d2);
    assert_int_equal(gbx_agent_write_all(f->a, "nobody", p, 0644, "x", 1, &e), 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(st.st_gid, 65534);
    snprintf(p, sizeof(p), "%s/dir", d2);
    assert_int_equal(gbx_agent_mkdir(f->a, "nobody", p, 0750, 0, &e), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(st.st_mode & 07777, 0750);
    /* root's own file read by nobody: denied */
    snprintf(p, sizeof(p), "%s/secret", d2);
    write_host(p, "s", 1);
    chmod(p, 0600);
    uint8_t *d;
    size_t n;
    expect_err(gbx_agent_read_all(f->a, "nobody", p, 100, &d, &n, &e), &e, EACCES, NULL);
    e = NULL;
    /* credentials were restored: root can read it */
    assert_int_equal(gbx_agent_read_all(f->a, NULL, p, 100, &d, &n, &e), 0);
    free(d);
}

static void test_file_stat_and_symlink(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    char p[512], l[512];
    tpath(p, sizeof(p), "st.txt");
    write_host(p, "12345", 5);
    chmod(p, 0604);
    tpath(l, sizeof(l), "st.link");
    assert_int_equal(symlink("st.txt", l), 0);
    struct gbx_file_stat st;
    assert_int_equal(gbx_agent_stat(f->a, NULL, p, 1, &st, &e), 0);
    assert_int_equal(st.ftype, GBX_FT_FILE);
    assert_int_equal(st.size, 5);
    assert_int_equal(st.mode, 0604);
    assert_int_equal(st.uid, 0);
    assert_string_equal(st.name, "st.txt");
    assert_null(st.link);
    struct stat hs;
    stat(p, &hs);
    assert_true(st.mtime_ns ==
                (uint64_t)hs.st_mtim.tv_sec * 1000000000ull + (uint64_t)hs.st_mtim.tv_nsec);
    gbx_file_stat_release(&st);
    assert_int_equal(gbx_agent_stat(f->a, NULL, l, 0, &st, &e), 0);
    assert_int_equal(st.ftype, GBX_FT_SYMLINK);
    assert_string_equal(st.link, "st.txt");
    gbx_file_stat_release(&st);
    assert_int_equal(gbx_agent_stat(f->a, NULL, l, 1, &st, &e), 0);
    assert_int_equal(st.ftype, GBX_FT_FILE);
    assert_int_equal(st.size, 5);
    gbx_file_stat_release(&st);
    assert_int_equal(gbx_agent_stat(f->a, NULL, tmpdir, 1, &st, &e), 0);
    assert_int_equal(st.ftype, GBX_FT_DIR);
    gbx_file_stat_release(&st);
    tpath(p, sizeof(p), "missing");
    expect_err(gbx_agent_stat(f->a, NULL, p, 1, &st, &e), &e, ENOENT, "No such file or directory");
    e = NULL;
    /* relative paths are relative to the user's home (root: /root) */
    assert_int_equal(gbx_agent_stat(f->a, NULL, ".", 1, &st, &e), 0);
    struct stat rs;
    assert_int_equal(stat("/root", &rs), 0);
    assert_true(st.mtime_ns ==
                (uint64_t)rs.st_mtim.tv_sec * 1000000000ull + (uint64_t)rs.st_mtim.tv_nsec);
    gbx_file_stat_release(&st);
}

static int has_name(struct gbx_file_stat *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return 1;
    return 0;
}

static void test_file_list_depth_does_not_follow_symlinks(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    char p[512];
    tpath(p, sizeof(p), "tree");
    mkdir(p, 0755);
    tpath(p, sizeof(p), "tree/sub");
    mkdir(p, 0755);
    tpath(p, sizeof(p), "tree/sub/deep");
    mkdir(p, 0755);
    tpath(p, sizeof(p), "tree/a");
    write_host(p, "a", 1);
    tpath(p, sizeof(p), "tree/sub/b");
    write_host(p, "bb", 2);
    tpath(p, sizeof(p), "tree/sub/deep/c");
    write_host(p, "c", 1);
    tpath(p, sizeof(p), "tree/link");
    assert_int_equal(symlink("sub", p), 0);
    tpath(p, sizeof(p), "tree");
    struct gbx_file_stat *v;
    size_t n;
    assert_int_equal(gbx_agent_list(f->a, NULL, p, 1, &v, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_true(has_name(v, n, "a") && has_name(v, n, "sub") && has_name(v, n, "link"));
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].name, "link") == 0) {
            assert_int_equal(v[i].ftype, GBX_FT_SYMLINK);
            assert_string_equal(v[i].link, "sub");
        }
    }
    gbx_file_stat_array_free(v, n);
    assert_int_equal(gbx_agent_list(f->a, NULL, p, 2, &v, &n, &e), 0);
    assert_int_equal(n, 5);
    assert_true(has_name(v, n, "sub/b") && has_name(v, n, "sub/deep"));
    assert_false(has_name(v, n, "link/b"));
    assert_false(has_name(v, n, "sub/deep/c"));
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, "sub/b") == 0)
            assert_int_equal(v[i].size, 2);
    gbx_file_stat_array_free(v, n);
    assert_int_equal(gbx_agent_list(f->a, NULL, p, 32, &v, &n, &e), 0);
    assert_int_equal(n, 6);
    gbx_file_stat_array_free(v, n);
    /* a big directory streams in several DIRENT frames */
    tpath(p, sizeof(p), "bigdir");
    mkdir(p, 0755);
    for (int i = 0; i < 1500; i++) {
        char q[600];
        snprintf(q, sizeof(q), "%s/file-with-a-longish-name-%05d", p, i);
        write_host(q, "", 0);
    }
    assert_int_equal(gbx_agent_list(f->a, NULL, p, 1, &v, &n, &e), 0);
    assert_int_equal(n, 1500);
    gbx_file_stat_array_free(v, n);
    tpath(p, sizeof(p), "tree/a");
    expect_err(gbx_agent_list(f->a, NULL, p, 1, &v, &n, &e), &e, ENOTDIR, NULL);
}

static void test_file_mkdir_remove_rename_chmod(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    char p[512], q[512];
    struct stat st;
    tpath(p, sizeof(p), "m/a/b/c");
    assert_int_equal(gbx_agent_mkdir(f->a, NULL, p, 0700, 1, &e), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(gbx_agent_mkdir(f->a, NULL, p, 0700, 1, &e), 0); /* -p: exists is ok */
    expect_err(gbx_agent_mkdir(f->a, NULL, p, 0700, 0, &e), &e, EEXIST, "cannot create");
    e = NULL;
    tpath(q, sizeof(q), "m/a/file");
    write_host(q, "x", 1);
    expect_err(gbx_agent_mkdir(f->a, NULL, q, 0700, 1, &e), &e, EEXIST, NULL);
    e = NULL;
    /* chmod */
    assert_int_equal(gbx_agent_chmod(f->a, NULL, q, 0611, &e), 0);
    assert_int_equal(stat(q, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0611);
    /* rename and noreplace */
    tpath(p, sizeof(p), "m/a/renamed");
    assert_int_equal(gbx_agent_rename(f->a, NULL, q, p, 0, &e), 0);
    assert_int_equal(access(q, F_OK), -1);
    assert_int_equal(access(p, F_OK), 0);
    write_host(q, "y", 1);
    expect_err(gbx_agent_rename(f->a, NULL, q, p, 1, &e), &e, EEXIST, "cannot rename");
    e = NULL;
    /* remove: a file, a non-empty dir without and with RECURSIVE */
    assert_int_equal(gbx_agent_remove(f->a, NULL, q, 0, &e), 0);
    assert_int_equal(access(q, F_OK), -1);
    tpath(p, sizeof(p), "m");
    expect_err(gbx_agent_remove(f->a, NULL, p, 0, &e), &e, ENOTEMPTY, "cannot remove");
    e = NULL;
    /* a symlink inside the tree pointing outside must not be followed */
    char outside[512], lnk[512];
    tpath(outside, sizeof(outside), "outside");
    mkdir(outside, 0755);
    tpath(q, sizeof(q), "outside/keep");
    write_host(q, "k", 1);
    tpath(lnk, sizeof(lnk), "m/a/escape");
    assert_int_equal(symlink(outside, lnk), 0);
    assert_int_equal(gbx_agent_remove(f->a, NULL, p, 1, &e), 0);
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(access(q, F_OK), 0);
    expect_err(gbx_agent_remove(f->a, NULL, p, 0, &e), &e, ENOENT, NULL);
    e = NULL;
    expect_err(gbx_agent_remove(f->a, NULL, "/", 1, &e), &e, EBUSY, NULL);
    e = NULL;
    expect_err(gbx_agent_remove(f->a, NULL, "/..", 1, &e), &e, EINVAL, NULL);
}

static void test_watch_create_write_remove_recursive(void **state)
{
    struct fix *f = *state;
    struct gbx_err *e = NULL;
    char w[512], p[600];
    tpath(w, sizeof(w), "watched");
    mkdir(w, 0755);
    uint32_t h;
    assert_int_equal(gbx_agent_watch(f->a, NULL, w, 1, &h, &e), 0);
    struct gbx_event ev;
    uint32_t seen = 0;
    snprintf(p, sizeof(p), "%s/f", w);
    write_host(p, "x", 1);
    snprintf(p, sizeof(p), "%s/sub", w);
    mkdir(p, 0755);
    int sub_created = 0;
    /* wait for CREATE f, WRITE f, CREATE sub */
    while (!(seen & 1) || !(seen & 2) || !sub_created) {
        assert_int_equal(gbx_agent_next_event(f->a, &ev, 5000, &e), 1);
        assert_int_equal(ev.kind, GBX_EVENT_WATCH);
        assert_int_equal(ev.id, h);
        if (strcmp(ev.name, "f") == 0)
            seen |= ev.wevent;
        if (strcmp(ev.name, "sub") == 0 && (ev.wevent & GBX_WE_CREATE))
            sub_created = 1;
        gbx_event_release(&ev);
    }
    assert_true(seen & GBX_WE_CREATE);
    assert_true(seen & GBX_WE_WRITE);
    /* the new directory is watched too */
    snprintf(p, sizeof(p), "%s/sub/g", w);
    write_host(p, "y", 1);
    int got = 0;
    while (!got) {
        assert_int_equal(gbx_agent_next_event(f->a, &ev, 5000, &e), 1);
        got = strcmp(ev.name, "sub/g") == 0 && (ev.wevent & GBX_WE_CREATE);
        gbx_event_release(&ev);
    }
    snprintf(p, sizeof(p), "%s/f", w);
    unlink(p);
    got = 0;
    while (!got) {
        assert_int_equal(gbx_agent_next_event(f->a, &ev, 5000, &e), 1);
        got = strcmp(ev.name, "f") == 0 && (ev.wevent & GBX_WE_REMOVE);
        gbx_event_release(&ev);
    }
    assert_int_equal(gbx_agent_unwatch(f->a, h, &e), 0);
    snprintf(p, sizeof(p), "%s/after", w);
    write_host(p, "z", 1);
    assert_int_equal(gbx_agent_next_event(f->a, &ev, 300, &e), 0);
    expect_err(gbx_agent_unwatch(f->a, h, &e), &e, ENOENT, NULL);
    e = NULL;
    expect_err(gbx_agent_watch(f->a, NULL, p, 0, &h, &e), &e, ENOTDIR, "cannot watch");
}

/* ---- in-root resolution --------------------------------------------------------------------- */

static void test_paths_resolve_inside_root(void **state)
{
    (void)state;
    char root[512], p[600];
    tpath(root, sizeof(root), "root");
    mkdir(root, 0755);
    snprintf(p, sizeof(p), "%s/etc", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/etc/passwd", root);
    write_host(p, "fake-passwd\n", 12);
    snprintf(p, sizeof(p), "%s/root", root); /* root's home, for relative paths */
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/abs", root);
    assert_int_equal(symlink("/etc/passwd", p), 0);
    snprintf(p, sizeof(p), "%s/up", root);
    assert_int_equal(symlink("../../../../../../etc/passwd", p), 0);
    snprintf(p, sizeof(p), "%s/rootlink", root);
    assert_int_equal(symlink("/", p), 0);
    snprintf(p, sizeof(p), "%s/procself", root);
    assert_int_equal(symlink("/proc/self/root/etc/passwd", p), 0);

    pid_t ipid;
    struct gbx_agent *a = open_agent(spawn_init(root, -1, &ipid));
    struct gbx_err *e = NULL;
    uint8_t *d;
    size_t n;
    const char *inside[] = {
        "/etc/passwd",         "/../../etc/passwd",       "/abs", "/up", "/rootlink/etc/passwd",
        "../../../etc/passwd", "/rootlink/../etc/passwd", NULL};
    for (const char **ip = inside; *ip; ip++) {
        if (gbx_agent_read_all(a, NULL, *ip, 1 << 20, &d, &n, &e) < 0)
            fail_msg("read %s: %s", *ip, e->msg);
        if (n != 12 || memcmp(d, "fake-passwd\n", 12) != 0)
            fail_msg("read %s escaped the root", *ip);
        free(d);
    }
    /* no /proc in this root: the magic link route does not exist */
    expect_err(gbx_agent_read_all(a, NULL, "/procself", 1 << 20, &d, &n, &e), &e, ENOENT, NULL);
    e = NULL;
    /* writes through an absolute directory symlink land inside the root */
    assert_int_equal(gbx_agent_write_all(a, NULL, "/rootlink/escaped", 0644, "e", 1, &e), 0);
    snprintf(p, sizeof(p), "%s/escaped", root);
    assert_int_equal(access(p, F_OK), 0);
    assert_int_equal(access("/escaped", F_OK), -1);
    /* mkdir -p through "..": inside */
    assert_int_equal(gbx_agent_mkdir(a, NULL, "/../../gbx-t200-mk/x", 0755, 1, &e), 0);
    snprintf(p, sizeof(p), "%s/gbx-t200-mk/x", root);
    assert_int_equal(access(p, F_OK), 0);
    assert_int_equal(access("/gbx-t200-mk", F_OK), -1);
    /* removing a symlink removes the link, never its target */
    assert_int_equal(gbx_agent_remove(a, NULL, "/abs", 1, &e), 0);
    assert_int_equal(gbx_agent_remove(a, NULL, "/rootlink", 1, &e), 0);
    assert_int_equal(access("/etc/passwd", F_OK), 0);
    snprintf(p, sizeof(p), "%s/etc/passwd", root);
    assert_int_equal(access(p, F_OK), 0);
    /* the root itself cannot be removed */
    expect_err(gbx_agent_remove(a, NULL, "/", 1, &e), &e, EBUSY, NULL);
    e = NULL;
    struct gbx_file_stat *v;
    assert_int_equal(gbx_agent_list(a, NULL, "/", 1, &v, &n, &e), 0);
    assert_true(has_name(v, n, "etc") && has_name(v, n, "escaped"));
    assert_false(has_name(v, n, "usr"));
    gbx_file_stat_array_free(v, n);
    assert_int_equal(gbx_agent_shutdown(a, &e), 0);
    gbx_agent_free(a);
    wait_exit(ipid, 5000);
}

/* ---- malformed input ------------------------------------------------------------------------ */

static void raw_send(int fd, const void *buf, size_t len)
{
    assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void raw_send_frame(int fd, uint16_t type, uint32_t id, const uint8_t *payload, size_t len)
{
    uint8_t hdr[GBX_FRAME_HDR_SIZE];
    gbx_frame_encode_hdr(hdr, type, id, (uint32_t)len);
    hdr[0] = (uint8_t)len;
    hdr[1] = (uint8_t)(len >> 8);
    hdr[2] = (uint8_t)(len >> 16);
    hdr[3] = (uint8_t)(len >> 24);
    raw_send(fd, hdr, sizeof(hdr));
    if (len)
        raw_send(fd, payload, len);
}

static int read_full(int fd, uint8_t *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        ssize_t n = read(fd, buf + off, len - off);
        if (n <= 0)
            return off == 0 ? 0 : -1;
        off += (size_t)n;
    }
    return 1;
}

/* Receive one frame: returns 1 with type/id/payload, 0 on EOF. */
static int raw_recv(int fd, uint16_t *type, uint32_t *id, uint8_t *payload, size_t *len)
{
    uint8_t hdr[GBX_FRAME_HDR_SIZE];
    int r = read_full(fd, hdr, sizeof(hdr));
    if (r <= 0)
        return 0;
    struct gbx_frame_hdr h;
    assert_int_equal(gbx_frame_decode_hdr(hdr, sizeof(hdr), &h), 0);
    if (h.len)
        assert_int_equal(read_full(fd, payload, h.len), 1);
    *type = h.type;
    *id = h.id;
    *len = h.len;
    return 1;
}

static void expect_raw_error(int fd, uint32_t id, uint32_t errnum)
{
    uint8_t payload[4096];
    uint16_t type;
    uint32_t rid, e = 0;
    size_t len;
    assert_int_equal(raw_recv(fd, &type, &rid, payload, &len), 1);
    assert_int_equal(type, GBX_MSG_ERROR);
    assert_int_equal(rid, id);
    assert_int_equal(gbx_attrs_get_u32(payload, len, GBX_A_ERRNO, &e), 1);
    assert_int_equal(e, errnum);
    char msg[256];
    assert_int_equal(gbx_attrs_get_str(payload, len, GBX_A_MESSAGE, msg, sizeof(msg)), 1);
    assert_true(strlen(msg) > 0);
}

static void expect_raw_ok(int fd, uint32_t id)
{
    uint8_t payload[4096];
    uint16_t type;
    uint32_t rid;
    size_t len;
    assert_int_equal(raw_recv(fd, &type, &rid, payload, &len), 1);
    assert_int_equal(type, GBX_MSG_OK);
    assert_int_equal(rid, id);
}

static void test_malformed_payload_and_unknown_type_keep_connection(void **state)
{
    (void)state;
    pid_t ipid;
    int fd = spawn_init(NULL, -1, &ipid);
    /* truncated attribute: header says 100 bytes, 4 follow */
    uint8_t bad[12] = {(uint8_t)GBX_A_PATH, 0, 0, 0, 100, 0, 0, 0, 'a', 'b', 'c', 'd'};
    raw_send_frame(fd, GBX_MSG_STAT, 7, bad, sizeof(bad));
    expect_raw_error(fd, 7, EBADMSG);
    /* a non-zero reserved field in an attribute header */
    uint8_t bad2[8] = {(uint8_t)GBX_A_PATH, 0, 1, 0, 0, 0, 0, 0};
    raw_send_frame(fd, GBX_MSG_PING, 8, bad2, sizeof(bad2));
    expect_raw_error(fd, 8, EBADMSG);
    /* unknown message type */
    raw_send_frame(fd, 0x7f, 9, NULL, 0);
    expect_raw_error(fd, 9, EOPNOTSUPP);
    /* a missing required attribute; a wrongly sized integer */
    raw_send_frame(fd, GBX_MSG_STAT, 10, NULL, 0);
    expect_raw_error(fd, 10, EINVAL);
    uint8_t badint[10] = {(uint8_t)GBX_A_PROC, 0, 0, 0, 2, 0, 0, 0, 1, 2};
    raw_send_frame(fd, GBX_MSG_SIGNAL, 11, badint, sizeof(badint));
    expect_raw_error(fd, 11, EINVAL);
    /* a string with a NUL */
    uint8_t nul[10] = {(uint8_t)GBX_A_PATH, 0, 0, 0, 2, 0, 0, 0, '/', 0};
    raw_send_frame(fd, GBX_MSG_STAT, 12, nul, sizeof(nul));
    expect_raw_error(fd, 12, EINVAL);
    /* an event type sent as a request */
    raw_send_frame(fd, GBX_EV_EXIT, 13, NULL, 0);
    expect_raw_error(fd, 13, EOPNOTSUPP);
    /* the connection still works */
    raw_send_frame(fd, GBX_MSG_PING, 14, NULL, 0);
    expect_raw_ok(fd, 14);
    /* requests split across many writes */
    uint8_t hdr[GBX_FRAME_HDR_SIZE];
    gbx_frame_encode_hdr(hdr, GBX_MSG_PING, 15, 0);
    for (size_t i = 0; i < sizeof(hdr); i++) {
        raw_send(fd, hdr + i, 1);
        usleep(1000);
    }
    expect_raw_ok(fd, 15);
    close(fd);
    int st = wait_exit(ipid, 5000);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_garbage_header_gets_error_then_close(void **state)
{
    (void)state;
    pid_t ipid;
    int fd = spawn_init(NULL, -1, &ipid);
    raw_send_frame(fd, GBX_MSG_PING, 1, NULL, 0);
    expect_raw_ok(fd, 1);
    raw_send(fd, "GET / HTTP/1.1\r\n\r\n", 18);
    expect_raw_error(fd, 0, EPROTO);
    uint8_t payload[64];
    uint16_t type;
    uint32_t id;
    size_t len;
    assert_int_equal(raw_recv(fd, &type, &id, payload, &len), 0); /* closed */
    close(fd);
    wait_exit(ipid, 5000);

    /* an oversized frame length */
    fd = spawn_init(NULL, -1, &ipid);
    uint8_t hdr[GBX_FRAME_HDR_SIZE];
    gbx_frame_encode_hdr(hdr, GBX_MSG_PING, 2, 0);
    hdr[3] = 0x40; /* 1 GiB */
    raw_send(fd, hdr, sizeof(hdr));
    expect_raw_error(fd, 0, EPROTO);
    assert_int_equal(raw_recv(fd, &type, &id, payload, &len), 0);
    close(fd);
    wait_exit(ipid, 5000);
}

static void test_random_garbage_never_crashes_init(void **state)
{
    (void)state;
    pid_t ipid;
    int fd = spawn_init(NULL, -1, &ipid);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint8_t payload[2048];
    for (int round = 0; round < 3000; round++) {
        size_t len = (size_t)(round % 200);
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            payload[i] = (uint8_t)x;
        }
        /* valid-looking attribute headers for some rounds */
        if (round % 3 == 0 && len >= 8) {
            payload[0] = (uint8_t)(1 + x % 45);
            payload[1] = 0;
            payload[2] = payload[3] = 0;
            uint32_t al = (uint32_t)(len - 8);
            memcpy(payload + 4, &al, 4);
        }
        uint16_t types[] = {GBX_MSG_STAT,      GBX_MSG_READ,  GBX_MSG_SIGNAL,
                            GBX_MSG_RESIZE,    GBX_MSG_STDIN, GBX_MSG_WRITE_DATA,
                            GBX_MSG_WRITE_END, GBX_MSG_LIST,  GBX_MSG_UNWATCH,
                            GBX_MSG_ATTACH,    GBX_MSG_HELLO, GBX_MSG_CLOSE_STDIN,
                            GBX_MSG_PS,        GBX_MSG_WATCH};
        uint16_t t = types[round % (int)(sizeof(types) / sizeof(types[0]))];
        raw_send_frame(fd, t, (uint32_t)round + 1, payload, len);
        uint8_t reply[GBX_FRAME_MAX_PAYLOAD];
        uint16_t type;
        uint32_t id;
        size_t rlen;
        /* drain every frame of this request until its final reply */
        do
            assert_int_equal(raw_recv(fd, &type, &id, reply, &rlen), 1);
        while (!(id == (uint32_t)round + 1 && (type == GBX_MSG_OK || type == GBX_MSG_ERROR)));
    }
    raw_send_frame(fd, GBX_MSG_PING, 99999, NULL, 0);
    expect_raw_ok(fd, 99999);
    close(fd);
    int st = wait_exit(ipid, 5000);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void rm_rf(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", path);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("skip: t200 needs root (file operations switch users)\n");
        return 77;
    }
    const char *bin = getenv("GBX_INIT");
    if (bin == NULL) {
        const char *b = getenv("BUILD");
        const char *repo = getenv("GBX_REPO");
        snprintf(init_bin, sizeof(init_bin), "%s%s%s/glovebox-init", repo ? repo : "",
                 repo ? "/" : "", b ? b : "build");
    } else {
        snprintf(init_bin, sizeof(init_bin), "%s", bin);
    }
    if (access(init_bin, X_OK) != 0) {
        printf("skip: %s not built\n", init_bin);
        return 77;
    }
    /* orphans of a shut-down init come to us, so we can tell they were killed */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gbx-t200-XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return 1;
    chmod(tmpdir, 0755);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hello_and_ping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn_echo_stdout_and_exit_0, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn_stderr_and_exit_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn_killed_by_signal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn_default_env_and_cwd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn_explicit_env_cwd_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn_exec_failure_is_an_error_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stdin_binary_roundtrip_1mib, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stdin_to_closed_reader_is_epipe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stdout_100mb_lossless_with_bounded_memory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_slow_reader_backpressure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_spawn_and_resize, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_reaches_process_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ps_lists_live_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orphans_are_reaped, setup, teardown),
        cmocka_unit_test(test_attach_after_reconnect_delivers_output_and_exit),
        cmocka_unit_test(test_shutdown_kills_processes),
        cmocka_unit_test(test_sigterm_kills_processes_and_exits_0),
        cmocka_unit_test(test_sixteen_connections_then_refused),
        cmocka_unit_test_setup_teardown(test_file_write_read_binary_and_20mb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_write_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_write_as_user_uses_their_credentials, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_file_stat_and_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_list_depth_does_not_follow_symlinks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_file_mkdir_remove_rename_chmod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_create_write_remove_recursive, setup, teardown),
        cmocka_unit_test(test_paths_resolve_inside_root),
        cmocka_unit_test(test_malformed_payload_and_unknown_type_keep_connection),
        cmocka_unit_test(test_garbage_header_gets_error_then_close),
        cmocka_unit_test(test_random_garbage_never_crashes_init),
    };
    int failed = cmocka_run_group_tests_name("t200-agent-direct", tests, NULL, NULL);
    rm_rf(tmpdir);
    return failed ? 1 : 0;
}
