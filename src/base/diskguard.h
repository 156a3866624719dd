/* SPDX-License-Identifier: MIT */
/* The state disk's guard: the daemon refuses new work while its state directory's file
 * system is short of space, before it does or answers anything it could not record, and it
 * keeps a reserve file there that it gives up so that deletes (and their audit rows) can
 * complete on a disk that is full anyway.
 *
 * Two mechanisms, because each covers what the other cannot:
 *  - admission (gbx_diskguard_admit): statvfs at the start of every request that makes
 *    something new. Below the reserve (--state-reserve; default the smaller of 64 MiB and 1%
 *    of the file system) it fails with a STORAGE error naming the directory and the free
 *    bytes. Work already admitted (a running process's exit record, a sandbox's egress
 *    rows, a session call's result) goes on writing into the reserve.
 *  - the reserve file (<state>/reserve, preallocated with posix_fallocate; the smaller of
 *    8 MiB and 1/64 of the file system): something else may fill the disk to the last byte
 *    (another process, a sandbox's writable layer on the same file system). A delete then
 *    cannot even write its WAL frames ("database or disk is full"), so space could not be
 *    freed through the API. Before a delete on a short disk the guard removes the file
 *    (gbx_diskguard_before_delete): the delete's row changes and audit row fit in what it
 *    held, and the delete frees more. Admission makes the file again once there is room
 *    for it and the reserve.
 * SQLite's own preallocation (SQLITE_FCNTL_CHUNK_SIZE) would not do: it grows the database
 * file, not the WAL that every write goes to first, and the space it holds is not given back
 * on demand.
 *
 * Loop thread only; no allocation after _init. */
#ifndef GBX_BASE_DISKGUARD_H
#define GBX_BASE_DISKGUARD_H

#include <stdint.h>

#include "base/err.h"

#define GBX_DISKGUARD_RESERVE_MAX (64ull << 20)
#define GBX_DISKGUARD_FILE_MAX (8ull << 20)

struct gbx_diskguard {
    char *dir;          /* the state directory (owned) */
    char *file;         /* <dir>/reserve (owned) */
    uint64_t reserve;   /* free bytes below which new work is refused; 0: no check */
    uint64_t file_size; /* the reserve file's size; 0: none */
    int file_present;
    uint64_t released; /* how many times the file was given up (metrics) */
    uint64_t refused;  /* requests refused (metrics) */
};

/* reserve_set: use reserve as given (0: no check, no reserve file), else the default. Makes
 * the reserve file if there is room for it (a state dir that is already short starts
 * anyway: the guard then refuses new work until space is freed). */
int gbx_diskguard_init(struct gbx_diskguard *g, const char *dir, uint64_t reserve, int reserve_set,
                       struct gbx_err **err) GBX_WUR;
void gbx_diskguard_release(struct gbx_diskguard *g);
/* Free bytes of the state dir's file system for the daemon (statvfs f_bavail), or -1. */
int64_t gbx_diskguard_free(const struct gbx_diskguard *g);
/* 0: new work may start. -1: the disk is short; *err (STORAGE) says so, the directory and
 * its free bytes; *free_bytes (if not NULL) the free bytes. Makes the reserve file again when
 * there is room for it. */
int gbx_diskguard_admit(struct gbx_diskguard *g, int64_t *free_bytes, struct gbx_err **err) GBX_WUR;
/* A delete is about to run: on a short disk, give the reserve file up so it can complete.
 * Returns 1 when the file was removed. */
int gbx_diskguard_before_delete(struct gbx_diskguard *g);

#endif
