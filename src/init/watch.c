/* SPDX-License-Identifier: MIT */
/* WATCH: inotify on a directory (and, recursively, its subdirectories). One inotify
 * instance serves every connection; the kernel gives the same watch descriptor to two
 * watches of one directory, so entries are matched by wd across all watches and a wd is
 * removed only when no entry uses it any more. Directories are opened through the root
 * (RESOLVE_IN_ROOT) and watched through their /proc/self/fd magic link, never by path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "init/init.h"

#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM |            \
     IN_ATTRIB | IN_ONLYDIR | IN_EXCL_UNLINK)
#define WATCH_MAX_DIRS 8192
#define WATCH_MAX_DEPTH 64

struct wentry {
    int wd;
    char *rel; /* directory relative to the watched one ("" for itself) */
};

struct gbx_watch {
    struct gbx_watch *next;
    uint32_t handle;
    struct gbx_conn *c;
    int recursive;
    int overflow; /* events were dropped while the connection was over its cap */
    char *abs;    /* watched directory, absolute inside the root */
    struct gbx_user u;
    struct wentry *ents;
    size_t n, cap;
};

static struct gbx_watch *watches;
static uint32_t next_watch = 1;

static int wd_in_use(int wd)
{
    for (struct gbx_watch *w = watches; w; w = w->next)
        for (size_t i = 0; i < w->n; i++)
            if (w->ents[i].wd == wd)
                return 1;
    return 0;
}

static void entry_drop(struct gbx_watch *w, size_t i, int rm)
{
    int wd = w->ents[i].wd;
    free(w->ents[i].rel);
    w->ents[i] = w->ents[--w->n];
    if (rm && !wd_in_use(wd))
        inotify_rm_watch(gbx_g.inotify.fd, wd);
}

static void watch_free(struct gbx_watch *w)
{
    while (w->n > 0)
        entry_drop(w, w->n - 1, 1);
    free(w->ents);
    free(w->abs);
    free(w);
}

/* Watch the open directory fd as rel; 0 or -errno. */
static int watch_fd(struct gbx_watch *w, int fd, const char *rel)
{
    if (w->n >= WATCH_MAX_DIRS)
        return -ENOSPC;
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(gbx_g.inotify.fd, proc, WATCH_MASK);
    if (wd < 0)
        return -errno;
    for (size_t i = 0; i < w->n; i++)
        if (w->ents[i].wd == wd)
            return 0; /* already watched (seen twice through a rename) */
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 8;
        w->ents = realloc(w->ents, w->cap * sizeof(*w->ents));
        GBX_BUG_ON(w->ents == NULL);
    }
    w->ents[w->n].wd = wd;
    w->ents[w->n].rel = strdup(rel);
    GBX_BUG_ON(w->ents[w->n].rel == NULL);
    w->n++;
    return 0;
}

/* Watch every directory below the open directory dfd (closed here). */
static void watch_subdirs(struct gbx_watch *w, int dfd, const char *rel, int depth)
{
    DIR *d = depth < WATCH_MAX_DEPTH ? fdopendir(dfd) : NULL;
    if (d == NULL) {
        close(dfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
            continue;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue;
        char srel[PATH_MAX];
        int n = snprintf(srel, sizeof(srel), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        if (n < 0 || (size_t)n >= sizeof(srel) || watch_fd(w, sub, srel) < 0) {
            close(sub);
            continue;
        }
        watch_subdirs(w, sub, srel, depth + 1);
    }
    closedir(d);
}

static int ensure_inotify(void)
{
    if (gbx_g.inotify.fd >= 0)
        return 0;
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0)
        return -errno;
    gbx_src_init(&gbx_g.inotify, GBX_SRC_INOTIFY, fd, NULL);
    gbx_src_set(&gbx_g.inotify, EPOLLIN);
    return 0;
}

int gbx_watch_add(struct gbx_req *r)
{
    struct gbx_user u;
    char path[PATH_MAX], abs[PATH_MAX];
    uint32_t recursive = 0;
    int e;
    if ((e = gbx_req_u32(r, GBX_A_RECURSIVE, "RECURSIVE", &recursive, 0)) < 0 ||
        (e = gbx_req_user(r, &u)) < 0)
        return e;
    e = gbx_req_str(r, GBX_A_PATH, "PATH", path, sizeof(path), 1);
    if (e == -ENAMETOOLONG)
        return gbx_req_failx(r, ENAMETOOLONG, "PATH: File name too long");
    if (e < 0)
        return e;
    if ((e = gbx_fs_abspath(&u, path, abs, sizeof(abs))) < 0)
        return gbx_req_fail(r, -e, "cannot watch '%s'", path);
    if ((e = ensure_inotify()) < 0)
        return gbx_req_fail(r, -e, "cannot watch '%s'", path);
    if (gbx_creds_enter(&u) < 0)
        return gbx_req_fail(r, EPERM, "cannot switch to user '%s'", u.name);
    int fd = gbx_fs_open(abs, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
        gbx_creds_leave();
        return gbx_req_fail(r, -fd, "cannot watch '%s'", path);
    }
    struct gbx_watch *w = calloc(1, sizeof(*w));
    GBX_BUG_ON(w == NULL);
    w->c = r->c;
    w->recursive = !!recursive;
    w->u = u;
    w->abs = strdup(abs);
    GBX_BUG_ON(w->abs == NULL);
    e = watch_fd(w, fd, "");
    if (e < 0) {
        close(fd);
        gbx_creds_leave();
        watch_free(w);
        return gbx_req_fail(r, -e, "cannot watch '%s'", path);
    }
    w->handle = next_watch++;
    w->next = watches;
    watches = w;
    if (recursive)
        watch_subdirs(w, fd, "", 0);
    else
        close(fd);
    gbx_creds_leave();
    struct gbx_msg m;
    gbx_conn_msg_start(r->c, &m, GBX_MSG_OK, r->id);
    gbx_msg_put_u32(&m, GBX_A_HANDLE, w->handle);
    gbx_conn_msg_send(r->c, &m);
    return 0;
}

static void unlink_watch(struct gbx_watch *w)
{
    for (struct gbx_watch **pp = &watches; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    watch_free(w);
}

int gbx_watch_remove(struct gbx_req *r)
{
    uint32_t h;
    int e = gbx_req_u32(r, GBX_A_HANDLE, "HANDLE", &h, 1);
    if (e < 0)
        return e;
    for (struct gbx_watch *w = watches; w; w = w->next) {
        if (w->handle == h && w->c == r->c) {
            unlink_watch(w);
            gbx_conn_reply_ok(r->c, r->id);
            return 0;
        }
    }
    return gbx_req_failx(r, ENOENT, "no watch %u", h);
}

void gbx_watch_conn_closed(struct gbx_conn *c)
{
    for (struct gbx_watch **pp = &watches; *pp;) {
        struct gbx_watch *w = *pp;
        if (w->c == c) {
            *pp = w->next;
            watch_free(w);
        } else {
            pp = &w->next;
        }
    }
}

static void send_event(struct gbx_watch *w, const char *name, uint32_t bits)
{
    if (gbx_conn_over(w->c)) {
        w->overflow = 1;
        return;
    }
    struct gbx_msg m;
    gbx_conn_msg_start(w->c, &m, GBX_EV_WATCH, w->handle);
    gbx_msg_put_str(&m, GBX_A_NAME, name);
    gbx_msg_put_u32(&m, GBX_A_WEVENT, bits);
    gbx_conn_msg_send(w->c, &m);
}

static uint32_t map_mask(uint32_t mask)
{
    uint32_t b = 0;
    if (mask & (IN_CREATE | IN_MOVED_TO))
        b |= GBX_WE_CREATE;
    if (mask & (IN_MODIFY | IN_CLOSE_WRITE))
        b |= GBX_WE_WRITE;
    if (mask & IN_DELETE)
        b |= GBX_WE_REMOVE;
    if (mask & IN_MOVED_FROM)
        b |= GBX_WE_RENAME;
    if (mask & IN_ATTRIB)
        b |= GBX_WE_CHMOD;
    return b;
}

/* A directory appeared below a recursive watch: watch it and everything in it. */
static void watch_new_dir(struct gbx_watch *w, const char *rel)
{
    char abs[PATH_MAX];
    int n = snprintf(abs, sizeof(abs), "%s/%s", w->abs, rel);
    if (n < 0 || (size_t)n >= sizeof(abs) || gbx_creds_enter(&w->u) < 0)
        return;
    int fd = gbx_fs_open(abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (fd >= 0) {
        if (watch_fd(w, fd, rel) == 0)
            watch_subdirs(w, fd, rel, 1);
        else
            close(fd);
    }
    gbx_creds_leave();
}

static void handle_event(const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
        for (struct gbx_watch *w = watches; w; w = w->next)
            send_event(w, "", GBX_WE_OVERFLOW);
        return;
    }
    uint32_t bits = map_mask(ev->mask);
    for (struct gbx_watch *w = watches; w; w = w->next) {
        for (size_t i = 0; i < w->n; i++) {
            if (w->ents[i].wd != ev->wd)
                continue;
            if (ev->mask & IN_IGNORED) {
                entry_drop(w, i, 0); /* the kernel removed the wd already */
                break;
            }
            char name[PATH_MAX];
            const char *rel = w->ents[i].rel;
            int n = snprintf(name, sizeof(name), "%s%s%s", rel, rel[0] && ev->len ? "/" : "",
                             ev->len ? ev->name : "");
            if (n < 0 || (size_t)n >= sizeof(name))
                break;
            if (bits)
                send_event(w, name, bits);
            if (w->recursive && (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
                watch_new_dir(w, name);
            break;
        }
    }
}

void gbx_watch_event(void)
{
    _Alignas(struct inotify_event) char buf[16384];
    for (;;) {
        ssize_t n = read(gbx_g.inotify.fd, buf, sizeof(buf));
        if (n <= 0)
            return;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            handle_event(ev);
            p += sizeof(*ev) + ev->len;
        }
    }
}

void gbx_watch_tick(void)
{
    for (struct gbx_watch *w = watches; w; w = w->next) {
        if (w->overflow && !gbx_conn_over(w->c)) {
            w->overflow = 0;
            send_event(w, "", GBX_WE_OVERFLOW);
        }
    }
}
