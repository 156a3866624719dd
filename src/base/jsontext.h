/* SPDX-License-Identifier: MIT */
/* JSON strings of text that may not be UTF-8 (file names, link targets, a helper's output
 * lines). Pure. It lives in base, not http, because the services in core/ make such values
 * too (a template build's progress lines) and core/ may not include from http/
 * (tools/layers.py). */
#ifndef GBX_BASE_JSONTEXT_H
#define GBX_BASE_JSONTEXT_H

#include <jansson.h>

/* A JSON string of s, which may come from a sandbox (file names, link targets, users): bytes
 * that are not UTF-8 become U+FFFD, so the value always exists. */
json_t *gbx_json_text(const char *s);

#endif
