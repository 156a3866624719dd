/* SPDX-License-Identifier: MIT */
/* Isolation, verified from inside: the probe runs in a real sandbox and reports what each
 * dangerous operation returns; the host checks what the sandbox's root really is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../lib/sbtest.h"
#include "base/fileutil.h"
#include "base/mem.h"

static struct gbx_runtime *rt;
static struct sbt t;
static char *probe_out;

/* The value the probe printed for check name, or NULL. Static buffer. */
static const char *probe(const char *name)
{
    static char val[256];
    size_t n = strlen(name);
    for (const char *l = probe_out; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        if (len > n && strncmp(l, name, n) == 0 && l[n] == ' ') {
            size_t vl = len - n - 1 < sizeof(val) - 1 ? len - n - 1 : sizeof(val) - 1;
            memcpy(val, l + n + 1, vl);
            val[vl] = '\0';
            return val;
        }
        l = nl ? nl + 1 : NULL;
    }
    return NULL;
}

#define EXPECT(name, want)                                                                         \
    do {                                                                                           \
        const char *got_ = probe(name);                                                            \
        if (got_ == NULL || strcmp(got_, want) != 0) {                                             \
            fprintf(stderr, "%s: got '%s', want '%s'\n", name, got_ ? got_ : "(missing)", want);   \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

static int setup(void **state)
{
    rt = sbt_runtime_new();
    sbt_create(rt, &t, NULL, 0);
    sbt_install_probe(&t);
    struct sbt_result r;
    const char *argv[] = {"/tmp/gbx-probe", "all", NULL};
    sbt_run(&t, NULL, argv, NULL, 0, &r);
    assert_int_equal(r.exit_code, 0);
    probe_out = gbx_xstrdup((char *)r.out);
    fprintf(stderr, "probe output:\n%s", probe_out);
    sbt_result_release(&r);
    return 0;
}

static int teardown(void **state)
{
    sbt_destroy(&t);
    sbt_runtime_free(rt);
    free(probe_out);
    return 0;
}

static void no_host_processes(void **state)
{
    /* only init and the probe itself */
    EXPECT("procs", "2");
    const char *pid = probe("pid");
    assert_non_null(pid);
    assert_true(atoi(pid) < 10);
    EXPECT("hostname", t.sb->id);
}

static void uid0_is_unprivileged_on_host(void **state)
{
    EXPECT("uid", "0");
    /* from the host: init's credentials are the sandbox's range, not root */
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)t.sb->init_pid);
    gbx_autofree char *st = NULL;
    assert_int_equal(gbx_read_file(path, 1 << 16, &st, NULL), 0);
    char want[64];
    snprintf(want, sizeof(want), "Uid:\t%u\t%u\t%u\t%u", t.sb->host_uid, t.sb->host_uid,
             t.sb->host_uid, t.sb->host_uid);
    assert_non_null(strstr(st, want));
    assert_true(t.sb->host_uid >= 65536);
    /* a file the sandbox creates belongs to that uid on the host's view of its /tmp */
    snprintf(path, sizeof(path), "/proc/%d/root/tmp/gbx-probe", (int)t.sb->init_pid);
    struct stat sst;
    assert_int_equal(stat(path, &sst), 0);
    assert_int_equal(sst.st_uid, t.sb->host_uid);
}

static void mounts_and_namespaces_refused(void **state)
{
    EXPECT("mount_tmpfs", "EPERM");
    EXPECT("umount_proc", "EPERM");
    EXPECT("unshare_user", "EPERM");
    EXPECT("unshare_mount", "EPERM");
    EXPECT("unshare_net", "EPERM");
    EXPECT("setns", "EPERM");
    EXPECT("clone3", "ENOSYS");
}

static void kernel_interfaces_refused(void **state)
{
    EXPECT("ptrace_traceme", "EPERM");
    EXPECT("ptrace_attach_1", "EPERM");
    EXPECT("init_module", "EPERM");
    EXPECT("finit_module", "EPERM");
    EXPECT("kexec_load", "EPERM");
    EXPECT("bpf", "EPERM");
    EXPECT("perf_event_open", "EPERM");
    EXPECT("keyctl", "EPERM");
    EXPECT("userfaultfd", "EPERM");
    EXPECT("io_uring_setup", "EPERM");
    EXPECT("reboot", "EPERM");
    EXPECT("swapon", "EPERM");
    EXPECT("open_by_handle_at", "EPERM");
    EXPECT("tiocsti", "EPERM");
    EXPECT("syslog", "EPERM");
    EXPECT("settimeofday", "EPERM");
}

/* the 32-bit ABIs are refused whole: judged by the call's effect (the probe's "ok" means
 * it took effect), whatever this kernel does with int 0x80 */
static void abi_32bit_refused(void **state)
{
#if defined(__x86_64__)
    EXPECT("int80_getpid", "refused");
    EXPECT("int80_unshare_user", "refused");
    EXPECT("x32_unshare_user", "refused");
#else
    skip();
#endif
}

static void devices_not_openable(void **state)
{
    EXPECT("open_kvm", "ENOENT");
    EXPECT("mknod_kvm", "EPERM");
    EXPECT("mknod_vda", "EPERM");
    EXPECT("open_vda", "ENOENT");
    /* and where the host has a v1 devices controller, the sandbox's group allows only the
     * nodes of its /dev (inherited from the parent group) */
    if (rt->cg.v1[GBX_CG_DEVICES] && !rt->cg.v2_limits) {
        gbx_autofree char *p = gbx_asprintf("%s/glovebox/%s%s/devices.list",
                                            rt->cg.v1[GBX_CG_DEVICES], rt->cg.scope, t.sb->id);
        gbx_autofree char *list = NULL;
        assert_int_equal(gbx_read_file(p, 65536, &list, NULL), 0);
        assert_null(strstr(list, "a *:*"));
        assert_non_null(strstr(list, "c 1:3 rwm"));
        assert_null(strstr(list, "b "));
    }
}

static void proc_protected(void **state)
{
    const char *k = probe("write_proc_sys");
    assert_true(strcmp(k, "EROFS") == 0 || strcmp(k, "EACCES") == 0);
    k = probe("write_proc_sys_kernel");
    assert_true(strcmp(k, "EROFS") == 0 || strcmp(k, "EACCES") == 0);
    const char *sysrq = probe("write_sysrq");
    assert_non_null(sysrq);
    /* masked by /dev/null where the kernel has it; absent otherwise */
    assert_true(strcmp(sysrq, "ENOENT") == 0 || strcmp(sysrq, "ok") == 0);
    const char *kcore = probe("read_kcore");
    assert_true(strcmp(kcore, "ENOENT") == 0 || strcmp(kcore, "ok") == 0);
    /* if /proc/kcore exists it must be the masked, empty /dev/null */
    struct sbt_result r;
    sbt_sh(&t, "test ! -e /proc/kcore || test $(head -c 16 /proc/kcore | wc -c) -eq 0", &r);
    assert_int_equal(r.exit_code, 0);
    sbt_result_release(&r);
    /* and /proc/sys is a read-only mount, whatever the file permissions say */
    sbt_sh(&t, "grep -c ' /proc/sys ro,' /proc/self/mountinfo", &r);
    assert_string_equal((char *)r.out, "1\n");
    sbt_result_release(&r);
}

static void filesystem_view(void **state)
{
    EXPECT("write_usr", "EROFS");
    EXPECT("write_root", "ok"); /* the overlay's writable layer */
    EXPECT("write_tmp", "ok");
    /* nothing of the host outside the template: the host's state and runtime dirs, its
     * /root, /var and /work are not there */
    struct sbt_result r;
    gbx_autofree char *script =
        gbx_asprintf("for p in '%s' '%s' /work /var/lib/dpkg /etc/ssh /root/.bash_history; do "
                     "  if [ -e \"$p\" ]; then echo \"visible: $p\"; fi; done; "
                     "test \"$(ls -A /root)\" = '' && echo root-empty",
                     rt->state_dir, rt->runtime_dir);
    sbt_sh(&t, script, &r);
    assert_string_equal((char *)r.out, "root-empty\n");
    sbt_result_release(&r);
    /* /etc/shadow is the template's, not the host's */
    sbt_sh(&t, "cat /etc/shadow", &r);
    assert_int_equal(r.exit_code, 0);
    gbx_autofree char *host_shadow = NULL;
    if (gbx_read_file("/etc/shadow", 1 << 20, &host_shadow, NULL) == 0)
        assert_string_not_equal((char *)r.out, host_shadow);
    assert_non_null(strstr((char *)r.out, "user:*:"));
    sbt_result_release(&r);
}

static void limits_not_raisable(void **state)
{
    EXPECT("raise_nofile", "EPERM");
}

static void loopback_only_network(void **state)
{
    EXPECT("interfaces", "lo");
    EXPECT("connect_external", "ENETUNREACH");
    EXPECT("udp_external", "ENETUNREACH");
    EXPECT("raw_socket", "EPERM");
    EXPECT("packet_socket", "EPERM");
}

static void privileges_reduced(void **state)
{
    EXPECT("NoNewPrivs", "1");
    EXPECT("Seccomp", "2");
    /* CAP_SYS_ADMIN (21), NET_ADMIN (12), NET_RAW (13), SYS_PTRACE (19), SYS_MODULE (16)
     * are not in the bounding set */
    const char *bnd = probe("CapBnd");
    assert_non_null(bnd);
    unsigned long long caps = strtoull(bnd, NULL, 16);
    int forbidden[] = {21, 12, 13, 19, 16, 17, 25, 24, 22};
    for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++)
        assert_false(caps & (1ull << forbidden[i]));
    assert_true(caps & (1ull << 7)); /* CAP_SETUID stays: su to "user" works */
}

static void init_is_out_of_reach(void **state)
{
    /* init is not dumpable: its image (a sealed memfd), its fds (the writable layer's handle
     * among them) and its memory are out of reach of the sandbox's own root */
    struct sbt_result r;
    sbt_sh(
        &t,
        "readlink /proc/1/exe || echo NOEXE; (echo x >> /proc/1/exe) 2>/dev/null && echo "
        "WRITABLE; readlink /proc/1/fd/7 2>/dev/null && echo FDS; ls /proc/1/fd/7/ 2>/dev/null && "
        "echo LAYER; cat /proc/1/environ 2>/dev/null && echo ENVIRON; id -u",
        &r);
    assert_non_null(strstr((char *)r.out, "NOEXE"));
    assert_null(strstr((char *)r.out, "WRITABLE"));
    assert_null(strstr((char *)r.out, "FDS"));
    assert_null(strstr((char *)r.out, "LAYER"));
    assert_null(strstr((char *)r.out, "ENVIRON"));
    assert_non_null(strstr((char *)r.out, "0\n")); /* as the sandbox's root */
    sbt_result_release(&r);
}

int main(void)
{
    sbt_require_sandboxes();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_host_processes),
        cmocka_unit_test(uid0_is_unprivileged_on_host),
        cmocka_unit_test(mounts_and_namespaces_refused),
        cmocka_unit_test(kernel_interfaces_refused),
        cmocka_unit_test(abi_32bit_refused),
        cmocka_unit_test(devices_not_openable),
        cmocka_unit_test(proc_protected),
        cmocka_unit_test(filesystem_view),
        cmocka_unit_test(limits_not_raisable),
        cmocka_unit_test(loopback_only_network),
        cmocka_unit_test(privileges_reduced),
        cmocka_unit_test(init_is_out_of_reach),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
