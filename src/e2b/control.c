/* SPDX-License-Identifier: MIT */
/* The E2B control plane (shared/protocols/e2b.md §2), on the daemon's sandboxes core
 * (sandboxes.h). Every request acts as the caller's API key: it sees and touches only the
 * sandboxes that key created. Errors are {"code": status, "message": ...} (gbx_e2b_error).
 *
 *   POST   /v2/sandboxes                 create                      201 Sandbox
 *   GET    /v2/sandboxes                 list (filters, X-Next-Token) 200 [ListedSandbox]
 *   POST   /v2/sandboxes/{id}/connect    resume a paused one (201) or connect (200)
 *   GET    /sandboxes/{id}               info                        200 SandboxDetail
 *   DELETE /sandboxes/{id}               kill                        204
 *   POST   /sandboxes/{id}/timeout       expiry = now + timeout      204
 *   GET    /sandboxes/{id}/metrics       one sample, now             200 [SandboxMetric]
 *   POST   /sandboxes/{id}/pause         freeze                      204; 409 when paused
 *   PUT    /sandboxes/{id}/network       the egress policy (allowOut, denyOut, internet access)
 *   POST   /sandboxes/{id}/snapshots     501 until the state issue (as fork)
 *   GET    /snapshots                    200 [] (none exist)
 *   DELETE /templates/{snapshotID}       404 (none exist)
 *
 * Timeouts are whole seconds; 0 means "no timeout" everywhere (create, connect, timeout), as
 * in the native API. The request rate per API key is bounded before the request gets here
 * (server.c, gloveboxd --rate-limit, alias GLOVEBOX_E2B_RATE): 429 with an integer
 * Retry-After, which the SDK honours. */
#include "e2b/e2b.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "core/sandboxes.h"
#include "core/boot.h"
#include "core/hibernate.h"
#include "core/snapshots.h"
#include "sandbox/template.h"
#include "sandbox/criu.h"
#include "core/server.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/query.h"
#include "egress/egress.h"

#define CLIENT_ID "glovebox"
#define DEFAULT_TEMPLATE_ID "base"   /* what the SDK sends by default */
#define MAX_TIMEOUT (30 * 24 * 3600) /* seconds, as the native API */
#define MAX_BODY (1u << 20)          /* control-plane bodies are small */
#define LIST_DEFAULT_LIMIT 100
#define LIST_MAX_LIMIT 1000               /* larger limits are clamped to this */
#define LIST_MAX_FILTERS 64               /* metadata pairs in one list query */
#define NO_END "9999-12-31T23:59:59.999Z" /* endAt of a sandbox without a timeout */
#define NS 1000000000LL

/* ---- small helpers ------------------------------------------------------------------------ */

/* A success without a body: 204, which carries neither a body nor a length. */
static void reply_none(struct evhttp_request *req)
{
    evhttp_send_reply(req, 204, "No Content", NULL);
}

static void reply_gbx_err(struct evhttp_request *req, const struct gbx_err *err)
{
    gbx_e2b_error(req, gbx_http_status_for(err->kind), "%s", err->msg);
}

/* Text from the request that may go into a message: JSON strings must be UTF-8, and a
 * path may hold any byte, so only printable ASCII is echoed. */
static const char *printable(const char *s)
{
    for (const char *p = s; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            return "(a path with bytes that are not printable ASCII)";
    return s;
}

static void method_not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_e2b_error(req, 405, "method not allowed (use %s)", allow);
}

/* The request body as a JSON object ({} when empty); replies 400 or 413 and returns NULL.
 * Unknown fields are the handler's to ignore. */
static json_t *body_object(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n == 0)
        return json_object();
    if (n > MAX_BODY) {
        gbx_e2b_error(req, 413, "request body larger than %u bytes", MAX_BODY);
        return NULL;
    }
    json_error_t jerr;
    json_t *v = json_loadb((const char *)evbuffer_pullup(in, -1), n, JSON_REJECT_DUPLICATES, &jerr);
    if (v == NULL || !json_is_object(v)) {
        json_decref(v);
        gbx_e2b_error(req, 400, "request body must be a JSON object");
        return NULL;
    }
    return v;
}

/* An optional whole number of seconds, 0 to MAX_TIMEOUT: 1 and *out when present, 0 when
 * absent or null, -1 (after replying 400) otherwise. */
static int body_timeout(struct evhttp_request *req, json_t *body, json_int_t *out)
{
    json_t *v = json_object_get(body, "timeout");
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > MAX_TIMEOUT) {
        gbx_e2b_error(req, 400,
                      "'timeout' must be whole seconds from 0 (no timeout) to %d (30 days)",
                      MAX_TIMEOUT);
        return -1;
    }
    *out = json_integer_value(v);
    return 1;
}

/* "2023-11-14T22:13:20.000Z" or with an offset ("+02:00"): 0 and *ns, or -1. */
static int parse_rfc3339(const char *s, int64_t *ns)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
        n == 0)
        return -1;
    const char *p = s + n;
    int64_t frac = 0, scale = NS;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        for (; *p >= '0' && *p <= '9'; p++)
            if (scale > 1) {
                scale /= 10;
                frac += (*p - '0') * scale;
            }
    }
    int64_t offset = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh = 0, om = 0, m = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &m) != 2 || m != 5)
            return -1;
        offset = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 1 + m;
    } else {
        return -1;
    }
    if (*p != '\0' || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return -1;
    t -= offset;
    /* beyond what nanoseconds since 1970 hold (year 2262): as late as can be */
    *ns = t < 0 ? 0 : t >= INT64_MAX / NS ? INT64_MAX : (int64_t)t * NS + frac;
    return 0;
}

/* ---- what the daemon reports of itself ---------------------------------------------------- */

static long host_cpus(void)
{
    static long n;
    if (n == 0) {
        n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1)
            n = 1;
    }
    return n;
}

static uint64_t host_mem_bytes(void)
{
    static uint64_t total;
    if (total == 0) {
        FILE *f = fopen("/proc/meminfo", "re");
        unsigned long long kb = 0;
        char line[256];
        while (f && fgets(line, sizeof(line), f))
            if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
                break;
        if (f)
            fclose(f);
        total = kb ? (uint64_t)kb * 1024 : (1ull << 30);
    }
    return total;
}

/* CPUs the sandbox may use: its limit (at least 1 when reported as a count), or the host's. */
static double sandbox_cpus(const struct gbx_live *l)
{
    return l->limits.cpu_millis ? (double)l->limits.cpu_millis / 1000.0 : (double)host_cpus();
}

static json_int_t cpu_count(const struct gbx_live *l)
{
    if (l->limits.cpu_millis == 0)
        return host_cpus();
    json_int_t n = (l->limits.cpu_millis + 999) / 1000;
    return n < 1 ? 1 : n;
}

static uint64_t mem_limit(const struct gbx_live *l)
{
    return l->limits.memory_bytes ? l->limits.memory_bytes : host_mem_bytes();
}

/* ---- the template a client named ---------------------------------------------------------- */

/* The native core keeps the Glovebox template; the E2B template ID is derived from it (the
 * default template is "base"), except when the client named the default template another
 * way ("code-interpreter-v1", "host"): that name is kept as the sandbox's "e2b.template"
 * attribute, in its record, so it survives a restart of the daemon. */
static const char *derived_template(const struct gbx_live *l)
{
    static char buf[GBX_TEMPLATE_SHOWN_MAX]; /* the loop's: the name a key's template has */
    return strcmp(l->template_name, GBX_DEFAULT_TEMPLATE) == 0
               ? DEFAULT_TEMPLATE_ID
               : gbx_template_shown(l->template_name, buf);
}

static const char *client_template(const struct gbx_live *l)
{
    const char *name = json_string_value(json_object_get(l->attrs, "e2b.template"));
    return name ? name : derived_template(l);
}

static void remember_template(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                              const char *name)
{
    if (strcmp(name, derived_template(l)) == 0 || strlen(name) > GBX_ID_MAX)
        return;
    gbx_sandboxes_set_attr(s, l, "e2b.template", json_string(name));
}

/* ---- response bodies ---------------------------------------------------------------------- */

/* E2B knows two states: a sandbox hibernated, or being hibernated or woken (its processes
 * are stopped or on disk), reads as paused there, as a frozen one does. */
static int e2b_paused(const struct gbx_live *l)
{
    return l->paused || l->hibernated || l->busy == GBX_BUSY_WORKER;
}

/* Sandbox: what create and connect return. */
static json_t *sandbox_obj(const struct gbx_live *l)
{
    /* the traffic token is the same secret: the code interpreter sends only it on /contexts,
     * and ingress takes it (E2B-Traffic-Access-Token); the domain is ingress's, for getHost */
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s?}", "sandboxID", l->sb->id, "templateID",
                     client_template(l), "clientID", CLIENT_ID, "envdVersion", GBX_E2B_ENVD_VERSION,
                     "envdAccessToken", l->token, "trafficAccessToken", l->token, "domain",
                     gbx_server_ingress_domain_now());
}

/* ListedSandbox. */
static json_t *listed_obj(const struct gbx_live *l)
{
    gbx_autofree char *started = gbx_rfc3339(l->created_ns);
    gbx_autofree char *end = l->expires_ns ? gbx_rfc3339(l->expires_ns) : gbx_xstrdup(NO_END);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:s,s:o}", "sandboxID", l->sb->id,
                     "templateID", client_template(l), "clientID", CLIENT_ID, "startedAt", started,
                     "endAt", end, "state", e2b_paused(l) ? "paused" : "running", "cpuCount",
                     cpu_count(l), "memoryMB", (json_int_t)(mem_limit(l) >> 20), "diskSizeMB",
                     (json_int_t)(l->disk_bytes >> 20), "envdVersion", GBX_E2B_ENVD_VERSION,
                     "metadata", l->metadata ? json_incref(l->metadata) : json_object());
}

/* SandboxDetail: a ListedSandbox and what only the owner may know. */
static json_t *detail_obj(const struct gbx_live *l)
{
    json_t *j = listed_obj(l);
    json_object_set_new(j, "envdAccessToken", json_string(l->token));
    const char *domain = gbx_server_ingress_domain_now();
    json_object_set_new(j, "domain", domain ? json_string(domain) : json_null());
    /* open egress is E2B's "internet access"; policy and none are not */
    const struct gbx_egress_policy *p = l->egress ? gbx_egress_policy_of(l->egress) : NULL;
    json_object_set_new(j, "allowInternetAccess", json_boolean(p && p->mode == GBX_EGRESS_OPEN));
    json_object_set_new(j, "lifecycle",
                        json_pack("{s:s,s:b}", "onTimeout", l->on_timeout_pause ? "pause" : "kill",
                                  "autoResume", l->auto_resume));
    return j;
}

/* ---- handlers ----------------------------------------------------------------------------- */

static struct gbx_live *find_or_404(struct gbx_server *s, const struct gbx_actor *who,
                                    struct evhttp_request *req, const char *id)
{
    struct gbx_live *l = gbx_sandbox_id_valid(id) == 0 ? gbx_sandboxes_find(s, who, id) : NULL;
    if (l == NULL) {
        if (gbx_sandbox_id_valid(id) == 0)
            gbx_e2b_error(req, 404, "sandbox '%s' not found", id);
        else
            gbx_e2b_error(req, 404, "sandbox not found");
    }
    return l;
}

/* ---- snapshots and fork ------------------------------------------------------------------ */

static char *query_param(struct evhttp_request *req, const char *name);

/* E2B names snapshots "name:tag" (and lists them as "team/name:tag"); Glovebox keeps the
 * name (or the id) and gives it back as "<name or id>:default". */
static const char *snapshot_of(struct gbx_server *s, const struct gbx_actor *who, const char *ref)
{
    char buf[128];
    const char *slash = strchr(ref, '/');
    snprintf(buf, sizeof(buf), "%s", slash ? slash + 1 : ref);
    char *colon = strchr(buf, ':');
    if (colon && strcmp(colon, ":default") == 0)
        *colon = '\0';
    return gbx_snapshots_get(gbx_server_snapshots(s), who, buf).id;
}

static json_t *snapshot_e2b(const char *id, const char *name)
{
    gbx_autofree char *sid = gbx_asprintf("%s:default", name ? name : id);
    return json_pack("{s:s,s:[s]}", "snapshotID", sid, "names", sid);
}

struct e2b_snapshot {
    struct gbx_server *s;
    struct gbx_http_later *later;
};

static void snapshot_taken(void *arg, const char *id, const struct gbx_err *err)
{
    struct e2b_snapshot *es = arg;
    struct gbx_server *s = es->s;
    struct evhttp_request *req = gbx_http_later_take(es->later);
    free(es);
    if (req == NULL)
        return;
    if (err)
        return reply_gbx_err(req, err);
    /* the id this request's own snapshot just got: no one else's to hide */
    struct gbx_snapshot_ref r = gbx_snapshots_get(gbx_server_snapshots(s), &gbx_actor_system, id);
    gbx_e2b_reply_json(req, 201, snapshot_e2b(id, r.name));
}

/* POST /sandboxes/{id}/snapshots {name?}: a filesystem snapshot (docs/e2b.md: memory and
 * processes are not in it; a sandbox created from it starts fresh on its files). */
static void handle_snapshot(struct gbx_server *s, const struct gbx_actor *who,
                            struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = body_object(req);
    if (body == NULL)
        return;
    json_t *name = json_object_get(body, "name");
    char nbuf[64] = "";
    if (name && !json_is_null(name)) {
        const char *n = json_is_string(name) ? json_string_value(name) : "";
        size_t len = strcspn(n, ":"); /* a ":tag" is dropped: every snapshot is ":default" */
        if (len == 0 || len >= sizeof(nbuf)) {
            json_decref(body);
            return gbx_e2b_error(req, 400, "'name' must be a snapshot name");
        }
        memcpy(nbuf, n, len);
        nbuf[len] = '\0';
        if (gbx_name_valid(nbuf) < 0 || strncmp(nbuf, "sn-", 3) == 0) {
            json_decref(body);
            return gbx_e2b_error(req, 400,
                                 "'name' must be 1-63 of [a-z0-9-], not starting with 'sn-'");
        }
    }
    json_decref(body);
    struct e2b_snapshot *es = gbx_xcalloc(1, sizeof(*es));
    es->s = s;
    es->later = gbx_http_later_new(req);
    gbx_snapshots_take(gbx_server_snapshots(s), who, l, nbuf[0] ? nbuf : NULL, "snapshot",
                       snapshot_taken, es);
}

struct list_snaps {
    json_t *arr;
    const char *sandbox, *name;
};

static void list_snap(void *arg, const struct gbx_snapshot_ref *r)
{
    struct list_snaps *c = arg;
    if ((c->sandbox && strcmp(c->sandbox, r->sandbox) != 0) ||
        (c->name && (r->name == NULL || strcmp(c->name, r->name) != 0)))
        return;
    json_array_append_new(c->arr, snapshot_e2b(r->id, r->name));
}

/* GET /snapshots?sandboxID=&name=: every snapshot the key may see (one page). */
static void handle_snapshot_list(struct gbx_server *s, const struct gbx_actor *who,
                                 struct evhttp_request *req)
{
    gbx_autofree char *sandbox = query_param(req, "sandboxID");
    gbx_autofree char *name = query_param(req, "name");
    if (name) {
        char *colon = strchr(name, ':');
        if (colon)
            *colon = '\0';
    }
    struct list_snaps c = {json_array(), sandbox, name};
    gbx_snapshots_each_visible(gbx_server_snapshots(s), who, list_snap, &c);
    gbx_e2b_reply_json(req, 200, c.arr);
}

/* DELETE /templates/{snapshotID}: 204, or 404 (the SDK says false). */
static void handle_snapshot_delete(struct gbx_server *s, const struct gbx_actor *who,
                                   struct evhttp_request *req, const char *ref)
{
    gbx_autofree char *dec = gbx_pct_decode(ref, strlen(ref), 0);
    const char *id = dec ? snapshot_of(s, who, dec) : NULL;
    if (id == NULL)
        return gbx_e2b_error(req, 404, "snapshot not found");
    gbx_autoerr struct gbx_err *err = NULL;
    gbx_autofree char *copy = gbx_xstrdup(id);
    if (gbx_snapshots_delete(gbx_server_snapshots(s), copy, &err) < 0)
        return reply_gbx_err(req, err);
    gbx_server_audit(s, who, "snapshot.delete", "", json_pack("{s:s}", "snapshot", copy));
    reply_none(req);
}

struct e2b_fork {
    struct gbx_server *s;
    struct gbx_actor who; /* the clones are made for who forked */
    json_int_t timeout;
    int count;
    char *tmpl; /* the source's template name as its client said it */
    struct gbx_http_later *later;
    json_t *items; /* [{sandbox} | {error}] */
};

/* One clone made (or not): listed either way. */
static void fork_made(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct e2b_fork *f = arg;
    if (l == NULL) {
        json_array_append_new(f->items,
                              json_pack("{s:{s:i,s:s}}", "error", "code",
                                        gbx_http_status_for(err->kind), "message", err->msg));
        return;
    }
    remember_template(f->s, &f->who, l, f->tmpl);
    json_array_append_new(f->items, json_pack("{s:o}", "sandbox", sandbox_obj(l)));
}

static void fork_free(struct e2b_fork *f)
{
    json_decref(f->items);
    free(f->tmpl);
    free(f);
}

static void fork_done(void *arg)
{
    struct e2b_fork *f = arg;
    struct evhttp_request *req = gbx_http_later_take(f->later);
    if (req)
        gbx_e2b_reply_json(req, 201, gbx_steal_ptr(&f->items));
    fork_free(f);
}

static void fork_taken(void *arg, const char *id, const struct gbx_err *err)
{
    struct e2b_fork *f = arg;
    if (err) {
        struct evhttp_request *req = gbx_http_later_take(f->later);
        if (req)
            reply_gbx_err(req, err);
        return fork_free(f);
    }
    /* the clones are made off the loop, one after the other; each is listed */
    struct gbx_create_spec spec;
    gbx_create_spec_init(&spec);
    spec.snapshot = gbx_xstrdup(id);
    spec.timeout_ms = (uint64_t)f->timeout * 1000;
    spec.timeout_set = 1;
    f->items = json_array();
    gbx_sandboxes_create_many(f->s, &f->who, &spec, f->count, 1, fork_made, fork_done, f);
    gbx_create_spec_clear(&spec);
}

/* POST /sandboxes/{id}/fork {timeout?, count?}: a snapshot of the live sandbox (kind fork)
 * and count sandboxes started from it: 201 [{sandbox} | {error}]. */
static void handle_fork(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = body_object(req);
    if (body == NULL)
        return;
    json_int_t timeout = GBX_E2B_DEFAULT_TIMEOUT;
    json_t *c = json_object_get(body, "count");
    if (body_timeout(req, body, &timeout) < 0) {
        json_decref(body);
        return;
    }
    if (c && (!json_is_integer(c) || json_integer_value(c) < 1 || json_integer_value(c) > 64)) {
        json_decref(body);
        return gbx_e2b_error(req, 400, "'count' must be an integer from 1 to 64");
    }
    struct e2b_fork *f = gbx_xcalloc(1, sizeof(*f));
    f->s = s;
    f->who = *who;
    f->timeout = timeout;
    f->count = c ? (int)json_integer_value(c) : 1;
    f->tmpl = gbx_xstrdup(client_template(l));
    json_decref(body);
    f->later = gbx_http_later_new(req);
    gbx_snapshots_take(gbx_server_snapshots(s), who, l, NULL, "fork", fork_taken, f);
}

static void e2b_created_ready(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    if (req == NULL)
        return;
    if (err)
        return reply_gbx_err(req, err);
    if (l == NULL)
        return gbx_e2b_error(req, 503, "the sandbox went away while it was made");
    gbx_e2b_reply_json(req, 201, sandbox_obj(l));
}

struct e2b_create {
    struct gbx_server *s;
    struct gbx_actor who;
    char *tid; /* the template id its client asked for */
    struct gbx_http_later *later;
};

static void e2b_created(void *arg, struct gbx_live *l, int existed, const struct gbx_err *err)
{
    struct e2b_create *ec = arg;
    struct gbx_server *s = ec->s;
    struct gbx_http_later *later = ec->later;
    char *start, *ready;
    (void)existed;
    if (l) {
        remember_template(s, &ec->who, l, ec->tid);
        if (gbx_boot_needed(s, l, &start, &ready)) {
            free(ec->tid);
            free(ec);
            return gbx_boot(s, gbx_server_base(s), l, start, ready, e2b_created_ready, later);
        }
    }
    free(ec->tid);
    free(ec);
    struct evhttp_request *req = gbx_http_later_take(later);
    if (req == NULL)
        return;
    if (err && err->kind == GBX_ERR_NOT_FOUND)
        return gbx_e2b_error(req, 400, "template not found");
    if (err)
        return reply_gbx_err(req, err);
    if (l == NULL)
        return gbx_e2b_error(req, 503, "the sandbox went away while it was made");
    gbx_e2b_reply_json(req, 201, sandbox_obj(l));
}

/* POST /v2/sandboxes: NewSandboxV2 -> the native create body. */
static void handle_create(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req)
{
    json_t *body = body_object(req);
    if (body == NULL)
        return;
    struct gbx_create_spec spec;
    gbx_create_spec_init(&spec);
    gbx_autoerr struct gbx_err *err = NULL; /* declared before the first goto */
    const char *tid = DEFAULT_TEMPLATE_ID, *tmpl;
    json_t *v = json_object_get(body, "templateID");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) {
            gbx_e2b_error(req, 400, "'templateID' must be a string");
            goto out;
        }
        tid = json_string_value(v);
    }
    /* a snapshot's id as createSnapshot gave it ("name:default" too) starts from it */
    const char *snap_id = snapshot_of(s, who, tid);
    if (snap_id)
        tmpl = NULL;
    else if (strcmp(tid, DEFAULT_TEMPLATE_ID) == 0 || strcmp(tid, "code-interpreter-v1") == 0)
        tmpl = GBX_DEFAULT_TEMPLATE;
    else if (gbx_name_valid(tid) == 0)
        tmpl = tid;
    else {
        gbx_e2b_error(req, 400, "template not found");
        goto out;
    }
    json_int_t timeout = GBX_E2B_DEFAULT_TIMEOUT;
    if (body_timeout(req, body, &timeout) < 0)
        goto out;
    spec.snapshot = snap_id ? gbx_xstrdup(snap_id) : NULL;
    spec.template_name = tmpl ? gbx_xstrdup(tmpl) : NULL;
    spec.timeout_ms = (uint64_t)timeout * 1000;
    spec.timeout_set = 1;
    /* metadata and envVars under the native rules (their messages name the native fields) */
    if (((v = json_object_get(body, "metadata")) && !json_is_null(v) &&
         gbx_create_spec_set_metadata(&spec, v, &err) < 0) ||
        ((v = json_object_get(body, "envVars")) && !json_is_null(v) &&
         gbx_create_spec_set_env(&spec, v, &err) < 0)) {
        gbx_e2b_error(req, 400, "%s", err->msg);
        goto out;
    }
    if ((v = json_object_get(body, "volumeMounts")) && json_array_size(v) > 0) {
        gbx_e2b_error(req, 400, "volume mounts are not supported by Glovebox");
        goto out;
    }
    /* allow_internet_access and network map onto an egress policy (docs/e2b.md); a
     * sandbox that says neither gets the daemon's default (Glovebox ships "policy" with no
     * rules: nothing leaves until a rule allows it). The core takes the parsed policy. */
    if (gbx_egress_policy_from_e2b(body, gbx_egress_default_mode(gbx_server_egress(s)),
                                   &spec.policy, &err) < 0) {
        gbx_e2b_error(req, 400, "%s", err->msg);
        goto out;
    }
    /* network.allowPublicTraffic: true makes ingress take requests without a credential; E2B
     * treats a missing one as true, Glovebox as false (private unless asked: docs/e2b.md) */
    if (json_is_true(json_object_get(json_object_get(body, "network"), "allowPublicTraffic")))
        spec.public_traffic = 1;
    /* lifecycle: autoPause (onTimeout: 'pause') freezes it at its timeout instead of killing
     * it, autoResume {enabled} thaws it for the next request that needs it (docs/e2b.md);
     * autoPauseMemory: false is taken as true (a frozen sandbox keeps its memory) */
    json_t *ap = json_object_get(body, "autoPause"), *ar = json_object_get(body, "autoResume");
    json_t *are = json_object_get(ar, "enabled");
    if ((ap && !json_is_boolean(ap)) || (ar && !json_is_null(ar) && !json_is_boolean(are))) {
        gbx_e2b_error(req, 400, "autoPause must be a boolean and autoResume {\"enabled\": bool}");
        goto out;
    }
    spec.on_timeout_pause = json_is_true(ap);
    spec.auto_resume = json_is_true(are);
    if (json_object_get(body, "mcp") || json_object_get(body, "iam"))
        gbx_log_info("E2B create: mcp and iam options are accepted but not applied");

    /* made off the loop: e2b_created answers */
    struct e2b_create *ec = gbx_xcalloc(1, sizeof(*ec));
    ec->s = s;
    ec->who = *who;
    ec->tid = gbx_xstrdup(tid);
    ec->later = gbx_http_later_new(req);
    gbx_sandboxes_create_spec_async(s, who, &spec, e2b_created, ec);
out:
    gbx_create_spec_clear(&spec);
    json_decref(body);
}

/* POST /v2/sandboxes/{id}/connect {timeout?, memory?}: thaw a paused sandbox (201) or just
 * hand out a running one (200); a timeout only ever extends. memory:false (reboot instead
 * of resuming) is not distinguished: the processes are thawed as they were. */
/* What connect does once the sandbox runs: the timeout, and the reply. */
static void connected(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                      struct gbx_live *l, int has_timeout, json_int_t timeout, int status)
{
    if (has_timeout && l->expires_ns) {
        int64_t want = timeout ? gbx_realtime_ns() + (int64_t)timeout * NS : 0;
        if (want == 0 || want > l->expires_ns)
            gbx_sandboxes_set_expiry(
                s, who, l, want, json_pack("{s:I,s:s}", "timeout", timeout, "via", "e2b.connect"));
    } else if (status == 201 && l->expires_ns && l->expires_ns <= gbx_realtime_ns()) {
        /* its time ran out while it was paused (a paused sandbox does not expire): resumed
         * without a timeout, it gets the default one, as a new sandbox would */
        gbx_sandboxes_set_expiry(
            s, who, l, gbx_realtime_ns() + (int64_t)GBX_E2B_DEFAULT_TIMEOUT * NS,
            json_pack("{s:i,s:s}", "timeout", GBX_E2B_DEFAULT_TIMEOUT, "via", "e2b.connect"));
    }
    gbx_e2b_reply_json(req, status, sandbox_obj(l));
}

struct woken {
    struct gbx_server *s;
    struct gbx_actor who;
    int has_timeout;
    json_int_t timeout;
    struct gbx_http_later *later;
};

static void connect_woken(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct woken *w = arg;
    struct evhttp_request *req = gbx_http_later_take(w->later);
    if (req && err)
        reply_gbx_err(req, err);
    else if (req)
        connected(w->s, &w->who, req, l, w->has_timeout, w->timeout, 201);
    free(w);
}

/* POST /v2/sandboxes/{id}/connect {timeout?, memory?}: thaw a paused sandbox or wake a
 * hibernated one (201), or just hand out a running one (200); a timeout only ever extends. */
static void handle_connect(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = body_object(req);
    if (body == NULL)
        return;
    json_int_t timeout = 0;
    int has_timeout = body_timeout(req, body, &timeout);
    json_decref(body);
    if (has_timeout < 0)
        return;
    if (has_timeout) {
        gbx_autoerr struct gbx_err *terr = NULL;
        if (gbx_sandboxes_check_timeout(s, (uint64_t)timeout * 1000, &terr) < 0)
            return reply_gbx_err(req, terr);
    }
    if (l->hibernated) {
        struct woken *w = gbx_xcalloc(1, sizeof(*w));
        *w = (struct woken){.s = s,
                            .who = *who,
                            .has_timeout = has_timeout,
                            .timeout = timeout,
                            .later = gbx_http_later_new(req)};
        return gbx_hibernate_wake(s, who, l, connect_woken, w);
    }
    if (l->busy == GBX_BUSY_WORKER)
        return gbx_e2b_error(req, 409, "sandbox '%s' is being paused (hibernated)", l->sb->id);
    int status = 200;
    if (l->paused) {
        gbx_autoerr struct gbx_err *err = NULL;
        if (gbx_sandboxes_pause(s, who, l, 0, &err) < 0)
            return reply_gbx_err(req, err);
        status = 201;
    }
    connected(s, who, req, l, has_timeout, timeout, status);
}

static void killed(void *arg, const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    /* gone (what could not be cleaned up is logged by the core), or it could not be: the
     * answer says which */
    if (req == NULL)
        return;
    if (err && err->kind != GBX_ERR_INTERNAL)
        return reply_gbx_err(req, err);
    reply_none(req);
}

static void handle_kill(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req, struct gbx_live *l)
{
    /* 204 once it is gone: a hibernate in progress is stopped first, and the answer waits */
    gbx_sandboxes_destroy_later(s, who, l, "sandbox.delete", NULL, killed, gbx_http_later_new(req));
}

static void handle_timeout(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = body_object(req);
    if (body == NULL)
        return;
    json_int_t timeout = 0;
    int r = body_timeout(req, body, &timeout);
    json_decref(body);
    if (r < 0)
        return;
    if (r == 0)
        return gbx_e2b_error(req, 400, "expected {\"timeout\": seconds}");
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_sandboxes_check_timeout(s, (uint64_t)timeout * 1000, &err) < 0)
        return reply_gbx_err(req, err);
    gbx_sandboxes_set_expiry(s, who, l, timeout ? gbx_realtime_ns() + (int64_t)timeout * NS : 0,
                             json_pack("{s:I,s:s}", "timeout", timeout, "via", "e2b"));
    reply_none(req);
}

static void paused_reply(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct evhttp_request *req = gbx_http_later_take(arg);
    (void)l;
    if (req && err)
        reply_gbx_err(req, err);
    else if (req)
        reply_none(req);
}

/* POST /sandboxes/{id}/pause {memory?}: with CRIU on this host, hibernate (processes, memory
 * and files to disk: the sandbox holds no memory while paused); without it, or with
 * memory:false, freeze it in place. */
static void handle_pause(struct gbx_server *s, const struct gbx_actor *who,
                         struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = body_object(req);
    if (body == NULL)
        return;
    int keep_memory = !json_is_false(json_object_get(body, "memory"));
    json_decref(body);
    if (l->paused)
        return gbx_e2b_error(req, 409, "sandbox '%s' is already paused", l->sb->id);
    gbx_autoerr struct gbx_err *err = NULL;
    if (keep_memory) /* frozen in place when CRIU cannot do it here */
        return gbx_hibernate_or_pause(s, who, l, paused_reply, gbx_http_later_new(req));
    if (gbx_sandboxes_pause(s, who, l, 1, &err) < 0)
        return reply_gbx_err(req, err);
    reply_none(req);
}

/* cpuUsedPct needs two samples of the sandbox's CPU time: the last one per sandbox is kept
 * (CPU_SAMPLES of them, the least recently sampled replaced first). The first request for
 * a sandbox gets the average since it was created; a request within 100 ms of the previous
 * sample gets that sample's figure again. */
#define CPU_SAMPLES 1024
static struct cpu_sample {
    char id[GBX_ID_MAX + 1];
    int64_t created_ns, at_ns;
    uint64_t cpu_ns;
    double pct;
} samples[CPU_SAMPLES];

static double cpu_pct(const struct gbx_live *l, uint64_t cpu_ns, int64_t now)
{
    struct cpu_sample *c = NULL, *oldest = &samples[0];
    for (size_t i = 0; i < CPU_SAMPLES && c == NULL; i++) {
        if (samples[i].created_ns == l->created_ns && strcmp(samples[i].id, l->sb->id) == 0)
            c = &samples[i];
        else if (samples[i].at_ns < oldest->at_ns)
            oldest = &samples[i];
    }
    int64_t wall;
    uint64_t used;
    if (c && now - c->at_ns < NS / 10)
        return c->pct;
    if (c && cpu_ns >= c->cpu_ns) {
        wall = now - c->at_ns;
        used = cpu_ns - c->cpu_ns;
    } else {
        c = oldest;
        snprintf(c->id, sizeof(c->id), "%s", l->sb->id);
        c->created_ns = l->created_ns;
        wall = now - l->created_ns;
        used = cpu_ns;
    }
    double pct = wall > 0 ? (double)used / ((double)wall * sandbox_cpus(l)) * 100.0 : 0;
    pct = pct < 0 ? 0 : pct > 100 ? 100 : (double)(int64_t)(pct * 100 + 0.5) / 100;
    c->at_ns = now;
    c->cpu_ns = cpu_ns;
    c->pct = pct;
    return pct;
}

/* A query parameter's value (percent-decoded, malloc'ed), or NULL. */
static char *query_param(struct evhttp_request *req, const char *name)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    size_t nlen = strlen(name);
    for (const char *p = q; p && *p;) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=')
            return gbx_pct_decode(p + nlen + 1, len - nlen - 1, 1);
        p = amp ? amp + 1 : NULL;
    }
    return NULL;
}

/* GET /sandboxes/{id}/metrics?start=&end= (unix seconds): the current sample, when the
 * window (if any) holds the present moment; no history is kept. */
static void handle_metrics(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, struct gbx_live *l)
{
    (void)s;
    int64_t now = gbx_realtime_ns();
    int64_t now_s = now / NS;
    json_t *arr = json_array();
    gbx_autofree char *start = query_param(req, "start");
    gbx_autofree char *end = query_param(req, "end");
    uint64_t t;
    if ((start && gbx_parse_u64(start, 0, UINT32_MAX, &t) == 0 && (int64_t)t > now_s + 5) ||
        (end && gbx_parse_u64(end, 0, UINT32_MAX, &t) == 0 && (int64_t)t < now_s - 5))
        return gbx_e2b_reply_json(req, 200, arr);
    struct gbx_cg_usage u;
    memset(&u, 0, sizeof(u));
    gbx_autoerr struct gbx_err *err = NULL;
    if (l->sb->ops->usage(l->sb, &u, &err) < 0)
        gbx_log_warn("metrics of sandbox '%s': %s", l->sb->id, err->msg);
    /* the writable layer: "/" is an overlay whose statfs reports its upper tmpfs */
    uint64_t disk_used = 0, disk_total = l->disk_bytes;
    char root[64];
    snprintf(root, sizeof(root), "/proc/%d/root/", (int)l->sb->init_pid);
    struct statvfs st;
    if (l->sb->init_pid > 0 && statvfs(root, &st) == 0 && st.f_blocks) {
        disk_total = (uint64_t)st.f_blocks * st.f_frsize;
        disk_used = (uint64_t)(st.f_blocks - st.f_bfree) * st.f_frsize;
    }
    gbx_autofree char *ts = gbx_rfc3339(now);
    json_array_append_new(
        arr, json_pack("{s:s,s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:I}", "timestamp", ts, "timestampUnix",
                       (json_int_t)now_s, "cpuCount", cpu_count(l), "cpuUsedPct",
                       cpu_pct(l, u.cpu_usage_ns, now), "memUsed", (json_int_t)u.memory_bytes,
                       "memTotal", (json_int_t)mem_limit(l), "memCache", (json_int_t)0, "diskUsed",
                       (json_int_t)disk_used, "diskTotal", (json_int_t)disk_total));
    gbx_e2b_reply_json(req, 200, arr);
}

/* ---- list --------------------------------------------------------------------------------- */

struct list_query {
    int running, paused; /* states asked for */
    int64_t started_after;
    const char *template_name; /* into the parsed query */
    int asc;
    uint64_t limit;
    int64_t cur_ns;     /* the cursor: the last sandbox of the previous page */
    const char *cur_id; /* into the parsed query */
    size_t nmeta;
    char *meta[LIST_MAX_FILTERS][2];
};

static void list_query_release(struct list_query *q)
{
    for (size_t i = 0; i < q->nmeta; i++)
        free(q->meta[i][0]), free(q->meta[i][1]);
}

/* The list's query parameters (gbx_query_parse's callbacks): NULL, or what the value must be. */

/* metadata=...: (1) the parameter value is already URL-decoded; (2) parse it as a form query
 * ("k=v&k2=v2", form-decoded); (3) percent-decode each key and value once more (§2.5). Each
 * metadata parameter adds its pairs to the list query's. */
static const char *metadata_param(void *out, const char *v)
{
    struct list_query *q = out;
    static const char *const expect = "an encoded query of key=value pairs (at most 64 in all)";
    for (const char *p = v; *p;) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t klen = eq ? (size_t)(eq - p) : len;
        if (len > 0) {
            if (q->nmeta == LIST_MAX_FILTERS)
                return expect;
            gbx_autofree char *k1 = gbx_pct_decode(p, klen, 1);
            gbx_autofree char *v1 =
                gbx_pct_decode(eq ? eq + 1 : p + len, eq ? len - klen - 1 : 0, 1);
            char *k2 = k1 ? gbx_pct_decode(k1, strlen(k1), 0) : NULL;
            char *v2 = v1 ? gbx_pct_decode(v1, strlen(v1), 0) : NULL;
            if (k2 == NULL || v2 == NULL || *k2 == '\0') {
                free(k2);
                free(v2);
                return expect;
            }
            q->meta[q->nmeta][0] = k2;
            q->meta[q->nmeta][1] = v2;
            q->nmeta++;
        }
        p = amp ? amp + 1 : p + len;
    }
    return NULL;
}

static const char *state_param(void *out, const char *v)
{
    struct list_query *q = out;
    for (const char *p = v; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 7 && strncmp(p, "running", 7) == 0)
            q->running = 1;
        else if (len == 6 && strncmp(p, "paused", 6) == 0)
            q->paused = 1;
        else if (len > 0)
            return "a comma list of running and paused";
        p = comma ? comma + 1 : p + len;
    }
    return NULL;
}

static const char *started_after_param(void *out, const char *v)
{
    struct list_query *q = out;
    return parse_rfc3339(v, &q->started_after) == 0 ? NULL : "an RFC 3339 time";
}

static const char *order_param(void *out, const char *v)
{
    struct list_query *q = out;
    if (strcmp(v, "asc") != 0 && strcmp(v, "desc") != 0)
        return "asc or desc";
    q->asc = strcmp(v, "asc") == 0;
    return NULL;
}

/* nextToken: "<created_ns>.<id>" of the last sandbox of the previous page (X-Next-Token). */
static const char *next_token_param(void *out, const char *v)
{
    struct list_query *q = out;
    char *end = NULL;
    errno = 0;
    long long ns = strtoll(v, &end, 10);
    if (errno || end == v || *end != '.' || ns < 0 || gbx_sandbox_id_valid(end + 1) < 0)
        return "a token this server gave (X-Next-Token)";
    q->cur_ns = ns;
    q->cur_id = end + 1;
    return NULL;
}

static int list_match(const struct list_query *q, const struct gbx_live *l)
{
    if (!(e2b_paused(l) ? q->paused : q->running))
        return 0;
    if (q->started_after && l->created_ns <= q->started_after)
        return 0;
    if (q->template_name && strcmp(q->template_name, client_template(l)) != 0 &&
        strcmp(q->template_name, l->template_name) != 0)
        return 0;
    for (size_t i = 0; i < q->nmeta; i++) {
        json_t *v = json_object_get(l->metadata, q->meta[i][0]);
        if (!json_is_string(v) || strcmp(json_string_value(v), q->meta[i][1]) != 0)
            return 0;
    }
    return 1;
}

/* Does l come after the cursor in the list's order? desc: newest first, ties by id; asc:
 * the exact reverse. */
static int after_cursor(const struct list_query *q, const struct gbx_live *l)
{
    int c = l->created_ns != q->cur_ns ? (l->created_ns < q->cur_ns ? 1 : -1)
                                       : strcmp(l->sb->id, q->cur_id);
    return q->asc ? c < 0 : c > 0;
}

struct list_acc {
    struct list_query *q;
    struct gbx_live **v;
    size_t n, cap;
};

static int list_collect(void *arg, struct gbx_live *l)
{
    struct list_acc *a = arg;
    if (!list_match(a->q, l))
        return 0;
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 64;
        a->v = gbx_xrealloc(a->v, a->cap * sizeof(struct gbx_live *));
    }
    a->v[a->n++] = l;
    return 0;
}

/* GET /v2/sandboxes?metadata=&state=&startedAfter=&template=&order=&limit=&nextToken= */
static void handle_list(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req)
{
    struct list_query q;
    memset(&q, 0, sizeof(q));
    q.limit = LIST_DEFAULT_LIMIT;
    /* E2B's reading: names decoded too, unknown parameters ignored (as unknown JSON fields
     * are), a limit above the most clamped to it */
    const struct gbx_query_param params[] = {
        {.name = "metadata", .kind = GBX_QUERY_FN, .out = &q, .fn = metadata_param},
        {.name = "state", .kind = GBX_QUERY_FN, .out = &q, .fn = state_param},
        {.name = "startedAfter", .kind = GBX_QUERY_FN, .out = &q, .fn = started_after_param},
        {.name = "template", .kind = GBX_QUERY_STR, .out = &q.template_name},
        {.name = "order", .kind = GBX_QUERY_FN, .out = &q, .fn = order_param},
        {.name = "limit",
         .kind = GBX_QUERY_U64,
         .out = &q.limit,
         .min = 1,
         .max = LIST_MAX_LIMIT,
         .clamp = 1},
        {.name = "nextToken", .kind = GBX_QUERY_FN, .out = &q, .fn = next_token_param},
    };
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct gbx_query qs = {0};
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_query_parse(&qs, query, params, GBX_ARRAY_SIZE(params),
                        GBX_QUERY_IGNORE_UNKNOWN | GBX_QUERY_FORM, &err) < 0) {
        gbx_e2b_error(req, 400, "%s", err->msg);
        gbx_query_release(&qs);
        return list_query_release(&q);
    }
    if (!q.running && !q.paused)
        q.running = q.paused = 1;
    struct list_acc a = {.q = &q};
    gbx_sandboxes_each(s, who, list_collect, &a); /* newest first, ties by id */
    if (q.asc)
        for (size_t i = 0; i < a.n / 2; i++) {
            struct gbx_live *t = a.v[i];
            a.v[i] = a.v[a.n - 1 - i];
            a.v[a.n - 1 - i] = t;
        }
    size_t i = 0;
    if (q.cur_id)
        while (i < a.n && !after_cursor(&q, a.v[i]))
            i++;
    json_t *arr = json_array();
    size_t first = i;
    for (; i < a.n && i - first < q.limit; i++)
        json_array_append_new(arr, listed_obj(a.v[i]));
    if (i < a.n && i > first) {
        char token[GBX_ID_MAX + 32];
        snprintf(token, sizeof(token), "%lld.%s", (long long)a.v[i - 1]->created_ns,
                 a.v[i - 1]->sb->id);
        evhttp_add_header(evhttp_request_get_output_headers(req), "X-Next-Token", token);
    }
    free(a.v);
    list_query_release(&q);
    gbx_query_release(&qs);
    gbx_e2b_reply_json(req, 200, arr);
}

/* ---- routing ------------------------------------------------------------------------------ */

/* PUT /sandboxes/{id}/network {allowOut?, denyOut?, allow_internet_access?, ...}: replace
 * the sandbox's egress policy (its secrets, attached natively, stay) -> 204 */
static void handle_network(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, struct gbx_live *l)
{
    json_t *body = body_object(req);
    if (body == NULL)
        return;
    struct gbx_egress_policy *pol = NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    struct gbx_egress *eg = gbx_server_egress(s);
    if (gbx_egress_policy_from_e2b_update(body, gbx_egress_default_mode(eg), &pol, &err) < 0) {
        json_decref(body);
        return gbx_e2b_error(req, 400, "%s", err->msg);
    }
    json_decref(body);
    const struct gbx_egress_policy *old = gbx_egress_policy_of(l->egress);
    for (size_t i = 0; old && i < old->nsecrets; i++) {
        pol->secrets = gbx_xrealloc(pol->secrets, (pol->nsecrets + 1) * sizeof(char *));
        pol->secrets[pol->nsecrets++] = gbx_xstrdup(old->secrets[i]);
    }
    if (gbx_egress_set_policy(l->egress, pol, &err) < 0) {
        gbx_egress_policy_free(pol);
        return reply_gbx_err(req, err);
    }
    json_t *pj = gbx_egress_policy_json(pol);
    gbx_egress_policy_free(pol);
    gbx_sandboxes_set_attr(s, l, "network", json_incref(pj));
    gbx_server_audit(s, who, "sandbox.network", l->sb->id, pj);
    evhttp_send_reply(req, 204, "No Content", NULL);
}

enum action { A_CONNECT, A_TIMEOUT, A_METRICS, A_PAUSE, A_NETWORK, A_SNAPSHOTS, A_FORK, A_LOGS };

static const struct sub_route {
    const char *name;
    enum evhttp_cmd_type method;
    const char *allow;
    enum action action;
} sandbox_subs[] =
    {
        {"timeout", EVHTTP_REQ_POST, "POST", A_TIMEOUT},
        {"metrics", EVHTTP_REQ_GET, "GET", A_METRICS},
        {"pause", EVHTTP_REQ_POST, "POST", A_PAUSE},
        {"network", EVHTTP_REQ_PUT, "PUT", A_NETWORK},
        {"snapshots", EVHTTP_REQ_POST, "POST", A_SNAPSHOTS},
        {"fork", EVHTTP_REQ_POST, "POST", A_FORK},
        {"logs", EVHTTP_REQ_GET, "GET", A_LOGS},
},
  v2_subs[] = {
      {"connect", EVHTTP_REQ_POST, "POST", A_CONNECT},
      {"logs", EVHTTP_REQ_GET, "GET", A_LOGS},
};

static void sandbox_action(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, const struct sub_route *r, const char *id)
{
    if (evhttp_request_get_command(req) != r->method)
        return method_not_allowed(req, r->allow);
    struct gbx_live *l = find_or_404(s, who, req, id);
    if (l == NULL)
        return;
    switch (r->action) {
    case A_CONNECT:
        return handle_connect(s, who, req, l);
    case A_TIMEOUT:
        return handle_timeout(s, who, req, l);
    case A_METRICS:
        return handle_metrics(s, who, req, l);
    case A_PAUSE:
        return handle_pause(s, who, req, l);
    case A_NETWORK:
        return handle_network(s, who, req, l);
    case A_SNAPSHOTS:
        return handle_snapshot(s, who, req, l);
    case A_FORK:
        return handle_fork(s, who, req, l);
    case A_LOGS:
        return gbx_e2b_error(req, 501, "sandbox logs are not available in Glovebox");
    }
}

#define MAX_SEGS 5

void gbx_e2b_control(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                     const char *path)
{
    if (strlen(path) > 1024)
        return gbx_e2b_error(req, 404, "no route for this path");
    /* split "/a/b/c" into segments; an empty one (a doubled or final '/') matches nothing */
    char buf[1025];
    snprintf(buf, sizeof(buf), "%s", path + 1);
    const char *seg[MAX_SEGS + 1] = {buf};
    size_t n = 0;
    for (char *p = buf; p && n <= MAX_SEGS;) {
        seg[n++] = p;
        p = strchr(p, '/');
        if (p)
            *p++ = '\0';
    }
    for (size_t i = 0; i < n; i++)
        if (*seg[i] == '\0')
            return gbx_e2b_error(req, 404, "no route for '%s'", printable(path));
    enum evhttp_cmd_type m = evhttp_request_get_command(req);

    if (n >= 2 && strcmp(seg[0], "v2") == 0 && strcmp(seg[1], "sandboxes") == 0) {
        if (n == 2) {
            if (m == EVHTTP_REQ_POST)
                return handle_create(s, who, req);
            if (m == EVHTTP_REQ_GET)
                return handle_list(s, who, req);
            return method_not_allowed(req, "GET, POST");
        }
        if (n == 4)
            for (size_t i = 0; i < GBX_ARRAY_SIZE(v2_subs); i++)
                if (strcmp(seg[3], v2_subs[i].name) == 0)
                    return sandbox_action(s, who, req, &v2_subs[i], seg[2]);
    } else if (strcmp(seg[0], "sandboxes") == 0 && n == 2) {
        if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_DELETE)
            return method_not_allowed(req, "GET, DELETE");
        struct gbx_live *l = find_or_404(s, who, req, seg[1]);
        if (l == NULL)
            return;
        if (m == EVHTTP_REQ_DELETE)
            return handle_kill(s, who, req, l);
        return gbx_e2b_reply_json(req, 200, detail_obj(l));
    } else if (strcmp(seg[0], "sandboxes") == 0 && n == 3) {
        for (size_t i = 0; i < GBX_ARRAY_SIZE(sandbox_subs); i++)
            if (strcmp(seg[2], sandbox_subs[i].name) == 0)
                return sandbox_action(s, who, req, &sandbox_subs[i], seg[1]);
    } else if (strcmp(seg[0], "snapshots") == 0 && n == 1) {
        if (m != EVHTTP_REQ_GET)
            return method_not_allowed(req, "GET");
        return handle_snapshot_list(s, who, req);
    } else if (strcmp(seg[0], "templates") == 0 && n == 2) {
        if (m != EVHTTP_REQ_DELETE)
            return method_not_allowed(req, "DELETE");
        return handle_snapshot_delete(s, who, req, seg[1]);
    }
    gbx_e2b_error(req, 404, "no route for '%s'", printable(path));
}
