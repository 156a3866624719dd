/* SPDX-License-Identifier: MIT */
/* Connections: non-blocking frame I/O, bounded output buffers, request dispatch. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "init/init.h"

/* Frames for a connection that is gone are built here and dropped. */
static uint8_t scratch[FRAME_MAX];

size_t gbx_conn_pending(const struct gbx_conn *c)
{
    return c->out_len - c->out_off;
}

int gbx_conn_over(const struct gbx_conn *c)
{
    return c == NULL || c->dead || gbx_conn_pending(c) >= INIT_OUT_SOFT_CAP;
}

struct gbx_conn *gbx_conn_by_serial(uint64_t serial)
{
    for (int i = 0; i < INIT_MAX_CONNS; i++) {
        struct gbx_conn *c = gbx_g.conns[i];
        if (c != NULL && !c->dead && c->serial == serial)
            return c;
    }
    return NULL;
}

/* Frame-sized buffers of closed connections, kept for the next ones: connections come and
 * go with every request of the daemon, and a fresh buffer of this size is an mmap and a
 * munmap each time. */
static void *spare[4];

void *gbx_conn_buf_get(void)
{
    for (size_t i = 0; i < sizeof(spare) / sizeof(spare[0]); i++) {
        if (spare[i]) {
            void *p = spare[i];
            spare[i] = NULL;
            return p;
        }
    }
    void *p = malloc(FRAME_MAX);
    GBX_BUG_ON(p == NULL);
    return p;
}

void gbx_conn_buf_put(void *p)
{
    for (size_t i = 0; p && i < sizeof(spare) / sizeof(spare[0]); i++) {
        if (spare[i] == NULL) {
            spare[i] = p;
            return;
        }
    }
    free(p);
}

static void out_reserve(struct gbx_conn *c, size_t need)
{
    if (c->out_off > 0 && (c->out_off == c->out_len || c->out_cap - c->out_len < need)) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    if (c->out_cap - c->out_len >= need)
        return;
    size_t cap = c->out_cap ? c->out_cap : FRAME_MAX;
    while (cap - c->out_len < need)
        cap *= 2;
    uint8_t *p = c->out == NULL && cap == FRAME_MAX ? gbx_conn_buf_get() : realloc(c->out, cap);
    GBX_BUG_ON(p == NULL);
    c->out = p;
    c->out_cap = cap;
}

void gbx_conn_msg_start(struct gbx_conn *c, struct gbx_msg *m, uint16_t type, uint32_t id)
{
    if (c == NULL || c->dead) {
        gbx_msg_start(m, scratch, sizeof(scratch), type, id);
        return;
    }
    out_reserve(c, FRAME_MAX);
    gbx_msg_start(m, c->out + c->out_len, FRAME_MAX, type, id);
}

void gbx_conn_msg_send(struct gbx_conn *c, struct gbx_msg *m)
{
    long n = gbx_msg_finish(m);
    if (c == NULL || c->dead || m->buf == scratch)
        return;
    if (n < 0) {
        /* Builders size their frames; reaching this is a bug in init, not in the peer. */
        uint32_t id;
        memcpy(&id, m->buf + 8, 4);
        char msg[64];
        snprintf(msg, sizeof(msg), "reply too large");
        gbx_conn_reply_err(c, id, EMSGSIZE, msg);
        return;
    }
    c->out_len += (size_t)n;
}

void gbx_conn_reply_ok(struct gbx_conn *c, uint32_t id)
{
    struct gbx_msg m;
    gbx_conn_msg_start(c, &m, GBX_MSG_OK, id);
    gbx_conn_msg_send(c, &m);
}

void gbx_conn_reply_err(struct gbx_conn *c, uint32_t id, int err, const char *msg)
{
    struct gbx_msg m;
    gbx_conn_msg_start(c, &m, GBX_MSG_ERROR, id);
    gbx_msg_put_u32(&m, GBX_A_ERRNO, (uint32_t)(err > 0 ? err : EIO));
    gbx_msg_put(&m, GBX_A_MESSAGE, msg, strnlen(msg, 1024));
    gbx_conn_msg_send(c, &m);
}

/* ---- request helpers ------------------------------------------------------------------ */

int gbx_req_failx(struct gbx_req *r, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
    va_end(ap);
    return -err;
}

int gbx_req_fail(struct gbx_req *r, int err, const char *fmt, ...)
{
    char ctx[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof(ctx), fmt, ap);
    va_end(ap);
    snprintf(r->msg, sizeof(r->msg), "%s: %s", ctx, strerror(err));
    return -err;
}

static int attr_result(struct gbx_req *r, int found, const char *name, int required)
{
    if (found == 0 && required)
        return gbx_req_failx(r, EINVAL, "missing attribute %s", name);
    if (found == -ENAMETOOLONG)
        return gbx_req_failx(r, ENAMETOOLONG, "attribute %s too long", name);
    if (found < 0)
        return gbx_req_failx(r, EINVAL, "malformed attribute %s", name);
    return found;
}

int gbx_req_u32(struct gbx_req *r, uint16_t tag, const char *name, uint32_t *out, int required)
{
    return attr_result(r, gbx_attrs_get_u32(r->p, r->len, tag, out), name, required);
}

int gbx_req_u64(struct gbx_req *r, uint16_t tag, const char *name, uint64_t *out, int required)
{
    return attr_result(r, gbx_attrs_get_u64(r->p, r->len, tag, out), name, required);
}

int gbx_req_str(struct gbx_req *r, uint16_t tag, const char *name, char *out, size_t outsz,
                int required)
{
    return attr_result(r, gbx_attrs_get_str(r->p, r->len, tag, out, outsz), name, required);
}

int gbx_req_user(struct gbx_req *r, struct gbx_user *u)
{
    char spec[128];
    int f = gbx_req_str(r, GBX_A_USER, "USER", spec, sizeof(spec), 0);
    if (f < 0)
        return f;
    int e = gbx_user_lookup(f ? spec : NULL, u);
    if (e == -ENOENT)
        return gbx_req_failx(r, ENOENT, "unknown user '%s'", spec);
    if (e < 0)
        return gbx_req_failx(r, -e, "invalid user '%s'", spec);
    return 0;
}

/* ---- session requests ------------------------------------------------------------------ */

static int do_hello(struct gbx_req *r)
{
    uint32_t v = GBX_AGENT_VERSION;
    int f = gbx_req_u32(r, GBX_A_VERSION, "VERSION", &v, 0);
    if (f < 0)
        return f;
    if (v != GBX_AGENT_VERSION)
        return gbx_req_failx(r, EPROTONOSUPPORT, "unsupported protocol version %u", v);
    struct gbx_msg m;
    gbx_conn_msg_start(r->c, &m, GBX_MSG_OK, r->id);
    gbx_msg_put_u32(&m, GBX_A_VERSION, GBX_AGENT_VERSION);
    gbx_msg_put_u32(&m, GBX_A_PID, (uint32_t)getpid());
    gbx_conn_msg_send(r->c, &m);
    return 0;
}

static int do_ping(struct gbx_req *r)
{
    gbx_conn_reply_ok(r->c, r->id);
    return 0;
}

static int do_shutdown(struct gbx_req *r)
{
    gbx_conn_reply_ok(r->c, r->id);
    /* Best effort: let the OK reach the peer before everything dies. */
    int fl = fcntl(r->c->src.fd, F_GETFL);
    if (fl >= 0)
        fcntl(r->c->src.fd, F_SETFL, fl & ~O_NONBLOCK);
    gbx_conn_flush(r->c);
    gbx_init_exit();
}

/* Get ready for a checkpoint (docs/hibernate.md): CRIU can dump nothing that leads out of
 * the sandbox, so every connection to the daemon is closed (this one after its OK) and the
 * layer handle goes. The listener, a socket of the daemon's network namespace bound on the
 * host, makes way for a placeholder at fd 3: an unbound datagram socket nobody can reach,
 * kept in the epoll set as the listener. The restorer gives CRIU a new listener in its
 * place (--inherit-fd), and the restored epoll set watches that one. The layer handle
 * (fd 7) makes way for another placeholder, for the restored layer's handle. */
static int do_hibernate(struct gbx_req *r)
{
    int ph = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    /* a second placeholder for the layer handle: the restorer hands the new layer's in */
    int lph = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ph < 0 || lph < 0) {
        int e = errno;
        if (ph >= 0)
            close(ph);
        return gbx_req_fail(r, e, "hibernate: placeholder socket");
    }
    /* the swaps come first: once the daemon sees its connection closed, fds 3 and 7 are
     * the placeholders it names to CRIU */
    if (lph != GBX_INIT_LAYER_FD) {
        GBX_BUG_ON(dup3(lph, GBX_INIT_LAYER_FD, O_CLOEXEC) < 0);
        close(lph);
    }
    gbx_src_close(&gbx_g.listen);
    if (ph != 3) {
        GBX_BUG_ON(dup3(ph, 3, O_CLOEXEC) < 0);
        close(ph);
    }
    gbx_src_init(&gbx_g.listen, GBX_SRC_LISTEN, 3, NULL);
    gbx_src_set(&gbx_g.listen, EPOLLIN);
    /* CRIU's helper inside the user namespace must open our /proc/<pid>/ns files: a
     * restored mm belongs to the initial user namespace, where the helper has no
     * capability, so a non-dumpable restored init could not be dumped again. The first
     * connection after the restore makes init non-dumpable again (gbx_conn_accept). */
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    gbx_conn_reply_ok(r->c, r->id);
    int fl = fcntl(r->c->src.fd, F_GETFL);
    if (fl >= 0)
        fcntl(r->c->src.fd, F_SETFL, fl & ~O_NONBLOCK);
    gbx_conn_flush(r->c);
    for (int i = 0; i < INIT_MAX_CONNS; i++)
        if (gbx_g.conns[i] != NULL)
            gbx_conn_close(gbx_g.conns[i]);
    return 0;
}

typedef int (*req_handler)(struct gbx_req *r);

static req_handler handler_for(uint16_t type)
{
    switch (type) {
    case GBX_MSG_HELLO:
        return do_hello;
    case GBX_MSG_PING:
        return do_ping;
    case GBX_MSG_SHUTDOWN:
        return do_shutdown;
    case GBX_MSG_HIBERNATE:
        return do_hibernate;
    case GBX_MSG_SPAWN:
        return gbx_proc_spawn;
    case GBX_MSG_STDIN:
        return gbx_proc_stdin;
    case GBX_MSG_CLOSE_STDIN:
        return gbx_proc_close_stdin;
    case GBX_MSG_SIGNAL:
        return gbx_proc_signal;
    case GBX_MSG_RESIZE:
        return gbx_proc_resize;
    case GBX_MSG_PS:
        return gbx_proc_ps;
    case GBX_MSG_ATTACH:
        return gbx_proc_attach;
    case GBX_MSG_STAT:
        return gbx_fs_stat;
    case GBX_MSG_READ:
        return gbx_fs_read;
    case GBX_MSG_WRITE:
        return gbx_fs_write;
    case GBX_MSG_WRITE_DATA:
        return gbx_fs_write_data;
    case GBX_MSG_WRITE_END:
        return gbx_fs_write_end;
    case GBX_MSG_MKDIR:
        return gbx_fs_mkdir;
    case GBX_MSG_REMOVE:
        return gbx_fs_remove;
    case GBX_MSG_RENAME:
        return gbx_fs_rename;
    case GBX_MSG_LIST:
        return gbx_fs_list;
    case GBX_MSG_WATCH:
        return gbx_watch_add;
    case GBX_MSG_UNWATCH:
        return gbx_watch_remove;
    case GBX_MSG_CHMOD:
        return gbx_fs_chmod;
    case GBX_MSG_REALPATH:
        return gbx_fs_realpath;
    default:
        return NULL;
    }
}

static void dispatch(struct gbx_conn *c, const struct gbx_frame_hdr *h, const uint8_t *payload)
{
    struct gbx_req r = {.c = c, .id = h->id, .type = h->type, .p = payload, .len = h->len};
    int e;
    req_handler fn = handler_for(h->type);
    if (fn == NULL)
        e = gbx_req_failx(&r, EOPNOTSUPP, "unknown message type 0x%x", h->type);
    else if (gbx_attrs_validate(payload, h->len) < 0)
        e = gbx_req_failx(&r, EBADMSG, "malformed attributes in message type 0x%x", h->type);
    else
        e = fn(&r);
    if (e < 0)
        gbx_conn_reply_err(c, h->id, -e, r.msg);
}

/* ---- connection lifecycle -------------------------------------------------------------- */

static struct gbx_conn *conn_new(int fd)
{
    int slot = -1;
    for (int i = 0; i < INIT_MAX_CONNS; i++) {
        if (gbx_g.conns[i] == NULL) {
            slot = i;
            break;
        }
    }
    if (slot < 0)
        return NULL;
    struct gbx_conn *c = calloc(1, sizeof(*c));
    GBX_BUG_ON(c == NULL);
    c->in = gbx_conn_buf_get();
    c->serial = ++gbx_g.next_serial;
    c->next_handle = 1;
    gbx_src_init(&c->src, GBX_SRC_CONN, fd, c);
    gbx_src_set(&c->src, EPOLLIN);
    gbx_g.conns[slot] = c;
    return c;
}

static void refuse(int fd)
{
    uint8_t buf[256];
    struct gbx_msg m;
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_ERROR, 0);
    gbx_msg_put_u32(&m, GBX_A_ERRNO, EMFILE);
    gbx_msg_put_str(&m, GBX_A_MESSAGE, "too many connections");
    long n = gbx_msg_finish(&m);
    if (n > 0 && send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* nothing more to do: the connection is refused either way */
    }
    close(fd);
}

void gbx_conn_adopt(int fd)
{
    if (conn_new(fd) == NULL)
        refuse(fd);
}

static int sock_opt(int fd, int opt)
{
    int v = -1;
    socklen_t len = sizeof(v);
    return getsockopt(fd, SOL_SOCKET, opt, &v, &len) < 0 ? -1 : v;
}

/* A hibernate that did not happen (docs/hibernate.md): the dump failed, or was stopped at
 * its deadline, and this init lives on with the placeholders do_hibernate left at fds 3
 * and 7. The daemon takes a copy of the placeholder (pidfd_getfd: nobody else can, the
 * sandbox's own processes are refused it by seccomp), binds it on a path only it can reach
 * and sends a new listener (and the layer handle) through it: they take their places
 * again. Anything else that arrives is dropped. */
static void rescue_take(int ph)
{
    char data[16];
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } cb;
    struct iovec iov = {.iov_base = data, .iov_len = sizeof(data)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.buf, .msg_controllen = sizeof(cb.buf)};
    ssize_t n = recvmsg(ph, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return;
    int fds[2] = {-1, -1};
    size_t nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (nfds < 2)
                fds[nfds++] = fd;
            else
                close(fd);
        }
    }
    struct stat st;
    int ok = n == 9 && memcmp(data, "GBXRESCUE", 9) == 0 && (mh.msg_flags & MSG_CTRUNC) == 0 &&
             nfds >= 1 && sock_opt(fds[0], SO_DOMAIN) == AF_UNIX &&
             sock_opt(fds[0], SO_TYPE) == SOCK_STREAM && sock_opt(fds[0], SO_ACCEPTCONN) == 1 &&
             (nfds < 2 || (fstat(fds[1], &st) == 0 && S_ISDIR(st.st_mode)));
    if (!ok) {
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        return;
    }
    int fl = fcntl(fds[0], F_GETFL);
    if (fl >= 0)
        fcntl(fds[0], F_SETFL, fl | O_NONBLOCK);
    gbx_src_close(&gbx_g.listen); /* the placeholder */
    GBX_BUG_ON(dup3(fds[0], 3, O_CLOEXEC) < 0);
    close(fds[0]);
    gbx_src_init(&gbx_g.listen, GBX_SRC_LISTEN, 3, NULL);
    gbx_src_set(&gbx_g.listen, EPOLLIN);
    if (nfds == 2) {
        GBX_BUG_ON(dup3(fds[1], GBX_INIT_LAYER_FD, O_CLOEXEC) < 0);
        close(fds[1]);
    }
}

void gbx_conn_accept(int lfd)
{
    /* non-dumpable (see main): again after a hibernate, whose restorer connects first */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    for (int i = 0; i < 8; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* the placeholder of a hibernate that did not happen is a datagram socket */
            if (errno == EOPNOTSUPP || errno == EINVAL)
                rescue_take(lfd);
            return;
        }
        gbx_conn_adopt(fd);
    }
}

void gbx_conn_close(struct gbx_conn *c)
{
    if (c->dead)
        return;
    c->dead = 1;
    gbx_src_close(&c->src);
    gbx_fs_conn_closed(c);
    gbx_watch_conn_closed(c);
    gbx_proc_conn_closed(c);
}

void gbx_conn_flush(struct gbx_conn *c)
{
    while (!c->dead && c->out_off < c->out_len) {
        ssize_t n = send(c->src.fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                gbx_conn_close(c);
            return;
        }
        c->out_off += (size_t)n;
    }
    if (c->dead)
        return;
    c->out_off = c->out_len = 0;
    if (c->out_cap > 2 * FRAME_MAX) {
        free(c->out);
        c->out = NULL;
        c->out_cap = 0;
    }
    if (c->closing)
        gbx_conn_close(c);
}

static void process_input(struct gbx_conn *c);

void gbx_conn_update(struct gbx_conn *c)
{
    /* Requests left buffered when the hard cap was reached. */
    if (!c->closing && c->in_len >= GBX_FRAME_HDR_SIZE && gbx_conn_pending(c) < INIT_OUT_HARD_CAP) {
        process_input(c);
        if (c->dead)
            return;
    }
    uint32_t ev = 0;
    if (!c->closing && gbx_conn_pending(c) < INIT_OUT_HARD_CAP)
        ev |= EPOLLIN;
    if (gbx_conn_pending(c) > 0 || c->ops != NULL)
        ev |= EPOLLOUT;
    gbx_src_set(&c->src, ev);
}

/* Handle every complete frame in the input buffer. */
static void process_input(struct gbx_conn *c)
{
    size_t off = 0;
    while (!c->dead && !c->closing) {
        struct gbx_frame_hdr h;
        int e = gbx_frame_decode_hdr(c->in + off, c->in_len - off, &h);
        if (e == -EAGAIN)
            break;
        if (e < 0) {
            gbx_conn_reply_err(c, 0, EPROTO,
                               e == -EMSGSIZE ? "frame too large" : "bad frame header");
            c->closing = 1;
            break;
        }
        if (c->in_len - off < GBX_FRAME_HDR_SIZE + h.len)
            break;
        dispatch(c, &h, c->in + off + GBX_FRAME_HDR_SIZE);
        off += GBX_FRAME_HDR_SIZE + h.len;
        /* Stop taking requests while the peer does not read its replies. */
        if (gbx_conn_pending(c) >= INIT_OUT_HARD_CAP)
            break;
    }
    if (c->dead)
        return;
    if (c->closing) {
        c->in_len = 0;
        return;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
}

void gbx_conn_event(struct gbx_conn *c, uint32_t events)
{
    if (c->dead)
        return;
    if (events & EPOLLOUT)
        gbx_conn_flush(c);
    if (c->dead || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        return;
    if (c->closing || gbx_conn_pending(c) >= INIT_OUT_HARD_CAP)
        return;
    /* Requests already buffered first (we may have stopped at the hard cap). */
    process_input(c);
    if (c->dead || c->closing || gbx_conn_pending(c) >= INIT_OUT_HARD_CAP)
        return;
    ssize_t n = read(c->src.fd, c->in + c->in_len, FRAME_MAX - c->in_len);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        gbx_conn_close(c);
        return;
    }
    if (n < 0)
        return;
    c->in_len += (size_t)n;
    process_input(c);
}
