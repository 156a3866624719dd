/* SPDX-License-Identifier: MIT */
/* The artifact routes:
 *
 *   POST   /v1/sandboxes/{id}/artifacts   {path, name?, session?, metadata?, max_bytes?} -> 201
 *   GET    /v1/artifacts                  ?session=&sandbox=&name=&after=&limit=
 *   GET    /v1/artifacts/{id}
 *   GET    /v1/artifacts/{id}/content     the blob (Range, ETag = sha256)
 *   DELETE /v1/artifacts/{id}             -> 204
 *
 * Publishing reads the sandbox's files on the host, on a worker thread (api/offload.h),
 * through the sandbox's own root: /proc/<init>/root opened as a directory and the path
 * resolved beneath it with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so ".." and
 * symlinks (absolute ones too) stay inside the sandbox. The worker reads as the sandbox's root
 * (its host uid as the thread's effective and file-system ids, no supplementary groups, none of
 * the daemon's capabilities but setuid/setgid; per thread), so it can read nothing the
 * sandbox's root could not: not even through the kernel's rule that the owner of a user
 * namespace (the daemon's euid 0 made the sandbox's) holds every capability in it, which let a
 * publish of /proc/1/maps or /proc/1/environ past the ptrace check that refuses them inside. A file
 * is copied into a temporary blob while hashed; a directory is written as a tar (libarchive, pax):
 * entries sorted by name within each directory, symlinks stored as symlinks, special files and
 * other file systems skipped, owners as numeric uids inside the sandbox. The blob is fsync'd
 * and renamed to <state>/artifacts/<sha256>; the row is written back on the loop.
 *
 * A blob is removed when its last row goes: on the loop, renamed aside under the lock that
 * publishes take to place blobs (a publish between placing a blob and writing its row keeps
 * it), then unlinked on a worker. */
#include "api/artifacts_api.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/http.h"
#include "http/recorded.h"
#include "core/offload.h"
#include "core/sandboxes.h"
#include "base/fault.h"
#include "base/clock.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/path.h"
#include "base/query.h"
#include "sandbox/backend.h"
#include "sandbox/fscred.h"
#include "store/artifacts.h"
#include "store/store.h"

#define ART_OUT_CAP (1u << 20) /* client bytes queued before a download waits */
#define ART_CHUNK (64u << 10)
#define ART_MAX_DEPTH 128
#define ART_LIST_DEFAULT 100
#define ART_LIST_MAX 1000
#define ART_NAME_MAX 256

/* ---- blobs: placement and removal ------------------------------------------------------------ */

/* Blobs placed by a publish whose row is not written yet: never removed meanwhile. */
static pthread_mutex_t blob_mu = PTHREAD_MUTEX_INITIALIZER;
static struct inflight {
    struct inflight *next;
    char sha[65];
} * inflight;

static int inflight_has(const char *sha)
{
    for (struct inflight *f = inflight; f; f = f->next)
        if (strcmp(f->sha, sha) == 0)
            return 1;
    return 0;
}

static void inflight_drop(const char *sha)
{
    pthread_mutex_lock(&blob_mu);
    for (struct inflight **p = &inflight; *p; p = &(*p)->next)
        if (strcmp((*p)->sha, sha) == 0) {
            struct inflight *f = *p;
            *p = f->next;
            free(f);
            break;
        }
    pthread_mutex_unlock(&blob_mu);
}

static char *art_dir(struct gbx_server *s)
{
    return gbx_asprintf("%s/artifacts", gbx_server_runtime(s)->state_dir);
}

static void random_hex(char *out, size_t bytes)
{
    unsigned char r[32];
    GBX_BUG_ON(bytes > sizeof(r));
    if (getrandom(r, bytes, 0) != (ssize_t)bytes)
        GBX_BUG_ON(1);
    for (size_t i = 0; i < bytes; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
}

static void unlink_work(void *arg)
{
    if (unlink(arg) < 0 && errno != ENOENT)
        gbx_log_warn("artifacts: cannot remove '%s': %s", (char *)arg, strerror(errno));
}

static void unlink_done(void *arg)
{
    free(arg);
}

void gbx_artifacts_blob_release(struct gbx_server *s, const char *sha)
{
    if (strlen(sha) != 64 || strspn(sha, "0123456789abcdef") != 64)
        return;
    if (gbx_store_artifacts_refs(gbx_server_store(s), sha) != 0)
        return; /* named by a row (or unknown: keep it) */
    char *dir = art_dir(s), rnd[17];
    random_hex(rnd, 8);
    char *blob = gbx_asprintf("%s/%s", dir, sha);
    char *aside = gbx_asprintf("%s/tmp/gc-%s", dir, rnd);
    int moved = 0;
    pthread_mutex_lock(&blob_mu);
    if (!inflight_has(sha))
        moved = rename(blob, aside) == 0;
    pthread_mutex_unlock(&blob_mu);
    if (moved && gbx_offload_submit(gbx_server_offload(s), unlink_work, unlink_done, aside) == 0)
        aside = NULL;
    else if (moved)
        unlink_work(aside);
    free(aside);
    free(blob);
    free(dir);
}

int gbx_artifacts_delete(struct gbx_server *s, const char *id, struct gbx_err **err)
{
    char sha[65];
    bool referenced = true;
    int r = gbx_store_artifacts_delete(gbx_server_store(s), id, sha, &referenced, err);
    if (r == 1 && !referenced)
        gbx_artifacts_blob_release(s, sha);
    return r;
}

/* ---- the sweep: what a daemon stopped mid-publish left behind -------------------------------- */

struct sweep {
    struct gbx_server *s;
    char *dir;
    int64_t cutoff_ns; /* temporary files last written before this are leftovers */
    char **shas;
    size_t n, cap;
};

static void sweep_work(void *arg)
{
    struct sweep *w = arg;
    char *tmpdir = gbx_asprintf("%s/tmp", w->dir);
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if ((int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec < w->cutoff_ns &&
            unlinkat(dirfd(d), e->d_name, 0) < 0)
            gbx_log_warn("artifacts: cannot remove '%s/%s': %s", tmpdir, e->d_name,
                         strerror(errno));
    }
    if (d)
        closedir(d);
    free(tmpdir);
    d = opendir(w->dir);
    while (d && (e = readdir(d)) != NULL) {
        if (strlen(e->d_name) != 64 || strspn(e->d_name, "0123456789abcdef") != 64)
            continue;
        if (w->n == w->cap) {
            w->cap = w->cap ? 2 * w->cap : 64;
            w->shas = gbx_xrealloc(w->shas, w->cap * sizeof(char *));
        }
        w->shas[w->n++] = gbx_xstrdup(e->d_name);
    }
    if (d)
        closedir(d);
}

static void sweep_done(void *arg)
{
    struct sweep *w = arg;
    for (size_t i = 0; i < w->n; i++) {
        gbx_artifacts_blob_release(w->s, w->shas[i]); /* only if no row names it */
        free(w->shas[i]);
    }
    free(w->shas);
    free(w->dir);
    free(w);
}

void gbx_artifacts_sweep(struct gbx_server *s, int64_t tmp_age_ns)
{
    struct sweep *w = gbx_xcalloc(1, sizeof(*w));
    w->s = s;
    w->dir = art_dir(s);
    w->cutoff_ns = gbx_realtime_ns() - tmp_age_ns;
    if (gbx_offload_submit(gbx_server_offload(s), sweep_work, sweep_done, w) < 0) {
        free(w->dir);
        free(w);
    }
}

/* The first artifact request of this daemon sweeps: every temporary file then is a leftover
 * (1 s of slack for the file system's coarse clock). */
static void sweep_once(struct gbx_server *s)
{
    static int swept;
    if (!swept) {
        swept = 1;
        gbx_artifacts_sweep(s, 1000000000);
    }
}

/* ---- publishing (worker thread) -------------------------------------------------------------- */

struct pub {
    struct gbx_server *s;
    struct evhttp_request *req; /* NULL once the client left */
    char *path, *name, *session, *sandbox, *owner, *actor, *metadata, *dir;
    int rootfd;
    uint32_t host_uid;
    uint64_t max_bytes;
    /* results */
    int status; /* 0: ok; else the HTTP status of emsg */
    enum gbx_err_kind ekind;
    char emsg[512];
    char sha[65];
    uint64_t size;
    const char *kind;
    /* while writing */
    int out;
    EVP_MD_CTX *md;
    int over;
    int werr;
    int64_t skipped;
    int inflight; /* p->sha is on the in-flight list */
};

static void pub_fail(struct pub *p, int status, enum gbx_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void pub_fail(struct pub *p, int status, enum gbx_err_kind kind, const char *fmt, ...)
{
    if (p->status)
        return; /* the first failure says it */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->emsg, sizeof(p->emsg), fmt, ap);
    va_end(ap);
    p->status = status;
    p->ekind = kind;
}

/* An errno from reading the sandbox's files, said about rel. */
static void pub_fail_errno(struct pub *p, int e, const char *what, const char *rel)
{
    if (e == ENOENT || e == ENOTDIR)
        pub_fail(p, 404, GBX_ERR_NOT_FOUND, "%s '%s': no such file or directory in the sandbox",
                 what, rel);
    else if (e == EACCES || e == EPERM)
        pub_fail(p, 403, GBX_ERR_PERMISSION,
                 "%s '%s': permission denied (read as the sandbox's root)", what, rel);
    else if (e == ELOOP || e == EXDEV)
        pub_fail(p, 400, GBX_ERR_INVALID, "%s '%s': %s", what, rel,
                 e == ELOOP ? "too many levels of symbolic links"
                            : "the path leads through a link that may not be followed");
    else
        pub_fail(p, 500, GBX_ERR_INTERNAL, "%s '%s': %s", what, rel, strerror(e));
}

/* Everything written to the blob goes through here: hashed, counted, bounded. */
static int blob_write(struct pub *p, const void *b, size_t n)
{
    if (p->size + n > p->max_bytes) {
        p->over = 1;
        pub_fail(p, 413, GBX_ERR_LIMIT, "'%s' is larger than the limit of %" PRIu64 " bytes",
                 p->path, p->max_bytes);
        return -1;
    }
    if (EVP_DigestUpdate(p->md, b, n) != 1) {
        pub_fail(p, 500, GBX_ERR_INTERNAL, "sha256 failed");
        return -1;
    }
    int r = gbx_write_all(p->out, b, n);
    if (r < 0) {
        p->werr = -r;
        pub_fail(p, r == -ENOSPC ? 507 : 500, r == -ENOSPC ? GBX_ERR_STORAGE : GBX_ERR_INTERNAL,
                 "writing the artifact: %s", strerror(-r));
        return -1;
    }
    p->size += n;
    return 0;
}

static int copy_fd(struct pub *p, int fd, uint64_t limit, const char *rel)
{
    char *buf = gbx_xmalloc(ART_CHUNK);
    uint64_t done = 0;
    int r = 0;
    while (done < limit) {
        size_t want = limit - done < ART_CHUNK ? (size_t)(limit - done) : ART_CHUNK;
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            pub_fail_errno(p, errno, "reading", rel);
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
    struct pub *p;
    struct archive *a;
    dev_t dev;
    char *buf;
};

static la_ssize_t tar_write_cb(struct archive *a, void *arg, const void *b, size_t n)
{
    (void)a;
    struct pub *p = arg;
    return blob_write(p, b, n) < 0 ? -1 : (la_ssize_t)n;
}

static int64_t map_id(const struct pub *p, uint32_t id)
{
    return id >= p->host_uid && id - p->host_uid < 65536 ? (int64_t)(id - p->host_uid) : 65534;
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
        pub_fail(t->p, 500, GBX_ERR_INTERNAL, "tar entry '%s': %s", rel,
                 archive_error_string(t->a) ? archive_error_string(t->a) : "failed");
        return -1;
    }
    return 0;
}

static int tar_file(struct tar_ctx *t, int dirfd, const char *name, const char *rel,
                    const struct stat *lst)
{
    struct gbx_fsids used;
    int fd = gbx_fscred_open_as_owner(t->p->host_uid, dirfd, name,
                                      O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, lst, &used);
    if (fd < 0) {
        pub_fail_errno(t->p, errno, "reading", rel);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd); /* replaced by something else since the listing: leave it out */
        t->p->skipped++;
        return 0;
    }
    if (tar_header(t, rel, &st, NULL) < 0) {
        close(fd);
        return -1;
    }
    uint64_t left = (uint64_t)st.st_size;
    int r = 0;
    while (left > 0) {
        size_t want = left < ART_CHUNK ? (size_t)left : ART_CHUNK;
        ssize_t n = read(fd, t->buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            pub_fail_errno(t->p, errno, "reading", rel);
            r = -1;
            break;
        }
        if (n == 0)
            break; /* shrank: libarchive pads the entry to its header's size */
        if (archive_write_data(t->a, t->buf, (size_t)n) < 0) {
            pub_fail(t->p, 500, GBX_ERR_INTERNAL, "tar '%s': %s", rel,
                     archive_error_string(t->a) ? archive_error_string(t->a) : "write failed");
            r = -1;
            break;
        }
        left -= (uint64_t)n;
    }
    close(fd);
    if (r == 0 && archive_write_finish_entry(t->a) < ARCHIVE_WARN) {
        pub_fail(t->p, 500, GBX_ERR_INTERNAL, "tar '%s': %s", rel,
                 archive_error_string(t->a) ? archive_error_string(t->a) : "write failed");
        r = -1;
    }
    return r;
}

static int tar_dir(struct tar_ctx *t, int dirfd, const char *prefix, int depth)
{
    if (depth > ART_MAX_DEPTH) {
        pub_fail(t->p, 400, GBX_ERR_INVALID, "'%s' nests deeper than %d directories", t->p->path,
                 ART_MAX_DEPTH);
        return -1;
    }
    size_t n = 0;
    char **names = list_dir(dirfd, &n);
    if (names == NULL) {
        pub_fail_errno(t->p, errno, "listing", *prefix ? prefix : t->p->path);
        return -1;
    }
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        char *rel = gbx_asprintf("%s%s", prefix, names[i]);
        struct stat st;
        if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT) { /* gone since the listing: fine */
                pub_fail_errno(t->p, errno, "reading", rel);
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
            int fd = gbx_fscred_open_as_owner(t->p->host_uid, dirfd, names[i],
                                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW, &st, &used);
            if (fd < 0) {
                pub_fail_errno(t->p, errno, "reading", rel);
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
            t->p->skipped++; /* devices, fifos, sockets, other file systems */
        }
        free(rel);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return r;
}

static void capture_dir(struct pub *p, int fd, const struct stat *st)
{
    struct tar_ctx t = {.p = p, .dev = st->st_dev, .buf = gbx_xmalloc(ART_CHUNK)};
    t.a = archive_write_new();
    GBX_BUG_ON(t.a == NULL);
    if (archive_write_set_format_pax_restricted(t.a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(t.a, 1) != ARCHIVE_OK ||
        archive_write_open(t.a, p, NULL, tar_write_cb, NULL) != ARCHIVE_OK) {
        pub_fail(p, 500, GBX_ERR_INTERNAL, "tar: %s",
                 archive_error_string(t.a) ? archive_error_string(t.a) : "cannot start");
    } else if (tar_dir(&t, fd, "", 0) == 0 && archive_write_close(t.a) != ARCHIVE_OK) {
        pub_fail(p, 500, GBX_ERR_INTERNAL, "tar: %s",
                 archive_error_string(t.a) ? archive_error_string(t.a) : "cannot finish");
    }
    archive_write_free(t.a);
    free(t.buf);
    p->kind = "dir";
}

/* Read p->path from the sandbox into p->out (as the sandbox's root). */
static void capture(struct pub *p)
{
    struct gbx_fscred c;
    int r = gbx_fscred_enter(&c, p->host_uid);
    if (r < 0) {
        gbx_fscred_leave(&c);
        pub_fail(p, 500, GBX_ERR_INTERNAL, "cannot take the sandbox's credentials: %s",
                 strerror(-r));
        return;
    }
    /* O_PATH first: opening a device or a fifo itself could block or have effects */
    int pfd = gbx_path_open_in(p->rootfd, p->path, O_PATH, 0);
    struct stat st;
    if (pfd < 0) {
        pub_fail_errno(p, -pfd, "publishing", p->path);
    } else if (fstat(pfd, &st) < 0) {
        pub_fail_errno(p, errno, "publishing", p->path);
    } else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        pub_fail(p, 400, GBX_ERR_INVALID, "'%s' is neither a regular file nor a directory",
                 p->path);
    } else {
        /* reopen what was resolved (not the path again), now for reading and with access
         * checked as the sandbox's root */
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
        struct gbx_fsids used;
        int fd = gbx_fscred_open_as_owner(
            p->host_uid, AT_FDCWD, self,
            O_RDONLY | O_NOCTTY | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0), &st, &used);
        int e = errno;
        gbx_fsids_set(used); /* a directory is walked as whoever could open it */
        if (fd < 0) {
            pub_fail_errno(p, e, "publishing", p->path);
        } else if (S_ISDIR(st.st_mode)) {
            capture_dir(p, fd, &st);
            close(fd);
        } else {
            p->kind = "file";
            if ((uint64_t)st.st_size > p->max_bytes)
                pub_fail(p, 413, GBX_ERR_LIMIT,
                         "'%s' is %lld bytes, larger than the limit of %" PRIu64 " bytes", p->path,
                         (long long)st.st_size, p->max_bytes);
            else
                (void)copy_fd(p, fd, p->max_bytes + 1, p->path);
            close(fd);
        }
    }
    if (pfd >= 0)
        close(pfd);
    gbx_fscred_leave(&c);
}

static void publish_work(void *arg)
{
    struct pub *p = arg;
    char rnd[33];
    random_hex(rnd, 16);
    char *tmpdir = gbx_asprintf("%s/tmp", p->dir);
    char *tmp = gbx_asprintf("%s/%s", tmpdir, rnd);
    int r = gbx_mkdir_p(tmpdir, 0700);
    if (r < 0) {
        pub_fail(p, 500, GBX_ERR_INTERNAL, "cannot create '%s': %s", tmpdir, strerror(-r));
        goto out;
    }
    p->out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (p->out < 0) {
        pub_fail(p, 500, GBX_ERR_INTERNAL, "cannot create '%s': %s", tmp, strerror(errno));
        goto out;
    }
    p->md = EVP_MD_CTX_new();
    GBX_BUG_ON(p->md == NULL);
    if (EVP_DigestInit_ex(p->md, EVP_sha256(), NULL) != 1) {
        pub_fail(p, 500, GBX_ERR_INTERNAL, "sha256 unavailable");
        goto out;
    }
    capture(p);
    if (p->status)
        goto out;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (EVP_DigestFinal_ex(p->md, md, &mdlen) != 1 || mdlen != 32) {
        pub_fail(p, 500, GBX_ERR_INTERNAL, "sha256 failed");
        goto out;
    }
    for (unsigned i = 0; i < 32; i++)
        snprintf(p->sha + 2 * i, 3, "%02x", md[i]);
    if (fsync(p->out) < 0) {
        pub_fail(p, 500, GBX_ERR_INTERNAL, "fsync '%s': %s", tmp, strerror(errno));
        goto out;
    }
    close(p->out);
    p->out = -1;
    gbx_fault_point("artifact.copied");
    char *blob = gbx_asprintf("%s/%s", p->dir, p->sha);
    struct inflight *f = gbx_xcalloc(1, sizeof(*f));
    memcpy(f->sha, p->sha, sizeof(f->sha));
    pthread_mutex_lock(&blob_mu);
    f->next = inflight; /* kept until the row is written (publish_done) */
    inflight = f;
    p->inflight = 1;
    struct stat st;
    int placed = 0;
    if (stat(blob, &st) == 0) /* the same content is stored already */
        r = unlink(tmp) < 0 ? -errno : 0;
    else
        r = rename(tmp, blob) < 0 ? -errno : (placed = 1, 0);
    pthread_mutex_unlock(&blob_mu);
    if (r == 0 && placed)
        r = gbx_fsync_dir_of(blob);
    if (r < 0)
        pub_fail(p, 500, GBX_ERR_INTERNAL, "cannot store '%s': %s", blob, strerror(-r));
    free(blob);
out:
    if (p->out >= 0) {
        close(p->out);
        p->out = -1;
    }
    if (p->status)
        (void)unlink(tmp);
    EVP_MD_CTX_free(p->md);
    p->md = NULL;
    free(tmp);
    free(tmpdir);
}

/* ---- JSON -------------------------------------------------------------------------------- */

static json_t *artifact_json(const struct gbx_store_artifact *a)
{
    char *at = gbx_rfc3339(a->created_ns);
    json_t *meta = a->metadata ? json_loads(a->metadata, 0, NULL) : NULL;
    json_t *j = json_pack(
        "{s:s,s:s,s:s,s:s,s:I,s:s,s:o,s:o,s:s,s:o}", "id", a->id, "sha256", a->sha256, "name",
        a->name, "kind", a->kind, "size", (json_int_t)a->size_bytes, "content_type",
        strcmp(a->kind, "dir") == 0 ? "application/x-tar" : "application/octet-stream", "session",
        a->session ? json_string(a->session) : json_null(), "sandbox",
        a->sandbox ? json_string(a->sandbox) : json_null(), "created_at", at ? at : "", "metadata",
        meta ? meta : json_object());
    free(at);
    return j;
}

/* ---- the publish route (loop) ------------------------------------------------------------ */

static void pub_free(struct pub *p)
{
    if (p->rootfd >= 0)
        close(p->rootfd);
    free(p->path);
    free(p->name);
    free(p->session);
    free(p->sandbox);
    free(p->owner);
    free(p->actor);
    free(p->metadata);
    free(p->dir);
    free(p);
}

static void pub_client_gone(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    struct pub *p = arg;
    p->req = NULL;
}

static void pub_reply_start(struct pub *p)
{
    if (p->req && evhttp_request_get_connection(p->req))
        evhttp_connection_set_closecb(evhttp_request_get_connection(p->req), NULL, NULL);
}

static void publish_done(void *arg)
{
    struct pub *p = arg;
    pub_reply_start(p);
    if (p->status) {
        if (p->inflight) { /* placed, then failed (fsync of its directory) */
            inflight_drop(p->sha);
            gbx_artifacts_blob_release(p->s, p->sha);
        }
        if (p->req)
            gbx_http_reply_error_status(p->req, p->status, p->ekind, "%s", p->emsg);
        pub_free(p);
        return;
    }
    /* the quota, now that the size is known (the admission counted only one more) */
    struct gbx_actor owner;
    gbx_actor_for(&owner, p->owner);
    struct gbx_err *qerr = NULL;
    if (gbx_sandboxes_quota_admit(
            p->s, &owner,
            &(struct gbx_quota_use){.artifacts = 1, .artifact_bytes = p->size ? p->size : 1},
            &qerr) < 0) {
        inflight_drop(p->sha);
        gbx_artifacts_blob_release(p->s, p->sha);
        if (p->req)
            gbx_http_reply_err(p->req, qerr);
        gbx_err_free(qerr);
        pub_free(p);
        return;
    }
    char id[21] = "art-";
    random_hex(id + 4, 8);
    struct gbx_store_artifact a = {
        .id = id,
        .sha256 = p->sha,
        .name = p->name,
        .kind = p->kind,
        .size_bytes = (int64_t)p->size,
        .owner = p->owner,
        .session = p->session,
        .sandbox = p->sandbox,
        .metadata = p->metadata,
        .created_ns = gbx_realtime_ns(),
    };
    struct gbx_err *err = NULL;
    int r = gbx_store_artifacts_insert(gbx_server_store(p->s), &a, &err);
    inflight_drop(p->sha);
    if (r < 0) {
        gbx_artifacts_blob_release(p->s, p->sha);
        if (p->req)
            gbx_http_reply_err(p->req, err);
        gbx_err_free(err);
        pub_free(p);
        return;
    }
    json_t *detail = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:I}", "id", id, "sha256", p->sha, "name",
                               p->name, "kind", p->kind, "size", (json_int_t)p->size, "path",
                               p->path, "skipped", (json_int_t)p->skipped);
    if (p->req) { /* answered once the record is durable (api/audit.c) */
        pub_reply_start(p);
        gbx_http_reply_recorded(p->s, p->actor, "artifact.publish", p->sandbox, detail, p->req, 201,
                               artifact_json(&a));
        p->req = NULL;
    } else {
        gbx_server_audit_as(p->s, p->actor, "artifact.publish", p->sandbox, detail);
    }
    pub_free(p);
}

static void not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed (use %s)", allow);
}

/* The session named by a request, checked: 0 ok, -1 replied. */
static int check_session(struct gbx_server *s, const struct gbx_actor *who,
                         struct evhttp_request *req, const char *id)
{
    char owner[256];
    int r = strlen(id) < 128
                ? gbx_store_artifacts_session_owner(gbx_server_store(s), id, owner, sizeof(owner))
                : 0;
    if (r < 0) {
        gbx_http_reply_error(req, GBX_ERR_INTERNAL, "cannot read session '%s'", id);
        return -1;
    }
    if (r == 0 || !gbx_actor_sees(who, owner)) {
        gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "session '%s' not found", id);
        return -1;
    }
    return 0;
}

void gbx_api_sandbox_artifacts(struct gbx_server *s, const struct gbx_actor *who,
                               struct evhttp_request *req, const char *id)
{
    sweep_once(s);
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
        return not_allowed(req, "POST");
    struct gbx_live *l = gbx_sandbox_id_valid(id) == 0 ? gbx_sandboxes_find(s, who, id) : NULL;
    if (l == NULL)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    const char *path = json_string_value(json_object_get(body, "path"));
    json_t *jname = json_object_get(body, "name"), *jses = json_object_get(body, "session");
    json_t *jmeta = json_object_get(body, "metadata"), *jmax = json_object_get(body, "max_bytes");
    uint64_t limit = gbx_server_max_upload(s), max_bytes = limit;
    static const char *const fields[] = {"path", "name", "session", "metadata", "max_bytes", NULL};
    if (gbx_http_only_fields(req, body, fields, "path, name, session, metadata, max_bytes") < 0)
        goto out;
    if (path == NULL || path[0] != '/' || strlen(path) >= 4096 ||
        strlen(path) != json_string_length(json_object_get(body, "path"))) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "'path' must be an absolute path in the sandbox (a string)");
        goto out;
    }
    if (jname && (!json_is_string(jname) || json_string_length(jname) == 0 ||
                  json_string_length(jname) > ART_NAME_MAX ||
                  strlen(json_string_value(jname)) != json_string_length(jname))) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'name' must be a string of 1 to %d bytes",
                             ART_NAME_MAX);
        goto out;
    }
    if (jses && !json_is_null(jses) && !json_is_string(jses)) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'session' must be a session id");
        goto out;
    }
    if (jmeta && !json_is_null(jmeta) && !json_is_object(jmeta)) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'metadata' must be an object");
        goto out;
    }
    if (jmax) {
        if (!json_is_integer(jmax) || json_integer_value(jmax) < 1 ||
            (uint64_t)json_integer_value(jmax) > limit) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'max_bytes' must be from 1 to %" PRIu64 " (gloveboxd "
                                 "--max-upload)",
                                 limit);
            goto out;
        }
        max_bytes = (uint64_t)json_integer_value(jmax);
    }
    const char *session = json_string_value(jses);
    if (session && check_session(s, who, req, session) < 0)
        goto out;
    {
        gbx_autoerr struct gbx_err *qerr = NULL;
        if (gbx_sandboxes_quota_admit(s, who, &(struct gbx_quota_use){.artifacts = 1}, &qerr) < 0) {
            gbx_http_reply_err(req, qerr);
            goto out;
        }
    }
    char proot[64];
    snprintf(proot, sizeof(proot), "/proc/%d/root", (int)l->sb->init_pid);
    int rootfd = open(proot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        gbx_http_reply_error(req, GBX_ERR_UNAVAILABLE, "sandbox '%s' is not running (%s)", id,
                             strerror(errno));
        goto out;
    }
    struct pub *p = gbx_xcalloc(1, sizeof(*p));
    p->s = s;
    p->req = req;
    p->rootfd = rootfd;
    p->out = -1;
    p->host_uid = l->sb->host_uid;
    p->max_bytes = max_bytes;
    p->path = gbx_xstrdup(path);
    const char *base = strrchr(path, '/') + 1;
    p->name = gbx_xstrdup(jname ? json_string_value(jname) : *base ? base : path);
    p->session = session ? gbx_xstrdup(session) : NULL;
    p->sandbox = gbx_xstrdup(l->sb->id);
    p->owner = gbx_xstrdup(who->owner);
    p->actor = gbx_xstrdup(who->name);
    p->metadata = json_is_object(jmeta) ? json_dumps(jmeta, JSON_COMPACT | JSON_SORT_KEYS)
                                        : gbx_xstrdup("{}");
    p->dir = art_dir(s);
    int r = gbx_offload_submit(gbx_server_offload(s), publish_work, publish_done, p);
    if (r < 0) {
        gbx_http_reply_error(req, GBX_ERR_UNAVAILABLE, "cannot queue the publish: %s",
                             strerror(-r));
        pub_free(p);
        goto out;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), pub_client_gone, p);
out:
    json_decref(body);
}

/* ---- list, get, delete ------------------------------------------------------------------- */

struct list_ctx {
    json_t *arr;
    char last[32];
    int n;
};

static int list_one(void *arg, const struct gbx_store_artifact *a)
{
    struct list_ctx *c = arg;
    json_array_append_new(c->arr, artifact_json(a));
    snprintf(c->last, sizeof(c->last), "%s", a->id);
    c->n++;
    return 0;
}

struct row_copy {
    char id[32], sha[65], kind[8], owner[256];
    int64_t size, created_ns;
    json_t *json;
};

static int copy_row(void *arg, const struct gbx_store_artifact *a)
{
    struct row_copy *r = arg;
    snprintf(r->id, sizeof(r->id), "%s", a->id);
    snprintf(r->sha, sizeof(r->sha), "%s", a->sha256);
    snprintf(r->kind, sizeof(r->kind), "%s", a->kind);
    snprintf(r->owner, sizeof(r->owner), "%s", a->owner);
    r->size = a->size_bytes;
    r->created_ns = a->created_ns;
    r->json = artifact_json(a);
    return 1;
}

/* The row of id if the actor may see it: 1, or 0 after replying 404 (or 500). */
static int find_row(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                    const char *id, struct row_copy *row)
{
    memset(row, 0, sizeof(*row));
    struct gbx_err *err = NULL;
    int r =
        strlen(id) < 32 ? gbx_store_artifacts_get(gbx_server_store(s), id, copy_row, row, &err) : 0;
    if (r < 0) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return 0;
    }
    if (r == 0 || !gbx_actor_sees(who, row->owner)) {
        json_decref(row->json);
        row->json = NULL;
        gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "artifact '%s' not found", id);
        return 0;
    }
    return 1;
}

static void handle_list(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct gbx_store_artifact_filter f = {.limit = ART_LIST_DEFAULT};
    if (!who->admin)
        f.owner = who->owner;
    uint64_t limit = ART_LIST_DEFAULT;
    const struct gbx_query_param params[] = {
        {.name = "session", .kind = GBX_QUERY_STR, .out = &f.session},
        {.name = "sandbox", .kind = GBX_QUERY_STR, .out = &f.sandbox},
        {.name = "name", .kind = GBX_QUERY_STR, .out = &f.name},
        {.name = "after", .kind = GBX_QUERY_STR, .out = &f.after_id},
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = ART_LIST_MAX},
    };
    struct gbx_query q = {0};
    gbx_autoerr struct gbx_err *qerr = NULL;
    if (gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), 0, &qerr) < 0) {
        gbx_http_reply_err(req, qerr);
        goto out;
    }
    if (f.after_id) {
        struct row_copy row = {0};
        struct gbx_err *err = NULL;
        int r = strlen(f.after_id) < 32
                    ? gbx_store_artifacts_get(gbx_server_store(s), f.after_id, copy_row, &row, &err)
                    : 0;
        json_decref(row.json);
        gbx_err_free(err);
        if (r != 1 || !gbx_actor_sees(who, row.owner)) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'after' must be an artifact id (use next_after)");
            goto out;
        }
        f.after_ns = row.created_ns;
    }
    f.limit = (int)limit + 1; /* one more says whether there is a next page */
    struct list_ctx c = {.arr = json_array()};
    struct gbx_err *err = NULL;
    if (gbx_store_artifacts_list(gbx_server_store(s), &f, list_one, &c, &err) < 0) {
        json_decref(c.arr);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        goto out;
    }
    json_t *next = json_null();
    if ((uint64_t)c.n > limit) {
        json_array_remove(c.arr, limit);
        json_t *lastj = json_array_get(c.arr, limit - 1);
        next = json_string(json_string_value(json_object_get(lastj, "id")));
    }
    gbx_http_reply_json(req, 200, json_pack("{s:o,s:o}", "artifacts", c.arr, "next_after", next));
out:
    gbx_query_release(&q);
}

static void handle_delete(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req, const char *id)
{
    struct row_copy row;
    if (!find_row(s, who, req, id, &row))
        return;
    json_decref(row.json);
    struct gbx_err *err = NULL;
    int r = gbx_artifacts_delete(s, id, &err);
    if (r < 0) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    if (r == 0)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "artifact '%s' not found", id);
    gbx_http_reply_recorded(
        s, who->name, "artifact.delete", NULL,
        json_pack("{s:s,s:s,s:I}", "id", id, "sha256", row.sha, "size", (json_int_t)row.size), req,
        204, NULL);
}

/* ---- download ---------------------------------------------------------------------------- */

struct dl {
    struct evhttp_request *req;
    int fd;
    uint64_t off, left;
    int paused, pumping;
};

static void dl_free(struct dl *d)
{
    if (d->fd >= 0)
        close(d->fd);
    free(d);
}

static void dl_gone(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    struct dl *d = arg;
    d->req = NULL;
    if (!d->pumping)
        dl_free(d);
}

static void dl_pump(struct dl *d);

static void dl_drained(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    struct dl *d = arg;
    if (!d->paused)
        return;
    d->paused = 0;
    dl_pump(d);
}

/* Send blob chunks until the client's connection holds more than ART_OUT_CAP unsent bytes
 * (then dl_drained resumes) or the range is out. Blob reads are page-sized preads of a local
 * file on the loop; the bytes in memory are bounded by the cap. */
static void dl_pump(struct dl *d)
{
    d->pumping = 1;
    while (d->req && !d->paused && d->left > 0) {
        size_t want = d->left < ART_CHUNK ? (size_t)d->left : ART_CHUNK;
        struct evbuffer *b = evbuffer_new();
        GBX_BUG_ON(b == NULL);
        struct evbuffer_iovec iov;
        ssize_t n = -1;
        if (evbuffer_reserve_space(b, want, &iov, 1) >= 1) {
            do
                n = pread(d->fd, iov.iov_base, want, (off_t)d->off);
            while (n < 0 && errno == EINTR);
        }
        if (n <= 0) { /* the blob shrank or failed: Content-Length cannot hold; cut it short */
            evbuffer_free(b);
            gbx_log_warn("artifacts: blob read failed at %" PRIu64 ": %s", d->off,
                         n < 0 ? strerror(errno) : "short");
            struct evhttp_connection *conn = evhttp_request_get_connection(d->req);
            evhttp_connection_set_closecb(conn, NULL, NULL);
            d->req = NULL;
            evhttp_connection_free(conn);
            break;
        }
        iov.iov_len = (size_t)n;
        evbuffer_commit_space(b, &iov, 1);
        d->off += (uint64_t)n;
        d->left -= (uint64_t)n;
        gbx_http_send_chunk(d->req, b, ART_OUT_CAP, &d->paused, NULL, dl_drained, d);
        evbuffer_free(b);
    }
    d->pumping = 0;
    if (d->req && d->left == 0) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(d->req), NULL, NULL);
        evhttp_send_reply_end(d->req);
        d->req = NULL;
    }
    if (d->req == NULL)
        dl_free(d);
}

static void handle_content(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, const char *id)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD)
        return not_allowed(req, "GET, HEAD");
    struct row_copy row;
    if (!find_row(s, who, req, id, &row))
        return;
    json_decref(row.json);
    char *dir = art_dir(s);
    char *blob = gbx_asprintf("%s/%s", dir, row.sha);
    free(dir);
    int fd = open(blob, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        gbx_http_reply_error(req, GBX_ERR_INTERNAL, "artifact '%s': its blob is missing (%s)", id,
                             strerror(errno));
        if (fd >= 0)
            close(fd);
        free(blob);
        return;
    }
    free(blob);
    uint64_t size = (uint64_t)st.st_size, off = 0, len = size;
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    char etag[70], buf[96];
    snprintf(etag, sizeof(etag), "\"%s\"", row.sha);
    evhttp_add_header(out, "ETag", etag);
    evhttp_add_header(out, "Cache-Control", "private, immutable");
    const char *inm = evhttp_find_header(in, "If-None-Match");
    if (inm && (strcmp(inm, etag) == 0 || strcmp(inm, "*") == 0)) {
        close(fd);
        evhttp_send_reply(req, 304, "Not Modified", NULL);
        return;
    }
    const char *range = evhttp_find_header(in, "Range");
    const char *ifr = evhttp_find_header(in, "If-Range");
    int r = ifr && strcmp(ifr, etag) != 0 ? 0 : gbx_http_parse_range(range, size, &off, &len);
    if (r < 0) {
        close(fd);
        snprintf(buf, sizeof(buf), "bytes */%" PRIu64, size);
        evhttp_add_header(out, "Content-Range", buf);
        return gbx_http_reply_error_status(
            req, 416, GBX_ERR_INVALID, "range '%.64s' is outside artifact '%s' (%" PRIu64 " bytes)",
            range, id, size);
    }
    evhttp_add_header(out, "Content-Type",
                      strcmp(row.kind, "dir") == 0 ? "application/x-tar"
                                                   : "application/octet-stream");
    evhttp_add_header(out, "Accept-Ranges", "bytes");
    snprintf(buf, sizeof(buf), "%" PRIu64, len);
    evhttp_add_header(out, "Content-Length", buf);
    if (r == 1) {
        snprintf(buf, sizeof(buf), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1,
                 size);
        evhttp_add_header(out, "Content-Range", buf);
    }
    if (len == 0 || m == EVHTTP_REQ_HEAD) {
        close(fd);
        evhttp_send_reply(req, r == 1 ? 206 : 200, r == 1 ? "Partial Content" : "OK", NULL);
        return;
    }
    struct dl *d = gbx_xcalloc(1, sizeof(*d));
    d->req = req;
    d->fd = fd;
    d->off = off;
    d->left = len;
    evhttp_send_reply_start(req, r == 1 ? 206 : 200, r == 1 ? "Partial Content" : "OK");
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), dl_gone, d);
    dl_pump(d);
}

void gbx_api_artifacts(struct gbx_server *s, const struct gbx_actor *who,
                       struct evhttp_request *req, const char *path)
{
    sweep_once(s);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(path, "/v1/artifacts") == 0) {
        if (m != EVHTTP_REQ_GET)
            return not_allowed(req, "GET");
        return handle_list(s, who, req);
    }
    const char *rest = path + strlen("/v1/artifacts/");
    const char *slash = strchr(rest, '/');
    char id[32];
    size_t idlen = slash ? (size_t)(slash - rest) : strlen(rest);
    if (idlen == 0 || idlen >= sizeof(id))
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such artifact");
    memcpy(id, rest, idlen);
    id[idlen] = '\0';
    if (slash) {
        if (strcmp(slash, "/content") != 0)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
        return handle_content(s, who, req, id);
    }
    if (m == EVHTTP_REQ_DELETE)
        return handle_delete(s, who, req, id);
    if (m != EVHTTP_REQ_GET)
        return not_allowed(req, "GET, DELETE");
    struct row_copy row;
    if (find_row(s, who, req, id, &row))
        gbx_http_reply_json(req, 200, row.json);
}
