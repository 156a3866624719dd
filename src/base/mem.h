/* SPDX-License-Identifier: MIT */
/* Allocation helpers: internal allocation failure aborts with a message. Sizes that come
 * from untrusted input must be bounded by the caller before they get here. */
#ifndef GBX_BASE_MEM_H
#define GBX_BASE_MEM_H

#include <stdarg.h>
#include <stddef.h>

#include "base/util.h"

void *gbx_xmalloc(size_t n);
void *gbx_xcalloc(size_t n, size_t size);
void *gbx_xrealloc(void *p, size_t n);
char *gbx_xstrdup(const char *s);
char *gbx_xstrndup(const char *s, size_t n);
char *gbx_asprintf(const char *fmt, ...) GBX_PRINTF(1, 2);
char *gbx_vasprintf(const char *fmt, va_list ap) GBX_PRINTF(1, 0);

#endif
