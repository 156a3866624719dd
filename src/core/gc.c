/* SPDX-License-Identifier: MIT */
/* The retention collector. Each pass, on the loop, gathers what exists (snapshots and
 * artifacts with their sizes, sessions by last activity, sandboxes paused or hibernated and
 * for how long), lets base/retention.c choose, and removes through the same paths as the API
 * (whose file removals run on the worker threads): the loop only does bookkeeping. */
#include "core/gc.h"

#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifacts.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "core/snapshots.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "store/artifacts.h"

struct gbx_gc {
    struct gbx_server *s;
    struct gbx_gc_policy pol;
    struct event_base *base;
    struct event *timer;
    int64_t last_run_ns;
    json_t *last; /* the last pass's report */
};

/* What one kind contributes to a pass. */
struct batch {
    const char *kind;
    struct gbx_retention_item *items;
    char **ids;
    size_t n, cap;
};

static void batch_add(struct batch *b, const char *id, int64_t ts, uint64_t bytes, int pinned)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 32;
        b->items = gbx_xrealloc(b->items, b->cap * sizeof(*b->items));
        b->ids = gbx_xrealloc(b->ids, b->cap * sizeof(*b->ids));
    }
    b->items[b->n] = (struct gbx_retention_item){.ts_ns = ts, .bytes = bytes, .pinned = pinned};
    b->ids[b->n++] = gbx_xstrdup(id);
}

static void batch_free(struct batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->ids[i]);
    free(b->ids);
    free(b->items);
}

static void add_snapshot(void *arg, const struct gbx_snapshot_info *i)
{
    if (strcmp(i->state, "ready") == 0)
        batch_add(arg, i->id, i->created_ns, i->size_bytes, i->in_use);
}

static int add_artifact(void *arg, const struct gbx_store_artifact *a)
{
    batch_add(arg, a->id, a->created_ns, (uint64_t)a->size_bytes, 0);
    return 0;
}

static void add_session(void *arg, const struct gbx_session_info *i)
{
    batch_add(arg, i->id, i->last_ns, 0, i->busy);
}

static int add_stopped(void *arg, struct gbx_live *l)
{
    json_t *since = json_object_get(l->attrs, "stopped_ns");
    if (l->paused && json_is_integer(since))
        batch_add(arg, l->sb->id, (int64_t)json_integer_value(since), 0, l->busy);
    return 0;
}

/* Remove one; 1 removed, 0 not (gone meanwhile, busy), -1 failed (logged). */
static int remove_one(struct gbx_gc *gc, const char *kind, const char *id, const char *why)
{
    struct gbx_server *s = gc->s;
    struct gbx_err *err = NULL;
    int r = 1;
    if (strcmp(kind, "snapshot") == 0) {
        r = gbx_snapshots_delete(gbx_server_snapshots(s), id, &err) < 0 ? -1 : 1;
    } else if (strcmp(kind, "artifact") == 0) {
        r = gbx_artifacts_delete(s, id, &err);
    } else if (strcmp(kind, "session") == 0) {
        r = gbx_server_sessions_delete(s, id, "retention");
    } else {
        struct gbx_live *l = gbx_sandboxes_find_any(s, id);
        if (l == NULL || !l->paused || l->busy)
            return 0;
        gbx_sandboxes_destroy_bg(s, &gbx_actor_system, l, "sandbox.delete",
                                 json_pack("{s:s,s:s}", "reason", "retention", "rule", why));
        r = 1;
    }
    if (r < 0) {
        gbx_log_warn("retention: cannot remove %s '%s': %s", kind, id,
                     err ? err->msg : "unknown error");
        gbx_err_free(err);
    }
    return r;
}

json_t *gbx_gc_run(struct gbx_gc *gc, int dry_run)
{
    struct gbx_server *s = gc->s;
    int64_t now = gbx_realtime_ns();
    struct batch b[4] = {
        {.kind = "snapshot"}, {.kind = "artifact"}, {.kind = "session"}, {.kind = "sandbox"}};
    const struct gbx_retention_rule *rules[4] = {&gc->pol.snapshots, &gc->pol.artifacts,
                                                 &gc->pol.sessions, &gc->pol.stopped};
    gbx_snapshots_each(gbx_server_snapshots(s), add_snapshot, &b[0]);
    struct gbx_err *err = NULL;
    if (gbx_store_artifacts_by_age(gbx_server_store(s), 0, 1 << 30, add_artifact, &b[1], &err) <
        0) {
        gbx_log_warn("retention: artifacts: %s", err->msg);
        gbx_err_free(err);
    }
    gbx_server_sessions_each(s, add_session, &b[2]);
    gbx_sandboxes_each_any(s, add_stopped, &b[3]);

    json_t *list = json_array();
    uint64_t bytes = 0;
    size_t removed = 0, failed = 0;
    for (int k = 0; k < 4; k++) {
        gbx_retention_apply(rules[k], now, b[k].items, b[k].n);
        for (size_t i = 0; i < b[k].n; i++) {
            const char *why = b[k].items[i].drop;
            if (why == NULL)
                continue;
            int r = dry_run ? 1 : remove_one(gc, b[k].kind, b[k].ids[i], why);
            if (r == 0)
                continue;
            if (r < 0) {
                failed++;
                continue;
            }
            removed++;
            bytes += b[k].items[i].bytes;
            json_array_append_new(
                list, json_pack("{s:s,s:s,s:s,s:I,s:I}", "kind", b[k].kind, "id", b[k].ids[i],
                                "rule", why, "bytes", (json_int_t)b[k].items[i].bytes, "age_s",
                                (json_int_t)((now - b[k].items[i].ts_ns) / 1000000000)));
        }
        batch_free(&b[k]);
    }
    json_t *report = json_pack("{s:b,s:o,s:I,s:I}", "dry_run", dry_run, "removed", list, "bytes",
                               (json_int_t)bytes, "failed", (json_int_t)failed);
    gbx_autofree char *at = gbx_rfc3339(now);
    json_object_set_new(report, "at", json_string(at));
    if (!dry_run) {
        gc->last_run_ns = now;
        json_decref(gc->last);
        gc->last = json_incref(report);
        if (removed)
            gbx_server_audit_as(
                s, "system", "gc.run", "",
                json_pack("{s:O,s:I}", "removed", list, "bytes", (json_int_t)bytes));
        if (removed || failed)
            gbx_log_info("retention: removed %zu (%llu bytes), %zu failed", removed,
                         (unsigned long long)bytes, failed);
    }
    return report;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct gbx_gc *gc = arg;
    json_decref(gbx_gc_run(gc, 0));
}

static int any_rule(const struct gbx_gc_policy *p)
{
    const struct gbx_retention_rule *r[] = {&p->snapshots, &p->artifacts, &p->sessions,
                                            &p->stopped};
    for (size_t i = 0; i < 4; i++)
        if (r[i]->max_age_ms || r[i]->max_count || r[i]->max_bytes)
            return 1;
    return 0;
}

/* The timer runs while a rule is set, every interval. */
static int arm(struct gbx_gc *gc)
{
    if (gc->pol.interval_ms == 0)
        gc->pol.interval_ms = 60000;
    if (!any_rule(&gc->pol)) {
        if (gc->timer)
            event_del(gc->timer);
        return 0;
    }
    if (gc->timer == NULL) {
        gc->timer = event_new(gc->base, -1, EV_PERSIST, on_timer, gc);
        if (gc->timer == NULL)
            return -ENOMEM;
        /* background work: after whatever requests are ready */
        if (event_base_get_npriorities(gc->base) > 2)
            event_priority_set(gc->timer, 2);
    }
    struct timeval tv = {(time_t)(gc->pol.interval_ms / 1000),
                         (suseconds_t)(gc->pol.interval_ms % 1000) * 1000};
    event_add(gc->timer, &tv);
    return 0;
}

int gbx_gc_new(struct gbx_server *s, struct event_base *base, const struct gbx_gc_policy *pol,
               struct gbx_gc **out)
{
    struct gbx_gc *gc = gbx_xcalloc(1, sizeof(*gc));
    gc->s = s;
    gc->base = base;
    gc->pol = *pol;
    if (arm(gc) < 0) {
        free(gc);
        return -ENOMEM;
    }
    *out = gc;
    return 0;
}

void gbx_gc_set_policy(struct gbx_gc *gc, const struct gbx_gc_policy *pol)
{
    if (gc == NULL || memcmp(&gc->pol, pol, sizeof(*pol)) == 0)
        return;
    gc->pol = *pol;
    if (arm(gc) < 0)
        gbx_log_warn("retention: cannot start the collector's timer");
}

void gbx_gc_free(struct gbx_gc *gc)
{
    if (gc == NULL)
        return;
    if (gc->timer)
        event_free(gc->timer);
    json_decref(gc->last);
    free(gc);
}

static json_t *policy_json(const struct gbx_gc_policy *p)
{
    char a[96], b[96], c[96], d[96];
    gbx_retention_format(&p->snapshots, a, sizeof(a));
    gbx_retention_format(&p->artifacts, b, sizeof(b));
    gbx_retention_format(&p->sessions, c, sizeof(c));
    gbx_retention_format(&p->stopped, d, sizeof(d));
    return json_pack("{s:s,s:s,s:s,s:s,s:I}", "snapshots", a, "artifacts", b, "sessions", c,
                     "stopped", d, "interval_ms", (json_int_t)p->interval_ms);
}

json_t *gbx_gc_status(const struct gbx_gc *gc)
{
    json_t *j = json_pack("{s:o}", "policy", policy_json(&gc->pol));
    json_object_set_new(j, "last_run", gc->last ? json_incref(gc->last) : json_null());
    return j;
}

json_t *gbx_gc_run_report(struct gbx_gc *gc, int dry_run)
{
    json_t *report = gbx_gc_run(gc, dry_run);
    json_object_set_new(report, "policy", policy_json(&gc->pol));
    return report;
}
