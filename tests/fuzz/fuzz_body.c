/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the API's request-body and header gate (src/http/http.c), which every
 * JSON body and Range header from any API client goes through before a handler sees it:
 *   - gbx_http_body_object, on a real evhttp request (no connection: a reply frees it) whose
 *     body is the input: it gives an object or replies; an object it gives nests no deeper
 *     than its limit (counted here on the parsed value, apart from the byte-level counter);
 *     and a body over the size limit is refused whatever it holds;
 *   - gbx_http_parse_range, on the input as a header against a size taken from its first
 *     bytes: a range it serves lies inside the file and is not empty;
 *   - gbx_json_text, on the input as a C string: always a string, equal to the input when
 *     the input is valid UTF-8, and never longer than three bytes per input byte. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/aconn.h"
#include "http/http.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BODY_LIMIT 4096
#define DEPTH_LIMIT 32 /* http.c's GBX_JSON_MAX_DEPTH */

/* http.c pauses an agent connection when a streamed reply backs up; nothing streams here */
void gbx_aconn_pause(struct gbx_aconn *c, int paused)
{
    (void)c;
    (void)paused;
    __builtin_trap();
}

static int depth_of(json_t *v)
{
    int max = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e)
        {
            int d = depth_of(e);
            max = d > max ? d : max;
        }
        return max + 1;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            int d = depth_of(e);
            max = d > max ? d : max;
        }
        return max + 1;
    }
    return 0;
}

static void fuzz_body_object(const uint8_t *data, size_t size)
{
    struct evhttp_request *req = evhttp_request_new(NULL, NULL);
    CHECK(req != NULL);
    CHECK(evbuffer_add(evhttp_request_get_input_buffer(req), data, size) == 0);
    json_t *v = gbx_http_body_object(req);
    if (v == NULL)
        return; /* replied, and evhttp freed the connectionless request */
    CHECK(json_is_object(v));
    CHECK(size <= BODY_LIMIT);
    CHECK(depth_of(v) <= DEPTH_LIMIT);
    json_decref(v);
    evhttp_request_free(req);
}

static void fuzz_range(const char *s, size_t size)
{
    uint64_t fsize = 0;
    for (size_t i = 0; i < size && i < 3; i++)
        fsize = fsize << 8 | (uint8_t)s[i];
    if (size > 3 && (s[3] & 1))
        fsize = UINT64_MAX - fsize; /* huge files too */
    const char *h = size > 4 ? s + 4 : "";
    uint64_t off = 7, len = 7;
    int r = gbx_http_parse_range(h, fsize, &off, &len);
    CHECK(r == -1 || r == 0 || r == 1);
    if (r == 1) {
        CHECK(len >= 1 && off < fsize && len <= fsize - off);
    } else {
        CHECK(off == 7 && len == 7); /* nothing set */
    }
    CHECK(gbx_http_parse_range(NULL, fsize, &off, &len) == 0);
}

/* strict UTF-8, written apart from http.c's */
static int valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t c = s[i], cp;
        size_t l;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            l = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            l = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            l = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + l > n)
            return 0;
        for (size_t k = 1; k < l; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[l] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += l;
    }
    return 1;
}

static void fuzz_json_text(const char *s)
{
    size_t n = strlen(s);
    json_t *v = gbx_json_text(s);
    CHECK(json_is_string(v));
    const char *out = json_string_value(v);
    size_t on = json_string_length(v);
    CHECK(strlen(out) == on && on <= 3 * n);
    CHECK(valid_utf8((const uint8_t *)out, on));
    if (valid_utf8((const uint8_t *)s, n))
        CHECK(on == n && memcmp(out, s, n) == 0);
    json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once) {
        gbx_http_set_json_limit(BODY_LIMIT);
        once = 1;
    }
    fuzz_body_object(data, size);

    char *s = malloc(size + 1);
    CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';
    fuzz_range(s, size);
    fuzz_json_text(s);
    free(s);
    return 0;
}
