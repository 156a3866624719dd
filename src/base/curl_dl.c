/* SPDX-License-Identifier: MIT */
#include "base/curl_dl.h"

#include <stdio.h>

#include "base/dl.h"
#include "base/util.h"

static struct gbx_curl fns;
static int loaded;

const struct gbx_curl *gbx_curl_load(char *why, size_t whysz)
{
    if (loaded)
        return &fns;
    CURLcode (*global_init)(long) = NULL;
    const struct gbx_dl_sym syms[] = {
        {(void **)&global_init, "curl_global_init"},
        {(void **)&fns.easy_init, "curl_easy_init"},
        {(void **)&fns.easy_setopt, "curl_easy_setopt"},
        {(void **)&fns.easy_perform, "curl_easy_perform"},
        {(void **)&fns.easy_getinfo, "curl_easy_getinfo"},
        {(void **)&fns.easy_cleanup, "curl_easy_cleanup"},
        {(void **)&fns.easy_strerror, "curl_easy_strerror"},
        {(void **)&fns.slist_append, "curl_slist_append"},
        {(void **)&fns.slist_free_all, "curl_slist_free_all"},
    };
    if (gbx_dl_load("libcurl.so.4", syms, GBX_ARRAY_SIZE(syms), why, whysz) < 0)
        return NULL;
    if (global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(why, whysz, "curl_global_init failed");
        return NULL;
    }
    loaded = 1;
    return &fns;
}
