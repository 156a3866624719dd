/* SPDX-License-Identifier: MIT */
/* What one API key holds, counted against its quotas (api/limits.h), and the limits a live
 * sandbox keeps in its row. Counts come from what the daemon holds now: its live sandboxes
 * (rebuilt from the store at a restart), the creates still being made, the snapshot and
 * session registries, the artifact rows. Nothing is a counter that a restart resets. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/server_int.h"
#include "core/templates.h"
#include "core/snapshots.h"
#include "base/log.h"
#include "base/mem.h"
#include "store/artifacts.h"
#include "store/store.h"

uint64_t gbx_srv_host_ram(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

json_t *gbx_srv_limits_json(const struct gbx_cg_limits *cg, uint64_t disk)
{
    return json_pack("{s:I,s:I,s:I,s:I}", "memory", (json_int_t)cg->memory_bytes, "pids",
                     (json_int_t)cg->pids, "cpu_millis", (json_int_t)cg->cpu_millis, "disk",
                     (json_int_t)disk);
}

char *gbx_srv_limits_spec(const struct gbx_cg_limits *cg, uint64_t disk)
{
    json_t *j = gbx_srv_limits_json(cg, disk);
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    GBX_BUG_ON(text == NULL);
    json_decref(j);
    return text;
}

void gbx_srv_limits_from_json(json_t *j, struct gbx_cg_limits *cg, uint64_t *disk)
{
    json_t *v;
    if (!json_is_object(j))
        return;
    if ((v = json_object_get(j, "memory")) && json_is_integer(v) && json_integer_value(v) >= 0)
        cg->memory_bytes = (uint64_t)json_integer_value(v);
    if ((v = json_object_get(j, "pids")) && json_is_integer(v) && json_integer_value(v) >= 0)
        cg->pids = (uint64_t)json_integer_value(v);
    if ((v = json_object_get(j, "cpu_millis")) && json_is_integer(v) &&
        json_integer_value(v) >= 0 && json_integer_value(v) <= UINT32_MAX)
        cg->cpu_millis = (uint32_t)json_integer_value(v);
    if ((v = json_object_get(j, "disk")) && json_is_integer(v) && json_integer_value(v) > 0)
        *disk = (uint64_t)json_integer_value(v);
}

/* What a sandbox with these limits counts for against the memory quota: its limit, or, with
 * none, the daemon's maximum (the most it could be given). */
uint64_t gbx_srv_quota_memory(const struct gbx_server *s, const struct gbx_cg_limits *cg)
{
    return cg->memory_bytes ? cg->memory_bytes : s->limits.max.memory_bytes;
}

void gbx_srv_quota_of(struct gbx_server *s, const char *owner, struct gbx_quota *q)
{
    *q = s->limits.quota;
    gbx_autofree char *text = NULL;
    if (gbx_store_apikey_quota_get(s->store, owner, &text) == 1 && text && text[0]) {
        char why[160];
        if (gbx_quota_parse(text, q, why, sizeof(why)) < 0)
            gbx_log_warn("API key '%s': stored quota '%s' does not parse (%s): the daemon's "
                         "quotas apply",
                         owner, text, why);
    }
}

int gbx_sandboxes_quota_admit(struct gbx_server *s, const struct gbx_actor *who,
                              const struct gbx_quota_use *add, struct gbx_err **err)
{
    if (who->admin)
        return 0; /* the admin socket (and the daemon's own work) has no quota */
    struct gbx_quota q;
    gbx_srv_quota_of(s, who->owner, &q);
    struct gbx_quota_use use = {0};
    if (add->sandboxes || add->memory || add->disk) {
        for (const struct gbx_live *l = s->live; l; l = l->next) {
            if (strcmp(l->owner, who->owner) != 0)
                continue;
            use.sandboxes++;
            use.memory += gbx_srv_quota_memory(s, &l->limits);
            use.disk += l->disk_bytes;
        }
        gbx_srv_creating_use(s, who->owner, &use);
    }
    if (add->snapshots)
        use.snapshots = gbx_snapshots_count(s->snapshots, who->owner);
    if (add->sessions)
        use.sessions = gbx_server_sessions_count(s, who->owner);
    if (add->templates)
        use.templates = gbx_templates_count(s, who->owner);
    if (add->artifacts || add->artifact_bytes) {
        int64_t n = 0, bytes = 0;
        if (gbx_store_artifacts_totals(s->store, who->owner, &n, &bytes, err) < 0)
            return -1;
        use.artifacts = (uint64_t)n;
        use.artifact_bytes = (uint64_t)bytes;
    }
    return gbx_quota_admit(&q, who->owner, &use, add, err);
}

int gbx_sandboxes_check_timeout(struct gbx_server *s, uint64_t timeout_ms, struct gbx_err **err)
{
    return gbx_limits_check_timeout(&s->limits, timeout_ms, err);
}

const struct gbx_limits *gbx_server_limits(const struct gbx_server *s)
{
    return &s->limits;
}
