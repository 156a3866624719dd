/* SPDX-License-Identifier: MIT */
/* cgroups for sandboxes, on v1, v2 and the hybrid layout (limits in v1, lifecycle in v2),
 * detected at runtime from /proc/self/mountinfo and /proc/self/cgroup. */
#ifndef GBX_SANDBOX_CGROUP_H
#define GBX_SANDBOX_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

enum gbx_cg_ctrl {
    GBX_CG_MEMORY,
    GBX_CG_PIDS,
    GBX_CG_CPU,
    GBX_CG_CPUACCT,
    GBX_CG_DEVICES,
    GBX_CG_FREEZER,
    GBX_CG_NCTRL
};

/* Where each controller lives on this host. Paths are absolute directories in which the
 * sandboxes' parent group ("glovebox") is created. */
struct gbx_cg_layout {
    char *v1[GBX_CG_NCTRL]; /* v1 base dir per controller (mount + own path), or NULL */
    char *v2;               /* v2 base dir (mount + own path), or NULL */
    int v2_limits;          /* memory, pids, cpu are enabled in v2 (pure v2 hosts) */
    int v2_freeze;          /* cgroup.freeze / cgroup.kill usable in v2 */
    int dev_inherited;      /* the v1 parent group carries the device allow-list */
    int favordynmods;       /* the kernel already favours dynamic cgroup changes */
    /* Prepended to every sandbox's group name, so that daemons with different runtime dirs
     * never meet over the same sandbox id: "" for the default runtime dir, else "g<8 hex>-"
     * (a hash of the runtime dir). */
    char scope[16];
};

/* Pure parser, for tests: fill a layout from the texts of /proc/self/mountinfo and
 * /proc/self/cgroup. v2_controllers is the content of cgroup.controllers at the v2 base
 * (may be NULL). Returns 0 or -EINVAL. */
int gbx_cg_layout_parse(struct gbx_cg_layout *l, const char *mountinfo, const char *self_cgroup,
                        const char *v2_controllers);
int gbx_cg_layout_detect(struct gbx_cg_layout *l, struct gbx_err **err) GBX_WUR;
void gbx_cg_layout_release(struct gbx_cg_layout *l);
/* Human-readable summary, e.g. "hybrid: limits v1, freeze v2". Static string. */
const char *gbx_cg_layout_mode(const struct gbx_cg_layout *l);

/* Make process migration into v1 groups cheap (see cgroup.c). Best effort: -errno. */
int gbx_cg_favor_dynmods(const struct gbx_cg_layout *l, const char *scratch_dir);

struct gbx_cg_limits {
    uint64_t memory_bytes; /* 0 = no limit; includes swap */
    uint64_t pids;         /* 0 = no limit */
    uint32_t cpu_millis;   /* 1000 = one CPU; 0 = no limit */
};

/* One sandbox's groups. */
struct gbx_cgroup {
    char *dir[GBX_CG_NCTRL]; /* v1 dirs */
    char *v2dir;
    int v2fd; /* open dir fd for CLONE_INTO_CGROUP, or -1 */
    const struct gbx_cg_layout *layout;
    char id[64]; /* the sandbox id the groups are named after */
};

/* Create the parent groups ("glovebox") and the rules every sandbox inherits (the v1 device
 * allow-list). Once per process, before the first create. */
int gbx_cgroup_prepare(struct gbx_cg_layout *l, struct gbx_err **err) GBX_WUR;
/* Create the groups for sandbox id and apply limits. Does not place any process. */
int gbx_cgroup_create(struct gbx_cgroup *cg, const struct gbx_cg_layout *l, const char *id,
                      const struct gbx_cg_limits *lim, struct gbx_err **err) GBX_WUR;
/* The same in two steps, so the slow part can overlap with the sandbox's own setup:
 * begin creates the v2 group a process can be born into (CLONE_INTO_CGROUP) and releases
 * cg on failure; finish creates the v1 groups and applies the limits, and on failure
 * leaves cg holding what it created, for the caller to destroy once its processes are
 * gone. */
int gbx_cgroup_begin(struct gbx_cgroup *cg, const struct gbx_cg_layout *l, const char *id,
                     struct gbx_err **err) GBX_WUR;
int gbx_cgroup_finish(struct gbx_cgroup *cg, const struct gbx_cg_limits *lim,
                      struct gbx_err **err) GBX_WUR;
/* The group whose cgroup.procs lists every process of the sandbox (its v2 group, else a v1
 * one), or NULL when it has none. */
const char *gbx_cgroup_procs_dir(const struct gbx_cgroup *cg);
/* Open the groups of an existing sandbox (re-adoption). */
int gbx_cgroup_open(struct gbx_cgroup *cg, const struct gbx_cg_layout *l, const char *id,
                    struct gbx_err **err) GBX_WUR;
/* Move pid into every v1 group (and the v2 group unless it was placed by clone3). */
int gbx_cgroup_attach(struct gbx_cgroup *cg, pid_t pid, int skip_v2, struct gbx_err **err) GBX_WUR;
int gbx_cgroup_freeze(struct gbx_cgroup *cg, int frozen, struct gbx_err **err) GBX_WUR;
/* Is it frozen now? 1, 0, or -errno. */
int gbx_cgroup_frozen(struct gbx_cgroup *cg);
/* SIGKILL every process in the sandbox's groups. */
int gbx_cgroup_kill(struct gbx_cgroup *cg, struct gbx_err **err) GBX_WUR;
/* Remove the groups (they must be empty). Retries briefly while the kernel drains them. */
int gbx_cgroup_destroy(struct gbx_cgroup *cg, struct gbx_err **err) GBX_WUR;
void gbx_cgroup_release(struct gbx_cgroup *cg);
/* Remove the groups of sandboxes whose name starts with prefix, that hold no process and
 * were created more than min_age_s seconds ago: leftovers of a creator that was killed
 * before it could clean up. Returns how many were removed. */
int gbx_cgroup_gc(const struct gbx_cg_layout *l, const char *prefix, int min_age_s);

struct gbx_cg_usage {
    uint64_t memory_bytes, memory_peak_bytes, memory_limit_bytes;
    uint64_t oom_kills;
    uint64_t pids, pids_limit;
    uint64_t cpu_usage_ns;
    int frozen;
};
int gbx_cgroup_usage(struct gbx_cgroup *cg, struct gbx_cg_usage *u, struct gbx_err **err) GBX_WUR;

#endif
