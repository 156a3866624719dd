/* SPDX-License-Identifier: MIT */
/* What /healthz and /metrics say. */
#include "base/clock.h"
#include "core/server.h"
#include "api/egress_api.h"
#include "session/sessions.h"
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
#include "http/exec.h"
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
#include "sandbox/backend.h"
#include "sandbox/criu.h"
#include "store/store.h"
#include "store/writer.h"

#include "http/gate.h"
#include "api/api.h"
#include "core/server_int.h"

/* What /healthz says besides "ok": the host capabilities a sandbox path depends on, each
 * "available", "unavailable" or "probing"; why, for the admin only. */
json_t *gbx_srv_health_json(const struct gbx_server *s, const struct gbx_actor *who)
{
    const char *why = NULL;
    int criu = gbx_criu_probe_result(&why);
    json_t *hib = json_pack("{s:s}", "state",
                            criu == 1   ? "available"
                            : criu == 0 ? "unavailable"
                                        : "probing");
    if (who->admin && criu >= 0)
        json_object_set_new(hib, "reason", json_string(why));
    /* pause needs a freezer: cgroup v2's, or v1's */
    const struct gbx_cg_layout *cg = &s->rt.cg;
    int freezer = cg->v2_freeze || cg->v1[GBX_CG_FREEZER] != NULL;
    json_t *pause = json_pack("{s:s}", "state", freezer ? "available" : "unavailable");
    if (who->admin)
        json_object_set_new(pause, "reason",
                            json_string(cg->v2_freeze ? "cgroup v2 freezer"
                                        : freezer     ? "cgroup v1 freezer"
                                                      : "no cgroup freezer on this host"));
    return json_pack("{s:s,s:{s:o,s:o}}", "status", "ok", "capabilities", "hibernate", hib, "pause",
                     pause);
}

/* GET /metrics: Prometheus text exposition format. */
static void metrics_daemon(struct gbx_server *s, struct evbuffer *b);
static void sandbox_gauges(struct gbx_server *s, const struct gbx_actor *who, struct evbuffer *b,
                           size_t n);

void gbx_srv_handle_metrics(struct gbx_server *s, const struct gbx_actor *who,
                            struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    /* an API key sees its own sandboxes' series and the host's capabilities; the daemon's
     * own counters and histograms (every tenant's activity) are the admin's */
    int admin = who->admin;
    size_t running = 0, paused = 0;
    for (struct gbx_live *l = s->live; l; l = l->next)
        if (gbx_actor_sees(who, l->owner))
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
    sandbox_gauges(s, who, b, running);
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
    for (size_t i = 0; i < GBX_ARRAY_SIZE(gbx_create_bounds); i++)
        evbuffer_add_printf(b, "glovebox_sandbox_create_seconds_bucket{le=\"%g\"} %llu\n",
                            gbx_create_bounds[i], (unsigned long long)s->m.create_buckets[i]);
    evbuffer_add_printf(b,
                        "glovebox_sandbox_create_seconds_bucket{le=\"+Inf\"} %llu\n"
                        "glovebox_sandbox_create_seconds_sum %.6f\n"
                        "glovebox_sandbox_create_seconds_count %llu\n",
                        (unsigned long long)s->m.create_count, s->m.create_sum,
                        (unsigned long long)s->m.create_count);
    evbuffer_add_printf(b, "# HELP glovebox_exec_start_seconds Time from an exec request to "
                           "its process running.\n"
                           "# TYPE glovebox_exec_start_seconds histogram\n");
    for (size_t i = 0; i < GBX_ARRAY_SIZE(gbx_create_bounds); i++)
        evbuffer_add_printf(b, "glovebox_exec_start_seconds_bucket{le=\"%g\"} %llu\n",
                            gbx_create_bounds[i], (unsigned long long)s->m.exec_buckets[i]);
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
        "# HELP glovebox_sandboxes_timeout_paused_total Sandboxes paused by their timeout.\n"
        "# TYPE glovebox_sandboxes_timeout_paused_total counter\n"
        "glovebox_sandboxes_timeout_paused_total %llu\n"
        "# HELP glovebox_sandboxes_auto_resumed_total Paused sandboxes thawed by a request.\n"
        "# TYPE glovebox_sandboxes_auto_resumed_total counter\n"
        "glovebox_sandboxes_auto_resumed_total %llu\n"
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
        (unsigned long long)s->m.timeout_paused, (unsigned long long)s->m.auto_resumed,
        (unsigned long long)s->m.lost, (unsigned long long)s->m.pool_hits,
        (unsigned long long)s->m.pool_misses, (unsigned long long)s->m.pool_failed,
        s->writes_pending, (unsigned long long)s->m.execs, (unsigned long long)s->m.exec_out_bytes,
        (unsigned long long)s->m.exec_err_bytes);
    const struct gbx_diskguard *g = &s->disk;
    evbuffer_add_printf(
        b,
        "# HELP glovebox_state_free_bytes Free bytes of the state directory's file system.\n"
        "# TYPE glovebox_state_free_bytes gauge\n"
        "glovebox_state_free_bytes %lld\n"
        "# HELP glovebox_state_reserve_bytes Free bytes below which new work is refused.\n"
        "# TYPE glovebox_state_reserve_bytes gauge\n"
        "glovebox_state_reserve_bytes %llu\n"
        "# HELP glovebox_state_reserve_file 1 while the reserve file holds its space.\n"
        "# TYPE glovebox_state_reserve_file gauge\n"
        "glovebox_state_reserve_file %d\n"
        "# HELP glovebox_state_refused_total Requests refused because the state disk was short.\n"
        "# TYPE glovebox_state_refused_total counter\n"
        "glovebox_state_refused_total %llu\n"
        "# HELP glovebox_state_reserve_released_total Times the reserve file was given up for "
        "deletes.\n"
        "# TYPE glovebox_state_reserve_released_total counter\n"
        "glovebox_state_reserve_released_total %llu\n",
        (long long)gbx_diskguard_free(g), (unsigned long long)g->reserve, g->file_present,
        (unsigned long long)g->refused, (unsigned long long)g->released);
    gbx_egress_metrics(s->egress, b);
    evbuffer_add_printf(b, "# HELP glovebox_http_connections Open connections (on TCP, "
                           "capped by --max-conns).\n"
                           "# TYPE glovebox_http_connections gauge\n"
                           "# HELP glovebox_http_refused_total Connections refused over a cap.\n"
                           "# TYPE glovebox_http_refused_total counter\n"
                           "# HELP glovebox_http_head_only_total Requests without a credential "
                           "answered from their head, the body never read.\n"
                           "# TYPE glovebox_http_head_only_total counter\n"
                           "# HELP glovebox_http_malformed_total Connections closed on a "
                           "malformed request.\n"
                           "# TYPE glovebox_http_malformed_total counter\n"
                           "# HELP glovebox_http_timeouts_total Connections closed by the header, "
                           "body or idle timeout.\n"
                           "# TYPE glovebox_http_timeouts_total counter\n");
    gbx_gates_metrics(b); /* the listeners' (daemon/listen.c): the TCP one, then the admin's */
    if (s->metrics_extra) /* the front ends the daemon wired (ingress) */
        s->metrics_extra(s->metrics_extra_arg, b);
}

/* Memory, CPU, pids and OOM kills of each sandbox the caller may see (n of them). */
static void sandbox_gauges(struct gbx_server *s, const struct gbx_actor *who, struct evbuffer *b,
                           size_t n)
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
        if (gbx_actor_sees(who, l->owner))
            (void)!l->sb->ops->usage(l->sb, &u[i++], NULL);
    for (size_t g = 0; g < GBX_ARRAY_SIZE(gauges); g++) {
        evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", gauges[g][0], gauges[g][1],
                            gauges[g][0], g == 1 || g == 3 ? "counter" : "gauge");
        i = 0;
        for (struct gbx_live *l = s->live; l && i < n; l = l->next) {
            if (!gbx_actor_sees(who, l->owner))
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
