/* SPDX-License-Identifier: MIT */
#include "base/sched.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int base_nice, boosted;

int gbx_sched_boost_self(int delta)
{
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, 0);
    if (cur == -1 && errno != 0)
        return -errno;
    /* per thread on Linux: who is a thread id */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), cur - delta) < 0)
        return -errno;
    base_nice = cur;
    boosted = 1;
    return 0;
}

void gbx_sched_unboost_self(void)
{
    if (boosted)
        (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), base_nice);
}
