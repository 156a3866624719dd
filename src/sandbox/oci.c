/* SPDX-License-Identifier: MIT */
#include "sandbox/oci.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "base/clock.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/path.h"
#include "sandbox/template.h"

#define MAX_LAYERS 256
#define MAX_JSON (4u << 20)
#define ID_MAX 65535u /* owners above this are refused (the sandbox maps 65536 ids) */

/* ---- pure ------------------------------------------------------------------------------- */

int gbx_oci_path_clean(const char *name, char *out, size_t outsz)
{
    if (name == NULL || outsz == 0)
        return -EINVAL;
    if (name[0] == '/')
        return -EINVAL; /* absolute: refused, never re-rooted */
    size_t o = 0;
    const char *p = name;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -EINVAL;
        if (n > NAME_MAX)
            return -ENAMETOOLONG;
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o + (o ? 1 : 0) + n + 1 > outsz || o + n + 1 > PATH_MAX)
                return -ENAMETOOLONG;
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
        if (*p == '/')
            p++;
    }
    out[o] = '\0';
    return o == 0 ? 1 : 0;
}

static const char wh_prefix[] = ".wh.";
static const char wh_opaque[] = ".wh..wh..opq";

int gbx_oci_classify(const char *clean, char *target, size_t targetsz)
{
    const char *slash = strrchr(clean, '/');
    const char *base = slash ? slash + 1 : clean;
    size_t dirlen = slash ? (size_t)(slash - clean) : 0;
    if (strncmp(base, wh_prefix, sizeof(wh_prefix) - 1) != 0)
        return GBX_OCI_ENTRY;
    if (strcmp(base, wh_opaque) == 0) {
        if (dirlen + 1 > targetsz)
            return -ENAMETOOLONG;
        memcpy(target, clean, dirlen);
        target[dirlen] = '\0';
        return GBX_OCI_OPAQUE;
    }
    if (strncmp(base, ".wh..wh.", 8) == 0)
        return GBX_OCI_WH_META;
    const char *victim = base + sizeof(wh_prefix) - 1;
    if (victim[0] == '\0' || strcmp(victim, ".") == 0 || strcmp(victim, "..") == 0)
        return -EINVAL;
    size_t vlen = strlen(victim);
    if (dirlen + (dirlen ? 1 : 0) + vlen + 1 > targetsz)
        return -ENAMETOOLONG;
    size_t o = 0;
    if (dirlen) {
        memcpy(target, clean, dirlen);
        o = dirlen;
        target[o++] = '/';
    }
    memcpy(target + o, victim, vlen + 1);
    return GBX_OCI_WHITEOUT;
}

int gbx_oci_link_escapes(const char *at, const char *target)
{
    if (target[0] == '/')
        return 0;
    /* depth of the directory holding the link */
    long depth = 0;
    for (const char *p = at; *p; p++)
        if (*p == '/')
            depth++;
    const char *p = target;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return 1;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            depth++;
        }
        p += n;
        if (*p == '/')
            p++;
    }
    return 0;
}

int gbx_oci_digest_hex(const char *s, char *out, size_t outsz)
{
    if (s == NULL || strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64 || outsz < 65)
        return -EINVAL;
    for (size_t i = 0; i < 64; i++) {
        char c = s[7 + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return -EINVAL;
        out[i] = c;
    }
    out[64] = '\0';
    return 0;
}

/* ---- writing beneath a directory fd, never through a symlink ---------------------------- */

/* Open the directory that holds the cleaned path rel (walking from rootfd one component at a
 * time with O_NOFOLLOW, creating missing directories when create is set) and point *base at
 * the final component. fd, or -ENOENT (missing and not created), -ELOOP (a component is a
 * symlink or not a directory), -errno. */
static int open_parent(int rootfd, const char *rel, int create, const char **base)
{
    const char *slash = strrchr(rel, '/');
    *base = slash ? slash + 1 : rel;
    int fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    const char *p = rel;
    char comp[NAME_MAX + 1];
    while (slash && p < slash) {
        const char *s = strchr(p, '/');
        size_t n = (size_t)(s - p);
        if (n > NAME_MAX) {
            close(fd);
            return -ENAMETOOLONG;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        int nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && create) {
            if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
                int e = errno;
                close(fd);
                return -e;
            }
            nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd < 0) {
            int e = errno;
            close(fd);
            return e == ENOTDIR ? -ELOOP : -e;
        }
        close(fd);
        fd = nfd;
        p = s + 1;
    }
    return fd;
}

/* ---- one archive -------------------------------------------------------------------------- */

struct src {
    int fd; /* >= 0: read from here (rewound for each pass) */
    const void *mem;
    size_t len;
};

struct apply {
    int rootfd;
    const struct gbx_oci_opts *o;
    struct gbx_oci_stats *st;
    const char *what; /* "layer 2", "the image archive" (for messages) */
    int outer;        /* the image archive itself: no ownership, no whiteouts */
};

static int open_archive(const struct src *s, struct archive **out, struct gbx_err **err)
{
    struct archive *a = archive_read_new();
    GBX_BUG_ON(a == NULL);
    (void)archive_read_support_filter_gzip(a);
    (void)archive_read_support_filter_zstd(a);
    (void)archive_read_support_filter_xz(a);
    (void)archive_read_support_filter_bzip2(a);
    (void)archive_read_support_format_tar(a);
    int r;
    if (s->fd >= 0) {
        if (lseek(s->fd, 0, SEEK_SET) < 0) {
            archive_read_free(a);
            return gbx_err_sys(err, errno, "cannot rewind the archive");
        }
        r = archive_read_open_fd(a, s->fd, 65536);
    } else {
        r = archive_read_open_memory(a, s->mem, s->len);
    }
    if (r != ARCHIVE_OK) {
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "not a tar archive: %s",
                    archive_error_string(a) ? archive_error_string(a) : "unreadable");
        archive_read_free(a);
        return -1;
    }
    *out = a;
    return 0;
}

static int cancelled(const struct apply *ap)
{
    return ap->o && ap->o->cancel && *ap->o->cancel;
}

static int hostile(struct apply *ap, const char *name, const char *why, struct gbx_err **err)
{
    return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "%s: hostile entry '%s': %s", ap->what, name,
                       why);
}

static int entry_failed(struct apply *ap, const char *name, int e, const char *what,
                        struct gbx_err **err)
{
    if (e == ELOOP)
        return hostile(ap, name, "its path goes through a symlink or a non-directory", err);
    return gbx_err_set(err, e, gbx_err_kind_from_errno(e), "%s: entry '%s': %s: %s", ap->what, name,
                       what, strerror(e));
}

static int write_data(struct apply *ap, struct archive *a, int fd, const char *name,
                      struct gbx_err **err)
{
    const void *buf;
    size_t size;
    la_int64_t off;
    int r;
    while ((r = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK) {
        if (off < 0)
            return hostile(ap, name, "negative data offset", err);
        ap->st->bytes += size;
        if (ap->o && ap->o->max_bytes && ap->st->bytes > ap->o->max_bytes)
            return gbx_err_set(err, EFBIG, GBX_ERR_LIMIT,
                               "%s: entry '%s': the image is larger than %llu bytes", ap->what,
                               name, (unsigned long long)ap->o->max_bytes);
        const char *b = buf;
        size_t done = 0;
        while (done < size) {
            ssize_t n = pwrite(fd, b + done, size - done, (off_t)off + (off_t)done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return entry_failed(ap, name, errno, "write", err);
            done += (size_t)n;
        }
    }
    if (r != ARCHIVE_EOF)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "%s: entry '%s': %s", ap->what, name,
                           archive_error_string(a) ? archive_error_string(a) : "bad data");
    return 0;
}

static int set_meta(struct apply *ap, int fd, struct archive_entry *e)
{
    if (!ap->outer && fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0)
        return -errno;
    /* after the chown, which clears set-id bits */
    if (fchmod(fd, archive_entry_perm(e) & 07777) < 0)
        return -errno;
    return 0;
}

static void set_times(int dfd, const char *base, int fd, struct archive_entry *e)
{
    if (!archive_entry_mtime_is_set(e))
        return;
    struct timespec ts[2] = {
        {.tv_nsec = UTIME_OMIT},
        {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)}};
    if (fd >= 0)
        (void)futimens(fd, ts);
    else
        (void)utimensat(dfd, base, ts, AT_SYMLINK_NOFOLLOW);
}

static int do_hardlink(struct apply *ap, int pfd, const char *base, const char *name,
                       const char *link, struct gbx_err **err)
{
    char lclean[PATH_MAX];
    int c = gbx_oci_path_clean(link, lclean, sizeof(lclean));
    if (c != 0)
        return hostile(ap, name, "a hard link whose target leaves the image", err);
    char tmp[8];
    if (gbx_oci_classify(lclean, tmp, sizeof(tmp)) != GBX_OCI_ENTRY)
        return hostile(ap, name, "a hard link to a whiteout", err);
    struct open_how how = {
        .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    long tfd;
    do
        tfd = syscall(SYS_openat2, ap->rootfd, lclean, &how, sizeof(how));
    while (tfd < 0 && (errno == EAGAIN || errno == EINTR));
    if (tfd < 0) {
        int e = errno;
        if (e == ELOOP || e == EXDEV)
            return hostile(ap, name, "a hard link through a symlink", err);
        return gbx_err_set(err, e, GBX_ERR_INVALID, "%s: entry '%s': hard link to '%s': %s",
                           ap->what, name, link, strerror(e));
    }
    gbx_autoclose int t = (int)tfd;
    struct stat sb;
    if (fstat(t, &sb) < 0)
        return entry_failed(ap, name, errno, "stat the link target", err);
    if (S_ISDIR(sb.st_mode))
        return hostile(ap, name, "a hard link to a directory", err);
    if (linkat(t, "", pfd, base, AT_EMPTY_PATH) < 0) {
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", t);
        if (linkat(AT_FDCWD, proc, pfd, base, AT_SYMLINK_FOLLOW) < 0)
            return entry_failed(ap, name, errno, "link", err);
    }
    return 0;
}

/* Write one ordinary entry. */
static int put_entry(struct apply *ap, struct archive *a, struct archive_entry *e, const char *name,
                     const char *clean, struct gbx_err **err)
{
    mode_t type = archive_entry_filetype(e);
    const char *link = archive_entry_hardlink(e);
    if (!ap->outer && (archive_entry_uid(e) > ID_MAX || archive_entry_gid(e) > ID_MAX ||
                       archive_entry_uid(e) < 0 || archive_entry_gid(e) < 0))
        return hostile(ap, name, "an owner above 65535", err);
    if (!link && (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK)) {
        ap->st->devices_skipped++;
        gbx_log_debug("%s: skipping device node '%s' (sandboxes get their own /dev)", ap->what,
                      name);
        return 0;
    }
    if (archive_entry_xattr_count(e) > 0)
        ap->st->xattrs_skipped++;
    const char *base;
    gbx_autoclose int pfd = open_parent(ap->rootfd, clean, 1, &base);
    if (pfd < 0)
        return entry_failed(ap, name, -pfd, "open its directory", err);
    struct stat old;
    int have = fstatat(pfd, base, &old, AT_SYMLINK_NOFOLLOW) == 0;
    if (!link && type == AE_IFDIR) {
        if (have && !S_ISDIR(old.st_mode)) {
            int r = gbx_rm_rf_at(pfd, base);
            if (r < 0)
                return entry_failed(ap, name, -r, "replace", err);
            have = 0;
        }
        if (!have && mkdirat(pfd, base, 0700) < 0)
            return entry_failed(ap, name, errno, "mkdir", err);
        gbx_autoclose int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || set_meta(ap, fd, e) < 0)
            return entry_failed(ap, name, errno, "set owner and mode", err);
        set_times(pfd, base, fd, e);
        return 0;
    }
    if (have) {
        int r = gbx_rm_rf_at(pfd, base);
        if (r < 0)
            return entry_failed(ap, name, -r, "replace", err);
    }
    if (link)
        return do_hardlink(ap, pfd, base, name, link, err);
    switch (type) {
    case AE_IFREG: {
        gbx_autoclose int fd =
            openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return entry_failed(ap, name, errno, "create", err);
        if (write_data(ap, a, fd, name, err) < 0)
            return -1;
        la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
        struct stat sb;
        if (size > 0 && fstat(fd, &sb) == 0 && sb.st_size < size &&
            (!ap->o || !ap->o->max_bytes || (uint64_t)size <= ap->o->max_bytes) &&
            ftruncate(fd, (off_t)size) < 0) /* a sparse tail */
            return entry_failed(ap, name, errno, "truncate", err);
        if (set_meta(ap, fd, e) < 0)
            return entry_failed(ap, name, errno, "set owner and mode", err);
        set_times(pfd, base, fd, e);
        return 0;
    }
    case AE_IFLNK: {
        const char *target = archive_entry_symlink(e);
        if (target == NULL || target[0] == '\0' || strlen(target) >= PATH_MAX)
            return hostile(ap, name, "a symlink without a usable target", err);
        if (gbx_oci_link_escapes(clean, target))
            return hostile(ap, name, "a symlink whose target climbs out of the image", err);
        if (symlinkat(target, pfd, base) < 0)
            return entry_failed(ap, name, errno, "symlink", err);
        if (!ap->outer && fchownat(pfd, base, (uid_t)archive_entry_uid(e),
                                   (gid_t)archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) < 0)
            return entry_failed(ap, name, errno, "chown", err);
        set_times(pfd, base, -1, e);
        return 0;
    }
    case AE_IFIFO: {
        if (mkfifoat(pfd, base, 0600) < 0)
            return entry_failed(ap, name, errno, "mkfifo", err);
        if ((!ap->outer && fchownat(pfd, base, (uid_t)archive_entry_uid(e),
                                    (gid_t)archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) < 0) ||
            fchmodat(pfd, base, archive_entry_perm(e) & 0777, 0) < 0)
            return entry_failed(ap, name, errno, "set owner and mode", err);
        return 0;
    }
    default:
        return hostile(ap, name, "an unknown entry type", err);
    }
}

/* Whiteouts of one layer, against the layers below (pass 1). */
static int apply_whiteout(struct apply *ap, int kind, const char *name, const char *target,
                          struct gbx_err **err)
{
    ap->st->whiteouts++;
    if (kind == GBX_OCI_OPAQUE) {
        int fd;
        if (target[0] == '\0') {
            fd = fcntl(ap->rootfd, F_DUPFD_CLOEXEC, 0);
        } else {
            const char *base;
            gbx_autoclose int pfd = open_parent(ap->rootfd, target, 0, &base);
            if (pfd == -ENOENT)
                return 0;
            if (pfd < 0)
                return entry_failed(ap, name, -pfd, "open its directory", err);
            fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 && errno == ENOENT)
                return 0;
        }
        if (fd < 0)
            return entry_failed(ap, name, errno == ENOTDIR ? ELOOP : errno, "open", err);
        int r = gbx_rm_children(fd);
        close(fd);
        return r < 0 ? entry_failed(ap, name, -r, "empty the directory", err) : 0;
    }
    const char *base;
    gbx_autoclose int pfd = open_parent(ap->rootfd, target, 0, &base);
    if (pfd == -ENOENT)
        return 0; /* nothing below to hide */
    if (pfd < 0)
        return entry_failed(ap, name, -pfd, "open its directory", err);
    int r = gbx_rm_rf_at(pfd, base);
    return r < 0 ? entry_failed(ap, name, -r, "remove", err) : 0;
}

/* One pass over the archive: pass 1 applies whiteouts, pass 2 writes entries. */
static int apply_pass(struct apply *ap, const struct src *s, int pass, struct gbx_err **err)
{
    struct archive *a = NULL;
    if (open_archive(s, &a, err) < 0)
        return gbx_err_wrap(err, "%s", ap->what);
    struct archive_entry *e;
    int r, ret = 0;
    uint64_t n = 0;
    char clean[PATH_MAX], target[PATH_MAX];
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        if (cancelled(ap)) {
            ret = gbx_err_set(err, ECANCELED, GBX_ERR_UNAVAILABLE, "cancelled");
            break;
        }
        if (ap->o && ap->o->max_entries && ++n > ap->o->max_entries) {
            ret = gbx_err_set(err, E2BIG, GBX_ERR_LIMIT, "%s: more than %llu entries", ap->what,
                              (unsigned long long)ap->o->max_entries);
            break;
        }
        const char *name = archive_entry_pathname(e);
        if (name == NULL) {
            ret =
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "%s: an entry without a name", ap->what);
            break;
        }
        int c = gbx_oci_path_clean(name, clean, sizeof(clean));
        if (c < 0) {
            ret = hostile(ap, name,
                          name[0] == '/'       ? "an absolute path"
                          : c == -ENAMETOOLONG ? "a name too long"
                                               : "a '..' component",
                          err);
            break;
        }
        if (c == 1) /* the root itself */
            continue;
        int kind = ap->outer ? GBX_OCI_ENTRY : gbx_oci_classify(clean, target, sizeof(target));
        if (kind < 0) {
            ret = hostile(ap, name, "a whiteout that names nothing", err);
            break;
        }
        if (pass == 1) {
            if ((kind == GBX_OCI_WHITEOUT || kind == GBX_OCI_OPAQUE) &&
                (ret = apply_whiteout(ap, kind, name, target, err)) < 0)
                break;
            continue;
        }
        if (kind != GBX_OCI_ENTRY)
            continue;
        ap->st->entries++;
        if ((ret = put_entry(ap, a, e, name, clean, err)) < 0)
            break;
    }
    if (ret == 0 && r != ARCHIVE_EOF)
        ret = gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "%s: bad archive: %s", ap->what,
                          archive_error_string(a) ? archive_error_string(a) : "truncated");
    archive_read_free(a);
    return ret;
}

static int apply_src(int rootfd, const struct src *s, const char *what, int outer,
                     const struct gbx_oci_opts *o, struct gbx_oci_stats *st, struct gbx_err **err)
{
    struct gbx_oci_stats dummy = {0};
    struct apply ap = {
        .rootfd = rootfd, .o = o, .st = st ? st : &dummy, .what = what, .outer = outer};
    if (!outer && apply_pass(&ap, s, 1, err) < 0)
        return -1;
    return apply_pass(&ap, s, 2, err);
}

int gbx_oci_apply_layer_mem(int rootfd, const void *data, size_t len, const struct gbx_oci_opts *o,
                            struct gbx_oci_stats *st, struct gbx_err **err)
{
    struct src s = {.fd = -1, .mem = data, .len = len};
    return apply_src(rootfd, &s, "layer", 0, o, st, err);
}

int gbx_oci_apply_layer_file(int rootfd, const char *path, const struct gbx_oci_opts *o,
                             struct gbx_oci_stats *st, struct gbx_err **err)
{
    gbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gbx_err_sys(err, errno, "cannot open '%s'", path);
    struct src s = {.fd = fd};
    return apply_src(rootfd, &s, "layer", 0, o, st, err);
}

/* ---- the image ---------------------------------------------------------------------------- */

void gbx_oci_config_release(struct gbx_oci_config *c)
{
    free(c->entrypoint);
    free(c->cmd);
    free(c->env);
    free(c->workdir);
    free(c->user);
    memset(c, 0, sizeof(*c));
}

/* Open a file of the extracted image archive (its symlinks resolve inside it). */
static int open_in(int workfd, const char *rel)
{
    char clean[PATH_MAX];
    if (gbx_oci_path_clean(rel, clean, sizeof(clean)) != 0)
        return -EINVAL;
    return gbx_path_open_in(workfd, clean, O_RDONLY, 0);
}

static json_t *load_json(int workfd, const char *rel, struct gbx_err **err)
{
    int fd = open_in(workfd, rel);
    if (fd < 0) {
        gbx_err_set(err, -fd, GBX_ERR_INVALID, "the image has no readable '%s': %s", rel,
                    strerror(-fd));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > (off_t)MAX_JSON) {
        close(fd);
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'%s' is not a regular file below 4 MiB", rel);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
    close(fd);
    if (j == NULL)
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'%s': bad JSON: %s", rel, je.text);
    return j;
}

static char *blob_path(const char *digest)
{
    char hex[65];
    if (gbx_oci_digest_hex(digest, hex, sizeof(hex)) < 0)
        return NULL;
    return gbx_asprintf("blobs/sha256/%s", hex);
}

/* An OCI layout's blob ("blobs/sha256/<hex>") must hash to its name. */
static int verify_blob(int workfd, const char *rel, struct gbx_err **err)
{
    const char *hex = strrchr(rel, '/');
    hex = hex ? hex + 1 : rel;
    int fd = open_in(workfd, rel);
    if (fd < 0)
        return gbx_err_set(err, -fd, GBX_ERR_INVALID, "the image has no readable '%s': %s", rel,
                           strerror(-fd));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    GBX_BUG_ON(ctx == NULL);
    int ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    static __thread unsigned char buf[1 << 16];
    ssize_t n;
    while (ok && (n = read(fd, buf, sizeof(buf))) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        ok = n > 0 && EVP_DigestUpdate(ctx, buf, (size_t)n) == 1;
    }
    unsigned char md[32];
    unsigned int mdlen = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 32;
    EVP_MD_CTX_free(ctx);
    close(fd);
    if (!ok)
        return gbx_err_set(err, EIO, GBX_ERR_INVALID, "cannot hash '%s'", rel);
    char got[65];
    for (int i = 0; i < 32; i++)
        snprintf(got + 2 * i, 3, "%02x", md[i]);
    if (strcmp(got, hex) != 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "'%s' does not match its digest (sha256:%s)", rel, got);
    return 0;
}

/* The layers and config of the image: relative paths in the extracted archive. */
struct image {
    char *config;
    char *layers[MAX_LAYERS];
    size_t n;
};

static void image_release(struct image *im)
{
    free(im->config);
    for (size_t i = 0; i < im->n; i++)
        free(im->layers[i]);
    memset(im, 0, sizeof(*im));
}

static int find_docker(int workfd, struct image *im, struct gbx_err **err)
{
    json_t *m = load_json(workfd, "manifest.json", err);
    if (m == NULL)
        return -1;
    json_t *first = json_array_get(m, 0);
    json_t *cfg = json_object_get(first, "Config");
    json_t *layers = json_object_get(first, "Layers");
    int r = 0;
    if (!json_is_string(cfg) || !json_is_array(layers)) {
        r = gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                        "manifest.json: expected [{\"Config\": ..., \"Layers\": [...]}]");
    } else if (json_array_size(layers) > MAX_LAYERS) {
        r = gbx_err_set(err, E2BIG, GBX_ERR_LIMIT, "more than %d layers", MAX_LAYERS);
    } else {
        im->config = gbx_xstrdup(json_string_value(cfg));
        size_t i;
        json_t *l;
        json_array_foreach(layers, i, l)
        {
            if (!json_is_string(l)) {
                r = gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                                "manifest.json: a layer is not a path");
                break;
            }
            im->layers[im->n++] = gbx_xstrdup(json_string_value(l));
        }
    }
    json_decref(m);
    return r;
}

static const char *const index_types[] = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json"};

static int is_index(json_t *desc)
{
    const char *t = json_string_value(json_object_get(desc, "mediaType"));
    for (size_t i = 0; t && i < GBX_ARRAY_SIZE(index_types); i++)
        if (strcmp(t, index_types[i]) == 0)
            return 1;
    return 0;
}

/* Pick the manifest for this machine (amd64/linux, or the only one) from an index. */
static json_t *pick(json_t *manifests)
{
    size_t i;
    json_t *d, *any = NULL;
    json_array_foreach(manifests, i, d)
    {
        json_t *p = json_object_get(d, "platform");
        const char *arch = json_string_value(json_object_get(p, "architecture"));
        if (arch && strcmp(arch, "unknown") == 0)
            continue; /* attestations */
        if (any == NULL)
            any = d;
#if defined(__x86_64__)
        if (arch && strcmp(arch, "amd64") == 0)
            return d;
#elif defined(__aarch64__)
        if (arch && strcmp(arch, "arm64") == 0)
            return d;
#endif
    }
    return any;
}

static int find_oci(int workfd, struct image *im, struct gbx_err **err)
{
    json_t *idx = load_json(workfd, "index.json", err);
    if (idx == NULL)
        return -1;
    json_t *desc = pick(json_object_get(idx, "manifests"));
    json_t *man = NULL;
    int r = 0;
    for (int depth = 0; depth < 3; depth++) {
        gbx_autofree char *p = blob_path(json_string_value(json_object_get(desc, "digest")));
        if (p == NULL) {
            r = gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "index.json: no usable manifest digest");
            break;
        }
        json_t *j = verify_blob(workfd, p, err) < 0 ? NULL : load_json(workfd, p, err);
        if (j == NULL) {
            r = -1;
            break;
        }
        if (is_index(desc) || json_object_get(j, "manifests")) {
            json_decref(idx);
            idx = j;
            desc = pick(json_object_get(idx, "manifests"));
            continue;
        }
        man = j;
        break;
    }
    json_decref(idx);
    if (r < 0)
        return -1;
    if (man == NULL)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "index.json: indexes nested too deep");
    json_t *layers = json_object_get(man, "layers");
    im->config =
        blob_path(json_string_value(json_object_get(json_object_get(man, "config"), "digest")));
    if (im->config == NULL || !json_is_array(layers)) {
        r = gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "the manifest has no config or layers");
    } else if (json_array_size(layers) > MAX_LAYERS) {
        r = gbx_err_set(err, E2BIG, GBX_ERR_LIMIT, "more than %d layers", MAX_LAYERS);
    } else {
        size_t i;
        json_t *l;
        json_array_foreach(layers, i, l)
        {
            char *p = blob_path(json_string_value(json_object_get(l, "digest")));
            if (p == NULL) {
                r = gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                                "the manifest: layer %zu has no sha256 digest", i + 1);
                break;
            }
            im->layers[im->n++] = p;
        }
    }
    json_decref(man);
    return r;
}

static char *dump_or_null(json_t *v)
{
    return v && !json_is_null(v) ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

static int read_config(int workfd, const char *rel, struct gbx_oci_config *c, struct gbx_err **err)
{
    json_t *j = load_json(workfd, rel, err);
    if (j == NULL)
        return -1;
    json_t *cfg = json_object_get(j, "config");
    c->entrypoint = dump_or_null(json_object_get(cfg, "Entrypoint"));
    c->cmd = dump_or_null(json_object_get(cfg, "Cmd"));
    c->env = dump_or_null(json_object_get(cfg, "Env"));
    c->workdir = dump_or_null(json_object_get(cfg, "WorkingDir"));
    c->user = dump_or_null(json_object_get(cfg, "User"));
    json_decref(j);
    return 0;
}

static void progress(const struct gbx_oci_opts *o, const char *phase, const char *detail,
                     unsigned step, unsigned steps)
{
    if (o && o->progress)
        o->progress(o->arg, phase, detail, step, steps);
}

static char *conf_text(const char *source, const struct gbx_oci_config *c)
{
    gbx_autofree char *created = gbx_rfc3339(gbx_realtime_ns());
    char *t = gbx_asprintf("format=%d\ndescription=OCI image %s\nsource=oci:%s\ncreated=%s\n",
                           GBX_TEMPLATE_FORMAT, source, source, created);
    const struct {
        const char *key, *v;
    } kv[] = {{"oci_entrypoint", c->entrypoint},
              {"oci_cmd", c->cmd},
              {"oci_env", c->env},
              {"oci_workdir", c->workdir},
              {"oci_user", c->user}};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(kv); i++) {
        if (kv[i].v == NULL)
            continue;
        char *n = gbx_asprintf("%s%s=%s\n", t, kv[i].key, kv[i].v);
        free(t);
        t = n;
    }
    return t;
}

static int import_into(int workfd, int rootfd, const struct src *outer, const char *source,
                       const struct gbx_oci_opts *o, struct gbx_oci_stats *st, char **conf,
                       struct gbx_err **err)
{
    progress(o, "extract", "the image archive", 0, 0);
    if (apply_src(workfd, outer, "the image archive", 1, o, NULL, err) < 0)
        return -1;
    struct image im = {0};
    struct stat sb;
    int oci = fstatat(workfd, "oci-layout", &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
              fstatat(workfd, "index.json", &sb, AT_SYMLINK_NOFOLLOW) == 0;
    int docker = fstatat(workfd, "manifest.json", &sb, AT_SYMLINK_NOFOLLOW) == 0;
    if (!oci && !docker)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "not an image archive: no manifest.json (docker save) and no "
                           "oci-layout with index.json (OCI layout)");
    int r = oci ? find_oci(workfd, &im, err) : find_docker(workfd, &im, err);
    /* an OCI layout names its blobs by digest: check every one before it is used */
    for (size_t i = 0; r == 0 && oci && i <= im.n; i++) {
        progress(o, "verify", i < im.n ? im.layers[i] : im.config, (unsigned)i + 1,
                 (unsigned)im.n + 1);
        r = verify_blob(workfd, i < im.n ? im.layers[i] : im.config, err);
    }
    struct gbx_oci_config cfg = {0};
    if (r == 0)
        r = read_config(workfd, im.config, &cfg, err);
    for (size_t i = 0; r == 0 && i < im.n; i++) {
        char what[32];
        snprintf(what, sizeof(what), "layer %zu", i + 1);
        progress(o, "layer", what, (unsigned)i + 1, (unsigned)im.n);
        int fd = open_in(workfd, im.layers[i]);
        if (fd < 0) {
            r = gbx_err_set(err, -fd, GBX_ERR_INVALID, "%s: cannot open '%s': %s", what,
                            im.layers[i], strerror(-fd));
            break;
        }
        struct src ls = {.fd = fd};
        r = apply_src(rootfd, &ls, what, 0, o, st, err);
        close(fd);
    }
    if (r == 0)
        *conf = conf_text(source, &cfg);
    gbx_oci_config_release(&cfg);
    image_release(&im);
    return r;
}

int gbx_oci_import(const char *state_dir, const char *name, const char *path, const void *data,
                   size_t len, const char *source, const struct gbx_oci_opts *o,
                   struct gbx_oci_stats *st, struct gbx_err **err)
{
    struct gbx_oci_stats dummy = {0};
    if (st == NULL)
        st = &dummy;
    if (gbx_template_name_valid(name) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "invalid template name '%s'", name);
    if (strchr(source, '\n'))
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "a source with a newline");
    gbx_autoclose int infd = -1;
    struct src outer = {.fd = -1, .mem = data, .len = len};
    if (path) {
        infd = open(path, O_RDONLY | O_CLOEXEC);
        if (infd < 0)
            return gbx_err_sys(err, errno, "cannot open '%s'", path);
        outer.fd = infd;
    }
    char *staging = NULL;
    if (gbx_template_staging(state_dir, name, &staging, err) < 0)
        return gbx_err_wrap(err, "import template '%s'", name);
    gbx_autofree char *stage = staging;
    gbx_autofree char *work = gbx_asprintf("%s/image", stage);
    gbx_autofree char *rootfs = gbx_asprintf("%s/rootfs", stage);
    gbx_autofree char *conf = NULL;
    int r = -1;
    if (mkdir(work, 0700) < 0 || mkdir(rootfs, 0755) < 0) {
        gbx_err_sys(err, errno, "cannot create '%s'", rootfs);
    } else {
        gbx_autoclose int workfd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        gbx_autoclose int rootfd = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (workfd < 0 || rootfd < 0)
            gbx_err_sys(err, errno, "cannot open '%s'", stage);
        else if (import_into(workfd, rootfd, &outer, source, o, st, &conf, err) == 0 &&
                 gbx_template_fixup_rootfs(rootfd, 0, err) == 0)
            r = 0;
    }
    if (r == 0) {
        (void)!gbx_rm_rf(work);
        progress(o, "install", name, 0, 0);
        gbx_autofree char *full =
            gbx_asprintf("%s%s", conf, o && o->conf_extra ? o->conf_extra : "");
        r = gbx_template_install(state_dir, name, stage, full, err);
    }
    if (r < 0) {
        (void)!gbx_template_remove_tree(stage);
        return gbx_err_wrap(err, "import template '%s'", name);
    }
    if (st->devices_skipped)
        gbx_log_info("template '%s': skipped %llu device nodes (sandboxes get their own /dev)",
                     name, (unsigned long long)st->devices_skipped);
    progress(o, "done", name, 0, 0);
    return 0;
}
