/* SPDX-License-Identifier: MIT */
/* Path resolution confined to a root directory. Allocation-free; shared by glovebox-init
 * (which resolves every file request this way) and the host side. Leaf functions: -errno. */
#ifndef GBX_BASE_PATH_H
#define GBX_BASE_PATH_H

#include <stddef.h>
#include <sys/types.h>

/* Make path absolute: a relative path is taken relative to home. Trailing slashes are
 * dropped ("a/b/" names what "a/b" names). -ENOENT for "", -ENAMETOOLONG when the result
 * does not fit in outsz or PATH_MAX. ".." is left for the resolver, which keeps it inside
 * the root. */
int gbx_path_abs(const char *home, const char *path, char *out, size_t outsz);

/* Split an absolute path into its parent directory and final component. Returns 1 for the
 * root itself, 0 otherwise, -EINVAL when the final component is "." or ".." (it names no
 * entry of its parent), -ENAMETOOLONG when a part does not fit. */
int gbx_path_split(const char *abs, char *dir, size_t dirsz, char *base, size_t basesz);

/* Open abs beneath rootfd as if rootfd were "/": ".." stops at the root, absolute symlinks
 * are resolved from the root, and /proc magic links are refused (openat2 with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS). The fd is close-on-exec. Retries the kernel's
 * EAGAIN (a concurrent rename raced the resolution). fd or -errno. */
int gbx_path_open_in(int rootfd, const char *abs, int flags, mode_t mode);

#endif
