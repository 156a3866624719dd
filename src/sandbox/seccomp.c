/* SPDX-License-Identifier: MIT */
#include "sandbox/seccomp.h"

#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"

#define DENY(name, why)                                                                            \
    {                                                                                              \
        name, EPERM, GBX_SC_ANY, 0, 0, 0, why                                                      \
    }

const struct gbx_seccomp_rule gbx_seccomp_rules[] = {
    /* the filesystem layout is fixed when the sandbox is created */
    DENY("mount", "mounting could hide, reveal or replace parts of the sandbox's filesystem"),
    DENY("umount2", "unmounting could reveal what a mount masks (e.g. /proc/kcore)"),
    DENY("pivot_root", "changing the root is part of sandbox setup, never of sandbox use"),
    DENY("fsopen", "new mount API: same reason as mount"),
    DENY("fsconfig", "new mount API: same reason as mount"),
    DENY("fsmount", "new mount API: same reason as mount"),
    DENY("fspick", "new mount API: reconfigures existing mounts"),
    DENY("move_mount", "new mount API: same reason as mount"),
    DENY("open_tree", "new mount API: clones mount trees"),
    DENY("mount_setattr", "new mount API: could clear read-only or nosuid flags"),
    /* namespaces */
    {"unshare", EPERM, GBX_SC_MASKED_EQ, 0, CLONE_NEWUSER, CLONE_NEWUSER,
     "a nested user namespace grants a full capability set over new namespaces and opens a "
     "large kernel attack surface"},
    {"clone", EPERM, GBX_SC_MASKED_EQ, 0, CLONE_NEWUSER, CLONE_NEWUSER,
     "same as unshare(CLONE_NEWUSER)"},
    {"clone3", ENOSYS, GBX_SC_ANY, 0, 0, 0,
     "clone3's flags live in memory where seccomp cannot inspect them; ENOSYS makes libc fall "
     "back to clone, whose flags are checked"},
    DENY("setns", "joining another namespace is never needed inside a sandbox"),
    /* other processes' memory */
    DENY("ptrace", "process inspection and injection; a kernel attack surface"),
    DENY("process_vm_readv", "reads another process's memory, like ptrace"),
    DENY("process_vm_writev", "writes another process's memory, like ptrace"),
    DENY("pidfd_getfd", "takes a copy of another process's descriptor, like ptrace (init's "
                        "hibernate placeholder among them)"),
    /* the kernel itself */
    DENY("kexec_load", "replaces the running kernel"),
    DENY("kexec_file_load", "replaces the running kernel"),
    DENY("reboot", "host power state"),
    DENY("init_module", "loads kernel code"),
    DENY("finit_module", "loads kernel code"),
    DENY("delete_module", "unloads kernel code"),
    DENY("bpf", "eBPF programs are a frequent source of kernel exploits"),
    DENY("perf_event_open", "performance counters leak information about the host and other "
                            "tenants and have a history of exploits"),
    DENY("userfaultfd", "used to widen race windows in kernel exploits"),
    DENY("io_uring_setup", "io_uring bypasses seccomp for the operations it performs and has "
                           "a history of exploits"),
    DENY("io_uring_enter", "see io_uring_setup"),
    DENY("io_uring_register", "see io_uring_setup"),
    DENY("keyctl", "kernel keyrings are not namespaced"),
    DENY("add_key", "kernel keyrings are not namespaced"),
    DENY("request_key", "kernel keyrings are not namespaced"),
    DENY("open_by_handle_at", "opens files by handle, bypassing path-based isolation "
                              "(the 'shocker' escape)"),
    DENY("swapon", "host swap configuration"),
    DENY("swapoff", "host swap configuration"),
    DENY("acct", "process accounting is host-wide"),
    DENY("iopl", "raw I/O port access"),
    DENY("ioperm", "raw I/O port access"),
    DENY("syslog", "the kernel log is host-wide and leaks addresses"),
    DENY("settimeofday", "the real-time clock is not namespaced"),
    DENY("clock_settime", "the real-time clock is not namespaced"),
    DENY("clock_adjtime", "the real-time clock is not namespaced"),
    DENY("adjtimex", "the real-time clock is not namespaced"),
    DENY("quotactl", "filesystem quotas are host configuration"),
    {"ioctl", EPERM, GBX_SC_MASKED_EQ, 1, 0xffffffffu, TIOCSTI,
     "TIOCSTI pushes input into a terminal, which could type commands into a shell outside "
     "the process's control"},
    {"ioctl", EPERM, GBX_SC_MASKED_EQ, 1, 0xffffffffu, TIOCLINUX,
     "TIOCLINUX can also inject terminal input"},
};

const size_t gbx_seccomp_nrules = sizeof(gbx_seccomp_rules) / sizeof(gbx_seccomp_rules[0]);

const int gbx_caps_keep[] = {
    CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FSETID,      CAP_FOWNER,
    CAP_SETGID, CAP_SETUID,       CAP_SETFCAP,     CAP_SETPCAP,
    CAP_KILL,   CAP_SYS_CHROOT,   CAP_AUDIT_WRITE, CAP_NET_BIND_SERVICE,
};
const size_t gbx_caps_nkeep = sizeof(gbx_caps_keep) / sizeof(gbx_caps_keep[0]);

int gbx_seccomp_compile(struct gbx_seccomp_prog *p)
{
    p->filter = NULL;
    p->len = 0;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL)
        return -ENOMEM;
    int r;
    /* a binary tree of syscall numbers instead of a linear list: shorter paths, and the
     * kernel's per-syscall action cache is built faster when the filter is installed */
    if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
        goto out;
    /* Only the native ABI is let in. A call through another one (i386 by int 0x80 or
     * sysenter, x32 by the x32 bit in the number) is refused whole with ENOSYS, as on a
     * kernel built without them: rules repeated per ABI would have to be right for each
     * ABI's numbers and argument layout, and sandboxes run 64-bit programs */
    if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS))) < 0)
        goto out;
    for (size_t i = 0; i < gbx_seccomp_nrules; i++) {
        const struct gbx_seccomp_rule *rule = &gbx_seccomp_rules[i];
        int nr = seccomp_syscall_resolve_name(rule->syscall);
        if (nr == __NR_SCMP_ERROR) {
            r = -ENOENT;
            goto out;
        }
        if (rule->cmp == GBX_SC_ANY) {
            r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(rule->errnum), nr, 0);
        } else {
            struct scmp_arg_cmp c = {rule->arg, SCMP_CMP_MASKED_EQ, rule->mask, rule->value};
            r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(rule->errnum), nr, 1, &c);
        }
        /* -EACCES/-EOPNOTSUPP/-EDOM: the syscall does not exist on this arch; fine */
        if (r < 0 && r != -EACCES && r != -EOPNOTSUPP && r != -EDOM)
            goto out;
    }
    int fd = memfd_create("gbx-seccomp", MFD_CLOEXEC);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    r = seccomp_export_bpf(ctx, fd);
    if (r == 0) {
        off_t size = lseek(fd, 0, SEEK_END);
        if (size <= 0 || size % sizeof(struct sock_filter) != 0 ||
            size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
            r = -EINVAL;
        } else {
            p->filter = gbx_xmalloc((size_t)size);
            if (pread(fd, p->filter, (size_t)size, 0) != size) {
                r = -EIO;
                free(p->filter);
                p->filter = NULL;
            } else {
                p->len = (unsigned short)(size / sizeof(struct sock_filter));
            }
        }
    }
    close(fd);
out:
    seccomp_release(ctx);
    return r < 0 ? r : 0;
}

#ifndef GBX_SECCOMP_GENERATOR
extern const unsigned short gbx_seccomp_bpf_len;
extern const unsigned char gbx_seccomp_bpf[];

void gbx_seccomp_prebuilt(struct gbx_seccomp_prog *p)
{
    size_t n = (size_t)gbx_seccomp_bpf_len * sizeof(struct sock_filter);
    p->filter = gbx_xmalloc(n);
    memcpy(p->filter, gbx_seccomp_bpf, n);
    p->len = gbx_seccomp_bpf_len;
}
#endif

void gbx_seccomp_prog_release(struct gbx_seccomp_prog *p)
{
    free(p->filter);
    p->filter = NULL;
    p->len = 0;
}

int gbx_seccomp_apply(const struct gbx_seccomp_prog *p)
{
    struct sock_fprog prog = {.len = p->len, .filter = p->filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
        return -errno;
    return 0;
}
