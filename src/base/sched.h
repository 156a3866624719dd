/* SPDX-License-Identifier: MIT */
/* The daemon's event loop answers first: its thread runs at a higher CPU priority (a lower
 * nice value) than everything it starts, so that sandboxes that saturate the CPUs do not slow
 * its replies. Threads and processes it starts go back to the process's own priority. */
#ifndef GBX_BASE_SCHED_H
#define GBX_BASE_SCHED_H

/* Lower the calling thread's nice value by delta (needs CAP_SYS_NICE; without it nothing
 * changes). 0, or -errno. */
int gbx_sched_boost_self(int delta);
/* Also give the calling thread a CPU group of its own, cpu_dir/name (cgroup v1's cpu
 * controller, beside the group the process is in), weighted as a thread delta nice levels
 * above nice 0: nice values only order threads of one group (an autogroup, a service's
 * cgroup), while sandboxes and other sessions compete as groups. 0, or -errno (-ENOTSUP
 * without a v1 cpu controller); nothing is left on failure. */
int gbx_sched_boost_group(const char *cpu_dir, const char *name, int delta);
/* Give thread tid (of this process) the boosted thread's priority and CPU group: a thread
 * whose lock the boosted one waits for (the store writer). 0, or -errno. */
int gbx_sched_boost_thread(int tid);
/* The calling thread (or a child just forked from a boosted thread) back to the priority the
 * process had before any boost, and to the process's CPU group. A no-op when nothing was
 * boosted. Async-signal-safe. */
void gbx_sched_unboost_self(void);
/* Only the nice value (a child that must not move between groups: a sandbox's). */
void gbx_sched_unboost_nice(void);
/* The boosted thread back in the process's group, and its group removed (at exit). */
void gbx_sched_release(void);

#endif
