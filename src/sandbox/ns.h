/* SPDX-License-Identifier: MIT */
/* Internals of the namespace backend, shared by its files (spawn.c mounts.c userns.c
 * netns.c caps.c ns.c). Nothing here is used outside src/sandbox. */
#ifndef GBX_SANDBOX_NS_H
#define GBX_SANDBOX_NS_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/backend.h"

/* Everything the sandbox child needs, computed by the parent before clone so the child
 * does no allocation and no formatting of its own. */
struct gbx_child_plan {
    char staging[PATH_MAX]; /* private tmpfs: the writable layer */
    char upper[PATH_MAX + 16], work[PATH_MAX + 16], lower[PATH_MAX + 16], root[PATH_MAX + 16];
    char overlay_opts[(4 + GBX_MAX_LAYERS) * PATH_MAX + 64];
    char layer_opts[64]; /* tmpfs options of the writable layer */
    char tmp_opts[64];   /* tmpfs options of /tmp and /dev/shm */
    char hostname[GBX_ID_MAX + 1];
    char trust_bundle[PATH_MAX]; /* bound over the CA bundle, or "" */
    int usr_host;
    int sync_fd; /* SOCK_SEQPACKET to the parent */
    int conn_fd; /* becomes fd 4 of init */
    int ctl_fd;  /* becomes fd 3 of init, or -1 */
    int init_fd; /* sealed memfd */
    const struct gbx_seccomp_prog *seccomp;
};

/* The message a failing child sends before it exits. */
struct gbx_child_error {
    int errnum;
    char msg[240];
};

/* mounts.c: build the root filesystem in the child's mount namespace and pivot into it. */
/* layer_fds: idmapped snapshot layers, top first; *layer_fd: an O_PATH handle of the
 * writable layer's tmpfs (close-on-exec). */
int gbx_ns_mounts_setup(const struct gbx_child_plan *p, int tmpl_fd, int usr_fd,
                        const int *layer_fds, int nlayer, int *layer_fd, char *what, size_t whatsz);

/* ns.c: <runtime>/sandboxes/<id>/ctl.sock, listening (sb->dir and sb->ctl_path set). restoring:
 * the directory may exist and a stale socket is replaced; the listener is non-blocking. */
int gbx_ns_ctl_listen(struct gbx_sandbox *sb, int restoring, struct gbx_err **err);

/* userns.c */
int gbx_ns_write_idmap(pid_t pid, uint32_t host_uid, uint32_t count);
int gbx_ns_slot_acquire(struct gbx_runtime *rt, uint32_t *slot);
/* Take a given slot (adoption, restore): a slot reserved by this process is taken over. */
int gbx_ns_slot_lock(struct gbx_runtime *rt, uint32_t slot);
/* Reserve a slot for a later restore (a hibernated sandbox): no create takes it. */
int gbx_ns_slot_reserve(struct gbx_runtime *rt, uint32_t slot);
void gbx_ns_slot_release(struct gbx_runtime *rt, uint32_t slot);
/* pid's user namespace, as an fd (or -errno). */
int gbx_ns_userns_open(pid_t pid);
/* A detached, read-only clone of path, idmapped to that user namespace. fd or -errno. */
int gbx_ns_idmapped_tree(const char *path, int userns_fd);

/* netns.c: bring up loopback in the current network namespace. */
int gbx_ns_loopback_up(void);
/* Delete the nftables tables of pid's network namespace whose names start with prefix
 * (e.g. "CRIU-": the network lock of a dump that did not finish). 0 or -errno. */
int gbx_ns_netns_drop_tables(pid_t pid, const char *prefix);
/* A socket(domain, type, protocol) made inside pid's network namespace (a socket keeps the
 * namespace it was made in: only its creation happens inside; the calling thread is back in
 * its own namespace before this returns, or the process aborts). The fd, or -errno. */
int gbx_ns_socket_in(pid_t pid, int domain, int type, int protocol);

/* caps.c: reduce the bounding set to gbx_caps_keep, clear ambient and inheritable. */
int gbx_ns_caps_drop(void);

/* spawn.c: clone3 a child into every namespace that runs the plan (its sync, conn, ctl and
 * init fds) until it execs glovebox-init; close_fd is closed in the child. extra_flags:
 * CLONE_PARENT from the spawner. 0 with *pid and *pidfd, or -errno. */
int gbx_ns_clone_child(const struct gbx_child_plan *p, int v2fd, uint64_t extra_flags, int close_fd,
                       pid_t *pid, int *pidfd);
int gbx_ns_spawn(struct gbx_runtime *rt, struct gbx_sandbox *sb, const struct gbx_child_plan *p,
                 const char *tmpl_rootfs, const char *const *layers, size_t nlayers,
                 const struct gbx_cg_limits *limits, struct gbx_err **err);

/* spawner.c: the process that clones sandboxes for the daemon (see there). start: forked
 * now, from the calling thread (the daemon's main thread: it outlives every worker);
 * -errno when there is none, and creates clone from their own thread. */
int gbx_spawner_start(struct gbx_runtime *rt);
void gbx_spawner_stop(struct gbx_runtime *rt);
/* Clone p's child through the spawner, as a child of this process. The reply is read from
 * sync_parent, the other end of p->sync_fd. -ENOSYS: no spawner now, clone yourself. */
int gbx_spawner_clone(struct gbx_runtime *rt, const struct gbx_child_plan *p, int v2fd,
                      int sync_parent, pid_t *pid, int *pidfd);

#endif
