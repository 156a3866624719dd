/* SPDX-License-Identifier: MIT */
#include "sandbox/layer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/fileutil.h"
#include "base/mem.h"

#define NOBODY 65534u
#define RANGE 65536u
#define MAX_DEPTH 256

struct link_seen {
    dev_t dev;
    ino_t ino;
    char *path; /* the first copy, absolute */
};

struct copy {
    uint32_t uid_base;
    uint64_t max_bytes;
    struct gbx_layer_stats st;
    struct link_seen *links;
    size_t nlinks, links_cap;
    char path[PATH_MAX]; /* the destination being written, for hard links and errors */
    struct gbx_err **err;
};

static uint32_t shift(const struct copy *c, uint32_t id)
{
    return id >= c->uid_base && id - c->uid_base < RANGE ? id - c->uid_base : NOBODY;
}

static int fail(struct copy *c, int e, const char *what)
{
    return gbx_err_sys(c->err, e, "snapshot layer: %s '%s'", what, c->path);
}

/* user.* extended attributes (overlayfs' user.overlay.opaque among them) from fd to fd */
static int copy_xattrs(struct copy *c, int sfd, int dfd)
{
    char names[4096], val[4096];
    ssize_t n = flistxattr(sfd, names, sizeof(names));
    if (n < 0)
        return errno == ENOTSUP ? 0 : fail(c, errno, "cannot list attributes of");
    for (char *p = names; p < names + n; p += strlen(p) + 1) {
        if (strncmp(p, "user.", 5) != 0)
            continue;
        ssize_t vl = fgetxattr(sfd, p, val, sizeof(val));
        if (vl < 0)
            return fail(c, errno, "cannot read an attribute of");
        if (fsetxattr(dfd, p, val, (size_t)vl, 0) < 0)
            return fail(c, errno, "cannot set an attribute on");
    }
    return 0;
}

static int set_meta(struct copy *c, int dirfd, const char *name, const struct stat *st)
{
    if (fchownat(dirfd, name, shift(c, st->st_uid), shift(c, st->st_gid), AT_SYMLINK_NOFOLLOW) < 0)
        return fail(c, errno, "cannot set the owner of");
    if (!S_ISLNK(st->st_mode) && fchmodat(dirfd, name, st->st_mode & 07777, 0) < 0)
        return fail(c, errno, "cannot set the mode of");
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
        return fail(c, errno, "cannot set the times of");
    return 0;
}

static int copy_data(struct copy *c, int sfd, int dfd, off_t size)
{
    if (c->max_bytes && c->st.bytes + (uint64_t)size > c->max_bytes)
        return gbx_err_set(c->err, EFBIG, GBX_ERR_LIMIT,
                           "snapshot layer: more than %llu bytes of changed files",
                           (unsigned long long)c->max_bytes);
    off_t left = size;
    while (left > 0) {
        ssize_t n = sendfile(dfd, sfd, NULL, left > (1 << 30) ? (1 << 30) : (size_t)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fail(c, errno, "cannot copy");
        if (n == 0)
            break; /* the file shrank: the sandbox was not frozen; keep what was read */
        left -= n;
    }
    c->st.bytes += (uint64_t)(size - left);
    return 0;
}

static int remember_link(struct copy *c, const struct stat *st)
{
    if (c->nlinks == c->links_cap) {
        c->links_cap = c->links_cap ? 2 * c->links_cap : 16;
        c->links = gbx_xrealloc(c->links, c->links_cap * sizeof(*c->links));
    }
    c->links[c->nlinks++] = (struct link_seen){st->st_dev, st->st_ino, gbx_xstrdup(c->path)};
    return 0;
}

static const char *link_of(const struct copy *c, const struct stat *st)
{
    for (size_t i = 0; i < c->nlinks; i++)
        if (c->links[i].dev == st->st_dev && c->links[i].ino == st->st_ino)
            return c->links[i].path;
    return NULL;
}

static int copy_dir(struct copy *c, int sdir, int ddir, int depth);

static int copy_entry(struct copy *c, int sdir, int ddir, const char *name, int depth)
{
    struct stat st;
    if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : fail(c, errno, "cannot stat");
    c->st.files++;
    if (S_ISDIR(st.st_mode)) {
        if (depth >= MAX_DEPTH)
            return gbx_err_set(c->err, ELOOP, GBX_ERR_LIMIT,
                               "snapshot layer: directories nested deeper than %d at '%s'",
                               MAX_DEPTH, c->path);
        if (mkdirat(ddir, name, 0700) < 0)
            return fail(c, errno, "cannot create directory");
        int s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r = s < 0 || d < 0 ? fail(c, errno, "cannot open directory") : 0;
        if (r == 0)
            r = copy_xattrs(c, s, d);
        if (r == 0)
            r = copy_dir(c, s, d, depth + 1);
        if (s >= 0)
            close(s);
        if (d >= 0)
            close(d);
        return r < 0 ? r : set_meta(c, ddir, name, &st);
    }
    if (S_ISREG(st.st_mode)) {
        const char *first = st.st_nlink > 1 ? link_of(c, &st) : NULL;
        if (first) {
            if (linkat(AT_FDCWD, first, ddir, name, 0) < 0)
                return fail(c, errno, "cannot link");
            return 0;
        }
        int s = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (s < 0)
            return fail(c, errno, "cannot open");
        int d = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int r = d < 0 ? fail(c, errno, "cannot create") : copy_data(c, s, d, st.st_size);
        if (r == 0)
            r = copy_xattrs(c, s, d);
        close(s);
        if (d >= 0)
            close(d);
        if (r == 0 && st.st_nlink > 1)
            r = remember_link(c, &st);
        return r < 0 ? r : set_meta(c, ddir, name, &st);
    }
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(sdir, name, target, sizeof(target) - 1);
        if (n < 0)
            return fail(c, errno, "cannot read link");
        target[n] = '\0';
        if (symlinkat(target, ddir, name) < 0)
            return fail(c, errno, "cannot create link");
        return set_meta(c, ddir, name, &st);
    }
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
        /* an overlay whiteout: the file below was deleted */
        if (mknodat(ddir, name, S_IFCHR | 0000, makedev(0, 0)) < 0)
            return fail(c, errno, "cannot create whiteout");
        return set_meta(c, ddir, name, &st);
    }
    if (S_ISFIFO(st.st_mode)) {
        if (mkfifoat(ddir, name, 0600) < 0)
            return fail(c, errno, "cannot create fifo");
        return set_meta(c, ddir, name, &st);
    }
    return 0; /* sockets (and devices, which a sandbox cannot make) have no content to keep */
}

static int copy_dir(struct copy *c, int sdir, int ddir, int depth)
{
    int fd = dup(sdir);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return fail(c, errno, "cannot read directory");
    }
    size_t base = strlen(c->path);
    struct dirent *e;
    int r = 0;
    errno = 0;
    while (r == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (base + 1 + strlen(e->d_name) >= sizeof(c->path)) {
            r = gbx_err_set(c->err, ENAMETOOLONG, GBX_ERR_LIMIT,
                            "snapshot layer: a path longer than %d bytes below '%s'", PATH_MAX,
                            c->path);
            break;
        }
        snprintf(c->path + base, sizeof(c->path) - base, "/%s", e->d_name);
        r = copy_entry(c, sdir, ddir, e->d_name, depth);
        c->path[base] = '\0';
    }
    closedir(d);
    return r;
}

int gbx_layer_copy(int src_dirfd, const char *dst, uint32_t uid_base, uint64_t max_bytes,
                   struct gbx_layer_stats *st, struct gbx_err **err)
{
    struct copy c = {.uid_base = uid_base, .max_bytes = max_bytes, .err = err};
    if (strlen(dst) >= sizeof(c.path))
        return gbx_err_set(err, ENAMETOOLONG, GBX_ERR_INVALID, "snapshot layer path too long");
    snprintf(c.path, sizeof(c.path), "%s", dst);
    struct stat rst;
    int r = 0, d = -1;
    if (fstat(src_dirfd, &rst) < 0)
        return fail(&c, errno, "cannot stat the source of");
    if (mkdir(dst, 0700) < 0)
        return fail(&c, errno, "cannot create");
    int s = openat(src_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s < 0 || d < 0)
        r = fail(&c, errno, "cannot open");
    if (r == 0)
        r = copy_xattrs(&c, s, d);
    if (r == 0)
        r = copy_dir(&c, s, d, 0);
    if (r == 0 && (fchown(d, shift(&c, rst.st_uid), shift(&c, rst.st_gid)) < 0 ||
                   fchmod(d, rst.st_mode & 07777) < 0))
        r = fail(&c, errno, "cannot set the owner of");
    if (s >= 0)
        close(s);
    if (d >= 0)
        close(d);
    for (size_t i = 0; i < c.nlinks; i++)
        free(c.links[i].path);
    free(c.links);
    if (r < 0) {
        (void)!gbx_rm_rf(dst);
        return -1;
    }
    if (st) {
        st->bytes += c.st.bytes;
        st->files += c.st.files;
    }
    return 0;
}

int gbx_layer_sync(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = syncfs(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}
