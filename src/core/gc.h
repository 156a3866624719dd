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
struct gbx_server;
struct gbx_gc;

struct gbx_gc_policy {
    struct gbx_retention_rule snapshots, artifacts, sessions, stopped;
    uint64_t interval_ms; /* 0: 60 s */
};

int gbx_gc_new(struct gbx_server *s, struct event_base *base, const struct gbx_gc_policy *pol,
               struct gbx_gc **out);
void gbx_gc_free(struct gbx_gc *gc);
/* A reload's new policies and interval (the timer re-armed; off without rules). */
void gbx_gc_set_policy(struct gbx_gc *gc, const struct gbx_gc_policy *pol);
/* One pass: the report {dry_run, removed: [{kind, id, rule, bytes, age_s}], bytes, failed, at}. */
json_t *gbx_gc_run(struct gbx_gc *gc, int dry_run);
/* GET /v1/gc's answer: the policy and the last pass's report (or null). New reference. */
json_t *gbx_gc_status(const struct gbx_gc *gc);
/* One pass, its report with the policy (POST /v1/gc's answer). */
json_t *gbx_gc_run_report(struct gbx_gc *gc, int dry_run);

#endif
