/* SPDX-License-Identifier: MIT */
/* Making a sandbox: the create request parsed and checked, the create itself (prepared on
 * the loop, spawned on a worker thread, finished on the loop), the warm pool, and the rows a
 * live sandbox keeps in the store. */
#include "base/clock.h"
#include "core/server.h"
#include "core/snapshots.h"
#include "core/gc.h"
#include "core/hibernate.h"
#include "core/boot.h"
#include "core/templates.h"
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
#include "core/sandboxes.h"
#include "core/spec.h"
#include "agent/aconn.h"
#include "core/offload.h"
#include "base/fault.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/backend.h"
#include "sandbox/criu.h"
#include "store/store.h"
#include "store/writer.h"

#include "core/server_int.h"

/* ---- handlers ----------------------------------------------------------------------------- */

/* Forget a sandbox's row (through the writer: nothing waits for it). */
void gbx_srv_store_delete(struct gbx_server *s, const char *id)
{
    s->writes_pending++;
    gbx_store_writer_sandbox_delete(s->writer, id, gbx_srv_write_done, s);
}

static void live_row(const struct gbx_live *l, struct gbx_store_sandbox *row, char **attrs)
{
    *attrs = l->attrs ? json_dumps(l->attrs, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    *row = (struct gbx_store_sandbox){.id = l->sb->id,
                                      .owner = l->owner,
                                      .template_name = l->template_name,
                                      .state = l->hibernated ? "hibernated"
                                               : l->paused   ? "paused"
                                                             : "running",
                                      .spec = l->spec_text ? l->spec_text : "{}",
                                      .created_ns = l->created_ns,
                                      .host_uid = l->sb->host_uid,
                                      .uid_slot = l->sb->uid_slot,
                                      .init_pid = l->sb->init_pid,
                                      .expires_ns = l->expires_ns,
                                      .token = l->token,
                                      .attrs = *attrs};
}

static int store_put_live(struct gbx_server *s, const struct gbx_live *l, struct gbx_err **err);

void gbx_sandboxes_set_attr(struct gbx_server *s, struct gbx_live *l, const char *key,
                            json_t *value)
{
    if (l->attrs == NULL)
        l->attrs = json_object();
    if (value)
        json_object_set_new(l->attrs, key, value);
    else
        json_object_del(l->attrs, key);
    /* on the loop's connection, like every other write of a live sandbox's row, so that
     * rows are written in order (no fsync there: see gbx_store_relax) */
    struct gbx_err *err = NULL;
    if (store_put_live(s, l, &err) < 0) {
        gbx_log_error("sandbox '%s': %s", l->sb->id, err->msg);
        gbx_err_free(err);
    }
}

void gbx_sandboxes_save(struct gbx_server *s, struct gbx_live *l)
{
    struct gbx_err *err = NULL;
    if (store_put_live(s, l, &err) < 0) {
        gbx_log_error("sandbox '%s': %s", l->sb ? l->sb->id : "?", err->msg);
        gbx_err_free(err);
    }
}

static int store_put_live(struct gbx_server *s, const struct gbx_live *l, struct gbx_err **err)
{
    struct gbx_store_sandbox row;
    char *attrs = NULL;
    live_row(l, &row, &attrs);
    int r = gbx_store_sandbox_put(s->store, &row, err);
    free(attrs);
    return r;
}

/* 64 hex digits from the kernel's random source. */
void gbx_srv_new_token(char out[65])
{
    uint8_t raw[32];
    GBX_BUG_ON(getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw));
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

/* Copy the maps of a create request into l (env, metadata, labels, idempotency key). */
void gbx_srv_live_set_extras(struct gbx_live *l, const struct gbx_create_spec *c)
{
    if (c->env)
        l->env = json_deep_copy(c->env);
    if (c->metadata)
        l->metadata = json_deep_copy(c->metadata);
    if (c->labels)
        l->labels = json_deep_copy(c->labels);
    if (c->idem_key)
        l->idem_key = gbx_xstrdup(c->idem_key);
}

static struct gbx_live *live_find_idem(struct gbx_server *s, const char *owner, const char *key)
{
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (l->idem_key && strcmp(l->idem_key, key) == 0 && strcmp(l->owner, owner) == 0)
            return l;
    return NULL;
}

/* A sandbox from the warm pool, when the request asks for nothing a pooled one lacks. */
static struct pooled *pool_take(struct gbx_server *s, const struct gbx_create_spec *c);
void gbx_srv_pool_kick(struct gbx_server *s);

/* The egress policy a create asks for: checked before anything is created. */
static int create_policy(struct gbx_server *s, const struct gbx_actor *who,
                         struct gbx_create_spec *c, struct gbx_egress_policy **out,
                         struct gbx_err **err)
{
    if (c->policy)
        *out = gbx_steal_ptr(&c->policy); /* the front end parsed its own form */
    else if (gbx_egress_policy_parse(c->network, gbx_egress_default_mode(s->egress), out, err) < 0)
        return gbx_err_wrap(err, "'network'");
    if ((*out)->nsecrets && !who->admin) {
        gbx_egress_policy_free(*out);
        *out = NULL;
        return gbx_err_set(err, EPERM, GBX_ERR_PERMISSION,
                           "only the admin may attach secrets to a sandbox");
    }
    if (gbx_egress_check_secrets(s->egress, *out, err) < 0) {
        gbx_egress_policy_free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* An imported image's environment (oci_env in template.conf: ["K=V", ...]) under the
 * create's own: the image's PATH and the like hold in its sandboxes. */
static void env_add_template(struct gbx_server *s, struct gbx_live *l)
{
    if (strcmp(l->template_name, GBX_TEMPLATE_HOST) == 0)
        return;
    gbx_autofree char *v = NULL;
    if (gbx_template_conf_get(s->rt.state_dir, l->template_name, "oci_env", &v) < 0 || v == NULL)
        return;
    json_t *arr = json_loads(v, 0, NULL);
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *kv = json_string_value(e);
        const char *eq = kv ? strchr(kv, '=') : NULL;
        if (eq == NULL || eq == kv)
            continue;
        gbx_autofree char *k = gbx_xstrndup(kv, (size_t)(eq - kv));
        if (l->env == NULL)
            l->env = json_object();
        if (json_object_get(l->env, k) == NULL)
            json_object_set_new(l->env, k, json_string(eq + 1));
    }
    json_decref(arr);
}

/* Point the usual variables at the CA bundle that holds the egress CA (unless the caller set
 * them): tools that do not read the system bundle still trust intercepted hosts. */
void gbx_srv_env_add_trust(struct gbx_live *l)
{
    if (l->env == NULL)
        l->env = json_object();
    for (size_t i = 0; gbx_egress_trust_env[i]; i++)
        if (json_object_get(l->env, gbx_egress_trust_env[i]) == NULL)
            json_object_set_new(l->env, gbx_egress_trust_env[i],
                                json_string("/etc/ssl/certs/ca-certificates.crt"));
}

/* A template made from a snapshot is its base template with layers on top: append them to
 * *layers (a snapshot's come first) and give the base's name (owned) for the library. */
int gbx_srv_stack_template(struct gbx_server *s, const char *tmpl, char ***layers, size_t *n,
                           char **base, struct gbx_err **err)
{
    char **tl = NULL;
    size_t tn = 0;
    if (strcmp(tmpl, GBX_TEMPLATE_HOST) == 0) { /* the built-in one has no base: no file read */
        *base = gbx_xstrdup(tmpl);
        return 0;
    }
    if (gbx_template_resolve(s->rt.state_dir, tmpl, base, &tl, &tn, err) < 0)
        return -1;
    if (tn == 0)
        return 0;
    char **v = gbx_xcalloc(*n + tn, sizeof(char *));
    for (size_t i = 0; i < *n; i++)
        v[i] = (*layers)[i];
    for (size_t i = 0; i < tn; i++)
        v[*n + i] = tl[i];
    free(*layers);
    free(tl);
    *layers = v;
    *n += tn;
    return 0;
}

int gbx_sandboxes_layers(struct gbx_server *s, const struct gbx_actor *who, const char *tmpl,
                         const char *snapshot, char ***layers, size_t *n, char **base,
                         struct gbx_err **err)
{
    *layers = NULL;
    *n = 0;
    *base = NULL;
    const char *snap_tmpl = NULL, *snap_id = NULL;
    if (snapshot &&
        gbx_snapshots_layers(s->snapshots, who, snapshot, layers, n, &snap_tmpl, &snap_id, err) < 0)
        return -1;
    if (gbx_srv_stack_template(s, tmpl, layers, n, base, err) < 0) {
        gbx_snapshots_layers_free(*layers, *n);
        *layers = NULL;
        *n = 0;
        return -1;
    }
    return 0;
}

/* A create on its way: what the loop checked (create_prepare), what a worker thread made of
 * it (create_spawn), and what the loop then records (create_finish). */
struct create_job {
    struct gbx_server *s;
    struct gbx_create_spec c; /* the job's own copy (its policy moves to policy) */
    struct gbx_actor who;     /* who asked (a copy: the job outlives the request's turn) */
    json_t *asked;            /* the request as its native body, before defaults */
    char *spec_text;          /* the same as stored (and compared by a retried create) */
    char *snap_id;            /* the snapshot it starts from, or NULL */
    char *id;                 /* its id (reserved while it is made) */
    char *base;               /* the template the library makes it from */
    char *tmpl;               /* the template's stored name (the key's own, or a shared one) */
    char **layers;
    size_t nlayers;
    struct gbx_egress_policy *policy;
    int64_t t0;
    int pooled;                    /* sb and egress came from the warm pool */
    struct gbx_sandbox *sb;        /* the worker's, or the pool's */
    struct gbx_egress_sb *egress;  /* the pool's */
    struct gbx_egress_socks socks; /* the worker's plumbing of its namespace */
    struct gbx_err *err;
    struct gbx_aconn_hello *hello; /* init's HELLO, awaited on the loop, or NULL */
    int silent_peer;               /* the fault suite's (create.silent) HELLO peer, or -1 */
    gbx_sandboxes_created_fn done;
    void *arg;
    struct create_job *next, **pprev; /* in s->creating; removed in O(1): a thousand creates
                                       * at once end one after another on the loop */
};

static void create_job_free(struct create_job *j)
{
    if (j == NULL)
        return;
    gbx_snapshots_layers_free(j->layers, j->nlayers);
    gbx_egress_policy_free(j->policy);
    gbx_egress_socks_release(&j->socks);
    gbx_err_free(j->err);
    gbx_create_spec_clear(&j->c);
    json_decref(j->asked);
    free(j->spec_text);
    free(j->snap_id);
    free(j->id);
    free(j->base);
    free(j->tmpl);
    if (j->silent_peer >= 0)
        close(j->silent_peer);
    free(j);
}

void gbx_srv_creating_use(const struct gbx_server *s, const char *owner, struct gbx_quota_use *use)
{
    for (const struct create_job *j = s->creating; j; j = j->next) {
        if (strcmp(j->who.owner, owner) != 0)
            continue;
        use->sandboxes++;
        use->memory += gbx_srv_quota_memory(s, &j->c.limits);
        use->disk += j->c.disk_bytes;
    }
}

/* An id some create is making, or some delete still taking down. */
static int id_reserved(const struct gbx_server *s, const char *id)
{
    for (const struct create_job *j = s->creating; j; j = j->next)
        if (strcmp(j->id, id) == 0)
            return 1;
    for (const struct reserved_id *r = s->going; r; r = r->next)
        if (strcmp(r->id, id) == 0)
            return 1;
    return 0;
}

/* Everything a create checks before any sandbox exists. 0 with *out a job, 1 with *existing
 * the sandbox an earlier create with the same idempotency key made, -1 with *err. The job
 * takes what spec holds (spec is left empty). */
static int create_prepare(struct gbx_server *s, const struct gbx_actor *who,
                          struct gbx_create_spec *spec, struct create_job **out,
                          struct gbx_live **existing, struct gbx_err **err)
{
    struct create_job *j = gbx_xcalloc(1, sizeof(*j));
    j->silent_peer = -1;
    j->s = s;
    j->socks.proxy_fd = j->socks.dns_udp_fd = j->socks.dns_tcp_fd = -1;
    j->t0 = gbx_monotonic_ns();
    j->who = *who;
    struct gbx_create_spec *c = &j->c;
    *c = *spec;
    gbx_create_spec_init(spec);
    j->asked = gbx_create_spec_json(c);
    j->spec_text = json_dumps(j->asked, JSON_COMPACT | JSON_SORT_KEYS);
    GBX_BUG_ON(j->spec_text == NULL);
    if (gbx_limits_resolve(&s->limits, &c->limits, &c->disk_bytes, &c->timeout_ms, c->timeout_set,
                           err) < 0 ||
        create_policy(s, who, c, &j->policy, err) < 0)
        goto fail;
    if (c->template_name) { /* template names are per key: its own, else a shared one */
        j->tmpl = gbx_templates_ref(s, who, c->template_name);
        free(c->template_name);
        c->template_name = gbx_xstrdup(j->tmpl);
    }
    if (c->idem_key) {
        struct gbx_live *prev = live_find_idem(s, who->owner, c->idem_key);
        if (prev && strcmp(prev->spec_text, j->spec_text) == 0) {
            /* a retried create: the sandbox it made, not a second one */
            create_job_free(j);
            *existing = prev;
            return 1;
        }
        if (prev) {
            gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT,
                        "idempotency key '%s' was used for sandbox '%s' with a different "
                        "request; use a new key",
                        c->idem_key, prev->sb->id);
            goto fail;
        }
    }
    if (c->id && (gbx_srv_live_find_any(s, c->id) || id_reserved(s, c->id))) {
        /* the same answer whoever holds the id (yours, another key's, one being made or
         * taken down): it says only that this id cannot be used now */
        gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT,
                    "sandbox id '%s' is not available; choose another (or let the server "
                    "choose)",
                    c->id);
        goto fail;
    }
    if (c->snapshot) {
        const char *snap_tmpl = NULL, *snap_id = NULL;
        if (gbx_snapshots_layers(s->snapshots, who, c->snapshot, &j->layers, &j->nlayers,
                                 &snap_tmpl, &snap_id, err) < 0)
            goto fail;
        if (c->template_name && strcmp(c->template_name, snap_tmpl) != 0) {
            gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "snapshot '%s' is of template '%s', not '%s'",
                        c->snapshot, snap_tmpl, c->template_name);
            goto fail;
        }
        free(c->template_name);
        c->template_name = gbx_xstrdup(snap_tmpl);
        j->snap_id = gbx_xstrdup(snap_id);
    }
    /* reserved from here: the job counts (s->creating) until it is a live sandbox or gone */
    struct gbx_quota_use add = {
        .sandboxes = 1, .memory = gbx_srv_quota_memory(s, &c->limits), .disk = c->disk_bytes};
    if (gbx_sandboxes_quota_admit(s, who, &add, err) < 0)
        goto fail;
    struct pooled *pp = pool_take(s, c);
    if (pp) {
        j->pooled = 1;
        j->sb = pp->sb;
        j->egress = pp->egress;
        j->id = gbx_xstrdup(pp->sb->id);
        free(pp);
        s->m.pool_hits++;
        gbx_srv_pool_kick(s);
        /* pooled with the default policy, which allows nothing more than any policy */
        GBX_BUG_ON(gbx_egress_set_policy(j->egress, j->policy, NULL) < 0); /* secrets checked */
    } else {
        j->id = c->id ? gbx_xstrdup(c->id) : gbx_sandbox_id_new();
        if (gbx_srv_stack_template(s, c->template_name ? c->template_name : GBX_DEFAULT_TEMPLATE,
                                   &j->layers, &j->nlayers, &j->base, err) < 0)
            goto fail;
        if (s->pool_target)
            s->m.pool_misses++;
    }
    *out = j;
    return 0;
fail:
    create_job_free(j);
    return -1;
}

/* Creates at once on worker threads: a create is mostly the kernel's work (clone3, mounts,
 * cgroups), so more of them than CPUs make none faster and the loop slower to answer; one CPU
 * is left to the loop. */
static pthread_mutex_t spawn_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t spawn_cv = PTHREAD_COND_INITIALIZER;
static int spawn_running, spawn_max;

static void spawn_gate(int enter)
{
    pthread_mutex_lock(&spawn_mu);
    if (spawn_max == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        /* one CPU fewer than the host has (at least one): a create's kernel work does not
         * yield its CPU (a kernel without preemption of system calls), so with every CPU in
         * one the loop waits for a create to end before it answers (bench_load: /healthz p99
         * under load 2.0-2.8 ms with as many creates as CPUs, 1.2-1.6 ms with one fewer, on 2) */
        spawn_max = n <= 2 ? 1 : n > 17 ? 16 : (int)n - 1;
    }
    if (enter) {
        while (spawn_running >= spawn_max)
            pthread_cond_wait(&spawn_cv, &spawn_mu);
        spawn_running++;
    } else {
        spawn_running--;
        pthread_cond_signal(&spawn_cv);
    }
    pthread_mutex_unlock(&spawn_mu);
}

/* gbx_sandbox_create through the gate (on a worker thread: the loop never waits at it). */
static int spawn_gated(struct gbx_runtime *rt, const struct gbx_sandbox_spec *spec,
                       struct gbx_sandbox **out, struct gbx_err **err)
{
    spawn_gate(1);
    int r = gbx_sandbox_create(rt, spec, out, err);
    spawn_gate(0);
    return r;
}

/* The sandbox itself and its network's plumbing: the blocking part, on a worker thread (it
 * touches nothing of the loop's). */
static void create_spawn(struct create_job *j)
{
    struct gbx_sandbox_spec spec = {.id = j->id,
                                    .template_name = j->base,
                                    .limits = j->c.limits,
                                    .disk_bytes = j->c.disk_bytes,
                                    .ctl_socket = 1,
                                    .layers = (const char *const *)j->layers,
                                    .nlayers = j->nlayers};
    if (spawn_gated(&j->s->rt, &spec, &j->sb, &j->err) < 0)
        return;
    /* init has exec'd (its namespaces are whole): the plumbing needs no answer from it; HELLO
     * is left to the loop (create_done), which waits for it without blocking */
    if (gbx_egress_netns_setup(j->sb->init_pid, &j->socks, &j->err) < 0) {
        (void)!gbx_sandbox_destroy(j->sb, NULL);
        j->sb = NULL;
    }
}

/* A made sandbox's HELLO failed, or the daemon is stopping: it is torn down, and err says
 * why (the job's answer). */
static void create_undo(struct create_job *j, const struct gbx_err *err)
{
    (void)!gbx_sandbox_destroy(j->sb, NULL);
    j->sb = NULL;
    gbx_err_free(j->err);
    j->err = NULL;
    gbx_err_set(&j->err, err->errnum, err->kind, "create sandbox '%s': %s", j->id, err->msg);
}

/* The new sandbox into the registry and the store, audited; the job is freed. 0 with *out, or
 * -1 with *err (the sandbox is destroyed). */
static int create_finish(struct create_job *j, struct gbx_live **out, struct gbx_err **err)
{
    struct gbx_server *s = j->s;
    const struct gbx_create_spec *c = &j->c;
    struct gbx_egress_sb *egress = j->egress;
    if (!j->pooled &&
        gbx_egress_attach_socks(s->egress, j->id, j->policy, &j->socks, &egress, err) < 0) {
        s->m.create_failed++;
        (void)!gbx_sandbox_destroy(j->sb, NULL);
        create_job_free(j);
        return -1;
    }
    gbx_fault_point("create.spawned");
    struct gbx_live *l = gbx_xcalloc(1, sizeof(*l));
    l->sb = j->sb;
    l->template_name = gbx_xstrdup(c->template_name ? c->template_name : GBX_DEFAULT_TEMPLATE);
    l->owner = gbx_xstrdup(j->who.owner);
    l->limits = c->limits; /* with the defaults for what it did not ask */
    l->disk_bytes = c->disk_bytes;
    l->created_ns = gbx_realtime_ns();
    l->expires_ns = c->timeout_ms ? l->created_ns + (int64_t)c->timeout_ms * 1000000 : 0;
    l->spec_text = gbx_steal_ptr(&j->spec_text);
    gbx_srv_new_token(l->token);
    gbx_srv_live_set_extras(l, c);
    l->egress = egress;
    l->on_timeout_pause = c->on_timeout_pause;
    l->public_traffic = c->public_traffic;
    l->auto_resume = c->auto_resume;
    l->timeout_ms = c->timeout_ms;
    env_add_template(s, l);
    l->attrs = json_object();
    if (j->snap_id)
        json_object_set_new(l->attrs, "snapshot", json_string(j->snap_id));
    /* what it was given, for a restarted daemon (its request says only what it asked) */
    json_object_set_new(l->attrs, "limits", gbx_srv_limits_json(&l->limits, l->disk_bytes));
    gbx_srv_env_add_trust(l);
    l->next = s->live;
    s->live = l;
    gbx_srv_observe_create(s, (double)(gbx_monotonic_ns() - j->t0) / 1e9);

    /* a sandbox the store does not know would not survive a restart: it is not made */
    if (store_put_live(s, l, err) < 0) {
        s->m.create_failed++;
        s->live = l->next;
        gbx_autofree char *sid = gbx_xstrdup(l->sb->id);
        (void)!gbx_sandbox_destroy(l->sb, NULL);
        gbx_srv_live_free(l);
        create_job_free(j);
        return gbx_err_wrap(err, "create sandbox '%s': cannot record it", sid);
    }
    gbx_fault_point("create.recorded");
    json_t *detail = json_deep_copy(j->asked);
    if (l->env) {
        json_t *names = json_array(); /* names only: values may be private */
        const char *k;
        json_t *v;
        json_object_foreach(l->env, k, v)
        {
            json_array_append_new(names, json_string(k));
        }
        json_object_set_new(detail, "env", names);
    }
    if (j->pooled)
        json_object_set_new(detail, "pooled", json_true());
    gbx_server_audit(s, &j->who, "sandbox.create", l->sb->id, detail);
    gbx_log_info("created sandbox '%s'%s", l->sb->id, j->pooled ? " (from the pool)" : "");
    create_job_free(j);
    *out = l;
    return 0;
}

static void create_work(void *arg)
{
    create_spawn(arg);
}

/* The end of an asynchronous create, on the loop: the sandbox recorded, or the error. */
static void create_end(struct create_job *j)
{
    struct gbx_server *s = j->s;
    *j->pprev = j->next;
    if (j->next)
        j->next->pprev = j->pprev;
    gbx_sandboxes_created_fn done = j->done;
    void *darg = j->arg;
    struct gbx_live *l = NULL;
    struct gbx_err *err = NULL;
    /* the rest runs as whoever asked for it: j->who */
    if (j->sb == NULL) {
        s->m.create_failed++;
        err = gbx_steal_ptr(&j->err);
        create_job_free(j);
    } else if (create_finish(j, &l, &err) < 0) {
        l = NULL;
    }
    done(darg, l, 0, err);
    gbx_err_free(err);
}

static void create_hello_done(void *arg, const struct gbx_err *err)
{
    struct create_job *j = arg;
    j->hello = NULL;
    if (err)
        create_undo(j, err);
    create_end(j);
}

/* The worker has made the sandbox (or failed): on the loop, init's HELLO, then the end. */
static void create_done(void *arg)
{
    struct create_job *j = arg;
    if (j->sb && j->sb->conn_fd >= 0 && gbx_fault("create.hello") < 0) {
        struct gbx_err *err = NULL;
        gbx_err_set(&err, EIO, GBX_ERR_UNAVAILABLE, "agent hello: the connection was lost");
        create_undo(j, err);
        gbx_err_free(err);
    } else if (j->sb && j->sb->conn_fd >= 0) {
        int fd = gbx_steal_fd(&j->sb->conn_fd);
        int sp[2];
        if (gbx_fault("create.silent") < 0 &&
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0) {
            /* for the fault suite: an init that never answers (its peer is kept, silent) */
            close(fd);
            fd = sp[0];
            j->silent_peer = sp[1];
        }
        j->hello = gbx_aconn_hello(j->s->base, fd, j->s->hello_timeout_ms, create_hello_done, j);
        return;
    }
    create_end(j);
}

/* A create off the loop from a spec it takes (left empty). */
static void create_later(struct gbx_server *s, const struct gbx_actor *who,
                         struct gbx_create_spec *spec, gbx_sandboxes_created_fn done, void *arg)
{
    struct create_job *j = NULL;
    struct gbx_live *l = NULL;
    struct gbx_err *err = NULL;
    int r = create_prepare(s, who, spec, &j, &l, &err);
    if (r == 0 && j->pooled) {
        r = create_finish(j, &l, &err);
        j = NULL;
    }
    if (j == NULL) {
        done(arg, r < 0 ? NULL : l, r == 1, err);
        gbx_err_free(err);
        return;
    }
    j->done = done;
    j->arg = arg;
    j->next = s->creating;
    if (j->next)
        j->next->pprev = &j->next;
    j->pprev = &s->creating;
    s->creating = j;
    if (gbx_offload_submit(s->offload, create_work, create_done, j) < 0) {
        gbx_err_set(&j->err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
        create_done(j);
    }
}

void gbx_sandboxes_create_async(struct gbx_server *s, const struct gbx_actor *who, json_t *body,
                                gbx_sandboxes_created_fn done, void *arg)
{
    struct gbx_create_spec c;
    struct gbx_err *err = NULL;
    if (gbx_create_spec_parse(&s->limits, body, &c, &err) < 0) {
        done(arg, NULL, 0, err);
        gbx_err_free(err);
        return;
    }
    create_later(s, who, &c, done, arg);
    gbx_create_spec_clear(&c);
}

void gbx_sandboxes_create_spec_async(struct gbx_server *s, const struct gbx_actor *who,
                                     const struct gbx_create_spec *spec,
                                     gbx_sandboxes_created_fn done, void *arg)
{
    struct gbx_create_spec c;
    gbx_create_spec_copy(&c, spec);
    create_later(s, who, &c, done, arg);
    gbx_create_spec_clear(&c);
}

/* ---- warm pool ------------------------------------------------------------------------------ */

static int pooled_dead(const struct pooled *p)
{
    struct pollfd pf = {.fd = p->sb->pidfd, .events = POLLIN};
    return p->sb->pidfd >= 0 && poll(&pf, 1, 0) == 1 && (pf.revents & POLLIN);
}

/* A pooled sandbox out of the pool: torn down, its row removed; why: it was lost. */
static void pool_discard(struct gbx_server *s, struct pooled *p, const char *why)
{
    gbx_autofree char *id = gbx_xstrdup(p->sb->id);
    if (why) {
        gbx_log_warn("pooled sandbox '%s' is gone: %s; removed", id, why);
        s->m.lost++;
    }
    gbx_egress_detach(p->egress);
    (void)!gbx_sandbox_destroy(p->sb, NULL);
    gbx_srv_store_delete(s, id);
    free(p);
}

void gbx_srv_pool_reap(struct gbx_server *s)
{
    size_t gone = 0;
    for (struct pooled **pp = &s->pool; *pp;) {
        struct pooled *p = *pp;
        if (!pooled_dead(p)) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        s->pool_len--;
        pool_discard(s, p, "its init died");
        gone++;
    }
    if (gone)
        gbx_srv_pool_kick(s); /* made again */
}

/* Pooled sandboxes have rows in state "pooled" (owner "", spec: the default limits they were
 * made with), so that a daemon that was killed finds them again (and keeps them only if its
 * defaults are the same); they are never handed out twice. */
static struct pooled *pool_take(struct gbx_server *s, const struct gbx_create_spec *c)
{
    /* pooled sandboxes have the default limits (c's, with the defaults applied, must match) */
    const struct gbx_limits *lim = &s->limits;
    if (c->id || c->snapshot || c->disk_bytes != lim->dflt_disk ||
        c->limits.memory_bytes != lim->dflt.memory_bytes || c->limits.pids != lim->dflt.pids ||
        c->limits.cpu_millis != lim->dflt.cpu_millis ||
        (c->template_name && strcmp(c->template_name, GBX_DEFAULT_TEMPLATE) != 0))
        return NULL;
    gbx_srv_pool_reap(s); /* never hand out a sandbox whose init died since the reaper ran */
    if (s->pool == NULL)
        return NULL;
    struct pooled *p = s->pool;
    s->pool = p->next;
    s->pool_len--;
    p->next = NULL;
    return p;
}

void gbx_srv_pool_push(struct gbx_server *s, struct gbx_sandbox *sb, struct gbx_egress_sb *egress)
{
    struct pooled *p = gbx_xcalloc(1, sizeof(*p));
    p->sb = sb;
    p->egress = egress;
    /* first in, first out: the oldest waits least long */
    struct pooled **pp = &s->pool;
    while (*pp)
        pp = &(*pp)->next;
    *pp = p;
    s->pool_len++;
}

/* One sandbox on its way into the pool: made on a worker thread, its HELLO awaited on the
 * loop, attached to the egress gateway, then its row written; counted in s->pool_inflight
 * from start to end, so that the pool is never over-filled. */
struct pool_fill {
    struct gbx_server *s;
    char id[64];
    struct gbx_cg_limits limits; /* the defaults when it was started (copied on the loop) */
    uint64_t disk_bytes;
    unsigned gen; /* s->pool_gen then: a reload that changed the defaults makes it stale */
    struct gbx_sandbox *sb;
    struct gbx_egress_sb *egress;
    struct gbx_err *err;
    struct gbx_aconn_hello *hello;
    struct pool_fill *next, **pprev; /* in s->pool_filling while it waits on the loop */
};

static void pool_row_done(void *arg, int status, const char *msg);

/* A fill that did not make it (err says why): torn down, and the next try waits a second. */
static void pool_fill_end(struct pool_fill *pf, const struct gbx_err *err)
{
    struct gbx_server *s = pf->s;
    if (pf->pprev) {
        *pf->pprev = pf->next;
        if (pf->next)
            pf->next->pprev = pf->pprev;
    }
    gbx_aconn_hello_cancel(pf->hello);
    s->pool_inflight--;
    int stopping = s->pool_ev == NULL; /* the daemon is: no retry, nothing to report */
    if (err && !stopping)
        gbx_log_warn("warm pool: %s (retrying in a second)", err->msg);
    if (pf->egress)
        gbx_egress_detach(pf->egress);
    if (pf->sb)
        (void)!gbx_sandbox_destroy(pf->sb, NULL);
    gbx_err_free(pf->err);
    free(pf);
    if (err == NULL || stopping)
        return;
    s->m.pool_failed++;
    s->pool_backoff = 1;
    struct timeval later = {1, 0};
    event_add(s->pool_ev, &later);
}

static void pool_work(void *arg)
{
    struct pool_fill *pf = arg;
    struct gbx_server *s = pf->s;
    struct gbx_sandbox_spec spec = {
        .id = pf->id, .ctl_socket = 1, .limits = pf->limits, .disk_bytes = pf->disk_bytes};
    (void)!spawn_gated(&s->rt, &spec, &pf->sb, &pf->err);
}

/* Init answered: attached to the gateway, and into the pool once its row is durable (a daemon
 * killed meanwhile must find it). */
static void pool_hello_done(void *arg, const struct gbx_err *herr)
{
    struct pool_fill *pf = arg;
    struct gbx_server *s = pf->s;
    pf->hello = NULL;
    struct gbx_err *err = NULL;
    if (herr)
        return pool_fill_end(pf, herr);
    if (pf->gen != s->pool_gen) { /* made with the defaults before a reload: not pooled */
        pool_fill_end(pf, NULL);
        gbx_srv_pool_kick(s);
        return;
    }
    if (gbx_egress_attach(s->egress, pf->sb->id, pf->sb->init_pid, NULL, &pf->egress, &err) < 0) {
        pool_fill_end(pf, err);
        gbx_err_free(err);
        return;
    }
    *pf->pprev = pf->next;
    if (pf->next)
        pf->next->pprev = pf->pprev;
    pf->pprev = NULL;
    struct gbx_store_sandbox row = {.id = pf->sb->id,
                                    .owner = "",
                                    .template_name = GBX_DEFAULT_TEMPLATE,
                                    .state = "pooled",
                                    .spec = s->pool_spec, /* its limits (adopt.c) */
                                    .created_ns = gbx_realtime_ns(),
                                    .host_uid = pf->sb->host_uid,
                                    .uid_slot = pf->sb->uid_slot,
                                    .init_pid = pf->sb->init_pid};
    s->writes_pending++;
    gbx_store_writer_sandbox_put(s->writer, &row, pool_row_done, pf);
    gbx_srv_pool_kick(s);
}

/* Back from the worker thread, on the loop. */
static void pool_spawned(void *arg)
{
    struct pool_fill *pf = arg;
    struct gbx_server *s = pf->s;
    if (pf->sb == NULL) {
        struct gbx_err *err = gbx_steal_ptr(&pf->err);
        pool_fill_end(pf, err);
        gbx_err_free(err);
        return;
    }
    if (gbx_fault("pool.hello") < 0) {
        struct gbx_err *err = NULL;
        gbx_err_set(&err, EIO, GBX_ERR_UNAVAILABLE, "agent hello: the connection was lost");
        pool_fill_end(pf, err);
        gbx_err_free(err);
        return;
    }
    pf->next = s->pool_filling;
    if (pf->next)
        pf->next->pprev = &pf->next;
    pf->pprev = &s->pool_filling;
    s->pool_filling = pf;
    pf->hello = gbx_aconn_hello(s->base, gbx_steal_fd(&pf->sb->conn_fd), s->hello_timeout_ms,
                                pool_hello_done, pf);
}

void gbx_srv_pool_fill_one(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_server *s = arg;
    s->pool_backoff = 0;
    if (s->pool_len + s->pool_inflight >= s->pool_target)
        return;
    /* made off the loop, like any create: the loop goes on answering meanwhile */
    struct pool_fill *pf = gbx_xcalloc(1, sizeof(*pf));
    pf->s = s;
    gbx_autofree char *id = gbx_sandbox_id_new();
    snprintf(pf->id, sizeof(pf->id), "%s", id);
    pf->limits = s->limits.dflt;
    pf->disk_bytes = s->limits.dflt_disk;
    pf->gen = s->pool_gen;
    s->pool_inflight++;
    if (gbx_offload_submit(s->offload, pool_work, pool_spawned, pf) < 0) {
        s->pool_inflight--;
        free(pf);
        return;
    }
    gbx_srv_pool_kick(s);
}

static void pool_row_done(void *arg, int status, const char *msg)
{
    struct pool_fill *pf = arg;
    struct gbx_server *s = pf->s;
    s->pool_inflight--;
    s->writes_pending--;
    if (status < 0 || s->pool_ev == NULL || pf->gen != s->pool_gen) {
        if (status < 0)
            gbx_log_error("warm pool: cannot record sandbox '%s': %s", pf->sb->id, msg);
        gbx_autofree char *id = gbx_xstrdup(pf->sb->id);
        gbx_egress_detach(pf->egress);
        (void)!gbx_sandbox_destroy(pf->sb, NULL);
        if (status == 0) {
            gbx_srv_store_delete(s, id);
            gbx_srv_pool_kick(s); /* stale after a reload: made again with the new defaults */
        }
    } else {
        gbx_srv_pool_push(s, pf->sb, pf->egress);
        gbx_srv_pool_kick(s);
    }
    free(pf);
}

/* Schedule the next refill step: one sandbox per turn of the loop, so requests interleave. */
void gbx_srv_pool_kick(struct gbx_server *s)
{
    if (s->pool_ev == NULL || s->pool_len + s->pool_inflight >= s->pool_target || s->pool_backoff ||
        event_pending(s->pool_ev, EV_TIMEOUT, NULL))
        return;
    struct timeval now = {0, 0};
    event_add(s->pool_ev, &now);
}

void gbx_srv_pool_trim(struct gbx_server *s)
{
    if (s->pool_len <= s->pool_target)
        return;
    struct pooled *keep = NULL, **kt = &keep;
    size_t n = 0;
    while (s->pool && n < s->pool_target) {
        struct pooled *p = s->pool;
        s->pool = p->next;
        p->next = NULL;
        *kt = p;
        kt = &p->next;
        n++;
    }
    s->pool_len -= n;
    gbx_srv_pool_drain(s);
    s->pool = keep;
    s->pool_len = n;
}

void gbx_srv_pool_drain(struct gbx_server *s)
{
    while (s->pool) {
        struct pooled *p = s->pool;
        s->pool = p->next;
        s->pool_len--;
        pool_discard(s, p, NULL);
    }
}

size_t gbx_srv_creates_abort(struct gbx_server *s)
{
    size_t n = 0;
    struct gbx_err *stopping = NULL;
    gbx_err_set(&stopping, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
    /* (a job's end only unlinks that job: the next one stays where it is) */
    for (struct create_job *j = s->creating, *next; j; j = next) {
        next = j->next;
        if (j->hello == NULL)
            continue; /* on a worker thread, or recorded already */
        gbx_aconn_hello_cancel(j->hello);
        j->hello = NULL;
        create_undo(j, stopping);
        create_end(j);
        n++;
    }
    while (s->pool_filling) {
        struct pool_fill *pf = s->pool_filling;
        s->pool_filling = pf->next;
        if (pf->next)
            pf->next->pprev = &s->pool_filling;
        pf->pprev = NULL; /* unlinked here: pool_fill_end does not again */
        pool_fill_end(pf, stopping);
    }
    gbx_err_free(stopping);
    return n;
}

/* ---- several from one spec ------------------------------------------------------------------ */

struct many {
    struct gbx_server *s;
    struct gbx_actor who;
    struct gbx_create_spec spec;
    int left, keep_going;
    gbx_sandboxes_each_fn each;
    void (*done)(void *arg);
    void *arg;
};

static void many_made(void *arg, struct gbx_live *l, int existed, const struct gbx_err *err)
{
    (void)existed;
    struct many *m = arg;
    m->each(m->arg, l, err);
    if (--m->left > 0 && (l || (m->keep_going && err->errnum != ESHUTDOWN)))
        return gbx_sandboxes_create_spec_async(m->s, &m->who, &m->spec, many_made, m);
    m->done(m->arg);
    gbx_create_spec_clear(&m->spec);
    free(m);
}

void gbx_sandboxes_create_many(struct gbx_server *s, const struct gbx_actor *who,
                               const struct gbx_create_spec *spec, int count, int keep_going,
                               gbx_sandboxes_each_fn each, void (*done)(void *arg), void *arg)
{
    struct many *m = gbx_xcalloc(1, sizeof(*m));
    *m = (struct many){.s = s,
                       .who = *who,
                       .left = count,
                       .keep_going = keep_going,
                       .each = each,
                       .done = done,
                       .arg = arg};
    gbx_create_spec_copy(&m->spec, spec);
    gbx_sandboxes_create_spec_async(s, &m->who, &m->spec, many_made, m);
}

/* ---- rollback ---------------------------------------------------------------------------------
 */

struct rollback {
    struct gbx_server *s;
    struct gbx_actor who;
    char *id, *sid, *tmpl, *base;
    char **layers;
    size_t nlayers;
    struct gbx_cg_limits limits;
    uint64_t disk_bytes;
    struct gbx_egress_policy *policy;
    struct gbx_sandbox *old, *sb; /* the worker's */
    struct gbx_err *err;
    gbx_sandboxes_rolled_fn done;
    void *arg;
};

static void rollback_free(struct rollback *r)
{
    gbx_snapshots_layers_free(r->layers, r->nlayers);
    gbx_egress_policy_free(r->policy);
    gbx_err_free(r->err);
    free(r->id);
    free(r->sid);
    free(r->tmpl);
    free(r->base);
    free(r);
}

static void rollback_work(void *arg)
{
    struct rollback *r = arg;
    (void)!gbx_sandbox_destroy(r->old, NULL);
    r->old = NULL;
    struct gbx_sandbox_spec spec = {.id = r->id,
                                    .template_name = r->base,
                                    .limits = r->limits,
                                    .disk_bytes = r->disk_bytes,
                                    .ctl_socket = 1,
                                    .layers = (const char *const *)r->layers,
                                    .nlayers = r->nlayers};
    int rc = -1;
    if (gbx_fault("rollback.start") < 0)
        gbx_err_set(&r->err, EIO, GBX_ERR_INTERNAL, "fault injected: the new start failed");
    else
        rc = spawn_gated(&r->s->rt, &spec, &r->sb, &r->err);
    if (rc < 0) {
        r->sb = NULL;
    } else if (gbx_srv_agent_hello(r->sb, &r->err) < 0) { /* on this thread, blocking nothing */
        (void)!gbx_sandbox_destroy(r->sb, NULL);
        r->sb = NULL;
    }
}

static void rollback_done(void *arg)
{
    struct rollback *r = arg;
    struct gbx_server *s = r->s;
    struct gbx_live *l = gbx_srv_live_find_any(s, r->id);
    if (l) { /* the placeholder goes; the new tree takes its place */
        gbx_sandbox_forget(l->sb);
        l->sb = NULL;
        l->restarting = 0;
    }
    if (r->old) /* the job never ran (the daemon is stopping) */
        (void)!gbx_sandbox_destroy(gbx_steal_ptr(&r->old), NULL);
    if (l == NULL) { /* gone meanwhile (the daemon is stopping): nothing to keep */
        if (r->sb)
            (void)!gbx_sandbox_destroy(r->sb, NULL);
        if (r->err == NULL)
            gbx_err_set(&r->err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
        r->done(r->arg, NULL, r->err);
        return rollback_free(r);
    }
    if (r->sb &&
        gbx_egress_attach(s->egress, r->id, r->sb->init_pid, r->policy, &l->egress, &r->err) < 0) {
        (void)!gbx_sandbox_destroy(r->sb, NULL);
        r->sb = NULL;
    }
    if (r->sb == NULL) {
        gbx_err_wrap(&r->err, "roll back sandbox '%s' (it is gone)", r->id);
        gbx_log_error("%s", r->err->msg);
        r->done(r->arg, NULL, r->err);
        /* the old tree ended and no new one started: the sandbox is gone (as the daemon) */
        gbx_sandboxes_drop(s, l, r->id, "rollback failed");
        return rollback_free(r);
    }
    l->sb = gbx_steal_ptr(&r->sb);
    free(l->template_name);
    l->template_name = gbx_steal_ptr(&r->tmpl);
    l->paused = 0;
    l->busy = 0; /* for the reply's view; deletes that waited run below */
    gbx_sandboxes_set_attr(s, l, "snapshot", json_string(r->sid)); /* writes the new row */
    gbx_server_audit(s, &r->who, "sandbox.rollback", r->id, json_pack("{s:s}", "snapshot", r->sid));
    gbx_log_info("rolled sandbox '%s' back to snapshot '%s'", r->id, r->sid);
    r->done(r->arg, l, NULL);
    gbx_sandboxes_idle(s, l);
    rollback_free(r);
}

void gbx_sandboxes_rollback(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                            const char *snapshot, gbx_sandboxes_rolled_fn done, void *arg)
{
    gbx_autoerr struct gbx_err *err = NULL;
    if (l->busy || l->hibernated) {
        gbx_err_set(&err, EBUSY, GBX_ERR_CONFLICT, "sandbox '%s' is busy", l->sb->id);
        return done(arg, NULL, err);
    }
    struct rollback *r = gbx_xcalloc(1, sizeof(*r));
    const char *tmpl = NULL, *snap_id = NULL;
    if (gbx_snapshots_layers(s->snapshots, who, snapshot, &r->layers, &r->nlayers, &tmpl, &snap_id,
                             &err) < 0 ||
        gbx_srv_stack_template(s, tmpl, &r->layers, &r->nlayers, &r->base, &err) < 0) {
        rollback_free(r);
        return done(arg, NULL, err);
    }
    r->s = s;
    r->who = *who;
    r->id = gbx_xstrdup(l->sb->id);
    r->sid = gbx_xstrdup(snap_id);
    r->tmpl = gbx_xstrdup(tmpl);
    r->limits = l->limits;
    r->disk_bytes = l->disk_bytes;
    r->done = done;
    r->arg = arg;
    r->policy = gbx_egress_policy_dup(gbx_egress_policy_of(l->egress));
    /* the old tree's listeners go now; the new tree gets its own on the loop */
    gbx_egress_detach(l->egress);
    l->egress = NULL;
    l->busy = GBX_BUSY_WORKER;
    l->restarting = 1;
    r->old = l->sb;
    /* the worker owns the old tree now; the loop sees a placeholder with its id */
    GBX_BUG_ON(gbx_sandbox_hold(&s->rt, r->id, r->old->uid_slot, 0, &l->sb, NULL) < 0);
    if (gbx_offload_submit(s->offload, rollback_work, rollback_done, r) < 0) {
        /* not started (the daemon is stopping): the old tree is put back as it was */
        gbx_sandbox_forget(l->sb);
        l->sb = gbx_steal_ptr(&r->old);
        l->busy = 0;
        l->restarting = 0;
        (void)!gbx_egress_attach(s->egress, r->id, l->sb->init_pid, r->policy, &l->egress, NULL);
        gbx_err_set(&err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
        rollback_free(r);
        done(arg, NULL, err);
        gbx_sandboxes_idle(s, l);
    }
}
