/* SPDX-License-Identifier: MIT */
/* A session's workspace checkpoint: a copy of its workdir on the host
 * (<state>/sessions/<id>/workspace), brought up to date after every mutating call, before the
 * call is answered, at a cost proportional to what changed:
 *
 *   write, edit   the daemon has the new content: one local file write
 *   bash          one LIST of the workdir (metadata only); files whose size, mode or mtime
 *                 differ from the manifest are read back, files gone are removed
 *
 * When the session's sandbox is gone, the next call restores the copy into the new sandbox's
 * workdir before it runs. Regular files only (with their permission bits): symlinks, empty
 * directories, owners and special files are not kept; a file over 64 MiB is skipped (the log
 * says so). */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/frame.h"
#include "agent/proto.h"
#include "session/sessions_int.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"

#define CKPT_FILE_MAX (64u << 20)
#define CKPT_DEPTH 32
#define CHUNK (64u * 1024u)

struct ckpt_entry {
    char *rel;
    uint64_t size;
    int64_t mtime_ns;
    uint32_t mode;
    int seen;
};

struct gbx_ckpt_job {
    struct gbx_call *c;
    void (*done)(struct gbx_call *c);
    void (*rdone)(struct gbx_call *c, int ok);
    struct ckpt_entry *todo; /* files to fetch (after bash) or to put back (restore) */
    size_t ntodo, captodo, i;
    struct evbuffer *buf;
    uint32_t handle;
    int failed;
    int refresh;  /* a listing after a restore: learn the restored files' metadata */
    size_t nlost; /* files of the workspace the copy could not take (a full disk, say) */
    char *lost;   /* the first of them */
    int lost_err; /* and why */
};

static struct ckpt_entry *manifest_find(struct gbx_session *ses, const char *rel)
{
    for (size_t i = 0; i < ses->nmanifest; i++)
        if (strcmp(ses->manifest[i].rel, rel) == 0)
            return &ses->manifest[i];
    return NULL;
}

static struct ckpt_entry *manifest_put(struct gbx_session *ses, const char *rel)
{
    struct ckpt_entry *e = manifest_find(ses, rel);
    if (e)
        return e;
    if (ses->nmanifest == ses->capmanifest) {
        ses->capmanifest = ses->capmanifest ? 2 * ses->capmanifest : 64;
        ses->manifest = gbx_xrealloc(ses->manifest, ses->capmanifest * sizeof(*ses->manifest));
    }
    e = &ses->manifest[ses->nmanifest++];
    memset(e, 0, sizeof(*e));
    e->rel = gbx_xstrdup(rel);
    return e;
}

static void todo_push(struct gbx_ckpt_job *j, const char *rel, uint64_t size, int64_t mt,
                      uint32_t mode)
{
    if (j->ntodo == j->captodo) {
        j->captodo = j->captodo ? 2 * j->captodo : 32;
        j->todo = gbx_xrealloc(j->todo, j->captodo * sizeof(*j->todo));
    }
    j->todo[j->ntodo++] = (struct ckpt_entry){gbx_xstrdup(rel), size, mt, mode, 0};
}

static void job_free(struct gbx_ckpt_job *j)
{
    for (size_t i = 0; i < j->ntodo; i++)
        free(j->todo[i].rel);
    free(j->todo);
    if (j->buf)
        evbuffer_free(j->buf);
    free(j->lost);
    free(j);
}

void gbx_session_ckpt_free(struct gbx_session *ses)
{
    for (size_t i = 0; i < ses->nmanifest; i++)
        free(ses->manifest[i].rel);
    free(ses->manifest);
    ses->manifest = NULL;
    ses->nmanifest = ses->capmanifest = 0;
    if (ses->ckpt)
        job_free(ses->ckpt);
    ses->ckpt = NULL;
    free(ses->ckpt_dir);
    ses->ckpt_dir = NULL;
}

/* The path below the workdir, or NULL when path is not below it. */
static const char *rel_of(const struct gbx_session *ses, const char *path)
{
    size_t n = strlen(ses->workdir);
    while (n > 1 && ses->workdir[n - 1] == '/')
        n--;
    if (strncmp(path, ses->workdir, n) != 0 || path[n] != '/' || path[n + 1] == '\0')
        return NULL;
    return path + n + 1;
}

static int mirror_write(struct gbx_session *ses, const char *rel, const void *data, size_t len,
                        uint32_t mode)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", ses->ckpt_dir, rel);
    gbx_autofree char *dir = gbx_xstrdup(p);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    int r = gbx_mkdir_p(dir, 0700);
    if (r < 0)
        return r;
    r = gbx_write_file_atomic(p, data, len, (mode_t)(mode & 0777 ? mode & 0777 : 0644));
    return r;
}

static void mirror_remove(struct gbx_session *ses, const char *rel)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", ses->ckpt_dir, rel);
    (void)unlink(p);
}

/* ---- after a call ------------------------------------------------------------------------- */

/* The copy could not take what the call changed: the answer says so (it is recorded with the
 * result), so that nobody takes the change for kept should the sandbox be lost. */
static void ckpt_lost(struct gbx_call *c, const char *rel, size_t n, int e)
{
    gbx_log_warn("session '%s': the workspace checkpoint could not take '%s'%s: %s", c->ses->id,
                 rel, n > 1 ? " and others" : "", strerror(e));
    json_t *content = json_object_get(c->result, "content");
    if (!json_is_array(content))
        return;
    gbx_autofree char *text = gbx_asprintf(
        "Warning: the workspace checkpoint could not be brought up to date (%s%s: %s). The "
        "change is in the sandbox, but if the sandbox is lost it is not restored.",
        rel, n > 1 ? " and other files" : "", strerror(e));
    json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", text));
}

static void fetch_next(struct gbx_ckpt_job *j);

static void job_finish(struct gbx_ckpt_job *j)
{
    struct gbx_call *c = j->c;
    c->ses->ckpt = NULL;
    void (*done)(struct gbx_call *) = j->done;
    if (j->nlost)
        ckpt_lost(c, j->lost, j->nlost, j->lost_err);
    job_free(j);
    done(c);
}

static void fetched(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_ckpt_job *j = arg;
    if (!final) {
        struct gbx_attr a;
        if (h && h->type == GBX_EV_DATA && gbx_attrs_find(p, h->len, GBX_A_DATA, &a) == 1)
            evbuffer_add(j->buf, a.data, a.len);
        return;
    }
    struct gbx_session *ses = j->c->ses;
    struct ckpt_entry *t = &j->todo[j->i];
    if (h && h->type == GBX_MSG_OK) {
        size_t len = evbuffer_get_length(j->buf);
        int r = mirror_write(ses, t->rel, evbuffer_pullup(j->buf, -1), len, t->mode);
        if (r == 0) {
            struct ckpt_entry *e = manifest_put(ses, t->rel);
            e->size = t->size;
            e->mtime_ns = t->mtime_ns;
            e->mode = t->mode;
        } else if (j->nlost++ == 0) {
            j->lost = gbx_xstrdup(t->rel);
            j->lost_err = -r;
        }
    } else if (h == NULL) {
        return job_finish(j); /* the sandbox went away: keep what we have */
    }
    /* a file that vanished meanwhile: skipped */
    evbuffer_drain(j->buf, evbuffer_get_length(j->buf));
    j->i++;
    fetch_next(j);
}

static void fetch_next(struct gbx_ckpt_job *j)
{
    struct gbx_session *ses = j->c->ses;
    while (j->i < j->ntodo && j->todo[j->i].size > CKPT_FILE_MAX) {
        gbx_log_warn("session '%s': '%s' is over %u MiB and is not checkpointed", ses->id,
                     j->todo[j->i].rel, CKPT_FILE_MAX >> 20);
        j->i++;
    }
    if (j->i >= j->ntodo || ses->ac == NULL || gbx_aconn_lost(ses->ac))
        return job_finish(j);
    gbx_autofree char *path = gbx_asprintf("%s/%s", ses->workdir, j->todo[j->i].rel);
    struct gbx_msg *m = gbx_aconn_begin(ses->ac, GBX_MSG_READ);
    gbx_msg_put_str(m, GBX_A_PATH, path);
    gbx_msg_put_u64(m, GBX_A_LENGTH, CKPT_FILE_MAX);
    if (gbx_aconn_send(ses->ac, fetched, j) < 0)
        job_finish(j);
}

static void listed_entry(struct gbx_ckpt_job *j, const uint8_t *p, size_t len)
{
    struct gbx_session *ses = j->c->ses;
    char name[4096];
    uint32_t ft = 0, mode = 0644;
    uint64_t size = 0, mt = 0;
    if (gbx_attrs_get_str(p, len, GBX_A_NAME, name, sizeof(name)) != 1)
        return;
    (void)gbx_attrs_get_u32(p, len, GBX_A_FTYPE, &ft);
    (void)gbx_attrs_get_u32(p, len, GBX_A_MODE, &mode);
    (void)gbx_attrs_get_u64(p, len, GBX_A_SIZE, &size);
    (void)gbx_attrs_get_u64(p, len, GBX_A_MTIME_NS, &mt);
    if (ft != GBX_FT_FILE)
        return;
    if (j->refresh) { /* the restored files as they are now: unchanged for the next diff */
        struct ckpt_entry *r = manifest_find(ses, name);
        if (r) {
            r->size = size;
            r->mtime_ns = (int64_t)mt;
            r->mode = mode;
        }
        return;
    }
    struct ckpt_entry *e = manifest_find(ses, name);
    if (e)
        e->seen = 1;
    if (e && e->size == size && e->mtime_ns == (int64_t)mt && e->mode == mode)
        return; /* unchanged */
    todo_push(j, name, size, (int64_t)mt, mode);
}

static void listed(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_ckpt_job *j = arg;
    struct gbx_session *ses = j->c->ses;
    if (!final) {
        struct gbx_attr_iter it;
        struct gbx_attr a;
        if (h == NULL || h->type != GBX_EV_DIRENT)
            return;
        gbx_attr_iter_init(&it, p, h->len);
        while (gbx_attr_next(&it, &a) == 1)
            if (a.tag == GBX_A_ENTRY)
                listed_entry(j, a.data, a.len);
        return;
    }
    if (j->refresh) {
        struct gbx_call *c = j->c;
        void (*rdone)(struct gbx_call *, int) = j->rdone;
        ses->ckpt = NULL;
        job_free(j);
        return rdone(c, 1);
    }
    if (h == NULL || h->type != GBX_MSG_OK)
        return job_finish(j); /* nothing listed: nothing changes in the copy */
    /* files gone from the workdir leave the copy */
    for (size_t i = 0; i < ses->nmanifest;) {
        if (!ses->manifest[i].seen) {
            mirror_remove(ses, ses->manifest[i].rel);
            free(ses->manifest[i].rel);
            ses->manifest[i] = ses->manifest[--ses->nmanifest];
            continue;
        }
        ses->manifest[i].seen = 0;
        i++;
    }
    fetch_next(j);
}

void gbx_session_ckpt_after(struct gbx_call *c, const char *file, const void *content, size_t len,
                            void (*done)(struct gbx_call *c))
{
    struct gbx_session *ses = c->ses;
    if (file) {
        const char *rel = rel_of(ses, file);
        json_t *blocks = json_object_get(c->result, "content");
        if (rel == NULL && json_is_array(blocks)) {
            /* said, so that nobody takes it for kept: the checkpoint is of the workdir */
            gbx_autofree char *text = gbx_asprintf(
                "Note: %s is outside the workspace (%s), which alone is checkpointed: if the "
                "sandbox is lost, this change is not restored.",
                file, ses->workdir);
            json_array_append_new(blocks, json_pack("{s:s,s:s}", "type", "text", "text", text));
        }
        int r = rel && len <= CKPT_FILE_MAX ? mirror_write(ses, rel, content, len, 0644) : 1;
        if (r == 0) {
            struct ckpt_entry *e = manifest_put(ses, rel);
            e->size = len;
            e->mtime_ns = -1; /* the next listing refreshes it (one read back) */
            e->mode = 0644;
        } else if (r < 0) {
            ckpt_lost(c, rel, 1, -r);
        }
        return done(c);
    }
    if (ses->ac == NULL || gbx_aconn_lost(ses->ac))
        return done(c);
    struct gbx_ckpt_job *j = gbx_xcalloc(1, sizeof(*j));
    j->c = c;
    j->done = done;
    j->buf = evbuffer_new();
    ses->ckpt = j;
    struct gbx_msg *m = gbx_aconn_begin(ses->ac, GBX_MSG_LIST);
    gbx_msg_put_str(m, GBX_A_PATH, ses->workdir);
    gbx_msg_put_u32(m, GBX_A_DEPTH, CKPT_DEPTH);
    if (gbx_aconn_send(ses->ac, listed, j) < 0)
        job_finish(j);
}

/* ---- restore into a new sandbox ---------------------------------------------------------------
 */

static struct gbx_ckpt_job *walking; /* nftw has no argument: the job being filled */
static const char *walk_root;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type != FTW_F || !S_ISREG(st->st_mode))
        return 0;
    const char *rel = path + strlen(walk_root) + 1;
    todo_push(walking, rel, (uint64_t)st->st_size, 0, st->st_mode & 0777);
    return 0;
}

static void put_next(struct gbx_ckpt_job *j);

static void restore_finish(struct gbx_ckpt_job *j, int ok)
{
    struct gbx_call *c = j->c;
    struct gbx_session *ses = c->ses;
    ses->ckpt = NULL;
    void (*rdone)(struct gbx_call *, int) = j->rdone;
    /* the copy is the new sandbox's content: one listing learns the new files' mtimes, so
     * the next checkpoint reads back only what changes after this */
    for (size_t i = 0; i < ses->nmanifest; i++)
        ses->manifest[i].mtime_ns = -1;
    gbx_log_info("session '%s': restored %zu files into sandbox '%s'", ses->id, j->i,
                 ses->sandbox_id);
    if (ok && ses->ac && !gbx_aconn_lost(ses->ac)) {
        j->refresh = 1;
        ses->ckpt = j;
        struct gbx_msg *m = gbx_aconn_begin(ses->ac, GBX_MSG_LIST);
        gbx_msg_put_str(m, GBX_A_PATH, ses->workdir);
        gbx_msg_put_u32(m, GBX_A_DEPTH, CKPT_DEPTH);
        if (gbx_aconn_send(ses->ac, listed, j) >= 0)
            return;
        ses->ckpt = NULL;
    }
    job_free(j);
    rdone(c, ok);
}

static void put_done(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_ckpt_job *j = arg;
    if (!final)
        return;
    if (h == NULL)
        return restore_finish(j, 0);
    if (h->type != GBX_MSG_OK)
        j->failed++;
    j->i++;
    put_next(j);
}

static void put_opened(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_ckpt_job *j = arg;
    if (!final)
        return;
    struct gbx_session *ses = j->c->ses;
    if (h == NULL)
        return restore_finish(j, 0);
    if (h->type != GBX_MSG_OK || gbx_attrs_get_u32(p, h->len, GBX_A_HANDLE, &j->handle) != 1) {
        j->failed++;
        j->i++;
        return put_next(j);
    }
    size_t len = evbuffer_get_length(j->buf);
    const uint8_t *bytes = evbuffer_pullup(j->buf, -1);
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        struct gbx_msg *m = gbx_aconn_begin(ses->ac, GBX_MSG_WRITE_DATA);
        gbx_msg_put_u32(m, GBX_A_HANDLE, j->handle);
        gbx_aconn_put_data(m, bytes + off, NULL, n);
        (void)gbx_aconn_send(ses->ac, NULL, NULL);
    }
    struct gbx_msg *m = gbx_aconn_begin(ses->ac, GBX_MSG_WRITE_END);
    gbx_msg_put_u32(m, GBX_A_HANDLE, j->handle);
    gbx_msg_put_u32(m, GBX_A_COMMIT, 1);
    if (gbx_aconn_send(ses->ac, put_done, j) < 0)
        restore_finish(j, 0);
}

static void put_next(struct gbx_ckpt_job *j)
{
    struct gbx_session *ses = j->c->ses;
    if (j->i >= j->ntodo)
        return restore_finish(j, j->failed == 0);
    struct ckpt_entry *t = &j->todo[j->i];
    gbx_autofree char *src = gbx_asprintf("%s/%s", ses->ckpt_dir, t->rel);
    gbx_autofree char *data = NULL;
    size_t len = 0;
    evbuffer_drain(j->buf, evbuffer_get_length(j->buf));
    if (gbx_read_file(src, CKPT_FILE_MAX, &data, &len) < 0) {
        j->failed++;
        j->i++;
        return put_next(j);
    }
    evbuffer_add(j->buf, data, len);
    gbx_autofree char *dst = gbx_asprintf("%s/%s", ses->workdir, t->rel);
    struct gbx_msg *m = gbx_aconn_begin(ses->ac, GBX_MSG_WRITE);
    gbx_msg_put_str(m, GBX_A_PATH, dst);
    gbx_msg_put_u32(m, GBX_A_MODE, t->mode ? t->mode : 0644);
    gbx_msg_put_u32(m, GBX_A_WFLAGS, GBX_W_CREATE | GBX_W_TRUNC | GBX_W_ATOMIC | GBX_W_PARENTS);
    if (gbx_aconn_send(ses->ac, put_opened, j) < 0)
        restore_finish(j, 0);
}

static void workdir_made(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_ckpt_job *j = arg;
    if (!final)
        return;
    if (h == NULL || h->type != GBX_MSG_OK)
        return restore_finish(j, 0);
    put_next(j);
}

void gbx_session_ckpt_restore(struct gbx_call *c, void (*done)(struct gbx_call *c, int ok))
{
    struct gbx_session *ses = c->ses;
    gbx_autoerr struct gbx_err *err = NULL;
    struct gbx_aconn *ac = gbx_session_agent(ses, &err);
    if (ac == NULL)
        return done(c, 0);
    struct gbx_ckpt_job *j = gbx_xcalloc(1, sizeof(*j));
    j->c = c;
    j->rdone = done;
    j->buf = evbuffer_new();
    ses->ckpt = j;
    struct stat st;
    if (stat(ses->ckpt_dir, &st) == 0) {
        walking = j;
        walk_root = ses->ckpt_dir;
        (void)nftw(ses->ckpt_dir, walk_one, 16, FTW_PHYS);
        walking = NULL;
    }
    struct gbx_msg *m = gbx_aconn_begin(ac, GBX_MSG_MKDIR);
    gbx_msg_put_str(m, GBX_A_PATH, ses->workdir);
    gbx_msg_put_u32(m, GBX_A_PARENTS, 1);
    if (gbx_aconn_send(ac, workdir_made, j) < 0)
        restore_finish(j, 0);
}
