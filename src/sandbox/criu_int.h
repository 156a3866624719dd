/* SPDX-License-Identifier: MIT */
/* What the two halves of the CRIU code share (criu_probe.c: finding CRIU, running it, probing
 * what it can do on this kernel; criu.c: checkpoint and restore). Not for other rooms. */
#ifndef GBX_SANDBOX_CRIU_INT_H
#define GBX_SANDBOX_CRIU_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "sandbox/backend.h"

/* at most this many bind mounts from outside a sandbox become criu's --external mnt[..] */
#define MAX_EXTERNALS 64

/* An argv of owned copies. */
struct gbx_criu_args {
    char *v[40 + 2 * MAX_EXTERNALS];
    size_t n;
};

void gbx_criu_arg(struct gbx_criu_args *a, const char *s);
void gbx_criu_args_free(struct gbx_criu_args *a);
/* the deadlines of criu itself and of the helpers around it (tar, ...) */
int64_t gbx_criu_timeout(const struct gbx_runtime *rt);
int64_t gbx_criu_helper_timeout(const struct gbx_runtime *rt);
/* Run argv under a deadline (gbx_child_run): stdout into *out when out is not NULL, keep_fd
 * (or -1) as fd 3, stopped early when cancel (may be NULL) is set. The wait status, or
 * -ETIMEDOUT / -ECANCELED / -errno. */
int gbx_criu_run(char *const argv[], char *out, size_t outsz, int keep_fd, int64_t timeout_ms,
                 const atomic_int *cancel);
/* The Error lines of a CRIU log (but the harmless ones), for an error message (malloc'd). */
char *gbx_criu_log_errors(const char *log);
/* -1 with *err saying how `what` (a criu run that ended with wait status or -errno st) failed,
 * with the errors of its log. */
int gbx_criu_failed(struct gbx_err **err, const char *what, int st, int64_t timeout_ms,
                    const char *log);

#endif
