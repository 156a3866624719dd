/* SPDX-License-Identifier: MIT */
/* Resource bombs stay inside their sandbox: pids, memory and disk limits hold, and the host
 * and a neighbouring sandbox carry on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../lib/sbtest.h"

static struct gbx_runtime *rt;

static int setup(void **state)
{
    rt = sbt_runtime_new();
    return 0;
}

static int teardown(void **state)
{
    sbt_runtime_free(rt);
    return 0;
}

static void fork_bomb_stops_at_pids_limit(void **state)
{
    struct sbt t;
    struct gbx_cg_limits lim = {.pids = 64};
    sbt_create(rt, &t, &lim, 0);
    sbt_install_probe(&t);
    struct sbt_result r;
    const char *argv[] = {"/tmp/gbx-probe", "forkbomb", NULL};
    sbt_run(&t, NULL, argv, NULL, 0, &r);
    fprintf(stderr, "forkbomb: %s", r.out);
    assert_non_null(strstr((char *)r.out, "forkbomb EAGAIN"));
    int n = atoi((char *)r.out + strlen("forkbomb EAGAIN "));
    assert_true(n > 0 && n < 64);
    sbt_result_release(&r);
    /* the sandbox still works once the bomb is gone */
    sbt_sh(&t, "echo alive", &r);
    assert_string_equal((char *)r.out, "alive\n");
    sbt_result_release(&r);
    struct gbx_cg_usage u;
    assert_int_equal(t.sb->ops->usage(t.sb, &u, NULL), 0);
    assert_int_equal(u.pids_limit, 64);
    sbt_destroy(&t);
}

static void memory_bomb_is_oom_killed_inside(void **state)
{
    struct sbt bomb, neighbour;
    struct gbx_cg_limits lim = {.memory_bytes = 64 << 20};
    sbt_create(rt, &bomb, &lim, 0);
    sbt_create(rt, &neighbour, NULL, 0);
    sbt_install_probe(&bomb);
    struct sbt_result r;
    const char *argv[] = {"/tmp/gbx-probe", "membomb", "512", NULL};
    sbt_run(&bomb, NULL, argv, NULL, 0, &r);
    assert_int_equal(r.exit_signal, 9); /* SIGKILL from the OOM killer */
    assert_null(strstr((char *)r.out, "survived"));
    sbt_result_release(&r);
    struct gbx_cg_usage u;
    assert_int_equal(bomb.sb->ops->usage(bomb.sb, &u, NULL), 0);
    assert_true(u.oom_kills >= 1);
    assert_true(u.memory_peak_bytes <= (64u << 20));
    /* the bombed sandbox's init survived and still serves */
    sbt_sh(&bomb, "echo still-here", &r);
    assert_string_equal((char *)r.out, "still-here\n");
    sbt_result_release(&r);
    /* the neighbour is unaffected */
    sbt_sh(&neighbour, "head -c 100000000 /dev/zero | wc -c", &r);
    assert_string_equal((char *)r.out, "100000000\n");
    sbt_result_release(&r);
    sbt_destroy(&bomb);
    sbt_destroy(&neighbour);
}

static void full_writable_layer_gives_enospc(void **state)
{
    struct sbt t;
    sbt_create(rt, &t, NULL, 16 << 20);
    sbt_install_probe(&t);
    struct sbt_result r;
    const char *argv[] = {"/tmp/gbx-probe", "fill", "/home/user/big", NULL};
    sbt_run(&t, NULL, argv, NULL, 0, &r);
    fprintf(stderr, "fill: %s", r.out);
    assert_non_null(strstr((char *)r.out, "fill ENOSPC"));
    long long n = atoll((char *)r.out + strlen("fill ENOSPC "));
    assert_true(n > 0 && n <= (16ll << 20));
    sbt_result_release(&r);
    /* /tmp has the same bound */
    const char *argv2[] = {"/tmp/gbx-probe", "fill", "/tmp/big", NULL};
    sbt_run(&t, NULL, argv2, NULL, 0, &r);
    assert_non_null(strstr((char *)r.out, "fill ENOSPC"));
    sbt_result_release(&r);
    /* space comes back after the file is removed (the probe unlinks it) */
    sbt_sh(&t, "echo ok > /home/user/small && cat /home/user/small", &r);
    assert_string_equal((char *)r.out, "ok\n");
    sbt_result_release(&r);
    sbt_destroy(&t);
}

static void cpu_quota_applies(void **state)
{
    struct sbt t;
    struct gbx_cg_limits lim = {.cpu_millis = 200};
    sbt_create(rt, &t, &lim, 0);
    struct sbt_result r;
    /* one busy second of wall time may use at most ~0.2 s of CPU (with slack) */
    sbt_sh(&t, "timeout 1 sh -c 'while :; do :; done'; true", &r);
    sbt_result_release(&r);
    struct gbx_cg_usage u;
    assert_int_equal(t.sb->ops->usage(t.sb, &u, NULL), 0);
    fprintf(stderr, "cpu used: %llu ns\n", (unsigned long long)u.cpu_usage_ns);
    assert_true(u.cpu_usage_ns > 50000000ull);
    assert_true(u.cpu_usage_ns < 600000000ull);
    sbt_destroy(&t);
}

int main(void)
{
    sbt_require_sandboxes();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fork_bomb_stops_at_pids_limit),
        cmocka_unit_test(memory_bomb_is_oom_killed_inside),
        cmocka_unit_test(full_writable_layer_gives_enospc),
        cmocka_unit_test(cpu_quota_applies),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
