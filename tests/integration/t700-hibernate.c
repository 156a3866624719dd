/* SPDX-License-Identifier: MIT */
/* Hibernate through the library: a counter held in a process's memory survives a CRIU
 * checkpoint and a restore in another process, and so does the writable layer.
 * Skips (77) without CRIU >= 4 unless GLOVEBOX_REQUIRE_CRIU is set. */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../lib/sbtest.h"
#include "base/fileutil.h"
#include "base/mem.h"
#include "sandbox/criu.h"

static struct gbx_runtime *rt;

static int setup(void **state)
{
    rt = sbt_runtime_new();
    /* restored inits are re-parented to us when the restoring process exits */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    return 0;
}

static int teardown(void **state)
{
    if (getenv("GBX_TEST_KEEP")) { /* debugging: keep the checkpoints and their logs */
        fprintf(stderr, "kept %s\n", rt->runtime_dir);
        return 0;
    }
    sbt_runtime_free(rt);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long read_counter(struct gbx_agent *a)
{
    uint8_t *data = NULL;
    size_t len = 0;
    struct gbx_err *err = NULL;
    if (gbx_agent_read_all(a, NULL, "/tmp/c", 64, &data, &len, &err) < 0) {
        gbx_err_free(err);
        return -1;
    }
    long v = len ? strtol((char *)data, NULL, 10) : -1;
    free(data);
    return v;
}

/* The counter once it has counted past min (waits up to 5 s). */
static long counter_past(struct gbx_agent *a, long min)
{
    long v = -1;
    for (int i = 0; i < 250 && (v = read_counter(a)) <= min; i++)
        sleep_ms(20);
    return v;
}

/* MUST(call, what): call must succeed; it sets err otherwise (a macro: err is read after
 * the call, not before as a function argument might be) */
#define MUST(call, what)                                                                           \
    do {                                                                                           \
        if ((call) < 0) {                                                                          \
            fprintf(stderr, "%s: %s\n", what, err ? err->msg : "?");                               \
            gbx_err_free(err);                                                                     \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

static int proc_alive(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
    gbx_autofree char *st = NULL;
    /* a zombie is gone too */
    return gbx_read_file(p, 1 << 16, &st, NULL) == 0 && strstr(st, "State:\tZ") == NULL;
}

/* Every process running as one of the sandbox's host uids. */
static int procs_of_uid_range(uint32_t base)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        gbx_autofree char *p = gbx_asprintf("/proc/%s/status", de->d_name);
        gbx_autofree char *st = NULL;
        if (gbx_read_file(p, 1 << 16, &st, NULL) < 0 || strstr(st, "State:\tZ"))
            continue;
        const char *u = strstr(st, "\nUid:\t");
        if (u && (uint32_t)strtoul(u + 6, NULL, 10) - base < GBX_UID_RANGE)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

static void start_counter(struct sbt *t)
{
    struct sbt_result r;
    sbt_sh(t,
           "echo kept > /root/layer-file && "
           "setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.02; done' "
           "</dev/null >/dev/null 2>&1 &",
           &r);
    assert_int_equal(r.exit_code, 0);
    sbt_result_release(&r);
}

/* Checkpoint t's sandbox into dir; checks that it is gone. Returns the last counter value
 * read before. */
static long checkpoint(struct sbt *t, const char *dir)
{
    long before = counter_past(t->agent, 10);
    assert_true(before > 10);
    pid_t init = t->sb->init_pid;
    uint32_t base = t->sb->host_uid;
    gbx_agent_free(t->agent);
    t->agent = NULL;
    struct gbx_err *err = NULL;
    int gone = 0;
    int r = gbx_sandbox_checkpoint(t->sb, dir, &gone, &err);
    assert_int_equal(gone, 1); /* dumped: freed */
    t->sb = NULL;
    sbt_destroy(t); /* only unregisters t now */
    MUST(r, "checkpoint");
    assert_false(proc_alive(init));
    assert_int_equal(procs_of_uid_range(base), 0);
    struct stat st;
    gbx_autofree char *conf = gbx_asprintf("%s/hibernate.conf", dir);
    assert_int_equal(stat(conf, &st), 0);
    return before;
}

/* The restored sandbox counts on from where it was, and has its writable layer. */
static void check_restored(struct sbt *t, long before)
{
    long v1 = read_counter(t->agent);
    assert_true(v1 >= before);
    long v2 = counter_past(t->agent, v1 + 5);
    assert_true(v2 > v1 + 5);
    uint8_t *data = NULL;
    size_t len = 0;
    struct gbx_err *err = NULL;
    MUST(gbx_agent_read_all(t->agent, NULL, "/root/layer-file", 64, &data, &len, &err),
         "read layer file");
    assert_int_equal(len, 5);
    assert_memory_equal(data, "kept\n", 5);
    free(data);
    /* still confined as at create: a cgroup namespace rooted at the sandbox's groups */
    data = NULL;
    MUST(gbx_agent_read_all(t->agent, NULL, "/proc/1/cgroup", 4096, &data, &len, &err),
         "read /proc/1/cgroup");
    gbx_autofree char *cg = gbx_xstrndup((const char *)data, len);
    free(data);
    assert_non_null(strstr(cg, "0::/\n"));
    assert_null(strstr(cg, "glovebox"));
}

/* Skips (saying why) only when the probe says CRIU cannot work here; GLOVEBOX_REQUIRE_CRIU
 * makes that a failure, with the probe's reason, unless the probe measured that dumps hang on
 * this kernel (a host limit, not a missing build: tests/lib/daemon.sh does the same). */
static void require_criu(void)
{
    const char *path;
    struct gbx_err *err = NULL;
    struct gbx_runtime *probe_rt = sbt_runtime_new();
    int r = gbx_criu_usable(probe_rt, &path, &err);
    sbt_runtime_free(probe_rt);
    if (r < 0) {
        int required = getenv("GLOVEBOX_REQUIRE_CRIU") != NULL &&
                       strstr(err->msg, "hangs on this kernel") == NULL;
        printf("%s: criu unavailable: %s\n", required ? "FAIL" : "skip", err->msg);
        gbx_err_free(err);
        exit(required ? 1 : 77);
    }
}

/* Checkpoint, restore in a forked child (another process), adopt the restored sandbox
 * here; then a second cycle restored by this process itself. */
static void counter_survives_checkpoint_and_restore(void **state)
{
    struct sbt t;
    sbt_create(rt, &t, NULL, 0);
    start_counter(&t);
    gbx_autofree char *id = gbx_xstrdup(t.sb->id);
    uint32_t slot = t.sb->uid_slot, host_uid = t.sb->host_uid;
    gbx_autofree char *base = gbx_xstrdup(rt->runtime_dir);
    gbx_autofree char *dir1 = gbx_asprintf("%s/hib1", base);
    gbx_autofree char *dir2 = gbx_asprintf("%s/hib2", base);

    long before = checkpoint(&t, dir1);

    /* restore from another process */
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(p[0]);
        struct gbx_sandbox *sb = NULL;
        struct gbx_err *err = NULL;
        if (gbx_sandbox_restore(rt, dir1, id, &sb, &err) < 0) {
            fprintf(stderr, "restore in child: %s\n", err->msg);
            _exit(1);
        }
        pid_t pid = sb->init_pid;
        (void)!write(p[1], &pid, sizeof(pid));
        gbx_sandbox_forget(sb);
        _exit(0);
    }
    close(p[1]);
    pid_t init = 0;
    ssize_t n = read(p[0], &init, sizeof(init));
    close(p[0]);
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(n, sizeof(init));

    struct gbx_sandbox_record rec = {
        .id = id, .uid_slot = slot, .host_uid = host_uid, .init_pid = init};
    struct gbx_err *err = NULL;
    memset(&t, 0, sizeof(t));
    MUST(gbx_sandbox_adopt(rt, &rec, &t.sb, &err), "adopt restored sandbox");
    MUST(gbx_agent_open(gbx_steal_fd(&t.sb->conn_fd), &t.agent, &err), "agent");
    check_restored(&t, before);

    /* an adopted sandbox needs its spec back before it can be checkpointed again */
    struct gbx_sandbox_spec spec = {.id = id, .ctl_socket = 1};
    gbx_sandbox_keep_spec(t.sb, &spec);
    before = checkpoint(&t, dir2);
    MUST(gbx_sandbox_restore(rt, dir2, NULL, &t.sb, &err), "restore in this process");
    assert_string_equal(t.sb->id, id);
    MUST(gbx_agent_open(gbx_steal_fd(&t.sb->conn_fd), &t.agent, &err), "agent");
    check_restored(&t, before);

    /* a third time, into the first directory again: nothing of the old images is used */
    before = checkpoint(&t, dir1);
    MUST(gbx_sandbox_restore(rt, dir1, id, &t.sb, &err), "restore from a reused directory");
    MUST(gbx_agent_open(gbx_steal_fd(&t.sb->conn_fd), &t.agent, &err), "agent");
    check_restored(&t, before);
    sbt_destroy(&t);
    assert_int_equal(procs_of_uid_range(host_uid), 0);
}

/* A restore refuses a directory that holds another sandbox's checkpoint, or none. */
static void restore_refuses_bad_input(void **state)
{
    struct gbx_sandbox *sb = NULL;
    struct gbx_err *err = NULL;
    gbx_autofree char *dir = gbx_asprintf("%s/nothing", rt->runtime_dir);
    assert_int_equal(gbx_mkdir_p(dir, 0700), 0);
    assert_int_equal(gbx_sandbox_restore(rt, dir, NULL, &sb, &err), -1);
    assert_non_null(err);
    gbx_err_free(err);
    err = NULL;
    gbx_autofree char *conf = gbx_asprintf("%s/hibernate.conf", dir);
    static const char text[] = "id = sb-a\nuid_slot = 1\nhost_uid = 1\nplaceholder = 5\n"
                               "template = host\n";
    assert_int_equal(gbx_write_file_atomic(conf, text, sizeof(text) - 1, 0600), 0);
    assert_int_equal(gbx_sandbox_restore(rt, dir, NULL, &sb, &err), -1); /* uid mismatch */
    gbx_err_free(err);
    err = NULL;
    assert_null(sb);
}

int main(void)
{
    sbt_require_sandboxes();
    require_criu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(counter_survives_checkpoint_and_restore),
        cmocka_unit_test(restore_refuses_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
