/* SPDX-License-Identifier: MIT */
#include "base/diskguard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"

int64_t gbx_diskguard_free(const struct gbx_diskguard *g)
{
    struct statvfs v;
    if (statvfs(g->dir, &v) < 0)
        return -1;
    return (int64_t)((uint64_t)v.f_bavail * v.f_frsize);
}

/* Make the reserve file (preallocated: its blocks are the file system's, not a sparse
 * promise). 0, or -errno (nothing left behind). */
static int file_make(struct gbx_diskguard *g)
{
    gbx_autofree char *tmp = gbx_asprintf("%s.tmp", g->file);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int r = posix_fallocate(fd, 0, (off_t)g->file_size);
    if (r == 0 && fsync(fd) < 0)
        r = errno;
    close(fd);
    if (r == 0 && rename(tmp, g->file) < 0)
        r = errno;
    if (r != 0) {
        unlink(tmp);
        return -r;
    }
    g->file_present = 1;
    return 0;
}

int gbx_diskguard_init(struct gbx_diskguard *g, const char *dir, uint64_t reserve, int reserve_set,
                       struct gbx_err **err)
{
    memset(g, 0, sizeof(*g));
    g->dir = gbx_xstrdup(dir);
    g->file = gbx_asprintf("%s/reserve", dir);
    struct statvfs v;
    if (statvfs(dir, &v) < 0)
        return gbx_err_sys(err, errno, "state dir '%s'", dir);
    uint64_t total = (uint64_t)v.f_blocks * v.f_frsize;
    if (reserve_set) {
        g->reserve = reserve;
    } else {
        g->reserve = total / 100;
        if (g->reserve > GBX_DISKGUARD_RESERVE_MAX)
            g->reserve = GBX_DISKGUARD_RESERVE_MAX;
    }
    if (g->reserve == 0) { /* no check asked for: no reserve file either */
        unlink(g->file);
        return 0;
    }
    g->file_size = total / 64;
    if (g->file_size > GBX_DISKGUARD_FILE_MAX)
        g->file_size = GBX_DISKGUARD_FILE_MAX;
    g->file_size &= ~4095ull;
    struct stat st;
    if (stat(g->file, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= g->file_size &&
        (uint64_t)st.st_blocks * 512 >= g->file_size) {
        g->file_present = 1; /* an earlier run's */
        return 0;
    }
    unlink(g->file);
    int64_t fr = gbx_diskguard_free(g);
    if (g->file_size && fr >= 0 && (uint64_t)fr >= g->file_size) {
        int r = file_make(g);
        if (r < 0)
            gbx_log_warn("cannot make the reserve file '%s': %s", g->file, strerror(-r));
    }
    if (!g->file_present && g->file_size)
        gbx_log_warn("state dir '%s' is short of space (%lld bytes free): no reserve file yet, "
                     "new work is refused until space is freed",
                     dir, (long long)fr);
    return 0;
}

void gbx_diskguard_release(struct gbx_diskguard *g)
{
    free(g->dir);
    free(g->file);
    memset(g, 0, sizeof(*g));
}

int gbx_diskguard_admit(struct gbx_diskguard *g, int64_t *free_bytes, struct gbx_err **err)
{
    if (g->reserve == 0)
        return 0;
    int64_t fr = gbx_diskguard_free(g);
    if (free_bytes)
        *free_bytes = fr;
    if (fr < 0)
        return 0; /* cannot tell: the writes themselves will say */
    uint64_t need = g->reserve + (g->file_present ? 0 : g->file_size);
    if ((uint64_t)fr >= need && !g->file_present && g->file_size) {
        int r = file_make(g);
        if (r == 0) {
            gbx_log_info("state dir '%s' has room again: the reserve file is back", g->dir);
            fr -= (int64_t)g->file_size;
            if (free_bytes)
                *free_bytes = fr;
        }
    }
    if ((uint64_t)fr >= need)
        return 0;
    g->refused++;
    return gbx_err_set(err, ENOSPC, GBX_ERR_STORAGE,
                       "the state directory's disk is full: '%s' has %lld bytes free, less than "
                       "the %llu it keeps in reserve (--state-reserve)%s: new work is refused "
                       "until space is freed (delete sandboxes, snapshots, artifacts or sessions)",
                       g->dir, (long long)fr, (unsigned long long)g->reserve,
                       g->file_present ? "" : " and its reserve file");
}

int gbx_diskguard_before_delete(struct gbx_diskguard *g)
{
    if (!g->file_present)
        return 0;
    int64_t fr = gbx_diskguard_free(g);
    if (fr >= 0 && (uint64_t)fr >= g->reserve)
        return 0;
    if (unlink(g->file) < 0 && errno != ENOENT) {
        gbx_log_warn("cannot remove the reserve file '%s': %s", g->file, strerror(errno));
        return 0;
    }
    g->file_present = 0;
    g->released++;
    gbx_log_warn("state dir '%s' is short of space (%lld bytes free): the reserve file is given "
                 "up so that deletes can complete",
                 g->dir, (long long)fr);
    return 1;
}
