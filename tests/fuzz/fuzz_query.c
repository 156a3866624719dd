/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the list routes' query parser (src/base/query.c), which reads the
 * query string of any API client's request. The first byte picks the reading (native or
 * E2B's form reading) and whether unknown parameters are ignored; the rest is the query.
 * Nothing may crash or leak; an accepted parse must leave every output inside its bounds and
 * every string output inside the parse's own buffer, and a refusal must say why. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/query.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *even_only(void *out, const char *value)
{
    size_t n = strlen(value);
    if (n % 2)
        return "of even length";
    *(size_t *)out = n;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    unsigned flags =
        (data[0] & 1 ? GBX_QUERY_FORM : 0) | (data[0] & 2 ? GBX_QUERY_IGNORE_UNKNOWN : 0);
    char *query = malloc(size);
    if (query == NULL)
        return 0;
    memcpy(query, data + 1, size - 1);
    query[size - 1] = '\0';

    uint64_t limit = 7, after = 0;
    int follow = -1;
    const char *cursor = NULL, *labels[4] = {0};
    size_t nlabels = 99, even = 0;
    const struct gbx_query_param params[] = {
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = 1000},
        {.name = "after", .kind = GBX_QUERY_U64, .out = &after, .max = 50, .clamp = 1},
        {.name = "follow", .kind = GBX_QUERY_BOOL, .out = &follow},
        {.name = "cursor", .kind = GBX_QUERY_STR, .out = &cursor},
        {.name = "label", .kind = GBX_QUERY_STRS, .out = labels, .count = &nlabels, .cap = 4},
        {.name = "even", .kind = GBX_QUERY_FN, .out = &even, .fn = even_only},
    };
    struct gbx_query q = {0};
    struct gbx_err *err = NULL;
    int r = gbx_query_parse(&q, query, params, sizeof(params) / sizeof(params[0]), flags, &err);
    if (r == 0) {
        CHECK(err == NULL);
        CHECK(limit >= 1 && limit <= 1000);
        CHECK(after <= 50);
        CHECK(follow >= -1 && follow <= 1);
        CHECK(nlabels <= 4);
        CHECK(even % 2 == 0);
        size_t blen = q.buf ? strlen(q.buf) : 0;
        const char *outs[5] = {cursor, labels[0], labels[1], labels[2], labels[3]};
        for (size_t i = 0; i < 5; i++) {
            if (outs[i] == NULL)
                continue;
            CHECK(q.buf != NULL && outs[i] >= q.buf && outs[i] < q.buf + size);
            (void)blen;
            CHECK(strlen(outs[i]) < size);
        }
    } else {
        CHECK(r == -1 && err != NULL && err->msg != NULL && err->msg[0] != '\0');
        gbx_err_free(err);
    }
    gbx_query_release(&q);
    CHECK(q.buf == NULL);
    free(query);
    return 0;
}
