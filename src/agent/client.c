/* SPDX-License-Identifier: MIT */
/* Blocking agent client: one request at a time over a blocking socket, with poll() for
 * timeouts. Events that arrive while a request waits are queued for
 * gbx_agent_next_event(); streamed DATA/DIRENT frames go to the waiting request. */
#include "base/clock.h"
#include "agent/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/frame.h"
#include "base/mem.h"

#define FRAME_MAX (GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD)
#define DEFAULT_TIMEOUT_MS 30000

struct evq {
    struct evq *next;
    struct gbx_event ev;
};

/* Called for each DATA/DIRENT frame of the waiting request. */
typedef void (*stream_fn)(void *arg, uint16_t type, const uint8_t *p, size_t len);

struct gbx_agent {
    int fd;
    int timeout_ms;
    int broken;
    uint32_t next_id;
    pid_t init_pid;
    uint8_t *in; /* FRAME_MAX bytes of received, not yet handled data */
    size_t in_off, in_len;
    uint8_t *out; /* FRAME_MAX bytes: the request being built */
    struct evq *qhead, *qtail;
    /* the request waiting for its reply */
    uint32_t cur_id;
    int cur_done;
    int cur_progress; /* a frame for the request arrived: restart the reply timeout */
    uint16_t cur_type;
    uint8_t *cur_reply; /* payload of the OK / ERROR reply; owned */
    size_t cur_len;
    stream_fn cur_stream;
    void *cur_arg;
};

static int lost(struct gbx_agent *a, int errnum, struct gbx_err **err)
{
    a->broken = 1;
    return gbx_err_set(err, errnum ? errnum : ECONNRESET, GBX_ERR_UNAVAILABLE,
                       "agent connection lost");
}

/* ---- incoming frames -------------------------------------------------------------------- */

static char *attr_strdup(const uint8_t *p, size_t len, uint16_t tag)
{
    struct gbx_attr at;
    if (gbx_attrs_find(p, len, tag, &at) != 1 || memchr(at.data, 0, at.len) != NULL)
        return NULL;
    return gbx_xstrndup((const char *)at.data, at.len);
}

static void queue_event(struct gbx_agent *a, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    struct gbx_event ev = {.id = h->id};
    uint32_t v;
    struct gbx_attr at;
    switch (h->type) {
    case GBX_EV_STDOUT:
    case GBX_EV_STDERR:
        ev.kind = h->type == GBX_EV_STDOUT ? GBX_EVENT_STDOUT : GBX_EVENT_STDERR;
        if (gbx_attrs_find(p, h->len, GBX_A_DATA, &at) != 1)
            return;
        ev.data = gbx_xmalloc(at.len);
        memcpy(ev.data, at.data, at.len);
        ev.len = at.len;
        break;
    case GBX_EV_EXIT:
        ev.kind = GBX_EVENT_EXIT;
        if (gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_SIGNAL, &v) == 1) {
            ev.exit_code = -1;
            ev.exit_signal = (int)v;
        } else if (gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_CODE, &v) == 1) {
            ev.exit_code = (int)v;
        } else {
            return;
        }
        break;
    case GBX_EV_WATCH:
        ev.kind = GBX_EVENT_WATCH;
        ev.name = attr_strdup(p, h->len, GBX_A_NAME);
        if (ev.name == NULL)
            ev.name = gbx_xstrdup("");
        if (gbx_attrs_get_u32(p, h->len, GBX_A_WEVENT, &ev.wevent) != 1)
            ev.wevent = 0;
        break;
    default:
        return;
    }
    struct evq *q = gbx_xcalloc(1, sizeof(*q));
    q->ev = ev;
    if (a->qtail)
        a->qtail->next = q;
    else
        a->qhead = q;
    a->qtail = q;
}

static void handle_frame(struct gbx_agent *a, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    if (gbx_attrs_validate(p, h->len) < 0)
        return; /* malformed: nothing can be trusted in it */
    switch (h->type) {
    case GBX_MSG_OK:
    case GBX_MSG_ERROR:
        if (h->id != a->cur_id || a->cur_done || a->cur_id == 0)
            return; /* a late reply to a request that timed out */
        a->cur_done = 1;
        a->cur_type = h->type;
        free(a->cur_reply);
        a->cur_reply = gbx_xmalloc(h->len);
        memcpy(a->cur_reply, p, h->len);
        a->cur_len = h->len;
        return;
    case GBX_EV_DATA:
    case GBX_EV_DIRENT:
        if (h->id == a->cur_id && !a->cur_done && a->cur_stream) {
            a->cur_progress = 1;
            a->cur_stream(a->cur_arg, h->type, p, h->len);
        }
        return;
    default:
        queue_event(a, h, p);
        return;
    }
}

/* Handle every complete frame in the input buffer. */
static int process_input(struct gbx_agent *a, struct gbx_err **err)
{
    for (;;) {
        struct gbx_frame_hdr h;
        size_t avail = a->in_len - a->in_off;
        int e = gbx_frame_decode_hdr(a->in + a->in_off, avail, &h);
        if (e == -EAGAIN || (e == 0 && avail < GBX_FRAME_HDR_SIZE + h.len))
            break;
        if (e < 0)
            return lost(a, EPROTO, err);
        handle_frame(a, &h, a->in + a->in_off + GBX_FRAME_HDR_SIZE);
        a->in_off += GBX_FRAME_HDR_SIZE + h.len;
    }
    if (a->in_off > 0) {
        memmove(a->in, a->in + a->in_off, a->in_len - a->in_off);
        a->in_len -= a->in_off;
        a->in_off = 0;
    }
    return 0;
}

/* Read what is available (the caller polled) and handle it. */
static int read_input(struct gbx_agent *a, struct gbx_err **err)
{
    ssize_t n;
    do
        n = recv(a->fd, a->in + a->in_len, FRAME_MAX - a->in_len, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return 0;
    if (n <= 0)
        return lost(a, n < 0 ? errno : ECONNRESET, err);
    a->in_len += (size_t)n;
    return process_input(a, err);
}

/* Wait for input until deadline (-1: forever). 1 input handled, 0 timeout, -1 error. */
static int wait_input(struct gbx_agent *a, int64_t deadline, struct gbx_err **err)
{
    for (;;) {
        int timeout = -1;
        if (deadline >= 0) {
            int64_t left = deadline - (gbx_monotonic_ns() / 1000000);
            timeout = left < 0 ? 0 : left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd pfd = {.fd = a->fd, .events = POLLIN};
        int r = poll(&pfd, 1, timeout);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return lost(a, errno, err);
        if (r == 0)
            return 0;
        return read_input(a, err) < 0 ? -1 : 1;
    }
}

/* ---- requests --------------------------------------------------------------------------- */

static void msg_begin(struct gbx_agent *a, struct gbx_msg *m, uint16_t type)
{
    gbx_msg_start(m, a->out, FRAME_MAX, type, a->next_id++);
    if (a->next_id == 0)
        a->next_id = 1;
}

/* Send all of buf, reading (and queueing) incoming frames meanwhile so that neither side
 * can block the other with full socket buffers. */
static int send_all(struct gbx_agent *a, const uint8_t *buf, size_t len, int64_t deadline,
                    struct gbx_err **err)
{
    size_t off = 0;
    while (off < len) {
        int timeout = -1;
        if (deadline >= 0) {
            int64_t left = deadline - (gbx_monotonic_ns() / 1000000);
            if (left <= 0)
                return lost(a, ETIMEDOUT, err);
            timeout = left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd pfd = {.fd = a->fd, .events = POLLOUT};
        if (a->in_len < FRAME_MAX)
            pfd.events |= POLLIN;
        int r = poll(&pfd, 1, timeout);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return lost(a, errno, err);
        if (r == 0)
            continue;
        if ((pfd.revents & POLLIN) && read_input(a, err) < 0)
            return -1;
        if (pfd.revents & (POLLOUT | POLLERR | POLLHUP)) {
            ssize_t n = send(a->fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n < 0)
                return lost(a, errno, err);
            off += (size_t)n;
        }
    }
    return 0;
}

static int reply_error(const uint8_t *p, size_t len, struct gbx_err **err)
{
    uint32_t e = EIO;
    char msg[1024];
    if (gbx_attrs_get_u32(p, len, GBX_A_ERRNO, &e) != 1 || e == 0)
        e = EIO;
    if (gbx_attrs_get_str(p, len, GBX_A_MESSAGE, msg, sizeof(msg)) != 1)
        snprintf(msg, sizeof(msg), "%s", strerror((int)e));
    if (err != NULL && *err == NULL) {
        /* The message already ends with the strerror text: set errnum afterwards. */
        gbx_err_set(err, 0, gbx_err_kind_from_errno((int)e), "%s", msg);
        (*err)->errnum = (int)e;
    }
    return -1;
}

/* Send the request built in m and wait for its reply. On OK returns 0 with the reply
 * payload in a->cur_reply / a->cur_len (valid until the next request). */
static int request(struct gbx_agent *a, struct gbx_msg *m, stream_fn stream, void *arg,
                   struct gbx_err **err)
{
    if (a->broken)
        return gbx_err_set(err, ENOTCONN, GBX_ERR_UNAVAILABLE, "agent connection lost");
    long n = gbx_msg_finish(m);
    if (n < 0)
        return gbx_err_set(err, EMSGSIZE, GBX_ERR_INVALID, "agent request too large");
    uint32_t id;
    struct gbx_frame_hdr h;
    gbx_frame_decode_hdr(m->buf, (size_t)n, &h);
    id = h.id;
    a->cur_id = id;
    a->cur_done = 0;
    a->cur_progress = 0;
    a->cur_stream = stream;
    a->cur_arg = arg;
    int64_t deadline = a->timeout_ms < 0 ? -1 : (gbx_monotonic_ns() / 1000000) + a->timeout_ms;
    int r = send_all(a, m->buf, (size_t)n, deadline, err);
    while (r == 0 && !a->cur_done) {
        r = wait_input(a, deadline, err);
        if (r == 0) {
            r = gbx_err_set(err, ETIMEDOUT, GBX_ERR_UNAVAILABLE, "agent did not reply");
            break;
        }
        if (r > 0) {
            r = 0;
            if (a->cur_progress && a->timeout_ms >= 0)
                deadline = (gbx_monotonic_ns() / 1000000) +
                           a->timeout_ms; /* streaming: an inactivity timeout */
            a->cur_progress = 0;
        }
    }
    a->cur_id = 0;
    a->cur_stream = NULL;
    if (r < 0)
        return -1;
    if (a->cur_type == GBX_MSG_ERROR)
        return reply_error(a->cur_reply, a->cur_len, err);
    return 0;
}

/* ---- session ---------------------------------------------------------------------------- */

int gbx_agent_open(int fd, struct gbx_agent **out, struct gbx_err **err)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) {
        int e = errno;
        close(fd);
        return gbx_err_sys(err, e, "agent socket");
    }
    if (fl & O_NONBLOCK)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    struct gbx_agent *a = gbx_xcalloc(1, sizeof(*a));
    a->fd = fd;
    a->timeout_ms = DEFAULT_TIMEOUT_MS;
    a->next_id = 1;
    a->in = gbx_xmalloc(FRAME_MAX);
    a->out = gbx_xmalloc(FRAME_MAX);
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_HELLO);
    gbx_msg_put_u32(&m, GBX_A_VERSION, GBX_AGENT_VERSION);
    if (request(a, &m, NULL, NULL, err) < 0) {
        gbx_err_wrap(err, "agent hello");
        gbx_agent_free(a);
        return -1;
    }
    uint32_t v = 0, pid = 0;
    if (gbx_attrs_get_u32(a->cur_reply, a->cur_len, GBX_A_VERSION, &v) != 1 ||
        v != GBX_AGENT_VERSION) {
        gbx_agent_free(a);
        return gbx_err_set(err, EPROTO, GBX_ERR_UNAVAILABLE,
                           "agent hello: unsupported agent version %u", v);
    }
    gbx_attrs_get_u32(a->cur_reply, a->cur_len, GBX_A_PID, &pid);
    a->init_pid = (pid_t)pid;
    *out = a;
    return 0;
}

int gbx_agent_connect(const char *path, struct gbx_agent **out, struct gbx_err **err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return gbx_err_sys(err, ENAMETOOLONG, "connect to agent '%s'", path);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return gbx_err_sys(err, errno, "connect to agent '%s'", path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        gbx_err_sys(err, e, "connect to agent '%s'", path);
        if (err && *err)
            (*err)->kind = GBX_ERR_UNAVAILABLE;
        return -1;
    }
    return gbx_agent_open(fd, out, err);
}

void gbx_agent_free(struct gbx_agent *a)
{
    if (a == NULL)
        return;
    if (a->fd >= 0)
        close(a->fd);
    while (a->qhead) {
        struct evq *q = a->qhead;
        a->qhead = q->next;
        gbx_event_release(&q->ev);
        free(q);
    }
    free(a->cur_reply);
    free(a->in);
    free(a->out);
    free(a);
}

int gbx_agent_fd(const struct gbx_agent *a)
{
    return a->fd;
}

void gbx_agent_set_timeout(struct gbx_agent *a, int timeout_ms)
{
    a->timeout_ms = timeout_ms;
}

static int simple(struct gbx_agent *a, uint16_t type, struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, type);
    return request(a, &m, NULL, NULL, err);
}

int gbx_agent_ping(struct gbx_agent *a, struct gbx_err **err)
{
    return simple(a, GBX_MSG_PING, err);
}

int gbx_agent_shutdown(struct gbx_agent *a, struct gbx_err **err)
{
    return simple(a, GBX_MSG_SHUTDOWN, err);
}

/* ---- processes -------------------------------------------------------------------------- */

int gbx_agent_spawn(struct gbx_agent *a, const struct gbx_spawn_opts *o, uint32_t *proc, pid_t *pid,
                    struct gbx_err **err)
{
    if (o->argv == NULL || o->argv[0] == NULL)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "spawn: empty argv");
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_SPAWN);
    for (const char *const *p = o->argv; *p; p++)
        gbx_msg_put_str(&m, GBX_A_ARGV, *p);
    for (const char *const *p = o->env; p && *p; p++)
        gbx_msg_put_str(&m, GBX_A_ENV, *p);
    if (o->cwd)
        gbx_msg_put_str(&m, GBX_A_CWD, o->cwd);
    if (o->user)
        gbx_msg_put_str(&m, GBX_A_USER, o->user);
    if (o->pty) {
        gbx_msg_put_u32(&m, GBX_A_PTY_ROWS, o->rows ? o->rows : 24);
        gbx_msg_put_u32(&m, GBX_A_PTY_COLS, o->cols ? o->cols : 80);
    }
    if (o->stdin_open)
        gbx_msg_put_u32(&m, GBX_A_STDIN, 1);
    if (request(a, &m, NULL, NULL, err) < 0)
        return -1;
    uint32_t h = 0, p = 0;
    if (gbx_attrs_get_u32(a->cur_reply, a->cur_len, GBX_A_PROC, &h) != 1)
        return gbx_err_set(err, EPROTO, GBX_ERR_INTERNAL, "spawn: reply without PROC");
    gbx_attrs_get_u32(a->cur_reply, a->cur_len, GBX_A_PID, &p);
    if (proc)
        *proc = h;
    if (pid)
        *pid = (pid_t)p;
    return 0;
}

/* Send data in chunks of at most GBX_FRAME_CHUNK, one request each: type with key_tag =
 * key and DATA. Each chunk waits for its OK (the agent's flow control). */
static int send_chunked(struct gbx_agent *a, uint16_t type, uint16_t key_tag, uint32_t key,
                        const void *data, size_t len, struct gbx_err **err)
{
    const uint8_t *d = data;
    size_t off = 0;
    do {
        size_t n = len - off < GBX_FRAME_CHUNK ? len - off : GBX_FRAME_CHUNK;
        struct gbx_msg m;
        msg_begin(a, &m, type);
        gbx_msg_put_u32(&m, key_tag, key);
        gbx_msg_put(&m, GBX_A_DATA, d + off, n);
        if (request(a, &m, NULL, NULL, err) < 0)
            return -1;
        off += n;
    } while (off < len);
    return 0;
}

int gbx_agent_stdin(struct gbx_agent *a, uint32_t proc, const void *data, size_t len,
                    struct gbx_err **err)
{
    return send_chunked(a, GBX_MSG_STDIN, GBX_A_PROC, proc, data, len, err);
}

static int proc_request(struct gbx_agent *a, uint16_t type, uint32_t proc, struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, type);
    gbx_msg_put_u32(&m, GBX_A_PROC, proc);
    return request(a, &m, NULL, NULL, err);
}

int gbx_agent_close_stdin(struct gbx_agent *a, uint32_t proc, struct gbx_err **err)
{
    return proc_request(a, GBX_MSG_CLOSE_STDIN, proc, err);
}

int gbx_agent_attach(struct gbx_agent *a, uint32_t proc, struct gbx_err **err)
{
    return proc_request(a, GBX_MSG_ATTACH, proc, err);
}

int gbx_agent_signal(struct gbx_agent *a, uint32_t proc, int signo, struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_SIGNAL);
    gbx_msg_put_u32(&m, GBX_A_PROC, proc);
    gbx_msg_put_u32(&m, GBX_A_SIGNO, (uint32_t)signo);
    return request(a, &m, NULL, NULL, err);
}

int gbx_agent_resize(struct gbx_agent *a, uint32_t proc, uint16_t rows, uint16_t cols,
                     struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_RESIZE);
    gbx_msg_put_u32(&m, GBX_A_PROC, proc);
    gbx_msg_put_u32(&m, GBX_A_PTY_ROWS, rows);
    gbx_msg_put_u32(&m, GBX_A_PTY_COLS, cols);
    return request(a, &m, NULL, NULL, err);
}

static char *join_argv(const uint8_t *p, size_t len)
{
    struct gbx_attr_iter it;
    struct gbx_attr at;
    size_t total = 1;
    gbx_attr_iter_init(&it, p, len);
    while (gbx_attr_next(&it, &at) > 0)
        if (at.tag == GBX_A_ARGV)
            total += at.len + 1;
    char *s = gbx_xmalloc(total);
    size_t off = 0;
    gbx_attr_iter_init(&it, p, len);
    while (gbx_attr_next(&it, &at) > 0) {
        if (at.tag != GBX_A_ARGV)
            continue;
        if (off)
            s[off++] = ' ';
        for (uint32_t i = 0; i < at.len; i++)
            s[off++] = at.data[i] ? (char)at.data[i] : ' ';
    }
    s[off] = '\0';
    return s;
}

int gbx_agent_ps(struct gbx_agent *a, struct gbx_proc_info **out, size_t *n, struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_PS);
    if (request(a, &m, NULL, NULL, err) < 0)
        return -1;
    struct gbx_attr_iter it;
    struct gbx_attr at;
    size_t count = 0;
    gbx_attr_iter_init(&it, a->cur_reply, a->cur_len);
    while (gbx_attr_next(&it, &at) > 0)
        count += at.tag == GBX_A_PROCINFO;
    struct gbx_proc_info *v = gbx_xcalloc(count ? count : 1, sizeof(*v));
    size_t i = 0;
    gbx_attr_iter_init(&it, a->cur_reply, a->cur_len);
    while (gbx_attr_next(&it, &at) > 0 && i < count) {
        if (at.tag != GBX_A_PROCINFO || gbx_attrs_validate(at.data, at.len) < 0)
            continue;
        uint32_t u = 0;
        gbx_attrs_get_u32(at.data, at.len, GBX_A_PROC, &u);
        v[i].proc = u;
        u = 0;
        gbx_attrs_get_u32(at.data, at.len, GBX_A_PID, &u);
        v[i].pid = (pid_t)u;
        u = 0;
        gbx_attrs_get_u32(at.data, at.len, GBX_A_PTY, &u);
        v[i].pty = u != 0;
        v[i].cmdline = join_argv(at.data, at.len);
        i++;
    }
    *out = v;
    *n = i;
    return 0;
}

void gbx_proc_info_free(struct gbx_proc_info *v, size_t n)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i].cmdline);
    free(v);
}

/* ---- events ----------------------------------------------------------------------------- */

int gbx_agent_next_event(struct gbx_agent *a, struct gbx_event *ev, int timeout_ms,
                         struct gbx_err **err)
{
    int64_t deadline = timeout_ms < 0 ? -1 : (gbx_monotonic_ns() / 1000000) + timeout_ms;
    for (;;) {
        if (a->qhead) {
            struct evq *q = a->qhead;
            a->qhead = q->next;
            if (a->qhead == NULL)
                a->qtail = NULL;
            *ev = q->ev;
            free(q);
            return 1;
        }
        if (a->broken)
            return gbx_err_set(err, ENOTCONN, GBX_ERR_UNAVAILABLE, "agent connection lost");
        int r = wait_input(a, deadline, err);
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
    }
}

void gbx_event_release(struct gbx_event *ev)
{
    if (ev == NULL)
        return;
    free(ev->data);
    free(ev->name);
    ev->data = NULL;
    ev->name = NULL;
    ev->len = 0;
}

/* ---- files ------------------------------------------------------------------------------ */

static void put_user(struct gbx_msg *m, const char *user)
{
    if (user)
        gbx_msg_put_str(m, GBX_A_USER, user);
}

static void parse_stat(const uint8_t *p, size_t len, struct gbx_file_stat *st)
{
    memset(st, 0, sizeof(*st));
    uint32_t v;
    uint64_t w;
    if (gbx_attrs_get_u32(p, len, GBX_A_FTYPE, &v) == 1)
        st->ftype = v;
    if (gbx_attrs_get_u32(p, len, GBX_A_MODE, &v) == 1)
        st->mode = v;
    if (gbx_attrs_get_u64(p, len, GBX_A_SIZE, &w) == 1)
        st->size = w;
    if (gbx_attrs_get_u64(p, len, GBX_A_MTIME_NS, &w) == 1)
        st->mtime_ns = w;
    if (gbx_attrs_get_u32(p, len, GBX_A_UID, &v) == 1)
        st->uid = v;
    if (gbx_attrs_get_u32(p, len, GBX_A_GID, &v) == 1)
        st->gid = v;
    st->name = attr_strdup(p, len, GBX_A_NAME);
    st->link = attr_strdup(p, len, GBX_A_LINK);
}

void gbx_file_stat_release(struct gbx_file_stat *st)
{
    if (st == NULL)
        return;
    free(st->name);
    free(st->link);
    st->name = NULL;
    st->link = NULL;
}

int gbx_agent_stat(struct gbx_agent *a, const char *user, const char *path, int follow,
                   struct gbx_file_stat *out, struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_STAT);
    put_user(&m, user);
    gbx_msg_put_str(&m, GBX_A_PATH, path);
    if (!follow)
        gbx_msg_put_u32(&m, GBX_A_FOLLOW, 0);
    if (request(a, &m, NULL, NULL, err) < 0)
        return -1;
    parse_stat(a->cur_reply, a->cur_len, out);
    return 0;
}

struct read_ctx {
    gbx_read_cb cb;
    void *arg;
    int stopped;
};

static void read_stream(void *arg, uint16_t type, const uint8_t *p, size_t len)
{
    struct read_ctx *rc = arg;
    struct gbx_attr at;
    if (type != GBX_EV_DATA || rc->stopped || gbx_attrs_find(p, len, GBX_A_DATA, &at) != 1)
        return;
    if (rc->cb(rc->arg, at.data, at.len) != 0)
        rc->stopped = 1;
}

int gbx_agent_read(struct gbx_agent *a, const char *user, const char *path, uint64_t offset,
                   uint64_t length, gbx_read_cb cb, void *arg, struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_READ);
    put_user(&m, user);
    gbx_msg_put_str(&m, GBX_A_PATH, path);
    if (offset)
        gbx_msg_put_u64(&m, GBX_A_OFFSET, offset);
    if (length != UINT64_MAX)
        gbx_msg_put_u64(&m, GBX_A_LENGTH, length);
    struct read_ctx rc = {.cb = cb, .arg = arg};
    return request(a, &m, read_stream, &rc, err);
}

struct read_all_ctx {
    uint8_t *buf;
    size_t len, cap, max;
    int too_big;
};

static int read_all_cb(void *arg, const uint8_t *data, size_t len)
{
    struct read_all_ctx *c = arg;
    if (len > c->max - c->len) {
        c->too_big = 1;
        return 1;
    }
    if (c->len + len > c->cap) {
        size_t cap = c->cap ? c->cap : 65536;
        while (cap < c->len + len)
            cap *= 2;
        c->buf = gbx_xrealloc(c->buf, cap);
        c->cap = cap;
    }
    memcpy(c->buf + c->len, data, len);
    c->len += len;
    return 0;
}

int gbx_agent_read_all(struct gbx_agent *a, const char *user, const char *path, size_t max,
                       uint8_t **data, size_t *len, struct gbx_err **err)
{
    struct read_all_ctx c = {.max = max};
    if (gbx_agent_read(a, user, path, 0, UINT64_MAX, read_all_cb, &c, err) < 0) {
        free(c.buf);
        return -1;
    }
    if (c.too_big) {
        free(c.buf);
        return gbx_err_sys(err, EFBIG, "cannot read '%s': larger than %zu bytes", path, max);
    }
    if (c.buf == NULL)
        c.buf = gbx_xmalloc(1);
    *data = c.buf;
    *len = c.len;
    return 0;
}

int gbx_agent_write_open(struct gbx_agent *a, const char *user, const char *path, uint32_t mode,
                         uint32_t wflags, uint32_t *handle, struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_WRITE);
    put_user(&m, user);
    gbx_msg_put_str(&m, GBX_A_PATH, path);
    gbx_msg_put_u32(&m, GBX_A_MODE, mode);
    gbx_msg_put_u32(&m, GBX_A_WFLAGS, wflags);
    if (request(a, &m, NULL, NULL, err) < 0)
        return -1;
    if (gbx_attrs_get_u32(a->cur_reply, a->cur_len, GBX_A_HANDLE, handle) != 1)
        return gbx_err_set(err, EPROTO, GBX_ERR_INTERNAL, "write: reply without HANDLE");
    return 0;
}

int gbx_agent_write_data(struct gbx_agent *a, uint32_t handle, const void *data, size_t len,
                         struct gbx_err **err)
{
    return send_chunked(a, GBX_MSG_WRITE_DATA, GBX_A_HANDLE, handle, data, len, err);
}

int gbx_agent_write_end(struct gbx_agent *a, uint32_t handle, int commit, uint64_t *size,
                        struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_WRITE_END);
    gbx_msg_put_u32(&m, GBX_A_HANDLE, handle);
    gbx_msg_put_u32(&m, GBX_A_COMMIT, commit ? 1 : 0);
    if (request(a, &m, NULL, NULL, err) < 0)
        return -1;
    if (size) {
        uint64_t s = 0;
        gbx_attrs_get_u64(a->cur_reply, a->cur_len, GBX_A_SIZE, &s);
        *size = s;
    }
    return 0;
}

int gbx_agent_write_all(struct gbx_agent *a, const char *user, const char *path, uint32_t mode,
                        const void *data, size_t len, struct gbx_err **err)
{
    uint32_t h;
    if (gbx_agent_write_open(a, user, path, mode, GBX_W_CREATE | GBX_W_TRUNC | GBX_W_ATOMIC, &h,
                             err) < 0)
        return -1;
    if (len > 0 && gbx_agent_write_data(a, h, data, len, err) < 0) {
        if (!a->broken) {
            struct gbx_err *ignored = NULL;
            if (gbx_agent_write_end(a, h, 0, NULL, &ignored) < 0)
                gbx_err_free(ignored);
        }
        return -1;
    }
    return gbx_agent_write_end(a, h, 1, NULL, err);
}

static int path_request(struct gbx_agent *a, uint16_t type, const char *user, const char *path,
                        struct gbx_msg *m)
{
    msg_begin(a, m, type);
    put_user(m, user);
    gbx_msg_put_str(m, GBX_A_PATH, path);
    return 0;
}

int gbx_agent_mkdir(struct gbx_agent *a, const char *user, const char *path, uint32_t mode,
                    int parents, struct gbx_err **err)
{
    struct gbx_msg m;
    path_request(a, GBX_MSG_MKDIR, user, path, &m);
    gbx_msg_put_u32(&m, GBX_A_MODE, mode);
    if (parents)
        gbx_msg_put_u32(&m, GBX_A_PARENTS, 1);
    return request(a, &m, NULL, NULL, err);
}

int gbx_agent_remove(struct gbx_agent *a, const char *user, const char *path, int recursive,
                     struct gbx_err **err)
{
    struct gbx_msg m;
    path_request(a, GBX_MSG_REMOVE, user, path, &m);
    if (recursive)
        gbx_msg_put_u32(&m, GBX_A_RECURSIVE, 1);
    return request(a, &m, NULL, NULL, err);
}

int gbx_agent_rename(struct gbx_agent *a, const char *user, const char *from, const char *to,
                     int noreplace, struct gbx_err **err)
{
    struct gbx_msg m;
    path_request(a, GBX_MSG_RENAME, user, from, &m);
    gbx_msg_put_str(&m, GBX_A_PATH2, to);
    if (noreplace)
        gbx_msg_put_u32(&m, GBX_A_NOREPLACE, 1);
    return request(a, &m, NULL, NULL, err);
}

int gbx_agent_chmod(struct gbx_agent *a, const char *user, const char *path, uint32_t mode,
                    struct gbx_err **err)
{
    struct gbx_msg m;
    path_request(a, GBX_MSG_CHMOD, user, path, &m);
    gbx_msg_put_u32(&m, GBX_A_MODE, mode);
    return request(a, &m, NULL, NULL, err);
}

struct list_ctx {
    struct gbx_file_stat *v;
    size_t n, cap;
};

static void list_stream(void *arg, uint16_t type, const uint8_t *p, size_t len)
{
    struct list_ctx *lc = arg;
    struct gbx_attr_iter it;
    struct gbx_attr at;
    if (type != GBX_EV_DIRENT)
        return;
    gbx_attr_iter_init(&it, p, len);
    while (gbx_attr_next(&it, &at) > 0) {
        if (at.tag != GBX_A_ENTRY || gbx_attrs_validate(at.data, at.len) < 0)
            continue;
        if (lc->n == lc->cap) {
            lc->cap = lc->cap ? lc->cap * 2 : 64;
            lc->v = gbx_xrealloc(lc->v, lc->cap * sizeof(*lc->v));
        }
        parse_stat(at.data, at.len, &lc->v[lc->n]);
        if (lc->v[lc->n].name == NULL)
            lc->v[lc->n].name = gbx_xstrdup("");
        lc->n++;
    }
}

int gbx_agent_list(struct gbx_agent *a, const char *user, const char *path, uint32_t depth,
                   struct gbx_file_stat **out, size_t *n, struct gbx_err **err)
{
    struct gbx_msg m;
    path_request(a, GBX_MSG_LIST, user, path, &m);
    gbx_msg_put_u32(&m, GBX_A_DEPTH, depth ? depth : 1);
    struct list_ctx lc = {0};
    if (request(a, &m, list_stream, &lc, err) < 0) {
        gbx_file_stat_array_free(lc.v, lc.n);
        return -1;
    }
    if (lc.v == NULL)
        lc.v = gbx_xcalloc(1, sizeof(*lc.v));
    *out = lc.v;
    *n = lc.n;
    return 0;
}

void gbx_file_stat_array_free(struct gbx_file_stat *v, size_t n)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        gbx_file_stat_release(&v[i]);
    free(v);
}

int gbx_agent_watch(struct gbx_agent *a, const char *user, const char *path, int recursive,
                    uint32_t *handle, struct gbx_err **err)
{
    struct gbx_msg m;
    path_request(a, GBX_MSG_WATCH, user, path, &m);
    if (recursive)
        gbx_msg_put_u32(&m, GBX_A_RECURSIVE, 1);
    if (request(a, &m, NULL, NULL, err) < 0)
        return -1;
    if (gbx_attrs_get_u32(a->cur_reply, a->cur_len, GBX_A_HANDLE, handle) != 1)
        return gbx_err_set(err, EPROTO, GBX_ERR_INTERNAL, "watch: reply without HANDLE");
    return 0;
}

int gbx_agent_unwatch(struct gbx_agent *a, uint32_t handle, struct gbx_err **err)
{
    struct gbx_msg m;
    msg_begin(a, &m, GBX_MSG_UNWATCH);
    gbx_msg_put_u32(&m, GBX_A_HANDLE, handle);
    return request(a, &m, NULL, NULL, err);
}
