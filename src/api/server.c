/* SPDX-License-Identifier: MIT */
/* gloveboxd's HTTP server. The admin API listens on <runtime>/api.sock (mode 0600); every
 * request there acts as the administrator. Routes (see docs/api.yaml):
 *
 *   GET    /healthz                  the daemon serves
 *   GET    /version
 *   POST   /v1/sandboxes             create
 *   GET    /v1/sandboxes             list
 *   GET    /v1/sandboxes/{id}        get
 *   DELETE /v1/sandboxes/{id}        destroy
 *   POST   /v1/sandboxes/{id}/exec   run a process, stream its events (exec.c)
 *   POST   /v1/sandboxes/{id}/timeout   set or clear the timeout (the reaper destroys it)
 */
#include "base/clock.h"
#include "api/server.h"
#include "api/artifacts_api.h"
#include "api/egress_api.h"
#include "session/sessions.h"
#include "core/snapshots.h"
#include "core/gc.h"
#include "core/hibernate.h"
#include "core/boot.h"
#include "api/templates_api.h"
#include "egress/egress.h"

#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/client.h"
#include "egress/netns.h"
#include "e2b/e2b.h"
#include "http/gate.h"
#include "api/exec.h"
#include "api/files.h"
#include "api/procs.h"
#include "http/reqmetrics.h"
#include "core/sandboxes.h"
#include "http/http.h"
#include "core/offload.h"
#include "base/fault.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/query.h"
#include "sandbox/template.h"
#include "sandbox/backend.h"
#include "sandbox/criu.h"
#include "store/store.h"
#include "store/writer.h"

#include "api/server_int.h"

/* Upper bounds of the create-latency histogram, in seconds. */
const double gbx_create_bounds[12] = {0.001, 0.002, 0.003, 0.005, 0.0075, 0.01,
                                      0.025, 0.05,  0.1,   0.25,  0.5,    1.0};

void gbx_srv_observe_create(struct gbx_server *s, double secs)
{
    for (size_t i = 0; i < GBX_ARRAY_SIZE(gbx_create_bounds); i++)
        if (secs <= gbx_create_bounds[i])
            s->m.create_buckets[i]++;
    s->m.create_sum += secs;
    s->m.create_count++;
}

void gbx_server_exec_started(struct gbx_server *s, double secs)
{
    s->m.execs++;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(gbx_create_bounds); i++)
        if (secs <= gbx_create_bounds[i])
            s->m.exec_buckets[i]++;
    s->m.exec_sum += secs;
}

void gbx_server_exec_bytes(struct gbx_server *s, unsigned long long out, unsigned long long err)
{
    s->m.exec_out_bytes += out;
    s->m.exec_err_bytes += err;
}

struct gbx_live *gbx_srv_live_find_any(struct gbx_server *s, const char *id)
{
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (strcmp(l->sb->id, id) == 0)
            return l;
    return NULL;
}

/* A sandbox who may see: the admin sees all, a key only its own (others' are reported as
 * not found, so ids do not leak). */
static struct gbx_live *live_find(struct gbx_server *s, const struct gbx_actor *who, const char *id)
{
    struct gbx_live *l = gbx_srv_live_find_any(s, id);
    return l && gbx_actor_sees(who, l->owner) ? l : NULL;
}

json_t *gbx_srv_sandbox_json(const struct gbx_live *l)
{
    gbx_autofree char *created = gbx_rfc3339(l->created_ns);
    json_t *limits = json_object();
    json_object_set_new(limits, "memory",
                        l->limits.memory_bytes ? json_integer((json_int_t)l->limits.memory_bytes)
                                               : json_null());
    json_object_set_new(limits, "pids",
                        l->limits.pids ? json_integer((json_int_t)l->limits.pids) : json_null());
    json_object_set_new(limits, "cpus",
                        l->limits.cpu_millis ? json_real((double)l->limits.cpu_millis / 1000.0)
                                             : json_null());
    json_object_set_new(limits, "disk", json_integer((json_int_t)l->disk_bytes));
    json_t *j =
        json_pack("{s:s,s:s%,s:s,s:s,s:o,s:i}", "id", l->sb->id, "template", l->template_name,
                  gbx_template_shown_len(l->template_name), "state",
                  l->busy == GBX_BUSY_WORKER ? (l->hibernated ? "waking" : "hibernating")
                  : l->hibernated            ? "hibernated"
                  : l->paused                ? "paused"
                                             : "running",
                  "created_at", created, "limits", limits, "host_uid", (json_int_t)l->sb->host_uid);
    if (l->expires_ns) {
        gbx_autofree char *exp = gbx_rfc3339(l->expires_ns);
        json_object_set_new(j, "expires_at", json_string(exp));
    } else {
        json_object_set_new(j, "expires_at", json_null());
    }
    json_object_set_new(j, "metadata", l->metadata ? json_incref(l->metadata) : json_object());
    json_object_set_new(j, "labels", l->labels ? json_incref(l->labels) : json_object());
    /* the names of the environment's variables, not their values */
    json_t *names = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(l->env, k, v)
    {
        json_array_append_new(names, json_string(k));
    }
    json_object_set_new(j, "env", names);
    json_t *base = json_object_get(l->attrs, "snapshot");
    json_object_set_new(j, "snapshot", json_is_string(base) ? json_incref(base) : json_null());
    json_object_set_new(j, "on_timeout", json_string(l->on_timeout_pause ? "pause" : "kill"));
    return j;
}

json_t *gbx_sandboxes_json(const struct gbx_live *l)
{
    return gbx_srv_sandbox_json(l);
}

/* The sandbox's agent answers HELLO on the connection its creator holds (it is ready); the
 * daemon then closes it: requests open their own connections (aconn.h), so an idle sandbox
 * costs the daemon no descriptor and no buffer. */
int gbx_srv_agent_hello(struct gbx_sandbox *sb, struct gbx_err **err)
{
    struct gbx_agent *a = NULL;
    if (gbx_agent_open(gbx_steal_fd(&sb->conn_fd), &a, err) < 0)
        return -1;
    gbx_agent_free(a);
    return 0;
}

int gbx_sandboxes_hello(struct gbx_sandbox *sb, struct gbx_err **err)
{
    return gbx_srv_agent_hello(sb, err);
}

/* A write the writer thread made durable (or could not). */
void gbx_srv_write_done(void *arg, int status, const char *msg)
{
    struct gbx_server *s = arg;
    s->writes_pending--;
    if (status < 0)
        gbx_log_error("cannot write to the store: %s", msg);
}

static void on_writer(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_server *s = arg;
    gbx_store_writer_complete(s->writer);
}

/* Newest first; ties broken by id, so that a cursor names one place in the order. */
static int live_cmp(const void *a, const void *b)
{
    const struct gbx_live *x = *(struct gbx_live *const *)a, *y = *(struct gbx_live *const *)b;
    if (x->created_ns != y->created_ns)
        return x->created_ns > y->created_ns ? -1 : 1;
    return strcmp(x->sb->id, y->sb->id);
}

#define LIST_DEFAULT_LIMIT 100
#define LIST_MAX_LIMIT 1000
#define LIST_MAX_LABELS 16

/* GET /v1/sandboxes?label=k=v&template=NAME&limit=N&cursor=C
 * Every label filter must match. The cursor is opaque to clients: "<created_ns>.<id>" of the
 * last sandbox of the previous page. */
static void handle_list(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    const char *labels[LIST_MAX_LABELS][2], *label_in[LIST_MAX_LABELS];
    char labelbuf[LIST_MAX_LABELS][260];
    size_t nlabels = 0;
    const char *template_name = NULL, *cursor = NULL;
    uint64_t limit = LIST_DEFAULT_LIMIT;
    const struct gbx_query_param params[] = {
        {.name = "label",
         .kind = GBX_QUERY_STRS,
         .out = label_in,
         .count = &nlabels,
         .cap = LIST_MAX_LABELS},
        {.name = "template", .kind = GBX_QUERY_STR, .out = &template_name},
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = LIST_MAX_LIMIT},
        {.name = "cursor", .kind = GBX_QUERY_STR, .out = &cursor},
    };
    struct gbx_query q = {0};
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), 0, &err) < 0) {
        gbx_http_reply_err(req, err);
        goto out;
    }
    for (size_t i = 0; i < nlabels; i++) {
        const char *eq = strchr(label_in[i], '=');
        if (eq == NULL || strlen(label_in[i]) >= sizeof(labelbuf[i])) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'label' must be KEY=VALUE (at most %d of them)", LIST_MAX_LABELS);
            goto out;
        }
        snprintf(labelbuf[i], sizeof(labelbuf[i]), "%s", label_in[i]);
        labelbuf[i][eq - label_in[i]] = '\0';
        labels[i][0] = labelbuf[i];
        labels[i][1] = labelbuf[i] + (eq - label_in[i]) + 1;
    }
    int64_t cur_ns = 0;
    const char *cur_id = NULL;
    if (cursor) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(cursor, &end, 10);
        if (errno || end == cursor || *end != '.' || v < 0 || gbx_sandbox_id_valid(end + 1) < 0) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'cursor' is not one this server gave (use next_cursor)");
            goto out;
        }
        cur_ns = v;
        cur_id = end + 1;
    }
    size_t n = 0;
    for (struct gbx_live *l = s->live; l; l = l->next)
        n++;
    struct gbx_live **v = gbx_xcalloc(n ? n : 1, sizeof(struct gbx_live *));
    size_t m = 0;
    for (struct gbx_live *l = s->live; l; l = l->next) {
        if (!gbx_actor_sees(who, l->owner) ||
            (template_name && !gbx_template_shown_is(l->template_name, template_name)))
            continue;
        size_t i;
        for (i = 0; i < nlabels; i++) {
            json_t *lv = json_object_get(l->labels, labels[i][0]);
            if (!json_is_string(lv) || strcmp(json_string_value(lv), labels[i][1]) != 0)
                break;
        }
        if (i == nlabels)
            v[m++] = l;
    }
    qsort(v, m, sizeof(struct gbx_live *), live_cmp);
    json_t *arr = json_array();
    size_t i = 0;
    if (cur_id) /* skip to the first after the cursor's place in the order */
        while (i < m && (v[i]->created_ns > cur_ns ||
                         (v[i]->created_ns == cur_ns && strcmp(v[i]->sb->id, cur_id) <= 0)))
            i++;
    size_t first = i;
    for (; i < m && i - first < limit; i++)
        json_array_append_new(arr, gbx_srv_sandbox_json(v[i]));
    json_t *next = json_null();
    if (i < m && i > first) {
        gbx_autofree char *c =
            gbx_asprintf("%lld.%s", (long long)v[i - 1]->created_ns, v[i - 1]->sb->id);
        next = json_string(c);
    }
    free(v);
    gbx_http_reply_json(req, 200, json_pack("{s:o,s:o}", "sandboxes", arr, "next_cursor", next));
out:
    gbx_query_release(&q);
}

void gbx_srv_live_free(struct gbx_live *l)
{
    GBX_BUG_ON(l->pending != NULL); /* a delete would never be answered */
    gbx_egress_detach(l->egress);
    json_decref(l->env);
    json_decref(l->metadata);
    json_decref(l->labels);
    json_decref(l->attrs);
    free(l->idem_key);
    free(l->spec_text);
    free(l->owner);
    free(l->template_name);
    free(l);
}

/* Destroy a live sandbox: unlink it, stop it, forget its row, audit why. 0 or -1 with *err
 * saying what could not be cleaned up (the sandbox is gone either way). */
void gbx_sandboxes_drop(struct gbx_server *s, struct gbx_live *l, const char *id, const char *why)
{
    struct gbx_live **pp = &s->live;
    while (*pp && *pp != l)
        pp = &(*pp)->next;
    if (*pp)
        *pp = l->next;
    gbx_autofree char *sid = gbx_xstrdup(id);
    gbx_sandbox_forget(l->sb);
    l->sb = NULL;
    gbx_srv_live_free(l);
    gbx_srv_store_delete(s, sid);
    gbx_server_audit(s, &gbx_actor_system, "sandbox.delete", sid,
                     json_pack("{s:s}", "reason", why));
    gbx_log_warn("sandbox '%s' is gone: %s", sid, why);
}

int gbx_sandboxes_destroy(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                          const char *kind, json_t *detail, struct gbx_err **err)
{
    if (l->busy == GBX_BUSY_WORKER) {
        json_decref(detail);
        return gbx_err_set(err, EBUSY, GBX_ERR_CONFLICT,
                           "sandbox '%s' is being hibernated or woken; try again when it is done",
                           l->sb->id);
    }
    if (l->hibernated)
        gbx_hibernate_discard(s, l->sb->id);
    struct gbx_live **pp = &s->live;
    while (*pp && *pp != l)
        pp = &(*pp)->next;
    if (*pp)
        *pp = l->next;
    gbx_autofree char *sid = gbx_xstrdup(l->sb->id);
    int r = gbx_sandbox_destroy(l->sb, err);
    gbx_fault_point("delete.destroyed");
    gbx_srv_live_free(l);
    gbx_srv_store_delete(s, sid);
    gbx_server_audit(s, who, kind, sid, detail);
    if (s->snapshots)
        gbx_snapshots_sweep(s->snapshots); /* deleted snapshots it stacked on may go now */
    if (r < 0)
        gbx_log_warn("%s", (*err)->msg);
    else
        gbx_log_info("destroyed sandbox '%s' (%s)", sid, kind);
    return r;
}

struct gbx_pending_delete {
    struct gbx_pending_delete *next;
    char *kind;
    struct gbx_actor who; /* who asked */
    json_t *detail;
    gbx_sandboxes_gone_fn done;
    void *arg;
};

/* A delete whose teardown (kill, wait, cgroups) runs on a worker thread. */
struct destroy_job {
    struct gbx_server *s;
    struct gbx_sandbox *sb;
    struct reserved_id rid; /* in s->going until the teardown is done */
    char *kind;
    struct gbx_actor who;
    json_t *detail;
    int r;
    struct gbx_err *err;
    gbx_sandboxes_gone_fn done;
    void *arg;
};

static void destroy_work(void *arg)
{
    struct destroy_job *j = arg;
    j->r = gbx_sandbox_destroy(j->sb, &j->err);
    gbx_fault_point("delete.destroyed");
}

static void destroy_recorded(void *arg, const struct gbx_err *aerr)
{
    struct destroy_job *j = arg;
    if (j->r == 0 && aerr) {
        gbx_err_set(&j->err, aerr->errnum, aerr->kind,
                    "sandbox '%s' is gone, but its audit record could not be written: %s",
                    j->rid.id, aerr->msg);
        j->r = -1;
    }
    j->done(j->arg, j->r < 0 ? j->err : NULL);
    gbx_err_free(j->err);
    free(j->rid.id);
    free(j->kind);
    free(j);
}

static void destroy_done(void *arg)
{
    struct destroy_job *j = arg;
    struct gbx_server *s = j->s;
    *j->rid.pprev = j->rid.next;
    if (j->rid.next)
        j->rid.next->pprev = j->rid.pprev;
    gbx_srv_store_delete(s, j->rid.id);
    if (s->snapshots)
        gbx_snapshots_sweep(s->snapshots); /* deleted snapshots it stacked on may go now */
    if (j->r < 0)
        gbx_log_warn("%s", j->err->msg);
    else
        gbx_log_info("destroyed sandbox '%s' (%s)", j->rid.id, j->kind);
    /* the delete is answered once it is recorded (api/audit.c) */
    gbx_server_audit_then(s, j->who.name, j->kind, j->rid.id, j->detail, destroy_recorded, j);
}

/* Out of the registry now (its id stays taken), torn down on a worker, then done. */
static void destroy_off_loop(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                             const char *kind, json_t *detail, gbx_sandboxes_gone_fn done,
                             void *arg)
{
    if (l->hibernated)
        gbx_hibernate_discard(s, l->sb->id);
    struct gbx_live **pp = &s->live;
    while (*pp && *pp != l)
        pp = &(*pp)->next;
    if (*pp)
        *pp = l->next;
    struct destroy_job *j = gbx_xcalloc(1, sizeof(*j));
    j->s = s;
    j->sb = l->sb;
    j->rid.id = gbx_xstrdup(l->sb->id);
    j->kind = gbx_xstrdup(kind);
    j->who = *who;
    j->detail = detail;
    j->done = done;
    j->arg = arg;
    l->sb = NULL;
    gbx_srv_live_free(l); /* its egress listeners close here, on the loop */
    j->rid.next = s->going;
    if (j->rid.next)
        j->rid.next->pprev = &j->rid.next;
    j->rid.pprev = &s->going;
    s->going = &j->rid;
    if (gbx_offload_submit(s->offload, destroy_work, destroy_done, j) < 0) {
        destroy_work(j);
        destroy_done(j);
    }
}

void gbx_sandboxes_destroy_later(struct gbx_server *s, const struct gbx_actor *who,
                                 struct gbx_live *l, const char *kind, json_t *detail,
                                 gbx_sandboxes_gone_fn done, void *arg)
{
    if (l->busy != GBX_BUSY_WORKER)
        return destroy_off_loop(s, who, l, kind, detail, done, arg);
    struct gbx_pending_delete *p = gbx_xcalloc(1, sizeof(*p));
    p->kind = gbx_xstrdup(kind);
    p->who = *who;
    p->detail = detail;
    p->done = done;
    p->arg = arg;
    p->next = l->pending;
    l->pending = p;
    if (l->cancel && !atomic_exchange(l->cancel, 1))
        gbx_log_info("sandbox '%s': its hibernate is stopped for a delete", l->sb->id);
}

static void gone_quietly(void *arg, const struct gbx_err *err)
{
    (void)arg;
    (void)err; /* logged by destroy_done */
}

void gbx_sandboxes_destroy_bg(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                              const char *kind, json_t *detail)
{
    gbx_sandboxes_destroy_later(s, who, l, kind, detail, gone_quietly, NULL);
}

void gbx_sandboxes_idle(struct gbx_server *s, struct gbx_live *l)
{
    l->busy = 0;
    l->cancel = NULL;
    struct gbx_pending_delete *p = l->pending;
    l->pending = NULL;
    if (p == NULL)
        return;
    /* the first delete asked does it (as its caller); the others get the same answer */
    struct gbx_pending_delete *first = p;
    while (first->next)
        first = first->next;
    struct gbx_err *err = NULL;
    int r = gbx_sandboxes_destroy(s, &first->who, l, first->kind, json_incref(first->detail), &err);
    while (p) {
        struct gbx_pending_delete *n = p->next;
        p->done(p->arg, r < 0 ? err : NULL);
        json_decref(p->detail);
        free(p->kind);
        free(p);
        p = n;
    }
    gbx_err_free(err);
}

static void deleted(void *arg, const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    if (req == NULL)
        return; /* the client left: the sandbox went anyway */
    if (err)
        gbx_http_reply_err(req, err);
    else
        gbx_http_reply_json(req, 204, NULL);
}

static void handle_delete(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req, const char *id)
{
    struct gbx_live *l = live_find(s, who, id);
    if (l == NULL) {
        gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        return;
    }
    /* a 204 means it is gone: while a hibernate holds it, the answer waits for that to stop */
    gbx_sandboxes_destroy_later(s, who, l, "sandbox.delete", NULL, deleted,
                                gbx_http_later_new(req));
}

static void method_not_allowed(struct evhttp_request *req, const char *allow);

/* POST /v1/sandboxes/{id}/pause | resume: freeze or thaw every process (idempotent). A
 * resume may carry {"timeout": ...}, the timeout from then on. */
static void replied_hibernate(void *arg, struct evhttp_request *req, struct gbx_live *l,
                              const struct gbx_err *err)
{
    (void)arg;
    if (req == NULL)
        return;
    if (err)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, 200, gbx_srv_sandbox_json(l));
}

/* POST /v1/sandboxes/{id}/hibernate {}: processes, memory and files to disk (CRIU). */
static void handle_hibernate(struct gbx_server *s, const struct gbx_actor *who,
                             struct evhttp_request *req, struct gbx_live *l)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
        return method_not_allowed(req, "POST");
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    size_t n = json_object_size(body);
    json_decref(body);
    if (n)
        return gbx_http_reply_error(req, GBX_ERR_INVALID, "hibernate takes no fields");
    gbx_hibernate(s, who, req, l, replied_hibernate, NULL);
}

static void handle_pause(struct gbx_server *s, const struct gbx_actor *who,
                         struct evhttp_request *req, struct gbx_live *l, int pause)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
        return method_not_allowed(req, "POST");
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    json_t *v = json_object_get(body, "timeout");
    uint64_t ms = 0;
    if (json_object_size(body) > (v ? 1u : 0u) ||
        (v && (pause || gbx_json_timeout_ms(v, &ms) < 0))) {
        json_decref(body);
        return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                    pause ? "pause takes no fields"
                                          : "expected {} or {\"timeout\": seconds or a "
                                            "duration like \"5m\"}");
    }
    struct gbx_err *err = NULL;
    if (v && gbx_sandboxes_check_timeout(s, ms, &err) < 0) {
        json_decref(body);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    if (l->busy) {
        json_decref(body);
        return gbx_http_reply_error(
            req, GBX_ERR_CONFLICT, "sandbox '%s' is busy with %s", l->sb->id,
            l->busy == GBX_BUSY_WORKER ? (l->hibernated ? "waking" : "a hibernate") : "a snapshot");
    }
    if (l->hibernated && !pause) {
        if (v)
            gbx_sandboxes_set_expiry(s, who, l, ms ? gbx_realtime_ns() + (int64_t)ms * 1000000 : 0,
                                     json_incref(body));
        json_decref(body);
        return gbx_hibernate_wake(s, who, req, l, replied_hibernate, NULL);
    }
    if (gbx_sandboxes_pause(s, who, l, pause, &err) < 0) {
        json_decref(body);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    if (v)
        gbx_sandboxes_set_expiry(s, who, l, ms ? gbx_realtime_ns() + (int64_t)ms * 1000000 : 0,
                                 json_incref(body));
    else if (!pause && l->expires_ns && l->expires_ns <= gbx_realtime_ns() && l->on_timeout_pause)
        /* resumed after its timeout paused it: without a new timeout it would pause again at
         * once; it runs on with none, as if the caller had cleared it */
        gbx_sandboxes_set_expiry(s, who, l,
                                 s->limits.max_timeout_ms
                                     ? gbx_realtime_ns() +
                                           (int64_t)s->limits.max_timeout_ms * 1000000
                                     : 0,
                                 json_pack("{s:s}", "reason", "resumed"));
    json_decref(body);
    gbx_http_reply_json(req, 200, gbx_srv_sandbox_json(l));
}

static void handle_timeout(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    json_t *v = json_object_get(body, "timeout");
    uint64_t ms = 0;
    if (json_object_size(body) != 1 || v == NULL || gbx_json_timeout_ms(v, &ms) < 0) {
        json_decref(body);
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "expected {\"timeout\": seconds or a duration like \"5m\"}; 0 "
                             "removes the timeout");
        return;
    }
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_sandboxes_check_timeout(s, ms, &err) < 0) {
        json_decref(body);
        return gbx_http_reply_err(req, err);
    }
    gbx_sandboxes_set_expiry(s, who, l, ms ? gbx_realtime_ns() + (int64_t)ms * 1000000 : 0, body);
    gbx_http_reply_json(req, 200, gbx_srv_sandbox_json(l));
}

void gbx_sandboxes_set_expiry(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                              int64_t expires_ns, json_t *detail)
{
    l->expires_ns = expires_ns;
    s->writes_pending++;
    gbx_store_writer_sandbox_set_expiry(s->writer, l->sb->id, l->expires_ns, gbx_srv_write_done, s);
    gbx_server_audit(s, who, "sandbox.timeout", l->sb->id, detail);
}

int gbx_sandboxes_pause(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                        int paused, struct gbx_err **err)
{
    if (l->paused == !!paused)
        return 0;
    int r = paused ? l->sb->ops->freeze(l->sb, err) : l->sb->ops->thaw(l->sb, err);
    if (r < 0)
        return -1;
    l->paused = !!paused;
    if (paused) { /* since when, for retention of stopped sandboxes */
        if (l->attrs == NULL)
            l->attrs = json_object();
        json_object_set_new(l->attrs, "stopped_ns", json_integer(gbx_realtime_ns()));
    } else {
        json_object_del(l->attrs, "stopped_ns");
    }
    /* the state column alone, written behind: a pause waits for no disk (a daemon killed
     * before it lands finds the freezer's own state at adoption; the row's updated_ns then
     * says since when) */
    s->writes_pending++;
    gbx_store_writer_sandbox_set_state(s->writer, l->sb->id, paused ? "paused" : "running",
                                       gbx_srv_write_done, s);
    gbx_server_audit(s, who, paused ? "sandbox.pause" : "sandbox.resume", l->sb->id, NULL);
    return 0;
}

struct gbx_live *gbx_sandboxes_find(struct gbx_server *s, const struct gbx_actor *who,
                                    const char *id)
{
    return live_find(s, who, id);
}

struct gbx_live *gbx_sandboxes_find_any(struct gbx_server *s, const char *id)
{
    return gbx_srv_live_find_any(s, id);
}

void gbx_sandboxes_each_any(struct gbx_server *s, int (*fn)(void *arg, struct gbx_live *l),
                            void *arg)
{
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (fn(arg, l) != 0)
            break;
}

int gbx_sandboxes_rebuild(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                          const char *snapshot, struct gbx_err **err)
{
    char **layers = NULL;
    size_t nlayers = 0;
    const char *tmpl = NULL, *snap_id = NULL;
    if (gbx_snapshots_layers(s->snapshots, who, snapshot, &layers, &nlayers, &tmpl, &snap_id, err) <
        0)
        return -1;
    gbx_autofree char *id = gbx_xstrdup(l->sb->id);
    gbx_autofree char *sid = gbx_xstrdup(snap_id);
    gbx_autofree char *base = NULL;
    if (gbx_srv_stack_template(s, tmpl, &layers, &nlayers, &base, err) < 0) {
        gbx_snapshots_layers_free(layers, nlayers);
        return -1;
    }
    free(l->template_name);
    l->template_name = gbx_xstrdup(tmpl);
    struct gbx_egress_policy *policy = gbx_egress_policy_dup(gbx_egress_policy_of(l->egress));
    gbx_egress_detach(l->egress);
    l->egress = NULL;
    (void)!gbx_sandbox_destroy(l->sb, NULL);
    l->sb = NULL;
    struct gbx_sandbox_spec spec = {.id = id,
                                    .template_name = base,
                                    .limits = l->limits,
                                    .disk_bytes = l->disk_bytes,
                                    .ctl_socket = 1,
                                    .layers = (const char *const *)layers,
                                    .nlayers = nlayers};
    struct gbx_sandbox *sb = NULL;
    int r = gbx_sandbox_create(&s->rt, &spec, &sb, err);
    gbx_snapshots_layers_free(layers, nlayers);
    if (r < 0 || gbx_srv_agent_hello(sb, err) < 0 ||
        gbx_egress_attach(s->egress, id, sb->init_pid, policy, &l->egress, err) < 0) {
        gbx_egress_policy_free(policy);
        if (sb)
            (void)!gbx_sandbox_destroy(sb, NULL);
        struct gbx_live **pp = &s->live;
        while (*pp && *pp != l)
            pp = &(*pp)->next;
        if (*pp)
            *pp = l->next;
        gbx_srv_live_free(l);
        gbx_srv_store_delete(s, id);
        gbx_server_audit(s, who, "sandbox.delete", id,
                         json_pack("{s:s,s:s}", "reason", "rollback failed", "snapshot", sid));
        return gbx_err_wrap(err, "roll back sandbox '%s' (it is gone)", id);
    }
    gbx_egress_policy_free(policy);
    l->sb = sb;
    l->paused = 0;
    gbx_sandboxes_set_attr(s, l, "snapshot", json_string(sid)); /* writes the new row */
    gbx_server_audit(s, who, "sandbox.rollback", id, json_pack("{s:s}", "snapshot", sid));
    gbx_log_info("rolled sandbox '%s' back to snapshot '%s'", id, sid);
    return 0;
}

void gbx_sandboxes_each(struct gbx_server *s, const struct gbx_actor *who,
                        int (*fn)(void *arg, struct gbx_live *l), void *arg)
{
    size_t n = 0;
    for (struct gbx_live *l = s->live; l; l = l->next)
        n++;
    struct gbx_live **v = gbx_xcalloc(n ? n : 1, sizeof(struct gbx_live *));
    size_t m = 0;
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (gbx_actor_sees(who, l->owner))
            v[m++] = l;
    qsort(v, m, sizeof(struct gbx_live *), live_cmp);
    for (size_t i = 0; i < m; i++)
        if (fn(arg, v[i]) != 0)
            break;
    free(v);
}

static void method_not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "kind", "invalid", "message",
                             "method not allowed here");
    gbx_http_reply_json(req, 405, body);
}

static void route(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req);

static void dispatch_admin(struct evhttp_request *req, void *arg)
{
    struct gbx_server *s = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    struct gbx_actor who;
    gbx_actor_for(&who, "");
    gbx_reqmetrics_track(req, path ? path : "", who.name);
    route(s, &who, req);
}

static void dispatch_tcp(struct evhttp_request *req, void *arg)
{
    struct gbx_server *s = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    /* the same question the HTTP gate asked before it let the body in (auth.c) */
    char name[GBX_ACTOR_MAX];
    int authed = gbx_srv_authenticate(s, in, evhttp_request_get_command(req), path, query, name,
                                      sizeof(name));
    const char *sid = evhttp_find_header(in, "E2b-Sandbox-Id");
    int files = path && strcmp(path, "/files") == 0;
    int e2b = path && gbx_e2b_is_control_path(path);
    if (authed && gbx_srv_rate_limited(req, name, e2b || sid || files, path))
        return;
    /* E2B's data plane: the sandbox's access token decides (gbx_e2b_data), and the request
     * acts as the sandbox's owner (its actor is made there, once the sandbox is found) */
    if (sid) {
        gbx_reqmetrics_track(req, path ? path : "", "e2b");
        gbx_e2b_data(s, s->base, req, sid);
        return;
    }
    /* a signed envd URL (sbx.downloadUrl()/uploadUrl()) carries no sandbox id: e2b/files.c
     * finds the sandbox whose token made the signature */
    if (files) {
        gbx_reqmetrics_track(req, path, "e2b");
        if (gbx_server_admit(s, req, path, GBX_ADMIT_E2B_DATA) == 0)
            gbx_e2b_files(s, s->base, req, NULL);
        return;
    }
    /* no key: /healthz only (route answers nothing else to an actor that sees nothing) */
    struct gbx_actor who = {.admin = 0, .owner = "", .name = "-"};
    if (path == NULL || strcmp(path, "/healthz") != 0) {
        const char *key = gbx_srv_request_key(in);
        if (!authed) {
            gbx_reqmetrics_track(req, path ? path : "", "-");
            evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
            if (e2b)
                return gbx_e2b_error(req, 401,
                                     key ? "this API key is not valid (revoked?)"
                                         : "an API key is needed in X-API-KEY");
            gbx_http_reply_json(req, 401,
                                json_pack("{s:{s:s,s:s}}", "error", "kind", "permission", "message",
                                          key ? "this API key is not valid (revoked?)"
                                              : "an API key is needed: 'Authorization: Bearer "
                                                "KEY' or 'X-API-Key: KEY'"));
            return;
        }
        gbx_actor_for(&who, name);
    }
    gbx_reqmetrics_track(req, path ? path : "", who.name);
    if (e2b) {
        if (gbx_server_admit(s, req, path, GBX_ADMIT_E2B_CONTROL) == 0)
            gbx_e2b_control(s, &who, req, path);
    } else
        route(s, &who, req);
}

/* The prefix "/name" of sub, followed by nothing or by '/': returns what follows, or NULL. */
static const char *sub_prefix(const char *sub, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(sub, name, n) != 0 || (sub[n] != '\0' && sub[n] != '/'))
        return NULL;
    return sub + n;
}

/* /v1/sandboxes/{id}/<sub...> */
static void route_sandbox_sub(struct gbx_server *s, const struct gbx_actor *who,
                              struct evhttp_request *req, const char *id, const char *sub,
                              const char *path)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *files = sub_prefix(sub, "/files");
    const char *procs = sub_prefix(sub, "/processes");
    int is_exec = strcmp(sub, "/exec") == 0, is_timeout = strcmp(sub, "/timeout") == 0;
    if (strcmp(sub, "/artifacts") == 0)
        return gbx_api_sandbox_artifacts(s, who, req, id);
    if (strcmp(sub, "/pause") == 0 || strcmp(sub, "/resume") == 0 ||
        strcmp(sub, "/hibernate") == 0) {
        struct gbx_live *l = live_find(s, who, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        if (sub[1] == 'h')
            return handle_hibernate(s, who, req, l);
        return handle_pause(s, who, req, l, sub[1] == 'p');
    }
    {
        /* a hibernated sandbox has no processes: it is woken first (POST .../resume) */
        struct gbx_live *l = live_find(s, who, id);
        if (l && (l->hibernated || l->busy == GBX_BUSY_WORKER) && strcmp(sub, "/snapshots") != 0)
            return gbx_http_reply_error(req, GBX_ERR_CONFLICT,
                                        "sandbox '%s' is %s; resume it first", id,
                                        l->hibernated ? "hibernated" : "being hibernated");
    }
    if (strcmp(sub, "/snapshots") == 0 || strcmp(sub, "/fork") == 0 ||
        strcmp(sub, "/rollback") == 0) {
        struct gbx_live *l = live_find(s, who, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        (void)gbx_snapshots_sandbox_route(s->snapshots, who, req, l, sub);
        return;
    }
    if (strcmp(sub, "/network") == 0 || strcmp(sub, "/egress") == 0) {
        struct gbx_live *l = live_find(s, who, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        return sub[1] == 'n' ? gbx_api_sandbox_network(s, who, req, l)
                             : gbx_api_sandbox_egress(s, who, req, l);
    }
    if (!files && !procs && !is_exec && !is_timeout)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
    if ((is_exec || is_timeout) && m != EVHTTP_REQ_POST)
        return method_not_allowed(req, "POST");
    struct gbx_live *l = live_find(s, who, id);
    if (l == NULL)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
    if (is_exec)
        return gbx_api_exec(s, who, s->base, req, l->sb, l->env);
    if (is_timeout)
        return handle_timeout(s, who, req, l);
    if (files)
        return gbx_api_files(s, who, s->base, req, l->sb, files);
    return gbx_api_procs(s, who, s->base, req, l->sb, procs);
}

static void route(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (path == NULL) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "malformed request URI");
        return;
    }
    if (strlen(path) > 1024) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "request path longer than 1024 bytes");
        return;
    }
    if (strcmp(path, "/healthz") == 0) {
        if (m != EVHTTP_REQ_GET)
            return method_not_allowed(req, "GET");
        return gbx_http_reply_json(req, 200, gbx_srv_health_json(s, who));
    }
    if (gbx_server_admit(s, req, path, GBX_ADMIT_NATIVE) < 0)
        return;
    if (strcmp(path, "/metrics") == 0) {
        if (m != EVHTTP_REQ_GET)
            return method_not_allowed(req, "GET");
        return gbx_srv_handle_metrics(s, who, req);
    }
    if (strcmp(path, "/version") == 0) {
        if (m != EVHTTP_REQ_GET)
            return method_not_allowed(req, "GET");
        return gbx_http_reply_json(
            req, 200,
            json_pack("{s:s,s:i}", "version", GBX_VERSION, "agent_protocol", GBX_AGENT_VERSION));
    }
    if (strcmp(path, "/v1/egress") == 0 || strncmp(path, "/v1/egress/", 11) == 0 ||
        strcmp(path, "/v1/secrets") == 0 || strncmp(path, "/v1/secrets/", 12) == 0)
        return gbx_api_egress(s, who, req, path);
    if (strcmp(path, "/v1/artifacts") == 0 || strncmp(path, "/v1/artifacts/", 14) == 0)
        return gbx_api_artifacts(s, who, req, path);
    if (strcmp(path, "/v1/sessions") == 0 || strncmp(path, "/v1/sessions/", 13) == 0)
        return gbx_sessions_route(s->sessions, who, req, path);
    if (strcmp(path, "/v1/gc") == 0)
        return gbx_gc_route(s->gc, who, req);
    if (strcmp(path, "/v1/snapshots") == 0 || strncmp(path, "/v1/snapshots/", 14) == 0)
        return gbx_snapshots_route(s->snapshots, who, req, path);
    if (strcmp(path, "/v1/templates") == 0 || strncmp(path, "/v1/templates/", 14) == 0)
        return gbx_api_templates(s, who, s->base, req, path);
    if (strcmp(path, "/v1/apikeys") == 0 || strncmp(path, "/v1/apikeys/", 12) == 0)
        return gbx_srv_handle_apikeys(s, who, req, path);
    if (strcmp(path, "/v1/sandboxes") == 0) {
        if (m == EVHTTP_REQ_POST)
            return gbx_srv_handle_create(s, who, req);
        if (m == EVHTTP_REQ_GET)
            return handle_list(s, who, req);
        return method_not_allowed(req, "GET, POST");
    }
    if (strncmp(path, "/v1/sandboxes/", 14) == 0) {
        char idbuf[GBX_ID_MAX + 1];
        const char *rest = path + 14;
        const char *slash = strchr(rest, '/');
        size_t idlen = slash ? (size_t)(slash - rest) : strlen(rest);
        if (idlen > GBX_ID_MAX) {
            gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such sandbox");
            return;
        }
        memcpy(idbuf, rest, idlen);
        idbuf[idlen] = '\0';
        const char *id = idbuf;
        if (slash)
            return route_sandbox_sub(s, who, req, id, slash, path);
        if (gbx_sandbox_id_valid(id) < 0) {
            gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such sandbox");
            return;
        }
        if (m == EVHTTP_REQ_GET) {
            struct gbx_live *l = live_find(s, who, id);
            if (l == NULL)
                return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
            return gbx_http_reply_json(req, 200, gbx_srv_sandbox_json(l));
        }
        if (m == EVHTTP_REQ_DELETE)
            return handle_delete(s, who, req, id);
        return method_not_allowed(req, "GET, DELETE");
    }
    gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

static int listen_unix(struct gbx_server *s, struct gbx_err **err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(s->sock_path) >= sizeof(sa.sun_path))
        return gbx_err_set(err, ENAMETOOLONG, GBX_ERR_INVALID, "socket path '%s' is too long",
                           s->sock_path);
    strcpy(sa.sun_path, s->sock_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return gbx_err_sys(err, errno, "cannot create socket");
    (void)unlink(s->sock_path); /* a stale socket of a previous run */
    mode_t old = umask(0177);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (r < 0 || chmod(s->sock_path, 0600) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        close(fd);
        return gbx_err_sys(err, e, "cannot listen on '%s'", s->sock_path);
    }
    /* backlog 0: listening already, with SOMAXCONN (libevent's -1 would make it 128) */
    s->unix_listener = evconnlistener_new(s->base, NULL, NULL,
                                          LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
    if (s->unix_listener == NULL) {
        close(fd);
        return gbx_err_set(err, 0, GBX_ERR_INTERNAL, "cannot listen on '%s'", s->sock_path);
    }
    if ((s->unix_bound = evhttp_bind_listener(s->http, s->unix_listener)) == NULL)
        return gbx_err_set(err, 0, GBX_ERR_INTERNAL, "cannot serve on '%s'", s->sock_path);
    s->unix_listener = NULL; /* owned by the http bound socket now */
    return 0;
}

/* An HTTP server with the daemon's limits, routing every request to cb. */
static struct evhttp *new_http(struct gbx_server *s, const struct gbx_server_config *cfg,
                               void (*cb)(struct evhttp_request *, void *))
{
    struct evhttp *h = evhttp_new(s->base);
    GBX_BUG_ON(h == NULL);
    /* libevent 2.1 hands a handler the whole body, so the transport limit is the larger of
     * the two; JSON bodies are held to max_body by gbx_http_body_object */
    size_t json_max = cfg->max_body ? cfg->max_body : GBX_DEFAULT_MAX_BODY;
    size_t upload_max = cfg->max_upload ? cfg->max_upload : GBX_DEFAULT_MAX_UPLOAD;
    gbx_http_set_json_limit(json_max);
    evhttp_set_max_body_size(h, json_max > upload_max ? json_max : upload_max);
    /* answer 413 even to a client that keeps sending (no Expect: 100-continue) */
    evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_max_headers_size(h, GBX_MAX_HEADERS);
    evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE |
                                      EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(h, cb, s);
    return h;
}

/* The HTTP gate of a listener (gate.c): timeouts for both, caps and credentials on TCP. */
static void gate_http(struct gbx_server *s, const struct gbx_server_config *cfg, struct evhttp *h,
                      int tcp)
{
    struct gbx_gate **g = tcp ? &s->gate_tcp : &s->gate_admin;
    if (*g == NULL)
        *g = gbx_gate_new(s->base, &cfg->http, tcp, tcp ? "tcp" : "admin",
                          tcp ? gbx_srv_gate_allow : NULL, s);
    gbx_gate_attach(*g, h);
}

static int listen_tcp(struct gbx_server *s, const struct gbx_server_config *cfg,
                      struct gbx_err **err)
{
    gbx_autofree char *addr = gbx_xstrdup(cfg->listen_tcp);
    char *colon = strrchr(addr, ':');
    uint64_t port = 0;
    if (colon == NULL || colon == addr || gbx_parse_u64(colon + 1, 1, 65535, &port) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "--listen '%s': use ADDR:PORT, e.g. 127.0.0.1:7070", cfg->listen_tcp);
    *colon = '\0';
    s->http_tcp = new_http(s, cfg, dispatch_tcp);
    gate_http(s, cfg, s->http_tcp, 1);
    if ((s->tcp_bound = evhttp_bind_socket_with_handle(s->http_tcp, addr, (uint16_t)port)) == NULL)
        return gbx_err_sys(err, errno ? errno : EADDRINUSE, "cannot listen on '%s'",
                           cfg->listen_tcp);
    /* a burst of clients (a thousand creates at once) waits in the kernel's queue rather than
     * being refused: libevent listens with a backlog of 128 */
    (void)listen(evhttp_bound_socket_get_fd(s->tcp_bound), SOMAXCONN);
    /* streams write small frames one after another (a Connect stream's end, then its
     * trailer): without TCP_NODELAY, Nagle holds the second until the client's delayed ACK,
     * up to 40 ms. Accepted sockets inherit it from the listening one. */
    int one = 1;
    if (setsockopt(evhttp_bound_socket_get_fd(s->tcp_bound), IPPROTO_TCP, TCP_NODELAY, &one,
                   sizeof(one)) < 0)
        gbx_log_warn("cannot set TCP_NODELAY on '%s': %s", cfg->listen_tcp, strerror(errno));
    gbx_log_info("serving API keys' requests on %s", cfg->listen_tcp);
    return 0;
}

static void egress_audit(void *arg, const char *kind, const char *sandbox, json_t *detail)
{
    gbx_server_audit_as(arg, "egress", kind, sandbox, detail);
}

static int egress_new(struct gbx_server *s, const struct gbx_server_config *cfg,
                      struct gbx_err **err)
{
    enum gbx_egress_mode mode = GBX_EGRESS_POLICY;
    if (cfg->egress_default && gbx_egress_mode_parse(cfg->egress_default, &mode) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "egress default '%s': use policy, none or open", cfg->egress_default);
    gbx_autofree char *dir = gbx_asprintf("%s/egress", s->rt.state_dir);
    struct gbx_egress_opts o = {.default_mode = mode,
                                .dir = dir,
                                .runtime_dir = s->rt.runtime_dir,
                                .extra_ca_file = cfg->egress_extra_ca,
                                .hosts = cfg->egress_hosts,
                                .max_conns = cfg->egress_max_conns,
                                .audit_rate = cfg->audit_rate,
                                .audit_burst = cfg->audit_burst,
                                .audit_unlimited = cfg->audit_unlimited,
                                .store = s->store};
    if (gbx_egress_new(s->base, &o, egress_audit, s, &s->egress, err) < 0)
        return -1;
    gbx_runtime_set_trust_bundle(&s->rt, gbx_egress_trust_bundle(s->egress));
    return 0;
}

struct gbx_store *gbx_server_store(const struct gbx_server *s)
{
    return s->store;
}

struct gbx_offload *gbx_server_offload(const struct gbx_server *s)
{
    return s->offload;
}

struct event_base *gbx_server_base(const struct gbx_server *s)
{
    return s->base;
}

struct gbx_snapshots *gbx_server_snapshots(const struct gbx_server *s)
{
    return s->snapshots;
}

struct gbx_sessions *gbx_server_sessions(const struct gbx_server *s)
{
    return s->sessions;
}

struct gbx_runtime *gbx_server_runtime(struct gbx_server *s)
{
    return &s->rt;
}

struct gbx_egress *gbx_server_egress(const struct gbx_server *s)
{
    return s->egress;
}

static void probe_work(void *arg)
{
    struct gbx_server *s = arg;
    (void)gbx_criu_probe(&s->rt, NULL);
}

static void probe_done(void *arg)
{
    (void)arg;
    const char *why = NULL;
    if (gbx_criu_probe_result(&why) == 1)
        gbx_log_info("hibernate: available (%s)", why);
    else
        gbx_log_warn("hibernate: unavailable on this host: %s; pause freezes sandboxes in "
                     "memory instead",
                     why);
}

/* One daemon per state directory and per runtime directory: a second one would adopt the
 * first one's sandboxes (and fail to lock them), take over its socket, and remove what it
 * could not lock. Nothing has been touched yet when this refuses. */
static int lock_dirs(struct gbx_server *s, struct gbx_err **err)
{
    const char *dirs[2] = {s->rt.state_dir, s->rt.runtime_dir};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && strcmp(dirs[0], dirs[1]) == 0)
            break;
        gbx_autofree char *p = gbx_asprintf("%s/gloveboxd.lock", dirs[i]);
        pid_t holder = 0;
        int fd = gbx_pidfile_lock(p, &holder);
        if (fd == -EAGAIN) {
            char who[48] = "another gloveboxd";
            if (holder > 0)
                snprintf(who, sizeof(who), "another gloveboxd (pid %d)", (int)holder);
            return gbx_err_set(err, EBUSY, GBX_ERR_CONFLICT,
                               "%s is using the %s directory '%s': stop it first, or give this "
                               "one its own --state-dir and --runtime-dir",
                               who, i == 0 ? "state" : "runtime", dirs[i]);
        }
        if (fd < 0)
            return gbx_err_sys(err, -fd, "cannot lock '%s'", p);
        s->lock_fds[i] = fd;
    }
    return 0;
}

int gbx_server_new(struct event_base *base, const struct gbx_server_config *cfg,
                   struct gbx_server **out, struct gbx_err **err)
{
    struct gbx_server *s = gbx_xcalloc(1, sizeof(*s));
    gbx_autofree char *db = NULL;
    s->base = base;
    struct gbx_runtime_opts ro = {.state_dir = cfg->state_dir, .runtime_dir = cfg->runtime_dir};
    s->lock_fds[0] = s->lock_fds[1] = -1;
    if (gbx_runtime_init(&s->rt, &ro, err) < 0)
        goto fail;
    s->rt_ready = 1;
    s->rt.criu_timeout_ms = cfg->criu_timeout_ms;
    s->rt.helper_timeout_ms = cfg->helper_timeout_ms;
    if (lock_dirs(s, err) < 0 || gbx_diskguard_init(&s->disk, s->rt.state_dir, cfg->state_reserve,
                                                    cfg->state_reserve_set, err) < 0)
        goto fail;
    db = gbx_asprintf("%s/glovebox.db", s->rt.state_dir);
    if (gbx_store_open(db, &s->store, err) < 0 || gbx_store_writer_new(db, &s->writer, err) < 0)
        goto fail;
    /* the loop's connection writes sandbox rows before a reply: durable against the daemon
     * being killed, without an fsync on the loop (the writer's audit log stays FULL) */
    gbx_store_relax(s->store);
    s->writer_ev =
        event_new(base, gbx_store_writer_fd(s->writer), EV_READ | EV_PERSIST, on_writer, s);
    event_add(s->writer_ev, NULL);
    if (gbx_offload_new(base, 2, &s->offload) < 0) {
        gbx_err_set(err, 0, GBX_ERR_INTERNAL, "cannot start the worker threads");
        goto fail;
    }
    s->pool_target = cfg->pool_size;
    s->max_upload = cfg->max_upload ? cfg->max_upload : GBX_DEFAULT_MAX_UPLOAD;
    if (cfg->limits)
        s->limits = *cfg->limits;
    else
        gbx_limits_init(&s->limits, gbx_srv_host_ram(), (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
    s->pool_spec = gbx_srv_limits_spec(&s->limits.dflt, s->limits.dflt_disk);
    if (egress_new(s, cfg, err) < 0 || gbx_srv_adopt_all(s, err) < 0 ||
        gbx_snapshots_new(s, &s->snapshots, err) < 0 ||
        gbx_sessions_new(s, base, s->rt.state_dir, &s->sessions, err) < 0)
        goto fail;
    gbx_snapshots_sweep(s->snapshots);
    /* what CRIU can do on this kernel, found out off the loop (cached per kernel build) */
    if (gbx_offload_submit(s->offload, probe_work, probe_done, s) < 0)
        gbx_log_warn("cannot probe CRIU: hibernate waits for its first use to find out");
    if (gbx_gc_new(s, base, &cfg->retention, &s->gc) < 0) {
        gbx_err_set(err, ENOMEM, GBX_ERR_INTERNAL, "cannot start the retention collector");
        goto fail;
    }
    s->http = new_http(s, cfg, dispatch_admin);
    gate_http(s, cfg, s->http, 0);
    gbx_srv_rate_init(cfg->rate_limit, cfg->rate_burst, cfg->rate_limit_set);
    s->sock_path = gbx_asprintf("%s/api.sock", s->rt.runtime_dir);
    if (listen_unix(s, err) < 0)
        goto fail;
    if (cfg->listen_tcp && listen_tcp(s, cfg, err) < 0)
        goto fail;
    s->reaper = event_new(base, -1, EV_PERSIST, gbx_srv_reap_expired, s);
    struct timeval every = {0, 200000};
    event_add(s->reaper, &every);
    if (s->pool_target) {
        s->pool_ev = event_new(base, -1, 0, gbx_srv_pool_fill_one, s);
        /* background work: after whatever requests are ready (see gloveboxd.c) */
        if (event_base_get_npriorities(base) > 2)
            event_priority_set(s->pool_ev, 2);
        gbx_srv_pool_kick(s);
        gbx_log_info("keeping a warm pool of %zu sandboxes", s->pool_target);
    }
    *out = s;
    return 0;
fail:
    gbx_server_free(s);
    return gbx_err_wrap(err, "start gloveboxd");
}

size_t gbx_server_max_upload(const struct gbx_server *s)
{
    return s->max_upload;
}

const char *gbx_server_socket_path(const struct gbx_server *s)
{
    return s->sock_path;
}

int gbx_server_writer_tid(const struct gbx_server *s)
{
    return gbx_store_writer_tid(s->writer);
}

const char *gbx_server_cpu_dir(const struct gbx_server *s, const char **scope)
{
    *scope = s->rt.cg.scope;
    return s->rt.cg.v1[GBX_CG_CPU];
}

int gbx_server_drain(struct gbx_server *s)
{
    static const char why[] = "the daemon is stopping; the process goes on (attach to it when "
                              "the daemon is back)";
    if (s->unix_bound) {
        evhttp_del_accept_socket(s->http, s->unix_bound);
        s->unix_bound = NULL;
        (void)unlink(s->sock_path);
    }
    if (s->tcp_bound) {
        evhttp_del_accept_socket(s->http_tcp, s->tcp_bound);
        s->tcp_bound = NULL;
    }
    size_t n = gbx_api_exec_drain(why) + gbx_api_files_drain(why) + gbx_e2b_interp_shutdown() +
               gbx_e2b_fs_drain(why) + gbx_sessions_drain(s->sessions) +
               gbx_api_templates_drain(why);
    if (n)
        gbx_log_info("ended %zu open streams", n);
    return n > 0;
}

void gbx_server_shutdown(struct gbx_server *s, int kill_sandboxes)
{
    gbx_api_templates_shutdown(); /* builds are cancelled before the worker threads join */
    if (s->reaper) {
        event_free(s->reaper);
        s->reaper = NULL;
    }
    if (s->http) {
        evhttp_free(s->http);
        s->http = NULL;
    }
    if (s->http_tcp) {
        evhttp_free(s->http_tcp);
        s->http_tcp = NULL;
    }
    gbx_api_exec_shutdown(); /* streams kept only to enforce a timeout after their client left */
    gbx_e2b_interp_shutdown();
    if (s->sock_path)
        (void)unlink(s->sock_path);
    if (s->pool_ev) {
        event_free(s->pool_ev);
        s->pool_ev = NULL;
    }
    gbx_srv_creates_abort(s);       /* before the sessions: a create's callback may be theirs */
    gbx_sessions_free(s->sessions); /* their agent connections, before the sandboxes go */
    s->sessions = NULL;
    gbx_srv_pool_drain(s); /* pooled sandboxes are nobody's: never left behind */
    while (s->live) {
        struct gbx_live *l = s->live;
        s->live = l->next;
        if (kill_sandboxes) {
            gbx_autofree char *id = gbx_xstrdup(l->sb->id);
            (void)!gbx_sandbox_destroy(l->sb, NULL);
            gbx_srv_store_delete(s, id);
            gbx_server_audit(s, &gbx_actor_system, "sandbox.delete", id,
                             json_pack("{s:s}", "reason", "daemon shutdown"));
        } else {
            /* leave it running: its control socket lets the next daemon adopt it */
            gbx_sandbox_forget(l->sb);
        }
        gbx_srv_live_free(l);
    }
}

void gbx_server_free(struct gbx_server *s)
{
    if (s == NULL)
        return;
    /* a hibernate in progress stops (the sandbox runs on) rather than hold the exit */
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (l->cancel)
            atomic_store(l->cancel, 1);
    gbx_offload_free(s->offload); /* finishes queued work while the sandboxes still exist */
    s->offload = NULL;
    gbx_server_shutdown(s, 0);
    gbx_gc_free(s->gc);
    s->gc = NULL;
    gbx_snapshots_free(s->snapshots);
    s->snapshots = NULL;
    gbx_egress_free(s->egress); /* after the sandboxes let go of theirs */
    s->egress = NULL;
    if (s->writer_ev)
        event_free(s->writer_ev);
    gbx_store_writer_free(s->writer); /* makes every queued write durable first */
    gbx_store_close(s->store);
    gbx_diskguard_release(&s->disk);
    if (s->rt_ready)
        gbx_runtime_release(&s->rt);
    for (int i = 0; i < 2; i++)
        if (s->lock_fds[i] >= 0)
            close(s->lock_fds[i]); /* the last thing: the next daemon may start now */
    gbx_gate_free(s->gate_admin);  /* after the evhttp servers (gbx_server_shutdown) */
    gbx_gate_free(s->gate_tcp);
    gbx_srv_rate_release();
    free(s->sock_path);
    free(s->pool_spec);
    free(s);
    gbx_reqmetrics_reset();
}
