/* SPDX-License-Identifier: MIT */
/* libcurl, loaded at run time (dlopen) by the commands that speak HTTP (the CLI to the
 * daemon, the worker to the control plane): `glovebox` itself links no libcurl. */
#ifndef GBX_BASE_CURL_DL_H
#define GBX_BASE_CURL_DL_H

#include <curl/curl.h>
#include <stddef.h>

struct gbx_curl {
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
};

/* The functions (loaded and globally initialised once; call it from one thread first), or
 * NULL with why (always NUL-terminated) saying what failed. */
const struct gbx_curl *gbx_curl_load(char *why, size_t whysz);

#endif
