/* SPDX-License-Identifier: MIT */
/* Capture: a file or a directory of a sandbox read into one blob as the sandbox's root could
 * read it, hashed (sha256) and bounded as it is written: a file as its bytes, a directory as
 * a tar (pax). Blocking and pure: no loop, no store, no server (the artifacts service,
 * core/artifacts.h, runs it on a worker thread and places the blob), so that it links into
 * the library and its unit test. */
#ifndef GBX_CORE_CAPTURE_H
#define GBX_CORE_CAPTURE_H

#include <stdint.h>

#include "base/err.h"

/* Directories nested deeper than this below the captured one are refused. */
#define GBX_CAPTURE_MAX_DEPTH 128

struct gbx_capture_in {
    int rootfd;         /* the sandbox's root directory (O_PATH will do) */
    const char *path;   /* absolute, resolved beneath rootfd as if it were "/" */
    uint32_t host_uid;  /* the sandbox's root as the host sees it: read as it */
    uint64_t max_bytes; /* the blob's largest size */
    int out;            /* where the blob is written (from its offset), not synced */
};

struct gbx_capture_out {
    char sha256[65];  /* of the bytes written, lowercase hex */
    uint64_t size;    /* bytes written */
    const char *kind; /* "file", or "dir" (a tar); static */
    int64_t skipped;  /* directory entries left out: special files, other file systems */
};

/* Read in->path into in->out on the calling thread, which takes the sandbox's root's
 * credentials meanwhile (sandbox/fscred.h: needs CAP_SETUID and CAP_SETGID) and has its own
 * back after. 0, or -1 with *err (what the blob holds then is garbage):
 *   NOT_FOUND   no such file or directory in the sandbox
 *   PERMISSION  the sandbox's root could not read it, or an entry beneath it
 *   INVALID     neither a regular file nor a directory; a link that may not be followed
 *               (a magic link) or too many of them; nested deeper than GBX_CAPTURE_MAX_DEPTH
 *   LIMIT       larger than in->max_bytes (errnum EFBIG)
 *   STORAGE     the blob's file system is full (errnum ENOSPC)
 *   INTERNAL    anything else
 * Messages name the path as the sandbox sees it. */
int gbx_capture(const struct gbx_capture_in *in, struct gbx_capture_out *out,
                struct gbx_err **err) GBX_WUR;

#endif
