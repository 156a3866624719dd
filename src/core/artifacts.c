/* SPDX-License-Identifier: MIT */
/* The artifacts service (artifacts.h). Publishing captures the sandbox's file or directory on
 * a worker thread (core/offload.h) into a temporary blob while hashed (core/capture.c: as the
 * sandbox's root, beneath its /proc/<init>/root). The blob is fsync'd and renamed to
 * <state>/artifacts/<sha256>; the row is written back on the loop.
 *
 * A blob is removed when its last row goes: on the loop, renamed aside under the lock that
 * publishes take to place blobs (a publish between placing a blob and writing its row keeps
 * it), then unlinked on a worker. */
#include "core/artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/capture.h"
#include "core/offload.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "base/clock.h"
#include "base/fault.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "sandbox/backend.h"
#include "store/artifacts.h"

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

/* ---- publishing ------------------------------------------------------------------------------ */

struct pub {
    struct gbx_server *s;
    struct gbx_actor who; /* the publish's own copy: it outlives the call */
    gbx_artifact_done_fn done;
    void *arg;
    char *path, *name, *session, *sandbox, *metadata, *dir;
    int rootfd;
    uint32_t host_uid;
    uint64_t max_bytes;
    /* results */
    struct gbx_err *err;
    struct gbx_capture_out cap;
    int inflight; /* cap.sha256 is on the in-flight list */
};

static void pub_fail(struct pub *p, enum gbx_err_kind kind, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void pub_fail(struct pub *p, enum gbx_err_kind kind, int errnum, const char *fmt, ...)
{
    if (p->err)
        return;    /* the first failure says it */
    char msg[512]; /* as long as a capture's message may be */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gbx_err_set(&p->err, errnum, kind, "%s", msg);
}

static void pub_free(struct pub *p)
{
    if (p->rootfd >= 0)
        close(p->rootfd);
    free(p->path);
    free(p->name);
    free(p->session);
    free(p->sandbox);
    free(p->metadata);
    free(p->dir);
    gbx_err_free(p->err);
    free(p);
}

/* On a worker thread: the capture into a temporary file, then the blob put in place. */
static void publish_work(void *arg)
{
    struct pub *p = arg;
    char rnd[33];
    random_hex(rnd, 16);
    char *tmpdir = gbx_asprintf("%s/tmp", p->dir);
    char *tmp = gbx_asprintf("%s/%s", tmpdir, rnd);
    int out = -1;
    int r = gbx_mkdir_p(tmpdir, 0700);
    if (r < 0) {
        pub_fail(p, GBX_ERR_INTERNAL, -r, "cannot create '%s': %s", tmpdir, strerror(-r));
        goto out;
    }
    out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        pub_fail(p, GBX_ERR_INTERNAL, errno, "cannot create '%s': %s", tmp, strerror(errno));
        goto out;
    }
    const struct gbx_capture_in in = {
        .rootfd = p->rootfd,
        .path = p->path,
        .host_uid = p->host_uid,
        .max_bytes = p->max_bytes,
        .out = out,
    };
    if (gbx_capture(&in, &p->cap, &p->err) < 0)
        goto out;
    if (fsync(out) < 0) {
        pub_fail(p, GBX_ERR_INTERNAL, errno, "fsync '%s': %s", tmp, strerror(errno));
        goto out;
    }
    close(out);
    out = -1;
    gbx_fault_point("artifact.copied");
    char *blob = gbx_asprintf("%s/%s", p->dir, p->cap.sha256);
    struct inflight *f = gbx_xcalloc(1, sizeof(*f));
    memcpy(f->sha, p->cap.sha256, sizeof(f->sha));
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
        pub_fail(p, GBX_ERR_INTERNAL, -r, "cannot store '%s': %s", blob, strerror(-r));
    free(blob);
out:
    if (out >= 0)
        close(out);
    if (p->err)
        (void)unlink(tmp);
    free(tmp);
    free(tmpdir);
}

/* On the loop: the quota by size, the row, and the caller told. */
static void publish_done(void *arg)
{
    struct pub *p = arg;
    const char *sha = p->cap.sha256;
    if (p->err) {
        if (p->inflight) { /* placed, then failed (fsync of its directory) */
            inflight_drop(sha);
            gbx_artifacts_blob_release(p->s, sha);
        }
        p->done(p->arg, NULL, p->err);
        pub_free(p);
        return;
    }
    /* the quota, now that the size is known (the admission counted only one more) */
    struct gbx_actor owner;
    gbx_actor_for(&owner, p->who.owner);
    struct gbx_err *qerr = NULL;
    uint64_t size = p->cap.size;
    if (gbx_sandboxes_quota_admit(
            p->s, &owner,
            &(struct gbx_quota_use){.artifacts = 1, .artifact_bytes = size ? size : 1},
            &qerr) < 0) {
        inflight_drop(sha);
        gbx_artifacts_blob_release(p->s, sha);
        p->done(p->arg, NULL, qerr);
        gbx_err_free(qerr);
        pub_free(p);
        return;
    }
    char id[21] = "art-";
    random_hex(id + 4, 8);
    struct gbx_store_artifact a = {
        .id = id,
        .sha256 = sha,
        .name = p->name,
        .kind = p->cap.kind,
        .size_bytes = (int64_t)size,
        .owner = p->who.owner,
        .session = p->session,
        .sandbox = p->sandbox,
        .metadata = p->metadata,
        .created_ns = gbx_realtime_ns(),
    };
    struct gbx_err *err = NULL;
    int r = gbx_store_artifacts_insert(gbx_server_store(p->s), &a, &err);
    inflight_drop(sha);
    if (r < 0) {
        gbx_artifacts_blob_release(p->s, sha);
        p->done(p->arg, NULL, err);
        gbx_err_free(err);
        pub_free(p);
        return;
    }
    const struct gbx_artifact_result res = {.row = &a, .path = p->path, .skipped = p->cap.skipped};
    p->done(p->arg, &res, NULL);
    pub_free(p);
}

/* The session a publish names, checked: 0 ok, -1 with *err. */
static int check_session(struct gbx_server *s, const struct gbx_actor *who, const char *id,
                         struct gbx_err **err)
{
    char owner[256];
    int r = strlen(id) < 128
                ? gbx_store_artifacts_session_owner(gbx_server_store(s), id, owner, sizeof(owner))
                : 0;
    if (r < 0)
        return gbx_err_set(err, 0, GBX_ERR_INTERNAL, "cannot read session '%s'", id);
    if (r == 0 || !gbx_actor_sees(who, owner))
        return gbx_err_set(err, 0, GBX_ERR_NOT_FOUND, "session '%s' not found", id);
    return 0;
}

int gbx_artifacts_publish(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                          const struct gbx_artifact_spec *spec, gbx_artifact_done_fn done,
                          void *arg, struct gbx_err **err)
{
    if (spec->session && check_session(s, who, spec->session, err) < 0)
        return -1;
    if (gbx_sandboxes_quota_admit(s, who, &(struct gbx_quota_use){.artifacts = 1}, err) < 0)
        return -1;
    char proot[64];
    snprintf(proot, sizeof(proot), "/proc/%d/root", (int)l->sb->init_pid);
    int rootfd = open(proot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return gbx_err_set(err, errno, GBX_ERR_UNAVAILABLE, "sandbox '%s' is not running (%s)",
                           l->sb->id, strerror(errno));
    struct pub *p = gbx_xcalloc(1, sizeof(*p));
    p->s = s;
    p->who = *who;
    p->done = done;
    p->arg = arg;
    p->rootfd = rootfd;
    p->host_uid = l->sb->host_uid;
    p->max_bytes = spec->max_bytes;
    p->path = gbx_xstrdup(spec->path);
    const char *slash = strrchr(spec->path, '/');
    const char *base = slash ? slash + 1 : spec->path;
    p->name = gbx_xstrdup(spec->name ? spec->name : *base ? base : spec->path);
    p->session = spec->session ? gbx_xstrdup(spec->session) : NULL;
    p->sandbox = gbx_xstrdup(l->sb->id);
    p->metadata = gbx_xstrdup(spec->metadata ? spec->metadata : "{}");
    p->dir = art_dir(s);
    int r = gbx_offload_submit(gbx_server_offload(s), publish_work, publish_done, p);
    if (r < 0) {
        pub_free(p);
        return gbx_err_set(err, -r, GBX_ERR_UNAVAILABLE, "cannot queue the publish: %s",
                           strerror(-r));
    }
    return 0;
}

/* ---- rows as an actor sees them -------------------------------------------------------------- */

struct visible {
    const struct gbx_actor *who;
    gbx_store_artifact_fn fn;
    void *arg;
    int seen;
};

static int visible_row(void *arg, const struct gbx_store_artifact *a)
{
    struct visible *v = arg;
    if (!gbx_actor_sees(v->who, a->owner))
        return 1;
    v->seen = 1;
    return v->fn ? v->fn(v->arg, a) : 1;
}

int gbx_artifacts_get(struct gbx_server *s, const struct gbx_actor *who, const char *id,
                      gbx_store_artifact_fn fn, void *arg, struct gbx_err **err)
{
    struct visible v = {.who = who, .fn = fn, .arg = arg};
    int r = strlen(id) < 32 ? gbx_store_artifacts_get(gbx_server_store(s), id, visible_row, &v, err)
                            : 0;
    if (r < 0)
        return -1;
    if (r == 0 || !v.seen)
        return gbx_err_set(err, 0, GBX_ERR_NOT_FOUND, "artifact '%s' not found", id);
    return 1;
}

static int row_created(void *arg, const struct gbx_store_artifact *a)
{
    *(int64_t *)arg = a->created_ns;
    return 1;
}

int gbx_artifacts_list(struct gbx_server *s, const struct gbx_actor *who,
                       const struct gbx_store_artifact_filter *f, gbx_store_artifact_fn fn,
                       void *arg, struct gbx_err **err)
{
    struct gbx_store_artifact_filter mine = *f;
    mine.owner = who->admin ? NULL : who->owner;
    mine.after_ns = 0;
    if (mine.after_id) {
        gbx_autoerr struct gbx_err *gerr = NULL;
        if (gbx_artifacts_get(s, who, mine.after_id, row_created, &mine.after_ns, &gerr) < 0)
            return gbx_err_set(err, 0, GBX_ERR_INVALID,
                               "'after' must be an artifact id (use next_after)");
    }
    return gbx_store_artifacts_list(gbx_server_store(s), &mine, fn, arg, err) < 0 ? -1 : 0;
}

/* ---- reading and deleting -------------------------------------------------------------------- */

static int blob_row(void *arg, const struct gbx_store_artifact *a)
{
    struct gbx_artifact_blob *b = arg;
    snprintf(b->sha256, sizeof(b->sha256), "%s", a->sha256);
    snprintf(b->kind, sizeof(b->kind), "%s", a->kind);
    return 1;
}

int gbx_artifacts_open(struct gbx_server *s, const struct gbx_actor *who, const char *id,
                       struct gbx_artifact_blob *b, struct gbx_err **err)
{
    memset(b, 0, sizeof(*b));
    b->fd = -1;
    if (gbx_artifacts_get(s, who, id, blob_row, b, err) < 0)
        return -1;
    char *dir = art_dir(s);
    char *blob = gbx_asprintf("%s/%s", dir, b->sha256);
    free(dir);
    int fd = open(blob, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        free(blob);
        return gbx_err_set(err, e, GBX_ERR_INTERNAL, "artifact '%s': its blob is missing (%s)", id,
                           strerror(e));
    }
    free(blob);
    b->fd = fd;
    b->size = (uint64_t)st.st_size;
    return 0;
}

int gbx_artifacts_delete_as(struct gbx_server *s, const struct gbx_actor *who, const char *id,
                            gbx_store_artifact_fn fn, void *arg, struct gbx_err **err)
{
    if (gbx_artifacts_get(s, who, id, fn, arg, err) < 0)
        return -1;
    int r = gbx_artifacts_delete(s, id, err);
    if (r == 0)
        return gbx_err_set(err, 0, GBX_ERR_NOT_FOUND, "artifact '%s' not found", id);
    return r < 0 ? -1 : 1;
}
