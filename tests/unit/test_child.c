/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/child.c: helpers with a deadline, killed with their whole process
 * group when it passes or their caller cancels, their output collected. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/child.h"
#include "base/clock.h"

static int run(const char *script, char *out, size_t outsz, int64_t timeout_ms,
               const atomic_int *cancel)
{
    char sh[] = "sh", c[] = "-c";
    char *text = strdup(script);
    char *argv[] = {sh, c, text, NULL};
    struct gbx_child_opts o = {
        .out = out, .outsz = outsz, .keep_fd = -1, .timeout_ms = timeout_ms, .cancel = cancel};
    int r = gbx_child_run(argv, &o);
    free(text);
    return r;
}

/* Is a process with this pid still there (not a zombie)? */
static int alive(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] != 'Z';
}

static void test_status_and_output(void **state)
{
    char out[64];
    assert_int_equal(run("true", NULL, 0, 5000, NULL), 0);
    int st = run("exit 3", NULL, 0, 5000, NULL);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    st = run("kill -9 $$", NULL, 0, 5000, NULL);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_int_equal(run("echo hello; echo world >&2", out, sizeof(out), 5000, NULL), 0);
    assert_string_equal(out, "hello\n");
    /* more output than the buffer: cut, NUL-terminated, and the child is not blocked */
    assert_int_equal(run("head -c 100000 /dev/zero | tr '\\0' x", out, sizeof(out), 5000, NULL), 0);
    assert_int_equal(strlen(out), sizeof(out) - 1);
    char helper[] = "/nonexistent/helper";
    char *argv[] = {helper, NULL};
    struct gbx_child_opts o = {.keep_fd = -1, .timeout_ms = 5000};
    st = gbx_child_run(argv, &o);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 127);
}

static void test_deadline_kills_the_group(void **state)
{
    char out[64];
    int64_t t0 = gbx_monotonic_ns();
    /* a grandchild that keeps stdout open and a child that never ends */
    int st = run("sleep 30 & echo $!; sleep 30", out, sizeof(out), 300, NULL);
    int64_t ms = (gbx_monotonic_ns() - t0) / 1000000;
    assert_int_equal(st, -ETIMEDOUT);
    assert_true(ms >= 300);
    assert_true(ms < 10000); /* not the 30 s of its sleeps */
    pid_t grandchild = (pid_t)atoi(out);
    assert_true(grandchild > 0);
    for (int i = 0; i < 100 && alive(grandchild); i++)
        usleep(10000);
    assert_false(alive(grandchild));
    char buf[64];
    assert_non_null(strstr(gbx_child_status_str(st, 300, buf, sizeof(buf)), "killed"));
}

static atomic_int cancel_flag;

static void *cancel_soon(void *arg)
{
    (void)arg;
    usleep(200000);
    atomic_store(&cancel_flag, 1);
    return NULL;
}

static void test_cancel(void **state)
{
    pthread_t t;
    atomic_store(&cancel_flag, 0);
    assert_int_equal(pthread_create(&t, NULL, cancel_soon, NULL), 0);
    int64_t t0 = gbx_monotonic_ns();
    int st = run("sleep 30", NULL, 0, 0, &cancel_flag);
    int64_t ms = (gbx_monotonic_ns() - t0) / 1000000;
    pthread_join(t, NULL);
    assert_int_equal(st, -ECANCELED);
    assert_true(ms < 10000);
}

static void test_wait(void **state)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gbx_child_prepare();
        execlp("sleep", "sleep", "30", (char *)NULL);
        _exit(127);
    }
    assert_int_equal(gbx_child_wait(pid, 200, NULL), -ETIMEDOUT);
    assert_int_equal(waitpid(pid, NULL, WNOHANG), -1); /* reaped already */
    pid = fork();
    if (pid == 0)
        _exit(5);
    int st = gbx_child_wait(pid, 5000, NULL);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 5);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as in the daemon: the child must not inherit it */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_and_output),
        cmocka_unit_test(test_deadline_kills_the_group),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
