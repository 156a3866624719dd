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
#include "api/sessions.h"
#include "api/snapshots.h"
#include "api/gc.h"
#include "api/hibernate.h"
#include "api/boot.h"
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
#include "api/e2b.h"
#include "api/exec.h"
#include "api/files.h"
#include "api/procs.h"
#include "api/reqmetrics.h"
#include "api/sandboxes.h"
#include "api/http.h"
#include "api/offload.h"
#include "base/fault.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/backend.h"
#include "sandbox/criu.h"
#include "store/store.h"
#include "store/writer.h"

#define GBX_DEFAULT_MAX_BODY (1u << 20)
#define GBX_DEFAULT_MAX_UPLOAD (64u << 20)
#define GBX_MAX_HEADERS (64u << 10)

struct create_job;
struct reserved_id {
    struct reserved_id *next;
    char *id;
};

/* A fresh sandbox of the default template, waiting in the warm pool. */
struct pooled {
    struct pooled *next;
    struct gbx_sandbox *sb;
    struct gbx_egress_sb *egress;
};

struct gbx_server {
    struct event_base *base;
    struct pooled *pool;
    size_t pool_len, pool_target;
    size_t pool_inflight;  /* created, row not yet durable */
    struct event *pool_ev; /* refills the pool, one sandbox per turn of the loop */
    int pool_backoff;      /* the last refill failed: wait before the next */
    struct evhttp *http;
    struct evconnlistener *unix_listener;
    char *sock_path;
    struct gbx_runtime rt;
    int rt_ready;
    int lock_fds[2]; /* <state>/gloveboxd.lock and <runtime>/gloveboxd.lock: one daemon each */
    struct gbx_store *store;         /* the loop's connection: reads, and rows that must be
                                        durable before a reply */
    struct gbx_store_writer *writer; /* everything else: audit, deletes, expiries (group commit) */
    struct event *writer_ev;
    size_t writes_pending;
    struct gbx_live *live;
    struct create_job *creating; /* creates on worker threads (their ids are taken) */
    struct reserved_id *going;   /* ids of sandboxes being taken down on worker threads */
    struct gbx_egress *egress;   /* DNS, proxy, policy and credentials of every sandbox */
    struct gbx_sessions *sessions;
    struct gbx_snapshots *snapshots;
    struct gbx_gc *gc;           /* retention */
    struct gbx_offload *offload; /* blocking work (copies, hashing, checkpoints) */
    struct event *reaper;        /* destroys sandboxes whose timeout passed */
    struct evhttp *http_tcp;     /* --listen: every request needs an API key */
    struct evhttp_bound_socket *unix_bound, *tcp_bound;
    size_t max_upload; /* the largest upload body (--max-upload) */
    const char *actor; /* the request being handled: "admin" or a key's name */
    int admin;
    char key_name[128];
    struct metrics {
        uint64_t create_buckets[12]; /* cumulative counts per bound in create_bounds */
        double create_sum;
        uint64_t create_count, create_failed;
        uint64_t execs, exec_out_bytes, exec_err_bytes;
        uint64_t exec_buckets[12]; /* start latency, same bounds as create */
        double exec_sum;
        uint64_t expired, lost, timeout_paused;
        uint64_t pool_hits, pool_misses, pool_failed;
    } m;
};

/* Upper bounds of the create-latency histogram, in seconds. */
static const double create_bounds[] = {0.001, 0.002, 0.003, 0.005, 0.0075, 0.01,
                                       0.025, 0.05,  0.1,   0.25,  0.5,    1.0};

static void observe_create(struct gbx_server *s, double secs)
{
    for (size_t i = 0; i < GBX_ARRAY_SIZE(create_bounds); i++)
        if (secs <= create_bounds[i])
            s->m.create_buckets[i]++;
    s->m.create_sum += secs;
    s->m.create_count++;
}

void gbx_server_exec_started(struct gbx_server *s, double secs)
{
    s->m.execs++;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(create_bounds); i++)
        if (secs <= create_bounds[i])
            s->m.exec_buckets[i]++;
    s->m.exec_sum += secs;
}

void gbx_server_exec_bytes(struct gbx_server *s, unsigned long long out, unsigned long long err)
{
    s->m.exec_out_bytes += out;
    s->m.exec_err_bytes += err;
}

static struct gbx_live *live_find_any(struct gbx_server *s, const char *id)
{
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (strcmp(l->sb->id, id) == 0)
            return l;
    return NULL;
}

static int visible(const struct gbx_server *s, const struct gbx_live *l)
{
    return s->admin || strcmp(l->owner, s->key_name) == 0;
}

/* A sandbox the current request may see: the admin sees all, a key only its own (others'
 * are reported as not found, so ids do not leak). */
static struct gbx_live *live_find(struct gbx_server *s, const char *id)
{
    struct gbx_live *l = live_find_any(s, id);
    return l && visible(s, l) ? l : NULL;
}

static json_t *sandbox_json(const struct gbx_live *l)
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
    json_t *j = json_pack(
        "{s:s,s:s,s:s,s:s,s:o,s:i}", "id", l->sb->id, "template", l->template_name, "state",
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
    return sandbox_json(l);
}

const char *gbx_server_actor(const struct gbx_server *s)
{
    return s->actor ? s->actor : "system";
}

/* The sandbox's agent answers HELLO on the connection its creator holds (it is ready); the
 * daemon then closes it: requests open their own connections (aconn.h), so an idle sandbox
 * costs the daemon no descriptor and no buffer. */
static int agent_hello(struct gbx_sandbox *sb, struct gbx_err **err)
{
    struct gbx_agent *a = NULL;
    if (gbx_agent_open(gbx_steal_fd(&sb->conn_fd), &a, err) < 0)
        return -1;
    gbx_agent_free(a);
    return 0;
}

int gbx_sandboxes_hello(struct gbx_sandbox *sb, struct gbx_err **err)
{
    return agent_hello(sb, err);
}

/* A write the writer thread made durable (or could not). */
static void write_done(void *arg, int status, const char *msg)
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

void gbx_server_audit(struct gbx_server *s, const char *kind, const char *sandbox, json_t *detail)
{
    gbx_server_audit_as(s, gbx_server_actor(s), kind, sandbox, detail);
}

void gbx_server_audit_as(struct gbx_server *s, const char *actor, const char *kind,
                         const char *sandbox, json_t *detail)
{
    char *text = detail ? json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    struct gbx_audit_entry e = {.actor = actor, .kind = kind, .sandbox = sandbox, .detail = text};
    s->writes_pending++;
    gbx_store_writer_audit(s->writer, &e, write_done, s);
    free(text);
    json_decref(detail);
}

/* ---- request parsing ---------------------------------------------------------------------- */

/* A size given as a number of bytes or a string like "512M". */
static int json_size(json_t *v, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) > 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v))
        return gbx_parse_size(json_string_value(v), out);
    return -EINVAL;
}

/* A timeout: seconds as a number, or a duration string ("30s", "5m", "1500ms"); 0 means
 * none. At most 30 days. */
static int json_timeout_ms(json_t *v, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0 &&
        json_integer_value(v) <= 30 * 24 * 3600) {
        *out = (uint64_t)json_integer_value(v) * 1000;
        return 0;
    }
    if (json_is_string(v) && gbx_parse_duration_ms(json_string_value(v), out) == 0 &&
        *out <= 30ull * 24 * 3600 * 1000)
        return 0;
    return -EINVAL;
}

#define MAX_MAP_ENTRIES 64
#define MAX_MAP_VALUE 4096

/* A {"k": "v"} object of at most MAX_MAP_ENTRIES strings: metadata and labels. Label keys
 * and values are names (1-63 of [a-z0-9-], so a filter "k=v" is unambiguous). */
static int check_string_map(const char *field, json_t *v, int names, struct gbx_err **err)
{
    const char *k;
    json_t *x;
    if (!json_is_object(v) || json_object_size(v) > MAX_MAP_ENTRIES)
        goto bad;
    json_object_foreach(v, k, x)
    {
        if (!json_is_string(x) || strlen(k) == 0 || strlen(k) > 128 ||
            json_string_length(x) > MAX_MAP_VALUE ||
            memchr(json_string_value(x), 0, json_string_length(x)))
            goto bad;
        if (names && (gbx_name_valid(k) < 0 || gbx_name_valid(json_string_value(x)) < 0))
            goto bad;
    }
    return 0;
bad:
    if (names)
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                    "'%s' must be an object of at most %d entries whose keys and "
                    "values are 1-63 of a-z, 0-9 and '-'",
                    field, MAX_MAP_ENTRIES);
    else
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                    "'%s' must be an object of at most %d string values (keys up to "
                    "128 bytes, values up to %d)",
                    field, MAX_MAP_ENTRIES, MAX_MAP_VALUE);
    return -1;
}

/* {"NAME": "value"}: the environment every process of the sandbox starts with. */
static int check_env(json_t *v, struct gbx_err **err)
{
    const char *k;
    json_t *x;
    if (!json_is_object(v) || json_object_size(v) > 1024)
        goto bad;
    json_object_foreach(v, k, x)
    {
        char kv[8192];
        if (!json_is_string(x) ||
            snprintf(kv, sizeof(kv), "%s=%s", k, json_string_value(x)) >= (int)sizeof(kv) ||
            gbx_env_valid(kv) < 0 || memchr(json_string_value(x), 0, json_string_length(x)))
            goto bad;
    }
    return 0;
bad:
    gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                "'env' must be an object of at most 1024 variables: NAME to a string "
                "value (at most 8 KiB each)");
    return -1;
}

static int parse_create(json_t *body, struct gbx_create_opts *c, struct gbx_err **err)
{
    memset(c, 0, sizeof(*c));
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "id") == 0) {
            if (!json_is_string(v) || gbx_sandbox_id_valid(json_string_value(v)) < 0)
                goto bad_id;
            c->id = json_string_value(v);
        } else if (strcmp(key, "template") == 0) {
            if (!json_is_string(v) || gbx_name_valid(json_string_value(v)) < 0) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'template' must be a template name");
                return -1;
            }
            c->template_name = json_string_value(v);
        } else if (strcmp(key, "memory") == 0) {
            if (json_size(v, &c->limits.memory_bytes) < 0 || c->limits.memory_bytes < (4u << 20)) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                            "'memory' must be a size of at least 4M (bytes, or a "
                            "string like \"512M\")");
                return -1;
            }
        } else if (strcmp(key, "disk") == 0) {
            if (json_size(v, &c->disk_bytes) < 0 || c->disk_bytes < (1u << 20)) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'disk' must be a size of at least 1M");
                return -1;
            }
        } else if (strcmp(key, "pids") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > 4194304) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                            "'pids' must be an integer from 1 to 4194304");
                return -1;
            }
            c->limits.pids = (uint64_t)json_integer_value(v);
        } else if (strcmp(key, "timeout") == 0) {
            if (json_timeout_ms(v, &c->timeout_ms) < 0) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                            "'timeout' must be seconds (0 to 2592000) or a duration "
                            "like \"30s\", \"5m\"");
                return -1;
            }
        } else if (strcmp(key, "cpus") == 0) {
            double d = json_is_number(v) ? json_number_value(v) : -1;
            if (d < 0.01 || d > 1024) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                            "'cpus' must be a number of CPUs from 0.01 to 1024");
                return -1;
            }
            c->limits.cpu_millis = (uint32_t)(d * 1000 + 0.5);
        } else if (strcmp(key, "env") == 0) {
            if (check_env(v, err) < 0)
                return -1;
            c->env = v;
        } else if (strcmp(key, "metadata") == 0) {
            if (check_string_map("metadata", v, 0, err) < 0)
                return -1;
            c->metadata = v;
        } else if (strcmp(key, "labels") == 0) {
            if (check_string_map("labels", v, 1, err) < 0)
                return -1;
            c->labels = v;
        } else if (strcmp(key, "network") == 0) {
            if (!json_is_object(v) && !json_is_null(v)) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                            "'network' must be an object {mode, rules, secrets}");
                return -1;
            }
            c->network = v;
        } else if (strcmp(key, "snapshot") == 0) {
            if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 63) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                            "'snapshot' must be a snapshot id or name");
                return -1;
            }
            c->snapshot = json_string_value(v);
        } else if (strcmp(key, "on_timeout") == 0) {
            const char *ot = json_is_string(v) ? json_string_value(v) : "";
            if (strcmp(ot, "kill") != 0 && strcmp(ot, "pause") != 0) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                            "'on_timeout' must be \"kill\" or \"pause\"");
                return -1;
            }
            c->on_timeout_pause = ot[0] == 'p';
        } else if (strcmp(key, "idempotency_key") == 0) {
            if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 256 ||
                memchr(json_string_value(v), 0, json_string_length(v))) {
                gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                            "'idempotency_key' must be a string of 1 to 256 bytes");
                return -1;
            }
            c->idem_key = json_string_value(v);
        } else {
            gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                        "unknown field '%s' (expected id, template, snapshot, memory, disk, "
                        "pids, cpus, timeout, on_timeout, env, metadata, labels, network, "
                        "idempotency_key)",
                        key);
            return -1;
        }
    }
    return 0;
bad_id:
    gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                "'id' must be 1-63 of [a-z0-9-], not starting with '-'");
    return -1;
}

/* ---- handlers ----------------------------------------------------------------------------- */

/* Forget a sandbox's row (through the writer: nothing waits for it). */
static void store_delete(struct gbx_server *s, const char *id)
{
    s->writes_pending++;
    gbx_store_writer_sandbox_delete(s->writer, id, write_done, s);
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
static void live_free(struct gbx_live *l);

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
static void new_token(char out[65])
{
    uint8_t raw[32];
    GBX_BUG_ON(getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw));
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

/* Copy the maps of a create request into l (env, metadata, labels, idempotency key). */
static void live_set_extras(struct gbx_live *l, json_t *spec)
{
    json_t *v;
    if ((v = json_object_get(spec, "env")) && json_is_object(v))
        l->env = json_deep_copy(v);
    if ((v = json_object_get(spec, "metadata")) && json_is_object(v))
        l->metadata = json_deep_copy(v);
    if ((v = json_object_get(spec, "labels")) && json_is_object(v))
        l->labels = json_deep_copy(v);
    if ((v = json_object_get(spec, "idempotency_key")) && json_is_string(v))
        l->idem_key = gbx_xstrdup(json_string_value(v));
}

static struct gbx_live *live_find_idem(struct gbx_server *s, const char *owner, const char *key)
{
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (l->idem_key && strcmp(l->idem_key, key) == 0 && strcmp(l->owner, owner) == 0)
            return l;
    return NULL;
}

/* A sandbox from the warm pool, when the request asks for nothing a pooled one lacks. */
static struct pooled *pool_take(struct gbx_server *s, const struct gbx_create_opts *c);
static void pool_kick(struct gbx_server *s);

/* The egress policy a create asks for: checked before anything is created. */
static int create_policy(struct gbx_server *s, json_t *network, struct gbx_egress_policy **out,
                         struct gbx_err **err)
{
    if (gbx_egress_policy_parse(network, gbx_egress_default_mode(s->egress), out, err) < 0)
        return gbx_err_wrap(err, "'network'");
    if ((*out)->nsecrets && !s->admin) {
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
static void env_add_trust(struct gbx_live *l)
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
static int stack_template(struct gbx_server *s, const char *tmpl, char ***layers, size_t *n,
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

int gbx_sandboxes_layers(struct gbx_server *s, const char *tmpl, const char *snapshot,
                         char ***layers, size_t *n, char **base, struct gbx_err **err)
{
    *layers = NULL;
    *n = 0;
    *base = NULL;
    const char *snap_tmpl = NULL, *snap_id = NULL;
    if (snapshot &&
        gbx_snapshots_layers(s->snapshots, snapshot, layers, n, &snap_tmpl, &snap_id, err) < 0)
        return -1;
    if (stack_template(s, tmpl, layers, n, base, err) < 0) {
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
    json_t *body; /* owned: c's strings borrow from it */
    struct gbx_create_opts c;
    char *owner;     /* who asked: "" for the admin, else a key's name */
    char *spec_text; /* the request as stored */
    char *snap_id;   /* the snapshot it starts from, or NULL */
    char *id;        /* its id (reserved while it is made) */
    char *base;      /* the template the library makes it from */
    char **layers;
    size_t nlayers;
    struct gbx_egress_policy *policy;
    int64_t t0;
    int pooled;                    /* sb and egress came from the warm pool */
    struct gbx_sandbox *sb;        /* the worker's, or the pool's */
    struct gbx_egress_sb *egress;  /* the pool's */
    struct gbx_egress_socks socks; /* the worker's plumbing of its namespace */
    struct gbx_err *err;
    gbx_sandboxes_created_fn done;
    void *arg;
    struct create_job *next; /* in s->creating */
};

static void create_job_free(struct create_job *j)
{
    if (j == NULL)
        return;
    gbx_snapshots_layers_free(j->layers, j->nlayers);
    gbx_egress_policy_free(j->policy);
    gbx_egress_socks_release(&j->socks);
    gbx_err_free(j->err);
    json_decref(j->body);
    free(j->owner);
    free(j->spec_text);
    free(j->snap_id);
    free(j->id);
    free(j->base);
    free(j);
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
 * the sandbox an earlier create with the same idempotency key made, -1 with *err. body is
 * borrowed (the job keeps a reference). */
static int create_prepare(struct gbx_server *s, json_t *body, struct create_job **out,
                          struct gbx_live **existing, struct gbx_err **err)
{
    struct create_job *j = gbx_xcalloc(1, sizeof(*j));
    j->s = s;
    j->body = json_incref(body);
    j->socks.proxy_fd = j->socks.dns_udp_fd = j->socks.dns_tcp_fd = -1;
    j->t0 = gbx_monotonic_ns();
    j->owner = gbx_xstrdup(gbx_server_owner(s));
    struct gbx_create_opts *c = &j->c;
    if (parse_create(body, c, err) < 0 || create_policy(s, c->network, &j->policy, err) < 0)
        goto fail;
    j->spec_text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    GBX_BUG_ON(j->spec_text == NULL);
    if (c->idem_key) {
        struct gbx_live *prev = live_find_idem(s, j->owner, c->idem_key);
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
    if (c->id && (live_find_any(s, c->id) || id_reserved(s, c->id))) {
        gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "sandbox '%s' already exists", c->id);
        goto fail;
    }
    if (c->snapshot) {
        const char *snap_tmpl = NULL, *snap_id = NULL;
        if (gbx_snapshots_layers(s->snapshots, c->snapshot, &j->layers, &j->nlayers, &snap_tmpl,
                                 &snap_id, err) < 0)
            goto fail;
        if (c->template_name && strcmp(c->template_name, snap_tmpl) != 0) {
            gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "snapshot '%s' is of template '%s', not '%s'",
                        c->snapshot, snap_tmpl, c->template_name);
            goto fail;
        }
        c->template_name = snap_tmpl;
        j->snap_id = gbx_xstrdup(snap_id);
    }
    struct pooled *pp = pool_take(s, c);
    if (pp) {
        j->pooled = 1;
        j->sb = pp->sb;
        j->egress = pp->egress;
        j->id = gbx_xstrdup(pp->sb->id);
        free(pp);
        s->m.pool_hits++;
        pool_kick(s);
        /* pooled with the default policy, which allows nothing more than any policy */
        GBX_BUG_ON(gbx_egress_set_policy(j->egress, j->policy, NULL) < 0); /* secrets checked */
    } else {
        j->id = c->id ? gbx_xstrdup(c->id) : gbx_sandbox_id_new();
        if (stack_template(s, c->template_name ? c->template_name : GBX_DEFAULT_TEMPLATE,
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
 * cgroups), so more of them than CPUs make none faster and the loop slower to answer. */
static pthread_mutex_t spawn_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t spawn_cv = PTHREAD_COND_INITIALIZER;
static int spawn_running, spawn_max;

static void spawn_gate(int enter)
{
    pthread_mutex_lock(&spawn_mu);
    if (spawn_max == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        spawn_max = n < 1 ? 1 : n > 16 ? 16 : (int)n;
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

/* The sandbox itself, its agent's hello and its network's plumbing: the blocking part, on
 * any thread (it touches nothing of the loop's). */
static void create_spawn(struct create_job *j, int on_worker)
{
    struct gbx_sandbox_spec spec = {.id = j->id,
                                    .template_name = j->base,
                                    .limits = j->c.limits,
                                    .disk_bytes = j->c.disk_bytes,
                                    .ctl_socket = 1,
                                    .layers = (const char *const *)j->layers,
                                    .nlayers = j->nlayers};
    if (on_worker) /* the loop never waits at the gate */
        spawn_gate(1);
    int r = gbx_sandbox_create(&j->s->rt, &spec, &j->sb, &j->err);
    if (on_worker)
        spawn_gate(0);
    if (r < 0)
        return;
    if (agent_hello(j->sb, &j->err) < 0 ||
        gbx_egress_netns_setup(j->sb->init_pid, &j->socks, &j->err) < 0) {
        (void)!gbx_sandbox_destroy(j->sb, NULL);
        j->sb = NULL;
    }
}

/* The new sandbox into the registry and the store, audited; the job is freed. 0 with *out, or
 * -1 with *err (the sandbox is destroyed). */
static int create_finish(struct create_job *j, struct gbx_live **out, struct gbx_err **err)
{
    struct gbx_server *s = j->s;
    const struct gbx_create_opts *c = &j->c;
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
    l->owner = gbx_xstrdup(j->owner);
    l->limits = c->limits;
    l->disk_bytes = c->disk_bytes ? c->disk_bytes : (1024ull << 20);
    l->created_ns = gbx_realtime_ns();
    l->expires_ns = c->timeout_ms ? l->created_ns + (int64_t)c->timeout_ms * 1000000 : 0;
    l->spec_text = gbx_steal_ptr(&j->spec_text);
    new_token(l->token);
    live_set_extras(l, j->body);
    l->egress = egress;
    l->on_timeout_pause = c->on_timeout_pause;
    env_add_template(s, l);
    if (j->snap_id) {
        l->attrs = json_object();
        json_object_set_new(l->attrs, "snapshot", json_string(j->snap_id));
    }
    env_add_trust(l);
    l->next = s->live;
    s->live = l;
    observe_create(s, (double)(gbx_monotonic_ns() - j->t0) / 1e9);

    /* a sandbox the store does not know would not survive a restart: it is not made */
    if (store_put_live(s, l, err) < 0) {
        s->m.create_failed++;
        s->live = l->next;
        gbx_autofree char *sid = gbx_xstrdup(l->sb->id);
        (void)!gbx_sandbox_destroy(l->sb, NULL);
        live_free(l);
        create_job_free(j);
        return gbx_err_wrap(err, "create sandbox '%s': cannot record it", sid);
    }
    gbx_fault_point("create.recorded");
    json_t *detail = json_deep_copy(j->body);
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
    gbx_server_audit_as(s, j->owner[0] ? j->owner : "admin", "sandbox.create", l->sb->id, detail);
    gbx_log_info("created sandbox '%s'%s", l->sb->id, j->pooled ? " (from the pool)" : "");
    create_job_free(j);
    *out = l;
    return 0;
}

int gbx_sandboxes_create(struct gbx_server *s, json_t *body, struct gbx_live **out,
                         struct gbx_err **err)
{
    struct create_job *j = NULL;
    int r = create_prepare(s, body, &j, out, err);
    if (r != 0)
        return r;
    if (!j->pooled) {
        create_spawn(j, 0);
        if (j->sb == NULL) {
            s->m.create_failed++;
            if (err)
                *err = gbx_steal_ptr(&j->err);
            create_job_free(j);
            return -1;
        }
    }
    return create_finish(j, out, err);
}

static void create_work(void *arg)
{
    create_spawn(arg, 1);
}

static void create_done(void *arg)
{
    struct create_job *j = arg;
    struct gbx_server *s = j->s;
    struct create_job **pp = &s->creating;
    while (*pp && *pp != j)
        pp = &(*pp)->next;
    if (*pp)
        *pp = j->next;
    gbx_sandboxes_created_fn done = j->done;
    void *darg = j->arg;
    struct gbx_live *l = NULL;
    struct gbx_err *err = NULL;
    /* the rest runs as whoever asked for it */
    gbx_autofree char *owner = gbx_xstrdup(j->owner);
    gbx_server_act_as(s, owner);
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

void gbx_sandboxes_create_async(struct gbx_server *s, json_t *body, gbx_sandboxes_created_fn done,
                                void *arg)
{
    struct create_job *j = NULL;
    struct gbx_live *l = NULL;
    struct gbx_err *err = NULL;
    int r = create_prepare(s, body, &j, &l, &err);
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
    s->creating = j;
    if (gbx_offload_submit(s->offload, create_work, create_done, j) < 0) {
        gbx_err_set(&j->err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
        create_done(j);
    }
}

/* A create whose template has a start command or a ready check answers once it is ready. */
static void created_ready(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    if (req == NULL)
        return;
    if (err)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, 201, sandbox_json(l));
}

struct create_reply {
    struct gbx_server *s;
    struct gbx_http_later *later;
};

static void created(void *arg, struct gbx_live *l, int existed, const struct gbx_err *err)
{
    struct create_reply *cr = arg;
    struct gbx_server *s = cr->s;
    struct gbx_http_later *later = cr->later;
    free(cr);
    char *start, *ready;
    if (l && !existed && gbx_boot_needed(s, l, &start, &ready))
        return gbx_boot(s, s->base, l, start, ready, created_ready, later);
    struct evhttp_request *req = gbx_http_later_take(later);
    if (req == NULL)
        return; /* the client left: the sandbox is there for a list to find */
    if (err)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, existed ? 200 : 201, sandbox_json(l));
}

static void handle_create(struct gbx_server *s, struct evhttp_request *req)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    /* the Idempotency-Key header is the same as the body's idempotency_key */
    const char *hkey = evhttp_find_header(evhttp_request_get_input_headers(req), "Idempotency-Key");
    if (hkey) {
        json_t *bkey = json_object_get(body, "idempotency_key");
        if (bkey && (!json_is_string(bkey) || strcmp(json_string_value(bkey), hkey) != 0)) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "the Idempotency-Key header and 'idempotency_key' differ");
            json_decref(body);
            return;
        }
        json_object_set_new(body, "idempotency_key", json_string(hkey));
    }
    /* made off the loop: the reply comes when the sandbox answers */
    struct create_reply *cr = gbx_xcalloc(1, sizeof(*cr));
    cr->s = s;
    cr->later = gbx_http_later_new(req);
    gbx_sandboxes_create_async(s, body, created, cr);
    json_decref(body);
}

/* ---- warm pool ------------------------------------------------------------------------------ */

/* Pooled sandboxes have rows in state "pooled" (owner "", spec "{}"), so that a daemon that
 * was killed finds them again; they are never handed out twice. */
static struct pooled *pool_take(struct gbx_server *s, const struct gbx_create_opts *c)
{
    if (s->pool == NULL || c->id || c->snapshot || c->disk_bytes || c->limits.memory_bytes ||
        c->limits.pids || c->limits.cpu_millis ||
        (c->template_name && strcmp(c->template_name, GBX_DEFAULT_TEMPLATE) != 0))
        return NULL;
    struct pooled *p = s->pool;
    s->pool = p->next;
    s->pool_len--;
    p->next = NULL;
    return p;
}

static void pool_push(struct gbx_server *s, struct gbx_sandbox *sb, struct gbx_egress_sb *egress)
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

struct pool_fill {
    struct gbx_server *s;
    struct gbx_sandbox *sb;
    struct gbx_egress_sb *egress;
};

static void pool_row_done(void *arg, int status, const char *msg);

static void pool_fill_one(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_server *s = arg;
    s->pool_backoff = 0;
    if (s->pool_len + s->pool_inflight >= s->pool_target)
        return;
    struct gbx_sandbox_spec spec = {.ctl_socket = 1};
    gbx_autofree char *id = gbx_sandbox_id_new();
    spec.id = id;
    struct gbx_sandbox *sb = NULL;
    struct gbx_egress_sb *egress = NULL;
    struct gbx_err *err = NULL;
    if (gbx_sandbox_create(&s->rt, &spec, &sb, &err) < 0 || agent_hello(sb, &err) < 0 ||
        gbx_egress_attach(s->egress, sb->id, sb->init_pid, NULL, &egress, &err) < 0) {
        gbx_log_warn("warm pool: %s (retrying in a second)", err->msg);
        gbx_err_free(err);
        if (sb)
            (void)!gbx_sandbox_destroy(sb, NULL);
        s->m.pool_failed++;
        s->pool_backoff = 1;
        struct timeval later = {1, 0};
        event_add(s->pool_ev, &later);
        return;
    }
    struct gbx_store_sandbox row = {.id = sb->id,
                                    .owner = "",
                                    .template_name = GBX_DEFAULT_TEMPLATE,
                                    .state = "pooled",
                                    .spec = "{}",
                                    .created_ns = gbx_realtime_ns(),
                                    .host_uid = sb->host_uid,
                                    .uid_slot = sb->uid_slot,
                                    .init_pid = sb->init_pid};
    /* into the pool once its row is durable (a daemon killed meanwhile must find it) */
    struct pool_fill *pf = gbx_xcalloc(1, sizeof(*pf));
    pf->s = s;
    pf->sb = sb;
    pf->egress = egress;
    s->pool_inflight++;
    s->writes_pending++;
    gbx_store_writer_sandbox_put(s->writer, &row, pool_row_done, pf);
    pool_kick(s);
}

static void pool_row_done(void *arg, int status, const char *msg)
{
    struct pool_fill *pf = arg;
    struct gbx_server *s = pf->s;
    s->pool_inflight--;
    s->writes_pending--;
    if (status < 0 || s->pool_ev == NULL) {
        if (status < 0)
            gbx_log_error("warm pool: cannot record sandbox '%s': %s", pf->sb->id, msg);
        gbx_autofree char *id = gbx_xstrdup(pf->sb->id);
        gbx_egress_detach(pf->egress);
        (void)!gbx_sandbox_destroy(pf->sb, NULL);
        if (status == 0)
            store_delete(s, id);
    } else {
        pool_push(s, pf->sb, pf->egress);
        pool_kick(s);
    }
    free(pf);
}

/* Schedule the next refill step: one sandbox per turn of the loop, so requests interleave. */
static void pool_kick(struct gbx_server *s)
{
    if (s->pool_ev == NULL || s->pool_len + s->pool_inflight >= s->pool_target || s->pool_backoff ||
        event_pending(s->pool_ev, EV_TIMEOUT, NULL))
        return;
    struct timeval now = {0, 0};
    event_add(s->pool_ev, &now);
}

static void pool_drain(struct gbx_server *s)
{
    while (s->pool) {
        struct pooled *p = s->pool;
        s->pool = p->next;
        s->pool_len--;
        gbx_autofree char *id = gbx_xstrdup(p->sb->id);
        gbx_egress_detach(p->egress);
        (void)!gbx_sandbox_destroy(p->sb, NULL);
        store_delete(s, id);
        free(p);
    }
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
static void handle_list(struct gbx_server *s, struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq q;
    TAILQ_INIT(&q);
    if (query && evhttp_parse_query_str(query, &q) < 0) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "malformed query string");
        return;
    }
    const char *labels[LIST_MAX_LABELS][2];
    char labelbuf[LIST_MAX_LABELS][260];
    size_t nlabels = 0;
    const char *template_name = NULL, *cursor = NULL;
    uint64_t limit = LIST_DEFAULT_LIMIT;
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, &q, next)
    {
        if (strcmp(kv->key, "label") == 0) {
            char *eq = strchr(kv->value, '=');
            if (nlabels == LIST_MAX_LABELS || eq == NULL || strlen(kv->value) >= 260) {
                gbx_http_reply_error(req, GBX_ERR_INVALID,
                                     "'label' must be KEY=VALUE (at most %d of them)",
                                     LIST_MAX_LABELS);
                goto out;
            }
            snprintf(labelbuf[nlabels], sizeof(labelbuf[nlabels]), "%s", kv->value);
            labelbuf[nlabels][eq - kv->value] = '\0';
            labels[nlabels][0] = labelbuf[nlabels];
            labels[nlabels][1] = labelbuf[nlabels] + (eq - kv->value) + 1;
            nlabels++;
        } else if (strcmp(kv->key, "template") == 0) {
            template_name = kv->value;
        } else if (strcmp(kv->key, "limit") == 0) {
            if (gbx_parse_u64(kv->value, 1, LIST_MAX_LIMIT, &limit) < 0) {
                gbx_http_reply_error(req, GBX_ERR_INVALID, "'limit' must be from 1 to %d",
                                     LIST_MAX_LIMIT);
                goto out;
            }
        } else if (strcmp(kv->key, "cursor") == 0) {
            cursor = kv->value;
        } else {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "unknown query parameter '%s' (expected label, template, limit, "
                                 "cursor)",
                                 kv->key);
            goto out;
        }
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
        if (!visible(s, l) || (template_name && strcmp(l->template_name, template_name) != 0))
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
        json_array_append_new(arr, sandbox_json(v[i]));
    json_t *next = json_null();
    if (i < m && i > first) {
        gbx_autofree char *c =
            gbx_asprintf("%lld.%s", (long long)v[i - 1]->created_ns, v[i - 1]->sb->id);
        next = json_string(c);
    }
    free(v);
    gbx_http_reply_json(req, 200, json_pack("{s:o,s:o}", "sandboxes", arr, "next_cursor", next));
out:
    evhttp_clear_headers(&q);
}

static void live_free(struct gbx_live *l)
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
    live_free(l);
    store_delete(s, sid);
    gbx_server_audit(s, "sandbox.delete", sid, json_pack("{s:s}", "reason", why));
    gbx_log_warn("sandbox '%s' is gone: %s", sid, why);
}

int gbx_sandboxes_destroy(struct gbx_server *s, struct gbx_live *l, const char *kind,
                          json_t *detail, struct gbx_err **err)
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
    live_free(l);
    store_delete(s, sid);
    gbx_server_audit(s, kind, sid, detail);
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
    char *kind, *owner;
    json_t *detail;
    gbx_sandboxes_gone_fn done;
    void *arg;
};

/* A delete whose teardown (kill, wait, cgroups) runs on a worker thread. */
struct destroy_job {
    struct gbx_server *s;
    struct gbx_sandbox *sb;
    struct reserved_id rid; /* in s->going until the teardown is done */
    char *kind, *actor;
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

static void destroy_done(void *arg)
{
    struct destroy_job *j = arg;
    struct gbx_server *s = j->s;
    struct reserved_id **pp = &s->going;
    while (*pp && *pp != &j->rid)
        pp = &(*pp)->next;
    if (*pp)
        *pp = j->rid.next;
    store_delete(s, j->rid.id);
    gbx_server_audit_as(s, j->actor, j->kind, j->rid.id, j->detail);
    if (s->snapshots)
        gbx_snapshots_sweep(s->snapshots); /* deleted snapshots it stacked on may go now */
    if (j->r < 0)
        gbx_log_warn("%s", j->err->msg);
    else
        gbx_log_info("destroyed sandbox '%s' (%s)", j->rid.id, j->kind);
    j->done(j->arg, j->r < 0 ? j->err : NULL);
    gbx_err_free(j->err);
    free(j->rid.id);
    free(j->kind);
    free(j->actor);
    free(j);
}

/* Out of the registry now (its id stays taken), torn down on a worker, then done. */
static void destroy_off_loop(struct gbx_server *s, struct gbx_live *l, const char *kind,
                             json_t *detail, gbx_sandboxes_gone_fn done, void *arg)
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
    j->actor = gbx_xstrdup(gbx_server_actor(s));
    j->detail = detail;
    j->done = done;
    j->arg = arg;
    l->sb = NULL;
    live_free(l); /* its egress listeners close here, on the loop */
    j->rid.next = s->going;
    s->going = &j->rid;
    if (gbx_offload_submit(s->offload, destroy_work, destroy_done, j) < 0) {
        destroy_work(j);
        destroy_done(j);
    }
}

void gbx_sandboxes_destroy_later(struct gbx_server *s, struct gbx_live *l, const char *kind,
                                 json_t *detail, gbx_sandboxes_gone_fn done, void *arg)
{
    if (l->busy != GBX_BUSY_WORKER)
        return destroy_off_loop(s, l, kind, detail, done, arg);
    struct gbx_pending_delete *p = gbx_xcalloc(1, sizeof(*p));
    p->kind = gbx_xstrdup(kind);
    p->owner = gbx_xstrdup(gbx_server_owner(s));
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

void gbx_sandboxes_destroy_bg(struct gbx_server *s, struct gbx_live *l, const char *kind,
                              json_t *detail)
{
    gbx_sandboxes_destroy_later(s, l, kind, detail, gone_quietly, NULL);
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
    gbx_server_act_as(s, first->owner);
    struct gbx_err *err = NULL;
    int r = gbx_sandboxes_destroy(s, l, first->kind, json_incref(first->detail), &err);
    while (p) {
        struct gbx_pending_delete *n = p->next;
        p->done(p->arg, r < 0 ? err : NULL);
        json_decref(p->detail);
        free(p->kind);
        free(p->owner);
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

static void handle_delete(struct gbx_server *s, struct evhttp_request *req, const char *id)
{
    struct gbx_live *l = live_find(s, id);
    if (l == NULL) {
        gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        return;
    }
    /* a 204 means it is gone: while a hibernate holds it, the answer waits for that to stop */
    gbx_sandboxes_destroy_later(s, l, "sandbox.delete", NULL, deleted, gbx_http_later_new(req));
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
    gbx_http_reply_json(req, 200, sandbox_json(l));
}

/* POST /v1/sandboxes/{id}/hibernate {}: processes, memory and files to disk (CRIU). */
static void handle_hibernate(struct gbx_server *s, struct evhttp_request *req, struct gbx_live *l)
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
    gbx_hibernate(s, req, l, replied_hibernate, NULL);
}

static void handle_pause(struct gbx_server *s, struct evhttp_request *req, struct gbx_live *l,
                         int pause)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
        return method_not_allowed(req, "POST");
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    json_t *v = json_object_get(body, "timeout");
    uint64_t ms = 0;
    if (json_object_size(body) > (v ? 1u : 0u) || (v && (pause || json_timeout_ms(v, &ms) < 0))) {
        json_decref(body);
        return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                    pause ? "pause takes no fields"
                                          : "expected {} or {\"timeout\": seconds or a "
                                            "duration like \"5m\"}");
    }
    struct gbx_err *err = NULL;
    if (l->busy) {
        json_decref(body);
        return gbx_http_reply_error(
            req, GBX_ERR_CONFLICT, "sandbox '%s' is busy with %s", l->sb->id,
            l->busy == GBX_BUSY_WORKER ? (l->hibernated ? "waking" : "a hibernate") : "a snapshot");
    }
    if (l->hibernated && !pause) {
        if (v)
            gbx_sandboxes_set_expiry(s, l, ms ? gbx_realtime_ns() + (int64_t)ms * 1000000 : 0,
                                     json_incref(body));
        json_decref(body);
        return gbx_hibernate_wake(s, req, l, replied_hibernate, NULL);
    }
    if (gbx_sandboxes_pause(s, l, pause, &err) < 0) {
        json_decref(body);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    if (v)
        gbx_sandboxes_set_expiry(s, l, ms ? gbx_realtime_ns() + (int64_t)ms * 1000000 : 0,
                                 json_incref(body));
    else if (!pause && l->expires_ns && l->expires_ns <= gbx_realtime_ns() && l->on_timeout_pause)
        /* resumed after its timeout paused it: without a new timeout it would pause again at
         * once; it runs on with none, as if the caller had cleared it */
        gbx_sandboxes_set_expiry(s, l, 0, json_pack("{s:s}", "reason", "resumed"));
    json_decref(body);
    gbx_http_reply_json(req, 200, sandbox_json(l));
}

static void handle_timeout(struct gbx_server *s, struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    json_t *v = json_object_get(body, "timeout");
    uint64_t ms = 0;
    if (json_object_size(body) != 1 || v == NULL || json_timeout_ms(v, &ms) < 0) {
        json_decref(body);
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "expected {\"timeout\": seconds or a duration like \"5m\"}; 0 "
                             "removes the timeout");
        return;
    }
    gbx_sandboxes_set_expiry(s, l, ms ? gbx_realtime_ns() + (int64_t)ms * 1000000 : 0, body);
    gbx_http_reply_json(req, 200, sandbox_json(l));
}

void gbx_sandboxes_set_expiry(struct gbx_server *s, struct gbx_live *l, int64_t expires_ns,
                              json_t *detail)
{
    l->expires_ns = expires_ns;
    s->writes_pending++;
    gbx_store_writer_sandbox_set_expiry(s->writer, l->sb->id, l->expires_ns, write_done, s);
    gbx_server_audit(s, "sandbox.timeout", l->sb->id, detail);
}

int gbx_sandboxes_pause(struct gbx_server *s, struct gbx_live *l, int paused, struct gbx_err **err)
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
                                       write_done, s);
    gbx_server_audit(s, paused ? "sandbox.pause" : "sandbox.resume", l->sb->id, NULL);
    return 0;
}

struct gbx_live *gbx_sandboxes_find(struct gbx_server *s, const char *id)
{
    return live_find(s, id);
}

struct gbx_live *gbx_sandboxes_find_any(struct gbx_server *s, const char *id)
{
    return live_find_any(s, id);
}

void gbx_sandboxes_each_any(struct gbx_server *s, int (*fn)(void *arg, struct gbx_live *l),
                            void *arg)
{
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (fn(arg, l) != 0)
            break;
}

int gbx_sandboxes_rebuild(struct gbx_server *s, struct gbx_live *l, const char *snapshot,
                          struct gbx_err **err)
{
    char **layers = NULL;
    size_t nlayers = 0;
    const char *tmpl = NULL, *snap_id = NULL;
    if (gbx_snapshots_layers(s->snapshots, snapshot, &layers, &nlayers, &tmpl, &snap_id, err) < 0)
        return -1;
    gbx_autofree char *id = gbx_xstrdup(l->sb->id);
    gbx_autofree char *sid = gbx_xstrdup(snap_id);
    gbx_autofree char *base = NULL;
    if (stack_template(s, tmpl, &layers, &nlayers, &base, err) < 0) {
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
    if (r < 0 || agent_hello(sb, err) < 0 ||
        gbx_egress_attach(s->egress, id, sb->init_pid, policy, &l->egress, err) < 0) {
        gbx_egress_policy_free(policy);
        if (sb)
            (void)!gbx_sandbox_destroy(sb, NULL);
        struct gbx_live **pp = &s->live;
        while (*pp && *pp != l)
            pp = &(*pp)->next;
        if (*pp)
            *pp = l->next;
        live_free(l);
        store_delete(s, id);
        gbx_server_audit(s, "sandbox.delete", id,
                         json_pack("{s:s,s:s}", "reason", "rollback failed", "snapshot", sid));
        return gbx_err_wrap(err, "roll back sandbox '%s' (it is gone)", id);
    }
    gbx_egress_policy_free(policy);
    l->sb = sb;
    l->paused = 0;
    gbx_sandboxes_set_attr(s, l, "snapshot", json_string(sid)); /* writes the new row */
    gbx_server_audit(s, "sandbox.rollback", id, json_pack("{s:s}", "snapshot", sid));
    gbx_log_info("rolled sandbox '%s' back to snapshot '%s'", id, sid);
    return 0;
}

void gbx_sandboxes_each(struct gbx_server *s, int (*fn)(void *arg, struct gbx_live *l), void *arg)
{
    size_t n = 0;
    for (struct gbx_live *l = s->live; l; l = l->next)
        n++;
    struct gbx_live **v = gbx_xcalloc(n ? n : 1, sizeof(struct gbx_live *));
    size_t m = 0;
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (visible(s, l))
            v[m++] = l;
    qsort(v, m, sizeof(struct gbx_live *), live_cmp);
    for (size_t i = 0; i < m; i++)
        if (fn(arg, v[i]) != 0)
            break;
    free(v);
}

/* A sandbox whose init the reaper watches: one that has its processes, and not on a worker. */
static int probed(const struct gbx_live *l)
{
    return !l->busy && !l->hibernated && l->sb && l->sb->pidfd >= 0;
}

/* Sandboxes whose init died under this daemon (killed from the host, or crashed) took their
 * processes with it: remove what is left (init's zombie, cgroups, directory, uid range, row)
 * and say so, as a restarted daemon does (sandbox.lost). One poll of every init's pidfd. */
static void reap_dead(struct gbx_server *s)
{
    size_t n = 0, cap = 0;
    struct pollfd *pf = NULL;
    for (struct gbx_live *l = s->live; l; l = l->next) {
        if (!probed(l))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            pf = gbx_xrealloc(pf, cap * sizeof(*pf));
        }
        pf[n++] = (struct pollfd){.fd = l->sb->pidfd, .events = POLLIN};
    }
    if (n == 0 || poll(pf, n, 0) <= 0) {
        free(pf);
        return;
    }
    /* the same walk (nothing ran in between): the i-th probed sandbox has pf[i] */
    size_t i = 0;
    for (struct gbx_live *l = s->live, *next; l && i < n; l = next) {
        next = l->next;
        if (!probed(l) || !(pf[i++].revents & POLLIN))
            continue;
        char why[96] = "its init died";
        siginfo_t si = {0};
        /* our child: how it ended (WNOWAIT: the destroy below reaps it) */
        if (waitid(P_PID, (id_t)l->sb->init_pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            si.si_pid == l->sb->init_pid)
            snprintf(why, sizeof(why), "its init %s %d",
                     si.si_code == CLD_EXITED ? "exited with status" : "was killed by signal",
                     si.si_status);
        gbx_autofree char *id = gbx_xstrdup(l->sb->id);
        gbx_log_warn("sandbox '%s' is gone: %s; removed", id, why);
        s->m.lost++;
        struct gbx_err *err = NULL;
        if (gbx_sandboxes_destroy(s, l, "sandbox.lost", json_pack("{s:s}", "reason", why), &err) <
            0)
            gbx_err_free(err);
    }
    free(pf);
}

static void reap_expired(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_server *s = arg;
    reap_dead(s);
    int64_t now = gbx_realtime_ns();
    for (struct gbx_live *l = s->live, *next; l; l = next) {
        next = l->next;
        /* a paused sandbox waits to be resumed or killed, as E2B keeps paused sandboxes */
        if (l->expires_ns == 0 || now < l->expires_ns || l->paused)
            continue;
        struct gbx_err *err = NULL;
        if (l->on_timeout_pause) {
            /* kept, frozen: resumed by a resume (with a new timeout) or destroyed */
            gbx_server_act_as(s, l->owner);
            if (gbx_sandboxes_pause(s, l, 1, &err) < 0) {
                gbx_log_error("%s", err->msg);
                gbx_err_free(err);
            } else {
                s->m.timeout_paused++;
            }
            continue;
        }
        if (l->busy == GBX_BUSY_WORKER)
            continue; /* its hibernate or wake ends first; the next turn takes it */
        s->m.expired++;
        gbx_server_act_as(s, l->owner);
        gbx_sandboxes_destroy_bg(s, l, "sandbox.expire", json_pack("{s:s}", "reason", "timeout"));
    }
}

/* What /healthz says besides "ok": the host capabilities a sandbox path depends on, each
 * "available", "unavailable" or "probing"; why, for the admin only. */
static json_t *health_json(const struct gbx_server *s)
{
    const char *why = NULL;
    int criu = gbx_criu_probe_result(&why);
    json_t *hib = json_pack("{s:s}", "state",
                            criu == 1   ? "available"
                            : criu == 0 ? "unavailable"
                                        : "probing");
    if (s->admin && criu >= 0)
        json_object_set_new(hib, "reason", json_string(why));
    /* pause needs a freezer: cgroup v2's, or v1's */
    const struct gbx_cg_layout *cg = &s->rt.cg;
    int freezer = cg->v2_freeze || cg->v1[GBX_CG_FREEZER] != NULL;
    json_t *pause = json_pack("{s:s}", "state", freezer ? "available" : "unavailable");
    if (s->admin)
        json_object_set_new(pause, "reason",
                            json_string(cg->v2_freeze ? "cgroup v2 freezer"
                                        : freezer     ? "cgroup v1 freezer"
                                                      : "no cgroup freezer on this host"));
    return json_pack("{s:s,s:{s:o,s:o}}", "status", "ok", "capabilities", "hibernate", hib, "pause",
                     pause);
}

/* GET /metrics: Prometheus text exposition format. */
static int metrics_visible(const struct gbx_live *l, int admin, const char *me)
{
    return admin || strcmp(l->owner, me) == 0;
}
static void metrics_daemon(struct gbx_server *s, struct evbuffer *b);
static void sandbox_gauges(struct gbx_server *s, struct evbuffer *b, size_t n, int admin,
                           const char *me);

static void handle_metrics(struct gbx_server *s, struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    /* an API key sees its own sandboxes' series and the host's capabilities; the daemon's
     * own counters and histograms (every tenant's activity) are the admin's */
    int admin = s->admin;
    const char *me = s->key_name;
    size_t running = 0, paused = 0;
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (metrics_visible(l, admin, me))
            running++, paused += l->paused;
    evbuffer_add_printf(b,
                        "# HELP glovebox_sandboxes Sandboxes by state.\n"
                        "# TYPE glovebox_sandboxes gauge\n"
                        "glovebox_sandboxes{state=\"running\"} %zu\n"
                        "glovebox_sandboxes{state=\"paused\"} %zu\n",
                        running - paused, paused);
    if (admin)
        evbuffer_add_printf(b, "glovebox_sandboxes{state=\"pooled\"} %zu\n", s->pool_len);
    int criu = gbx_criu_probe_result(NULL);
    evbuffer_add_printf(b,
                        "# HELP glovebox_capability_available Host capabilities a sandbox path "
                        "relies on: 1 available, 0 not (GET /healthz says why), -1 being probed.\n"
                        "# TYPE glovebox_capability_available gauge\n"
                        "glovebox_capability_available{capability=\"hibernate\"} %d\n"
                        "glovebox_capability_available{capability=\"pause\"} %d\n",
                        criu, s->rt.cg.v2_freeze || s->rt.cg.v1[GBX_CG_FREEZER] != NULL);
    if (admin)
        metrics_daemon(s, b);
    sandbox_gauges(s, b, running, admin, me);
    if (admin)
        gbx_reqmetrics_render(b);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; version=0.0.4");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* The daemon's own counters and histograms (admin only). */
static void metrics_daemon(struct gbx_server *s, struct evbuffer *b)
{
    evbuffer_add_printf(b, "# HELP glovebox_sandbox_create_seconds Time from a create request "
                           "to the sandbox's agent answering.\n"
                           "# TYPE glovebox_sandbox_create_seconds histogram\n");
    for (size_t i = 0; i < GBX_ARRAY_SIZE(create_bounds); i++)
        evbuffer_add_printf(b, "glovebox_sandbox_create_seconds_bucket{le=\"%g\"} %llu\n",
                            create_bounds[i], (unsigned long long)s->m.create_buckets[i]);
    evbuffer_add_printf(b,
                        "glovebox_sandbox_create_seconds_bucket{le=\"+Inf\"} %llu\n"
                        "glovebox_sandbox_create_seconds_sum %.6f\n"
                        "glovebox_sandbox_create_seconds_count %llu\n",
                        (unsigned long long)s->m.create_count, s->m.create_sum,
                        (unsigned long long)s->m.create_count);
    evbuffer_add_printf(b, "# HELP glovebox_exec_start_seconds Time from an exec request to "
                           "its process running.\n"
                           "# TYPE glovebox_exec_start_seconds histogram\n");
    for (size_t i = 0; i < GBX_ARRAY_SIZE(create_bounds); i++)
        evbuffer_add_printf(b, "glovebox_exec_start_seconds_bucket{le=\"%g\"} %llu\n",
                            create_bounds[i], (unsigned long long)s->m.exec_buckets[i]);
    evbuffer_add_printf(b,
                        "glovebox_exec_start_seconds_bucket{le=\"+Inf\"} %llu\n"
                        "glovebox_exec_start_seconds_sum %.6f\n"
                        "glovebox_exec_start_seconds_count %llu\n",
                        (unsigned long long)s->m.execs, s->m.exec_sum,
                        (unsigned long long)s->m.execs);
    evbuffer_add_printf(
        b,
        "# HELP glovebox_sandbox_create_failures_total Creates that failed.\n"
        "# TYPE glovebox_sandbox_create_failures_total counter\n"
        "glovebox_sandbox_create_failures_total %llu\n"
        "# HELP glovebox_sandboxes_expired_total Sandboxes destroyed by their timeout.\n"
        "# TYPE glovebox_sandboxes_expired_total counter\n"
        "glovebox_sandboxes_expired_total %llu\n"
        "# HELP glovebox_sandboxes_lost_total Sandboxes found dead at a restart.\n"
        "# TYPE glovebox_sandboxes_lost_total counter\n"
        "glovebox_sandboxes_lost_total %llu\n"
        "# HELP glovebox_pool_takes_total Creates served from the warm pool (hit) or not.\n"
        "# TYPE glovebox_pool_takes_total counter\n"
        "glovebox_pool_takes_total{result=\"hit\"} %llu\n"
        "glovebox_pool_takes_total{result=\"miss\"} %llu\n"
        "# HELP glovebox_pool_refill_failures_total Warm-pool refills that failed.\n"
        "# TYPE glovebox_pool_refill_failures_total counter\n"
        "glovebox_pool_refill_failures_total %llu\n"
        "# HELP glovebox_store_writes_pending Store writes queued and not yet durable.\n"
        "# TYPE glovebox_store_writes_pending gauge\n"
        "glovebox_store_writes_pending %zu\n"
        "# HELP glovebox_execs_total Processes started through exec.\n"
        "# TYPE glovebox_execs_total counter\n"
        "glovebox_execs_total %llu\n"
        "# HELP glovebox_exec_bytes_total Output bytes streamed to exec clients.\n"
        "# TYPE glovebox_exec_bytes_total counter\n"
        "glovebox_exec_bytes_total{stream=\"stdout\"} %llu\n"
        "glovebox_exec_bytes_total{stream=\"stderr\"} %llu\n",
        (unsigned long long)s->m.create_failed, (unsigned long long)s->m.expired,
        (unsigned long long)s->m.lost, (unsigned long long)s->m.pool_hits,
        (unsigned long long)s->m.pool_misses, (unsigned long long)s->m.pool_failed,
        s->writes_pending, (unsigned long long)s->m.execs, (unsigned long long)s->m.exec_out_bytes,
        (unsigned long long)s->m.exec_err_bytes);
    gbx_egress_metrics(s->egress, b);
}

/* Memory, CPU, pids and OOM kills of each sandbox the caller may see (n of them). */
static void sandbox_gauges(struct gbx_server *s, struct evbuffer *b, size_t n, int admin,
                           const char *me)
{
    static const char *const gauges[][2] = {
        {"glovebox_sandbox_memory_bytes", "Memory charged to the sandbox's cgroup."},
        {"glovebox_sandbox_cpu_seconds_total", "CPU time used by the sandbox."},
        {"glovebox_sandbox_pids", "Processes in the sandbox."},
        {"glovebox_sandbox_oom_kills_total", "Processes the OOM killer killed in the sandbox."},
    };
    struct gbx_cg_usage *u = gbx_xcalloc(n ? n : 1, sizeof(*u));
    size_t i = 0;
    for (struct gbx_live *l = s->live; l && i < n; l = l->next)
        if (metrics_visible(l, admin, me))
            (void)!l->sb->ops->usage(l->sb, &u[i++], NULL);
    for (size_t g = 0; g < GBX_ARRAY_SIZE(gauges); g++) {
        evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", gauges[g][0], gauges[g][1],
                            gauges[g][0], g == 1 || g == 3 ? "counter" : "gauge");
        i = 0;
        for (struct gbx_live *l = s->live; l && i < n; l = l->next) {
            if (!metrics_visible(l, admin, me))
                continue;
            double v = g == 0   ? (double)u[i].memory_bytes
                       : g == 1 ? (double)u[i].cpu_usage_ns / 1e9
                       : g == 2 ? (double)u[i].pids
                                : (double)u[i].oom_kills;
            evbuffer_add_printf(b, "%s{sandbox=\"%s\"} %.9g\n", gauges[g][0], l->sb->id, v);
            i++;
        }
    }
    free(u);
}

static void method_not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "kind", "invalid", "message",
                             "method not allowed here");
    gbx_http_reply_json(req, 405, body);
}

/* ---- API keys (admin only) ---------------------------------------------------------------- */

static int list_key(void *arg, const struct gbx_apikey_info *k)
{
    json_t *arr = arg;
    json_t *o = json_pack("{s:s,s:b}", "name", k->name, "revoked", k->revoked_ns != 0);
    json_array_append_new(arr, o);
    return 0;
}

static void handle_apikeys(struct gbx_server *s, struct evhttp_request *req, const char *name)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    struct gbx_err *err = NULL;
    if (!s->admin) {
        gbx_http_reply_error(req, GBX_ERR_PERMISSION,
                             "API keys are managed on the admin socket only");
        return;
    }
    if (name == NULL && m == EVHTTP_REQ_POST) {
        json_t *body = gbx_http_body_object(req);
        if (body == NULL)
            return;
        const char *n = json_string_value(json_object_get(body, "name"));
        if (n == NULL || json_object_size(body) != 1 || gbx_name_valid(n) < 0) {
            json_decref(body);
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "expected {\"name\": ...}: 1-63 of [a-z0-9-]");
            return;
        }
        char key[GBX_APIKEY_LEN + 1];
        if (gbx_store_apikey_create(s->store, n, key, &err) < 0) {
            gbx_http_reply_err(req, err);
            gbx_err_free(err);
        } else {
            gbx_server_audit(s, "apikey.create", NULL, json_pack("{s:s}", "name", n));
            gbx_http_reply_json(req, 201, json_pack("{s:s,s:s}", "name", n, "key", key));
        }
        json_decref(body);
        return;
    }
    if (name == NULL && m == EVHTTP_REQ_GET) {
        json_t *arr = json_array();
        if (gbx_store_apikey_each(s->store, list_key, arr, &err) < 0) {
            json_decref(arr);
            gbx_http_reply_err(req, err);
            gbx_err_free(err);
            return;
        }
        gbx_http_reply_json(req, 200, json_pack("{s:o}", "apikeys", arr));
        return;
    }
    if (name && m == EVHTTP_REQ_DELETE) {
        if (gbx_store_apikey_revoke(s->store, name, &err) < 0) {
            gbx_http_reply_err(req, err);
            gbx_err_free(err);
            return;
        }
        gbx_server_audit(s, "apikey.revoke", NULL, json_pack("{s:s}", "name", name));
        gbx_http_reply_json(req, 204, NULL);
        return;
    }
    method_not_allowed(req, name ? "DELETE" : "GET, POST");
}

/* The key a TCP request carries: "Authorization: Bearer KEY" or "X-API-Key: KEY". */
static const char *request_key(struct evhttp_request *req)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *v = evhttp_find_header(h, "X-API-Key");
    if (v)
        return v;
    v = evhttp_find_header(h, "Authorization");
    if (v && strncasecmp(v, "Bearer ", 7) == 0)
        return v + 7;
    return NULL;
}

static void route(struct gbx_server *s, struct evhttp_request *req);

static void dispatch_admin(struct evhttp_request *req, void *arg)
{
    struct gbx_server *s = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    s->admin = 1;
    s->actor = "admin";
    s->key_name[0] = '\0';
    gbx_reqmetrics_track(req, path ? path : "", s->actor);
    route(s, req);
    s->actor = NULL;
}

static void dispatch_tcp(struct evhttp_request *req, void *arg)
{
    struct gbx_server *s = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    /* E2B's data plane: the sandbox's access token decides (gbx_e2b_data), and the request
     * acts as the sandbox's owner */
    const char *sid = evhttp_find_header(in, "E2b-Sandbox-Id");
    if (sid) {
        s->admin = 1;
        s->actor = "e2b";
        gbx_reqmetrics_track(req, path ? path : "", "e2b");
        gbx_e2b_data(s, s->base, req, sid);
        s->actor = NULL;
        return;
    }
    /* a signed envd URL (sbx.downloadUrl()/uploadUrl()) carries no sandbox id: e2b_files.c
     * finds the sandbox whose token made the signature */
    if (path && strcmp(path, "/files") == 0) {
        s->admin = 1;
        s->actor = "e2b";
        gbx_reqmetrics_track(req, path, "e2b");
        gbx_e2b_files(s, s->base, req, NULL);
        s->actor = NULL;
        return;
    }
    int e2b = path && gbx_e2b_is_control_path(path);
    s->admin = 0;
    if (path == NULL || strcmp(path, "/healthz") != 0) {
        const char *key = request_key(req);
        if (key == NULL || strlen(key) > 256 ||
            gbx_store_apikey_check(s->store, key, s->key_name, sizeof(s->key_name)) != 1) {
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
        s->actor = s->key_name;
    }
    gbx_reqmetrics_track(req, path ? path : "", s->actor ? s->actor : "-");
    if (e2b)
        gbx_e2b_control(s, req, path);
    else
        route(s, req);
    s->actor = NULL;
}

void gbx_server_act_as(struct gbx_server *s, const char *owner)
{
    s->admin = owner[0] == '\0';
    snprintf(s->key_name, sizeof(s->key_name), "%s", owner);
    s->actor = s->admin ? "admin" : s->key_name;
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
static void route_sandbox_sub(struct gbx_server *s, struct evhttp_request *req, const char *id,
                              const char *sub, const char *path)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *files = sub_prefix(sub, "/files");
    const char *procs = sub_prefix(sub, "/processes");
    int is_exec = strcmp(sub, "/exec") == 0, is_timeout = strcmp(sub, "/timeout") == 0;
    if (strcmp(sub, "/artifacts") == 0)
        return gbx_api_sandbox_artifacts(s, req, id);
    if (strcmp(sub, "/pause") == 0 || strcmp(sub, "/resume") == 0 ||
        strcmp(sub, "/hibernate") == 0) {
        struct gbx_live *l = live_find(s, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        if (sub[1] == 'h')
            return handle_hibernate(s, req, l);
        return handle_pause(s, req, l, sub[1] == 'p');
    }
    {
        /* a hibernated sandbox has no processes: it is woken first (POST .../resume) */
        struct gbx_live *l = live_find(s, id);
        if (l && (l->hibernated || l->busy == GBX_BUSY_WORKER) && strcmp(sub, "/snapshots") != 0)
            return gbx_http_reply_error(req, GBX_ERR_CONFLICT,
                                        "sandbox '%s' is %s; resume it first", id,
                                        l->hibernated ? "hibernated" : "being hibernated");
    }
    if (strcmp(sub, "/snapshots") == 0 || strcmp(sub, "/fork") == 0 ||
        strcmp(sub, "/rollback") == 0) {
        struct gbx_live *l = live_find(s, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        (void)gbx_snapshots_sandbox_route(s->snapshots, req, l, sub);
        return;
    }
    if (strcmp(sub, "/network") == 0 || strcmp(sub, "/egress") == 0) {
        struct gbx_live *l = live_find(s, id);
        if (l == NULL)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
        return sub[1] == 'n' ? gbx_api_sandbox_network(s, req, l)
                             : gbx_api_sandbox_egress(s, req, l);
    }
    if (!files && !procs && !is_exec && !is_timeout)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
    if ((is_exec || is_timeout) && m != EVHTTP_REQ_POST)
        return method_not_allowed(req, "POST");
    struct gbx_live *l = live_find(s, id);
    if (l == NULL)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
    if (is_exec)
        return gbx_api_exec(s, s->base, req, l->sb, l->env);
    if (is_timeout)
        return handle_timeout(s, req, l);
    if (files)
        return gbx_api_files(s, s->base, req, l->sb, files);
    return gbx_api_procs(s, s->base, req, l->sb, procs);
}

static void route(struct gbx_server *s, struct evhttp_request *req)
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
        return gbx_http_reply_json(req, 200, health_json(s));
    }
    if (strcmp(path, "/metrics") == 0) {
        if (m != EVHTTP_REQ_GET)
            return method_not_allowed(req, "GET");
        return handle_metrics(s, req);
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
        return gbx_api_egress(s, req, path);
    if (strcmp(path, "/v1/artifacts") == 0 || strncmp(path, "/v1/artifacts/", 14) == 0)
        return gbx_api_artifacts(s, req, path);
    if (strcmp(path, "/v1/sessions") == 0 || strncmp(path, "/v1/sessions/", 13) == 0)
        return gbx_sessions_route(s->sessions, req, path);
    if (strcmp(path, "/v1/gc") == 0)
        return gbx_gc_route(s->gc, req);
    if (strcmp(path, "/v1/snapshots") == 0 || strncmp(path, "/v1/snapshots/", 14) == 0)
        return gbx_snapshots_route(s->snapshots, req, path);
    if (strcmp(path, "/v1/templates") == 0 || strncmp(path, "/v1/templates/", 14) == 0)
        return gbx_api_templates(s, s->base, req, path);
    if (strcmp(path, "/v1/apikeys") == 0)
        return handle_apikeys(s, req, NULL);
    if (strncmp(path, "/v1/apikeys/", 12) == 0) {
        if (gbx_name_valid(path + 12) < 0)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such API key");
        return handle_apikeys(s, req, path + 12);
    }
    if (strcmp(path, "/v1/sandboxes") == 0) {
        if (m == EVHTTP_REQ_POST)
            return handle_create(s, req);
        if (m == EVHTTP_REQ_GET)
            return handle_list(s, req);
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
            return route_sandbox_sub(s, req, id, slash, path);
        if (gbx_sandbox_id_valid(id) < 0) {
            gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such sandbox");
            return;
        }
        if (m == EVHTTP_REQ_GET) {
            struct gbx_live *l = live_find(s, id);
            if (l == NULL)
                return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
            return gbx_http_reply_json(req, 200, sandbox_json(l));
        }
        if (m == EVHTTP_REQ_DELETE)
            return handle_delete(s, req, id);
        return method_not_allowed(req, "GET, DELETE");
    }
    gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
}

/* ---- re-adoption after a restart ------------------------------------------------------------ */

/* The limits a sandbox was created with, from its stored create request. */
static void limits_from_spec(const char *spec, struct gbx_live *l)
{
    json_t *j = spec ? json_loads(spec, 0, NULL) : NULL;
    json_t *v;
    if ((v = json_object_get(j, "memory")))
        (void)json_size(v, &l->limits.memory_bytes);
    if ((v = json_object_get(j, "disk")))
        (void)json_size(v, &l->disk_bytes);
    if ((v = json_object_get(j, "pids")) && json_is_integer(v))
        l->limits.pids = (uint64_t)json_integer_value(v);
    if ((v = json_object_get(j, "cpus")) && json_is_number(v))
        l->limits.cpu_millis = (uint32_t)(json_number_value(v) * 1000 + 0.5);
    if ((v = json_object_get(j, "on_timeout")) && json_is_string(v))
        l->on_timeout_pause = strcmp(json_string_value(v), "pause") == 0;
    if (l->disk_bytes == 0)
        l->disk_bytes = 1024ull << 20;
    json_decref(j);
}

struct gone {
    struct gone *next;
    char *id;
    char *why;
};

/* The egress policy a sandbox had: the last one set live (attrs), else its create request's,
 * else the default. A stored policy that no longer parses (or names a revoked secret) falls
 * back to mode none: fail closed. */
static struct gbx_egress_policy *adopted_policy(struct gbx_server *s,
                                                const struct gbx_store_sandbox *row)
{
    json_t *attrs = row->attrs ? json_loads(row->attrs, 0, NULL) : NULL;
    json_t *spec = row->spec ? json_loads(row->spec, 0, NULL) : NULL;
    json_t *net = json_object_get(attrs, "network");
    if (net == NULL)
        net = json_object_get(spec, "network");
    struct gbx_egress_policy *p = NULL;
    struct gbx_err *err = NULL;
    if (gbx_egress_policy_parse(net, gbx_egress_default_mode(s->egress), &p, &err) < 0) {
        gbx_log_warn("sandbox '%s': stored network policy: %s; egress is off", row->id, err->msg);
        gbx_err_free(err);
        p = gbx_egress_policy_new(GBX_EGRESS_NONE);
    }
    json_decref(attrs);
    json_decref(spec);
    return p;
}

/* A live sandbox from its stored row (after a restart), linked in. */
static struct gbx_live *live_from_row(struct gbx_server *s, const struct gbx_store_sandbox *row,
                                      struct gbx_sandbox *sb, struct gbx_egress_sb *egress)
{
    struct gbx_live *l = gbx_xcalloc(1, sizeof(*l));
    l->sb = sb;
    l->egress = egress;
    l->template_name = gbx_xstrdup(row->template_name ? row->template_name : "");
    l->owner = gbx_xstrdup(row->owner ? row->owner : "");
    l->created_ns = row->created_ns;
    l->expires_ns = row->expires_ns;
    limits_from_spec(row->spec, l);
    l->spec_text = gbx_xstrdup(row->spec ? row->spec : "{}");
    if (row->token && strlen(row->token) < sizeof(l->token))
        snprintf(l->token, sizeof(l->token), "%s", row->token);
    else
        new_token(l->token); /* a row from before tokens */
    l->paused = row->state && strcmp(row->state, "paused") == 0;
    if (row->attrs) {
        l->attrs = json_loads(row->attrs, 0, NULL);
        if (!json_is_object(l->attrs)) {
            json_decref(l->attrs);
            l->attrs = NULL;
        }
    }
    if (l->paused && json_object_get(l->attrs, "stopped_ns") == NULL) {
        /* the state was written alone (behind): its row's time is the pause's */
        if (l->attrs == NULL)
            l->attrs = json_object();
        json_object_set_new(l->attrs, "stopped_ns",
                            json_integer(row->updated_ns ? row->updated_ns : gbx_realtime_ns()));
    }
    json_t *spec = json_loads(l->spec_text, 0, NULL);
    live_set_extras(l, spec);
    json_decref(spec);
    env_add_trust(l);
    l->next = s->live;
    s->live = l;
    return l;
}

static int adopt_one(void *arg, const struct gbx_store_sandbox *row)
{
    void **ctx = arg;
    struct gbx_server *s = ctx[0];
    struct gone **gone = ctx[1];
    struct gbx_sandbox_record rec = {.id = row->id,
                                     .uid_slot = (uint32_t)row->uid_slot,
                                     .host_uid = (uint32_t)row->host_uid,
                                     .init_pid = (pid_t)row->init_pid};
    struct gbx_sandbox *sb = NULL;
    struct gbx_err *err = NULL;
    int hibernated = row->state && strcmp(row->state, "hibernated") == 0;
    /* restored by a wake whose daemon died before taking it back: it runs, adopt it */
    pid_t woken = hibernated ? gbx_hibernate_woken_pid(s, row->id) : 0;
    if (woken > 0) {
        rec.init_pid = woken;
        if (gbx_sandbox_adopt(&s->rt, &rec, &sb, &err) == 0) {
            gbx_log_warn("sandbox '%s': woken by a daemon that died before taking it back; "
                         "adopted, running",
                         row->id);
            hibernated = 0;
        } else {
            /* a restored tree that does not work: undone; its image waits, as it was */
            gbx_log_warn("sandbox '%s': %s; the wake is undone", row->id, err->msg);
            gbx_err_free(err);
            err = NULL;
            if (sb)
                gbx_sandbox_forget(sb);
            sb = NULL;
            (void)!gbx_sandbox_reap(&s->rt, row->id, NULL);
        }
    }
    if (hibernated) {
        /* no processes to adopt: its image waits on disk; its uid range stays reserved */
        if (gbx_sandbox_hold(&s->rt, row->id, (uint32_t)row->uid_slot, 1, &sb, &err) < 0) {
            gbx_log_error("hibernated sandbox '%s': %s", row->id, err->msg);
            gbx_err_free(err);
            return 0; /* kept in the store: a later daemon may reserve it */
        }
        struct gbx_live *l = live_from_row(s, row, sb, NULL);
        l->hibernated = 1;
        l->paused = 1;
        return 0;
    }
    /* no hello: a frozen init (paused, or frozen for a snapshot when its daemon died) cannot
     * answer, and a slow one must not hold the start; the pidfd and its uid say init lives,
     * the connect that its listener is there */
    if (sb == NULL && gbx_sandbox_adopt(&s->rt, &rec, &sb, &err) < 0) {
        /* collected now, removed after the walk (the walk holds a read statement) */
        struct gone *g = gbx_xcalloc(1, sizeof(*g));
        g->id = gbx_xstrdup(row->id);
        g->why = gbx_xstrdup(err ? err->msg : "unknown");
        g->next = *gone;
        *gone = g;
        gbx_err_free(err);
        if (sb)
            gbx_sandbox_forget(sb);
        return 0;
    }
    if (sb->conn_fd >= 0) { /* requests open their own connections */
        close(sb->conn_fd);
        sb->conn_fd = -1;
    }
    /* frozen for a snapshot by a daemon that died during the copy: it was running */
    if (gbx_snapshots_unfreeze_stale(sb) == 1)
        gbx_log_warn("sandbox '%s': thawed (its daemon died while it was frozen for a snapshot)",
                     row->id);
    struct gbx_egress_policy *policy = adopted_policy(s, row);
    struct gbx_egress_sb *egress = NULL;
    if (gbx_egress_attach(s->egress, sb->id, sb->init_pid, policy, &egress, &err) < 0) {
        /* fail closed: a sandbox whose egress cannot be set up again is not kept */
        gbx_egress_policy_free(policy);
        struct gone *g = gbx_xcalloc(1, sizeof(*g));
        g->id = gbx_xstrdup(row->id);
        g->why = gbx_xstrdup(err->msg);
        g->next = *gone;
        *gone = g;
        gbx_err_free(err);
        (void)!gbx_sandbox_destroy(sb, NULL);
        return 0;
    }
    gbx_egress_policy_free(policy);
    if (row->state && strcmp(row->state, "pooled") == 0) {
        pool_push(s, sb, egress); /* trimmed to the pool's size after the walk */
        return 0;
    }
    struct gbx_live *l = live_from_row(s, row, sb, egress);
    /* its row's state may lag (written behind): the freezer says what is true */
    int frozen = gbx_cgroup_frozen(&sb->cg);
    if (frozen >= 0 && frozen != l->paused) {
        l->paused = frozen;
        if (frozen && json_object_get(l->attrs, "stopped_ns") == NULL) {
            if (l->attrs == NULL)
                l->attrs = json_object();
            json_object_set_new(l->attrs, "stopped_ns", json_integer(gbx_realtime_ns()));
        }
    }
    return 0;
}

static int known_id(const struct gbx_server *s, const char *id)
{
    for (const struct gbx_live *l = s->live; l; l = l->next)
        if (strcmp(l->sb->id, id) == 0)
            return 1;
    for (const struct pooled *p = s->pool; p; p = p->next)
        if (strcmp(p->sb->id, id) == 0)
            return 1;
    return 0;
}

/* Sandboxes in the runtime dir without a row: an earlier daemon died between creating one and
 * recording it (a pooled sandbox's row is written behind). Nobody can reach them: remove. */
static void reap_orphans(struct gbx_server *s)
{
    gbx_autofree char *dir = gbx_asprintf("%s/sandboxes", s->rt.runtime_dir);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    char *ids[64];
    size_t n = 0;
    while ((de = readdir(d)) != NULL && n < GBX_ARRAY_SIZE(ids))
        if (gbx_sandbox_id_valid(de->d_name) == 0 && !known_id(s, de->d_name))
            ids[n++] = gbx_xstrdup(de->d_name);
    closedir(d);
    for (size_t i = 0; i < n; i++) {
        struct gbx_err *err = NULL;
        if (gbx_sandbox_reap(&s->rt, ids[i], &err) < 0) {
            gbx_log_warn("sandbox '%s': %s", ids[i], err->msg);
            gbx_err_free(err);
        }
        gbx_log_warn("removed sandbox '%s': it had no record (its creator died before writing "
                     "one)",
                     ids[i]);
        gbx_server_audit(s, "sandbox.orphan", ids[i], NULL);
        free(ids[i]);
    }
}

/* Take back the sandboxes an earlier daemon left running; clean up those that died. */
static int adopt_all(struct gbx_server *s, struct gbx_err **err)
{
    struct gone *gone = NULL;
    void *ctx[2] = {s, &gone};
    if (gbx_store_sandbox_each(s->store, adopt_one, ctx, err) < 0)
        return -1;
    /* a smaller pool than the last daemon's: destroy the extra pooled sandboxes */
    if (s->pool_len > s->pool_target) {
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
        pool_drain(s);
        s->pool = keep;
        s->pool_len = n;
    }
    if (s->pool_len)
        gbx_log_info("adopted %zu pooled sandboxes", s->pool_len);
    /* (audit records are written after the walk: it holds a read statement) */
    for (struct gbx_live *l = s->live; l; l = l->next) {
        gbx_log_info("adopted sandbox '%s'", l->sb->id);
        gbx_server_audit(s, "sandbox.adopt", l->sb->id, NULL);
        /* the image of a hibernate or a wake that its daemon did not finish: of no use to a
         * sandbox that runs (its row is written again: it says hibernated after a wake) */
        if (!l->hibernated && gbx_hibernate_remove_stale(s, l->sb->id)) {
            if (!l->paused)
                json_object_del(l->attrs, "stopped_ns");
            gbx_sandboxes_save(s, l);
        }
    }
    while (gone) {
        struct gone *g = gone;
        gone = g->next;
        struct gbx_err *rerr = NULL;
        if (gbx_sandbox_reap(&s->rt, g->id, &rerr) < 0) {
            gbx_log_warn("sandbox '%s': %s", g->id, rerr->msg);
            gbx_err_free(rerr);
        }
        store_delete(s, g->id);
        (void)gbx_hibernate_remove_stale(s, g->id); /* of a dump its daemon died in */
        gbx_log_warn("sandbox '%s' did not survive: %s; removed", g->id, g->why);
        s->m.lost++;
        gbx_server_audit(s, "sandbox.lost", g->id, json_pack("{s:s}", "reason", g->why));
        free(g->id);
        free(g->why);
        free(g);
    }
    reap_orphans(s);
    return 0;
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
    if (r < 0 || chmod(s->sock_path, 0600) < 0 || listen(fd, 128) < 0) {
        int e = errno;
        close(fd);
        return gbx_err_sys(err, e, "cannot listen on '%s'", s->sock_path);
    }
    s->unix_listener = evconnlistener_new(s->base, NULL, NULL,
                                          LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
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
    if ((s->tcp_bound = evhttp_bind_socket_with_handle(s->http_tcp, addr, (uint16_t)port)) == NULL)
        return gbx_err_sys(err, errno ? errno : EADDRINUSE, "cannot listen on '%s'",
                           cfg->listen_tcp);
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

int gbx_server_is_admin(const struct gbx_server *s)
{
    return s->admin;
}

const char *gbx_server_owner(const struct gbx_server *s)
{
    return s->admin ? "" : s->key_name;
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
    if (lock_dirs(s, err) < 0)
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
    if (egress_new(s, cfg, err) < 0 || adopt_all(s, err) < 0 ||
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
    s->sock_path = gbx_asprintf("%s/api.sock", s->rt.runtime_dir);
    if (listen_unix(s, err) < 0)
        goto fail;
    if (cfg->listen_tcp && listen_tcp(s, cfg, err) < 0)
        goto fail;
    s->reaper = event_new(base, -1, EV_PERSIST, reap_expired, s);
    struct timeval every = {0, 200000};
    event_add(s->reaper, &every);
    if (s->pool_target) {
        s->pool_ev = event_new(base, -1, 0, pool_fill_one, s);
        /* background work: after whatever requests are ready (see gloveboxd.c) */
        if (event_base_get_npriorities(base) > 2)
            event_priority_set(s->pool_ev, 2);
        pool_kick(s);
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
    gbx_sessions_free(s->sessions); /* their agent connections, before the sandboxes go */
    s->sessions = NULL;
    pool_drain(s); /* pooled sandboxes are nobody's: never left behind */
    while (s->live) {
        struct gbx_live *l = s->live;
        s->live = l->next;
        if (kill_sandboxes) {
            gbx_autofree char *id = gbx_xstrdup(l->sb->id);
            (void)!gbx_sandbox_destroy(l->sb, NULL);
            store_delete(s, id);
            gbx_server_audit(s, "sandbox.delete", id,
                             json_pack("{s:s}", "reason", "daemon shutdown"));
        } else {
            /* leave it running: its control socket lets the next daemon adopt it */
            gbx_sandbox_forget(l->sb);
        }
        live_free(l);
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
    if (s->rt_ready)
        gbx_runtime_release(&s->rt);
    for (int i = 0; i < 2; i++)
        if (s->lock_fds[i] >= 0)
            close(s->lock_fds[i]); /* the last thing: the next daemon may start now */
    free(s->sock_path);
    free(s);
    gbx_reqmetrics_reset();
}
