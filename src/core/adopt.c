/* SPDX-License-Identifier: MIT */
/* The reaper (sandboxes whose init died or whose timeout passed) and the re-adoption of
 * a previous daemon's sandboxes at start. */
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
        if (gbx_sandboxes_destroy(s, &gbx_actor_system, l, "sandbox.lost",
                                  json_pack("{s:s}", "reason", why), &err) < 0)
            gbx_err_free(err);
    }
    free(pf);
}

void gbx_srv_reap_expired(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_server *s = arg;
    reap_dead(s);
    gbx_srv_pool_reap(s);
    int64_t now = gbx_realtime_ns();
    for (struct gbx_live *l = s->live, *next; l; l = next) {
        next = l->next;
        /* a paused sandbox waits to be resumed or killed, as E2B keeps paused sandboxes */
        if (l->expires_ns == 0 || now < l->expires_ns || l->paused)
            continue;
        struct gbx_err *err = NULL;
        if (l->on_timeout_pause) {
            /* kept, frozen: resumed by a resume (with a new timeout) or destroyed */
            if (gbx_sandboxes_pause(s, &gbx_actor_system, l, 1, &err) < 0) {
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
        gbx_sandboxes_destroy_bg(s, &gbx_actor_system, l, "sandbox.expire",
                                 json_pack("{s:s}", "reason", "timeout"));
    }
}

/* ---- re-adoption after a restart ------------------------------------------------------------ */

/* The create request a sandbox's row keeps, as a spec (a row whose request no longer parses
 * gives an empty one: the sandbox is kept, with the limits its attrs say). */
static void spec_of_row(struct gbx_server *s, const struct gbx_store_sandbox *row,
                        struct gbx_create_spec *c)
{
    json_t *j = row->spec ? json_loads(row->spec, 0, NULL) : NULL;
    struct gbx_err *err = NULL;
    if (j != NULL && gbx_create_spec_parse(&s->limits, j, c, &err) < 0) {
        gbx_log_warn("sandbox '%s': its stored create request: %s; kept without it", row->id,
                     err->msg);
        gbx_err_free(err);
        gbx_create_spec_init(c);
    } else if (j == NULL) {
        gbx_create_spec_init(c);
    }
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
    struct gbx_create_spec spec;
    spec_of_row(s, row, &spec);
    /* the limits it asked for (a row from before its attrs kept what it was given) */
    l->limits = spec.limits;
    l->disk_bytes = spec.disk_bytes ? spec.disk_bytes : 1024ull << 20;
    l->on_timeout_pause = spec.on_timeout_pause;
    l->public_traffic = spec.public_traffic;
    l->auto_resume = spec.auto_resume;
    l->timeout_ms = spec.timeout_ms;
    /* as a create made now would say it, so that a retried create compares equal */
    json_t *asked = gbx_create_spec_json(&spec);
    l->spec_text = json_dumps(asked, JSON_COMPACT | JSON_SORT_KEYS);
    GBX_BUG_ON(l->spec_text == NULL);
    json_decref(asked);
    if (row->token && strlen(row->token) < sizeof(l->token))
        snprintf(l->token, sizeof(l->token), "%s", row->token);
    else
        gbx_srv_new_token(l->token); /* a row from before tokens */
    l->paused = row->state && strcmp(row->state, "paused") == 0;
    if (row->attrs) {
        l->attrs = json_loads(row->attrs, 0, NULL);
        if (!json_is_object(l->attrs)) {
            json_decref(l->attrs);
            l->attrs = NULL;
        }
    }
    /* the limits it was given, defaults included (a row from before them: its request's) */
    gbx_srv_limits_from_json(json_object_get(l->attrs, "limits"), &l->limits, &l->disk_bytes);
    json_t *browser = json_object_get(l->attrs, "browser"); /* browser/browser.c */
    if (json_is_integer(json_object_get(browser, "port")) &&
        json_is_string(json_object_get(browser, "profile"))) {
        l->browser_port = (unsigned)json_integer_value(json_object_get(browser, "port"));
        snprintf(l->browser_profile, sizeof(l->browser_profile), "%s",
                 json_string_value(json_object_get(browser, "profile")));
    }
    if (l->paused && json_object_get(l->attrs, "stopped_ns") == NULL) {
        /* the state was written alone (behind): its row's time is the pause's */
        if (l->attrs == NULL)
            l->attrs = json_object();
        json_object_set_new(l->attrs, "stopped_ns",
                            json_integer(row->updated_ns ? row->updated_ns : gbx_realtime_ns()));
    }
    gbx_srv_live_set_extras(l, &spec);
    gbx_create_spec_clear(&spec);
    gbx_srv_env_add_trust(l);
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
        if (row->spec == NULL || strcmp(row->spec, s->pool_spec) != 0) {
            /* pooled with other limits than this daemon's defaults: of no use */
            gbx_log_info("pooled sandbox '%s' has other limits than the defaults: removed",
                         row->id);
            gbx_egress_detach(egress);
            (void)!gbx_sandbox_destroy(sb, NULL);
            gbx_srv_store_delete(s, row->id);
            return 0;
        }
        gbx_srv_pool_push(s, sb, egress); /* trimmed to the pool's size after the walk */
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
        gbx_server_audit(s, &gbx_actor_system, "sandbox.orphan", ids[i], NULL);
        free(ids[i]);
    }
}

/* Hibernate images of no sandbox (its row gone while a daemon was down, or removed by hand):
 * nothing can wake them, and they can be large. Removed behind, on a worker. */
static void sweep_images(struct gbx_server *s)
{
    gbx_autofree char *dir = gbx_asprintf("%s/hibernate", s->rt.state_dir);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (gbx_sandbox_id_valid(de->d_name) < 0 || known_id(s, de->d_name))
            continue;
        gbx_log_warn("removing the hibernate image of '%s': no sandbox has it", de->d_name);
        gbx_hibernate_discard(s, de->d_name);
    }
    closedir(d);
}

static int found_row(void *arg, const struct gbx_audit_row *r)
{
    (void)r;
    *(int *)arg = 1;
    return 1;
}

/* A sandbox whose row was written but whose sandbox.create record was not (its daemon died
 * between the two: the record is written behind): the record is made now, as its owner's,
 * saying so, so that no sandbox lives without the audit log knowing who made it. */
static void create_recorded(struct gbx_server *s, const struct gbx_live *l)
{
    int found = 0;
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_store_audit_query(s->store, l->sb->id, "sandbox.create", 0, 1, found_row, &found,
                              &err) < 0 ||
        found)
        return;
    struct gbx_actor who;
    gbx_actor_for(&who, l->owner);
    json_t *spec = l->spec_text ? json_loads(l->spec_text, 0, NULL) : NULL;
    gbx_server_audit(s, &who, "sandbox.create", l->sb->id,
                     json_pack("{s:o,s:s}", "spec", spec ? spec : json_object(), "recorded",
                               "at adoption: its daemon stopped before recording the create"));
    gbx_log_warn("sandbox '%s' had no create record (its daemon stopped first): recorded now",
                 l->sb->id);
}

/* Take back the sandboxes an earlier daemon left running; clean up those that died. */
int gbx_srv_adopt_all(struct gbx_server *s, struct gbx_err **err)
{
    struct gone *gone = NULL;
    void *ctx[2] = {s, &gone};
    if (gbx_store_sandbox_each(s->store, adopt_one, ctx, err) < 0)
        return -1;
    /* a smaller pool than the last daemon's: destroy the extra pooled sandboxes */
    gbx_srv_pool_trim(s);
    if (s->pool_len)
        gbx_log_info("adopted %zu pooled sandboxes", s->pool_len);
    /* (audit records are written after the walk: it holds a read statement) */
    for (struct gbx_live *l = s->live; l; l = l->next) {
        gbx_log_info("adopted sandbox '%s'", l->sb->id);
        create_recorded(s, l);
        gbx_server_audit(s, &gbx_actor_system, "sandbox.adopt", l->sb->id, NULL);
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
        gbx_srv_store_delete(s, g->id);
        (void)gbx_hibernate_remove_stale(s, g->id); /* of a dump its daemon died in */
        gbx_log_warn("sandbox '%s' did not survive: %s; removed", g->id, g->why);
        s->m.lost++;
        gbx_server_audit(s, &gbx_actor_system, "sandbox.lost", g->id,
                         json_pack("{s:s}", "reason", g->why));
        free(g->id);
        free(g->why);
        free(g);
    }
    reap_orphans(s);
    sweep_images(s);
    return 0;
}
