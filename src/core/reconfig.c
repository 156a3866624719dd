/* SPDX-License-Identifier: MIT */
/* What a running daemon can change of the core (server.h "gbx_server_reconfigure"): the warm
 * pool's size and its sandboxes when the defaults they were made with change, the egress
 * default, limits, the helpers' deadlines, retention, the ingress domain; and the hooks the
 * daemon sets (its settings' routes, more /metrics). */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "core/gc.h"
#include "core/server.h"
#include "core/server_int.h"
#include "egress/egress.h"

/* the daemon has one server: E2B's replies read its ingress domain from here */
static const char *ingress_domain_now;

const char *gbx_server_ingress_domain_now(void)
{
    return ingress_domain_now;
}

void gbx_srv_set_ingress_domain(struct gbx_server *s, const char *d)
{
    free(s->ingress_domain);
    s->ingress_domain = d && d[0] ? gbx_xstrdup(d) : NULL;
    ingress_domain_now = s->ingress_domain;
}

void gbx_srv_pool_start(struct gbx_server *s)
{
    if (s->pool_target && s->pool_ev == NULL) {
        s->pool_ev = event_new(s->base, -1, 0, gbx_srv_pool_fill_one, s);
        /* background work: after whatever requests are ready (see gloveboxd.c) */
        if (event_base_get_npriorities(s->base) > 2)
            event_priority_set(s->pool_ev, 2);
    }
    gbx_srv_pool_kick(s);
    if (s->pool_target)
        gbx_log_info("keeping a warm pool of %zu sandboxes", s->pool_target);
}

static int same_defaults(const struct gbx_limits *a, const struct gbx_limits *b)
{
    return a->dflt.memory_bytes == b->dflt.memory_bytes && a->dflt.pids == b->dflt.pids &&
           a->dflt.cpu_millis == b->dflt.cpu_millis && a->dflt_disk == b->dflt_disk;
}

void gbx_server_reconfigure(struct gbx_server *s, const struct gbx_server_config *cfg)
{
    s->rt.criu_timeout_ms = cfg->criu_timeout_ms;
    s->rt.helper_timeout_ms = cfg->helper_timeout_ms;
    s->hello_timeout_ms = cfg->hello_timeout_ms > 0 ? cfg->hello_timeout_ms : GBX_HELLO_TIMEOUT_MS;
    enum gbx_egress_mode mode = GBX_EGRESS_POLICY;
    if (cfg->egress_default)
        (void)gbx_egress_mode_parse(cfg->egress_default, &mode);
    /* pooled sandboxes were made with the old defaults (limits, egress policy): replaced */
    int stale = mode != gbx_egress_default_mode(s->egress);
    gbx_egress_set_default_mode(s->egress, mode);
    if (cfg->limits) {
        stale |= !same_defaults(&s->limits, cfg->limits);
        s->limits = *cfg->limits;
    }
    if (stale) {
        s->pool_gen++;
        free(s->pool_spec);
        s->pool_spec = gbx_srv_limits_spec(&s->limits.dflt, s->limits.dflt_disk);
        if (s->pool_len)
            gbx_log_info("warm pool: %zu sandboxes made with the old defaults are replaced",
                         s->pool_len);
        gbx_srv_pool_drain(s);
    }
    size_t was = s->pool_target;
    s->pool_target = cfg->pool_size;
    gbx_srv_pool_trim(s);
    if (was != s->pool_target && s->pool_target == 0)
        gbx_log_info("no warm pool");
    if (was != s->pool_target || stale)
        gbx_srv_pool_start(s);
    gbx_gc_set_policy(s->gc, &cfg->retention);
    gbx_srv_set_ingress_domain(s, cfg->ingress_domain);
}

void gbx_server_set_metrics_extra(struct gbx_server *s, void (*fn)(void *arg, struct evbuffer *b),
                                  void *arg)
{
    s->metrics_extra = fn;
    s->metrics_extra_arg = arg;
}

void gbx_server_set_daemon(struct gbx_server *s, const struct gbx_daemon_ops *ops, void *arg)
{
    s->daemon_ops = ops;
    s->daemon_arg = arg;
}
