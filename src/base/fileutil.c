/* SPDX-License-Identifier: MIT */
#include "base/fileutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "base/mem.h"

int gbx_read_file(const char *path, size_t max, char **out, size_t *len)
{
    gbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t cap = 4096, n = 0;
    char *buf = gbx_xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                free(buf);
                return -EFBIG;
            }
            cap = cap * 2 > max ? max : cap * 2;
            buf = gbx_xrealloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return 0;
}

int gbx_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t r = write(fd, p, len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

int gbx_write_file(const char *path, const void *data, size_t len)
{
    gbx_autoclose int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return gbx_write_all(fd, data, len);
}

int gbx_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    gbx_autofree char *tmp = gbx_asprintf("%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    int r = gbx_write_all(fd, data, len);
    if (r == 0 && fchmod(fd, mode) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    return r;
}

int gbx_mkdir_p(const char *path, mode_t mode)
{
    gbx_autofree char *p = gbx_xstrdup(path);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(p, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Remove everything in the directory fd (taken over and closed); xdev: leave what is on
 * another filesystem than dev (-EXDEV). The first error, having gone on regardless. */
static int rm_in(int fd, int xdev, dev_t dev);

static int rm_entry(int dir_fd, const char *name, int xdev, dev_t dev)
{
    if (xdev) {
        struct stat st;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return errno == ENOENT ? 0 : -errno;
        if (st.st_dev != dev)
            return -EXDEV;
        if (!S_ISDIR(st.st_mode))
            return unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
    } else {
        if (unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT)
            return 0;
        if (errno != EISDIR && errno != EPERM)
            return -errno;
    }
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = rm_in(fd, xdev, dev);
    if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
        r = -errno;
    return r;
}

static int rm_in(int fd, int xdev, dev_t dev)
{
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int e = errno;
        close(fd);
        return -e;
    }
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        int rr = rm_entry(dirfd(d), de->d_name, xdev, dev);
        if (rr < 0 && r == 0)
            r = rr;
    }
    closedir(d);
    return r;
}

int gbx_rm_rf_at(int dir_fd, const char *name)
{
    return rm_entry(dir_fd, name, 0, 0);
}

int gbx_rm_rf_xdev_at(int dir_fd, const char *name, dev_t dev)
{
    return rm_entry(dir_fd, name, 1, dev);
}

int gbx_rm_children(int dir_fd)
{
    int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    return fd < 0 ? -errno : rm_in(fd, 0, 0);
}

int gbx_rm_rf(const char *path)
{
    return gbx_rm_rf_at(AT_FDCWD, path);
}

int gbx_fsync_dir_of(const char *path)
{
    gbx_autofree char *dir = gbx_xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        strcpy(dir, ".");
    else if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    gbx_autoclose int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return fsync(fd) < 0 ? -errno : 0;
}

int gbx_write_file_durable(const char *path, const void *data, size_t len, mode_t mode)
{
    gbx_autofree char *tmp = gbx_asprintf("%s.tmp", path);
    if (unlink(tmp) < 0 && errno != ENOENT)
        return -errno;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    int r = 0;
    if (fchmod(fd, mode) < 0) /* whatever the umask */
        r = -errno;
    if (r == 0)
        r = gbx_write_all(fd, data, len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    else
        r = gbx_fsync_dir_of(path);
    return r;
}

int gbx_pidfile_lock(const char *path, pid_t *holder)
{
    *holder = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno == EWOULDBLOCK ? EAGAIN : errno;
        char buf[32];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            *holder = (pid_t)strtol(buf, NULL, 10);
        }
        close(fd);
        return -e;
    }
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
        int e = errno ? errno : EIO;
        close(fd);
        return -e;
    }
    return fd;
}

int gbx_path_unsearchable(const char *path, char *out, size_t outsz)
{
    if (path[0] != '/')
        return -EINVAL;
    size_t len = strlen(path);
    if (len >= 4096)
        return -ENAMETOOLONG;
    char buf[4096];
    memcpy(buf, path, len + 1);
    /* from the root down: the first one that stops a walk is the one to name */
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        struct stat st;
        if (stat(buf, &st) < 0) {
            int e = errno;
            buf[i] = c;
            if (e == ENOENT)
                return 0; /* not there yet: it will be made 0711 */
            return -e;
        }
        if (S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH)) {
            snprintf(out, outsz, "%s", buf);
            return 1;
        }
        buf[i] = c;
    }
    return 0;
}

int gbx_send_fds(int sock, const struct sockaddr *addr, socklen_t addrlen, const struct iovec *iov,
                 size_t niov, const int *fds, size_t nfd)
{
    if (nfd > GBX_SEND_FDS_MAX)
        return -EINVAL;
    union {
        char buf[CMSG_SPACE(GBX_SEND_FDS_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr msg = {.msg_name = (void *)(uintptr_t)addr,
                         .msg_namelen = addr ? addrlen : 0,
                         .msg_iov = (struct iovec *)(uintptr_t)iov,
                         .msg_iovlen = niov};
    if (nfd > 0) {
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfd * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfd * sizeof(int));
    }
    return GBX_RETRY(sendmsg(sock, &msg, MSG_NOSIGNAL)) < 0 ? -errno : 0;
}
