/* SPDX-License-Identifier: MIT */
/* User namespace: every sandbox's uid 0..65535 maps to its own unprivileged host range
 * (uid_base + slot * 65536). Slots are claimed with one OFD byte lock each in
 * one host-wide file (GBX_UID_LOCK_PATH, not under the runtime dir: daemons with different
 * runtime dirs share the host's uids), so concurrent creators (daemons, `glovebox run`) never
 * share one. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/fileutil.h"
#include "sandbox/ns.h"

static int write_proc(pid_t pid, const char *file, const char *text)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    return gbx_write_file(path, text, strlen(text));
}

int gbx_ns_write_idmap(pid_t pid, uint32_t host_uid, uint32_t count)
{
    char map[64];
    snprintf(map, sizeof(map), "0 %u %u\n", host_uid, count);
    int r = write_proc(pid, "uid_map", map);
    if (r == 0)
        r = write_proc(pid, "gid_map", map);
    return r;
}

static int slot_lock_op(struct gbx_runtime *rt, uint32_t slot, short type)
{
    struct flock fl = {
        .l_type = type, .l_whence = SEEK_SET, .l_start = slot, .l_len = 1, .l_pid = 0};
    if (fcntl(rt->slot_lock_fd, F_OFD_SETLK, &fl) < 0)
        return -errno;
    return 0;
}

/* Creates run on the daemon's loop, restores and hibernations on its worker threads. */
static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;

enum { SLOT_FREE, SLOT_USED, SLOT_RESERVED };

/* Take slot (the byte lock: not held by another process; the state: not held by this one,
 * unless reserved and reserved_ok). 0 or -errno (-EBUSY: this process holds it). */
static int slot_take(struct gbx_runtime *rt, uint32_t slot, int reserved_ok, uint8_t state)
{
    if (slot >= rt->uid_slots || slot >= GBX_MAX_UID_SLOTS)
        return -ERANGE;
    pthread_mutex_lock(&slot_mu);
    uint8_t cur = rt->slot_state[slot];
    int r = cur == SLOT_FREE                      ? slot_lock_op(rt, slot, F_WRLCK)
            : cur == SLOT_RESERVED && reserved_ok ? 0
                                                  : -EBUSY;
    if (r == 0)
        rt->slot_state[slot] = state;
    pthread_mutex_unlock(&slot_mu);
    return r;
}

int gbx_ns_slot_lock(struct gbx_runtime *rt, uint32_t slot)
{
    return slot_take(rt, slot, 1, SLOT_USED);
}

int gbx_ns_slot_reserve(struct gbx_runtime *rt, uint32_t slot)
{
    return slot_take(rt, slot, 0, SLOT_RESERVED);
}

int gbx_ns_slot_acquire(struct gbx_runtime *rt, uint32_t *slot)
{
    uint32_t start = 0;
    if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != sizeof(start))
        start = (uint32_t)getpid();
    for (uint32_t i = 0; i < rt->uid_slots; i++) {
        uint32_t s = (start + i) % rt->uid_slots;
        int r = slot_take(rt, s, 0, SLOT_USED);
        if (r == 0) {
            *slot = s;
            return 0;
        }
        if (r != -EAGAIN && r != -EACCES && r != -EBUSY)
            return r;
    }
    return -EUSERS;
}

void gbx_ns_slot_release(struct gbx_runtime *rt, uint32_t slot)
{
    if (slot >= rt->uid_slots || slot >= GBX_MAX_UID_SLOTS)
        return;
    pthread_mutex_lock(&slot_mu);
    (void)slot_lock_op(rt, slot, F_UNLCK);
    rt->slot_state[slot] = SLOT_FREE;
    pthread_mutex_unlock(&slot_mu);
}

int gbx_ns_userns_open(pid_t pid)
{
    char ns[64];
    snprintf(ns, sizeof(ns), "/proc/%d/ns/user", (int)pid);
    int fd = open(ns, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int gbx_ns_idmapped_tree(const char *path, int userns_fd)
{
    int tfd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (tfd < 0)
        return -errno;
    struct mount_attr at = {
        .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_RDONLY,
        .userns_fd = (unsigned)userns_fd,
    };
    if (mount_setattr(tfd, "", AT_EMPTY_PATH, &at, sizeof(at)) < 0) {
        int e = errno;
        close(tfd);
        return -e;
    }
    return tfd;
}
