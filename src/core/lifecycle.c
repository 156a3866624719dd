/* SPDX-License-Identifier: MIT */
/* Auto-resume (sandboxes.h gbx_sandboxes_wake): a paused sandbox made with auto_resume is
 * thawed by the first request that needs its processes, so the caller sees only the thaw's
 * latency. A hibernated one is not woken here (its wake is a job off the loop; the routes
 * that can wait for it do so themselves). */
#include <jansson.h>

#include "core/server_int.h"
#include "base/clock.h"
#include "base/log.h"

int gbx_sandboxes_wake(struct gbx_server *s, struct gbx_live *l, const char *front)
{
    if (!l->paused && !l->hibernated)
        return 0;
    if (!l->auto_resume || l->hibernated || l->busy)
        return -1;
    struct gbx_actor owner;
    gbx_actor_for(&owner, l->owner);
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_srv_pause(s, &owner, l, 0, json_pack("{s:s,s:s}", "reason", "auto_resume", "by", front),
                      &err) < 0) {
        gbx_log_warn("auto-resume of sandbox '%s' failed: %s", l->sb->id, err->msg);
        return -1;
    }
    s->m.auto_resumed++;
    /* its timeout paused it: without a new one it would pause again at the reaper's next
     * turn; it gets the one it was made with, as E2B's auto-resume does */
    int64_t now = gbx_realtime_ns();
    if (l->on_timeout_pause && l->expires_ns && l->expires_ns <= now)
        gbx_sandboxes_set_expiry(s, &owner, l,
                                 l->timeout_ms ? now + (int64_t)l->timeout_ms * 1000000 : 0,
                                 json_pack("{s:s}", "reason", "auto_resume"));
    return 0;
}
