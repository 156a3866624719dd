/* SPDX-License-Identifier: MIT */
/* Acting as a sandbox's root on the host's side of its files: a worker thread of the daemon
 * that reads a sandbox's tree (artifact capture) takes the sandbox's root's file-system
 * credentials and drops every capability but the two that change them back, so that the
 * kernel's own permission checks say what the sandbox could read, not what the host's root
 * could. setfsuid, setfsgid, capset and the raw setgroups act on the calling thread only
 * (glibc's setgroups would change every thread), so the other threads keep the daemon's. */
#ifndef GBX_SANDBOX_FSCRED_H
#define GBX_SANDBOX_FSCRED_H

#include <linux/capability.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The uids of one sandbox: host_uid .. host_uid + GBX_FSCRED_RANGE - 1. */
#define GBX_FSCRED_RANGE 65536u

/* What gbx_fscred_enter changed, to put back. */
struct gbx_fscred {
    gid_t groups[64];
    int ngroups;
    uint32_t fsuid, fsgid, euid, egid;
    struct __user_cap_header_struct hdr;
    struct __user_cap_data_struct caps[2];
    int caps_saved;
};

/* This thread becomes uid (the sandbox's root as the host sees it) for file access: no
 * supplementary groups, effective and file-system uid and gid uid, and of the effective
 * capabilities only CAP_SETUID and CAP_SETGID (the permitted set stays, to come back).
 * 0 or -errno; call gbx_fscred_leave in either case (it undoes what was done). */
int gbx_fscred_enter(struct gbx_fscred *c, uint32_t uid);
/* Back to what the thread was before gbx_fscred_enter. */
void gbx_fscred_leave(struct gbx_fscred *c);

/* This thread's file-system ids. */
struct gbx_fsids {
    uint32_t uid, gid;
};
struct gbx_fsids gbx_fsids_get(void);
void gbx_fsids_set(struct gbx_fsids v);

/* openat (O_CLOEXEC added) with this thread's ids; when that is refused (EACCES), again with
 * the entry's owner's ids if a uid of the sandbox owns it (st: the entry's lstat): the
 * sandbox's root could read it with its capabilities inside its namespace. Entries of uids
 * outside the sandbox's range stay refused. *used gets the ids that opened it (a directory
 * opened as its owner is walked as its owner). fd, or -1 with errno. */
int gbx_fscred_open_as_owner(uint32_t host_uid, int dirfd, const char *name, int flags,
                             const struct stat *st, struct gbx_fsids *used);

#endif
