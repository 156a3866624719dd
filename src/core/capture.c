/* SPDX-License-Identifier: MIT */
/* Capture (capture.h): a sandbox's file or directory read into one blob, hashed and bounded.
 *
 * The files are read on the host through the sandbox's own root: rootfd is its
 * /proc/<init>/root opened as a directory (core/artifacts.c) and the path is resolved beneath
 * it with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so ".." and symlinks (absolute
 * ones too) stay inside the sandbox. The thread reads as the sandbox's root (its host uid as
 * the thread's effective and file-system ids, no supplementary groups, none of the daemon's
 * capabilities but setuid/setgid; per thread), so it can read nothing the sandbox's root could
 * not: not even through the kernel's rule that the owner of a user namespace (the daemon's
 * euid 0 made the sandbox's) holds every capability in it, which let a publish of
 * /proc/1/maps or /proc/1/environ past the ptrace check that refuses them inside. A file is
 * copied into the blob while hashed; a directory is written as a tar (libarchive, pax):
 * entries sorted by name within each directory, symlinks stored as symlinks, special files
 * and other file systems skipped, owners as numeric uids inside the sandbox. */
#include "core/capture.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "base/path.h"
#include "sandbox/fscred.h"

#define CAP_CHUNK (64u << 10)

struct cap {
    const struct gbx_capture_in *in;
    struct gbx_capture_out *out;
    EVP_MD_CTX *md;
    /* the first failure */
    int failed;
    int errnum;
    enum gbx_err_kind ekind;
    char emsg[512];
};

static void cap_fail(struct cap *p, enum gbx_err_kind kind, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cap_fail(struct cap *p, enum gbx_err_kind kind, int errnum, const char *fmt, ...)
{
    if (p->failed)
        return; /* the first failure says it */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->emsg, sizeof(p->emsg), fmt, ap);
    va_end(ap);
    p->failed = 1;
    p->errnum = errnum;
    p->ekind = kind;
}

/* An errno from reading the sandbox's files, said about rel. */
static void cap_fail_errno(struct cap *p, int e, const char *what, const char *rel)
{
    if (e == ENOENT || e == ENOTDIR)
        cap_fail(p, GBX_ERR_NOT_FOUND, e, "%s '%s': no such file or directory in the sandbox", what,
                 rel);
    else if (e == EACCES || e == EPERM)
        cap_fail(p, GBX_ERR_PERMISSION, e,
                 "%s '%s': permission denied (read as the sandbox's root)", what, rel);
    else if (e == ELOOP || e == EXDEV)
        cap_fail(p, GBX_ERR_INVALID, e, "%s '%s': %s", what, rel,
                 e == ELOOP ? "too many levels of symbolic links"
                            : "the path leads through a link that may not be followed");
    else
        cap_fail(p, GBX_ERR_INTERNAL, e, "%s '%s': %s", what, rel, strerror(e));
}

/* Everything written to the blob goes through here: hashed, counted, bounded. */
static int blob_write(struct cap *p, const void *b, size_t n)
{
    if (p->out->size + n > p->in->max_bytes) {
        cap_fail(p, GBX_ERR_LIMIT, EFBIG, "'%s' is larger than the limit of %" PRIu64 " bytes",
                 p->in->path, p->in->max_bytes);
        return -1;
    }
    if (EVP_DigestUpdate(p->md, b, n) != 1) {
        cap_fail(p, GBX_ERR_INTERNAL, 0, "sha256 failed");
        return -1;
    }
    int r = gbx_write_all(p->in->out, b, n);
    if (r < 0) {
        cap_fail(p, r == -ENOSPC ? GBX_ERR_STORAGE : GBX_ERR_INTERNAL, -r,
                 "writing the artifact: %s", strerror(-r));
        return -1;
    }
    p->out->size += n;
    return 0;
}

static int copy_fd(struct cap *p, int fd, uint64_t limit, const char *rel)
{
    char *buf = gbx_xmalloc(CAP_CHUNK);
    uint64_t done = 0;
    int r = 0;
    while (done < limit) {
        size_t want = limit - done < CAP_CHUNK ? (size_t)(limit - done) : CAP_CHUNK;
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cap_fail_errno(p, errno, "reading", rel);
            r = -1;
            break;
        }
        if (n == 0)
            break;
        if (blob_write(p, buf, (size_t)n) < 0) {
            r = -1;
            break;
        }
        done += (uint64_t)n;
    }
    free(buf);
    return r;
}

/* ---- directories as tar ---- */

struct tar_ctx {
    struct cap *p;
    struct archive *a;
    dev_t dev;
    char *buf;
};

static la_ssize_t tar_write_cb(struct archive *a, void *arg, const void *b, size_t n)
{
    (void)a;
    struct cap *p = arg;
    return blob_write(p, b, n) < 0 ? -1 : (la_ssize_t)n;
}

static int64_t map_id(const struct cap *p, uint32_t id)
{
    uint32_t base = p->in->host_uid;
    return id >= base && id - base < GBX_FSCRED_RANGE ? (int64_t)(id - base) : 65534;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dirfd, sorted; NULL with errno on failure. */
static char **list_dir(int dirfd, size_t *count)
{
    int fd = dup(dirfd);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return NULL;
    }
    size_t n = 0, cap = 16;
    char **v = gbx_xcalloc(cap, sizeof(char *));
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap *= 2;
            v = gbx_xrealloc(v, cap * sizeof(char *));
        }
        v[n++] = gbx_xstrdup(e->d_name);
    }
    int e2 = errno;
    closedir(d);
    if (e2) {
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
        errno = e2;
        return NULL;
    }
    qsort(v, n, sizeof(char *), name_cmp);
    *count = n;
    return v;
}

static int tar_header(struct tar_ctx *t, const char *rel, const struct stat *st, const char *link)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, rel);
    archive_entry_set_filetype(e, st->st_mode & S_IFMT);
    archive_entry_set_perm(e, st->st_mode & 07777);
    archive_entry_set_uid(e, map_id(t->p, st->st_uid));
    archive_entry_set_gid(e, map_id(t->p, st->st_gid));
    archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    archive_entry_set_size(e, S_ISREG(st->st_mode) ? st->st_size : 0);
    if (link)
        archive_entry_set_symlink(e, link);
    int r = archive_write_header(t->a, e);
    archive_entry_free(e);
    if (r < ARCHIVE_WARN) {
        cap_fail(t->p, GBX_ERR_INTERNAL, 0, "tar entry '%s': %s", rel,
                 archive_error_string(t->a) ? archive_error_string(t->a) : "failed");
        return -1;
    }
    return 0;
}

static int tar_file(struct tar_ctx *t, int dirfd, const char *name, const char *rel,
                    const struct stat *lst)
{
    struct gbx_fsids used;
    int fd = gbx_fscred_open_as_owner(t->p->in->host_uid, dirfd, name,
                                      O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, lst, &used);
    if (fd < 0) {
        cap_fail_errno(t->p, errno, "reading", rel);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd); /* replaced by something else since the listing: leave it out */
        t->p->out->skipped++;
        return 0;
    }
    if (tar_header(t, rel, &st, NULL) < 0) {
        close(fd);
        return -1;
    }
    uint64_t left = (uint64_t)st.st_size;
    int r = 0;
    while (left > 0) {
        size_t want = left < CAP_CHUNK ? (size_t)left : CAP_CHUNK;
        ssize_t n = read(fd, t->buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cap_fail_errno(t->p, errno, "reading", rel);
            r = -1;
            break;
        }
        if (n == 0)
            break; /* shrank: libarchive pads the entry to its header's size */
        if (archive_write_data(t->a, t->buf, (size_t)n) < 0) {
            cap_fail(t->p, GBX_ERR_INTERNAL, 0, "tar '%s': %s", rel,
                     archive_error_string(t->a) ? archive_error_string(t->a) : "write failed");
            r = -1;
            break;
        }
        left -= (uint64_t)n;
    }
    close(fd);
    if (r == 0 && archive_write_finish_entry(t->a) < ARCHIVE_WARN) {
        cap_fail(t->p, GBX_ERR_INTERNAL, 0, "tar '%s': %s", rel,
                 archive_error_string(t->a) ? archive_error_string(t->a) : "write failed");
        r = -1;
    }
    return r;
}

static int tar_dir(struct tar_ctx *t, int dirfd, const char *prefix, int depth)
{
    if (depth > GBX_CAPTURE_MAX_DEPTH) {
        cap_fail(t->p, GBX_ERR_INVALID, 0, "'%s' nests deeper than %d directories", t->p->in->path,
                 GBX_CAPTURE_MAX_DEPTH);
        return -1;
    }
    size_t n = 0;
    char **names = list_dir(dirfd, &n);
    if (names == NULL) {
        cap_fail_errno(t->p, errno, "listing", *prefix ? prefix : t->p->in->path);
        return -1;
    }
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        char *rel = gbx_asprintf("%s%s", prefix, names[i]);
        struct stat st;
        if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT) { /* gone since the listing: fine */
                cap_fail_errno(t->p, errno, "reading", rel);
                r = -1;
            }
        } else if (S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t len = readlinkat(dirfd, names[i], target, sizeof(target) - 1);
            if (len >= 0) {
                target[len] = '\0';
                r = tar_header(t, rel, &st, target);
            }
        } else if (S_ISREG(st.st_mode)) {
            r = tar_file(t, dirfd, names[i], rel, &st);
        } else if (S_ISDIR(st.st_mode) && st.st_dev == t->dev) {
            struct gbx_fsids cur = gbx_fsids_get(), used;
            int fd = gbx_fscred_open_as_owner(t->p->in->host_uid, dirfd, names[i],
                                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW, &st, &used);
            if (fd < 0) {
                cap_fail_errno(t->p, errno, "reading", rel);
                r = -1;
            } else {
                char *sub = gbx_asprintf("%s/", rel);
                r = tar_header(t, rel, &st, NULL);
                gbx_fsids_set(used);
                if (r == 0)
                    r = tar_dir(t, fd, sub, depth + 1);
                gbx_fsids_set(cur);
                free(sub);
                close(fd);
            }
        } else {
            t->p->out->skipped++; /* devices, fifos, sockets, other file systems */
        }
        free(rel);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return r;
}

static void capture_dir(struct cap *p, int fd, const struct stat *st)
{
    struct tar_ctx t = {.p = p, .dev = st->st_dev, .buf = gbx_xmalloc(CAP_CHUNK)};
    t.a = archive_write_new();
    GBX_BUG_ON(t.a == NULL);
    if (archive_write_set_format_pax_restricted(t.a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(t.a, 1) != ARCHIVE_OK ||
        archive_write_open(t.a, p, NULL, tar_write_cb, NULL) != ARCHIVE_OK) {
        cap_fail(p, GBX_ERR_INTERNAL, 0, "tar: %s",
                 archive_error_string(t.a) ? archive_error_string(t.a) : "cannot start");
    } else if (tar_dir(&t, fd, "", 0) == 0 && archive_write_close(t.a) != ARCHIVE_OK) {
        cap_fail(p, GBX_ERR_INTERNAL, 0, "tar: %s",
                 archive_error_string(t.a) ? archive_error_string(t.a) : "cannot finish");
    }
    archive_write_free(t.a);
    free(t.buf);
    p->out->kind = "dir";
}

/* Read the path from the sandbox into the blob (as the sandbox's root). */
static void capture(struct cap *p)
{
    const struct gbx_capture_in *in = p->in;
    struct gbx_fscred c;
    int r = gbx_fscred_enter(&c, in->host_uid);
    if (r < 0) {
        gbx_fscred_leave(&c);
        cap_fail(p, GBX_ERR_INTERNAL, -r, "cannot take the sandbox's credentials: %s",
                 strerror(-r));
        return;
    }
    /* O_PATH first: opening a device or a fifo itself could block or have effects */
    int pfd = gbx_path_open_in(in->rootfd, in->path, O_PATH, 0);
    struct stat st;
    if (pfd < 0) {
        cap_fail_errno(p, -pfd, "publishing", in->path);
    } else if (fstat(pfd, &st) < 0) {
        cap_fail_errno(p, errno, "publishing", in->path);
    } else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        cap_fail(p, GBX_ERR_INVALID, 0, "'%s' is neither a regular file nor a directory", in->path);
    } else {
        /* reopen what was resolved (not the path again), now for reading and with access
         * checked as the sandbox's root */
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
        struct gbx_fsids used;
        int fd = gbx_fscred_open_as_owner(
            in->host_uid, AT_FDCWD, self,
            O_RDONLY | O_NOCTTY | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0), &st, &used);
        int e = errno;
        gbx_fsids_set(used); /* a directory is walked as whoever could open it */
        if (fd < 0) {
            cap_fail_errno(p, e, "publishing", in->path);
        } else if (S_ISDIR(st.st_mode)) {
            capture_dir(p, fd, &st);
            close(fd);
        } else {
            p->out->kind = "file";
            if ((uint64_t)st.st_size > in->max_bytes)
                cap_fail(p, GBX_ERR_LIMIT, EFBIG,
                         "'%s' is %lld bytes, larger than the limit of %" PRIu64 " bytes", in->path,
                         (long long)st.st_size, in->max_bytes);
            else
                (void)copy_fd(p, fd, in->max_bytes + 1, in->path);
            close(fd);
        }
    }
    if (pfd >= 0)
        close(pfd);
    gbx_fscred_leave(&c);
}

int gbx_capture(const struct gbx_capture_in *in, struct gbx_capture_out *out, struct gbx_err **err)
{
    struct cap p = {.in = in, .out = out};
    memset(out, 0, sizeof(*out));
    p.md = EVP_MD_CTX_new();
    GBX_BUG_ON(p.md == NULL);
    if (EVP_DigestInit_ex(p.md, EVP_sha256(), NULL) != 1) {
        cap_fail(&p, GBX_ERR_INTERNAL, 0, "sha256 unavailable");
    } else {
        capture(&p);
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;
        if (!p.failed && (EVP_DigestFinal_ex(p.md, md, &mdlen) != 1 || mdlen != 32))
            cap_fail(&p, GBX_ERR_INTERNAL, 0, "sha256 failed");
        for (unsigned i = 0; !p.failed && i < 32; i++)
            snprintf(out->sha256 + 2 * i, 3, "%02x", md[i]);
    }
    EVP_MD_CTX_free(p.md);
    if (p.failed)
        return gbx_err_set(err, p.errnum, p.ekind, "%s", p.emsg);
    return 0;
}
