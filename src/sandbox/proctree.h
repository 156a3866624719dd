/* SPDX-License-Identifier: MIT */
/* Every process of a sandbox as the host sees it: the members of its cgroup, read from
 * /proc, with the pids, parents and uids translated to the sandbox's view. Blocking (procfs
 * reads): run it off the loop. */
#ifndef GBX_SANDBOX_PROCTREE_H
#define GBX_SANDBOX_PROCTREE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

#define GBX_PROCTREE_MAX 1000 /* processes described at most (the rest are counted) */

/* What the read needs of a sandbox, copied on the loop (the sandbox may go meanwhile). */
struct gbx_proctree_src {
    pid_t init_pid;    /* host pid of its glovebox-init */
    uint32_t host_uid; /* host uid of its root */
    char *cgroup_dir;  /* the group whose cgroup.procs lists its processes */
};

/* {"processes": [{pid, ppid, uid, user, state, name, cmd, kind}], "total", "truncated"} into
 * *out: pids, ppids and uids as the sandbox sees them (ppid 0: a parent outside it), user
 * from its /etc/passwd (resolved inside its root) or the uid as text, cmd its argv (empty
 * for a zombie), kind "init" for pid 1 (glovebox-init), "helper" for a copy of glovebox-init
 * that has not exec'd its command yet, else "other"; sorted by pid, at most max (init first
 * when it is there); total counts every member of the group. NOT_FOUND when the group is
 * gone; processes that end while it reads are left out. */
int gbx_sandbox_proctree(const struct gbx_proctree_src *src, size_t max, json_t **out,
                         struct gbx_err **err) GBX_WUR;

#endif
