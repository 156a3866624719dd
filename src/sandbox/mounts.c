/* SPDX-License-Identifier: MIT */
/* The sandbox's mount namespace, built in the child before glovebox-init runs:
 *
 *   <staging> (private tmpfs, size = disk limit)   the writable layer
 *     upper/ work/                                 overlay upper and work dirs
 *     lower/   <- idmapped, read-only clone of the template rootfs
 *     l0/ l1/… <- idmapped, read-only clones of snapshot layers stacked on it (l0 on top)
 *     root/    <- overlay(lower, upper): becomes "/"
 *       usr    <- idmapped, read-only clone of the host's /usr (template usr=host)
 *       proc   fresh procfs; sensitive files masked, /proc/sys & co read-only
 *       dev    tmpfs + bind-mounted null zero full random urandom tty, devpts, shm
 *       tmp    tmpfs
 *
 * then pivot_root into root/ and detach the old root: nothing of the host stays reachable.
 * Runs between clone and exec: no allocation, returns -errno and names the failing step. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/ns.h"

#define STEP(what_, expr)                                                                          \
    do {                                                                                           \
        if ((expr) < 0) {                                                                          \
            int e_ = errno;                                                                        \
            snprintf(what, whatsz, "%s", what_);                                                   \
            return -e_;                                                                            \
        }                                                                                          \
    } while (0)

static const char *const proc_masked_files[] = {
    "kcore",         "keys",        "key-users", "timer_list",    "sched_debug",
    "latency_stats", "kallsyms",    "kmsg",      "kpagecount",    "kpageflags",
    "kpagecgroup",   "vmallocinfo", "config.gz", "sysrq-trigger",
};
static const char *const proc_masked_dirs[] = {"acpi", "scsi", "asound", "firmware",
                                               "dynamic_debug"};
static const char *const proc_readonly[] = {"sys", "irq", "bus", "fs"};
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static int setup_proc(char *what, size_t whatsz)
{
    STEP("mount /proc", mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL));
    char p[64];
    for (size_t i = 0; i < GBX_ARRAY_SIZE(proc_readonly); i++) {
        snprintf(p, sizeof(p), "proc/%s", proc_readonly[i]);
        if (!exists(p))
            continue;
        STEP("bind /proc read-only", mount(p, p, NULL, MS_BIND | MS_REC, NULL));
        STEP("remount /proc read-only",
             mount(NULL, p, NULL,
                   MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL));
    }
    for (size_t i = 0; i < GBX_ARRAY_SIZE(proc_masked_files); i++) {
        snprintf(p, sizeof(p), "proc/%s", proc_masked_files[i]);
        struct stat st;
        /* files only host root may open (kcore, kmsg, kpage*: mode 0400) are out of reach
         * already: host root is not mapped in the sandbox's user namespace, so its uid 0
         * is "other" to them. Mask what "other" can read or write. */
        if (lstat(p, &st) < 0 || (st.st_mode & 0006) == 0)
            continue;
        STEP("mask /proc file", mount("/dev/null", p, NULL, MS_BIND, NULL));
    }
    for (size_t i = 0; i < GBX_ARRAY_SIZE(proc_masked_dirs); i++) {
        snprintf(p, sizeof(p), "proc/%s", proc_masked_dirs[i]);
        if (!exists(p))
            continue;
        STEP("mask /proc dir",
             mount("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   "size=0,mode=555"));
    }
    return 0;
}

static int setup_dev(const struct gbx_child_plan *pl, char *what, size_t whatsz)
{
    STEP("mount /dev",
         mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=755"));
    char p[64], src[64];
    for (size_t i = 0; i < GBX_ARRAY_SIZE(dev_nodes); i++) {
        snprintf(p, sizeof(p), "dev/%s", dev_nodes[i]);
        snprintf(src, sizeof(src), "/dev/%s", dev_nodes[i]);
        int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
        STEP("create /dev node", fd);
        close(fd);
        STEP("bind /dev node", mount(src, p, NULL, MS_BIND, NULL));
    }
    STEP("mkdir /dev/pts", mkdir("dev/pts", 0755));
    STEP("mount devpts", mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                               "newinstance,ptmxmode=0666,mode=620,gid=5"));
    STEP("link /dev/ptmx", symlink("pts/ptmx", "dev/ptmx"));
    STEP("mkdir /dev/shm", mkdir("dev/shm", 01777));
    STEP("mount /dev/shm", mount("tmpfs", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, pl->tmp_opts));
    STEP("link /dev/fd", symlink("/proc/self/fd", "dev/fd"));
    STEP("link /dev/stdin", symlink("/proc/self/fd/0", "dev/stdin"));
    STEP("link /dev/stdout", symlink("/proc/self/fd/1", "dev/stdout"));
    STEP("link /dev/stderr", symlink("/proc/self/fd/2", "dev/stderr"));
    STEP("remount /dev read-only",
         mount(NULL, "dev", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
               "size=64k,nr_inodes=64,mode=755"));
    return 0;
}

int gbx_ns_mounts_setup(const struct gbx_child_plan *pl, int tmpl_fd, int usr_fd,
                        const int *layer_fds, int nlayer, int *layer_fd, char *what, size_t whatsz)
{
    STEP("make mounts private", mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
    STEP("mount writable layer",
         mount("tmpfs", pl->staging, "tmpfs", MS_NOSUID | MS_NODEV, pl->layer_opts));
    STEP("open writable layer", *layer_fd = open(pl->staging, O_PATH | O_DIRECTORY | O_CLOEXEC));
    STEP("mkdir upper", mkdir(pl->upper, 0755));
    STEP("mkdir work", mkdir(pl->work, 0700));
    STEP("mkdir lower", mkdir(pl->lower, 0755));
    STEP("mkdir root", mkdir(pl->root, 0755));
    STEP("attach template", move_mount(tmpl_fd, "", AT_FDCWD, pl->lower, MOVE_MOUNT_F_EMPTY_PATH));
    for (int i = 0; i < nlayer; i++) {
        char p[PATH_MAX + 16];
        snprintf(p, sizeof(p), "%s/l%d", pl->staging, i);
        STEP("mkdir a layer", mkdir(p, 0755));
        STEP("attach a snapshot layer",
             move_mount(layer_fds[i], "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH));
    }
    STEP("mount overlay rootfs", mount("overlay", pl->root, "overlay", MS_NODEV, pl->overlay_opts));
    STEP("enter rootfs", chdir(pl->root));
    if (usr_fd >= 0)
        STEP("attach /usr", move_mount(usr_fd, "", AT_FDCWD, "usr", MOVE_MOUNT_F_EMPTY_PATH));
    if (pl->trust_bundle[0]) {
        /* the daemon's bundle (the host's plus the egress CA) as the system bundle */
        static const char bundle[] = "etc/ssl/certs/ca-certificates.crt";
        if (!exists(bundle)) {
            (void)mkdir("etc/ssl", 0755);
            (void)mkdir("etc/ssl/certs", 0755);
            int fd = open(bundle, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
            STEP("create the CA bundle", fd);
            close(fd);
        }
        STEP("bind the CA bundle", mount(pl->trust_bundle, bundle, NULL, MS_BIND, NULL));
        STEP("remount the CA bundle read-only",
             mount(NULL, bundle, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                   NULL));
    }
    int r = setup_proc(what, whatsz);
    if (r < 0)
        return r;
    if ((r = setup_dev(pl, what, whatsz)) < 0)
        return r;
    STEP("mount /tmp", mount("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, pl->tmp_opts));
    /* pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves
     * the new root alone, without a put_old directory inside the sandbox */
    STEP("pivot_root", syscall(SYS_pivot_root, ".", "."));
    STEP("detach old root", umount2(".", MNT_DETACH));
    STEP("chdir /", chdir("/"));
    return 0;
}
