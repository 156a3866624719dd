/* SPDX-License-Identifier: MIT */
/* External helpers (criu, tar, debootstrap) with a deadline: every child the daemon waits for
 * runs in its own process group, and is killed with all of it when its time is up or its
 * caller cancels. Nothing here waits forever. Leaf functions: -errno, never print. */
#ifndef GBX_BASE_CHILD_H
#define GBX_BASE_CHILD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/util.h"

struct gbx_child_opts {
    char *out; /* stdout, NUL-terminated (up to outsz - 1 bytes); NULL: /dev/null */
    size_t outsz;
    int keep_fd;              /* passed on as fd 3; -1 for none */
    int64_t timeout_ms;       /* 0: no deadline */
    const atomic_int *cancel; /* non-zero: kill it now; may be NULL */
};

/* Run argv (argv[0] searched in PATH) in a new process group, stdin and stderr on /dev/null,
 * every other descriptor closed, signals at their defaults. Returns its wait status (>= 0),
 * -ETIMEDOUT or -ECANCELED once the whole group was killed and the child reaped, or -errno
 * when it could not be started. */
int gbx_child_run(char *const argv[], const struct gbx_child_opts *o) GBX_WUR;

/* Wait for pid, a child of this process that leads its own process group, under the same
 * deadline and cancel rules. Returns its wait status, or -ETIMEDOUT / -ECANCELED (the group
 * killed, the child reaped), or -errno. */
int gbx_child_wait(pid_t pid, int64_t timeout_ms, const atomic_int *cancel) GBX_WUR;

/* In a child just forked: its own process group, killed when the thread that forked it ends
 * (PR_SET_PDEATHSIG), default signal dispositions, nothing blocked (the daemon's threads
 * block some and ignore SIGPIPE). */
void gbx_child_prepare(void);

/* A status of gbx_child_run or gbx_child_wait in words: "exit 2", "signal 9", "no answer
 * within 120 s (killed)", "cancelled (killed)", "cannot run: ..." (static or into buf). */
const char *gbx_child_status_str(int st, int64_t timeout_ms, char *buf, size_t bufsz);

#endif
