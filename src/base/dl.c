/* SPDX-License-Identifier: MIT */
#include "base/dl.h"

#include <dlfcn.h>
#include <stdio.h>

int gbx_dl_load(const char *lib, const struct gbx_dl_sym *syms, size_t n, char *why, size_t whysz)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(why, whysz, "%s", dlerror());
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (*syms[i].slot == NULL) {
            snprintf(why, whysz, "%s lacks '%s'", lib, syms[i].name);
            for (size_t j = 0; j < n; j++)
                *syms[j].slot = NULL;
            return -1;
        }
    }
    return 0;
}
