/* SPDX-License-Identifier: MIT */
/* The spawner: a small process, forked from the daemon's main thread when the runtime starts,
 * that clones sandboxes for it. Why: a fork of the daemon write-protects every page of its
 * address space, and each of the event loop's writes after it is a page fault; on two CPUs
 * the flushes and faults of 100+ creates a second were a third of the loop's time and
 * multiplied its reply times under load. The spawner's own address space is the one that is
 * forked; the daemon's is not touched.
 *
 *   worker thread                        spawner                       sandbox child
 *   request: plan + fds  -------------->  clone3(CLONE_PARENT, ...)  -> child_main(plan)
 *   (sync, conn, init, [ctl], [cgroup])   reply {pid, errno} + pidfd
 *   recv on the sync socket <-----------  over the child's end of it
 *
 * CLONE_PARENT makes the sandbox the daemon's child (it waits for it, as before). A request
 * is one datagram, so threads share the socket without a lock. When the spawner is gone or
 * does not answer within its deadline, it is put down and callers clone themselves
 * (-ENOSYS). */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileutil.h"
#include "base/log.h"
#include "base/sched.h"
#include "sandbox/ns.h"

#define SPAWNER_DEADLINE_MS 10000
#define SPAWNER_BUF (4 * 1024 * 1024) /* a few requests in flight (each ~170 KiB) */
#define SPAWNER_NFD 5                 /* sync, conn, init, ctl, cgroup */

struct spawn_hdr {
    int32_t have_ctl, have_cg;
};

struct spawn_req {
    struct spawn_hdr h;
    struct gbx_child_plan plan;
};

struct spawn_reply {
    int32_t pid;
    int32_t errnum;
};

static void reply(int sync_fd, pid_t pid, int errnum, int pidfd)
{
    struct spawn_reply rep = {.pid = pid, .errnum = errnum};
    struct iovec iov = {&rep, sizeof(rep)};
    (void)!gbx_send_fds(sync_fd, NULL, 0, &iov, 1, &pidfd, pidfd >= 0 ? 1 : 0);
}

/* The spawner's life: only system calls and copies (it was forked from a process with
 * threads), until the daemon closes its end or dies. */
__attribute__((noreturn)) static void spawner_main(int sock, pid_t daemon_pid,
                                                   const struct gbx_seccomp_prog *seccomp)
{
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != daemon_pid)
        _exit(0);
    (void)prctl(PR_SET_NAME, "gbx-spawner");
    gbx_sched_unboost_nice();
    if (dup3(sock, 3, O_CLOEXEC) < 0)
        _exit(1);
    sock = 3;
    (void)syscall(SYS_close_range, 4, ~0U, 0); /* keep stdio (the daemon's log) and the socket */
    struct spawn_req *req =
        mmap(NULL, sizeof(*req), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (req == MAP_FAILED)
        _exit(1);
    for (;;) {
        struct iovec iov = {req, sizeof(*req)};
        union {
            char buf[CMSG_SPACE(SPAWNER_NFD * sizeof(int))];
            struct cmsghdr align;
        } u;
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = u.buf,
                             .msg_controllen = sizeof(u.buf)};
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(0);
        int fds[SPAWNER_NFD];
        size_t nfd = 0;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            if (nfd > SPAWNER_NFD)
                nfd = SPAWNER_NFD;
            memcpy(fds, CMSG_DATA(c), nfd * sizeof(int));
        }
        size_t want = 3 + (req->h.have_ctl ? 1 : 0) + (req->h.have_cg ? 1 : 0);
        if (nfd >= 1 && (n != (ssize_t)sizeof(*req) || nfd != want ||
                         (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))) {
            reply(fds[0], 0, EPROTO, -1);
        } else if (nfd >= 1) {
            size_t k = 1;
            req->plan.sync_fd = fds[0];
            req->plan.conn_fd = fds[k++];
            req->plan.init_fd = fds[k++];
            req->plan.ctl_fd = req->h.have_ctl ? fds[k++] : -1;
            int v2fd = req->h.have_cg ? fds[k++] : -1;
            req->plan.seccomp = seccomp;
            pid_t pid = 0;
            int pidfd = -1;
            int r = gbx_ns_clone_child(&req->plan, v2fd, CLONE_PARENT, -1, &pid, &pidfd);
            reply(fds[0], r < 0 ? 0 : pid, r < 0 ? -r : 0, pidfd);
            if (pidfd >= 0)
                close(pidfd);
        }
        for (size_t i = 0; i < nfd; i++)
            close(fds[i]);
    }
}

int gbx_spawner_start(struct gbx_runtime *rt)
{
    rt->spawner_fd = -1;
    rt->spawner_pid = -1;
    if (getenv("GLOVEBOX_NO_SPAWNER")) /* tests of the fallback */
        return -ENOSYS;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    int sz = SPAWNER_BUF;
    /* datagrams of ~170 KiB: beyond the default buffer (root may raise it) */
    if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
        (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    if (setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
        (void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    struct timeval tv = {.tv_sec = SPAWNER_DEADLINE_MS / 1000};
    (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return -e;
    }
    if (pid == 0)
        spawner_main(sv[1], self, &rt->seccomp);
    close(sv[1]);
    rt->spawner_fd = sv[0];
    rt->spawner_pid = pid;
    __atomic_store_n(&rt->spawner_ok, 1, __ATOMIC_RELEASE);
    return 0;
}

/* A spawner that failed: later creates clone themselves. Its socket stays open until the
 * runtime is released (no other thread's send lands on a reused descriptor). */
static void spawner_down(struct gbx_runtime *rt, const char *why)
{
    if (__atomic_exchange_n(&rt->spawner_ok, 0, __ATOMIC_ACQ_REL) == 0)
        return;
    gbx_log_warn("the sandbox spawner %s: sandboxes are cloned by the daemon from now on", why);
    if (rt->spawner_pid > 0)
        (void)kill(rt->spawner_pid, SIGKILL);
}

void gbx_spawner_stop(struct gbx_runtime *rt)
{
    __atomic_store_n(&rt->spawner_ok, 0, __ATOMIC_RELEASE);
    if (rt->spawner_fd >= 0)
        close(rt->spawner_fd); /* EOF: it exits */
    rt->spawner_fd = -1;
    if (rt->spawner_pid > 0) {
        for (int i = 0; i < 100; i++) { /* 1 s, then it is killed */
            if (waitpid(rt->spawner_pid, NULL, WNOHANG) != 0)
                break;
            if (i == 99) {
                (void)kill(rt->spawner_pid, SIGKILL);
                (void)GBX_RETRY(waitpid(rt->spawner_pid, NULL, 0));
            }
            usleep(10000);
        }
    }
    rt->spawner_pid = -1;
}

int gbx_spawner_clone(struct gbx_runtime *rt, const struct gbx_child_plan *p, int v2fd,
                      int sync_parent, pid_t *pid, int *pidfd)
{
    if (!__atomic_load_n(&rt->spawner_ok, __ATOMIC_ACQUIRE))
        return -ENOSYS;
    struct spawn_hdr hdr = {.have_ctl = p->ctl_fd >= 0, .have_cg = v2fd >= 0};
    /* one datagram: the header, then the caller's plan */
    struct iovec iov[2] = {{&hdr, offsetof(struct spawn_req, plan)},
                           {(void *)(uintptr_t)p, sizeof(*p)}};
    int fds[SPAWNER_NFD] = {p->sync_fd, p->conn_fd, p->init_fd};
    size_t nfd = 3;
    if (hdr.have_ctl)
        fds[nfd++] = p->ctl_fd;
    if (hdr.have_cg)
        fds[nfd++] = v2fd;
    int sr = gbx_send_fds(rt->spawner_fd, NULL, 0, iov, 2, fds, nfd);
    if (sr < 0) {
        spawner_down(rt, sr == -EAGAIN ? "did not take a request in time" : "is gone");
        return -ENOSYS;
    }

    /* the reply comes on the sync socket, from the spawner's copy of the child's end */
    struct pollfd pf = {.fd = sync_parent, .events = POLLIN};
    int pr = GBX_RETRY(poll(&pf, 1, SPAWNER_DEADLINE_MS));
    if (pr <= 0) {
        /* a child it made meanwhile finds its sync socket closed by the caller and exits */
        spawner_down(rt, "did not answer in time");
        return pr == 0 ? -ETIMEDOUT : -errno;
    }
    struct spawn_reply rep;
    struct iovec riov = {&rep, sizeof(rep)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ru;
    struct msghdr rmsg = {
        .msg_iov = &riov, .msg_iovlen = 1, .msg_control = ru.buf, .msg_controllen = sizeof(ru.buf)};
    ssize_t n = GBX_RETRY(recvmsg(sync_parent, &rmsg, MSG_CMSG_CLOEXEC));
    int got_fd = -1;
    struct cmsghdr *rc = CMSG_FIRSTHDR(&rmsg);
    if (n > 0 && rc && rc->cmsg_level == SOL_SOCKET && rc->cmsg_type == SCM_RIGHTS &&
        rc->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&got_fd, CMSG_DATA(rc), sizeof(int));
    if (n == 0) { /* nobody holds the child's end: it died before cloning anything */
        spawner_down(rt, "is gone");
        return -ENOSYS;
    }
    if (n != (ssize_t)sizeof(rep)) {
        if (got_fd >= 0)
            close(got_fd);
        spawner_down(rt, "answered what it should not");
        return n < 0 ? -errno : -EPROTO;
    }
    if (rep.errnum != 0 || rep.pid <= 0 || got_fd < 0) {
        if (got_fd >= 0)
            close(got_fd);
        return -(rep.errnum ? rep.errnum : EPROTO);
    }
    *pid = rep.pid;
    *pidfd = got_fd;
    return 0;
}
