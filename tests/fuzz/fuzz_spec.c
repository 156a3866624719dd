/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the create spec's parser (src/core/spec.c), which reads the body of
 * every create any API key sends (and the create fields of clones, and a session's spec).
 * The input is the JSON body. Nothing may crash or leak; a refusal says why; an accepted
 * body's spec, written as its native JSON and parsed again, gives the same JSON (the store,
 * a retried create and the audit record rely on that). */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"
#include "core/spec.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gbx_limits lim;
    static int ready;
    if (!ready) {
        gbx_limits_init(&lim, 24ull << 30, 2);
        ready = 1;
    }
    json_t *body = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (body == NULL)
        return 0;
    struct gbx_create_spec a, b;
    struct gbx_err *err = NULL;
    if (gbx_create_spec_parse(&lim, body, &a, &err) < 0) {
        CHECK(err != NULL && err->msg[0] != '\0');
        CHECK(a.template_name == NULL && a.env == NULL && a.network == NULL);
        gbx_err_free(err);
        json_decref(body);
        return 0;
    }
    json_t *ja = gbx_create_spec_json(&a);
    CHECK(gbx_create_spec_parse(&lim, ja, &b, &err) == 0);
    json_t *jb = gbx_create_spec_json(&b);
    CHECK(json_equal(ja, jb));
    CHECK(a.limits.memory_bytes == b.limits.memory_bytes && a.disk_bytes == b.disk_bytes &&
          a.timeout_ms == b.timeout_ms && a.timeout_set == b.timeout_set &&
          a.limits.cpu_millis == b.limits.cpu_millis && a.limits.pids == b.limits.pids);
    struct gbx_create_spec c;
    gbx_create_spec_copy(&c, &a);
    gbx_create_spec_clear(&a);
    json_t *jc = gbx_create_spec_json(&c);
    CHECK(json_equal(jc, jb));
    json_decref(ja);
    json_decref(jb);
    json_decref(jc);
    gbx_create_spec_clear(&b);
    gbx_create_spec_clear(&c);
    json_decref(body);
    return 0;
}
