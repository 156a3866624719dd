/* SPDX-License-Identifier: MIT */
/* Sandbox lifecycle through the library: create, reconnect, pause/resume, usage, destroy —
 * and destroy leaves nothing behind. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../lib/sbtest.h"
#include "base/fileutil.h"
#include "base/mem.h"

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

/* Host-side traces of all sandboxes: mounts, cgroups, processes in sandbox uid ranges,
 * files under the runtime dir. */
struct traces {
    char *mounts;
    int cgroups;
    int procs;
    int rundir_entries;
};

static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Sandbox groups (subdirectories) under <base>/glovebox. */
static int count_groups_in(const char *base)
{
    gbx_autofree char *p = gbx_asprintf("%s/glovebox", base);
    DIR *d = opendir(p);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)) != NULL) {
        struct stat st;
        gbx_autofree char *q = gbx_asprintf("%s/%s", p, de->d_name);
        if (de->d_name[0] != '.' && stat(q, &st) == 0 && S_ISDIR(st.st_mode))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

static int count_cgroups(void)
{
    int n = 0;
    for (int c = 0; c < GBX_CG_NCTRL; c++)
        if (rt->cg.v1[c])
            n += count_groups_in(rt->cg.v1[c]);
    if (rt->cg.v2)
        n += count_groups_in(rt->cg.v2);
    return n;
}

/* Processes of this test's sandboxes: in a cgroup named with its runtime's scope (other
 * tests and daemons may run sandboxes on the machine at the same time). */
static int count_sandbox_procs(void)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;
    gbx_autofree char *mark = gbx_asprintf("/glovebox/%s", rt->cg.scope);
    while ((de = readdir(d)) != NULL) {
        if (atoi(de->d_name) <= 0)
            continue;
        struct stat st;
        gbx_autofree char *p = gbx_asprintf("/proc/%s", de->d_name);
        gbx_autofree char *cgp = gbx_asprintf("/proc/%s/cgroup", de->d_name);
        gbx_autofree char *cg = NULL;
        if (stat(p, &st) == 0 && st.st_uid >= rt->uid_base &&
            gbx_read_file(cgp, 1 << 16, &cg, NULL) == 0 && strstr(cg, mark))
            n++;
    }
    closedir(d);
    return n;
}

static void take_traces(struct traces *t)
{
    assert_int_equal(gbx_read_file("/proc/self/mountinfo", 1 << 20, &t->mounts, NULL), 0);
    t->cgroups = count_cgroups();
    t->procs = count_sandbox_procs();
    gbx_autofree char *sbdir = gbx_asprintf("%s/sandboxes", rt->runtime_dir);
    t->rundir_entries = count_dir(sbdir) + count_dir(rt->staging_dir);
}

static void create_run_destroy_leaves_nothing(void **state)
{
    struct traces before, during, after;
    take_traces(&before);
    struct sbt t[3];
    for (int i = 0; i < 3; i++)
        sbt_create(rt, &t[i], NULL, 0);
    for (int i = 0; i < 3; i++) {
        struct sbt_result r;
        /* leave a background process and a file behind */
        sbt_sh(&t[i], "sleep 1000 & echo data > /home/user/f; echo started", &r);
        assert_string_equal((char *)r.out, "started\n");
        sbt_result_release(&r);
    }
    take_traces(&during);
    assert_true(during.cgroups > before.cgroups);
    assert_true(during.procs >= before.procs + 6);
    assert_int_equal(during.rundir_entries, before.rundir_entries + 3);
    for (int i = 0; i < 3; i++)
        sbt_destroy(&t[i]);
    take_traces(&after);
    assert_string_equal(after.mounts, before.mounts);
    assert_int_equal(after.cgroups, before.cgroups);
    assert_int_equal(after.procs, before.procs);
    assert_int_equal(after.rundir_entries, before.rundir_entries);
    free(before.mounts);
    free(during.mounts);
    free(after.mounts);
}

static void reconnect_over_control_socket(void **state)
{
    struct sbt t;
    sbt_create(rt, &t, NULL, 0);
    struct sbt_result r;
    sbt_sh(&t, "echo one > /tmp/x", &r);
    sbt_result_release(&r);
    /* drop the creator's connection, as a restarting daemon would */
    gbx_agent_free(t.agent);
    t.agent = NULL;
    int fd = -1;
    struct gbx_err *err = NULL;
    assert_int_equal(t.sb->ops->connect(t.sb, &fd, &err), 0);
    assert_int_equal(gbx_agent_open(fd, &t.agent, &err), 0);
    sbt_sh(&t, "cat /tmp/x", &r);
    assert_string_equal((char *)r.out, "one\n");
    sbt_result_release(&r);
    sbt_destroy(&t);
}

static double cpu_seconds(struct sbt *t)
{
    struct gbx_cg_usage u;
    assert_int_equal(t->sb->ops->usage(t->sb, &u, NULL), 0);
    return (double)u.cpu_usage_ns / 1e9;
}

static void pause_stops_cpu_and_resume_continues(void **state)
{
    struct sbt t;
    sbt_create(rt, &t, NULL, 0);
    struct sbt_result r;
    sbt_sh(&t, "(while :; do :; done) >/dev/null 2>&1 & echo bg", &r);
    sbt_result_release(&r);
    usleep(200000);
    struct gbx_err *err = NULL;
    assert_int_equal(t.sb->ops->freeze(t.sb, &err), 0);
    struct gbx_cg_usage u;
    assert_int_equal(t.sb->ops->usage(t.sb, &u, NULL), 0);
    assert_true(u.frozen);
    double c1 = cpu_seconds(&t);
    usleep(300000);
    double c2 = cpu_seconds(&t);
    assert_true(c2 - c1 < 0.01);
    assert_int_equal(t.sb->ops->thaw(t.sb, &err), 0);
    usleep(300000);
    double c3 = cpu_seconds(&t);
    assert_true(c3 - c2 > 0.05);
    sbt_destroy(&t);
}

static void destroy_a_paused_sandbox(void **state)
{
    struct traces before, after;
    take_traces(&before);
    struct sbt t;
    sbt_create(rt, &t, NULL, 0);
    assert_int_equal(t.sb->ops->freeze(t.sb, NULL), 0);
    sbt_destroy(&t);
    take_traces(&after);
    assert_int_equal(after.cgroups, before.cgroups);
    assert_int_equal(after.procs, before.procs);
    free(before.mounts);
    free(after.mounts);
}

static void bad_input_is_refused_cleanly(void **state)
{
    struct traces before, after;
    take_traces(&before);
    struct gbx_sandbox *sb = NULL;
    struct gbx_err *err = NULL;
    struct gbx_sandbox_spec spec = {.id = "Bad_ID"};
    assert_int_equal(gbx_sandbox_create(rt, &spec, &sb, &err), -1);
    assert_int_equal(err->kind, GBX_ERR_INVALID);
    assert_non_null(strstr(err->msg, "invalid sandbox id"));
    gbx_err_free(err);
    err = NULL;
    spec.id = "ok-id";
    spec.template_name = "no-such-template";
    assert_int_equal(gbx_sandbox_create(rt, &spec, &sb, &err), -1);
    assert_int_equal(err->kind, GBX_ERR_NOT_FOUND);
    assert_non_null(strstr(err->msg, "template 'no-such-template' not found"));
    gbx_err_free(err);
    err = NULL;
    /* a limit the kernel refuses (a CPU quota under 1 ms per 100 ms period) fails the
     * create after the child exists: it is killed and its groups removed */
    spec.template_name = NULL;
    spec.id = "bad-limit";
    spec.limits.cpu_millis = 1;
    assert_int_equal(gbx_sandbox_create(rt, &spec, &sb, &err), -1);
    assert_non_null(strstr(err->msg, "cannot set cgroup limits for 'bad-limit'"));
    gbx_err_free(err);
    err = NULL;
    spec.limits.cpu_millis = 0;
    /* a duplicate id is a conflict and does not disturb the first sandbox */
    struct sbt t;
    sbt_create(rt, &t, NULL, 0);
    spec.id = t.sb->id;
    spec.template_name = NULL;
    assert_int_equal(gbx_sandbox_create(rt, &spec, &sb, &err), -1);
    assert_int_equal(err->kind, GBX_ERR_CONFLICT);
    gbx_err_free(err);
    struct sbt_result r;
    sbt_sh(&t, "echo fine", &r);
    assert_string_equal((char *)r.out, "fine\n");
    sbt_result_release(&r);
    sbt_destroy(&t);
    take_traces(&after);
    assert_int_equal(after.cgroups, before.cgroups);
    assert_int_equal(after.procs, before.procs);
    assert_int_equal(after.rundir_entries, before.rundir_entries);
    free(before.mounts);
    free(after.mounts);
}

static void each_sandbox_has_its_own_uid_range(void **state)
{
    struct sbt a, b;
    sbt_create(rt, &a, NULL, 0);
    sbt_create(rt, &b, NULL, 0);
    assert_int_not_equal(a.sb->host_uid, b.sb->host_uid);
    assert_true(a.sb->host_uid >= rt->uid_base);
    uint32_t d = a.sb->host_uid > b.sb->host_uid ? a.sb->host_uid - b.sb->host_uid
                                                 : b.sb->host_uid - a.sb->host_uid;
    assert_true(d >= GBX_UID_RANGE);
    sbt_destroy(&a);
    sbt_destroy(&b);
}

/* A creator killed with SIGKILL leaves empty groups; the collector removes exactly those. */
static void leftover_groups_are_collected(void **state)
{
    struct traces before, after;
    take_traces(&before);
    struct gbx_cgroup orphan;
    struct gbx_cg_limits lim = {.pids = 10};
    assert_int_equal(gbx_cgroup_create(&orphan, &rt->cg, "gctest-orphan", &lim, NULL), 0);
    gbx_cgroup_release(&orphan); /* forget it, as a killed creator would */
    struct sbt live;
    sbt_create(rt, &live, NULL, 0);
    take_traces(&after);
    assert_true(after.cgroups > before.cgroups);
    free(after.mounts);
    /* too young: kept */
    assert_int_equal(gbx_cgroup_gc(&rt->cg, "gctest-", 3600), 0);
    /* old enough (age 0): the empty one goes, the live sandbox's groups stay */
    assert_int_equal(gbx_cgroup_gc(&rt->cg, "gctest-", 0), 1);
    assert_int_equal(gbx_cgroup_gc(&rt->cg, live.sb->id, 0), 0);
    struct sbt_result r;
    sbt_sh(&live, "echo alive", &r);
    assert_string_equal((char *)r.out, "alive\n");
    sbt_result_release(&r);
    sbt_destroy(&live);
    take_traces(&after);
    assert_int_equal(after.cgroups, before.cgroups);
    free(before.mounts);
    free(after.mounts);
}

int main(void)
{
    sbt_require_sandboxes();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_run_destroy_leaves_nothing),
        cmocka_unit_test(reconnect_over_control_socket),
        cmocka_unit_test(pause_stops_cpu_and_resume_continues),
        cmocka_unit_test(destroy_a_paused_sandbox),
        cmocka_unit_test(bad_input_is_refused_cleanly),
        cmocka_unit_test(each_sandbox_has_its_own_uid_range),
        cmocka_unit_test(leftover_groups_are_collected),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
