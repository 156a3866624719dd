/* SPDX-License-Identifier: MIT */
/* The daemon's core (core/server.h): the registry of live sandboxes (find, destroy on and off
 * the loop, timeouts, pause, rollback), the store and its writer, and the daemon's start and
 * stop. Creating a sandbox and the warm pool are create.c; adoption and the reaper adopt.c. */
#include "base/clock.h"
#include "core/server.h"
#include "core/snapshots.h"
#include "core/gc.h"
#include "core/hibernate.h"
#include "core/boot.h"
#include "egress/egress.h"

#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <sys/queue.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/client.h"
#include "egress/netns.h"
#include "core/sandboxes.h"
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

#include "core/server_int.h"

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
                  l->restarting                ? "restarting"
                  : l->busy == GBX_BUSY_WORKER ? (l->hibernated ? "waking" : "hibernating")
                  : l->hibernated              ? "hibernated"
                  : l->paused                  ? "paused"
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
    json_object_set_new(j, "public", json_boolean(l->public_traffic));
    json_object_set_new(j, "auto_resume", json_boolean(l->auto_resume));
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
                           "sandbox '%s' is being hibernated, woken or rolled back; try again "
                           "when it is done",
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

void gbx_sandboxes_set_expiry(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                              int64_t expires_ns, json_t *detail)
{
    l->expires_ns = expires_ns;
    s->writes_pending++;
    gbx_store_writer_sandbox_set_expiry(s->writer, l->sb->id, l->expires_ns, gbx_srv_write_done, s);
    gbx_server_audit(s, who, "sandbox.timeout", l->sb->id, detail);
}

int gbx_srv_pause(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l, int paused,
                  json_t *detail, struct gbx_err **err)
{
    if (l->paused == !!paused) {
        json_decref(detail);
        return 0;
    }
    int r = paused ? l->sb->ops->freeze(l->sb, err) : l->sb->ops->thaw(l->sb, err);
    if (r < 0) {
        json_decref(detail);
        return -1;
    }
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
    gbx_server_audit(s, who, paused ? "sandbox.pause" : "sandbox.resume", l->sb->id, detail);
    return 0;
}

int gbx_sandboxes_pause(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                        int paused, struct gbx_err **err)
{
    return gbx_srv_pause(s, who, l, paused, NULL, err);
}

int gbx_sandboxes_token_is(const struct gbx_live *l, const char *t)
{
    size_t n = strlen(l->token);
    return t && strlen(t) == n && CRYPTO_memcmp(t, l->token, n) == 0;
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

/* Newest first; ties broken by id, so that a cursor names one place in the order. */
int gbx_sandboxes_cmp(const void *a, const void *b)
{
    const struct gbx_live *x = *(struct gbx_live *const *)a, *y = *(struct gbx_live *const *)b;
    if (x->created_ns != y->created_ns)
        return x->created_ns > y->created_ns ? -1 : 1;
    return strcmp(x->sb->id, y->sb->id);
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
    qsort(v, m, sizeof(struct gbx_live *), gbx_sandboxes_cmp);
    for (size_t i = 0; i < m; i++)
        if (fn(arg, v[i]) != 0)
            break;
    free(v);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

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
                                .resolver = cfg->egress_resolver,
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

void gbx_server_set_sessions(struct gbx_server *s, struct gbx_sessions *all,
                             const struct gbx_session_ops *ops)
{
    s->sessions = all;
    s->session_ops = ops;
}

uint64_t gbx_server_sessions_count(const struct gbx_server *s, const char *owner)
{
    return s->session_ops ? s->session_ops->count(s->sessions, owner) : 0;
}

void gbx_server_sessions_each(struct gbx_server *s,
                              void (*fn)(void *arg, const struct gbx_session_info *i), void *arg)
{
    if (s->session_ops)
        s->session_ops->each_info(s->sessions, fn, arg);
}

int gbx_server_sessions_delete(struct gbx_server *s, const char *id, const char *why)
{
    return s->session_ops ? s->session_ops->remove(s->sessions, id, why) : 0;
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
    int r = gbx_criu_probe_result(&why);
    if (r < 0) /* the daemon stopped before the probe ended: nothing is known */
        return;
    if (r == 1)
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
    s->hello_timeout_ms = cfg->hello_timeout_ms > 0 ? cfg->hello_timeout_ms : GBX_HELLO_TIMEOUT_MS;
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
    gbx_srv_set_ingress_domain(s, cfg->ingress_domain);
    s->max_upload = cfg->max_upload ? cfg->max_upload : GBX_DEFAULT_MAX_UPLOAD;
    if (cfg->limits)
        s->limits = *cfg->limits;
    else
        gbx_limits_init(&s->limits, gbx_srv_host_ram(), (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
    s->pool_spec = gbx_srv_limits_spec(&s->limits.dflt, s->limits.dflt_disk);
    if (egress_new(s, cfg, err) < 0 || gbx_srv_adopt_all(s, err) < 0 ||
        gbx_snapshots_new(s, &s->snapshots, err) < 0)
        goto fail;
    gbx_snapshots_sweep(s->snapshots);
    /* what CRIU can do on this kernel, found out off the loop (cached per kernel build) */
    if (gbx_offload_submit(s->offload, probe_work, probe_done, s) < 0)
        gbx_log_warn("cannot probe CRIU: hibernate waits for its first use to find out");
    if (gbx_gc_new(s, base, &cfg->retention, &s->gc) < 0) {
        gbx_err_set(err, ENOMEM, GBX_ERR_INTERNAL, "cannot start the retention collector");
        goto fail;
    }
    s->sock_path = gbx_asprintf("%s/api.sock", s->rt.runtime_dir);
    s->reaper = event_new(base, -1, EV_PERSIST, gbx_srv_reap_expired, s);
    struct timeval every = {0, 200000};
    event_add(s->reaper, &every);
    gbx_srv_pool_start(s);
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

size_t gbx_server_drain(struct gbx_server *s)
{
    return gbx_srv_creates_abort(s);
}

void gbx_server_shutdown(struct gbx_server *s, int kill_sandboxes)
{
    if (s->reaper) {
        event_free(s->reaper);
        s->reaper = NULL;
    }
    if (s->pool_ev) {
        event_free(s->pool_ev);
        s->pool_ev = NULL;
    }
    gbx_srv_creates_abort(s); /* before the sessions: a create's callback may be theirs */
    if (s->session_ops)       /* their agent connections, before the sandboxes go */
        s->session_ops->free(s->sessions);
    s->sessions = NULL;
    s->session_ops = NULL;
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
    gbx_criu_probe_stop(); /* nor does the CRIU probe (up to 15 s on a kernel where it hangs) */
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
    free(s->sock_path);
    free(s->pool_spec);
    gbx_srv_set_ingress_domain(s, NULL);
    free(s);
}
