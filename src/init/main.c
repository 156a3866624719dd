/* SPDX-License-Identifier: MIT */
/* glovebox-init: PID 1 of a sandbox. Startup, the epoll loop and signals.
 *
 * fd 3: optional listening unix socket (the daemon reconnects here after a restart)
 * fd 4: optional connected unix socket (the creator's first connection)
 * fd 7: optional O_PATH handle of the sandbox's writable layer (upper/ work/ lower/), kept
 *       open so that the daemon reaches the layer from the host as /proc/<init>/fd/7 for
 *       snapshots; never inherited by children. Init is not dumpable, so processes of the
 *       sandbox cannot open it through /proc/1/fd.
 * Hidden test option: GBX_INIT_ROOT=<dir> makes file operations resolve inside <dir>. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/init.h"

struct gbx_init gbx_g = {.epfd = -1, .rootfd = -1};

void gbx_src_init(struct gbx_src *s, int kind, int fd, void *owner)
{
    s->kind = kind;
    s->fd = fd;
    s->events = 0;
    s->owner = owner;
}

void gbx_src_set(struct gbx_src *s, uint32_t events)
{
    if (s->fd < 0 || s->events == events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = s};
    int r;
    if (events == 0)
        r = epoll_ctl(gbx_g.epfd, EPOLL_CTL_DEL, s->fd, NULL);
    else if (s->events == 0)
        r = epoll_ctl(gbx_g.epfd, EPOLL_CTL_ADD, s->fd, &ev);
    else
        r = epoll_ctl(gbx_g.epfd, EPOLL_CTL_MOD, s->fd, &ev);
    /* Only ENOMEM can make this fail on a valid fd; there is no way to continue sanely. */
    GBX_BUG_ON(r < 0 && errno != EBADF && errno != ENOENT && errno != EPERM);
    s->events = events;
}

void gbx_src_close(struct gbx_src *s)
{
    if (s->fd < 0)
        return;
    gbx_src_set(s, 0);
    close(s->fd);
    s->fd = -1;
}

static int fd_is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static void setup_stdio(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fd_is_open(fd))
            continue;
        int n = open("/dev/null", O_RDWR);
        if (n >= 0 && n != fd) {
            dup2(n, fd);
            close(n);
        }
    }
}

static void setup_fd(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
}

static int setup_root(void)
{
    const char *root = getenv("GBX_INIT_ROOT");
    if (root == NULL || root[0] == '\0')
        root = "/";
    gbx_g.rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return gbx_g.rootfd < 0 ? -errno : 0;
}

static int setup_signals(void)
{
    /* Start clean, whatever the creator had: an ignored signal survives clone and exec and
     * would otherwise be inherited by everything the sandbox runs (a daemon started from a
     * shell in the background ignores SIGINT and SIGQUIT, for one). Blocked signals are
     * reset the same way; the spawn child only undoes what init itself sets below. */
    for (int sig = 1; sig < NSIG; sig++) {
        /* the raw call: libc refuses to touch the signals it reserves for itself (32-34),
         * which a creator linked against another libc may have left ignored */
        struct {
            void (*handler)(int);
            unsigned long flags;
            void (*restorer)(void);
            unsigned long mask;
        } ksa = {SIG_DFL, 0, NULL, 0};
        if (sig != SIGKILL && sig != SIGSTOP)
            syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
    }
    sigset_t set;
    sigemptyset(&set);
    sigprocmask(SIG_SETMASK, &set, NULL);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    signal(SIGPIPE, SIG_IGN);
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    gbx_src_init(&gbx_g.sig, GBX_SRC_SIGNAL, fd, NULL);
    gbx_src_set(&gbx_g.sig, EPOLLIN);
    return 0;
}

static void close_all_conns(void)
{
    for (int i = 0; i < INIT_MAX_CONNS; i++) {
        struct gbx_conn *c = gbx_g.conns[i];
        if (c != NULL && !c->dead) {
            gbx_conn_flush(c);
            gbx_conn_close(c);
        }
    }
}

void gbx_init_exit(void)
{
    close_all_conns();
    if (gbx_g.is_pid1)
        kill(-1, SIGKILL);
    else
        gbx_proc_kill_all();
    exit(0);
}

static void on_signal(void)
{
    struct signalfd_siginfo si;
    while (read(gbx_g.sig.fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        switch (si.ssi_signo) {
        case SIGCHLD:
            gbx_proc_reap();
            break;
        case SIGTERM:
        case SIGINT:
            gbx_init_exit();
        default:
            break;
        }
    }
}

static int live_conns(void)
{
    int n = 0;
    for (int i = 0; i < INIT_MAX_CONNS; i++)
        n += gbx_g.conns[i] != NULL && !gbx_g.conns[i]->dead;
    return n;
}

/* Work that follows a dispatched batch: stream file data, relay process output, write
 * what is queued, then free what died during the batch. */
static void loop_tail(void)
{
    for (int i = 0; i < INIT_MAX_CONNS; i++) {
        struct gbx_conn *c = gbx_g.conns[i];
        if (c != NULL && !c->dead)
            gbx_fs_pump(c);
    }
    gbx_proc_tick();
    gbx_watch_tick();
    for (int i = 0; i < INIT_MAX_CONNS; i++) {
        struct gbx_conn *c = gbx_g.conns[i];
        if (c != NULL && !c->dead) {
            gbx_conn_flush(c);
            if (!c->dead)
                gbx_conn_update(c);
        }
    }
    gbx_proc_tick(); /* connections that drained may take more output now */
    for (int i = 0; i < INIT_MAX_CONNS; i++) {
        struct gbx_conn *c = gbx_g.conns[i];
        if (c != NULL && c->dead) {
            gbx_conn_buf_put(c->in);
            if (c->out_cap == FRAME_MAX)
                gbx_conn_buf_put(c->out);
            else
                free(c->out);
            free(c);
            gbx_g.conns[i] = NULL;
        }
    }
}

#ifndef GBX_FUZZING
int main(void)
{
    gbx_g.is_pid1 = getpid() == 1;
    int have_listen = fd_is_open(3);
    int have_conn = fd_is_open(4);
    close_range(5, GBX_INIT_LAYER_FD - 1, 0);
    close_range(GBX_INIT_LAYER_FD + 1, ~0U, 0);
    if (fd_is_open(GBX_INIT_LAYER_FD))
        (void)fcntl(GBX_INIT_LAYER_FD, F_SETFD, FD_CLOEXEC);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    setup_stdio();
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    umask(0);
    if (gbx_g.is_pid1)
        setsid();

    getrlimit(RLIMIT_NOFILE, &gbx_g.nofile);
    struct rlimit rl = gbx_g.nofile;
    rl.rlim_cur = rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);

    gbx_g.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (gbx_g.epfd < 0 || setup_signals() < 0 || setup_root() < 0) {
        fprintf(stderr, "glovebox-init: setup: %s\n", strerror(errno));
        return 1;
    }
    gbx_creds_save_initial();

    if (have_listen) {
        setup_fd(3);
        gbx_src_init(&gbx_g.listen, GBX_SRC_LISTEN, 3, NULL);
        gbx_src_set(&gbx_g.listen, EPOLLIN);
    } else {
        gbx_g.listen.fd = -1;
    }
    if (have_conn) {
        setup_fd(4);
        gbx_conn_adopt(4);
    }
    gbx_g.inotify.fd = -1;

    struct epoll_event evs[64];
    for (;;) {
        /* Nobody can ever reach an init without a listener once its last connection is
         * gone: shut down rather than linger. */
        if (gbx_g.listen.fd < 0 && live_conns() == 0)
            gbx_init_exit();
        int n = epoll_wait(gbx_g.epfd, evs, (int)GBX_ARRAY_SIZE(evs), gbx_proc_eof_tick());
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "glovebox-init: epoll_wait: %s\n", strerror(errno));
            gbx_init_exit();
        }
        for (int i = 0; i < n; i++) {
            struct gbx_src *s = evs[i].data.ptr;
            if (s->fd < 0)
                continue; /* closed earlier in this batch */
            switch (s->kind) {
            case GBX_SRC_LISTEN:
                gbx_conn_accept(s->fd);
                break;
            case GBX_SRC_CONN:
                gbx_conn_event(s->owner, evs[i].events);
                break;
            case GBX_SRC_SIGNAL:
                on_signal();
                break;
            case GBX_SRC_INOTIFY:
                gbx_watch_event();
                break;
            default:
                gbx_proc_event(s, evs[i].events);
                break;
            }
        }
        loop_tail();
    }
}
#endif
