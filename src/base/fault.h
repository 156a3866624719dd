/* SPDX-License-Identifier: MIT */
/* Fault injection at named points, for the fault suite (tests/faults/). Off unless the
 * environment says otherwise:
 *
 *   GLOVEBOX_FAULT="point[:action][@N][,point...]"
 *
 * action: kill (the default: SIGKILL this process, as a crash would), fail (the point's
 * caller fails with EIO as if the step had), hang (sleep 3600 s: a helper that never
 * returns). N: act on the Nth time the point is reached (default 1), once. Every point
 * that acts says so on stderr first ("fault: 'snapshot.frozen': kill"). The list of
 * points is in docs/daemon.md. */
#ifndef GBX_BASE_FAULT_H
#define GBX_BASE_FAULT_H

#include "base/util.h"

/* 0 normally; -EIO when the point's action is fail; does not return for kill. Thread-safe,
 * and costs one load when no fault is set. */
int gbx_fault(const char *point) GBX_WUR;
/* The same where failing is not an option (kill and hang only). */
void gbx_fault_point(const char *point);

#endif
