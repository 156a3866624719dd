/* SPDX-License-Identifier: MIT */
/* Small file helpers. Leaf functions: return -errno, never print. */
#ifndef GBX_BASE_FILEUTIL_H
#define GBX_BASE_FILEUTIL_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "base/util.h"

/* Read a whole file (at most max bytes, else -EFBIG) into a NUL-terminated malloc'd buffer. */
int gbx_read_file(const char *path, size_t max, char **out, size_t *len) GBX_WUR;
/* Write data to an existing file (O_WRONLY|O_TRUNC; cgroup and proc files). */
int gbx_write_file(const char *path, const void *data, size_t len) GBX_WUR;
/* Create or replace a file atomically (temp + rename) with mode. */
int gbx_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode) GBX_WUR;
/* mkdir -p with mode for newly created directories. */
int gbx_mkdir_p(const char *path, mode_t mode) GBX_WUR;
/* Write all of len bytes to fd, retrying on EINTR and short writes. */
int gbx_write_all(int fd, const void *data, size_t len) GBX_WUR;
/* Remove a tree without following symlinks (like rm -rf); missing is fine. */
int gbx_rm_rf(const char *path) GBX_WUR;
/* The same for entry name of the directory dir_fd (AT_FDCWD: a path). */
int gbx_rm_rf_at(int dir_fd, const char *name) GBX_WUR;
/* The same, staying on filesystem dev: a mount point below is left alone (-EXDEV). */
int gbx_rm_rf_xdev_at(int dir_fd, const char *name, dev_t dev) GBX_WUR;
/* Remove everything in the directory dir_fd (the directory itself stays). */
int gbx_rm_children(int dir_fd) GBX_WUR;

/* fsync the directory that holds path (a new or renamed entry survives a crash). -errno. */
int gbx_fsync_dir_of(const char *path) GBX_WUR;
/* Like gbx_write_file_atomic, durable: path.tmp created exclusively with mode (whatever the
 * umask), fsync'd, renamed over path, and the directory fsync'd. -errno. */
int gbx_write_file_durable(const char *path, const void *data, size_t len, mode_t mode) GBX_WUR;

/* Take the exclusive lock of a pid file (created 0644 if missing) without waiting, and
 * write this process's pid into it. Returns the locked fd (close it to let go), or -EAGAIN
 * with *holder the pid written by the process that has it (0 if unknown), or -errno. */
int gbx_pidfile_lock(const char *path, pid_t *holder) GBX_WUR;

/* The first directory on the way to path (path included) that others (a sandbox's
 * unprivileged uids) cannot search, into out; 0 when there is none, 1 when out names one,
 * -errno when a directory cannot be examined. */
int gbx_path_unsearchable(const char *path, char *out, size_t outsz) GBX_WUR;

/* Send iov with nfd descriptors (SCM_RIGHTS; at most GBX_SEND_FDS_MAX, 0 for none) on sock,
 * to addr (NULL on a connected socket), MSG_NOSIGNAL, retried on EINTR. No allocation:
 * usable between fork and exec. 0, or -errno. */
#define GBX_SEND_FDS_MAX 64
int gbx_send_fds(int sock, const struct sockaddr *addr, socklen_t addrlen, const struct iovec *iov,
                 size_t niov, const int *fds, size_t nfd) GBX_WUR;

#endif
