/* SPDX-License-Identifier: MIT */
/* Retention: policies by age, count and size for snapshots, artifacts, session logs and
 * stopped (paused or hibernated) sandboxes, applied by a collector every interval; and
 *
 *   GET  /v1/gc                      the policy and the last pass
 *   POST /v1/gc {"dry_run": bool}    a pass now (dry: what it would remove; nothing goes)
 *
 * admin only. Nothing in use is removed: a snapshot something stacks on, a session with a
 * call running, a sandbox being snapshotted. */
#ifndef GBX_CORE_GC_H
#define GBX_CORE_GC_H

#include <jansson.h>
#include <stdint.h>

#include "core/actor.h"
#include "base/retention.h"

struct event_base;
struct evhttp_request;
struct gbx_server;
struct gbx_gc;

struct gbx_gc_policy {
    struct gbx_retention_rule snapshots, artifacts, sessions, stopped;
    uint64_t interval_ms; /* 0: 60 s */
};

int gbx_gc_new(struct gbx_server *s, struct event_base *base, const struct gbx_gc_policy *pol,
               struct gbx_gc **out);
void gbx_gc_free(struct gbx_gc *gc);
/* One pass: the report {dry_run, removed: [{kind, id, rule, bytes, age_s}], bytes, failed, at}. */
json_t *gbx_gc_run(struct gbx_gc *gc, int dry_run);
void gbx_gc_route(struct gbx_gc *gc, const struct gbx_actor *who, struct evhttp_request *req);

#endif
