/* SPDX-License-Identifier: MIT */
#include "base/sched.h"
#include "base/fileutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* the kernel's struct sched_attr (sched_setattr(2)); <linux/sched/types.h> and glibc's
 * <sched.h> cannot be included together */
struct sched_attr_abi {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
};

static int base_nice, boosted, sliced;

/* The calling thread's slice at nice value nice (sched_setattr sets both at once). */
static int set_slice(int nice, uint64_t ns)
{
    struct sched_attr_abi a = {.size = sizeof(a),
                               .sched_policy = 0 /* SCHED_OTHER */,
                               .sched_nice = nice,
                               .sched_runtime = ns};
    if (syscall(SYS_sched_setattr, 0, &a, 0) < 0)
        return -errno;
    return 0;
}

int gbx_sched_set_slice(uint64_t ns)
{
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    if (nice == -1 && errno != 0)
        return -errno;
    return set_slice(nice, ns);
}

/* the boosted thread's own CPU group (cgroup v1), and the tasks file of the group it came
 * from: writing "0" there moves the writing thread back */
static int parent_tasks_fd = -1;
static char group_dir[4096];

int gbx_sched_boost_self(int delta)
{
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, 0);
    if (cur == -1 && errno != 0)
        return -errno;
    /* per thread on Linux: who is a thread id */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), cur - delta) < 0)
        return -errno;
    /* and a short time slice: with it, the loop's wakeup preempts a thread that is running
     * a full slice (the kernel's EEVDF, Linux 6.12 on); an older kernel ignores it */
    sliced = set_slice(cur - delta, GBX_SCHED_LOOP_SLICE_NS) == 0;
    base_nice = cur;
    boosted = 1;
    return 0;
}

int gbx_sched_boost_group(const char *cpu_dir, const char *name, int delta)
{
    if (cpu_dir == NULL || delta <= 0)
        return -ENOTSUP;
    /* the weight the kernel gives a thread at nice -delta relative to nice 0 (1.25 a level) */
    unsigned long shares = 1024;
    for (int i = 0; i < delta; i++)
        shares = shares * 5 / 4;
    char path[4096 + 64], num[32];
    if ((size_t)snprintf(group_dir, sizeof(group_dir), "%s/%s", cpu_dir, name) >= sizeof(group_dir))
        return -ENAMETOOLONG;
    if (mkdir(group_dir, 0755) < 0 && errno != EEXIST)
        return -errno;
    snprintf(path, sizeof(path), "%s/cpu.shares", group_dir);
    snprintf(num, sizeof(num), "%lu", shares);
    int r = gbx_write_file(path, num, strlen(num));
    snprintf(path, sizeof(path), "%s/tasks", cpu_dir);
    int pfd = r == 0 ? open(path, O_WRONLY | O_CLOEXEC) : -1;
    if (r == 0 && pfd < 0)
        r = -errno;
    if (r == 0) {
        snprintf(path, sizeof(path), "%s/tasks", group_dir);
        r = gbx_write_file(path, "0", 1); /* 0: the writing thread */
    }
    if (r < 0) {
        if (pfd >= 0)
            close(pfd);
        (void)rmdir(group_dir);
        group_dir[0] = '\0';
        return r;
    }
    parent_tasks_fd = pfd;
    return 0;
}

int gbx_sched_boost_thread(int tid)
{
    if (!boosted || tid <= 0)
        return -EINVAL;
    errno = 0;
    int mine = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    if (mine == -1 && errno != 0)
        return -errno;
    if (setpriority(PRIO_PROCESS, (id_t)tid, mine) < 0)
        return -errno;
    if (group_dir[0] == '\0')
        return 0;
    char path[4096 + 16], num[16];
    snprintf(path, sizeof(path), "%s/tasks", group_dir);
    snprintf(num, sizeof(num), "%d", tid);
    return gbx_write_file(path, num, strlen(num));
}

void gbx_sched_unboost_nice(void)
{
    if (!boosted)
        return;
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), base_nice);
    if (sliced) /* threads and children inherit the slice: theirs is the default again */
        (void)set_slice(base_nice, 0);
}

void gbx_sched_unboost_self(void)
{
    gbx_sched_unboost_nice();
    if (parent_tasks_fd >= 0)
        (void)!write(parent_tasks_fd, "0", 1);
}

void gbx_sched_release(void)
{
    if (parent_tasks_fd < 0)
        return;
    (void)!write(parent_tasks_fd, "0", 1);
    close(parent_tasks_fd);
    parent_tasks_fd = -1;
    (void)rmdir(group_dir); /* EBUSY while a thread is left in it: kept for the next start */
    group_dir[0] = '\0';
}
