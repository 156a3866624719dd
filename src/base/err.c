/* SPDX-License-Identifier: MIT */
#include "base/err.h"

#include <stdarg.h>
#include <string.h>

#include "base/mem.h"

enum gbx_err_kind gbx_err_kind_from_errno(int errnum)
{
    switch (errnum) {
    case ENOENT:
    case ESRCH:
        return GBX_ERR_NOT_FOUND;
    case EEXIST:
    case EBUSY:
    case ENOTEMPTY:
        return GBX_ERR_CONFLICT;
    case EINVAL:
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case EXDEV:
    case E2BIG:
        return GBX_ERR_INVALID;
    case EPERM:
    case EACCES:
    case EROFS:
        return GBX_ERR_PERMISSION;
    case EAGAIN:
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case ETIMEDOUT:
        return GBX_ERR_UNAVAILABLE;
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EFBIG:
        return GBX_ERR_LIMIT;
    default:
        return GBX_ERR_INTERNAL;
    }
}

const char *gbx_err_kind_name(enum gbx_err_kind kind)
{
    static const char *const names[] = {
        [GBX_ERR_INTERNAL] = "internal",     [GBX_ERR_NOT_FOUND] = "not_found",
        [GBX_ERR_CONFLICT] = "conflict",     [GBX_ERR_INVALID] = "invalid",
        [GBX_ERR_PERMISSION] = "permission", [GBX_ERR_UNAVAILABLE] = "unavailable",
        [GBX_ERR_LIMIT] = "limit",           [GBX_ERR_STORAGE] = "storage",
    };
    if ((unsigned)kind >= GBX_ARRAY_SIZE(names))
        return "internal";
    return names[kind];
}

GBX_PRINTF(5, 0)
static int err_vset(struct gbx_err **err, int errnum, enum gbx_err_kind kind, int with_strerror,
                    const char *fmt, va_list ap)
{
    if (err == NULL || *err != NULL)
        return -1;
    char *m = gbx_vasprintf(fmt, ap);
    if (errnum && with_strerror) {
        char *full = gbx_asprintf("%s: %s", m, strerror(errnum));
        free(m);
        m = full;
    }
    struct gbx_err *e = gbx_xcalloc(1, sizeof(*e));
    e->errnum = errnum;
    e->kind = kind;
    e->msg = m;
    *err = e;
    return -1;
}

int gbx_err_set(struct gbx_err **err, int errnum, enum gbx_err_kind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(err, errnum, kind, 0, fmt, ap);
    va_end(ap);
    return -1;
}

int gbx_err_sys(struct gbx_err **err, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(err, errnum, gbx_err_kind_from_errno(errnum), 1, fmt, ap);
    va_end(ap);
    return -1;
}

int gbx_err_wrap(struct gbx_err **err, const char *fmt, ...)
{
    if (err == NULL || *err == NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *ctx = gbx_vasprintf(fmt, ap);
    va_end(ap);
    char *full = gbx_asprintf("%s: %s", ctx, (*err)->msg);
    free(ctx);
    free((*err)->msg);
    (*err)->msg = full;
    return -1;
}

void gbx_err_free(struct gbx_err *err)
{
    if (err == NULL)
        return;
    free(err->msg);
    free(err);
}

int gbx_err_state_disk(struct gbx_err **err)
{
    if (err && *err && ((*err)->errnum == ENOSPC || (*err)->errnum == EDQUOT))
        (*err)->kind = GBX_ERR_STORAGE;
    return -1;
}
