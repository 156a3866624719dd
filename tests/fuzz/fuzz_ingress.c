/* SPDX-License-Identifier: MIT */
/* libFuzzer target for ingress's routes (src/ingress/route.c): a client's Host header and
 * request target decide which sandbox and port a connection reaches, and the path form's
 * first head is rewritten. The first byte picks the part; the rest is the input. Nothing may
 * crash; a route must have a port in 1..65535 and a non-empty id, or an error; a rewritten
 * head must still end with its blank line and never be longer than the original plus the
 * bytes the rewrite adds; a DevTools answer re-addressed (cdp_json.c) must be a whole
 * response whose Content-Length is its body. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ingress/cdp_json.h"
#include "ingress/route.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void route_ok(const struct gbx_ingress_route *r)
{
    if (r->error)
        return;
    CHECK(r->port >= 1 && r->port <= 65535);
    CHECK(r->id[0] != '\0' && strlen(r->id) < sizeof(r->id));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 20000)
        return 0;
    char *s = malloc(size);
    if (s == NULL)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    struct gbx_ingress_route r;
    switch (data[0] % 4) {
    case 0:
        if (gbx_ingress_route_host("sbx.test", s, &r))
            route_ok(&r);
        break;
    case 1:
        if (gbx_ingress_route_path(s, &r)) {
            route_ok(&r);
            if (!r.error)
                CHECK(r.prefix_len <= strlen(s));
        }
        break;
    case 3: {
        char *out = NULL;
        size_t n = 0;
        int r3 = gbx_ingress_cdp_answer((const char *)data + 1, size - 1, data[0] & 4, 9222,
                                        "9222-sb-1.sbx.test", data[0] & 8 ? "/v1/x/ports/9222" : "",
                                        &out, &n);
        CHECK(r3 >= -1 && r3 <= 1);
        if (r3 == 0) {
            const char *b = strstr(out, "\r\n\r\n");
            const char *cl = strstr(out, "Content-Length: ");
            CHECK(b && cl && cl < b && out[n] == '\0'); /* the head has no NUL; a body may */
            CHECK(strtoul(cl + 16, NULL, 10) == n - (size_t)(b + 4 - out));
            free(out);
        } else {
            CHECK(out == NULL);
        }
        break;
    }
    default: {
        char *out = NULL;
        size_t n = 0;
        size_t prefix = data[0] % 64;
        if (gbx_ingress_rewrite_head((const char *)data + 1, size - 1, prefix, data[0] & 4,
                                     data[0] & 8 ? "127.0.0.1:9222" : NULL, &out, &n) == 0) {
            CHECK(n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0);
            CHECK(n <= size - 1 + 32);
            free(out);
        }
    }
    }
    free(s);
    return 0;
}
