/* SPDX-License-Identifier: MIT */
/* File operations, with the requesting user's filesystem credentials.
 *
 * Every path resolves inside init's root fd through openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS): ".." and absolute symlinks cannot leave the root. Operations on
 * a final component open its parent directory that way, then act with *at() calls that do
 * not follow symlinks, so a symlink swapped in mid-operation cannot redirect them.
 * READ and LIST stream their output from the loop (gbx_fs_pump) as the connection drains. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/path.h"
#include "init/init.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

#define REMOVE_MAX_DEPTH 1024

enum { OP_READ = 1, OP_LIST };

struct list_level {
    DIR *d;
    char *prefix; /* path of this directory relative to the listed one ("" at the top) */
};

struct gbx_op {
    struct gbx_op *next;
    int kind;
    uint32_t id;
    char *path; /* as requested, for messages */
    /* READ */
    int fd;
    int seq;      /* not seekable: read() instead of pread() */
    int nonblock; /* a device opened O_NONBLOCK: EAGAIN ends the read */
    uint64_t off, left, sent;
    /* LIST */
    struct gbx_user u;
    uint32_t depth;
    int sp;
    struct list_level stack[INIT_LIST_MAX_DEPTH];
    uint64_t count;
};

struct gbx_wfile {
    uint32_t handle;
    int fd;
    int dirfd;
    int atomic, excl;
    char *tmp;  /* temporary name in dirfd (atomic writes) */
    char *base; /* final name in dirfd */
    char *path; /* as requested, for messages */
    uint64_t size;
    struct gbx_user u;
};

/* Context of one file request: its user and path, with the user's fs credentials on. */
struct fsctx {
    struct gbx_user u;
    char path[PATH_MAX]; /* as given */
    char abs[PATH_MAX];  /* absolute inside the root */
    int entered;
};

static uint8_t iobuf[GBX_FRAME_CHUNK];

int gbx_fs_abspath(const struct gbx_user *u, const char *path, char *out, size_t outsz)
{
    return gbx_path_abs(u->home, path, out, outsz);
}

int gbx_fs_open(const char *abs, int flags, mode_t mode)
{
    return gbx_path_open_in(gbx_g.rootfd, abs, flags, mode);
}

static int split(const char *abs, char *dir, size_t dirsz, char *base, size_t basesz)
{
    return gbx_path_split(abs, dir, dirsz, base, basesz);
}

static int ctx_path(struct gbx_req *r, struct fsctx *x, uint16_t tag, const char *name, char *path,
                    char *abs)
{
    int e = gbx_req_str(r, tag, name, path, PATH_MAX, 1);
    if (e == -ENAMETOOLONG)
        return gbx_req_failx(r, ENAMETOOLONG, "%s: File name too long", name);
    if (e < 0)
        return e;
    e = gbx_fs_abspath(&x->u, path, abs, PATH_MAX);
    if (e < 0)
        return gbx_req_fail(r, -e, "invalid path '%s'", path);
    return 0;
}

static int ctx_begin(struct gbx_req *r, struct fsctx *x)
{
    int e = gbx_req_user(r, &x->u);
    if (e < 0)
        return e;
    e = ctx_path(r, x, GBX_A_PATH, "PATH", x->path, x->abs);
    if (e < 0)
        return e;
    if (gbx_creds_enter(&x->u) < 0)
        return gbx_req_fail(r, EPERM, "cannot switch to user '%s'", x->u.name);
    x->entered = 1;
    return 0;
}

static void ctx_end(struct fsctx *x)
{
    if (x->entered)
        gbx_creds_leave();
    x->entered = 0;
}

static uint32_t ftype_of(mode_t m)
{
    if (S_ISREG(m))
        return GBX_FT_FILE;
    if (S_ISDIR(m))
        return GBX_FT_DIR;
    if (S_ISLNK(m))
        return GBX_FT_SYMLINK;
    return GBX_FT_OTHER;
}

static void put_stat(struct gbx_msg *m, const struct stat *st, const char *name, const char *link)
{
    gbx_msg_put_str(m, GBX_A_NAME, name);
    gbx_msg_put_u32(m, GBX_A_FTYPE, ftype_of(st->st_mode));
    gbx_msg_put_u32(m, GBX_A_MODE, st->st_mode & 07777);
    gbx_msg_put_u64(m, GBX_A_SIZE, (uint64_t)st->st_size);
    gbx_msg_put_u64(m, GBX_A_MTIME_NS,
                    (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec);
    gbx_msg_put_u32(m, GBX_A_UID, st->st_uid);
    gbx_msg_put_u32(m, GBX_A_GID, st->st_gid);
    if (link)
        gbx_msg_put_str(m, GBX_A_LINK, link);
}

/* ---- STAT ------------------------------------------------------------------------------ */

int gbx_fs_stat(struct gbx_req *r)
{
    struct fsctx x = {0};
    uint32_t follow = 1;
    int e = gbx_req_u32(r, GBX_A_FOLLOW, "FOLLOW", &follow, 0);
    if (e < 0 || (e = ctx_begin(r, &x)) < 0)
        return e;
    int fd = gbx_fs_open(x.abs, O_PATH | (follow ? 0 : O_NOFOLLOW), 0);
    struct stat st;
    char link[PATH_MAX];
    int has_link = 0;
    if (fd < 0) {
        e = gbx_req_fail(r, -fd, "cannot stat '%s'", x.path);
        goto out;
    }
    if (fstatat(fd, "", &st, AT_EMPTY_PATH) < 0) {
        e = gbx_req_fail(r, errno, "cannot stat '%s'", x.path);
        goto out;
    }
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlinkat(fd, "", link, sizeof(link) - 1);
        if (n >= 0) {
            link[n] = '\0';
            has_link = 1;
        }
    }
    const char *slash = strrchr(x.abs, '/');
    const char *name = slash && slash[1] ? slash + 1 : "/";
    struct gbx_msg m;
    gbx_conn_msg_start(r->c, &m, GBX_MSG_OK, r->id);
    put_stat(&m, &st, name, has_link ? link : NULL);
    char owner[64];
    if (gbx_user_name(st.st_uid, owner, sizeof(owner)) == 0)
        gbx_msg_put_str(&m, GBX_A_OWNER, owner);
    if (gbx_group_name(st.st_gid, owner, sizeof(owner)) == 0)
        gbx_msg_put_str(&m, GBX_A_GROUPNAME, owner);
    gbx_conn_msg_send(r->c, &m);
    e = 0;
out:
    if (fd >= 0)
        close(fd);
    ctx_end(&x);
    return e;
}

/* ---- READ and LIST: streamed ------------------------------------------------------------ */

static void op_free(struct gbx_op *op)
{
    if (op->fd >= 0)
        close(op->fd);
    for (int i = 0; i < op->sp; i++) {
        closedir(op->stack[i].d);
        free(op->stack[i].prefix);
    }
    free(op->path);
    free(op);
}

static struct gbx_op *op_new(struct gbx_conn *c, int kind, uint32_t id, const char *path)
{
    struct gbx_op *op = calloc(1, sizeof(*op));
    GBX_BUG_ON(op == NULL);
    op->kind = kind;
    op->id = id;
    op->fd = -1;
    op->path = strdup(path);
    GBX_BUG_ON(op->path == NULL);
    struct gbx_op **tail = &c->ops;
    while (*tail)
        tail = &(*tail)->next;
    *tail = op;
    return op;
}

int gbx_fs_read(struct gbx_req *r)
{
    struct fsctx x = {0};
    uint64_t off = 0, len = UINT64_MAX;
    int e;
    if ((e = gbx_req_u64(r, GBX_A_OFFSET, "OFFSET", &off, 0)) < 0 ||
        (e = gbx_req_u64(r, GBX_A_LENGTH, "LENGTH", &len, 0)) < 0 || (e = ctx_begin(r, &x)) < 0)
        return e;
    int fd = gbx_fs_open(x.abs, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0);
    ctx_end(&x);
    if (fd < 0)
        return gbx_req_fail(r, -fd, "cannot open '%s'", x.path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        e = gbx_req_fail(r, errno, "cannot stat '%s'", x.path);
        close(fd);
        return e;
    }
    if (S_ISDIR(st.st_mode) || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
        close(fd);
        return gbx_req_fail(r, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "cannot read '%s'", x.path);
    }
    struct gbx_op *op = op_new(r->c, OP_READ, r->id, x.path);
    op->fd = fd;
    op->off = off;
    op->left = len;
    op->seq = S_ISCHR(st.st_mode);
    op->nonblock = S_ISCHR(st.st_mode);
    if (S_ISREG(st.st_mode)) {
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    return 0;
}

/* One chunk. Returns 1 when the op finished (reply sent). */
static int read_step(struct gbx_conn *c, struct gbx_op *op)
{
    size_t want = op->left < sizeof(iobuf) ? (size_t)op->left : sizeof(iobuf);
    ssize_t n = 0;
    if (want > 0) {
        do
            n = op->seq ? read(op->fd, iobuf, want) : pread(op->fd, iobuf, want, (off_t)op->off);
        while (n < 0 && errno == EINTR);
    }
    if (n < 0 && errno == EAGAIN && op->nonblock)
        n = 0;
    if (n < 0) {
        char msg[PATH_MAX + 64];
        snprintf(msg, sizeof(msg), "cannot read '%s': %s", op->path, strerror(errno));
        gbx_conn_reply_err(c, op->id, errno, msg);
        return 1;
    }
    if (n == 0) {
        struct gbx_msg m;
        gbx_conn_msg_start(c, &m, GBX_MSG_OK, op->id);
        gbx_msg_put_u64(&m, GBX_A_SIZE, op->sent);
        gbx_conn_msg_send(c, &m);
        return 1;
    }
    struct gbx_msg m;
    gbx_conn_msg_start(c, &m, GBX_EV_DATA, op->id);
    gbx_msg_put(&m, GBX_A_DATA, iobuf, (size_t)n);
    gbx_conn_msg_send(c, &m);
    op->off += (uint64_t)n;
    op->sent += (uint64_t)n;
    op->left -= (uint64_t)n;
    return 0;
}

int gbx_fs_list(struct gbx_req *r)
{
    struct fsctx x = {0};
    uint32_t depth = 1;
    int e;
    if ((e = gbx_req_u32(r, GBX_A_DEPTH, "DEPTH", &depth, 0)) < 0 || (e = ctx_begin(r, &x)) < 0)
        return e;
    if (depth == 0 || depth > INIT_LIST_MAX_DEPTH) {
        ctx_end(&x);
        return gbx_req_failx(r, EINVAL, "depth %u out of range (1-%d)", depth, INIT_LIST_MAX_DEPTH);
    }
    int fd = gbx_fs_open(x.abs, O_RDONLY | O_DIRECTORY, 0);
    ctx_end(&x);
    if (fd < 0)
        return gbx_req_fail(r, -fd, "cannot list '%s'", x.path);
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        e = gbx_req_fail(r, errno, "cannot list '%s'", x.path);
        close(fd);
        return e;
    }
    struct gbx_op *op = op_new(r->c, OP_LIST, r->id, x.path);
    op->u = x.u;
    op->depth = depth;
    op->stack[0].d = d;
    op->stack[0].prefix = strdup("");
    GBX_BUG_ON(op->stack[0].prefix == NULL);
    op->sp = 1;
    return 0;
}

/* One DIRENT frame of entries. Returns 1 when the op finished (reply sent). */
static int list_step(struct gbx_conn *c, struct gbx_op *op)
{
    struct gbx_msg m;
    uint64_t n = 0;
    gbx_conn_msg_start(c, &m, GBX_EV_DIRENT, op->id);
    if (gbx_creds_enter(&op->u) < 0) {
        gbx_conn_reply_err(c, op->id, EPERM, "cannot switch credentials");
        return 1;
    }
    while (op->sp > 0 && m.len < GBX_FRAME_CHUNK && gbx_msg_room(&m) > 2 * PATH_MAX + 512) {
        struct list_level *top = &op->stack[op->sp - 1];
        errno = 0;
        struct dirent *de = readdir(top->d);
        if (de == NULL) {
            closedir(top->d);
            free(top->prefix);
            op->sp--;
            continue;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char name[PATH_MAX];
        int len = snprintf(name, sizeof(name), "%s%s%s", top->prefix, top->prefix[0] ? "/" : "",
                           de->d_name);
        if (len < 0 || (size_t)len >= sizeof(name))
            continue;
        struct stat st;
        int dfd = dirfd(top->d);
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* removed meanwhile */
        char link[PATH_MAX];
        int has_link = 0;
        if (S_ISLNK(st.st_mode)) {
            ssize_t k = readlinkat(dfd, de->d_name, link, sizeof(link) - 1);
            if (k >= 0) {
                link[k] = '\0';
                has_link = 1;
            }
        }
        gbx_msg_nest_begin(&m, GBX_A_ENTRY);
        put_stat(&m, &st, name, has_link ? link : NULL);
        gbx_msg_nest_end(&m);
        n++;
        op->count++;
        if (S_ISDIR(st.st_mode) && (uint32_t)op->sp < op->depth) {
            int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            DIR *sd = sub >= 0 ? fdopendir(sub) : NULL;
            if (sd != NULL) {
                op->stack[op->sp].d = sd;
                op->stack[op->sp].prefix = strdup(name);
                GBX_BUG_ON(op->stack[op->sp].prefix == NULL);
                op->sp++;
            } else if (sub >= 0) {
                close(sub);
            }
        }
    }
    gbx_creds_leave();
    if (n > 0)
        gbx_conn_msg_send(c, &m);
    if (op->sp > 0)
        return 0;
    gbx_conn_msg_start(c, &m, GBX_MSG_OK, op->id);
    gbx_msg_put_u64(&m, GBX_A_COUNT, op->count);
    gbx_conn_msg_send(c, &m);
    return 1;
}

void gbx_fs_pump(struct gbx_conn *c)
{
    struct gbx_op **pp = &c->ops;
    while (*pp && !gbx_conn_over(c)) {
        struct gbx_op *op = *pp;
        int done = op->kind == OP_READ ? read_step(c, op) : list_step(c, op);
        if (done) {
            *pp = op->next;
            op_free(op);
        } else {
            pp = &op->next;
        }
        /* Round-robin: start over from the first op once every op had a turn. */
        if (*pp == NULL)
            pp = &c->ops;
    }
}

/* ---- WRITE ----------------------------------------------------------------------------- */

/* mkdir -p: create every missing directory of abs; the last one gets mode. */
static int mkdir_p(const char *abs, mode_t mode)
{
    char buf[PATH_MAX], dir[PATH_MAX], base[NAME_MAX + 1];
    snprintf(buf, sizeof(buf), "%s", abs);
    size_t n = strlen(buf);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        int fd = gbx_fs_open(buf, O_PATH | O_DIRECTORY, 0);
        if (fd >= 0) {
            close(fd);
        } else if (fd == -ENOTDIR && saved == '\0') {
            return -EEXIST; /* the last component exists, as something else */
        } else if (fd != -ENOENT) {
            return fd;
        } else {
            int s = split(buf, dir, sizeof(dir), base, sizeof(base));
            if (s != 0)
                return s < 0 ? s : -EEXIST;
            int dfd = gbx_fs_open(dir, O_PATH | O_DIRECTORY, 0);
            if (dfd < 0)
                return dfd;
            int k = mkdirat(dfd, base, saved == '\0' ? mode : 0755);
            int err = errno;
            close(dfd);
            if (k < 0 && err != EEXIST)
                return -err;
        }
        buf[i] = saved;
    }
    return 0;
}

static struct gbx_wfile **wfile_slot(struct gbx_conn *c, uint32_t handle)
{
    for (int i = 0; i < INIT_MAX_WFILES; i++)
        if (c->wfiles[i] && c->wfiles[i]->handle == handle)
            return &c->wfiles[i];
    return NULL;
}

static void wfile_free(struct gbx_wfile *w)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->dirfd >= 0)
        close(w->dirfd);
    free(w->tmp);
    free(w->base);
    free(w->path);
    free(w);
}

static void wfile_abort(struct gbx_wfile *w)
{
    if (w->atomic && w->tmp && gbx_creds_enter(&w->u) == 0) {
        unlinkat(w->dirfd, w->tmp, 0);
        gbx_creds_leave();
    }
    wfile_free(w);
}

static int open_temp(int dirfd, const char *base, mode_t mode, char **name)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int tries = 0; tries < 64; tries++) {
        uint8_t rnd[6];
        if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
            for (size_t i = 0; i < sizeof(rnd); i++)
                rnd[i] = (uint8_t)(rand() ^ (getpid() << i));
        }
        char suffix[7];
        for (size_t i = 0; i < 6; i++)
            suffix[i] = chars[rnd[i] % (sizeof(chars) - 1)];
        suffix[6] = '\0';
        char tmp[NAME_MAX + 1];
        snprintf(tmp, sizeof(tmp), ".%.200s.gbx-%s", base, suffix);
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0) {
            *name = strdup(tmp);
            GBX_BUG_ON(*name == NULL);
            return fd;
        }
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

int gbx_fs_write(struct gbx_req *r)
{
    struct fsctx x = {0};
    uint32_t mode = 0644, fl = GBX_W_CREATE | GBX_W_TRUNC | GBX_W_ATOMIC;
    int e;
    if ((e = gbx_req_u32(r, GBX_A_MODE, "MODE", &mode, 0)) < 0 ||
        (e = gbx_req_u32(r, GBX_A_WFLAGS, "WFLAGS", &fl, 0)) < 0)
        return e;
    int slot = -1;
    for (int i = 0; i < INIT_MAX_WFILES && slot < 0; i++)
        if (r->c->wfiles[i] == NULL)
            slot = i;
    if (slot < 0)
        return gbx_req_failx(r, EMFILE, "too many open write handles");
    if ((e = ctx_begin(r, &x)) < 0)
        return e;
    mode &= 07777;
    int atomic = (fl & GBX_W_ATOMIC) && !(fl & GBX_W_APPEND);
    char dir[PATH_MAX], base[NAME_MAX + 1];
    int dfd = -1, fd = -1;
    char *tmp = NULL;
    int s = split(x.abs, dir, sizeof(dir), base, sizeof(base));
    if (s != 0) {
        e = gbx_req_fail(r, s > 0 ? EISDIR : EINVAL, "cannot write '%s'", x.path);
        goto out;
    }
    if ((fl & GBX_W_PARENTS) && (e = mkdir_p(dir, 0755)) < 0) {
        e = gbx_req_fail(r, -e, "cannot create parents of '%s'", x.path);
        goto out;
    }
    dfd = gbx_fs_open(dir, O_PATH | O_DIRECTORY, 0);
    if (dfd < 0) {
        e = gbx_req_fail(r, -dfd, "cannot open '%s'", x.path);
        goto out;
    }
    if (atomic) {
        struct stat st;
        int exists = fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!exists && errno != ENOENT) {
            e = gbx_req_fail(r, errno, "cannot open '%s'", x.path);
            goto out;
        }
        if ((exists && (fl & GBX_W_EXCL)) || (!exists && !(fl & GBX_W_CREATE)) ||
            (exists && S_ISDIR(st.st_mode))) {
            e = gbx_req_fail(r,
                             !exists               ? ENOENT
                             : S_ISDIR(st.st_mode) ? EISDIR
                                                   : EEXIST,
                             "cannot open '%s'", x.path);
            goto out;
        }
        fd = open_temp(dfd, base, mode, &tmp);
    } else {
        int of = O_WRONLY | O_NOCTTY | O_NONBLOCK;
        if (fl & GBX_W_CREATE)
            of |= O_CREAT | ((fl & GBX_W_EXCL) ? O_EXCL : 0);
        if (fl & GBX_W_TRUNC)
            of |= O_TRUNC;
        if (fl & GBX_W_APPEND)
            of |= O_APPEND;
        fd = gbx_fs_open(x.abs, of, mode);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
            close(fd);
            fd = -EINVAL;
        }
    }
    if (fd < 0) {
        e = gbx_req_fail(r, -fd, "cannot open '%s'", x.path);
        goto out;
    }
    struct gbx_wfile *w = calloc(1, sizeof(*w));
    GBX_BUG_ON(w == NULL);
    w->handle = r->c->next_handle++;
    w->fd = gbx_steal_fd(&fd);
    w->dirfd = gbx_steal_fd(&dfd);
    w->atomic = atomic;
    w->excl = !!(fl & GBX_W_EXCL);
    w->tmp = gbx_steal_ptr(&tmp);
    w->base = strdup(base);
    w->path = strdup(x.path);
    GBX_BUG_ON(w->base == NULL || w->path == NULL);
    w->u = x.u;
    r->c->wfiles[slot] = w;
    struct gbx_msg m;
    gbx_conn_msg_start(r->c, &m, GBX_MSG_OK, r->id);
    gbx_msg_put_u32(&m, GBX_A_HANDLE, w->handle);
    gbx_conn_msg_send(r->c, &m);
    e = 0;
out:
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    free(tmp);
    ctx_end(&x);
    return e;
}

static int req_wfile(struct gbx_req *r, struct gbx_wfile ***slot)
{
    uint32_t h;
    int e = gbx_req_u32(r, GBX_A_HANDLE, "HANDLE", &h, 1);
    if (e < 0)
        return e;
    *slot = wfile_slot(r->c, h);
    if (*slot == NULL)
        return gbx_req_failx(r, EBADF, "no write handle %u", h);
    return 0;
}

int gbx_fs_write_data(struct gbx_req *r)
{
    struct gbx_wfile **slot;
    struct gbx_attr a;
    int e = req_wfile(r, &slot);
    if (e < 0)
        return e;
    if (gbx_attrs_find(r->p, r->len, GBX_A_DATA, &a) != 1)
        return gbx_req_failx(r, EINVAL, "missing attribute DATA");
    struct gbx_wfile *w = *slot;
    size_t done = 0;
    while (done < a.len) {
        ssize_t n = write(w->fd, a.data + done, a.len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return gbx_req_fail(r, errno, "cannot write '%s'", w->path);
        done += (size_t)n;
    }
    w->size += a.len;
    gbx_conn_reply_ok(r->c, r->id);
    return 0;
}

int gbx_fs_write_end(struct gbx_req *r)
{
    struct gbx_wfile **slot;
    uint32_t commit = 1;
    int e;
    if ((e = req_wfile(r, &slot)) < 0 ||
        (e = gbx_req_u32(r, GBX_A_COMMIT, "COMMIT", &commit, 0)) < 0)
        return e;
    struct gbx_wfile *w = *slot;
    *slot = NULL;
    uint64_t size = w->size;
    if (!commit) {
        wfile_abort(w);
    } else {
        int err = 0;
        if (close(w->fd) < 0 && errno != EINTR)
            err = errno;
        w->fd = -1;
        if (w->atomic && !err) {
            if (gbx_creds_enter(&w->u) < 0) {
                err = EPERM;
            } else {
                if (renameat2(w->dirfd, w->tmp, w->dirfd, w->base, w->excl ? RENAME_NOREPLACE : 0) <
                    0)
                    err = errno;
                else
                    w->atomic = 0; /* nothing left to clean up */
                gbx_creds_leave();
            }
        }
        if (err) {
            e = gbx_req_fail(r, err, "cannot write '%s'", w->path);
            wfile_abort(w);
            return e;
        }
        wfile_free(w);
    }
    struct gbx_msg m;
    gbx_conn_msg_start(r->c, &m, GBX_MSG_OK, r->id);
    gbx_msg_put_u64(&m, GBX_A_SIZE, size);
    gbx_conn_msg_send(r->c, &m);
    return 0;
}

void gbx_fs_conn_closed(struct gbx_conn *c)
{
    for (int i = 0; i < INIT_MAX_WFILES; i++) {
        if (c->wfiles[i]) {
            wfile_abort(c->wfiles[i]);
            c->wfiles[i] = NULL;
        }
    }
    while (c->ops) {
        struct gbx_op *op = c->ops;
        c->ops = op->next;
        op_free(op);
    }
}

/* ---- MKDIR, REMOVE, RENAME, CHMOD --------------------------------------------------------- */

int gbx_fs_mkdir(struct gbx_req *r)
{
    struct fsctx x = {0};
    uint32_t mode = 0755, parents = 0;
    int e;
    if ((e = gbx_req_u32(r, GBX_A_MODE, "MODE", &mode, 0)) < 0 ||
        (e = gbx_req_u32(r, GBX_A_PARENTS, "PARENTS", &parents, 0)) < 0 ||
        (e = ctx_begin(r, &x)) < 0)
        return e;
    mode &= 07777;
    if (parents) {
        e = mkdir_p(x.abs, mode);
        if (e == 0) {
            /* mkdir -p accepts an existing directory, nothing else. */
            int fd = gbx_fs_open(x.abs, O_PATH | O_DIRECTORY, 0);
            e = fd < 0 ? (fd == -ENOTDIR ? -EEXIST : fd) : 0;
            if (fd >= 0)
                close(fd);
        }
    } else {
        char dir[PATH_MAX], base[NAME_MAX + 1];
        int s = split(x.abs, dir, sizeof(dir), base, sizeof(base));
        if (s != 0) {
            e = s > 0 ? -EEXIST : s;
        } else {
            int dfd = gbx_fs_open(dir, O_PATH | O_DIRECTORY, 0);
            e = dfd;
            if (dfd >= 0) {
                e = mkdirat(dfd, base, mode) < 0 ? -errno : 0;
                close(dfd);
            }
        }
    }
    ctx_end(&x);
    if (e < 0)
        return gbx_req_fail(r, -e, "cannot create directory '%s'", x.path);
    gbx_conn_reply_ok(r->c, r->id);
    return 0;
}

/* Remove everything inside the directory dfd (which it closes), never following
 * symlinks: subdirectories are opened O_NOFOLLOW relative to their parent. */
static int remove_tree(int dfd, int depth)
{
    if (depth > REMOVE_MAX_DEPTH) {
        close(dfd);
        return -ELOOP;
    }
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        int e = -errno;
        close(dfd);
        return e;
    }
    int e = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        int isdir = de->d_type == DT_DIR;
        if (de->d_type == DT_UNKNOWN) {
            struct stat st;
            isdir =
                fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        }
        if (isdir) {
            int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int k = sub < 0 ? -errno : remove_tree(sub, depth + 1);
            if (k == 0 && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0)
                k = -errno;
            if (k < 0 && k != -ENOENT && e == 0)
                e = k;
        } else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && e == 0) {
            e = -errno;
        }
    }
    closedir(d);
    return e;
}

int gbx_fs_remove(struct gbx_req *r)
{
    struct fsctx x = {0};
    uint32_t recursive = 0;
    int e;
    if ((e = gbx_req_u32(r, GBX_A_RECURSIVE, "RECURSIVE", &recursive, 0)) < 0 ||
        (e = ctx_begin(r, &x)) < 0)
        return e;
    char dir[PATH_MAX], base[NAME_MAX + 1];
    int s = split(x.abs, dir, sizeof(dir), base, sizeof(base));
    int dfd = -1;
    struct stat st;
    if (s != 0) {
        e = s > 0 ? -EBUSY : s;
        goto out;
    }
    dfd = gbx_fs_open(dir, O_PATH | O_DIRECTORY, 0);
    if (dfd < 0) {
        e = dfd;
        goto out;
    }
    if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        e = -errno;
        goto out;
    }
    if (!S_ISDIR(st.st_mode)) {
        e = unlinkat(dfd, base, 0) < 0 ? -errno : 0;
        goto out;
    }
    if (recursive) {
        int sub = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        e = sub < 0 ? -errno : remove_tree(sub, 0);
        if (e < 0)
            goto out;
    }
    e = unlinkat(dfd, base, AT_REMOVEDIR) < 0 ? -errno : 0;
    if (e == -EEXIST)
        e = -ENOTEMPTY;
out:
    if (dfd >= 0)
        close(dfd);
    ctx_end(&x);
    if (e < 0)
        return gbx_req_fail(r, -e, "cannot remove '%s'", x.path);
    gbx_conn_reply_ok(r->c, r->id);
    return 0;
}

int gbx_fs_rename(struct gbx_req *r)
{
    struct fsctx x = {0};
    char path2[PATH_MAX], abs2[PATH_MAX];
    uint32_t noreplace = 0;
    int e;
    if ((e = gbx_req_u32(r, GBX_A_NOREPLACE, "NOREPLACE", &noreplace, 0)) < 0)
        return e;
    if ((e = gbx_req_user(r, &x.u)) < 0 ||
        (e = ctx_path(r, &x, GBX_A_PATH2, "PATH2", path2, abs2)) < 0 || (e = ctx_begin(r, &x)) < 0)
        return e;
    char dir1[PATH_MAX], base1[NAME_MAX + 1], dir2[PATH_MAX], base2[NAME_MAX + 1];
    int d1 = -1, d2 = -1;
    int s1 = split(x.abs, dir1, sizeof(dir1), base1, sizeof(base1));
    int s2 = split(abs2, dir2, sizeof(dir2), base2, sizeof(base2));
    if (s1 != 0 || s2 != 0) {
        e = (s1 > 0 || s2 > 0) ? -EBUSY : -EINVAL;
        goto out;
    }
    d1 = gbx_fs_open(dir1, O_PATH | O_DIRECTORY, 0);
    d2 = gbx_fs_open(dir2, O_PATH | O_DIRECTORY, 0);
    if (d1 < 0 || d2 < 0) {
        e = d1 < 0 ? d1 : d2;
        goto out;
    }
    e = renameat2(d1, base1, d2, base2, noreplace ? RENAME_NOREPLACE : 0) < 0 ? -errno : 0;
out:
    if (d1 >= 0)
        close(d1);
    if (d2 >= 0)
        close(d2);
    ctx_end(&x);
    if (e < 0)
        return gbx_req_fail(r, -e, "cannot rename '%s' to '%s'", x.path, path2);
    gbx_conn_reply_ok(r->c, r->id);
    return 0;
}

int gbx_fs_chmod(struct gbx_req *r)
{
    struct fsctx x = {0};
    uint32_t mode;
    int e;
    if ((e = gbx_req_u32(r, GBX_A_MODE, "MODE", &mode, 1)) < 0 || (e = ctx_begin(r, &x)) < 0)
        return e;
    int fd = gbx_fs_open(x.abs, O_PATH, 0);
    e = fd;
    if (fd >= 0) {
        e = syscall(SYS_fchmodat2, fd, "", mode & 07777, AT_EMPTY_PATH) < 0 ? -errno : 0;
        if (e == -ENOSYS) {
            char proc[64];
            snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
            e = chmod(proc, mode & 07777) < 0 ? -errno : 0;
        }
        close(fd);
    }
    ctx_end(&x);
    if (e < 0)
        return gbx_req_fail(r, -e, "cannot change mode of '%s'", x.path);
    gbx_conn_reply_ok(r->c, r->id);
    return 0;
}

/* The canonical path: every symlink followed (the leaf's too), "." and ".." gone. A missing
 * tail (a file about to be written) is resolved through its deepest existing ancestor and
 * kept as given. */
int gbx_fs_realpath(struct gbx_req *r)
{
    struct fsctx x = {0};
    int e = ctx_begin(r, &x);
    if (e < 0)
        return e;
    char head[PATH_MAX], out[PATH_MAX];
    snprintf(head, sizeof(head), "%s", x.abs);
    const char *tail = "";
    char *cut = NULL;
    e = 0;
    while (realpath(head, out) == NULL) {
        if (errno != ENOENT || (cut = strrchr(head, '/')) == NULL) {
            e = errno != ENOENT ? errno : ENOENT;
            break;
        }
        if (cut == head) { /* nothing of it below / exists */
            snprintf(out, sizeof(out), "/");
            tail = x.abs;
            break;
        }
        *cut = '\0';
        tail = x.abs + (cut - head);
    }
    ctx_end(&x);
    if (e)
        return gbx_req_fail(r, e, "cannot resolve '%s'", x.path);
    char full[PATH_MAX];
    int n = snprintf(full, sizeof(full), "%s%s", strcmp(out, "/") == 0 && tail[0] ? "" : out, tail);
    if (n < 0 || (size_t)n >= sizeof(full))
        return gbx_req_fail(r, ENAMETOOLONG, "cannot resolve '%s'", x.path);
    struct gbx_msg m;
    gbx_conn_msg_start(r->c, &m, GBX_MSG_OK, r->id);
    gbx_msg_put_str(&m, GBX_A_PATH, full[0] ? full : "/");
    gbx_conn_msg_send(r->c, &m);
    return 0;
}
