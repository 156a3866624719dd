/* SPDX-License-Identifier: MIT */
/* Libraries loaded at run time (the CLI's libcurl and libcrypto: `glovebox` itself links
 * neither, so commands that do not need them start without them). */
#ifndef GBX_BASE_DL_H
#define GBX_BASE_DL_H

#include <stddef.h>

struct gbx_dl_sym {
    void **slot;      /* where the symbol's address goes */
    const char *name; /* its name */
};

/* dlopen(lib) and fill every slot; all or nothing (on failure every slot is NULL again).
 * 0, or -1 with why (terminated) saying what was missing. */
int gbx_dl_load(const char *lib, const struct gbx_dl_sym *syms, size_t n, char *why, size_t whysz);

#endif
