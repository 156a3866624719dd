/* SPDX-License-Identifier: MIT */
/* Snapshot layers: a sandbox's overlay upper (what it changed), copied out of its writable
 * layer into a tree that can be stacked read-only under another sandbox's root.
 *
 * A layer on disk is stored as the sandbox sees it: owner 0 is the sandbox's root (like a
 * template's rootfs), so any sandbox can mount it through an idmapped mount whatever its
 * own uid range. The copy keeps what overlayfs needs to read it back as a lower layer:
 * whiteouts (0:0 character devices), the opaque mark and other user.* extended attributes,
 * hard links, symbolic links (never followed), modes and times. Cost: proportional to what
 * the sandbox changed, never to its root filesystem. */
#ifndef GBX_SANDBOX_LAYER_H
#define GBX_SANDBOX_LAYER_H

#include <stdint.h>

#include "base/err.h"

struct gbx_layer_stats {
    uint64_t bytes; /* regular file data copied */
    uint64_t files; /* entries of any kind */
};

/* Copy the tree below the directory src_dirfd into dst (a new directory; its parent must
 * exist). Owners uid_base .. uid_base + 65535 become 0 .. 65535; any other owner becomes
 * 65534. Stops with an error past max_bytes of file data (0: no limit). dst is removed again
 * on failure. Adds to *st when st is not NULL. 0 or -1 with *err. */
int gbx_layer_copy(int src_dirfd, const char *dst, uint32_t uid_base, uint64_t max_bytes,
                   struct gbx_layer_stats *st, struct gbx_err **err) GBX_WUR;

/* Make a finished copy durable: syncfs on the filesystem that holds path. -errno or 0. */
int gbx_layer_sync(const char *path) GBX_WUR;

#endif
