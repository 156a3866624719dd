/* SPDX-License-Identifier: MIT */
/* Small, allocation-free helpers shared by every module, including glovebox-init:
 * scope-bound cleanup, ownership transfer, bug checks. */
#ifndef GBX_BASE_UTIL_H
#define GBX_BASE_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define GBX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define GBX_WUR __attribute__((warn_unused_result))
#define GBX_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define GBX_UNUSED __attribute__((unused))

/* Abort in every build: for states that would corrupt memory or security. */
#define GBX_BUG_ON(cond)                                                                           \
    do {                                                                                           \
        if (__builtin_expect(!!(cond), 0)) {                                                       \
            fprintf(stderr, "BUG: %s:%d: %s\n", __FILE__, __LINE__, #cond);                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static inline void gbx_freep(void *p)
{
    free(*(void **)p);
}

static inline void gbx_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

#define gbx_autofree __attribute__((cleanup(gbx_freep)))
#define gbx_autoclose __attribute__((cleanup(gbx_closep)))

static inline void *gbx_steal_ptr_impl(void **p)
{
    void *r = *p;
    *p = NULL;
    return r;
}
/* Take *pp, leaving NULL. Checked when compiled, as bubblewrap's steal_pointer and GLib's
 * g_steal_pointer are: pp must point to a pointer (an int *, a struct, an fd do not build),
 * and the result has *pp's own type rather than void *, so assigning it to a pointer of
 * another type warns. */
#define gbx_steal_ptr(pp)                                                                          \
    ({                                                                                             \
        _Static_assert(__builtin_classify_type(*(pp)) == 5 /* pointer_type_class */,               \
                       "gbx_steal_ptr takes the address of a pointer");                            \
        (__typeof__(*(pp)))gbx_steal_ptr_impl((void **)(pp));                                      \
    })

static inline int gbx_steal_fd(int *fd)
{
    int r = *fd;
    *fd = -1;
    return r;
}

/* Retry a syscall expression while it fails with EINTR. */
#define GBX_RETRY(expr)                                                                            \
    ({                                                                                             \
        long _r;                                                                                   \
        do                                                                                         \
            _r = (long)(expr);                                                                     \
        while (_r == -1 && errno == EINTR);                                                        \
        _r;                                                                                        \
    })

#endif
