/* SPDX-License-Identifier: MIT */
#include "base/mem.h"

#include <stdio.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", n);
    abort();
}

void *gbx_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *gbx_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size);
    return p;
}

void *gbx_xrealloc(void *p, size_t n)
{
    void *r = realloc(p, n ? n : 1);
    if (r == NULL)
        oom(n);
    return r;
}

char *gbx_xstrdup(const char *s)
{
    char *r = strdup(s);
    if (r == NULL)
        oom(strlen(s));
    return r;
}

char *gbx_xstrndup(const char *s, size_t n)
{
    char *r = strndup(s, n);
    if (r == NULL)
        oom(n);
    return r;
}

char *gbx_vasprintf(const char *fmt, va_list ap)
{
    char *r = NULL;
    if (vasprintf(&r, fmt, ap) < 0)
        oom(strlen(fmt));
    return r;
}

char *gbx_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *r = gbx_vasprintf(fmt, ap);
    va_end(ap);
    return r;
}
