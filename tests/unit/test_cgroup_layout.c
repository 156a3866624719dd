/* SPDX-License-Identifier: MIT */
/* Unit tests for the cgroup layout parser (gbx_cg_layout_parse in src/sandbox/cgroup.c):
 * hybrid, pure v2 and pure v1 hosts from realistic /proc/self/mountinfo and
 * /proc/self/cgroup texts, and garbage. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sandbox/cgroup.h"

/* The hybrid layout of our build machines: v1 controllers under /sys/fs/cgroup/<name>,
 * an empty cgroup2 at /sys/fs/cgroup/unified. */
static const char hybrid_mountinfo[] =
    "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "23 28 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "28 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "31 22 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "32 31 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup "
    "cgroup rw,xattr,name=systemd\n"
    "33 31 0:29 / /sys/fs/cgroup/cpu rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup "
    "rw,cpu\n"
    "34 31 0:30 / /sys/fs/cgroup/cpuacct rw,nosuid,nodev,noexec,relatime shared:13 - cgroup "
    "cgroup rw,cpuacct\n"
    "35 31 0:31 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:14 - cgroup "
    "cgroup rw,cpuset\n"
    "36 31 0:33 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:15 - cgroup "
    "cgroup rw,memory\n"
    "37 31 0:34 / /sys/fs/cgroup/devices rw,nosuid,nodev,noexec,relatime shared:16 - cgroup "
    "cgroup rw,devices\n"
    "38 31 0:35 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:17 - cgroup "
    "cgroup rw,freezer\n"
    "39 31 0:36 / /sys/fs/cgroup/blkio rw,nosuid,nodev,noexec,relatime shared:18 - cgroup "
    "cgroup rw,blkio\n"
    "40 31 0:37 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:19 - cgroup "
    "cgroup rw,pids\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
    "60 28 0:50 / /tmp rw,nosuid,nodev shared:30 - tmpfs tmpfs rw,size=1024k\n";

static const char hybrid_self[] = "9:name=systemd:/\n"
                                  "8:pids:/\n"
                                  "7:blkio:/\n"
                                  "6:freezer:/\n"
                                  "5:devices:/\n"
                                  "4:memory:/process_api/abc\n"
                                  "3:cpuset:/\n"
                                  "2:cpuacct:/\n"
                                  "1:cpu:/\n"
                                  "0::/\n";

/* A systemd host with only the unified hierarchy. */
static const char v2_mountinfo[] =
    "22 27 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "23 27 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:14 - proc proc rw\n"
    "27 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "31 22 0:27 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:10 - pstore pstore "
    "rw\n";
static const char v2_self[] = "0::/user.slice/x.scope\n";
static const char v2_controllers[] = "cpuset cpu io memory hugetlb pids rdma misc\n";

/* An older host, all v1, cpu and cpuacct co-mounted (plus the usual symlinks, which do
 * not show in mountinfo). */
static const char v1_mountinfo[] =
    "18 24 0:17 / /sys rw,nosuid,nodev,noexec,relatime shared:6 - sysfs sysfs rw\n"
    "24 0 253:0 / / rw,relatime shared:1 - xfs /dev/mapper/root rw,attr2,inode64\n"
    "25 18 0:20 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755\n"
    "26 25 0:21 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:9 - cgroup "
    "cgroup rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd\n"
    "29 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:10 - "
    "cgroup cgroup rw,cpu,cpuacct\n"
    "30 25 0:25 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:11 - cgroup "
    "cgroup rw,memory\n"
    "31 25 0:26 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:12 - cgroup "
    "cgroup rw,pids\n"
    "32 25 0:27 / /sys/fs/cgroup/devices rw,nosuid,nodev,noexec,relatime shared:13 - cgroup "
    "cgroup rw,devices\n"
    "33 25 0:28 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:14 - cgroup "
    "cgroup rw,freezer\n"
    "34 25 0:29 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime "
    "shared:15 - cgroup cgroup rw,net_cls,net_prio\n";
static const char v1_self[] = "11:net_cls,net_prio:/\n"
                              "10:freezer:/\n"
                              "9:devices:/system.slice/sshd.service\n"
                              "8:pids:/system.slice/sshd.service\n"
                              "7:memory:/system.slice/sshd.service\n"
                              "2:cpu,cpuacct:/\n"
                              "1:name=systemd:/system.slice/sshd.service\n";

static void assert_str_or_null(const char *got, const char *want)
{
    if (want == NULL)
        assert_null(got);
    else
        assert_non_null(got), assert_string_equal(got, want);
}

static void test_hybrid(void **state)
{
    struct gbx_cg_layout l;
    (void)state;
    memset(&l, 0xa5, sizeof(l)); /* the parser must not rely on a zeroed struct */
    assert_int_equal(gbx_cg_layout_parse(&l, hybrid_mountinfo, hybrid_self, NULL), 0);
    assert_str_or_null(l.v1[GBX_CG_MEMORY], "/sys/fs/cgroup/memory/process_api/abc");
    assert_str_or_null(l.v1[GBX_CG_PIDS], "/sys/fs/cgroup/pids");
    assert_str_or_null(l.v1[GBX_CG_CPU], "/sys/fs/cgroup/cpu");
    assert_str_or_null(l.v1[GBX_CG_CPUACCT], "/sys/fs/cgroup/cpuacct");
    assert_str_or_null(l.v1[GBX_CG_DEVICES], "/sys/fs/cgroup/devices");
    assert_str_or_null(l.v1[GBX_CG_FREEZER], "/sys/fs/cgroup/freezer");
    assert_str_or_null(l.v2, "/sys/fs/cgroup/unified");
    assert_int_equal(l.v2_limits, 0);
    assert_int_equal(l.v2_freeze, 1);
    assert_string_equal(gbx_cg_layout_mode(&l), "hybrid: limits in v1, freeze and kill in v2");
    gbx_cg_layout_release(&l);
    for (int c = 0; c < GBX_CG_NCTRL; c++)
        assert_null(l.v1[c]);
    assert_null(l.v2);
    gbx_cg_layout_release(&l); /* twice is fine */

    /* the unified hierarchy's controllers file is empty on a hybrid host; and even if it
     * listed memory and pids, the v1 memory controller keeps the limits in v1 */
    assert_int_equal(gbx_cg_layout_parse(&l, hybrid_mountinfo, hybrid_self, ""), 0);
    assert_int_equal(l.v2_limits, 0);
    gbx_cg_layout_release(&l);
    assert_int_equal(gbx_cg_layout_parse(&l, hybrid_mountinfo, hybrid_self, "memory pids"), 0);
    assert_int_equal(l.v2_limits, 0);
    assert_int_equal(l.v2_freeze, 1);
    assert_str_or_null(l.v1[GBX_CG_MEMORY], "/sys/fs/cgroup/memory/process_api/abc");
    gbx_cg_layout_release(&l);
}

static void test_hybrid_nested_v2_path(void **state)
{
    struct gbx_cg_layout l;
    static const char self[] = "9:name=systemd:/user.slice/s.scope\n"
                               "8:pids:/user.slice/s.scope\n"
                               "4:memory:/user.slice\n"
                               "0::/user.slice/s.scope\n";
    (void)state;
    assert_int_equal(gbx_cg_layout_parse(&l, hybrid_mountinfo, self, NULL), 0);
    assert_str_or_null(l.v1[GBX_CG_MEMORY], "/sys/fs/cgroup/memory/user.slice");
    assert_str_or_null(l.v1[GBX_CG_PIDS], "/sys/fs/cgroup/pids/user.slice/s.scope");
    assert_str_or_null(l.v2, "/sys/fs/cgroup/unified/user.slice/s.scope");
    /* controllers mounted but absent from /proc/self/cgroup are not usable */
    assert_null(l.v1[GBX_CG_CPU]);
    assert_null(l.v1[GBX_CG_CPUACCT]);
    assert_null(l.v1[GBX_CG_DEVICES]);
    assert_null(l.v1[GBX_CG_FREEZER]);
    gbx_cg_layout_release(&l);
}

static void test_pure_v2(void **state)
{
    struct gbx_cg_layout l;
    (void)state;
    memset(&l, 0xa5, sizeof(l));
    assert_int_equal(gbx_cg_layout_parse(&l, v2_mountinfo, v2_self, "cpuset cpu io memory pids"),
                     0);
    assert_str_or_null(l.v2, "/sys/fs/cgroup/user.slice/x.scope");
    assert_int_equal(l.v2_limits, 1);
    assert_int_equal(l.v2_freeze, 1);
    for (int c = 0; c < GBX_CG_NCTRL; c++)
        assert_null(l.v1[c]);
    assert_string_equal(gbx_cg_layout_mode(&l), "v2");
    gbx_cg_layout_release(&l);

    /* a longer, realistic controllers line; and the root group */
    assert_int_equal(gbx_cg_layout_parse(&l, v2_mountinfo, "0::/\n", v2_controllers), 0);
    assert_str_or_null(l.v2, "/sys/fs/cgroup");
    assert_int_equal(l.v2_limits, 1);
    gbx_cg_layout_release(&l);

    /* no trailing newline anywhere */
    static const char mi[] = "30 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw";
    assert_int_equal(gbx_cg_layout_parse(&l, mi, "0::/a", "memory pids"), 0);
    assert_str_or_null(l.v2, "/sys/fs/cgroup/a");
    gbx_cg_layout_release(&l);
}

static void test_pure_v2_unusable(void **state)
{
    struct gbx_cg_layout l;
    (void)state;
    /* without the controllers text, or without memory or pids in it, there is no
     * hierarchy for limits: -EINVAL and nothing left allocated */
    assert_int_equal(gbx_cg_layout_parse(&l, v2_mountinfo, v2_self, NULL), -EINVAL);
    assert_null(l.v2);
    assert_int_equal(gbx_cg_layout_parse(&l, v2_mountinfo, v2_self, ""), -EINVAL);
    assert_null(l.v2);
    assert_int_equal(gbx_cg_layout_parse(&l, v2_mountinfo, v2_self, "cpuset cpu io memory"),
                     -EINVAL);
    assert_null(l.v2);
    assert_int_equal(gbx_cg_layout_parse(&l, v2_mountinfo, v2_self, "cpu io pids"), -EINVAL);
    assert_null(l.v2);
    /* no "0::" line: the process is not in the v2 hierarchy */
    assert_int_equal(gbx_cg_layout_parse(&l, v2_mountinfo, "1:name=systemd:/\n", "memory pids"),
                     -EINVAL);
    assert_null(l.v2);
}

static void test_pure_v1_comounted(void **state)
{
    struct gbx_cg_layout l;
    (void)state;
    assert_int_equal(gbx_cg_layout_parse(&l, v1_mountinfo, v1_self, NULL), 0);
    assert_str_or_null(l.v1[GBX_CG_CPU], "/sys/fs/cgroup/cpu,cpuacct");
    assert_str_or_null(l.v1[GBX_CG_CPUACCT], "/sys/fs/cgroup/cpu,cpuacct");
    assert_string_equal(l.v1[GBX_CG_CPU], l.v1[GBX_CG_CPUACCT]);
    assert_ptr_not_equal(l.v1[GBX_CG_CPU], l.v1[GBX_CG_CPUACCT]); /* each owned */
    assert_str_or_null(l.v1[GBX_CG_MEMORY], "/sys/fs/cgroup/memory/system.slice/sshd.service");
    assert_str_or_null(l.v1[GBX_CG_PIDS], "/sys/fs/cgroup/pids/system.slice/sshd.service");
    assert_str_or_null(l.v1[GBX_CG_DEVICES], "/sys/fs/cgroup/devices/system.slice/sshd.service");
    assert_str_or_null(l.v1[GBX_CG_FREEZER], "/sys/fs/cgroup/freezer");
    assert_null(l.v2);
    assert_int_equal(l.v2_limits, 0);
    assert_int_equal(l.v2_freeze, 0);
    assert_string_equal(gbx_cg_layout_mode(&l), "v1");
    gbx_cg_layout_release(&l);

    /* the co-mount in the other order, with a nested own path */
    static const char mi[] = "29 25 0:24 / /cg/cpuacct,cpu rw - cgroup cgroup rw,cpuacct,cpu\n"
                             "30 25 0:25 / /cg/memory rw - cgroup cgroup rw,memory\n"
                             "31 25 0:26 / /cg/pids rw - cgroup cgroup rw,pids\n";
    static const char self[] = "3:pids:/\n2:memory:/\n1:cpuacct,cpu:/a/b\n";
    assert_int_equal(gbx_cg_layout_parse(&l, mi, self, NULL), 0);
    assert_str_or_null(l.v1[GBX_CG_CPU], "/cg/cpuacct,cpu/a/b");
    assert_str_or_null(l.v1[GBX_CG_CPUACCT], "/cg/cpuacct,cpu/a/b");
    assert_str_or_null(l.v1[GBX_CG_MEMORY], "/cg/memory");
    gbx_cg_layout_release(&l);
}

static void test_controller_names_exact(void **state)
{
    struct gbx_cg_layout l;
    (void)state;
    /* "cpuset" is not "cpu", "memory_x" is not "memory", "name=pids" is not "pids" */
    static const char mi[] = "1 0 0:1 / /cg/cpuset rw - cgroup cgroup rw,cpuset\n"
                             "2 0 0:2 / /cg/mem rw - cgroup cgroup rw,memory_x\n"
                             "3 0 0:3 / /cg/np rw - cgroup cgroup rw,name=pids\n"
                             "4 0 0:4 / /cg/memory rw - cgroup cgroup rw,memory\n"
                             "5 0 0:5 / /cg/pids rw - cgroup cgroup rw,pids\n";
    static const char self[] = "5:pids:/\n4:memory:/\n3:name=pids:/np\n2:memory_x:/mx\n"
                               "1:cpuset:/cs\n";
    assert_int_equal(gbx_cg_layout_parse(&l, mi, self, NULL), 0);
    assert_null(l.v1[GBX_CG_CPU]);
    assert_str_or_null(l.v1[GBX_CG_MEMORY], "/cg/memory");
    assert_str_or_null(l.v1[GBX_CG_PIDS], "/cg/pids");
    gbx_cg_layout_release(&l);
}

static void test_non_root_mounts_skipped(void **state)
{
    struct gbx_cg_layout l;
    (void)state;
    /* inside a container, the hierarchies are often bind mounts of a sub-group (root field
     * not "/"): those are skipped, and the first usable mount of each controller wins */
    static const char mi[] =
        "1 0 0:1 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n"
        "2 0 0:2 /docker/abc /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n"
        "3 0 0:3 / /host/memory rw - cgroup cgroup rw,memory\n"
        "4 0 0:4 / /host/pids rw - cgroup cgroup rw,pids\n"
        "5 0 0:5 / /second/pids rw - cgroup cgroup rw,pids\n"
        "6 0 0:6 /sub /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "7 0 0:6 / /first/unified rw - cgroup2 cgroup2 rw\n"
        "8 0 0:6 / /second/unified rw - cgroup2 cgroup2 rw\n";
    static const char self[] = "2:pids:/p\n1:memory:/m\n0::/u\n";
    assert_int_equal(gbx_cg_layout_parse(&l, mi, self, NULL), 0);
    assert_str_or_null(l.v1[GBX_CG_MEMORY], "/host/memory/m");
    assert_str_or_null(l.v1[GBX_CG_PIDS], "/host/pids/p");
    assert_str_or_null(l.v2, "/first/unified/u");
    gbx_cg_layout_release(&l);
}

static void test_garbage(void **state)
{
    struct gbx_cg_layout l;
    static const char *const bad_mi[] = {
        "",
        "\n",
        "\n\n\n",
        "garbage",
        " - ",
        " - cgroup",
        " - cgroup cgroup rw,memory",
        "1 2 3 - cgroup cgroup rw,memory\n",
        "1 0 0:1 / /m rw - cgroup\n",
        "1 0 0:1 / /m rw - cgroup cgroup\n",
        "1 0 0:1 / /m rw -cgroup cgroup rw,memory\n",
        "- - - - - - - -\n",
        "1 0 0:1 / /m rw - cgroup2\n",
        "\x01\x02\x03 - \xff\xfe",
        "1 0 0:1 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", /* no pids */
        "1 0 0:1 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",     /* no memory */
    };
    static const char *const bad_self[] = {
        "", "garbage", ":", "::", "0::", "4:memory", "4:memory:", "\n\n", ":::::\n:::",
    };
    (void)state;

    for (size_t i = 0; i < sizeof(bad_mi) / sizeof(bad_mi[0]); i++) {
        print_message("mountinfo #%zu\n", i);
        assert_int_equal(gbx_cg_layout_parse(&l, bad_mi[i], hybrid_self, NULL), -EINVAL);
        assert_null(l.v2);
        for (int c = 0; c < GBX_CG_NCTRL; c++)
            assert_null(l.v1[c]);
        gbx_cg_layout_release(&l); /* harmless after a failed parse */
    }
    /* /proc/self/cgroup garbage against every fixture */
    const char *const mis[] = {hybrid_mountinfo, v1_mountinfo, v2_mountinfo};
    for (size_t i = 0; i < sizeof(bad_self) / sizeof(bad_self[0]); i++) {
        for (size_t j = 0; j < 3; j++) {
            int r = gbx_cg_layout_parse(&l, mis[j], bad_self[i], NULL);
            print_message("self #%zu on fixture %zu -> %d\n", i, j, r);
            /* "4:memory:" alone gives memory but never pids: always unusable */
            assert_int_equal(r, -EINVAL);
            gbx_cg_layout_release(&l);
        }
    }
    /* NULL texts */
    assert_int_equal(gbx_cg_layout_parse(&l, NULL, NULL, NULL), -EINVAL);
    assert_int_equal(gbx_cg_layout_parse(&l, NULL, hybrid_self, NULL), -EINVAL);
    assert_int_equal(gbx_cg_layout_parse(&l, hybrid_mountinfo, NULL, NULL), -EINVAL);
    assert_int_equal(gbx_cg_layout_parse(&l, v2_mountinfo, NULL, "memory pids"), -EINVAL);

    /* empty own paths join as the mount point itself */
    static const char self_empty[] = "8:pids:\n4:memory:\n0::\n";
    assert_int_equal(gbx_cg_layout_parse(&l, hybrid_mountinfo, self_empty, NULL), 0);
    assert_str_or_null(l.v1[GBX_CG_MEMORY], "/sys/fs/cgroup/memory");
    assert_str_or_null(l.v2, "/sys/fs/cgroup/unified");
    gbx_cg_layout_release(&l);
}

/* Every prefix of a valid fixture: never a crash, never a leak, and a result that is either
 * -EINVAL with nothing allocated or 0 with memory and pids. */
static void test_truncations(void **state)
{
    const char *const mis[] = {hybrid_mountinfo, v1_mountinfo, v2_mountinfo};
    const char *const selfs[] = {hybrid_self, v1_self, v2_self};
    char buf[4096];
    (void)state;
    for (size_t f = 0; f < 3; f++) {
        size_t n = strlen(mis[f]);
        assert_true(n < sizeof(buf));
        for (size_t cut = 0; cut <= n; cut++) {
            struct gbx_cg_layout l;
            memcpy(buf, mis[f], cut);
            buf[cut] = '\0';
            int r = gbx_cg_layout_parse(&l, buf, selfs[f], v2_controllers);
            if (r == 0) {
                assert_true(l.v2_limits ||
                            (l.v1[GBX_CG_MEMORY] != NULL && l.v1[GBX_CG_PIDS] != NULL));
            } else {
                assert_int_equal(r, -EINVAL);
                assert_null(l.v2);
                for (int c = 0; c < GBX_CG_NCTRL; c++)
                    assert_null(l.v1[c]);
            }
            gbx_cg_layout_release(&l);
        }
        /* the full text parses */
        struct gbx_cg_layout l;
        assert_int_equal(gbx_cg_layout_parse(&l, mis[f], selfs[f], v2_controllers), 0);
        gbx_cg_layout_release(&l);
    }
}

static void test_mode_strings(void **state)
{
    struct gbx_cg_layout l;
    char v2[] = "/sys/fs/cgroup";
    (void)state;
    memset(&l, 0, sizeof(l));
    assert_string_equal(gbx_cg_layout_mode(&l), "v1");
    l.v2 = v2;
    assert_string_equal(gbx_cg_layout_mode(&l), "v1"); /* v2 mounted but not usable */
    l.v2_freeze = 1;
    assert_string_equal(gbx_cg_layout_mode(&l), "hybrid: limits in v1, freeze and kill in v2");
    l.v2_limits = 1;
    assert_string_equal(gbx_cg_layout_mode(&l), "v2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid),
        cmocka_unit_test(test_hybrid_nested_v2_path),
        cmocka_unit_test(test_pure_v2),
        cmocka_unit_test(test_pure_v2_unusable),
        cmocka_unit_test(test_pure_v1_comounted),
        cmocka_unit_test(test_controller_names_exact),
        cmocka_unit_test(test_non_root_mounts_skipped),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_mode_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
