/* SPDX-License-Identifier: MIT */
#include "base/path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int gbx_path_abs(const char *home, const char *path, char *out, size_t outsz)
{
    if (path[0] == '\0')
        return -ENOENT;
    int n;
    if (path[0] == '/')
        n = snprintf(out, outsz, "%s", path);
    else
        n = snprintf(out, outsz, "%s/%s", home, path);
    if (n < 0 || (size_t)n >= outsz || n >= PATH_MAX)
        return -ENAMETOOLONG;
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    return 0;
}

int gbx_path_split(const char *abs, char *dir, size_t dirsz, char *base, size_t basesz)
{
    const char *slash = strrchr(abs, '/');
    if (slash == NULL || (slash == abs && slash[1] == '\0'))
        return 1;
    int n = snprintf(base, basesz, "%s", slash + 1);
    if (n < 0 || (size_t)n >= basesz)
        return -ENAMETOOLONG;
    if (slash == abs)
        n = snprintf(dir, dirsz, "/");
    else
        n = snprintf(dir, dirsz, "%.*s", (int)(slash - abs), abs);
    if (n < 0 || (size_t)n >= dirsz)
        return -ENAMETOOLONG;
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return -EINVAL;
    return 0;
}

int gbx_path_open_in(int rootfd, const char *abs, int flags, mode_t mode)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC),
        .mode = (flags & O_CREAT) ? mode : 0,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    for (int tries = 0; tries < 32; tries++) {
        long fd = syscall(SYS_openat2, rootfd, abs, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
    }
    return -EAGAIN;
}
