/* SPDX-License-Identifier: MIT */
/* The daemon's event loop answers first: its thread runs at a higher CPU priority (a lower
 * nice value) than everything it starts, so that sandboxes that saturate the CPUs do not slow
 * its replies. Threads and processes it starts go back to the process's own priority. */
#ifndef GBX_BASE_SCHED_H
#define GBX_BASE_SCHED_H

#include <stdint.h>

/* The boosted thread's time slice: short, so that its wakeup preempts a thread that is in
 * the middle of a default one (1.4 ms on 2 CPUs), rather than waiting for that one's end. */
#define GBX_SCHED_LOOP_SLICE_NS 100000ull

/* The calling thread's time slice (SCHED_OTHER, its nice value kept): ns from 100 us to
 * 100 ms, or 0 for the kernel's default. 0, or -errno; a kernel before 6.12 has no custom
 * slices and ignores it. */
int gbx_sched_set_slice(uint64_t ns);
/* Lower the calling thread's nice value by delta (needs CAP_SYS_NICE; without it nothing
 * changes), and give it a short time slice (GBX_SCHED_LOOP_SLICE_NS; a kernel before 6.12
 * has none and ignores it). 0, or -errno. */
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
/* Only the nice value and the slice (a child that must not move between groups: a
 * sandbox's). */
void gbx_sched_unboost_nice(void);
/* The boosted thread back in the process's group, and its group removed (at exit). */
void gbx_sched_release(void);

#endif
