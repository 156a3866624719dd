/* SPDX-License-Identifier: MIT */
/* Errors that cross a module: an errno, a kind and a message chain built as the error
 * travels up ("create sandbox 'x': mount rootfs: overlay: Invalid argument"). */
#ifndef GBX_BASE_ERR_H
#define GBX_BASE_ERR_H

#include "base/util.h"

enum gbx_err_kind {
    GBX_ERR_INTERNAL = 0,
    GBX_ERR_NOT_FOUND,
    GBX_ERR_CONFLICT,
    GBX_ERR_INVALID,
    GBX_ERR_PERMISSION,
    GBX_ERR_UNAVAILABLE,
    GBX_ERR_LIMIT,
    GBX_ERR_STORAGE, /* the daemon's own disk (its state dir) is full: nothing was done */
};

struct gbx_err {
    int errnum; /* positive errno, or 0 */
    enum gbx_err_kind kind;
    char *msg; /* owned; full chain, outermost context first */
};

/* Map an errno to the kind an API layer would report. */
enum gbx_err_kind gbx_err_kind_from_errno(int errnum);
/* An error met writing the daemon's own files (its state dir): ENOSPC and EDQUOT there are
 * STORAGE, not a sandbox's LIMIT. Returns -1 with *err updated (NULL-safe). */
int gbx_err_state_disk(struct gbx_err **err);
const char *gbx_err_kind_name(enum gbx_err_kind kind);

/* Set *err (if err is non-NULL and *err is NULL) and return -1. errnum is a positive
 * errno or 0, recorded for callers; the message is used as given. */
int gbx_err_set(struct gbx_err **err, int errnum, enum gbx_err_kind kind, const char *fmt, ...)
    GBX_PRINTF(4, 5);
/* Like gbx_err_set, kind derived from errnum, and errnum's strerror text appended to the
 * message when errnum is non-zero: "cannot open '/x': No such file or directory". */
int gbx_err_sys(struct gbx_err **err, int errnum, const char *fmt, ...) GBX_PRINTF(3, 4);
/* Prefix context to an existing error: "context: old message". Returns -1. */
int gbx_err_wrap(struct gbx_err **err, const char *fmt, ...) GBX_PRINTF(2, 3);
void gbx_err_free(struct gbx_err *err);
static inline void gbx_err_freep(struct gbx_err **e)
{
    gbx_err_free(*e);
}
#define gbx_autoerr __attribute__((cleanup(gbx_err_freep)))

#endif
