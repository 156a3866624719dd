/* SPDX-License-Identifier: MIT */
/* Processes and files inside a real sandbox: users, data integrity, hostile paths,
 * zombies. (t200 covers the agent protocol itself against a bare glovebox-init.) */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../lib/sbtest.h"
#include "base/fileutil.h"
#include "base/mem.h"

static struct gbx_runtime *rt;
static struct sbt t;

static int setup(void **state)
{
    /* create the sandbox the way a daemon started in the background would: with SIGINT and
     * SIGQUIT ignored (and something blocked); none of it may reach the sandbox */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    /* and the real-time signals libcs reserve for themselves (set with the raw call, as
     * libc refuses to), as some process managers leave them */
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        unsigned long mask;
    } ksa = {SIG_IGN, 0, NULL, 0};
    for (int sig = 32; sig <= 34; sig++)
        syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGUSR1);
    sigprocmask(SIG_BLOCK, &blocked, NULL);
    rt = sbt_runtime_new();
    sbt_create(rt, &t, NULL, 0);
    return 0;
}

static int teardown(void **state)
{
    sbt_destroy(&t);
    sbt_runtime_free(rt);
    return 0;
}

static void users_and_homes(void **state)
{
    struct sbt_result r;
    const char *argv[] = {"/bin/sh", "-c", "id -u; id -g; id -un; pwd; echo $HOME", NULL};
    sbt_run(&t, "user", argv, NULL, 0, &r);
    assert_string_equal((char *)r.out, "1000\n1000\nuser\n/home/user\n/home/user\n");
    sbt_result_release(&r);
    sbt_run(&t, NULL, argv, NULL, 0, &r);
    assert_string_equal((char *)r.out, "0\n0\nroot\n/root\n/root\n");
    sbt_result_release(&r);
    /* "user" cannot read root's files or write system directories */
    const char *argv2[] = {"/bin/sh", "-c",
                           "cat /etc/shadow 2>/dev/null || echo denied; "
                           "touch /etc/x 2>/dev/null || echo denied2",
                           NULL};
    sbt_run(&t, "user", argv2, NULL, 0, &r);
    assert_string_equal((char *)r.out, "denied\ndenied2\n");
    sbt_result_release(&r);
}

/* init blocks and ignores signals for itself; none of that leaks into what it runs */
static void processes_start_with_default_signals(void **state)
{
    struct sbt_result r;
    sbt_sh(&t, "grep -E '^(SigBlk|SigIgn):' /proc/self/status; yes | head -1", &r);
    assert_string_equal((char *)r.out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\ny\n");
    sbt_result_release(&r);
}

/* init caches user lookups; a user added to /etc/passwd is usable at once */
static void new_users_are_seen(void **state)
{
    struct sbt_result r;
    const char *argv[] = {"/bin/sh", "-c", "id -u; id -un; echo $HOME", NULL};
    struct gbx_spawn_opts so = {.argv = argv, .user = "agent2"};
    uint32_t proc;
    pid_t pid;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_agent_spawn(t.agent, &so, &proc, &pid, &err), -1);
    assert_int_equal(err->errnum, ENOENT);
    gbx_err_free(err);
    sbt_sh(&t, "echo 'agent2:x:1500:1500::/tmp:/bin/sh' >> /etc/passwd && echo added", &r);
    assert_string_equal((char *)r.out, "added\n");
    sbt_result_release(&r);
    sbt_run(&t, "agent2", argv, NULL, 0, &r);
    assert_string_equal((char *)r.out, "1500\nagent2\n/tmp\n");
    sbt_result_release(&r);
}

static void hundred_mb_of_stdout_without_loss(void **state)
{
    struct sbt_result r;
    /* a pattern that is not all zeroes, so a dropped or duplicated chunk is visible */
    sbt_sh(&t, "seq 1 13000000 | head -c 100000000", &r);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(r.out_len, 100000000);
    /* recompute the same stream on the host side */
    size_t off = 0;
    char line[32];
    for (unsigned long i = 1; off < r.out_len; i++) {
        int n = snprintf(line, sizeof(line), "%lu\n", i);
        size_t take = (size_t)n < r.out_len - off ? (size_t)n : r.out_len - off;
        if (memcmp(r.out + off, line, take) != 0) {
            fprintf(stderr, "mismatch at offset %zu (line %lu)\n", off, i);
            fail();
        }
        off += take;
    }
    sbt_result_release(&r);
}

static void binary_stdin_round_trip(void **state)
{
    size_t n = 4 << 20;
    uint8_t *in = gbx_xmalloc(n);
    for (size_t i = 0; i < n; i++)
        in[i] = (uint8_t)(i * 7 + (i >> 8));
    struct sbt_result r;
    const char *argv[] = {"/bin/cat", NULL};
    sbt_run(&t, NULL, argv, in, n, &r);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(r.out_len, n);
    assert_memory_equal(r.out, in, n);
    sbt_result_release(&r);
    free(in);
}

static void large_binary_file_round_trip(void **state)
{
    size_t n = 24 << 20;
    uint8_t *data = gbx_xmalloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)((i * 2654435761u) >> 13);
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_agent_write_all(t.agent, "user", "/home/user/blob", 0600, data, n, &err),
                     0);
    uint8_t *back = NULL;
    size_t len = 0;
    assert_int_equal(
        gbx_agent_read_all(t.agent, "user", "/home/user/blob", 64 << 20, &back, &len, &err), 0);
    assert_int_equal(len, n);
    assert_memory_equal(back, data, n);
    free(back);
    /* the sandbox sees the same bytes, owned by "user" */
    struct sbt_result r;
    sbt_sh(&t, "stat -c '%U %a %s' /home/user/blob", &r);
    char want[64];
    snprintf(want, sizeof(want), "user 600 %zu\n", n);
    assert_string_equal((char *)r.out, want);
    sbt_result_release(&r);
    free(data);
}

static void hostile_paths_stay_inside(void **state)
{
    struct gbx_err *err = NULL;
    struct sbt_result r;
    /* plant traps inside the sandbox */
    sbt_sh(&t,
           "mkdir -p /home/user/trap && ln -sfn / /home/user/trap/root && "
           "ln -sfn /etc/shadow /home/user/trap/shadow && "
           "ln -sfn ../../../../../../etc /home/user/trap/up && echo ok",
           &r);
    assert_string_equal((char *)r.out, "ok\n");
    sbt_result_release(&r);
    gbx_autofree char *host_shadow = NULL;
    int have_host_shadow = gbx_read_file("/etc/shadow", 1 << 20, &host_shadow, NULL) == 0;
    const char *paths[] = {"/../../../../etc/shadow", "../../../../etc/shadow",
                           "/home/user/trap/shadow", "/home/user/trap/root/etc/shadow",
                           "/home/user/trap/up/shadow"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        uint8_t *data = NULL;
        size_t len = 0;
        err = NULL;
        int rr = gbx_agent_read_all(t.agent, NULL, paths[i], 1 << 20, &data, &len, &err);
        if (rr == 0) {
            /* whatever resolved is the sandbox's shadow, never the host's */
            assert_non_null(strstr((char *)data, "user:*:"));
            if (have_host_shadow)
                assert_false(len == strlen(host_shadow) && memcmp(data, host_shadow, len) == 0);
            free(data);
        } else {
            gbx_err_free(err);
        }
    }
    /* writes through a symlink pointing at / land in the sandbox */
    err = NULL;
    assert_int_equal(
        gbx_agent_write_all(t.agent, NULL, "/home/user/trap/root/tmp/escaped", 0644, "x", 1, &err),
        0);
    sbt_sh(&t, "cat /tmp/escaped", &r);
    assert_string_equal((char *)r.out, "x");
    sbt_result_release(&r);
    assert_int_not_equal(access("/tmp/escaped", F_OK), 0);
    /* removing through .. cannot climb out; removing / is refused */
    err = NULL;
    assert_int_equal(gbx_agent_remove(t.agent, NULL, "/", 1, &err), -1);
    gbx_err_free(err);
    err = NULL;
    sbt_sh(&t, "test -d /usr/bin && test -f /etc/passwd && echo intact", &r);
    assert_string_equal((char *)r.out, "intact\n");
    sbt_result_release(&r);
    /* a recursive remove does not follow the symlink to / */
    assert_int_equal(gbx_agent_remove(t.agent, NULL, "/home/user/trap", 1, &err), 0);
    sbt_sh(&t, "test -f /etc/passwd && test ! -e /home/user/trap && echo intact", &r);
    assert_string_equal((char *)r.out, "intact\n");
    sbt_result_release(&r);
}

/* Every file operation, aimed at a host path through "..", absolute symlinks and a symlink
 * to "/": each one lands inside the sandbox (or fails), and the host path is untouched. */
static void hostile_paths_in_every_operation(void **state)
{
    char hostdir[] = "/tmp/gbx-hostile-XXXXXX";
    assert_non_null(mkdtemp(hostdir));
    gbx_autofree char *secret = gbx_asprintf("%s/secret", hostdir);
    assert_int_equal(gbx_write_file_atomic(secret, "host", 4, 0644), 0);
    struct stat host_shadow_before;
    int have_shadow = stat("/etc/shadow", &host_shadow_before) == 0;
    struct sbt_result r;
    sbt_sh(&t,
           "mkdir -p /home/user/t2 && ln -sfn / /home/user/t2/root && "
           "ln -sfn /etc/shadow /home/user/t2/shadow && echo content > /home/user/t2/f && "
           "echo ok",
           &r);
    assert_string_equal((char *)r.out, "ok\n");
    sbt_result_release(&r);
    struct gbx_err *err = NULL;
    gbx_autofree char *via_dots = gbx_asprintf("/../../..%s/secret", hostdir);
    gbx_autofree char *via_link = gbx_asprintf("/home/user/t2/root%s/secret", hostdir);
    gbx_autofree char *via_link_dir = gbx_asprintf("/home/user/t2/root%s", hostdir);

    /* stat and read: the host file is not there */
    struct gbx_file_stat st;
    assert_int_equal(gbx_agent_stat(t.agent, NULL, via_dots, 1, &st, &err), -1);
    assert_int_equal(err->errnum, ENOENT);
    gbx_err_free(err), err = NULL;
    assert_int_equal(gbx_agent_stat(t.agent, NULL, via_link, 1, &st, &err), -1);
    gbx_err_free(err), err = NULL;
    uint8_t *data = NULL;
    size_t len;
    assert_int_equal(gbx_agent_read_all(t.agent, NULL, via_link, 1024, &data, &len, &err), -1);
    gbx_err_free(err), err = NULL;
    /* list */
    struct gbx_file_stat *ents = NULL;
    size_t n = 0;
    assert_int_equal(gbx_agent_list(t.agent, NULL, via_link_dir, 1, &ents, &n, &err), -1);
    gbx_err_free(err), err = NULL;
    /* write and mkdir land inside */
    assert_int_equal(gbx_agent_write_all(t.agent, NULL, via_dots, 0644, "sbx", 3, &err), -1);
    gbx_err_free(err), err = NULL; /* the directory does not exist inside */
    gbx_autofree char *mk = gbx_asprintf("/home/user/t2/root%s/made", hostdir);
    assert_int_equal(gbx_agent_mkdir(t.agent, NULL, mk, 0755, 1, &err), 0);
    gbx_autofree char *host_made = gbx_asprintf("%s/made", hostdir);
    assert_int_not_equal(access(host_made, F_OK), 0);
    gbx_autofree char *chk = gbx_asprintf("test -d '%s/made' && echo inside", hostdir);
    sbt_sh(&t, chk, &r);
    assert_string_equal((char *)r.out, "inside\n");
    sbt_result_release(&r);
    /* rename through the symlink to / moves within the sandbox */
    assert_int_equal(gbx_agent_rename(t.agent, NULL, "/home/user/t2/f",
                                      "/home/user/t2/root/home/gbx-moved", 0, &err),
                     0);
    sbt_sh(&t, "cat /home/gbx-moved", &r);
    assert_string_equal((char *)r.out, "content\n");
    sbt_result_release(&r);
    assert_int_not_equal(access("/home/gbx-moved", F_OK), 0);
    /* across filesystems (overlay root -> tmpfs /tmp) a rename is refused, not copied */
    assert_int_equal(gbx_agent_rename(t.agent, NULL, "/home/gbx-moved", "/tmp/x", 0, &err), -1);
    assert_int_equal(err->errnum, EXDEV);
    gbx_err_free(err), err = NULL;
    /* chmod through an absolute symlink changes the sandbox's copy only */
    assert_int_equal(gbx_agent_chmod(t.agent, NULL, "/home/user/t2/shadow", 0604, &err), 0);
    sbt_sh(&t, "stat -c %a /etc/shadow", &r);
    assert_string_equal((char *)r.out, "604\n");
    sbt_result_release(&r);
    if (have_shadow) {
        struct stat after;
        assert_int_equal(stat("/etc/shadow", &after), 0);
        assert_int_equal(after.st_mode, host_shadow_before.st_mode);
    }
    /* remove cannot reach the host file */
    assert_int_equal(gbx_agent_remove(t.agent, NULL, via_link, 0, &err), -1);
    gbx_err_free(err), err = NULL;
    assert_int_equal(gbx_agent_remove(t.agent, NULL, via_dots, 1, &err), -1);
    gbx_err_free(err), err = NULL;
    assert_int_equal(access(secret, F_OK), 0);
    /* watch through the symlink watches the sandbox's /tmp: a host-side change is silent */
    uint32_t wh;
    assert_int_equal(gbx_agent_watch(t.agent, NULL, "/home/user/t2/root/tmp", 0, &wh, &err), 0);
    assert_int_equal(gbx_write_file_atomic("/tmp/gbx-hostile-host-side", "x", 1, 0644), 0);
    /* (a file operation, not a command: the command helper would swallow the event) */
    assert_int_equal(gbx_agent_write_all(t.agent, NULL, "/tmp/inside-event", 0644, "y", 1, &err),
                     0);
    int saw_inside = 0, saw_host = 0;
    struct gbx_event ev;
    while (gbx_agent_next_event(t.agent, &ev, 500, NULL) == 1) {
        if (ev.kind == GBX_EVENT_WATCH && ev.name) {
            if (strstr(ev.name, "inside-event"))
                saw_inside = 1;
            if (strstr(ev.name, "gbx-hostile-host-side"))
                saw_host = 1;
        }
        gbx_event_release(&ev);
        if (saw_inside)
            break;
    }
    assert_true(saw_inside);
    assert_false(saw_host);
    assert_int_equal(gbx_agent_unwatch(t.agent, wh, &err), 0);
    unlink("/tmp/gbx-hostile-host-side");
    (void)!gbx_rm_rf(hostdir);
}

static void orphans_are_reaped(void **state)
{
    struct sbt_result r;
    for (int i = 0; i < 20; i++) {
        sbt_sh(&t, "sleep 0.01 & exit 0", &r);
        sbt_result_release(&r);
    }
    usleep(300000);
    sbt_sh(&t, "grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l", &r);
    assert_string_equal((char *)r.out, "0\n");
    sbt_result_release(&r);
}

static void pty_inside_sandbox(void **state)
{
    struct gbx_spawn_opts so = {.argv =
                                    (const char *const[]){"/bin/sh", "-c", "tty; stty size", NULL},
                                .pty = 1,
                                .rows = 33,
                                .cols = 101};
    uint32_t proc;
    pid_t pid;
    assert_int_equal(gbx_agent_spawn(t.agent, &so, &proc, &pid, NULL), 0);
    char out[4096] = "";
    size_t n = 0;
    for (;;) {
        struct gbx_event ev;
        assert_int_equal(gbx_agent_next_event(t.agent, &ev, 10000, NULL), 1);
        int done = ev.kind == GBX_EVENT_EXIT;
        if (ev.kind == GBX_EVENT_STDOUT && n + ev.len < sizeof(out)) {
            memcpy(out + n, ev.data, ev.len);
            n += ev.len;
            out[n] = '\0';
        }
        gbx_event_release(&ev);
        if (done)
            break;
    }
    assert_non_null(strstr(out, "/dev/pts/"));
    assert_non_null(strstr(out, "33 101"));
}

int main(void)
{
    sbt_require_sandboxes();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(users_and_homes),
        cmocka_unit_test(processes_start_with_default_signals),
        cmocka_unit_test(new_users_are_seen),
        cmocka_unit_test(hundred_mb_of_stdout_without_loss),
        cmocka_unit_test(binary_stdin_round_trip),
        cmocka_unit_test(large_binary_file_round_trip),
        cmocka_unit_test(hostile_paths_stay_inside),
        cmocka_unit_test(hostile_paths_in_every_operation),
        cmocka_unit_test(orphans_are_reaped),
        cmocka_unit_test(pty_inside_sandbox),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
