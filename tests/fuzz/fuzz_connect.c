/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the Connect codec (src/e2b/connect.c): a stream of envelopes as a
 * client could send them, and every protobuf-JSON value form the E2B handlers decode from
 * untrusted bodies. Checks: an envelope never claims more than it was given, and what the
 * base64 decoder accepts re-encodes to the same bytes. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/connect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        uint8_t flags;
        const uint8_t *p;
        size_t len;
        long n = gbx_connect_envelope(data + off, size - off, 1 << 16, &flags, &p, &len);
        if (n <= 0)
            break;
        if ((size_t)n > size - off || len + GBX_CONNECT_HDR != (size_t)n)
            __builtin_trap();
        json_t *msg = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES, NULL);
        if (json_is_object(msg)) {
            const char *k;
            json_t *v;
            json_object_foreach(msg, k, v)
            {
                int64_t i;
                int b, e;
                uint8_t *bytes = NULL;
                size_t blen = 0;
                static const char *const names[] = {"A", NULL, "C"};
                (void)gbx_connect_int(v, INT64_MIN, INT64_MAX, &i);
                (void)gbx_connect_bool(v, &b);
                (void)gbx_connect_enum(v, names, 3, &e);
                if (gbx_connect_bytes(v, &bytes, &blen) == 0 && blen) {
                    /* decoding then encoding gives the canonical form of the same bytes */
                    char *enc = gbx_connect_b64(bytes, blen);
                    json_t *again = json_string(enc);
                    uint8_t *b2 = NULL;
                    size_t l2 = 0;
                    if (gbx_connect_bytes(again, &b2, &l2) < 0 || l2 != blen ||
                        memcmp(b2, bytes, blen) != 0)
                        __builtin_trap();
                    free(b2);
                    json_decref(again);
                    free(enc);
                }
                free(bytes);
            }
        }
        json_decref(msg);
        off += (size_t)n;
    }
    return 0;
}
