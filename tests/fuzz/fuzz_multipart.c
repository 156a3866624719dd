/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the multipart/form-data parser (src/http/multipart.c), which reads
 * upload bodies from any API client. The input is "Content-Type value\n" then the body.
 * Nothing may crash or leak; every part accepted must lie inside the body, and a failure
 * must leave nothing behind. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/multipart.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size < 256 ? size : 256);
    if (nl == NULL)
        return 0;
    size_t clen = (size_t)(nl - data);
    char *ct = malloc(clen + 1);
    if (ct == NULL)
        return 0;
    memcpy(ct, data, clen);
    ct[clen] = '\0';
    char boundary[GBX_MULTIPART_BOUNDARY_MAX + 1];
    const uint8_t *body = nl + 1;
    size_t blen = size - clen - 1;
    /* a copy of exactly the body's size, so reads past it are caught */
    uint8_t *copy = malloc(blen ? blen : 1);
    if (copy == NULL) {
        free(ct);
        return 0;
    }
    memcpy(copy, body, blen);
    if (gbx_multipart_boundary(ct, boundary, sizeof(boundary)) == 0) {
        CHECK(strlen(boundary) >= 1 && strlen(boundary) <= GBX_MULTIPART_BOUNDARY_MAX);
        struct gbx_multipart mp;
        const char *why = NULL;
        int r = gbx_multipart_parse(boundary, copy, blen, 64, &mp, &why);
        if (r == 0) {
            CHECK(mp.n <= 64);
            for (size_t i = 0; i < mp.n; i++) {
                const struct gbx_multipart_part *p = &mp.parts[i];
                CHECK(p->data >= copy && p->data + p->len <= copy + blen);
            }
        } else {
            CHECK(why != NULL && mp.n == 0 && mp.parts == NULL);
        }
        gbx_multipart_release(&mp);
    }
    free(copy);
    free(ct);
    return 0;
}
