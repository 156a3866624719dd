/* SPDX-License-Identifier: MIT */
#include "base/child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "base/clock.h"
#include "base/sched.h"

#define SLICE_MS 50
#define REAP_GRACE_MS 10000LL

void gbx_child_prepare(void)
{
    (void)setpgid(0, 0);
    gbx_sched_unboost_self();
    /* a helper does not outlive the daemon (the forking thread, strictly: the daemon's
     * workers live as long as it does): a criu left running would go on dumping */
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < 32; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
}

static void kill_group(pid_t pid)
{
    (void)kill(-pid, SIGKILL);
    (void)kill(pid, SIGKILL);
}

/* The next poll's timeout: the rest of the deadline, in slices while a cancel may come. */
static int slice(int64_t deadline_ns, const atomic_int *cancel)
{
    int ms = -1;
    if (deadline_ns) {
        int64_t left = (deadline_ns - gbx_monotonic_ns()) / 1000000;
        ms = left < 0 ? 0 : left > 1000000 ? 1000000 : (int)left;
    }
    if (cancel && (ms < 0 || ms > SLICE_MS))
        ms = SLICE_MS;
    return ms;
}

/* 0 to go on waiting, or -ETIMEDOUT / -ECANCELED once the group is killed. */
static int overdue(pid_t pid, int64_t deadline_ns, const atomic_int *cancel)
{
    int r = 0;
    if (cancel && atomic_load(cancel))
        r = -ECANCELED;
    else if (deadline_ns && gbx_monotonic_ns() >= deadline_ns)
        r = -ETIMEDOUT;
    if (r)
        kill_group(pid);
    return r;
}

/* Wait for pid and collect its stdout (out_fd, or -1) until the deadline. */
static int wait_for(pid_t pid, int out_fd, char *out, size_t outsz, int64_t timeout_ms,
                    const atomic_int *cancel)
{
    int64_t deadline = timeout_ms > 0 ? gbx_monotonic_ns() + timeout_ms * 1000000 : 0;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    size_t n = 0;
    int killed = 0, reaped = 0, status = 0, r = 0;
    if (out)
        out[0] = '\0';
    while (!reaped || out_fd >= 0) {
        if (!reaped) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) {
                reaped = 1;
            } else if (w < 0 && errno != EINTR) {
                r = -errno;
                break;
            }
        }
        if (!killed && (killed = overdue(pid, deadline, cancel)) != 0) {
            /* a process stuck in the kernel may not even die: the wait for it is bounded too */
            deadline = gbx_monotonic_ns() + REAP_GRACE_MS * 1000000;
            if (out_fd >= 0) {
                close(out_fd); /* whatever it wrote is of no use now */
                out_fd = -1;
            }
        } else if (killed && !reaped && gbx_monotonic_ns() >= deadline) {
            break; /* killed but not gone: left to the kernel (a zombie once it dies) */
        }
        if (reaped && out_fd < 0)
            break;
        struct pollfd p[2];
        nfds_t np = 0;
        if (pidfd >= 0 && !reaped)
            p[np++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
        if (out_fd >= 0)
            p[np++] = (struct pollfd){.fd = out_fd, .events = POLLIN};
        int ms = killed ? SLICE_MS : slice(deadline, cancel);
        if (pidfd < 0 && (ms < 0 || ms > SLICE_MS))
            ms = SLICE_MS; /* no pidfd (an old kernel): look again now and then */
        int pr = poll(p, np, ms);
        if (pr <= 0 || out_fd < 0 || !(p[np - 1].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        char drop[512];
        char *dst = n + 1 < outsz ? out + n : drop;
        size_t room = n + 1 < outsz ? outsz - 1 - n : sizeof(drop);
        ssize_t k = read(out_fd, dst, room);
        if (k > 0 && dst != drop) {
            n += (size_t)k;
            out[n] = '\0';
        } else if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
            close(out_fd);
            out_fd = -1;
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    if (out_fd >= 0)
        close(out_fd);
    if (r < 0)
        return r;
    return killed ? killed : status;
}

int gbx_child_wait(pid_t pid, int64_t timeout_ms, const atomic_int *cancel)
{
    return wait_for(pid, -1, NULL, 0, timeout_ms, cancel);
}

int gbx_child_run(char *const argv[], const struct gbx_child_opts *o)
{
    int p[2] = {-1, -1};
    if (o->out && pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        if (o->out) {
            close(p[0]);
            close(p[1]);
        }
        return -e;
    }
    if (pid == 0) {
        gbx_child_prepare();
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            (void)dup2(null, 0);
            (void)dup2(o->out ? p[1] : null, 1);
            (void)dup2(null, 2);
        }
        if (o->out) /* the write end as a blocking fd 1 */
            (void)fcntl(1, F_SETFL, fcntl(1, F_GETFL) & ~O_NONBLOCK);
        if (o->keep_fd >= 0 && dup2(o->keep_fd, 3) < 0)
            _exit(126);
        syscall(SYS_close_range, o->keep_fd >= 0 ? 4 : 3, ~0U, 0);
        execvp(argv[0], argv);
        _exit(127);
    }
    /* no race with the child's own setpgid: whichever runs first, the group is its own */
    (void)setpgid(pid, pid);
    if (o->out)
        close(p[1]);
    return wait_for(pid, o->out ? p[0] : -1, o->out, o->outsz, o->timeout_ms, o->cancel);
}

const char *gbx_child_status_str(int st, int64_t timeout_ms, char *buf, size_t bufsz)
{
    if (st == -ETIMEDOUT)
        snprintf(buf, bufsz, "no answer within %lld s (killed)", (long long)(timeout_ms / 1000));
    else if (st == -ECANCELED)
        snprintf(buf, bufsz, "cancelled (killed)");
    else if (st < 0)
        snprintf(buf, bufsz, "cannot run: %s", strerror(-st));
    else if (WIFEXITED(st))
        snprintf(buf, bufsz, "exit %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, bufsz, "signal %d", WTERMSIG(st));
    else
        snprintf(buf, bufsz, "status %d", st);
    return buf;
}
