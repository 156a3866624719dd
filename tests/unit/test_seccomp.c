/* SPDX-License-Identifier: MIT */
/* Unit tests for the seccomp table and filter (src/sandbox/seccomp.c). The filter is only
 * ever installed in forked children, never in the test runner; each child checks the
 * calls from the inside and reports the results back through a pipe. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>
#include <seccomp.h>

#include "base/fileutil.h"
#include "sandbox/seccomp.h"

/* ---- the table ---------------------------------------------------------------------- */

static void test_rules_well_formed(void **state)
{
    (void)state;
    assert_true(gbx_seccomp_nrules > 0);
    for (size_t i = 0; i < gbx_seccomp_nrules; i++) {
        const struct gbx_seccomp_rule *r = &gbx_seccomp_rules[i];
        assert_non_null(r->syscall);
        print_message("rule %zu: %s\n", i, r->syscall);
        assert_true(r->syscall[0] != '\0');
        assert_non_null(r->reason);
        assert_true(strlen(r->reason) >= 8); /* a reason, not a placeholder */
        assert_true(r->errnum > 0 && r->errnum < 4096);
        assert_true(r->cmp == GBX_SC_ANY || r->cmp == GBX_SC_MASKED_EQ);
        if (r->cmp == GBX_SC_MASKED_EQ) {
            assert_true(r->arg < 6);
            assert_true(r->mask != 0);
            assert_int_equal(r->value & ~r->mask, 0); /* else the rule never matches */
        }
        /* libseccomp knows the name on the native architecture */
        int nr = seccomp_syscall_resolve_name(r->syscall);
        if (nr == __NR_SCMP_ERROR)
            print_error("libseccomp does not know syscall '%s'\n", r->syscall);
        assert_int_not_equal(nr, __NR_SCMP_ERROR);
        assert_true(nr >= 0);
        /* and resolving it back gives the same name */
        char *back = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        assert_non_null(back);
        assert_string_equal(back, r->syscall);
        free(back);
    }
}

static void test_rules_cover_essentials(void **state)
{
    static const char *const must[] = {
        "mount",           "umount2",     "pivot_root",  "unshare",      "clone",
        "clone3",          "setns",       "ptrace",      "bpf",          "keyctl",
        "add_key",         "kexec_load",  "init_module", "finit_module", "open_by_handle_at",
        "io_uring_setup",  "userfaultfd", "ioctl",       "move_mount",   "fsopen",
        "perf_event_open",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
        int found = 0;
        for (size_t j = 0; j < gbx_seccomp_nrules; j++)
            found |= strcmp(gbx_seccomp_rules[j].syscall, must[i]) == 0;
        if (!found)
            print_error("no rule for '%s'\n", must[i]);
        assert_true(found);
    }
}

static void test_caps_keep(void **state)
{
    static const int never[] = {
        CAP_SYS_ADMIN,
        CAP_SYS_MODULE,
        CAP_SYS_PTRACE,
        CAP_SYS_RAWIO,
        CAP_NET_ADMIN,
        CAP_SYS_BOOT,
        CAP_SYS_TIME,
        CAP_MAC_ADMIN,
        CAP_MAC_OVERRIDE,
        CAP_SYSLOG,
        CAP_DAC_READ_SEARCH,
        CAP_MKNOD,
        CAP_LINUX_IMMUTABLE,
        CAP_SYS_RESOURCE,
#ifdef CAP_BPF
        CAP_BPF,
#endif
#ifdef CAP_PERFMON
        CAP_PERFMON,
#endif
    };
    (void)state;
    assert_true(gbx_caps_nkeep > 0);
    for (size_t i = 0; i < gbx_caps_nkeep; i++) {
        assert_true(gbx_caps_keep[i] >= 0 && gbx_caps_keep[i] <= CAP_LAST_CAP);
        for (size_t j = 0; j < i; j++)
            assert_int_not_equal(gbx_caps_keep[i], gbx_caps_keep[j]);
        for (size_t j = 0; j < sizeof(never) / sizeof(never[0]); j++)
            assert_int_not_equal(gbx_caps_keep[i], never[j]);
    }
}

static void test_compile(void **state)
{
    struct gbx_seccomp_prog p;
    (void)state;
    memset(&p, 0xa5, sizeof(p));
    assert_int_equal(gbx_seccomp_compile(&p), 0);
    assert_non_null(p.filter);
    assert_true(p.len > 0);
    assert_true(p.len <= BPF_MAXINSNS);
    /* every filter must end in a return, and the first instruction loads the arch so
     * that the 32-bit entry points are told apart */
    const struct sock_filter *f = p.filter;
    assert_int_equal(BPF_CLASS(f[p.len - 1].code), BPF_RET);
    assert_int_equal(f[0].code, BPF_LD | BPF_W | BPF_ABS);
    assert_int_equal(f[0].k, 4); /* offsetof(struct seccomp_data, arch) */
#if defined(__x86_64__)
    /* the one arch let in is x86_64; any other (i386, and x32's marked numbers further on)
     * jumps to a return of ENOSYS: no rules for the 32-bit ABIs, on any kernel */
    assert_int_equal(f[1].code, BPF_JMP | BPF_JEQ | BPF_K);
    assert_int_equal(f[1].k, AUDIT_ARCH_X86_64);
    const struct sock_filter *bad = &f[2 + f[1].jf];
    assert_true(bad < f + p.len);
    assert_int_equal(bad->code, BPF_RET | BPF_K);
    assert_int_equal(bad->k, SECCOMP_RET_ERRNO | ENOSYS);
#endif
    /* twice gives the same program */
    struct gbx_seccomp_prog q;
    assert_int_equal(gbx_seccomp_compile(&q), 0);
    assert_int_equal(q.len, p.len);
    assert_memory_equal(q.filter, p.filter, p.len * sizeof(struct sock_filter));
    gbx_seccomp_prog_release(&q);
    gbx_seccomp_prog_release(&p);
    assert_null(p.filter);
    assert_int_equal(p.len, 0);
    gbx_seccomp_prog_release(&p); /* release twice is fine */
}

/* ---- the filter, from the inside of a forked child ---------------------------------- */

/* Each check returns 0 on success or -errno. */
static int ret(long r)
{
    return r < 0 ? -errno : 0;
}

static int chk_getpid(void)
{
    pid_t a = getpid(), b = (pid_t)syscall(SYS_getpid);
    return a > 1 && a == b ? 0 : -EBADE;
}

static int chk_open_devnull(void)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = write(fd, "x", 1) == 1 ? 0 : -EIO;
    close(fd);
    return r;
}

static int chk_fork(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0)
        _exit(42);
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -errno;
    return WIFEXITED(st) && WEXITSTATUS(st) == 42 ? 0 : -EBADE;
}

static void *thread_fn(void *arg)
{
    return arg;
}

/* glibc's pthread_create tries clone3 first and must fall back to clone on ENOSYS */
static int chk_pthread(void)
{
    pthread_t t;
    void *res = NULL;
    int r = pthread_create(&t, NULL, thread_fn, (void *)0x1234);
    if (r != 0)
        return -r;
    if ((r = pthread_join(t, &res)) != 0)
        return -r;
    return res == (void *)0x1234 ? 0 : -EBADE;
}

static int chk_mount(void)
{
    /* harmless either way: without the filter this fails with ENOENT */
    return ret(mount(NULL, "/nonexistent-glovebox-test", NULL, MS_REMOUNT | MS_BIND, NULL));
}

static int chk_umount2(void)
{
    return ret(umount2("/nonexistent-glovebox-test", MNT_DETACH));
}

static int chk_unshare_user(void)
{
    return ret(unshare(CLONE_NEWUSER));
}

static int chk_unshare_user_and_more(void)
{
    return ret(unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_FILES));
}

/* the argument filter must not catch other flags: CLONE_FILES needs no privilege */
static int chk_unshare_files(void)
{
    return ret(unshare(CLONE_FILES));
}

/* Reap a child that a call which should have failed created anyway. */
static int reap_if_child(long r)
{
    if (r == 0)
        _exit(0);
    if (r > 0) {
        waitpid((pid_t)r, NULL, 0);
        return 0;
    }
    return -errno;
}

static int chk_clone_newuser(void)
{
    return reap_if_child(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
}

static int chk_clone3(void)
{
    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.exit_signal = SIGCHLD;
    return reap_if_child(syscall(SYS_clone3, &ca, sizeof(ca)));
}

static int chk_setns(void)
{
    int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -EBADE;
    int r = ret(setns(fd, CLONE_NEWUTS));
    close(fd);
    return r;
}

static int chk_keyctl(void)
{
    return ret(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
}

static int chk_add_key(void)
{
    return ret(syscall(SYS_add_key, "user", "gbx-test", "x", 1, KEY_SPEC_PROCESS_KEYRING));
}

static int chk_bpf(void)
{
    return ret(syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, NULL, 0));
}

/* In a grandchild that exits at once: if PTRACE_TRACEME got through, a tracee that goes
 * on running would stop at its next signal and hang the check. */
static int chk_ptrace(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return -EBADE;
    if (pid == 0)
        _exit(ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0 ? errno : 0);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -EBADE;
    return -WEXITSTATUS(st);
}

static int chk_process_vm_readv(void)
{
    char a[4] = "abc", b[4];
    struct iovec l = {b, sizeof(b)}, r = {a, sizeof(a)};
    return ret(process_vm_readv(getpid(), &l, 1, &r, 1, 0));
}

/* a copy of one of our own descriptors through our own pidfd: works without the filter */
static int chk_pidfd_getfd(void)
{
    int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (pfd < 0)
        return -EBADE;
    int r = ret(syscall(SYS_pidfd_getfd, pfd, pfd, 0));
    close(pfd);
    return r;
}

static int chk_ioctl_tiocsti(void)
{
    char c = 'x';
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -EBADE;
    int r = ret(ioctl(fd, TIOCSTI, &c));
    close(fd);
    return r;
}

static int chk_ioctl_tioclinux(void)
{
    char c = 0;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -EBADE;
    int r = ret(ioctl(fd, TIOCLINUX, &c));
    close(fd);
    return r;
}

/* other ioctls pass: FIONREAD on a pipe works */
static int chk_ioctl_fionread(void)
{
    int p[2], n = -1;
    if (pipe2(p, O_CLOEXEC) < 0)
        return -EBADE;
    if (write(p[1], "abc", 3) != 3)
        return -EBADE;
    int r = ret(ioctl(p[0], FIONREAD, &n));
    close(p[0]);
    close(p[1]);
    return r == 0 && n != 3 ? -EBADE : r;
}

static int chk_io_uring_setup(void)
{
    return ret(syscall(SYS_io_uring_setup, 0, NULL));
}

static int chk_userfaultfd(void)
{
    return ret(syscall(SYS_userfaultfd, O_CLOEXEC));
}

static int chk_perf_event_open(void)
{
    return ret(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}

static int chk_open_by_handle_at(void)
{
    return ret(syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, O_RDONLY));
}

static int chk_no_new_privs(void)
{
    return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 ? 0 : -EBADE;
}

static int chk_seccomp_mode(void)
{
    return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2 ? 0 : -EBADE;
}

/* The filter refuses the i386 and x32 ABIs whole. Each check below makes a call through
 * one of them whose effect can be seen from here, and is judged by that effect, never by
 * an errno: REFUSED unless the call took effect, however it was refused (an error, no such
 * entry point, or the process killed because the kernel has no IA32 emulation), 0 when it
 * took effect. Each runs in a grandchild, the one such a kernel kills. */
#define REFUSED (-EPERM)
#if defined(__x86_64__)

/* i386 system call nr with one argument through int 0x80 */
static long int80(long nr, long a1)
{
    long r;
    /* kernels before 4.17 clobber r8-r11 on int 0x80 from 64-bit code */
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a1) : "r8", "r9", "r10", "r11", "memory");
    return r;
}

/* Run fn in a grandchild: fn returns 10 when the call took effect, 11 when it did not. */
static int effect_in_grandchild(int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -EBADE;
    if (pid == 0) {
        /* a refusal by signal kills the process, not a sanitizer's handler */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGSYS, SIG_DFL);
        _exit(fn());
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -EBADE;
    if (WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGSYS))
        return REFUSED;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 10)
        return 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 11)
        return REFUSED;
    return -EBADE;
}

/* i386 getpid (#20): its success is the caller's pid */
static int int80_getpid(void)
{
    return int80(20, 0) == getpid() ? 10 : 11;
}

/* i386 unshare (#310) of CLONE_NEWUSER: its success is a new user namespace */
static int int80_unshare_user(void)
{
    struct stat a, b;
    if (stat("/proc/self/ns/user", &a) < 0)
        return 12;
    (void)int80(310, CLONE_NEWUSER);
    if (stat("/proc/self/ns/user", &b) < 0)
        return 12;
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? 11 : 10;
}

/* x32 getpid: the 64-bit getpid's number with the x32 bit */
static int x32_getpid(void)
{
    return syscall(0x40000000 | SYS_getpid) == getpid() ? 10 : 11;
}

static int chk_int80_getpid(void)
{
    return effect_in_grandchild(int80_getpid);
}

static int chk_int80_unshare_user(void)
{
    return effect_in_grandchild(int80_unshare_user);
}

static int chk_x32_getpid(void)
{
    return effect_in_grandchild(x32_getpid);
}
#endif

struct check {
    const char *name;
    int (*fn)(void);
    int want;            /* with the filter */
    int want_unfiltered; /* without it, as a control; 1 = do not compare, or one of: */
};
/* takes effect (0) where the kernel has int 0x80, else REFUSED */
#define UNFILTERED_IF_INT80 2
/* whatever the kernel does (x32 is a build option): not compared */
#define UNFILTERED_KERNEL 3
/* only the checks judged by their effect have these controls */
#define BY_EFFECT(c) ((c)->want_unfiltered >= UNFILTERED_IF_INT80)

static const struct check checks[] = {
    {"seccomp mode", chk_seccomp_mode, 0, -EBADE},
    {"no_new_privs", chk_no_new_privs, 0, 1},
    {"getpid", chk_getpid, 0, 0},
    {"open /dev/null", chk_open_devnull, 0, 0},
    {"fork", chk_fork, 0, 0},
    {"pthread_create", chk_pthread, 0, 0},
    {"mount", chk_mount, -EPERM, 1},
    {"umount2", chk_umount2, -EPERM, 1},
    {"unshare(CLONE_NEWUSER)", chk_unshare_user, -EPERM, 1},
    {"unshare(CLONE_NEWUSER|NEWNS|FILES)", chk_unshare_user_and_more, -EPERM, 1},
    {"unshare(CLONE_FILES)", chk_unshare_files, 0, 0},
    {"clone(CLONE_NEWUSER)", chk_clone_newuser, -EPERM, 1},
    {"clone3", chk_clone3, -ENOSYS, 1},
    {"setns", chk_setns, -EPERM, 1},
    {"keyctl", chk_keyctl, -EPERM, 1},
    {"add_key", chk_add_key, -EPERM, 1},
    {"bpf", chk_bpf, -EPERM, 1},
    {"ptrace(PTRACE_TRACEME)", chk_ptrace, -EPERM, 0},
    {"process_vm_readv", chk_process_vm_readv, -EPERM, 1},
    {"pidfd_getfd", chk_pidfd_getfd, -EPERM, 0},
    {"ioctl(TIOCSTI)", chk_ioctl_tiocsti, -EPERM, -ENOTTY},
    {"ioctl(TIOCLINUX)", chk_ioctl_tioclinux, -EPERM, 1},
    {"ioctl(FIONREAD)", chk_ioctl_fionread, 0, 0},
    {"io_uring_setup", chk_io_uring_setup, -EPERM, 1},
    {"userfaultfd", chk_userfaultfd, -EPERM, 1},
    {"perf_event_open", chk_perf_event_open, -EPERM, 1},
    {"open_by_handle_at", chk_open_by_handle_at, -EPERM, 1},
#if defined(__x86_64__)
    {"int 0x80 getpid", chk_int80_getpid, REFUSED, UNFILTERED_IF_INT80},
    {"int 0x80 unshare(CLONE_NEWUSER)", chk_int80_unshare_user, REFUSED, UNFILTERED_IF_INT80},
    {"x32 getpid", chk_x32_getpid, REFUSED, UNFILTERED_KERNEL},
#endif
};
#define NCHECKS (sizeof(checks) / sizeof(checks[0]))

/* Run one check in a fresh forked child (so that checks cannot disturb each other, e.g.
 * an unshare that succeeds without the filter), optionally under prog. The child writes
 * the apply result and the check's result to a pipe. Returns the check's result. */
static int run_one(const struct gbx_seccomp_prog *prog, const struct check *c)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30); /* a hung check kills the child, never the runner */
        close(p[0]);
        int v[2] = {prog ? gbx_seccomp_apply(prog) : 0, -EBADE};
        if (v[0] == 0)
            v[1] = c->fn();
        /* _exit: no atexit handlers (LeakSanitizer would try ptrace under the filter) */
        _exit(write(p[1], v, sizeof(v)) == sizeof(v) ? 0 : 2);
    }
    close(p[1]);
    int v[2] = {-EBADE, -EBADE};
    ssize_t n = read(p[0], v, sizeof(v));
    close(p[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || n != sizeof(v))
        print_error("%s: child died (status 0x%x)\n", c->name, st);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(n, sizeof(v));
    assert_int_equal(v[0], 0); /* the filter was installed */
    return v[1];
}

static void run_checks(const struct gbx_seccomp_prog *prog, int results[NCHECKS])
{
    for (size_t i = 0; i < NCHECKS; i++)
        results[i] = run_one(prog, &checks[i]);
}

struct progs {
    struct gbx_seccomp_prog compiled; /* gbx_seccomp_compile at run time */
    struct gbx_seccomp_prog prebuilt; /* gbx_seccomp_prebuilt: generated at build time */
};

/* "-1 (Operation not permitted)", or for a check judged by its effect "refused" */
static const char *result_str(const struct check *c, int r)
{
    static char buf[2][96];
    static int k;
    char *b = buf[k++ % 2];
    if (BY_EFFECT(c) && (r == 0 || r == REFUSED))
        snprintf(b, sizeof(buf[0]), "%s", r == 0 ? "took effect" : "refused");
    else
        snprintf(b, sizeof(buf[0]), "%d (%s)", r, strerror(-r));
    return b;
}

static void check_filter_from_inside(const struct gbx_seccomp_prog *prog)
{
    int res[NCHECKS];
    int bad = 0;
    run_checks(prog, res);
    for (size_t i = 0; i < NCHECKS; i++) {
        int ok = res[i] == checks[i].want;
        print_message("%-36s %-6s got %s, want %s\n", checks[i].name, ok ? "ok" : "WRONG",
                      result_str(&checks[i], res[i]), result_str(&checks[i], checks[i].want));
        bad += !ok;
    }
    assert_int_equal(bad, 0);
}

static void test_filter_from_inside(void **state)
{
    struct progs *ps = *state;
    check_filter_from_inside(&ps->compiled);
}

static void test_prebuilt_filter_from_inside(void **state)
{
    struct progs *ps = *state;
    check_filter_from_inside(&ps->prebuilt);
}

/* The program generated at build time is the one the table compiles to now (a stale
 * generated filter would silently miss new rules). */
static void test_prebuilt_matches_table(void **state)
{
    struct progs *ps = *state;
    assert_non_null(ps->prebuilt.filter);
    assert_int_equal(ps->prebuilt.len, ps->compiled.len);
    assert_memory_equal(ps->prebuilt.filter, ps->compiled.filter,
                        ps->compiled.len * sizeof(struct sock_filter));
}

/* The same checks without the filter, so that a passing filtered run means the filter did
 * it and not the environment (e.g. a check that fails with EPERM anyway). */
static void test_checks_control(void **state)
{
    int res[NCHECKS];
    int bad = 0;
    (void)state;
    run_checks(NULL, res);
#if defined(__x86_64__)
    /* the 32-bit checks can only catch a filter that lets a call through where int 0x80
     * exists; say so where it does not */
    int int80 = chk_int80_getpid() == 0;
    if (!int80)
        print_message("note: this kernel has no int 0x80 from 64-bit code (IA32 emulation "
                      "off): the int 0x80 checks hold without the filter\n");
#endif
    for (size_t i = 0; i < NCHECKS; i++) {
        if (checks[i].want_unfiltered == UNFILTERED_KERNEL) {
            print_message("%s: %s without the filter\n", checks[i].name,
                          result_str(&checks[i], res[i]));
            continue;
        }
#if defined(__x86_64__)
        if (checks[i].want_unfiltered == UNFILTERED_IF_INT80) {
            if (res[i] != (int80 ? 0 : REFUSED)) {
                print_error("%s: %s without the filter, want %s\n", checks[i].name,
                            result_str(&checks[i], res[i]),
                            result_str(&checks[i], int80 ? 0 : REFUSED));
                bad++;
            }
            continue;
        }
#endif
        if (checks[i].want_unfiltered == 1) {
            /* at least the filtered result must differ when running as root, where
             * the kernel itself would not refuse with EPERM */
            if (geteuid() == 0 && checks[i].want == -EPERM && res[i] == -EPERM) {
                print_error("%s: EPERM without the filter too\n", checks[i].name);
                bad++;
            }
            continue;
        }
        if (res[i] != checks[i].want_unfiltered) {
            print_error("%s: got %d without the filter, want %d\n", checks[i].name, res[i],
                        checks[i].want_unfiltered);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* The filter is inherited by children and cannot be removed, even with a second apply. */
static void test_filter_inherited(void **state)
{
    struct progs *ps = *state;
    const struct gbx_seccomp_prog *prog = &ps->compiled;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30);
        int v[3] = {gbx_seccomp_apply(prog), -EBADE, -EBADE};
        if (v[0] == 0) {
            v[1] = gbx_seccomp_apply(prog); /* stacking is allowed */
            pid_t gc = fork();
            if (gc == 0)
                _exit(unshare(CLONE_NEWUSER) < 0 && errno == EPERM ? 0 : 1);
            int st;
            if (gc > 0 && waitpid(gc, &st, 0) == gc && WIFEXITED(st))
                v[2] = WEXITSTATUS(st) == 0 ? 0 : -EBADE;
        }
        _exit(write(p[1], v, sizeof(v)) == sizeof(v) ? 0 : 2);
    }
    close(p[1]);
    int v[3] = {1, 1, 1};
    ssize_t n = read(p[0], v, sizeof(v));
    close(p[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(n, sizeof(v));
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1], 0);
    assert_int_equal(v[2], 0);
}

/* ---- docs/security.md lists every rule ---------------------------------------------- */

static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        int before = p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = isalnum((unsigned char)p[n]) || p[n] == '_';
        if (!before && !after)
            return 1;
    }
    return 0;
}

static void test_security_doc_lists_rules(void **state)
{
    (void)state;
    /* tests run from the repo root; tests/run-tests.sh also exports GBX_REPO */
    const char *root = getenv("GBX_REPO");
    char path[4096];
    snprintf(path, sizeof(path), "%s/docs/security.md", root && *root ? root : ".");
    char *text = NULL;
    int r = gbx_read_file(path, 1 << 22, &text, NULL);
    if (r < 0)
        print_error("cannot read '%s': %s (docs/security.md must list every seccomp rule)\n", path,
                    strerror(-r));
    assert_int_equal(r, 0); /* a missing document is a failure, not a skip */
    int missing = 0;
    for (size_t i = 0; i < gbx_seccomp_nrules; i++) {
        if (!has_word(text, gbx_seccomp_rules[i].syscall)) {
            print_error("docs/security.md does not mention '%s'\n", gbx_seccomp_rules[i].syscall);
            missing++;
        }
    }
    free(text);
    assert_int_equal(missing, 0);
}

static void test_has_word(void **state)
{
    (void)state;
    assert_true(has_word("`mount` is denied", "mount"));
    assert_false(has_word("umount2 only", "mount"));
    assert_false(has_word("mount_setattr only", "mount"));
    assert_true(has_word("umount2 and mount", "mount"));
    assert_true(has_word("mount", "mount"));
    assert_false(has_word("clone3", "clone"));
}

static int setup_progs(void **state)
{
    struct progs *ps = calloc(1, sizeof(*ps));
    if (ps == NULL || gbx_seccomp_compile(&ps->compiled) < 0) {
        free(ps);
        return -1;
    }
    gbx_seccomp_prebuilt(&ps->prebuilt);
    *state = ps;
    return 0;
}

static int teardown_progs(void **state)
{
    struct progs *ps = *state;
    gbx_seccomp_prog_release(&ps->compiled);
    gbx_seccomp_prog_release(&ps->prebuilt);
    free(ps);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_well_formed),
        cmocka_unit_test(test_rules_cover_essentials),
        cmocka_unit_test(test_caps_keep),
        cmocka_unit_test(test_compile),
        cmocka_unit_test(test_checks_control),
        cmocka_unit_test(test_filter_from_inside),
        cmocka_unit_test(test_prebuilt_matches_table),
        cmocka_unit_test(test_prebuilt_filter_from_inside),
        cmocka_unit_test(test_filter_inherited),
        cmocka_unit_test(test_has_word),
        cmocka_unit_test(test_security_doc_lists_rules),
    };
    return cmocka_run_group_tests(tests, setup_progs, teardown_progs);
}
