/* SPDX-License-Identifier: MIT */
/* Processes: spawn (pipes or a PTY), relay stdin/stdout/stderr, signals, reaping.
 *
 * A process's output goes to one connection (the spawner, or the last to ATTACH). While
 * that connection is over its output cap, or gone, the output pipes are not read: the
 * pipe fills and the process blocks, which is the backpressure. EXIT is sent once the
 * process was reaped and its output pipes were drained; then the record is freed. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "init/init.h"

enum { STAGE_EXEC = 1, STAGE_CHDIR, STAGE_CREDS, STAGE_TTY, STAGE_STDIO };

struct ack {
    struct ack *next;
    uint64_t serial; /* connection that sent the STDIN request */
    uint32_t id;
    uint64_t end; /* acknowledged once this many bytes were written in total */
};

struct gbx_proc {
    struct gbx_proc *next;
    uint32_t handle;
    pid_t pid;
    int pty;
    char **argv;
    char *cwd;
    char user[64];
    struct gbx_src out;  /* stdout pipe, or the PTY master (also written for stdin) */
    struct gbx_src err;  /* stderr pipe */
    struct gbx_src in;   /* stdin pipe; unused with a PTY */
    struct gbx_src exec; /* reports exec failure; EOF means exec succeeded */
    struct gbx_conn *conn;
    uint64_t spawn_serial;
    uint32_t spawn_id;
    int spawn_pending;
    int exited;
    int status;
    int stdin_open;
    int stdin_close; /* close once the queued bytes are written */
    uint8_t *ibuf;
    size_t ioff, ilen, icap;
    uint64_t iqueued, iwritten;
    struct ack *acks;
    int dead;
    int eof_left;      /* a PTY's stdin closed: EOF characters still to send again */
    int64_t eof_at_ms; /* the next one (CLOCK_MONOTONIC) */
};

static struct gbx_proc *procs;
static uint32_t next_handle = 1;
static uint8_t iobuf[GBX_FRAME_CHUNK];

static struct gbx_proc *proc_find(uint32_t handle)
{
    for (struct gbx_proc *p = procs; p; p = p->next)
        if (p->handle == handle && !p->dead && !p->spawn_pending)
            return p;
    return NULL;
}

static int req_proc(struct gbx_req *r, struct gbx_proc **out)
{
    uint32_t h;
    int e = gbx_req_u32(r, GBX_A_PROC, "PROC", &h, 1);
    if (e < 0)
        return e;
    *out = proc_find(h);
    if (*out == NULL)
        return gbx_req_failx(r, ESRCH, "no such process %u", h);
    return 0;
}

static void strv_free(char **v)
{
    if (v == NULL)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

static void proc_free(struct gbx_proc *p)
{
    gbx_src_close(&p->out);
    gbx_src_close(&p->err);
    gbx_src_close(&p->in);
    gbx_src_close(&p->exec);
    while (p->acks) {
        struct ack *a = p->acks;
        p->acks = a->next;
        free(a);
    }
    strv_free(p->argv);
    free(p->cwd);
    free(p->ibuf);
    free(p);
}

/* ---- spawn ---------------------------------------------------------------------------- */

struct strv {
    char **v;
    size_t n, cap;
};

static void strv_push(struct strv *s, char *str)
{
    if (s->n + 2 > s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
        GBX_BUG_ON(s->v == NULL);
    }
    s->v[s->n++] = str;
    s->v[s->n] = NULL;
}

static char *xstrndup(const void *p, size_t n)
{
    char *s = strndup(p, n);
    GBX_BUG_ON(s == NULL);
    return s;
}

static char *xprintf(const char *fmt, ...) GBX_PRINTF(1, 2);
static char *xprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    GBX_BUG_ON(n < 0);
    return s;
}

static int env_has(const struct strv *e, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; i < e->n; i++)
        if (strncmp(e->v[i], key, k) == 0 && e->v[i][k] == '=')
            return 1;
    return 0;
}

static const char *env_get(char **env, const char *key)
{
    size_t k = strlen(key);
    for (char **p = env; *p; p++)
        if (strncmp(*p, key, k) == 0 && (*p)[k] == '=')
            return *p + k + 1;
    return NULL;
}

static void env_defaults(struct strv *e, const struct gbx_user *u, int pty, int given)
{
    if (!given || !env_has(e, "PATH"))
        strv_push(e, xprintf("PATH=%s", INIT_DEFAULT_PATH));
    if (!given || !env_has(e, "HOME"))
        strv_push(e, xprintf("HOME=%s", u->home));
    if (!given || !env_has(e, "USER"))
        strv_push(e, xprintf("USER=%s", u->name));
    if (!given || !env_has(e, "LOGNAME"))
        strv_push(e, xprintf("LOGNAME=%s", u->name));
    if (given)
        return;
    strv_push(e, xprintf("SHELL=%s", u->shell));
    if (pty)
        strv_push(e, xprintf("TERM=xterm-256color"));
    strv_push(e, xprintf("LANG=C.UTF-8"));
}

static void child_fail(int fd, int stage, int err)
{
    int v[2] = {stage, err};
    if (write(fd, v, sizeof(v)) < 0) {
        /* the parent learns of the failure from the exit status alone */
    }
    _exit(127);
}

static void exec_file(char *file, char **argv, char **envp)
{
    execve(file, argv, envp);
    if (errno != ENOEXEC)
        return;
    /* Like execvpe: a file without a known format is a shell script. */
    size_t n = 0;
    while (argv[n])
        n++;
    char **v = calloc(n + 2, sizeof(*v));
    if (v == NULL)
        return;
    static char sh[] = "/bin/sh";
    v[0] = sh;
    v[1] = file;
    for (size_t i = 1; i < n; i++)
        v[i + 1] = argv[i];
    execve(sh, v, envp);
    free(v);
    errno = ENOEXEC;
}

/* Search PATH (from the process's environment) like execvpe; returns the errno. */
static int exec_search(char **argv, char **envp)
{
    char *name = argv[0];
    if (name[0] == '\0')
        return ENOENT;
    if (strchr(name, '/')) {
        exec_file(name, argv, envp);
        return errno;
    }
    const char *path = env_get(envp, "PATH");
    if (path == NULL)
        path = INIT_DEFAULT_PATH;
    int saw_eacces = 0;
    char buf[PATH_MAX];
    for (const char *p = path;; p++) {
        const char *end = strchrnul(p, ':');
        size_t dl = (size_t)(end - p);
        int n = snprintf(buf, sizeof(buf), "%.*s%s%s", (int)dl, p, dl ? "/" : "", name);
        if (n > 0 && (size_t)n < sizeof(buf)) {
            exec_file(buf, argv, envp);
            switch (errno) {
            case EACCES:
                saw_eacces = 1;
                break;
            case ENOENT:
            case ENOTDIR:
            case ESTALE:
            case ENODEV:
            case ETIMEDOUT:
            case ELOOP:
            case ENAMETOOLONG:
                break;
            default:
                return errno;
            }
        }
        if (*end == '\0')
            break;
        p = end;
    }
    return saw_eacces ? EACCES : ENOENT;
}

struct spawn_fds {
    int exec_w;
    int slave; /* PTY slave or -1 */
    int in_r, out_w, err_w;
};

static void child(const struct spawn_fds *f, const struct gbx_user *u, const char *cwd,
                  int cwd_given, char **argv, char **envp)
{
    /* exec resets caught signals; only ignored ones survive it, and init ignores just
     * SIGPIPE (main.c) */
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setsid();
    if (f->slave >= 0) {
        if (ioctl(f->slave, TIOCSCTTY, 0) < 0)
            child_fail(f->exec_w, STAGE_TTY, errno);
        if (fchown(f->slave, u->uid, (gid_t)-1) < 0) {
            /* the terminal stays root's; the process still holds it open */
        }
        if (dup2(f->slave, 0) < 0 || dup2(f->slave, 1) < 0 || dup2(f->slave, 2) < 0)
            child_fail(f->exec_w, STAGE_STDIO, errno);
    } else {
        int in = f->in_r >= 0 ? f->in_r : open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in < 0 || dup2(in, 0) < 0 || dup2(f->out_w, 1) < 0 || dup2(f->err_w, 2) < 0)
            child_fail(f->exec_w, STAGE_STDIO, errno);
    }
    /* Every descriptor of init is close-on-exec; make sure of it. */
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    setrlimit(RLIMIT_NOFILE, &gbx_g.nofile);
    umask(022);
    if (setgroups((size_t)u->ngroups, u->groups) < 0 && errno != EPERM)
        child_fail(f->exec_w, STAGE_CREDS, errno);
    if (setresgid(u->gid, u->gid, u->gid) < 0 || setresuid(u->uid, u->uid, u->uid) < 0)
        child_fail(f->exec_w, STAGE_CREDS, errno);
    if (chdir(cwd) < 0) {
        if (cwd_given || chdir("/") < 0)
            child_fail(f->exec_w, STAGE_CHDIR, errno);
    }
    child_fail(f->exec_w, STAGE_EXEC, exec_search(argv, envp));
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -errno : fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

static int open_pty(int *master, int *slave, uint16_t rows, uint16_t cols)
{
    *master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (*master < 0)
        return -errno;
    if (grantpt(*master) < 0 || unlockpt(*master) < 0)
        return -errno;
    *slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (*slave < 0) {
        char name[128];
        if (ptsname_r(*master, name, sizeof(name)) != 0)
            return -errno;
        *slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (*slave < 0)
            return -errno;
    }
    struct winsize ws = {.ws_row = rows, .ws_col = cols};
    if (ioctl(*master, TIOCSWINSZ, &ws) < 0)
        return -errno;
    return set_nonblock(*master);
}

struct child_args {
    const struct spawn_fds *f;
    const struct gbx_user *u;
    const char *cwd;
    int cwd_given;
    char **argv, **envp;
};

/* The stack of the child between clone and exec (see gbx_proc_spawn). */
static char child_stack[256 * 1024] __attribute__((aligned(16)));

static int child_trampoline(void *arg)
{
    const struct child_args *a = arg;
    child(a->f, a->u, a->cwd, a->cwd_given, a->argv, a->envp);
    return 127;
}

int gbx_proc_spawn(struct gbx_req *r)
{
    struct strv argv = {0}, env = {0};
    struct gbx_attr_iter it;
    struct gbx_attr a;
    int env_given = 0;
    gbx_attr_iter_init(&it, r->p, r->len);
    while (gbx_attr_next(&it, &a) > 0) {
        if (a.tag != GBX_A_ARGV && a.tag != GBX_A_ENV)
            continue;
        if (memchr(a.data, 0, a.len) != NULL) {
            strv_free(argv.v);
            strv_free(env.v);
            return gbx_req_failx(r, EINVAL, "malformed attribute %s",
                                 a.tag == GBX_A_ARGV ? "ARGV" : "ENV");
        }
        if (a.tag == GBX_A_ARGV) {
            strv_push(&argv, xstrndup(a.data, a.len));
        } else {
            env_given = 1;
            strv_push(&env, xstrndup(a.data, a.len));
        }
    }

    int e = 0;
    struct gbx_user u;
    char cwd[PATH_MAX];
    uint32_t rows = 0, cols = 0, want_stdin = 0;
    int cwd_given = 0, has_rows = 0, has_cols = 0;
    struct spawn_fds f = {.exec_w = -1, .slave = -1, .in_r = -1, .out_w = -1, .err_w = -1};
    int exec_r = -1, master = -1, in_w = -1, out_r = -1, err_r = -1;

    if (argv.n == 0) {
        e = gbx_req_failx(r, EINVAL, "missing attribute ARGV");
        goto out;
    }
    if ((e = gbx_req_user(r, &u)) < 0 ||
        (e = cwd_given = gbx_req_str(r, GBX_A_CWD, "CWD", cwd, sizeof(cwd), 0)) < 0 ||
        (e = has_rows = gbx_req_u32(r, GBX_A_PTY_ROWS, "PTY_ROWS", &rows, 0)) < 0 ||
        (e = has_cols = gbx_req_u32(r, GBX_A_PTY_COLS, "PTY_COLS", &cols, 0)) < 0 ||
        (e = gbx_req_u32(r, GBX_A_STDIN, "STDIN", &want_stdin, 0)) < 0)
        goto out;
    int pty = has_rows && has_cols;
    if (pty && (rows > 0xffff || cols > 0xffff)) {
        e = gbx_req_failx(r, EINVAL, "terminal size %ux%u out of range", rows, cols);
        goto out;
    }
    if (!cwd_given)
        snprintf(cwd, sizeof(cwd), "%s", u.home);
    env_defaults(&env, &u, pty, env_given);

    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        e = gbx_req_fail(r, errno, "cannot create pipe");
        goto out;
    }
    exec_r = pfd[0];
    f.exec_w = pfd[1];
    if (pty) {
        int pe = open_pty(&master, &f.slave, (uint16_t)rows, (uint16_t)cols);
        if (pe < 0) {
            e = gbx_req_fail(r, -pe, "cannot open a terminal");
            goto out;
        }
    } else {
        if (pipe2(pfd, O_CLOEXEC) < 0)
            goto pipe_fail;
        out_r = pfd[0];
        f.out_w = pfd[1];
        if (pipe2(pfd, O_CLOEXEC) < 0)
            goto pipe_fail;
        err_r = pfd[0];
        f.err_w = pfd[1];
        if (want_stdin) {
            if (pipe2(pfd, O_CLOEXEC) < 0)
                goto pipe_fail;
            f.in_r = pfd[0];
            in_w = pfd[1];
        }
        if (set_nonblock(out_r) < 0 || set_nonblock(err_r) < 0 ||
            (in_w >= 0 && set_nonblock(in_w) < 0))
            goto pipe_fail;
    }
    if (set_nonblock(exec_r) < 0)
        goto pipe_fail;

    /* vfork-style: the child borrows init's memory and a stack of its own until it execs,
     * so nothing is copied and init's pages see no copy-on-write faults afterwards. init
     * is suspended meanwhile, which also makes the one static stack safe. */
    struct child_args ca = {&f, &u, cwd, cwd_given, argv.v, env.v};
    pid_t pid = clone(child_trampoline, child_stack + sizeof(child_stack),
                      CLONE_VM | CLONE_VFORK | SIGCHLD, &ca);
    if (pid < 0) {
        e = gbx_req_fail(r, errno, "cannot run '%s'", argv.v[0]);
        goto out;
    }

    struct gbx_proc *p = calloc(1, sizeof(*p));
    GBX_BUG_ON(p == NULL);
    p->handle = next_handle++;
    p->pid = pid;
    p->pty = pty;
    p->argv = gbx_steal_ptr(&argv.v);
    p->cwd = xstrndup(cwd, strlen(cwd));
    snprintf(p->user, sizeof(p->user), "%s", u.name);
    p->spawn_pending = 1;
    p->spawn_serial = r->c->serial;
    p->spawn_id = r->id;
    p->stdin_open = pty || in_w >= 0;
    gbx_src_init(&p->out, GBX_SRC_PROC_OUT, pty ? gbx_steal_fd(&master) : gbx_steal_fd(&out_r), p);
    gbx_src_init(&p->err, GBX_SRC_PROC_ERR, gbx_steal_fd(&err_r), p);
    gbx_src_init(&p->in, GBX_SRC_PROC_IN, gbx_steal_fd(&in_w), p);
    gbx_src_init(&p->exec, GBX_SRC_PROC_EXEC, gbx_steal_fd(&exec_r), p);
    gbx_src_set(&p->exec, EPOLLIN);
    p->next = procs;
    procs = p;
    e = 0;
    goto out;

pipe_fail:
    e = gbx_req_fail(r, errno, "cannot create pipe");
out:
    close_fd(&f.exec_w);
    close_fd(&f.slave);
    close_fd(&f.in_r);
    close_fd(&f.out_w);
    close_fd(&f.err_w);
    close_fd(&exec_r);
    close_fd(&master);
    close_fd(&in_w);
    close_fd(&out_r);
    close_fd(&err_r);
    strv_free(argv.v);
    strv_free(env.v);
    return e;
}

static void on_exec_result(struct gbx_proc *p)
{
    int v[2];
    ssize_t n = read(p->exec.fd, v, sizeof(v));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    struct gbx_conn *c = gbx_conn_by_serial(p->spawn_serial);
    gbx_src_close(&p->exec);
    p->spawn_pending = 0;
    if (n == (ssize_t)sizeof(v)) {
        char msg[512];
        const char *what = strerror(v[1]);
        switch (v[0]) {
        case STAGE_CHDIR:
            snprintf(msg, sizeof(msg), "cannot change directory to '%s': %s", p->cwd, what);
            break;
        case STAGE_CREDS:
            snprintf(msg, sizeof(msg), "cannot switch to user '%s': %s", p->user, what);
            break;
        case STAGE_TTY:
        case STAGE_STDIO:
            snprintf(msg, sizeof(msg), "cannot set up stdio of '%s': %s", p->argv[0], what);
            break;
        default:
            snprintf(msg, sizeof(msg), "cannot run '%s': %s", p->argv[0], what);
            break;
        }
        gbx_conn_reply_err(c, p->spawn_id, v[1], msg);
        /* The child exits 127 and is reaped like any orphan. */
        p->dead = 1;
        gbx_src_close(&p->out);
        gbx_src_close(&p->err);
        gbx_src_close(&p->in);
        return;
    }
    struct gbx_msg m;
    gbx_conn_msg_start(c, &m, GBX_MSG_OK, p->spawn_id);
    gbx_msg_put_u32(&m, GBX_A_PROC, p->handle);
    gbx_msg_put_u32(&m, GBX_A_PID, (uint32_t)p->pid);
    gbx_conn_msg_send(c, &m);
    p->conn = c;
}

/* ---- output ---------------------------------------------------------------------------- */

/* Read a process's output into its connection while the connection takes more.
 * final: the process is gone, so EAGAIN means drained. Returns 1 once the pipe is
 * closed, 0 when paused or waiting for more. */
static int read_output(struct gbx_proc *p, struct gbx_src *s, int final)
{
    if (s->fd < 0)
        return 1;
    uint16_t type = s == &p->err ? GBX_EV_STDERR : GBX_EV_STDOUT;
    while (!gbx_conn_over(p->conn)) {
        ssize_t n = read(s->fd, iobuf, sizeof(iobuf));
        if (n > 0) {
            struct gbx_msg m;
            gbx_conn_msg_start(p->conn, &m, type, p->handle);
            gbx_msg_put(&m, GBX_A_DATA, iobuf, (size_t)n);
            gbx_conn_msg_send(p->conn, &m);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN && !final)
            return 0;
        /* EOF, EAGAIN after exit, EIO from a hung-up PTY master, or an error. */
        gbx_src_close(s);
        return 1;
    }
    return 0;
}

static void acks_complete(struct gbx_proc *p, int err)
{
    while (p->acks && (err || p->acks->end <= p->iwritten)) {
        struct ack *a = p->acks;
        p->acks = a->next;
        struct gbx_conn *c = gbx_conn_by_serial(a->serial);
        if (err) {
            char msg[128];
            snprintf(msg, sizeof(msg), "cannot write to stdin of process %u: %s", p->handle,
                     strerror(err));
            gbx_conn_reply_err(c, a->id, err, msg);
        } else {
            gbx_conn_reply_ok(c, a->id);
        }
        free(a);
    }
}

static struct gbx_src *stdin_src(struct gbx_proc *p)
{
    return p->pty ? &p->out : &p->in;
}

static void stdin_shut(struct gbx_proc *p, int err)
{
    acks_complete(p, err);
    free(p->ibuf);
    p->ibuf = NULL;
    p->ioff = p->ilen = p->icap = 0;
    p->stdin_open = 0;
    if (!p->pty)
        gbx_src_close(&p->in);
}

static void write_stdin(struct gbx_proc *p)
{
    struct gbx_src *s = stdin_src(p);
    while (p->ioff < p->ilen) {
        if (s->fd < 0) {
            stdin_shut(p, EPIPE);
            return;
        }
        ssize_t n = write(s->fd, p->ibuf + p->ioff, p->ilen - p->ioff);
        if (n > 0) {
            p->ioff += (size_t)n;
            p->iwritten += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        stdin_shut(p, n < 0 && errno != EIO ? errno : EPIPE);
        return;
    }
    acks_complete(p, 0);
    if (p->ioff == p->ilen) {
        p->ioff = p->ilen = 0;
        if (p->icap > 2 * GBX_FRAME_CHUNK) {
            free(p->ibuf);
            p->ibuf = NULL;
            p->icap = 0;
        }
        if (p->stdin_close)
            stdin_shut(p, 0);
    }
}

static void proc_update(struct gbx_proc *p)
{
    if (p->dead)
        return;
    uint32_t in = 0;
    if (!p->spawn_pending && !gbx_conn_over(p->conn))
        in = EPOLLIN;
    uint32_t out = p->stdin_open && p->ioff < p->ilen ? EPOLLOUT : 0;
    if (p->pty) {
        gbx_src_set(&p->out, in | out);
    } else {
        gbx_src_set(&p->out, in);
        gbx_src_set(&p->in, out);
    }
    gbx_src_set(&p->err, in);
}

void gbx_proc_event(struct gbx_src *s, uint32_t events)
{
    struct gbx_proc *p = s->owner;
    if (p->dead)
        return;
    switch (s->kind) {
    case GBX_SRC_PROC_EXEC:
        on_exec_result(p);
        break;
    case GBX_SRC_PROC_IN:
        write_stdin(p);
        break;
    case GBX_SRC_PROC_OUT:
        if (p->pty && (events & EPOLLOUT))
            write_stdin(p);
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
            read_output(p, s, 0);
        if (p->pty && s->fd < 0 && p->stdin_open)
            stdin_shut(p, EPIPE);
        break;
    case GBX_SRC_PROC_ERR:
        read_output(p, s, 0);
        break;
    default:
        break;
    }
    proc_update(p);
}

static void send_exit(struct gbx_proc *p)
{
    struct gbx_msg m;
    gbx_conn_msg_start(p->conn, &m, GBX_EV_EXIT, p->handle);
    if (WIFSIGNALED(p->status)) {
        gbx_msg_put_u32(&m, GBX_A_EXIT_SIGNAL, (uint32_t)WTERMSIG(p->status));
        if (WCOREDUMP(p->status))
            gbx_msg_put_u32(&m, GBX_A_CORE, 1);
    } else {
        gbx_msg_put_u32(&m, GBX_A_EXIT_CODE, (uint32_t)WEXITSTATUS(p->status));
    }
    gbx_conn_msg_send(p->conn, &m);
}

void gbx_proc_tick(void)
{
    for (struct gbx_proc *p = procs; p; p = p->next) {
        if (p->dead)
            continue;
        if (p->exited && !p->spawn_pending && !gbx_conn_over(p->conn)) {
            int done = read_output(p, &p->out, 1);
            done &= read_output(p, &p->err, 1);
            if (done) {
                stdin_shut(p, EPIPE);
                send_exit(p);
                p->dead = 1;
                gbx_src_close(&p->out);
                gbx_src_close(&p->in);
                continue;
            }
        }
        proc_update(p);
    }
    for (struct gbx_proc **pp = &procs; *pp;) {
        struct gbx_proc *p = *pp;
        if (p->dead) {
            *pp = p->next;
            proc_free(p);
        } else {
            pp = &p->next;
        }
    }
}

void gbx_proc_reap(void)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        for (struct gbx_proc *p = procs; p; p = p->next) {
            if (p->pid == pid && !p->exited) {
                p->exited = 1;
                p->status = st;
                break;
            }
        }
    }
}

void gbx_proc_conn_closed(struct gbx_conn *c)
{
    for (struct gbx_proc *p = procs; p; p = p->next) {
        if (p->conn == c) {
            p->conn = NULL;
            proc_update(p);
        }
    }
}

void gbx_proc_kill_all(void)
{
    for (struct gbx_proc *p = procs; p; p = p->next) {
        if (!p->exited) {
            kill(-p->pid, SIGKILL);
            kill(p->pid, SIGKILL);
        }
    }
}

/* ---- requests -------------------------------------------------------------------------- */

int gbx_proc_stdin(struct gbx_req *r)
{
    struct gbx_proc *p;
    struct gbx_attr a;
    int e = req_proc(r, &p);
    if (e < 0)
        return e;
    if (gbx_attrs_find(r->p, r->len, GBX_A_DATA, &a) != 1)
        return gbx_req_failx(r, EINVAL, "missing attribute DATA");
    if (!p->stdin_open || p->stdin_close)
        return gbx_req_failx(r, EPIPE, "stdin of process %u is closed", p->handle);
    if (p->ilen - p->ioff + a.len > INIT_STDIN_MAX)
        return gbx_req_failx(r, ENOBUFS, "stdin of process %u: too much data queued", p->handle);
    if (p->icap - p->ilen < a.len) {
        if (p->ioff > 0) {
            memmove(p->ibuf, p->ibuf + p->ioff, p->ilen - p->ioff);
            p->ilen -= p->ioff;
            p->ioff = 0;
        }
        if (p->icap - p->ilen < a.len) {
            size_t cap = p->ilen + a.len;
            p->ibuf = realloc(p->ibuf, cap);
            GBX_BUG_ON(p->ibuf == NULL);
            p->icap = cap;
        }
    }
    if (a.len)
        memcpy(p->ibuf + p->ilen, a.data, a.len);
    p->ilen += a.len;
    p->iqueued += a.len;
    struct ack *k = calloc(1, sizeof(*k));
    GBX_BUG_ON(k == NULL);
    k->serial = r->c->serial;
    k->id = r->id;
    k->end = p->iqueued;
    struct ack **tail = &p->acks;
    while (*tail)
        tail = &(*tail)->next;
    *tail = k;
    write_stdin(p);
    proc_update(p);
    return 0;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void queue_eof(struct gbx_proc *p)
{
    static const uint8_t eof = 4;
    if (p->icap - p->ilen < 1) {
        p->ibuf = realloc(p->ibuf, p->ilen + 1);
        GBX_BUG_ON(p->ibuf == NULL);
        p->icap = p->ilen + 1;
    }
    p->ibuf[p->ilen++] = eof;
    p->iqueued++;
    write_stdin(p);
}

int gbx_proc_eof_tick(void)
{
    int64_t now = mono_ms(), next = -1;
    for (struct gbx_proc *p = procs; p; p = p->next) {
        if (p->eof_left <= 0)
            continue;
        if (p->dead || p->exited || !p->stdin_open) {
            p->eof_left = 0;
            continue;
        }
        if (now >= p->eof_at_ms) {
            if (p->ioff == p->ilen) /* the last one was written: send another */
                queue_eof(p);
            p->eof_left--;
            p->eof_at_ms = now + (100 << (4 - p->eof_left));
            proc_update(p);
        }
        if (p->eof_left > 0 && (next < 0 || p->eof_at_ms - now < next))
            next = p->eof_at_ms - now;
    }
    return next < 0 ? -1 : (int)(next > 0 ? next : 0);
}

int gbx_proc_close_stdin(struct gbx_req *r)
{
    struct gbx_proc *p;
    int e = req_proc(r, &p);
    if (e < 0)
        return e;
    if (p->stdin_open && !p->stdin_close) {
        if (p->pty) {
            /* A terminal has no half-close: send the EOF character instead. If it arrives
             * while the terminal is in canonical mode and the program then switches to raw
             * mode before reading (readline at start-up), the EOF is lost: send it again a
             * few times while the program runs (gbx_proc_eof_tick). */
            queue_eof(p);
            p->eof_left = 4;
            p->eof_at_ms = mono_ms() + 100;
        } else {
            p->stdin_close = 1;
            if (p->ioff == p->ilen)
                stdin_shut(p, 0);
        }
        proc_update(p);
    }
    gbx_conn_reply_ok(r->c, r->id);
    return 0;
}

int gbx_proc_signal(struct gbx_req *r)
{
    struct gbx_proc *p;
    uint32_t signo, group = 1;
    int e;
    if ((e = req_proc(r, &p)) < 0 || (e = gbx_req_u32(r, GBX_A_SIGNO, "SIGNO", &signo, 1)) < 0 ||
        (e = gbx_req_u32(r, GBX_A_GROUP, "GROUP", &group, 0)) < 0)
        return e;
    if (p->exited)
        return gbx_req_failx(r, ESRCH, "process %u has exited", p->handle);
    if (signo >= (uint32_t)NSIG)
        return gbx_req_failx(r, EINVAL, "invalid signal %u", signo);
    int k = kill(group ? -p->pid : p->pid, (int)signo);
    if (k < 0 && group && errno == ESRCH)
        k = kill(p->pid, (int)signo);
    if (k < 0)
        return gbx_req_fail(r, errno, "cannot signal process %u", p->handle);
    gbx_conn_reply_ok(r->c, r->id);
    return 0;
}

int gbx_proc_resize(struct gbx_req *r)
{
    struct gbx_proc *p;
    uint32_t rows, cols;
    int e;
    if ((e = req_proc(r, &p)) < 0 ||
        (e = gbx_req_u32(r, GBX_A_PTY_ROWS, "PTY_ROWS", &rows, 1)) < 0 ||
        (e = gbx_req_u32(r, GBX_A_PTY_COLS, "PTY_COLS", &cols, 1)) < 0)
        return e;
    if (!p->pty || p->out.fd < 0)
        return gbx_req_failx(r, ENOTTY, "process %u has no terminal", p->handle);
    if (rows > 0xffff || cols > 0xffff)
        return gbx_req_failx(r, EINVAL, "terminal size %ux%u out of range", rows, cols);
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    if (ioctl(p->out.fd, TIOCSWINSZ, &ws) < 0)
        return gbx_req_fail(r, errno, "cannot resize terminal of process %u", p->handle);
    gbx_conn_reply_ok(r->c, r->id);
    return 0;
}

int gbx_proc_ps(struct gbx_req *r)
{
    struct gbx_msg m;
    gbx_conn_msg_start(r->c, &m, GBX_MSG_OK, r->id);
    for (struct gbx_proc *p = procs; p; p = p->next) {
        if (p->dead || p->spawn_pending || p->exited)
            continue;
        size_t mark = m.len;
        gbx_msg_nest_begin(&m, GBX_A_PROCINFO);
        gbx_msg_put_u32(&m, GBX_A_PROC, p->handle);
        gbx_msg_put_u32(&m, GBX_A_PID, (uint32_t)p->pid);
        gbx_msg_put_u32(&m, GBX_A_PTY, (uint32_t)p->pty);
        for (char **a = p->argv; *a; a++)
            gbx_msg_put_str(&m, GBX_A_ARGV, *a);
        gbx_msg_put_str(&m, GBX_A_CWD, p->cwd);
        gbx_msg_put_str(&m, GBX_A_USER, p->user);
        gbx_msg_nest_end(&m);
        if (m.overflow) {
            /* The reply is full: list what fits. */
            m.len = mark;
            m.overflow = 0;
            m.depth = 0;
            break;
        }
    }
    gbx_conn_msg_send(r->c, &m);
    return 0;
}

int gbx_proc_attach(struct gbx_req *r)
{
    struct gbx_proc *p;
    int e = req_proc(r, &p);
    if (e < 0)
        return e;
    gbx_conn_reply_ok(r->c, r->id);
    p->conn = r->c;
    proc_update(p);
    return 0;
}
