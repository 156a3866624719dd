/* SPDX-License-Identifier: MIT */
/* clone3 into every namespace, hand the child its idmapped trees, and exec glovebox-init
 * from the sealed memfd. The handshake:
 *
 *   parent                                    child (new user, mnt, pid, uts, ipc, net, time ns)
 *   clone3(CLONE_INTO_CGROUP, CLONE_PIDFD)    waits on the sync socket
 *   write uid_map / gid_map
 *   join v1 cgroups; idmapped trees
 *   send "go" + tree fds  ------------------> setresuid(0): now the unprivileged host range
 *                                             unshare(CGROUP); mounts; pivot_root; hostname;
 *                                             lo up; drop caps; seccomp; execveat(init)
 *   EOF on the sync socket (CLOEXEC) <------- or {errno, message} and exit
 *
 * The clone itself is the spawner's (spawner.c), so that the daemon's address space is not
 * forked; without one, the calling thread clones.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sched.h"
#include "base/fileutil.h"
#include "agent/proto.h"
#include "sandbox/ns.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static void child_fail(int sync_fd, int errnum, const char *what)
{
    struct gbx_child_error e;
    memset(&e, 0, sizeof(e));
    e.errnum = errnum;
    snprintf(e.msg, sizeof(e.msg), "%s", what);
    (void)!write(sync_fd, &e, sizeof(e));
    _exit(127);
}

/* Receive the go message with the template's tree, /usr's (or -1) and the extra layers. */
static int recv_go(int sync_fd, int *tmpl_fd, int *usr_fd, int *layer_fds, int *nlayer)
{
    char byte;
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE((2 + GBX_MAX_LAYERS) * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n = GBX_RETRY(recvmsg(sync_fd, &msg, MSG_CMSG_CLOEXEC));
    if (n <= 0)
        return n == 0 ? -EPIPE : -errno;
    if (byte != 'G')
        return -EPROTO;
    *tmpl_fd = *usr_fd = -1;
    *nlayer = 0;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int fds[2 + GBX_MAX_LAYERS];
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        if (nfd < 2 || nfd > 2 + GBX_MAX_LAYERS)
            return -EPROTO;
        memcpy(fds, CMSG_DATA(c), nfd * sizeof(int));
        *tmpl_fd = fds[0];
        *usr_fd = fds[1]; /* a placeholder (the sync socket itself) when there is none */
        for (size_t i = 2; i < nfd; i++)
            layer_fds[(*nlayer)++] = fds[i];
    }
    return *tmpl_fd >= 0 ? 0 : -EPROTO;
}

/* Move fd to number target (not close-on-exec). */
static int place_fd(int fd, int target)
{
    if (fd == target) {
        int fl = fcntl(fd, F_GETFD);
        return fl < 0 ? -errno : fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0 ? -errno : 0;
    }
    if (dup3(fd, target, 0) < 0)
        return -errno;
    return 0;
}

__attribute__((noreturn)) static void child_main(const struct gbx_child_plan *p)
{
    /* a sandbox runs at the process's priority, not the loop's; its CPU group is the one the
     * parent puts it in (never moved back by the child: it may already be in its own) */
    gbx_sched_unboost_nice();
    int sync_fd = p->sync_fd;
    int tmpl_fd = -1, usr_fd = -1, r;
    int layer_fds[GBX_MAX_LAYERS], nlayer = 0;
    char what[96] = "";

    if ((r = recv_go(sync_fd, &tmpl_fd, &usr_fd, layer_fds, &nlayer)) < 0)
        child_fail(sync_fd, -r, "wait for the parent");
    /* the parent has written our uid map: become the sandbox's root (an unprivileged uid on
     * the host). Until now this process still had host-root file access. */
    /* raw system calls: libc's wrappers would try to change the credentials of every
     * thread of the process we were cloned from (the daemon's thread pool), which this
     * child does not have and must not signal */
    if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
        child_fail(sync_fd, errno, "become root of the user namespace");
    if (syscall(SYS_setgroups, 0, NULL) < 0)
        child_fail(sync_fd, errno, "clear supplementary groups");
    int layer_fd = -1;
    if ((r = gbx_ns_mounts_setup(p, tmpl_fd, p->usr_host ? usr_fd : -1, layer_fds, nlayer,
                                 &layer_fd, what, sizeof(what))) < 0)
        child_fail(sync_fd, -r, what);
    close(tmpl_fd);
    if (usr_fd >= 0)
        close(usr_fd);
    for (int i = 0; i < nlayer; i++)
        close(layer_fds[i]);
    if (sethostname(p->hostname, strlen(p->hostname)) < 0)
        child_fail(sync_fd, errno, "set hostname");
    if ((r = gbx_ns_loopback_up()) < 0)
        child_fail(sync_fd, -r, "bring up loopback");

    /* fds: 0-2 /dev/null (inside the sandbox), 3 control listener, 4 creator's connection */
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0)
        child_fail(sync_fd, errno, "open /dev/null");
    int hi = 100; /* park fds above the fixed numbers before placing them */
    int conn = fcntl(p->conn_fd, F_DUPFD_CLOEXEC, hi);
    int ctl = p->ctl_fd >= 0 ? fcntl(p->ctl_fd, F_DUPFD_CLOEXEC, hi) : -1;
    int init = fcntl(p->init_fd, F_DUPFD_CLOEXEC, hi);
    int sync2 = fcntl(sync_fd, F_DUPFD_CLOEXEC, hi);
    int layer = fcntl(layer_fd, F_DUPFD_CLOEXEC, hi);
    if (conn < 0 || init < 0 || sync2 < 0 || layer < 0 || (p->ctl_fd >= 0 && ctl < 0))
        child_fail(sync_fd, errno, "arrange file descriptors");
    sync_fd = sync2;
    for (int i = 0; i < 3; i++)
        if (dup3(null_fd, i, 0) < 0)
            child_fail(sync_fd, errno, "set up stdio");
    if ((r = place_fd(conn, 4)) < 0)
        child_fail(sync_fd, -r, "set up the agent connection");
    if (ctl >= 0 && (r = place_fd(ctl, 3)) < 0)
        child_fail(sync_fd, -r, "set up the control socket");
    if (ctl < 0)
        close(3);
    /* init's image at 5 and the sync socket at 6 (both close-on-exec), the writable layer's
     * handle at 7 (kept by init); nothing else */
    if (dup3(init, 5, O_CLOEXEC) < 0 || dup3(sync_fd, 6, O_CLOEXEC) < 0 ||
        dup3(layer, GBX_INIT_LAYER_FD, 0) < 0)
        child_fail(sync_fd, errno, "arrange file descriptors");
    init = 5;
    sync_fd = 6;
    if (syscall(SYS_close_range, GBX_INIT_LAYER_FD + 1, ~0U, 0) < 0)
        child_fail(sync_fd, errno, "close inherited fds");

    /* the parent created our v1 groups and limits while we built the filesystem; wait
     * until we are in them, then take a cgroup namespace rooted at our own groups */
    char ready = 0;
    if (GBX_RETRY(read(sync_fd, &ready, 1)) != 1 || ready != 'C')
        child_fail(sync_fd, EPIPE, "wait for cgroups");
    if (unshare(CLONE_NEWCGROUP) < 0)
        child_fail(sync_fd, errno, "create cgroup namespace");
    if (setsid() < 0)
        child_fail(sync_fd, errno, "setsid");
    if ((r = gbx_ns_caps_drop()) < 0)
        child_fail(sync_fd, -r, "drop capabilities");
    if ((r = gbx_seccomp_apply(p->seccomp)) < 0)
        child_fail(sync_fd, -r, "install seccomp filter");

    static char arg0[] = "glovebox-init";
    static char path_env[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    char *const argv[] = {arg0, NULL};
    char *const envp[] = {path_env, NULL};
    syscall(SYS_execveat, init, "", argv, envp, AT_EMPTY_PATH);
    child_fail(sync_fd, errno, "exec glovebox-init");
    _exit(127);
}

static int send_go(int sync_fd, int tmpl_fd, int usr_fd, const int *layer_fds, size_t nlayer)
{
    char byte = 'G';
    struct iovec iov = {&byte, 1};
    int fds[2 + GBX_MAX_LAYERS] = {tmpl_fd, usr_fd >= 0 ? usr_fd : sync_fd};
    for (size_t i = 0; i < nlayer; i++)
        fds[2 + i] = layer_fds[i];
    return gbx_send_fds(sync_fd, NULL, 0, &iov, 1, fds, 2 + nlayer);
}

int gbx_ns_clone_child(const struct gbx_child_plan *p, int v2fd, uint64_t extra_flags, int close_fd,
                       pid_t *pid_out, int *pidfd)
{
    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
               CLONE_NEWNET | CLONE_NEWTIME | CLONE_PIDFD | extra_flags;
    ca.pidfd = (uint64_t)(uintptr_t)pidfd;
    ca.exit_signal = (extra_flags & CLONE_PARENT) ? 0 : SIGCHLD; /* CLONE_PARENT: the spawner's */
    if (v2fd >= 0) {
        ca.flags |= CLONE_INTO_CGROUP;
        ca.cgroup = (uint64_t)v2fd;
    }
    pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        if (close_fd >= 0)
            close(close_fd);
        child_main(p);
    }
    *pid_out = pid;
    return 0;
}

int gbx_ns_spawn(struct gbx_runtime *rt, struct gbx_sandbox *sb, const struct gbx_child_plan *p,
                 const char *tmpl_rootfs, const char *const *layers, size_t nlayers,
                 const struct gbx_cg_limits *limits, struct gbx_err **err)
{
    int layer_fds[GBX_MAX_LAYERS];
    size_t nlayer_fds = 0;
    if (nlayers > GBX_MAX_LAYERS)
        return gbx_err_set(err, E2BIG, GBX_ERR_INVALID, "more than %d layers", GBX_MAX_LAYERS);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return gbx_err_sys(err, errno, "cannot create sync socket");
    struct gbx_child_plan plan = *p;
    plan.sync_fd = sv[1];

    pid_t pid;
    int pidfd = -1;
    int r = gbx_spawner_clone(rt, &plan, sb->cg.v2fd, sv[0], &pid, &pidfd);
    if (r == -ETIMEDOUT) { /* a child the spawner made meanwhile holds this pair: a new one */
        close(sv[0]);
        close(sv[1]);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
            return gbx_err_sys(err, errno, "cannot create sync socket");
        plan.sync_fd = sv[1];
        r = -ENOSYS;
    }
    if (r == -ENOSYS) /* no spawner (it failed, or never started): clone from here */
        r = gbx_ns_clone_child(&plan, sb->cg.v2fd, 0, sv[0], &pid, &pidfd);
    if (r < 0) {
        close(sv[0]);
        close(sv[1]);
        return gbx_err_sys(err, -r, "clone3");
    }
    close(sv[1]);
    sb->init_pid = pid;
    sb->pidfd = pidfd;

    int tmpl_fd = -1, usr_fd = -1, ufd = -1, have_err = 0;
    const char *step = "write uid map";
    if ((r = gbx_ns_write_idmap(pid, sb->host_uid, GBX_UID_RANGE)) < 0)
        goto fail;
    step = "open the user namespace";
    if ((r = ufd = gbx_ns_userns_open(pid)) < 0)
        goto fail;
    step = "idmap template";
    if ((r = tmpl_fd = gbx_ns_idmapped_tree(tmpl_rootfs, ufd)) < 0)
        goto fail;
    if (p->usr_host) {
        step = "idmap /usr";
        if ((r = usr_fd = gbx_ns_idmapped_tree("/usr", ufd)) < 0)
            goto fail;
    }
    step = "idmap a snapshot layer";
    for (; nlayer_fds < nlayers; nlayer_fds++)
        if ((r = layer_fds[nlayer_fds] = gbx_ns_idmapped_tree(layers[nlayer_fds], ufd)) < 0)
            goto fail;
    close(ufd);
    ufd = -1;
    step = "start sandbox";
    if ((r = send_go(sv[0], tmpl_fd, usr_fd, layer_fds, nlayer_fds)) < 0)
        goto fail;
    close(tmpl_fd);
    if (usr_fd >= 0)
        close(usr_fd);
    tmpl_fd = usr_fd = -1;
    while (nlayer_fds > 0)
        close(layer_fds[--nlayer_fds]);

    /* while the child builds its filesystem: its v1 groups and limits (the slow part of
     * cgroup setup overlaps with the child's), then place it and let it go on */
    if (gbx_cgroup_finish(&sb->cg, limits, err) < 0 ||
        gbx_cgroup_attach(&sb->cg, pid, sb->cg.v2fd >= 0, err) < 0) {
        have_err = 1;
        goto fail;
    }
    char ready = 'C';
    if (GBX_RETRY(send(sv[0], &ready, 1, MSG_NOSIGNAL)) < 0 && errno != EPIPE) {
        r = -errno;
        step = "release sandbox";
        goto fail;
    }

    /* EOF: the child exec'd glovebox-init. A message: it failed and says why. */
    struct gbx_child_error ce;
    ssize_t n = GBX_RETRY(read(sv[0], &ce, sizeof(ce)));
    close(sv[0]);
    if (n == 0)
        return 0;
    if (n == (ssize_t)sizeof(ce)) {
        ce.msg[sizeof(ce.msg) - 1] = '\0';
        gbx_err_sys(err, ce.errnum, "%s", ce.msg);
    } else {
        gbx_err_sys(err, n < 0 ? errno : EPROTO, "sandbox setup failed");
    }
    return -1;

fail:
    if (!have_err)
        gbx_err_sys(err, -r, "%s", step);
    if (ufd >= 0)
        close(ufd);
    if (tmpl_fd >= 0)
        close(tmpl_fd);
    if (usr_fd >= 0)
        close(usr_fd);
    while (nlayer_fds > 0)
        close(layer_fds[--nlayer_fds]);
    close(sv[0]);
    return -1;
}
