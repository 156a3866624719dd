/* SPDX-License-Identifier: MIT */
/* The template routes (see templates_api.h and docs/api.yaml). Listing and inspecting read a
 * few small template.conf files on the loop (like a create does); imports, Debian builds and
 * the removal of a deleted template's tree run on the worker threads. A build's progress
 * lines are appended by its worker under a mutex and sent to /events streams by a timer on
 * the loop. */
#include "api/templates_api.h"

#include <dirent.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <pthread.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "http/http.h"
#include "http/recorded.h"
#include "core/offload.h"
#include "core/sandboxes.h"
#include "core/snapshots.h"
#include "core/server.h"
#include "base/clock.h"
#include "base/fault.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/backend.h"
#include "sandbox/debootstrap.h"
#include "sandbox/oci.h"
#include "sandbox/template.h"

#define MAX_EVENTS 5000 /* progress lines kept per build (the rest only counted) */
#define MAX_RECORDS 64  /* finished builds remembered (for GET and late /events) */
#define MAX_IMAGE_ENTRIES 2000000
#define TICK_US 100000

struct tstream {
    struct tstream *next;
    struct evhttp_request *req; /* NULL once its client left */
    size_t sent;                /* events sent so far */
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
    /* written by the worker, read by the loop, under mu */
    pthread_mutex_t mu;
    char phase[32], package[128], line[256];
    unsigned step, total;
    char **events;
    size_t nevents, dropped;
    /* the result (worker, then read by the loop after done) */
    int failed;
    struct gbx_err *err;
    /* loop only */
    struct tstream *streams;
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
    for (size_t i = 0; i < b->nevents; i++)
        free(b->events[i]);
    free(b->events);
    gbx_err_free(b->err);
    pthread_mutex_destroy(&b->mu);
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
        if (b->state != B_BUILDING && b->streams == NULL && ++n > MAX_RECORDS) {
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

/* ---- progress (worker side) ---------------------------------------------------------------- */

static void push_event(struct build *b, json_t *ev)
{
    char *t = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (t == NULL)
        return;
    pthread_mutex_lock(&b->mu);
    if (b->nevents >= MAX_EVENTS) {
        b->dropped++;
        free(t);
    } else {
        b->events = gbx_xrealloc(b->events, (b->nevents + 1) * sizeof(char *));
        b->events[b->nevents++] = t;
    }
    pthread_mutex_unlock(&b->mu);
}

static void set_progress(struct build *b, const char *phase, const char *package, unsigned step,
                         unsigned total, const char *line)
{
    pthread_mutex_lock(&b->mu);
    snprintf(b->phase, sizeof(b->phase), "%s", phase);
    snprintf(b->package, sizeof(b->package), "%s", package ? package : "");
    snprintf(b->line, sizeof(b->line), "%s", line ? line : "");
    b->step = step;
    b->total = total;
    pthread_mutex_unlock(&b->mu);
    json_t *ev = json_pack("{s:s,s:s,s:I,s:I}", "type", "progress", "phase", phase, "step",
                           (json_int_t)step, "total", (json_int_t)total);
    if (package && package[0])
        json_object_set_new(ev, "package", gbx_json_text(package));
    if (line && line[0])
        json_object_set_new(ev, "line", gbx_json_text(line));
    push_event(b, ev);
}

static void oci_progress(void *arg, const char *phase, const char *detail, unsigned step,
                         unsigned steps)
{
    struct build *b = arg;
    gbx_autofree char *line = gbx_asprintf("%s %s", phase, detail);
    set_progress(b, phase, NULL, step, steps, line);
}

static void deb_progress(void *arg, const struct gbx_deb_progress *p)
{
    struct build *b = arg;
    set_progress(b, gbx_deb_phase_name(p->phase), p->package, p->step, p->total, p->line);
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
            set_progress(b, "note", NULL, 0, 0, note);
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

static void stream_closed(struct evhttp_connection *conn, void *arg)
{
    struct tstream *st = arg;
    (void)conn;
    st->req = NULL;
}

static void flush(struct build *b)
{
    if (b->streams == NULL)
        return;
    pthread_mutex_lock(&b->mu);
    for (struct tstream *st = b->streams; st; st = st->next) {
        if (st->req == NULL || st->sent >= b->nevents)
            continue;
        struct evbuffer *out = evbuffer_new();
        GBX_BUG_ON(out == NULL);
        for (; st->sent < b->nevents; st->sent++)
            evbuffer_add_printf(out, "%s\n", b->events[st->sent]);
        evhttp_send_reply_chunk(st->req, out);
        evbuffer_free(out);
    }
    pthread_mutex_unlock(&b->mu);
    /* forget streams whose client left */
    for (struct tstream **pp = &b->streams; *pp;) {
        if ((*pp)->req == NULL) {
            struct tstream *dead = *pp;
            *pp = dead->next;
            free(dead);
        } else {
            pp = &(*pp)->next;
        }
    }
}

static void end_streams(struct build *b)
{
    flush(b);
    while (b->streams) {
        struct tstream *st = b->streams;
        b->streams = st->next;
        if (st->req) {
            evhttp_connection_set_closecb(evhttp_request_get_connection(st->req), NULL, NULL);
            evhttp_send_reply_end(st->req);
        }
        free(st);
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
    json_t *ev = json_pack("{s:s,s:s,s:s%}", "type", b->failed ? "error" : "done", "state",
                           state_name(b->state), "name", b->name, gbx_template_shown_len(b->name));
    if (b->failed && b->err) {
        json_object_set_new(ev, "message", gbx_json_text(b->err->msg));
        json_object_set_new(ev, "kind", json_string(gbx_err_kind_name(b->err->kind)));
    }
    push_event(b, ev);
    end_streams(b);
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

/* ---- JSON views --------------------------------------------------------------------------- */

static void set_json_text(json_t *o, const char *key, const char *text)
{
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    if (v)
        json_object_set_new(o, key, v);
}

/* Whose a template is: "shared" (the admin's, every key's to use), else "owner" (its key). */
static void owner_json(json_t *j, const char *stored)
{
    const char *owner = gbx_template_owner(stored);
    json_object_set_new(j, "shared", json_boolean(owner[0] == '\0'));
    if (owner[0])
        json_object_set_new(j, "owner", json_string(owner));
}

static json_t *info_json(const struct gbx_actor *who, const struct gbx_template_info *i)
{
    json_t *j = json_pack("{s:s%,s:s,s:i,s:b}", "name", i->name, gbx_template_shown_len(i->name),
                          "state", "ready", "format", i->format, "usr_host", i->usr_host);
    owner_json(j, i->name);
    if (i->description)
        json_object_set_new(j, "description", gbx_json_text(i->description));
    if (i->source && !who->admin && strncmp(i->source, "snapshot:", 9) == 0)
        json_object_set_new(j, "source", json_string("snapshot")); /* whose: not a key's to see */
    else if (i->source)
        json_object_set_new(j, "source", gbx_json_text(i->source));
    if (i->created)
        json_object_set_new(j, "created", gbx_json_text(i->created));
    if (i->generated)
        json_object_set_new(j, "size_bytes", json_integer((json_int_t)i->size_bytes));
    else
        json_object_set_new(j, "generated", json_false());
    if (i->start)
        json_object_set_new(j, "start", gbx_json_text(i->start));
    if (i->ready)
        json_object_set_new(j, "ready", gbx_json_text(i->ready));
    json_t *oci = json_object();
    set_json_text(oci, "entrypoint", i->oci_entrypoint);
    set_json_text(oci, "cmd", i->oci_cmd);
    set_json_text(oci, "env", i->oci_env);
    set_json_text(oci, "workdir", i->oci_workdir);
    if (json_object_size(oci))
        json_object_set_new(j, "oci", oci);
    else
        json_decref(oci);
    return j;
}

static json_t *build_json(struct build *b)
{
    gbx_autofree char *started = gbx_rfc3339(b->started_ns);
    json_t *j = json_pack("{s:s%,s:s,s:s,s:s}", "name", b->name, gbx_template_shown_len(b->name),
                          "state", state_name(b->state), "source", b->source, "started", started);
    owner_json(j, b->name);
    pthread_mutex_lock(&b->mu);
    if (b->phase[0]) {
        json_t *p = json_pack("{s:s,s:I,s:I}", "phase", b->phase, "step", (json_int_t)b->step,
                              "total", (json_int_t)b->total);
        if (b->package[0])
            json_object_set_new(p, "package", gbx_json_text(b->package));
        if (b->line[0])
            json_object_set_new(p, "line", gbx_json_text(b->line));
        json_object_set_new(j, "progress", p);
    }
    pthread_mutex_unlock(&b->mu);
    if (b->state == B_FAILED && b->err)
        json_object_set_new(j, "error",
                            json_pack("{s:s,s:o}", "kind", gbx_err_kind_name(b->err->kind),
                                      "message", gbx_json_text(b->err->msg)));
    return j;
}

/* ---- handlers ----------------------------------------------------------------------------- */

static void not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed (use %s)", allow);
}

static const char *state_dir_of(struct gbx_server *s)
{
    return gbx_server_runtime(s)->state_dir;
}

/* ---- names per tenant ----------------------------------------------------------------------- */

static int stored_exists(struct gbx_server *s, const char *stored)
{
    struct build *b = find(stored);
    if ((b && b->state == B_BUILDING) || strcmp(stored, GBX_TEMPLATE_HOST) == 0)
        return 1;
    gbx_autofree char *dir = gbx_asprintf("%s/templates/%s", state_dir_of(s), stored);
    struct stat sb;
    return lstat(dir, &sb) == 0;
}

char *gbx_templates_ref(struct gbx_server *s, const struct gbx_actor *who, const char *name)
{
    if (!who->admin && who->owner[0] && strchr(name, '@') == NULL) {
        char *own = gbx_asprintf("%s@%s", name, who->owner);
        if (stored_exists(s, own))
            return own;
        free(own);
    }
    return gbx_xstrdup(name);
}

int gbx_templates_visible(const struct gbx_actor *who, const char *stored)
{
    const char *owner = gbx_template_owner(stored);
    return owner[0] == '\0' || gbx_actor_sees(who, owner);
}

uint64_t gbx_templates_count(struct gbx_server *s, const char *owner)
{
    uint64_t n = 0;
    gbx_autofree char *dir = gbx_asprintf("%s/templates", state_dir_of(s));
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && gbx_template_name_valid(e->d_name) == 0 &&
            strcmp(gbx_template_owner(e->d_name), owner) == 0)
            n++;
    if (d)
        closedir(d);
    for (struct build *b = reg.list; b; b = b->next)
        if (b->state == B_BUILDING && strcmp(gbx_template_owner(b->name), owner) == 0)
            n++;
    return n;
}

/* Names a key cannot take: the built-in template's and the names E2B clients use for it. */
static int name_reserved(const char *name)
{
    static const char *const v[] = {GBX_TEMPLATE_HOST, GBX_DEFAULT_TEMPLATE, "base",
                                    "code-interpreter-v1", "default"};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        if (strcmp(name, v[i]) == 0)
            return 1;
    return 0;
}

static void handle_list(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req)
{
    struct gbx_template_info *v = NULL;
    size_t n = 0;
    struct gbx_err *err = NULL;
    if (gbx_template_list(state_dir_of(s), &v, &n, &err) < 0) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        if (gbx_templates_visible(who, v[i].name))
            json_array_append_new(arr, info_json(who, &v[i]));
    gbx_template_list_free(v, n);
    for (struct build *b = reg.list; b; b = b->next)
        if (b->state == B_BUILDING && gbx_templates_visible(who, b->name))
            json_array_append_new(arr, build_json(b));
    gbx_http_reply_json(req, 200, json_pack("{s:o}", "templates", arr));
}

static void handle_show(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req, const char *name)
{
    struct build *b = find(name);
    if (b && b->state == B_BUILDING)
        return gbx_http_reply_json(req, 200, build_json(b));
    struct gbx_template_info info;
    struct gbx_err *err = NULL;
    if (gbx_template_inspect(state_dir_of(s), name, 1, &info, &err) == 0) {
        gbx_err_free(err);
        json_t *j = info_json(who, &info);
        gbx_template_info_release(&info);
        return gbx_http_reply_json(req, 200, j);
    }
    if (err == NULL) /* a failure always says why; never answer without one */
        gbx_err_set(&err, EIO, GBX_ERR_INTERNAL, "cannot read template '%s'", name);
    if (b && b->state == B_FAILED && err->kind == GBX_ERR_NOT_FOUND) {
        gbx_err_free(err);
        return gbx_http_reply_json(req, 200, build_json(b));
    }
    gbx_http_reply_err(req, err);
    gbx_err_free(err);
}

static void handle_events(struct gbx_server *s, const struct gbx_actor *who,
                          struct event_base *base, struct evhttp_request *req, const char *name)
{
    struct build *b = find(name);
    if (b == NULL) {
        struct gbx_template_info info;
        gbx_autoerr struct gbx_err *err = NULL;
        if (gbx_template_inspect(state_dir_of(s), name, 0, &info, &err) < 0)
            return gbx_http_reply_err(req, err);
        gbx_template_info_release(&info);
    }
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    evhttp_add_header(oh, "Content-Type", "application/x-ndjson");
    evhttp_add_header(oh, "Cache-Control", "no-store");
    if (b == NULL) { /* a template that was not built by this daemon: nothing to follow */
        struct evbuffer *out = evbuffer_new();
        GBX_BUG_ON(out == NULL);
        gbx_autofree char *line =
            json_dumps(json_pack("{s:s,s:s,s:s%}", "type", "done", "state", "ready", "name", name,
                                 gbx_template_shown_len(name)),
                       JSON_COMPACT);
        evbuffer_add_printf(out, "%s\n", line);
        evhttp_send_reply(req, 200, "OK", out);
        evbuffer_free(out);
        return;
    }
    evhttp_send_reply_start(req, 200, "OK");
    struct tstream *st = gbx_xcalloc(1, sizeof(*st));
    st->req = req;
    st->next = b->streams;
    b->streams = st;
    if (b->state != B_BUILDING) {
        end_streams(b); /* the whole history, then the end */
        return;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, st);
    flush(b);
    tick_start(base);
}

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

static void handle_delete(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req, const char *name)
{
    if (gbx_template_owner(name)[0] == '\0' && !who->admin) {
        if (!stored_exists(s, name))
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no template '%s'", name);
        return gbx_http_reply_error(req, GBX_ERR_PERMISSION,
                                    "template '%s' is shared: the admin deletes it (the unix "
                                    "socket); a key deletes its own templates",
                                    name);
    }
    struct build *b = find(name);
    if (b && b->state == B_BUILDING) {
        b->cancel = 1; /* the build ends as failed ("cancelled"); nothing is installed */
        gbx_http_reply_recorded(s, who->name, "template.delete", NULL,
                               json_pack("{s:s,s:s}", "template", name, "state", "building"), req,
                               204, NULL);
        return;
    }
    struct in_use u = {.name = name};
    gbx_sandboxes_each_any(s, uses, &u);
    if (u.id)
        return gbx_http_reply_error(req, GBX_ERR_CONFLICT,
                                    "template '%s' is in use by sandbox '%s'", name, u.id);
    /* snapshots stack on it, and templates made from snapshots name it as their base */
    const char *snap = gbx_snapshots_of_template(gbx_server_snapshots(s), name);
    if (snap)
        return gbx_http_reply_error(req, GBX_ERR_CONFLICT,
                                    "template '%s' is in use by snapshot '%s' (delete it first)",
                                    name, snap);
    gbx_autofree char *dep = gbx_template_dependent(state_dir_of(s), name);
    if (dep)
        return gbx_http_reply_error(req, GBX_ERR_CONFLICT,
                                    "template '%s' is the base of template '%s' (delete it first)",
                                    name, dep);
    char *trash = NULL;
    struct gbx_err *err = NULL;
    if (gbx_template_trash(state_dir_of(s), name, &trash, &err) < 0) {
        if (b && err->kind == GBX_ERR_NOT_FOUND) { /* a failed build's record */
            gbx_err_free(err);
            unlink_build(b);
            build_unref(b);
            evhttp_send_reply(req, 204, "No Content", NULL);
            return;
        }
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    if (b) {
        unlink_build(b);
        end_streams(b);
        build_unref(b);
    }
    if (gbx_offload_submit(gbx_server_offload(s), purge_work, NULL, trash) < 0) {
        gbx_log_warn("cannot queue the removal of '%s' (it goes at the next build)", trash);
        free(trash);
    }
    gbx_http_reply_recorded(s, who->name, "template.delete", NULL,
                           json_pack("{s:s}", "template", name), req, 204, NULL);
}

/* A new build record, or NULL after replying 409 when the name is taken. A key's template
 * is its own ("NAME@KEY" in the store); a name the built-in template or a shared template
 * has is not for a key to take. */
static struct build *new_build(struct gbx_server *s, const struct gbx_actor *who,
                               struct evhttp_request *req, const char *shown, const char *kind)
{
    if (gbx_name_valid(shown) < 0) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "name: expected 1-63 of [a-z0-9-], not starting with '-'");
        return NULL;
    }
    if (!who->admin && (name_reserved(shown) || stored_exists(s, shown))) {
        gbx_http_reply_error(req, GBX_ERR_CONFLICT,
                             "template name '%s' is taken by a shared template; choose another",
                             shown);
        return NULL;
    }
    gbx_autoerr struct gbx_err *qerr = NULL;
    if (gbx_sandboxes_quota_admit(s, who, &(struct gbx_quota_use){.templates = 1}, &qerr) < 0) {
        gbx_http_reply_err(req, qerr);
        return NULL;
    }
    gbx_autofree char *name =
        who->admin ? gbx_xstrdup(shown) : gbx_asprintf("%s@%s", shown, who->owner);
    struct build *old = find(name);
    if (old && old->state == B_BUILDING) {
        gbx_http_reply_error(req, GBX_ERR_CONFLICT, "template '%s' is being built", shown);
        return NULL;
    }
    gbx_autofree char *conf = gbx_asprintf("%s/templates/%s", state_dir_of(s), name);
    struct stat sb;
    if (strcmp(name, GBX_TEMPLATE_HOST) == 0 || lstat(conf, &sb) == 0) {
        gbx_http_reply_error(req, GBX_ERR_CONFLICT, "template '%s' already exists", shown);
        return NULL;
    }
    if (old) {
        unlink_build(old);
        end_streams(old);
        build_unref(old);
    }
    struct build *b = gbx_xcalloc(1, sizeof(*b));
    pthread_mutex_init(&b->mu, NULL);
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

static void start_build(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                        struct evhttp_request *req, struct build *b)
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
        return gbx_http_reply_error(req, GBX_ERR_UNAVAILABLE, "cannot queue the build");
    }
    b->next = reg.list;
    reg.list = b;
    set_progress(b, "queued", NULL, 0, 0, NULL);
    tick_start(base);
    gbx_http_reply_recorded(s, who->name, "template.create", NULL,
                           json_pack("{s:s,s:s}", "template", b->name, "source", b->source), req,
                           202, build_json(b));
}

static uint64_t max_image_bytes(struct gbx_server *s)
{
    /* an image's layers unpack to more than its archive; bound what an upload may become */
    uint64_t up = gbx_server_max_upload(s);
    uint64_t cap = 64ull << 30;
    return up > cap / 64 ? cap : up * 64;
}

/* description, start and ready of a create body, as template.conf lines. */
static int extra_of(json_t *body, char **out, struct gbx_err **err)
{
    const char *keys[] = {"description", "start", "ready"};
    const char *v[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < 3; i++) {
        json_t *j = json_object_get(body, keys[i]);
        if (j && !json_is_string(j))
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "%s: expected a string", keys[i]);
        v[i] = json_string_value(j);
    }
    return gbx_template_conf_extra(v[0], v[1], v[2], out, err);
}

static void handle_create(struct gbx_server *s, const struct gbx_actor *who,
                          struct event_base *base, struct evhttp_request *req)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *from = json_object_get(body, "from");
    json_t *oci = json_object_get(from, "oci");
    json_t *deb = json_object_get(from, "debian");
    if (name == NULL || !json_is_object(from) || json_object_size(from) != 1 ||
        (!json_is_object(oci) && !json_is_object(deb))) {
        json_decref(body);
        return gbx_http_reply_error(
            req, GBX_ERR_INVALID,
            "expected {\"name\": ..., \"from\": {\"oci\": {\"path\": ...}} or {\"debian\": "
            "{\"suite\": ...}}}");
    }
    gbx_autofree char *extra = NULL;
    {
        gbx_autoerr struct gbx_err *err = NULL;
        if (extra_of(body, &extra, &err) < 0) {
            json_decref(body);
            return gbx_http_reply_err(req, err);
        }
    }
    if (!who->admin) {
        json_decref(body);
        return gbx_http_reply_error(
            req, GBX_ERR_PERMISSION,
            "building from a host path or from Debian is the admin's (use the unix socket); "
            "upload an image archive to POST /v1/templates/{name}/oci");
    }
    struct build *b = NULL;
    if (oci) {
        const char *path = json_string_value(json_object_get(oci, "path"));
        if (path == NULL || path[0] != '/' || strchr(path, '\n') || strlen(path) > 4096) {
            json_decref(body);
            return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                        "from.oci.path: expected an absolute path on the host");
        }
        struct stat sb;
        if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
            json_decref(body);
            return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                        "from.oci.path: '%s' is not a readable file", path);
        }
        if ((b = new_build(s, who, req, name, "oci")) == NULL) {
            json_decref(body);
            return;
        }
        b->path = gbx_xstrdup(path);
        b->source = gbx_asprintf("oci:%s", path);
        b->max_bytes = 0; /* the admin's own file */
    } else {
        struct gbx_deb_opts o = {
            .suite = json_string_value(json_object_get(deb, "suite")),
            .mirror = json_string_value(json_object_get(deb, "mirror")),
            .variant = json_string_value(json_object_get(deb, "variant")),
        };
        if (o.suite == NULL)
            o.suite = "bookworm";
        json_t *inc = json_object_get(deb, "include");
        if (inc && !json_is_array(inc)) {
            json_decref(body);
            return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                        "from.debian.include: expected an array of packages");
        }
        size_t n = json_array_size(inc);
        gbx_autofree const char **names = gbx_xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++) {
            names[i] = json_string_value(json_array_get(inc, i));
            if (names[i] == NULL) {
                json_decref(body);
                return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                            "from.debian.include: expected package names");
            }
        }
        o.include = names;
        o.n_include = n;
        gbx_autoerr struct gbx_err *err = NULL;
        if (gbx_deb_opts_check(&o, &err) < 0) {
            json_decref(body);
            return gbx_http_reply_err(req, err);
        }
        for (struct build *o2 = reg.list; o2; o2 = o2->next)
            if (o2->state == B_BUILDING && strcmp(o2->kind, "debian") == 0) {
                /* one at a time: a build holds one of the two worker threads for minutes */
                json_decref(body);
                return gbx_http_reply_error(req, GBX_ERR_UNAVAILABLE,
                                            "template '%s' is being built from Debian; one "
                                            "Debian build at a time",
                                            o2->name);
            }
        if ((b = new_build(s, who, req, name, "debian")) == NULL) {
            json_decref(body);
            return;
        }
        b->suite = gbx_xstrdup(o.suite);
        b->mirror = o.mirror ? gbx_xstrdup(o.mirror) : NULL;
        b->variant = o.variant ? gbx_xstrdup(o.variant) : NULL;
        b->include = gbx_xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
            b->include[i] = gbx_xstrdup(names[i]);
        b->deb.suite = b->suite;
        b->deb.mirror = b->mirror;
        b->deb.variant = b->variant;
        b->deb.include = (const char *const *)b->include;
        b->deb.n_include = n;
        b->source = gbx_asprintf("debootstrap:%s", b->suite);
    }
    json_decref(body);
    b->conf_extra = gbx_steal_ptr(&extra);
    start_build(s, who, base, req, b);
}

static void handle_upload(struct gbx_server *s, const struct gbx_actor *who,
                          struct event_base *base, struct evhttp_request *req, const char *name)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    if (len == 0)
        return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                    "expected the image archive (docker save, or an OCI "
                                    "layout tar) as the request body");
    if (len > gbx_server_max_upload(s))
        return gbx_http_reply_error_status(req, 413, GBX_ERR_LIMIT,
                                           "the archive is larger than --max-upload (%zu bytes)",
                                           gbx_server_max_upload(s));
    struct evkeyvalq q;
    TAILQ_INIT(&q);
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (query && evhttp_parse_query_str(query, &q) < 0)
        return gbx_http_reply_error(req, GBX_ERR_INVALID, "malformed query string");
    const char *v[3] = {NULL, NULL, NULL};
    static const char *const keys[] = {"description", "start", "ready"};
    for (struct evkeyval *kv = q.tqh_first; kv; kv = kv->next.tqe_next) {
        size_t i = 0;
        while (i < 3 && strcmp(kv->key, keys[i]) != 0)
            i++;
        if (i == 3) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "query '%s': expected description=, start=, ready=", kv->key);
            evhttp_clear_headers(&q);
            return;
        }
        v[i] = kv->value;
    }
    gbx_autofree char *extra = NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    int bad = gbx_template_conf_extra(v[0], v[1], v[2], &extra, &err) < 0;
    evhttp_clear_headers(&q);
    if (bad)
        return gbx_http_reply_err(req, err);
    struct build *b = new_build(s, who, req, name, "oci");
    if (b == NULL)
        return;
    b->conf_extra = gbx_steal_ptr(&extra);
    b->body = evbuffer_new();
    GBX_BUG_ON(b->body == NULL);
    evbuffer_add_buffer(b->body, in); /* moves the chains: no copy */
    b->source = gbx_xstrdup("oci:upload");
    b->max_bytes = max_image_bytes(s);
    start_build(s, who, base, req, b);
}

void gbx_api_templates(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                       struct evhttp_request *req, const char *path)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(path, "/v1/templates") == 0) {
        if (m == EVHTTP_REQ_GET)
            return handle_list(s, who, req);
        if (m == EVHTTP_REQ_POST)
            return handle_create(s, who, base, req);
        return not_allowed(req, "GET, POST");
    }
    const char *rest = path + strlen("/v1/templates/");
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    char shown[128];
    if (n == 0 || n >= sizeof(shown))
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such template");
    memcpy(shown, rest, n);
    shown[n] = '\0';
    /* a key names its own and the shared templates; the admin any stored name (NAME@KEY) */
    if ((who->admin ? gbx_template_name_valid(shown) : gbx_name_valid(shown)) < 0)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such template");
    if (slash && strcmp(slash, "/oci") == 0) {
        if (m != EVHTTP_REQ_POST)
            return not_allowed(req, "POST");
        return handle_upload(s, who, base, req, shown);
    }
    gbx_autofree char *name = gbx_templates_ref(s, who, shown);
    if (slash == NULL) {
        if (m == EVHTTP_REQ_GET)
            return handle_show(s, who, req, name);
        if (m == EVHTTP_REQ_DELETE)
            return handle_delete(s, who, req, name);
        return not_allowed(req, "GET, DELETE");
    }
    if (strcmp(slash, "/events") == 0) {
        if (m != EVHTTP_REQ_GET)
            return not_allowed(req, "GET");
        return handle_events(s, who, base, req, name);
    }
    gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
}

size_t gbx_api_templates_drain(const char *why)
{
    size_t n = 0;
    for (struct build *b = reg.list; b; b = b->next) {
        if (b->state == B_BUILDING) {
            b->cancel = 1;
            (void)why; /* that one speaks of processes going on; a build does not */
            push_event(b, json_pack("{s:s,s:s%,s:s}", "type", "error", "name", b->name,
                                    gbx_template_shown_len(b->name), "message",
                                    "the daemon is stopping: the build is cancelled"));
        }
        for (struct tstream *st = b->streams; st; st = st->next)
            n += st->req != NULL;
        end_streams(b);
    }
    return n;
}

void gbx_api_templates_shutdown(void)
{
    for (struct build *b = reg.list; b; b = b->next)
        b->cancel = 1;
    while (reg.list) {
        struct build *b = reg.list;
        reg.list = b->next;
        end_streams(b);
        build_unref(b); /* a running job keeps its own reference */
    }
    if (reg.tick) {
        event_free(reg.tick);
        reg.tick = NULL;
    }
    reg.shut = 1;
}
