/* SPDX-License-Identifier: MIT */
/* The templates service (see templates.h). Listing and inspecting read a few small
 * template.conf files on the loop (like a create does); imports, Debian builds and the
 * removal of a deleted template's tree run on the worker threads. A build's progress lines
 * are appended by its worker under a mutex (template_log.c) and handed to its watchers by a
 * timer on the loop. */
#include "core/templates.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/offload.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "core/snapshots.h"
#include "core/template_log.h"
#include "base/clock.h"
#include "base/fault.h"
#include "base/jsontext.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/backend.h"
#include "sandbox/debootstrap.h"
#include "sandbox/oci.h"
#include "sandbox/template.h"

#define MAX_RECORDS 64 /* finished builds remembered (for GET and late watchers) */
#define MAX_IMAGE_ENTRIES 2000000
#define TICK_US 100000

struct gbx_templates_watch {
    struct gbx_templates_watch *next;
    gbx_templates_event_fn on_event;
    gbx_templates_end_fn on_end;
    void *arg;
    size_t sent; /* events given so far */
    int gone;    /* unwatched: forgotten at the next flush */
};

enum build_state { B_BUILDING, B_READY, B_FAILED };

struct build {
    struct build *next;
    int refs; /* the registry's and the running job's (loop thread only) */
    struct gbx_server *srv;
    char *name, *kind, *source, *state_dir, *actor;
    int64_t started_ns, finished_ns;
    enum build_state state;
    /* the job's inputs */
    char *path;            /* an image archive on the host (admin), or NULL */
    struct evbuffer *body; /* an uploaded archive, or NULL */
    struct gbx_deb_opts deb;
    char *suite, *mirror, *variant;
    char **include;
    char *conf_extra; /* description=, start=, ready= lines */
    uint64_t max_bytes;
    volatile int cancel;
    int64_t deadline_ns; /* monotonic: cancelled then (--helper-timeout) */
    volatile int timed_out;
    /* written by the worker, read by the loop (its own mutex) */
    struct gbx_tlog log;
    /* the result (worker, then read by the loop after done) */
    int failed;
    struct gbx_err *err;
    /* loop only */
    struct gbx_templates_watch *watches;
};

static struct {
    struct build *list;
    struct event *tick;
    int shut;
} reg;

/* ---- records ------------------------------------------------------------------------------ */

static void build_unref(struct build *b)
{
    if (b == NULL || --b->refs > 0)
        return;
    free(b->name);
    free(b->kind);
    free(b->source);
    free(b->state_dir);
    free(b->actor);
    free(b->path);
    if (b->body)
        evbuffer_free(b->body);
    free(b->suite);
    free(b->mirror);
    free(b->variant);
    for (size_t i = 0; b->include && b->include[i]; i++)
        free(b->include[i]);
    free(b->include);
    free(b->conf_extra);
    gbx_tlog_release(&b->log);
    gbx_err_free(b->err);
    free(b);
}

static struct build *find(const char *name)
{
    for (struct build *b = reg.list; b; b = b->next)
        if (strcmp(b->name, name) == 0)
            return b;
    return NULL;
}

static void unlink_build(struct build *b)
{
    for (struct build **pp = &reg.list; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            b->next = NULL;
            return;
        }
}

/* Drop finished records beyond MAX_RECORDS (oldest first: the list is newest first). */
static void trim(void)
{
    size_t n = 0;
    for (struct build **pp = &reg.list; *pp;) {
        struct build *b = *pp;
        if (b->state != B_BUILDING && b->watches == NULL && ++n > MAX_RECORDS) {
            *pp = b->next;
            build_unref(b);
            continue;
        }
        pp = &b->next;
    }
}

static const char *state_name(enum build_state s)
{
    return s == B_BUILDING ? "building" : s == B_READY ? "ready" : "failed";
}

static const char *state_dir_of(struct gbx_server *s)
{
    return gbx_server_runtime(s)->state_dir;
}

/* ---- progress (worker side) ---------------------------------------------------------------- */

static void oci_progress(void *arg, const char *phase, const char *detail, unsigned step,
                         unsigned steps)
{
    struct build *b = arg;
    gbx_autofree char *line = gbx_asprintf("%s %s", phase, detail);
    gbx_tlog_progress(&b->log, phase, NULL, step, steps, line);
}

static void deb_progress(void *arg, const struct gbx_deb_progress *p)
{
    struct build *b = arg;
    gbx_tlog_progress(&b->log, gbx_deb_phase_name(p->phase), p->package, p->step, p->total,
                      p->line);
}

static void build_work(void *arg)
{
    struct build *b = arg;
    gbx_template_gc(b->state_dir); /* what earlier daemons left behind */
    gbx_fault_point("template.build");
    struct gbx_err *err = NULL;
    int r;
    if (b->cancel) {
        r = gbx_err_set(&err, ECANCELED, GBX_ERR_UNAVAILABLE, "cancelled");
    } else if (strcmp(b->kind, "debian") == 0) {
        b->deb.progress = deb_progress;
        b->deb.arg = b;
        b->deb.cancel = &b->cancel;
        b->deb.conf_extra = b->conf_extra;
        r = gbx_template_build_debian(b->state_dir, b->name, &b->deb, &err);
    } else {
        struct gbx_oci_opts o = {.max_bytes = b->max_bytes,
                                 .max_entries = MAX_IMAGE_ENTRIES,
                                 .progress = oci_progress,
                                 .arg = b,
                                 .cancel = &b->cancel,
                                 .conf_extra = b->conf_extra};
        struct gbx_oci_stats st = {0};
        const void *data = NULL;
        size_t len = 0;
        if (b->body) {
            len = evbuffer_get_length(b->body);
            data = evbuffer_pullup(b->body, -1);
        }
        r = gbx_oci_import(b->state_dir, b->name, b->path, data, len, b->path ? b->path : "upload",
                           &o, &st, &err);
        if (r == 0 && st.devices_skipped) {
            gbx_autofree char *note =
                gbx_asprintf("skipped %llu device nodes (sandboxes get their own /dev)",
                             (unsigned long long)st.devices_skipped);
            gbx_tlog_progress(&b->log, "note", NULL, 0, 0, note);
        }
    }
    if (b->body) {
        evbuffer_free(b->body); /* the upload is no longer needed */
        b->body = NULL;
    }
    b->failed = r < 0;
    (void)gbx_err_state_disk(&err); /* a build writes into the state dir */
    b->err = err;
}

/* ---- progress (loop side) ----------------------------------------------------------------- */

static void flush(struct build *b)
{
    if (b->watches == NULL)
        return;
    for (struct gbx_templates_watch *w = b->watches; w; w = w->next)
        if (!w->gone)
            w->sent = gbx_tlog_each(&b->log, w->sent, w->on_event, w->arg);
    /* forget watches whose watcher left */
    for (struct gbx_templates_watch **pp = &b->watches; *pp;) {
        if ((*pp)->gone) {
            struct gbx_templates_watch *dead = *pp;
            *pp = dead->next;
            free(dead);
        } else {
            pp = &(*pp)->next;
        }
    }
}

static void end_watches(struct build *b)
{
    flush(b);
    while (b->watches) {
        struct gbx_templates_watch *w = b->watches;
        b->watches = w->next;
        if (!w->gone)
            w->on_end(w->arg);
        free(w);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    int busy = 0;
    int64_t now = gbx_monotonic_ns();
    for (struct build *b = reg.list; b; b = b->next)
        if (b->state == B_BUILDING) {
            flush(b);
            busy = 1;
            /* a build past the helper deadline is stopped like a cancelled one */
            if (b->deadline_ns && now > b->deadline_ns && !b->cancel) {
                b->timed_out = 1;
                b->cancel = 1;
            }
        }
    if (!busy && reg.tick)
        event_del(reg.tick);
}

static void tick_start(struct event_base *base)
{
    if (reg.tick == NULL)
        reg.tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    struct timeval tv = {0, TICK_US};
    if (!event_pending(reg.tick, EV_TIMEOUT, NULL))
        event_add(reg.tick, &tv);
}

static void build_done(void *arg)
{
    struct build *b = arg;
    if (reg.shut) { /* the loop's records are gone: only the job's reference is left */
        build_unref(b);
        return;
    }
    b->finished_ns = gbx_realtime_ns();
    b->state = b->failed ? B_FAILED : B_READY;
    if (b->timed_out && b->failed) {
        const struct gbx_runtime *rt = gbx_server_runtime(b->srv);
        int64_t ms =
            rt->helper_timeout_ms > 0 ? rt->helper_timeout_ms : GBX_DEFAULT_HELPER_TIMEOUT_MS;
        gbx_err_free(b->err);
        b->err = NULL;
        gbx_err_set(&b->err, ETIMEDOUT, GBX_ERR_UNAVAILABLE,
                    "the build did not finish within %lld s (--helper-timeout) and was stopped; "
                    "nothing was installed",
                    (long long)(ms / 1000));
    }
    gbx_tlog_push(&b->log, gbx_tlog_end_event(b->name, b->failed, b->err));
    end_watches(b);
    if (b->failed)
        gbx_log_warn("template '%s': %s", b->name, b->err ? b->err->msg : "failed");
    else
        gbx_log_info("template '%s' is ready (%s)", b->name, b->source);
    json_t *detail = json_pack("{s:s,s:s,s:s}", "template", b->name, "source", b->source, "state",
                               state_name(b->state));
    if (b->failed && b->err)
        json_object_set_new(detail, "error", gbx_json_text(b->err->msg));
    gbx_server_audit_as(b->srv, b->actor, "template.build", NULL, detail);
    build_unref(b); /* the job's */
    trim();
}

/* ---- watchers ----------------------------------------------------------------------------- */

int gbx_templates_followable(struct gbx_server *s, const char *name, struct gbx_err **err)
{
    if (find(name))
        return 1;
    struct gbx_template_info info;
    if (gbx_template_inspect(state_dir_of(s), name, 0, &info, err) < 0)
        return -1;
    gbx_template_info_release(&info);
    return 0;
}

struct gbx_templates_watch *gbx_templates_watch(struct gbx_server *s, const char *name,
                                                gbx_templates_event_fn on_event,
                                                gbx_templates_end_fn on_end, void *arg)
{
    struct build *b = find(name);
    if (b == NULL) {
        on_end(arg);
        return NULL;
    }
    struct gbx_templates_watch *w = gbx_xcalloc(1, sizeof(*w));
    w->on_event = on_event;
    w->on_end = on_end;
    w->arg = arg;
    w->next = b->watches;
    b->watches = w;
    if (b->state != B_BUILDING) {
        end_watches(b); /* the whole history, then the end */
        return NULL;
    }
    flush(b);
    tick_start(gbx_server_base(s));
    return w;
}

void gbx_templates_unwatch(struct gbx_templates_watch *w)
{
    if (w)
        w->gone = 1; /* freed by the flush: this may be called from a watcher's callback */
}

/* ---- views -------------------------------------------------------------------------------- */

static json_t *build_json(struct build *b)
{
    gbx_autofree char *started = gbx_rfc3339(b->started_ns);
    json_t *j = json_pack("{s:s%,s:s,s:s,s:s}", "name", b->name, gbx_template_shown_len(b->name),
                          "state", state_name(b->state), "source", b->source, "started", started);
    gbx_template_owner_json(j, b->name);
    json_t *p = gbx_tlog_progress_json(&b->log);
    if (p)
        json_object_set_new(j, "progress", p);
    if (b->state == B_FAILED && b->err)
        json_object_set_new(j, "error",
                            json_pack("{s:s,s:o}", "kind", gbx_err_kind_name(b->err->kind),
                                      "message", gbx_json_text(b->err->msg)));
    return j;
}

json_t *gbx_templates_list(struct gbx_server *s, const struct gbx_actor *who, struct gbx_err **err)
{
    struct gbx_template_info *v = NULL;
    size_t n = 0;
    if (gbx_template_list(state_dir_of(s), &v, &n, err) < 0)
        return NULL;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        if (gbx_templates_visible(who, v[i].name))
            json_array_append_new(arr, gbx_template_info_json(who, &v[i]));
    gbx_template_list_free(v, n);
    for (struct build *b = reg.list; b; b = b->next)
        if (b->state == B_BUILDING && gbx_templates_visible(who, b->name))
            json_array_append_new(arr, build_json(b));
    return arr;
}

json_t *gbx_templates_show(struct gbx_server *s, const struct gbx_actor *who, const char *name,
                           struct gbx_err **err)
{
    struct build *b = find(name);
    if (b && b->state == B_BUILDING)
        return build_json(b);
    struct gbx_template_info info;
    struct gbx_err *e = NULL;
    if (gbx_template_inspect(state_dir_of(s), name, 1, &info, &e) == 0) {
        gbx_err_free(e);
        json_t *j = gbx_template_info_json(who, &info);
        gbx_template_info_release(&info);
        return j;
    }
    if (e == NULL) /* a failure always says why; never answer without one */
        gbx_err_set(&e, EIO, GBX_ERR_INTERNAL, "cannot read template '%s'", name);
    if (b && b->state == B_FAILED && e->kind == GBX_ERR_NOT_FOUND) {
        gbx_err_free(e);
        return build_json(b);
    }
    *err = e;
    return NULL;
}

/* ---- names per tenant ----------------------------------------------------------------------- */

static int stored_exists(void *arg, const char *stored)
{
    struct gbx_server *s = arg;
    struct build *b = find(stored);
    if ((b && b->state == B_BUILDING) || strcmp(stored, GBX_TEMPLATE_HOST) == 0)
        return 1;
    gbx_autofree char *dir = gbx_asprintf("%s/templates/%s", state_dir_of(s), stored);
    struct stat sb;
    return lstat(dir, &sb) == 0;
}

char *gbx_templates_ref(struct gbx_server *s, const struct gbx_actor *who, const char *name)
{
    return gbx_template_ref_of(who, name, stored_exists, s);
}

uint64_t gbx_templates_count(struct gbx_server *s, const char *owner)
{
    gbx_autofree char *dir = gbx_asprintf("%s/templates", state_dir_of(s));
    uint64_t n = gbx_template_count_dir(dir, owner);
    for (struct build *b = reg.list; b; b = b->next)
        if (b->state == B_BUILDING && strcmp(gbx_template_owner(b->name), owner) == 0)
            n++;
    return n;
}

/* ---- delete ------------------------------------------------------------------------------- */

struct in_use {
    const char *name;
    const char *id;
};

static int uses(void *arg, struct gbx_live *l)
{
    struct in_use *u = arg;
    if (l->template_name && strcmp(l->template_name, u->name) == 0) {
        u->id = l->sb->id;
        return 1;
    }
    return 0;
}

static void purge_work(void *arg)
{
    char *trash = arg;
    int r = gbx_template_remove_tree(trash);
    if (r < 0)
        gbx_log_warn("cannot remove '%s': %s", trash, strerror(-r));
    free(trash);
}

int gbx_templates_delete(struct gbx_server *s, const struct gbx_actor *who, const char *name,
                         struct gbx_err **err)
{
    if (gbx_template_owner(name)[0] == '\0' && !who->admin) {
        if (!stored_exists(s, name))
            return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "no template '%s'", name);
        return gbx_err_set(err, EPERM, GBX_ERR_PERMISSION,
                           "template '%s' is shared: the admin deletes it (the unix socket); a "
                           "key deletes its own templates",
                           name);
    }
    struct build *b = find(name);
    if (b && b->state == B_BUILDING) {
        b->cancel = 1; /* the build ends as failed ("cancelled"); nothing is installed */
        return GBX_TEMPLATES_CANCELLED;
    }
    struct in_use u = {.name = name};
    gbx_sandboxes_each_any(s, uses, &u);
    if (u.id)
        return gbx_err_set(err, EBUSY, GBX_ERR_CONFLICT, "template '%s' is in use by sandbox '%s'",
                           name, u.id);
    /* snapshots stack on it, and templates made from snapshots name it as their base */
    const char *snap = gbx_snapshots_of_template(gbx_server_snapshots(s), name);
    if (snap)
        return gbx_err_set(err, EBUSY, GBX_ERR_CONFLICT,
                           "template '%s' is in use by snapshot '%s' (delete it first)", name,
                           snap);
    gbx_autofree char *dep = gbx_template_dependent(state_dir_of(s), name);
    if (dep)
        return gbx_err_set(err, EBUSY, GBX_ERR_CONFLICT,
                           "template '%s' is the base of template '%s' (delete it first)", name,
                           dep);
    char *trash = NULL;
    struct gbx_err *e = NULL;
    if (gbx_template_trash(state_dir_of(s), name, &trash, &e) < 0) {
        if (b && e->kind == GBX_ERR_NOT_FOUND) { /* a failed build's record */
            gbx_err_free(e);
            unlink_build(b);
            build_unref(b);
            return GBX_TEMPLATES_FORGOTTEN;
        }
        *err = e;
        return -1;
    }
    if (b) {
        unlink_build(b);
        end_watches(b);
        build_unref(b);
    }
    if (gbx_offload_submit(gbx_server_offload(s), purge_work, NULL, trash) < 0) {
        gbx_log_warn("cannot queue the removal of '%s' (it goes at the next build)", trash);
        free(trash);
    }
    return GBX_TEMPLATES_DELETED;
}

/* ---- builds ------------------------------------------------------------------------------- */

/* A new build record, or NULL with *err when the name is taken. A key's template is its own
 * ("NAME@KEY" in the store); a name the built-in template or a shared template has is not for
 * a key to take. */
static struct build *new_build(struct gbx_server *s, const struct gbx_actor *who, const char *shown,
                               const char *kind, struct gbx_err **err)
{
    if (gbx_name_valid(shown) < 0) {
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                    "name: expected 1-63 of [a-z0-9-], not starting with '-'");
        return NULL;
    }
    if (!who->admin && (gbx_template_name_reserved(shown) || stored_exists(s, shown))) {
        gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT,
                    "template name '%s' is taken by a shared template; choose another", shown);
        return NULL;
    }
    if (gbx_sandboxes_quota_admit(s, who, &(struct gbx_quota_use){.templates = 1}, err) < 0)
        return NULL;
    gbx_autofree char *name = gbx_template_stored_for(who, shown);
    struct build *old = find(name);
    if (old && old->state == B_BUILDING) {
        gbx_err_set(err, EBUSY, GBX_ERR_CONFLICT, "template '%s' is being built", shown);
        return NULL;
    }
    gbx_autofree char *conf = gbx_asprintf("%s/templates/%s", state_dir_of(s), name);
    struct stat sb;
    if (strcmp(name, GBX_TEMPLATE_HOST) == 0 || lstat(conf, &sb) == 0) {
        gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "template '%s' already exists", shown);
        return NULL;
    }
    if (old) {
        unlink_build(old);
        end_watches(old);
        build_unref(old);
    }
    struct build *b = gbx_xcalloc(1, sizeof(*b));
    gbx_tlog_init(&b->log);
    b->refs = 1;
    b->srv = s;
    b->name = gbx_xstrdup(name);
    b->kind = gbx_xstrdup(kind);
    b->state_dir = gbx_xstrdup(state_dir_of(s));
    b->actor = gbx_xstrdup(who->name);
    b->started_ns = gbx_realtime_ns();
    b->state = B_BUILDING;
    return b;
}

static int start_build(struct gbx_server *s, struct build *b, struct gbx_err **err)
{
    b->refs++; /* the job's */
    const struct gbx_runtime *rt = gbx_server_runtime(s);
    b->deadline_ns =
        gbx_monotonic_ns() +
        (rt->helper_timeout_ms > 0 ? rt->helper_timeout_ms : GBX_DEFAULT_HELPER_TIMEOUT_MS) *
            1000000;
    if (gbx_offload_submit(gbx_server_offload(s), build_work, build_done, b) < 0) {
        b->refs = 1;
        build_unref(b);
        return gbx_err_set(err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "cannot queue the build");
    }
    b->next = reg.list;
    reg.list = b;
    gbx_tlog_progress(&b->log, "queued", NULL, 0, 0, NULL);
    tick_start(gbx_server_base(s));
    return 0;
}

static uint64_t max_image_bytes(struct gbx_server *s)
{
    /* an image's layers unpack to more than its archive; bound what an upload may become */
    uint64_t up = gbx_server_max_upload(s);
    uint64_t cap = 64ull << 30;
    return up > cap / 64 ? cap : up * 64;
}

json_t *gbx_templates_build(struct gbx_server *s, const struct gbx_actor *who, const char *shown,
                            const struct gbx_templates_source *src, char **stored,
                            struct gbx_err **err)
{
    const struct gbx_deb_opts *o = src->debian;
    struct build *b = NULL;
    if (o) {
        if (gbx_deb_opts_check(o, err) < 0)
            return NULL;
        for (struct build *o2 = reg.list; o2; o2 = o2->next)
            if (o2->state == B_BUILDING && strcmp(o2->kind, "debian") == 0) {
                /* one at a time: a build holds one of the two worker threads for minutes */
                gbx_err_set(err, EBUSY, GBX_ERR_UNAVAILABLE,
                            "template '%s' is being built from Debian; one Debian build at a "
                            "time",
                            o2->name);
                return NULL;
            }
        if ((b = new_build(s, who, shown, "debian", err)) == NULL)
            return NULL;
        b->suite = gbx_xstrdup(o->suite);
        b->mirror = o->mirror ? gbx_xstrdup(o->mirror) : NULL;
        b->variant = o->variant ? gbx_xstrdup(o->variant) : NULL;
        b->include = gbx_xcalloc(o->n_include + 1, sizeof(char *));
        for (size_t i = 0; i < o->n_include; i++)
            b->include[i] = gbx_xstrdup(o->include[i]);
        b->deb.suite = b->suite;
        b->deb.mirror = b->mirror;
        b->deb.variant = b->variant;
        b->deb.include = (const char *const *)b->include;
        b->deb.n_include = o->n_include;
        b->source = gbx_asprintf("debootstrap:%s", b->suite);
    } else {
        if ((b = new_build(s, who, shown, "oci", err)) == NULL)
            return NULL;
        if (src->path) {
            b->path = gbx_xstrdup(src->path);
            b->source = gbx_asprintf("oci:%s", src->path);
            b->max_bytes = 0; /* the admin's own file */
        } else {
            GBX_BUG_ON(src->upload == NULL); /* one of path, upload, debian */
            b->body = evbuffer_new();
            GBX_BUG_ON(b->body == NULL);
            evbuffer_add_buffer(b->body, src->upload); /* moves the chains: no copy */
            b->source = gbx_xstrdup("oci:upload");
            b->max_bytes = max_image_bytes(s);
        }
    }
    b->conf_extra = gbx_xstrdup(src->conf_extra ? src->conf_extra : "");
    if (start_build(s, b, err) < 0)
        return NULL;
    *stored = gbx_xstrdup(b->name);
    return build_json(b);
}

/* ---- stopping ----------------------------------------------------------------------------- */

size_t gbx_templates_drain(const char *why)
{
    size_t n = 0;
    for (struct build *b = reg.list; b; b = b->next) {
        if (b->state == B_BUILDING) {
            b->cancel = 1;
            (void)why; /* that one speaks of processes going on; a build does not */
            gbx_tlog_push(&b->log, json_pack("{s:s,s:s%,s:s}", "type", "error", "name", b->name,
                                             gbx_template_shown_len(b->name), "message",
                                             "the daemon is stopping: the build is cancelled"));
        }
        for (struct gbx_templates_watch *w = b->watches; w; w = w->next)
            n += !w->gone;
        end_watches(b);
    }
    return n;
}

void gbx_templates_shutdown(void)
{
    for (struct build *b = reg.list; b; b = b->next)
        b->cancel = 1;
    while (reg.list) {
        struct build *b = reg.list;
        reg.list = b->next;
        end_watches(b);
        build_unref(b); /* a running job keeps its own reference */
    }
    if (reg.tick) {
        event_free(reg.tick);
        reg.tick = NULL;
    }
    reg.shut = 1;
}
