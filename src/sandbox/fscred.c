/* SPDX-License-Identifier: MIT */
/* A sandbox's root's file-system credentials on one thread (fscred.h). */
#include "sandbox/fscred.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"

int gbx_fscred_enter(struct gbx_fscred *c, uint32_t uid)
{
    memset(c, 0, sizeof(*c));
    c->ngroups = getgroups((int)GBX_ARRAY_SIZE(c->groups), c->groups);
    if (c->ngroups < 0)
        return -errno; /* nothing changed yet */
    c->fsuid = (uint32_t)syscall(SYS_setfsuid, -1);
    c->fsgid = (uint32_t)syscall(SYS_setfsgid, -1);
    c->euid = geteuid();
    c->egid = getegid();
    c->hdr.version = _LINUX_CAPABILITY_VERSION_3;
    if (syscall(SYS_capget, &c->hdr, c->caps) < 0)
        return -errno;
    c->caps_saved = 1;
    if (syscall(SYS_setgroups, 0, NULL) < 0)
        return -errno;
    /* the effective ids too (the real and saved ones stay, to come back): an euid 0 owns the
     * sandbox's user namespace, and its owner passes every capability check made in it */
    if (syscall(SYS_setresgid, -1, uid, -1) < 0 || syscall(SYS_setresuid, -1, uid, -1) < 0)
        return -errno;
    syscall(SYS_setfsgid, uid);
    syscall(SYS_setfsuid, uid);
    if (syscall(SYS_setfsuid, -1) != (long)uid || syscall(SYS_setfsgid, -1) != (long)uid)
        return -EPERM;
    struct __user_cap_data_struct keep[2] = {c->caps[0], c->caps[1]};
    keep[0].effective &= (1u << CAP_SETUID) | (1u << CAP_SETGID);
    keep[1].effective = 0;
    if (syscall(SYS_capset, &c->hdr, keep) < 0)
        return -errno;
    return 0;
}

void gbx_fscred_leave(struct gbx_fscred *c)
{
    if (c->ngroups < 0)
        return;
    /* euid 0 again first: the permitted set becomes the effective one, then the saved set */
    if (c->caps_saved && (syscall(SYS_setresuid, -1, c->euid, -1) < 0 ||
                          syscall(SYS_setresgid, -1, c->egid, -1) < 0))
        gbx_log_error("fscred: cannot restore a thread's ids: %s", strerror(errno));
    if (c->caps_saved && syscall(SYS_capset, &c->hdr, c->caps) < 0)
        gbx_log_error("fscred: cannot restore a thread's capabilities: %s", strerror(errno));
    syscall(SYS_setfsuid, c->fsuid);
    syscall(SYS_setfsgid, c->fsgid);
    if (syscall(SYS_setgroups, c->ngroups, c->groups) < 0)
        gbx_log_error("fscred: cannot restore a thread's groups: %s", strerror(errno));
}

struct gbx_fsids gbx_fsids_get(void)
{
    return (struct gbx_fsids){(uint32_t)syscall(SYS_setfsuid, -1),
                              (uint32_t)syscall(SYS_setfsgid, -1)};
}

void gbx_fsids_set(struct gbx_fsids v)
{
    syscall(SYS_setfsgid, v.gid);
    syscall(SYS_setfsuid, v.uid);
}

static int in_range(uint32_t host_uid, uint32_t id)
{
    return id >= host_uid && id - host_uid < GBX_FSCRED_RANGE;
}

int gbx_fscred_open_as_owner(uint32_t host_uid, int dirfd, const char *name, int flags,
                             const struct stat *st, struct gbx_fsids *used)
{
    struct gbx_fsids cur = gbx_fsids_get();
    *used = cur;
    int fd = openat(dirfd, name, flags | O_CLOEXEC);
    if (fd >= 0 || errno != EACCES || !in_range(host_uid, st->st_uid) || st->st_uid == cur.uid)
        return fd;
    struct gbx_fsids owner = {
        .uid = st->st_uid,
        .gid = in_range(host_uid, st->st_gid) ? st->st_gid : host_uid,
    };
    gbx_fsids_set(owner);
    fd = openat(dirfd, name, flags | O_CLOEXEC);
    int e = errno;
    gbx_fsids_set(cur);
    if (fd >= 0)
        *used = owner;
    errno = e;
    return fd;
}
