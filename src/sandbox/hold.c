/* SPDX-License-Identifier: MIT */
/* A sandbox with no processes: what the daemon keeps for a hibernated sandbox (its image on
 * disk) so that its uid range stays reserved for the restore and the rest of the daemon
 * finds an id, a uid and a slot. Destroying it releases the slot; forgetting it does not. */
#include <errno.h>
#include <stdlib.h>

#include "base/mem.h"
#include "sandbox/ns.h"

int gbx_sandbox_hold(struct gbx_runtime *rt, const char *id, uint32_t uid_slot, int reserve,
                     struct gbx_sandbox **out, struct gbx_err **err)
{
    if (gbx_sandbox_id_valid(id) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "invalid sandbox id '%s'", id);
    int r = reserve ? gbx_ns_slot_reserve(rt, uid_slot) : 0;
    if (r < 0)
        return gbx_err_sys(err, -r, "sandbox '%s': cannot reserve its uid range", id);
    struct gbx_sandbox *sb = gbx_xcalloc(1, sizeof(*sb));
    sb->id = gbx_xstrdup(id);
    sb->ops = &gbx_ns_backend;
    sb->rt = rt;
    sb->pidfd = sb->conn_fd = -1;
    sb->cg.v2fd = -1;
    sb->uid_slot = uid_slot;
    sb->host_uid = rt->uid_base + uid_slot * GBX_UID_RANGE;
    sb->exited = 1;
    *out = sb;
    return 0;
}

int gbx_sandbox_hold_renew(struct gbx_sandbox *sb)
{
    int r = gbx_ns_slot_reserve(sb->rt, sb->uid_slot);
    return r == -EBUSY ? 0 : r; /* still ours */
}
