/* SPDX-License-Identifier: MIT */
#include "core/snapshots.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/offload.h"
#include "core/sandboxes.h"
#include "core/spec.h"
#include "core/server.h"
#include "base/clock.h"
#include "base/fault.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/layer.h"
#include "sandbox/template.h"
#include "store/snapshots.h"

struct snap {
    struct snap *next;
    char *id, *name, *owner, *kind, *sandbox, *parent, *tmpl, *state;
    int64_t created_ns;
    uint64_t size;
};

struct take;

struct gbx_snapshots {
    struct gbx_server *s;
    char *dir; /* <state>/snapshots */
    struct snap *list;
    struct take *taking; /* snapshots being taken (their quota is reserved) */
};

static void snap_free(struct snap *p)
{
    free(p->id);
    free(p->name);
    free(p->owner);
    free(p->kind);
    free(p->sandbox);
    free(p->parent);
    free(p->tmpl);
    free(p->state);
    free(p);
}

static char *opt_dup(const char *v)
{
    return v ? gbx_xstrdup(v) : NULL;
}

static char *layer_path(const struct gbx_snapshots *ss, const char *id)
{
    return gbx_asprintf("%s/%s/layer", ss->dir, id);
}

static int load_one(void *arg, const struct gbx_store_snapshot *r)
{
    struct gbx_snapshots *ss = arg;
    struct snap *p = gbx_xcalloc(1, sizeof(*p));
    p->id = gbx_xstrdup(r->id);
    p->name = opt_dup(r->name);
    p->owner = gbx_xstrdup(r->owner ? r->owner : "");
    p->kind = gbx_xstrdup(r->kind);
    p->sandbox = gbx_xstrdup(r->sandbox);
    p->parent = opt_dup(r->parent);
    p->tmpl = gbx_xstrdup(r->template_name);
    p->state = gbx_xstrdup(r->state);
    p->created_ns = r->created_ns;
    p->size = r->size_bytes;
    /* appended: the list stays oldest first */
    struct snap **pp = &ss->list;
    while (*pp)
        pp = &(*pp)->next;
    *pp = p;
    return 0;
}

static struct snap *find_any(struct gbx_snapshots *ss, const char *id);
static void rm_work(void *arg);
static void rm_done(void *arg);

/* What a crash left: trash not yet removed, a snapshot whose row was never written. */
static void remove_strays(struct gbx_snapshots *ss)
{
    DIR *d = opendir(ss->dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || find_any(ss, e->d_name))
            continue;
        char *path = gbx_asprintf("%s/%s", ss->dir, e->d_name);
        gbx_log_info("removing '%s' (no snapshot of that id)", path);
        if (gbx_offload_submit(gbx_server_offload(ss->s), rm_work, rm_done, path) < 0)
            free(path);
    }
    closedir(d);
}

int gbx_snapshots_new(struct gbx_server *s, struct gbx_snapshots **out, struct gbx_err **err)
{
    struct gbx_snapshots *ss = gbx_xcalloc(1, sizeof(*ss));
    ss->s = s;
    ss->dir = gbx_asprintf("%s/snapshots", gbx_server_runtime(s)->state_dir);
    int r = gbx_mkdir_p(ss->dir, 0700);
    if (r < 0) {
        gbx_err_sys(err, -r, "cannot create '%s'", ss->dir);
        gbx_snapshots_free(ss);
        return -1;
    }
    if (gbx_store_snapshot_each(gbx_server_store(s), load_one, ss, err) < 0) {
        gbx_snapshots_free(ss);
        return -1;
    }
    remove_strays(ss);
    *out = ss;
    return 0;
}

void gbx_snapshots_free(struct gbx_snapshots *ss)
{
    if (ss == NULL)
        return;
    while (ss->list) {
        struct snap *n = ss->list->next;
        snap_free(ss->list);
        ss->list = n;
    }
    free(ss->dir);
    free(ss);
}

static struct snap *find_any(struct gbx_snapshots *ss, const char *id)
{
    for (struct snap *p = ss->list; p; p = p->next)
        if (strcmp(p->id, id) == 0)
            return p;
    return NULL;
}

/* By id or name, visible to who, not being deleted. */
static struct snap *find(struct gbx_snapshots *ss, const struct gbx_actor *who, const char *ref)
{
    for (struct snap *p = ss->list; p; p = p->next) {
        if (strcmp(p->state, "ready") != 0 || !gbx_actor_sees(who, p->owner))
            continue;
        if (strcmp(p->id, ref) == 0 || (p->name && strcmp(p->name, ref) == 0))
            return p;
    }
    return NULL;
}

static json_t *snap_json(const struct snap *p)
{
    gbx_autofree char *created = gbx_rfc3339(p->created_ns);
    return json_pack("{s:s,s:s?,s:s,s:s,s:s?,s:s%,s:s,s:I,s:s}", "id", p->id, "name", p->name,
                     "kind", p->kind, "sandbox", p->sandbox, "parent", p->parent, "template",
                     p->tmpl, gbx_template_shown_len(p->tmpl), "created_at", created, "size_bytes",
                     (json_int_t)p->size, "state", p->state);
}

static int save(struct gbx_snapshots *ss, const struct snap *p, struct gbx_err **err)
{
    struct gbx_store_snapshot r = {.id = p->id,
                                   .name = p->name,
                                   .owner = p->owner,
                                   .kind = p->kind,
                                   .sandbox = p->sandbox,
                                   .parent = p->parent,
                                   .template_name = p->tmpl,
                                   .state = p->state,
                                   .created_ns = p->created_ns,
                                   .size_bytes = p->size};
    return gbx_store_snapshot_put(gbx_server_store(ss->s), &r, err);
}

/* ---- references ----------------------------------------------------------------------------- */

static void mark_chain(struct gbx_snapshots *ss, const char *id, struct snap **used, size_t n)
{
    for (int depth = 0; id && depth <= GBX_MAX_LAYERS; depth++) {
        struct snap *p = find_any(ss, id);
        if (p == NULL)
            return;
        for (size_t i = 0; i < n; i++)
            if (used[i] == NULL) {
                used[i] = p;
                break;
            } else if (used[i] == p) {
                break;
            }
        id = p->parent;
    }
}

struct mark_ctx {
    struct gbx_snapshots *ss;
    struct snap **used;
    size_t n;
};

static int mark_live(void *arg, struct gbx_live *l)
{
    struct mark_ctx *m = arg;
    json_t *base = json_object_get(l->attrs, "snapshot");
    if (json_is_string(base))
        mark_chain(m->ss, json_string_value(base), m->used, m->n);
    return 0;
}

/* Is p stacked on by a live sandbox or by another snapshot (whatever its state)? */
static int in_use(struct gbx_snapshots *ss, const struct snap *p)
{
    for (struct snap *q = ss->list; q; q = q->next)
        if (q->parent && strcmp(q->parent, p->id) == 0)
            return 1;
    size_t n = 0;
    for (struct snap *q = ss->list; q; q = q->next)
        n++;
    struct mark_ctx m = {ss, gbx_xcalloc(n + 1, sizeof(struct snap *)), n + 1};
    gbx_sandboxes_each_any(ss->s, mark_live, &m);
    int used = 0;
    for (size_t i = 0; i < m.n && m.used[i]; i++)
        used |= m.used[i] == p;
    free(m.used);
    return used;
}

/* ---- removal in the background --------------------------------------------------------------- */

static void rm_work(void *arg)
{
    char *dir = arg;
    int r = gbx_rm_rf(dir);
    if (r < 0)
        gbx_log_warn("cannot remove '%s': %s", dir, strerror(-r));
}

static void rm_done(void *arg)
{
    free(arg);
}

/* Forget p and remove its files off the loop: renamed first, so the id's directory is gone at
 * once and a crash leaves only a trash directory (removed at the next start). */
static void remove_snap(struct gbx_snapshots *ss, struct snap *p)
{
    gbx_autofree char *dir = gbx_asprintf("%s/%s", ss->dir, p->id);
    char *trash = gbx_asprintf("%s/.trash-%s", ss->dir, p->id);
    struct gbx_err *err = NULL;
    if (gbx_store_snapshot_delete(gbx_server_store(ss->s), p->id, &err) < 0) {
        gbx_log_error("snapshot '%s': %s", p->id, err->msg);
        gbx_err_free(err);
    }
    if (rename(dir, trash) < 0 ||
        gbx_offload_submit(gbx_server_offload(ss->s), rm_work, rm_done, trash) < 0) {
        if (errno != ENOENT)
            gbx_log_warn("snapshot '%s': cannot remove '%s'", p->id, dir);
        free(trash);
    }
    struct snap **pp = &ss->list;
    while (*pp && *pp != p)
        pp = &(*pp)->next;
    if (*pp)
        *pp = p->next;
    gbx_server_audit_as(ss->s, "system", "snapshot.removed", p->sandbox,
                        json_pack("{s:s}", "snapshot", p->id));
    snap_free(p);
}

void gbx_snapshots_sweep(struct gbx_snapshots *ss)
{
    /* children first: removing one may free its parent, so repeat until nothing changes */
    for (int changed = 1; changed;) {
        changed = 0;
        for (struct snap *p = ss->list; p; p = p->next)
            if (strcmp(p->state, "deleting") == 0 && !in_use(ss, p)) {
                remove_snap(ss, p);
                changed = 1;
                break;
            }
    }
}

int gbx_snapshots_delete(struct gbx_snapshots *ss, const char *id, struct gbx_err **err)
{
    struct snap *p = find_any(ss, id);
    if (p == NULL || strcmp(p->state, "deleting") == 0)
        return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "snapshot '%s' not found", id);
    free(p->state);
    p->state = gbx_xstrdup("deleting");
    if (save(ss, p, err) < 0)
        return -1;
    gbx_snapshots_sweep(ss);
    return 0;
}

const char *gbx_snapshots_of_template(struct gbx_snapshots *ss, const char *tmpl)
{
    for (struct snap *p = ss->list; p; p = p->next)
        if (strcmp(p->tmpl, tmpl) == 0)
            return p->id;
    return NULL;
}

void gbx_snapshots_each(struct gbx_snapshots *ss,
                        void (*fn)(void *arg, const struct gbx_snapshot_info *i), void *arg)
{
    for (struct snap *p = ss->list; p; p = p->next) {
        struct gbx_snapshot_info i = {.id = p->id,
                                      .name = p->name,
                                      .kind = p->kind,
                                      .sandbox = p->sandbox,
                                      .state = p->state,
                                      .created_ns = p->created_ns,
                                      .size_bytes = p->size,
                                      .in_use = in_use(ss, p)};
        fn(arg, &i);
    }
}

/* ---- layers for a create ------------------------------------------------------------------ */

void gbx_snapshots_layers_free(char **layers, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(layers[i]);
    free(layers);
}

int gbx_snapshots_layers(struct gbx_snapshots *ss, const struct gbx_actor *who, const char *ref,
                         char ***layers, size_t *nlayers, const char **tmpl, const char **id,
                         struct gbx_err **err)
{
    struct snap *p = find(ss, who, ref);
    if (p == NULL)
        return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "snapshot '%s' not found", ref);
    char **v = gbx_xcalloc(GBX_MAX_LAYERS, sizeof(char *));
    size_t n = 0;
    for (struct snap *q = p; q; q = q->parent ? find_any(ss, q->parent) : NULL) {
        if (n == GBX_MAX_LAYERS) {
            gbx_snapshots_layers_free(v, n);
            return gbx_err_set(err, E2BIG, GBX_ERR_LIMIT,
                               "snapshot '%s' stacks more than %d layers; make a template of it "
                               "and start from that",
                               ref, GBX_MAX_LAYERS);
        }
        v[n++] = layer_path(ss, q->id);
    }
    *layers = v;
    *nlayers = n;
    *tmpl = p->tmpl;
    *id = p->id;
    return 0;
}

/* ---- taking a snapshot -------------------------------------------------------------------- */

struct take {
    struct gbx_snapshots *ss;
    char *sandbox;
    int upper_fd;
    uint32_t host_uid;
    int was_paused;
    struct snap *snap; /* the row to be */
    char *dir;         /* <state>/snapshots/<id> */
    struct gbx_layer_stats st;
    struct gbx_err *err;
    int64_t t0;
    struct gbx_actor who; /* who asked: the finish is recorded as theirs */
    gbx_snapshot_taken_fn done;
    void *arg;
    struct take *next; /* in ss->taking */
};

/* <runtime>/sandboxes/<id>/snapshot.freeze: there while a snapshot holds the sandbox frozen */
static char *freeze_mark_path(const struct gbx_sandbox *sb)
{
    return sb->dir ? gbx_asprintf("%s/snapshot.freeze", sb->dir) : NULL;
}

static int freeze_mark(const struct gbx_sandbox *sb, int set, struct gbx_err **err)
{
    gbx_autofree char *p = freeze_mark_path(sb);
    if (p == NULL)
        return 0;
    if (!set)
        return unlink(p) < 0 && errno != ENOENT ? -1 : 0;
    int r = gbx_write_file_atomic(p, "", 0, 0600);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot write '%s'", p);
    return 0;
}

int gbx_snapshots_unfreeze_stale(struct gbx_sandbox *sb)
{
    gbx_autofree char *p = freeze_mark_path(sb);
    if (p == NULL || access(p, F_OK) < 0)
        return 0;
    struct gbx_err *err = NULL;
    if (gbx_cgroup_freeze(&sb->cg, 0, &err) < 0) {
        gbx_log_error("sandbox '%s': %s", sb->id, err->msg);
        gbx_err_free(err);
        return -1;
    }
    (void)unlink(p);
    return 1;
}

static void take_work(void *arg)
{
    struct take *t = arg;
    gbx_fault_point("snapshot.copy");
    gbx_autofree char *layer = gbx_asprintf("%s/layer", t->dir);
    if (mkdir(t->dir, 0700) < 0) {
        gbx_err_sys(&t->err, errno, "cannot create '%s'", t->dir);
        return;
    }
    if (gbx_layer_copy(t->upper_fd, layer, t->host_uid, 0, &t->st, &t->err) < 0)
        (void)rmdir(t->dir);
}

static void sync_work(void *arg)
{
    (void)!gbx_layer_sync(arg);
}

/* A snapshot made, waiting for its snapshot.create record. */
struct taken {
    gbx_snapshot_taken_fn done;
    void *arg;
    char *id;
};

static void snap_recorded(void *arg, const struct gbx_err *aerr)
{
    struct taken *k = arg;
    if (aerr) {
        gbx_autoerr struct gbx_err *err = NULL;
        gbx_err_set(&err, aerr->errnum, aerr->kind,
                    "snapshot '%s' was made, but its audit record could not be written: %s", k->id,
                    aerr->msg);
        k->done(k->arg, NULL, err);
    } else {
        k->done(k->arg, k->id, NULL);
    }
    free(k->id);
    free(k);
}

static void take_done(void *arg)
{
    struct take *t = arg;
    struct gbx_snapshots *ss = t->ss;
    struct gbx_server *s = ss->s;
    for (struct take **pp = &ss->taking; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    struct gbx_live *l = gbx_sandboxes_find_any(s, t->sandbox);
    if (l && !t->was_paused) {
        struct gbx_err *e = NULL;
        if (gbx_sandboxes_pause(s, &t->who, l, 0, &e) < 0) {
            gbx_log_error("%s", e->msg);
            gbx_err_free(e);
        } else {
            (void)freeze_mark(l->sb, 0, NULL);
        }
    }
    if (l)
        l->busy = 0;
    close(t->upper_fd);
    if (t->err == NULL) {
        t->snap->size = t->st.bytes;
        if (save(ss, t->snap, &t->err) < 0)
            (void)!gbx_rm_rf(t->dir);
    }
    if (t->err) {
        (void)gbx_err_state_disk(&t->err); /* the copy goes to the state dir */
        t->done(t->arg, NULL, t->err);
        gbx_err_free(t->err);
        snap_free(t->snap);
    } else {
        struct snap *p = t->snap;
        struct snap **pp = &ss->list;
        while (*pp)
            pp = &(*pp)->next;
        *pp = p;
        /* durable against a crash of the machine a moment later; a crash of the daemon loses
         * nothing already (the copy is in the page cache) */
        char *d = gbx_xstrdup(t->dir);
        if (gbx_offload_submit(gbx_server_offload(s), sync_work, rm_done, d) < 0)
            free(d);
        double ms = (double)(gbx_monotonic_ns() - t->t0) / 1e6;
        gbx_log_info("snapshot '%s' of '%s': %llu bytes in %llu entries, %.2f ms", p->id,
                     p->sandbox, (unsigned long long)t->st.bytes, (unsigned long long)t->st.files,
                     ms);
        /* done (the reply) once the record is durable (api/audit.c) */
        struct taken *k = gbx_xcalloc(1, sizeof(*k));
        k->done = t->done;
        k->arg = t->arg;
        k->id = gbx_xstrdup(p->id);
        gbx_server_audit_then(s, t->who.name, "snapshot.create", p->sandbox,
                              json_pack("{s:s,s:s?,s:s,s:I,s:I,s:f}", "snapshot", p->id, "name",
                                        p->name, "kind", p->kind, "bytes", (json_int_t)t->st.bytes,
                                        "files", (json_int_t)t->st.files, "ms", ms),
                              snap_recorded, k);
    }
    free(t->dir);
    free(t->sandbox);
    free(t);
}

static char *new_id(void)
{
    unsigned char b[6];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        GBX_BUG_ON(1);
    return gbx_asprintf("sn-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
}

static int counted(const struct snap *p, const char *owner)
{
    return strcmp(p->owner, owner) == 0 && strcmp(p->kind, "hibernate") != 0;
}

uint64_t gbx_snapshots_count(const struct gbx_snapshots *ss, const char *owner)
{
    uint64_t n = 0;
    for (const struct snap *p = ss->list; p; p = p->next)
        n += counted(p, owner);
    for (const struct take *t = ss->taking; t; t = t->next)
        n += counted(t->snap, owner);
    return n;
}

/* Freeze l, copy its changes off the loop, thaw, then call done. */
void gbx_snapshots_take(struct gbx_snapshots *ss, const struct gbx_actor *who, struct gbx_live *l,
                        const char *name, const char *kind, gbx_snapshot_taken_fn done, void *arg)
{
    struct gbx_server *s = ss->s;
    struct gbx_err *err = NULL;
    if (l->busy) {
        gbx_err_set(&err, EBUSY, GBX_ERR_CONFLICT,
                    "sandbox '%s' is busy with another snapshot or rollback", l->sb->id);
        goto fail;
    }
    if (name && find(ss, who, name)) {
        gbx_err_set(&err, EEXIST, GBX_ERR_CONFLICT, "a snapshot named '%s' exists", name);
        goto fail;
    }
    if (gbx_sandboxes_quota_admit(s, who, &(struct gbx_quota_use){.snapshots = 1}, &err) < 0)
        goto fail;
    int64_t t0 = gbx_monotonic_ns();
    int lfd = -1, ufd = -1;
    if (gbx_sandbox_layer_open(l->sb, &lfd, &err) < 0)
        goto fail;
    ufd = openat(lfd, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(lfd);
    if (ufd < 0) {
        gbx_err_sys(&err, errno, "sandbox '%s': cannot open its writable layer", l->sb->id);
        goto fail;
    }
    struct take *t = gbx_xcalloc(1, sizeof(*t));
    t->was_paused = l->paused;
    /* a daemon that dies during the copy leaves the sandbox frozen: the mark tells the next
     * one it was not paused (its state, written behind, cannot) */
    if (!l->paused &&
        (freeze_mark(l->sb, 1, &err) < 0 || gbx_sandboxes_pause(s, who, l, 1, &err) < 0)) {
        (void)freeze_mark(l->sb, 0, NULL);
        close(ufd);
        free(t);
        goto fail;
    }
    gbx_fault_point("snapshot.frozen");
    l->busy = GBX_BUSY_SNAPSHOT;
    t->ss = ss;
    t->t0 = t0;
    t->who = *who;
    t->sandbox = gbx_xstrdup(l->sb->id);
    t->upper_fd = ufd;
    t->host_uid = l->sb->host_uid;
    t->done = done;
    t->arg = arg;
    struct snap *p = gbx_xcalloc(1, sizeof(*p));
    p->id = new_id();
    p->name = opt_dup(name);
    p->owner = gbx_xstrdup(l->owner);
    p->kind = gbx_xstrdup(kind);
    p->sandbox = gbx_xstrdup(l->sb->id);
    json_t *base = json_object_get(l->attrs, "snapshot");
    p->parent = json_is_string(base) ? gbx_xstrdup(json_string_value(base)) : NULL;
    p->tmpl = gbx_xstrdup(l->template_name);
    p->state = gbx_xstrdup("ready");
    p->created_ns = gbx_realtime_ns();
    t->snap = p;
    t->dir = gbx_asprintf("%s/%s", ss->dir, p->id);
    t->next = ss->taking;
    ss->taking = t;
    if (gbx_offload_submit(gbx_server_offload(s), take_work, take_done, t) < 0) {
        gbx_err_set(&t->err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
        take_done(t);
    }
    return;
fail:
    done(arg, NULL, err);
    gbx_err_free(err);
}

struct gbx_snapshot_ref gbx_snapshots_get(struct gbx_snapshots *ss, const struct gbx_actor *who,
                                          const char *ref)
{
    struct snap *p = find(ss, who, ref);
    struct gbx_snapshot_ref r = {0};
    if (p) {
        r.id = p->id;
        r.name = p->name;
        r.sandbox = p->sandbox;
        r.created_ns = p->created_ns;
    }
    return r;
}

void gbx_snapshots_each_visible(struct gbx_snapshots *ss, const struct gbx_actor *who,
                                void (*fn)(void *arg, const struct gbx_snapshot_ref *r), void *arg)
{
    for (struct snap *p = ss->list; p; p = p->next) {
        if (strcmp(p->state, "ready") != 0 || !gbx_actor_sees(who, p->owner))
            continue;
        struct gbx_snapshot_ref r = {p->id, p->name, p->sandbox, p->created_ns};
        fn(arg, &r);
    }
}

/* ---- for the front ends ------------------------------------------------------------------ */

json_t *gbx_snapshots_json(struct gbx_snapshots *ss, const char *id)
{
    struct snap *p = id ? find_any(ss, id) : NULL;
    return p ? snap_json(p) : NULL;
}

json_t *gbx_snapshots_json_of(struct gbx_snapshots *ss, const struct gbx_actor *who,
                              const char *ref)
{
    struct snap *p = find(ss, who, ref);
    return p ? snap_json(p) : NULL;
}

json_t *gbx_snapshots_list_json(struct gbx_snapshots *ss, const struct gbx_actor *who,
                                const char *sandbox, const char *kind)
{
    json_t *arr = json_array();
    for (struct snap *p = ss->list; p; p = p->next) {
        if (strcmp(p->state, "ready") != 0 || !gbx_actor_sees(who, p->owner))
            continue;
        if ((sandbox && strcmp(p->sandbox, sandbox) != 0) || (kind && strcmp(p->kind, kind) != 0))
            continue;
        json_array_append_new(arr, snap_json(p));
    }
    return arr;
}

int gbx_snapshots_in_use(struct gbx_snapshots *ss, const char *id)
{
    struct snap *p = find_any(ss, id);
    return p && in_use(ss, p);
}

/* ---- a template from a snapshot ---------------------------------------------------------- */

struct mk_tmpl {
    struct gbx_snapshots *ss;
    struct gbx_actor who;
    char *state_dir;
    struct gbx_snapshot_template t; /* its strings are owned */
    char **layers;
    struct gbx_err *err;
    gbx_snapshot_template_fn done;
    void *arg;
};

static void mk_tmpl_work(void *arg)
{
    struct mk_tmpl *m = arg;
    (void)!gbx_template_install_layers(m->state_dir, m->t.name, m->t.base,
                                       (const char *const *)m->layers, m->t.nlayers, m->t.source,
                                       &m->err);
}

static void mk_tmpl_done(void *arg)
{
    struct mk_tmpl *m = arg;
    if (m->err == NULL)
        gbx_server_audit(m->ss->s, &m->who, "template.create", "",
                         json_pack("{s:s,s:s}", "template", m->t.name, "source", m->t.source));
    m->done(m->arg, m->err ? NULL : &m->t, m->err);
    gbx_err_free(m->err);
    gbx_snapshots_layers_free(m->layers, m->t.nlayers);
    free(m->state_dir);
    free(m->t.name);
    free(m->t.base);
    free(m->t.source);
    free(m);
}

void gbx_snapshots_make_template(struct gbx_snapshots *ss, const struct gbx_actor *who,
                                 const char *ref, const char *name, gbx_snapshot_template_fn done,
                                 void *arg)
{
    struct gbx_err *err = NULL;
    struct snap *p = find(ss, who, ref);
    if (p == NULL) {
        gbx_err_set(&err, ENOENT, GBX_ERR_NOT_FOUND, "snapshot '%s' not found", ref);
        done(arg, NULL, err);
        gbx_err_free(err);
        return;
    }
    struct mk_tmpl *m = gbx_xcalloc(1, sizeof(*m));
    m->ss = ss;
    m->who = *who;
    m->done = done;
    m->arg = arg;
    gbx_autofree char *base = NULL;
    if (gbx_sandboxes_layers(ss->s, who, p->tmpl, p->id, &m->layers, &m->t.nlayers, &base, &err) <
        0) {
        done(arg, NULL, err);
        gbx_err_free(err);
        free(m);
        return;
    }
    m->t.name = gbx_xstrdup(name);
    m->t.base = gbx_xstrdup(base);
    m->t.source = gbx_asprintf("snapshot:%s", p->id);
    m->state_dir = gbx_xstrdup(gbx_server_runtime(ss->s)->state_dir);
    if (gbx_offload_submit(gbx_server_offload(ss->s), mk_tmpl_work, mk_tmpl_done, m) < 0) {
        gbx_err_set(&m->err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
        mk_tmpl_done(m);
    }
}
