/* SPDX-License-Identifier: MIT */
/* The daemon's event loop answers first: its thread runs at a higher CPU priority (a lower
 * nice value) than everything it starts, so that sandboxes that saturate the CPUs do not slow
 * its replies. Threads and processes it starts go back to the process's own priority. */
#ifndef GBX_BASE_SCHED_H
#define GBX_BASE_SCHED_H

/* Lower the calling thread's nice value by delta (needs CAP_SYS_NICE; without it nothing
 * changes). 0, or -errno. */
int gbx_sched_boost_self(int delta);
/* The calling thread (or a child just forked from a boosted thread) back to the priority the
 * process had before any boost. A no-op when nothing was boosted. Async-signal-safe. */
void gbx_sched_unboost_self(void);

#endif
