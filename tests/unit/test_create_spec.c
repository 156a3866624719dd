/* SPDX-License-Identifier: MIT */
/* Unit tests for src/core/spec.c: the create spec every front end hands the registry. The
 * native body's parser (each field, each refusal and its message), the spec's native JSON
 * (parsing it gives the same spec: the store, a retried create and the audit record rely on
 * it), copies that share nothing, and the setters the E2B front end uses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/limits.h"
#include "core/spec.h"
#include "egress/policy.h"

static struct gbx_limits lim;

static int setup(void **state)
{
    gbx_limits_init(&lim, 24ull << 30, 2);
    return 0;
}

/* Parse text; 0, or -1 with the message in msg. */
static int parse(const char *text, struct gbx_create_spec *c, char *msg, size_t n)
{
    json_error_t je;
    json_t *body = json_loads(text, 0, &je);
    assert_non_null(body);
    struct gbx_err *err = NULL;
    int r = gbx_create_spec_parse(&lim, body, c, &err);
    json_decref(body);
    if (r < 0) {
        assert_non_null(err);
        assert_int_equal(err->kind, GBX_ERR_INVALID);
        snprintf(msg, n, "%s", err->msg);
        gbx_err_free(err);
    } else {
        assert_null(err);
    }
    return r;
}

static char *spec_text(const struct gbx_create_spec *c)
{
    json_t *j = gbx_create_spec_json(c);
    char *t = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    assert_non_null(t);
    return t;
}

static void test_fields(void **state)
{
    struct gbx_create_spec c;
    char msg[512];
    assert_int_equal(
        parse("{\"id\":\"box-1\",\"template\":\"py\",\"memory\":\"512M\",\"disk\":2097152,"
              "\"pids\":64,\"cpus\":1.5,\"timeout\":\"5m\",\"on_timeout\":\"pause\",\"auto_"
              "resume\":true,"
              "\"env\":{\"A\":\"1\"},\"metadata\":{\"k\":\"v\"},\"labels\":{\"team\":\"x\"},"
              "\"network\":{\"mode\":\"none\"},\"idempotency_key\":\"k1\"}",
              &c, msg, sizeof(msg)),
        0);
    assert_string_equal(c.id, "box-1");
    assert_string_equal(c.template_name, "py");
    assert_null(c.snapshot);
    assert_int_equal(c.limits.memory_bytes, 512ull << 20);
    assert_int_equal(c.disk_bytes, 2097152);
    assert_int_equal(c.limits.pids, 64);
    assert_int_equal(c.limits.cpu_millis, 1500);
    assert_int_equal(c.timeout_ms, 300000);
    assert_true(c.timeout_set);
    assert_true(c.on_timeout_pause);
    assert_true(c.auto_resume);
    assert_string_equal(json_string_value(json_object_get(c.env, "A")), "1");
    assert_string_equal(json_string_value(json_object_get(c.metadata, "k")), "v");
    assert_string_equal(json_string_value(json_object_get(c.labels, "team")), "x");
    assert_string_equal(json_string_value(json_object_get(c.network, "mode")), "none");
    assert_null(c.policy);
    assert_string_equal(c.idem_key, "k1");
    gbx_create_spec_clear(&c);
    assert_null(c.id);

    /* nothing asked: every field is the daemon's to choose */
    assert_int_equal(parse("{}", &c, msg, sizeof(msg)), 0);
    assert_null(c.template_name);
    assert_int_equal(c.limits.memory_bytes, 0);
    assert_false(c.timeout_set);
    gbx_create_spec_clear(&c);

    /* "timeout": 0 is asked for (no timeout), not left to the default */
    assert_int_equal(parse("{\"timeout\":0,\"network\":null}", &c, msg, sizeof(msg)), 0);
    assert_true(c.timeout_set);
    assert_int_equal(c.timeout_ms, 0);
    assert_null(c.network);
    gbx_create_spec_clear(&c);
}

struct refusal {
    const char *body;
    const char *says; /* a part of the message */
};

static void test_refusals(void **state)
{
    static const struct refusal cases[] = {
        {"{\"id\":\"-x\"}", "'id' must be 1-63"},
        {"{\"id\":7}", "'id' must be"},
        {"{\"template\":\"Bad Name\"}", "'template' must be a template name"},
        {"{\"memory\":\"1M\"}", "'memory' must be a size of at least 4M"},
        {"{\"memory\":-5}", "'memory' must be"},
        {"{\"memory\":\"100000000T\"}", "'memory' 100000000T is too large"},
        {"{\"disk\":1000}", "'disk' must be a size of at least 1M"},
        {"{\"disk\":\"999999999999T\"}", "'disk' 999999999999T is too large"},
        {"{\"pids\":0}", "'pids' must be an integer from 1 to 4194304"},
        {"{\"pids\":4194305}", "'pids' must be"},
        {"{\"pids\":1.5}", "'pids' must be"},
        {"{\"timeout\":2592001}", "'timeout' must be seconds (0 to 2592000)"},
        {"{\"timeout\":\"31d\"}", "'timeout' must be"},
        {"{\"timeout\":-1}", "'timeout' must be"},
        {"{\"cpus\":0.001}", "'cpus' must be a number of CPUs from 0.01 to 1024"},
        {"{\"cpus\":\"2\"}", "'cpus' must be"},
        {"{\"env\":{\"1A\":\"x\"}}", "'env' must be an object"},
        {"{\"env\":{\"A\":1}}", "'env' must be"},
        {"{\"env\":[]}", "'env' must be"},
        {"{\"metadata\":{\"k\":1}}", "'metadata' must be an object of at most 64 string values"},
        {"{\"metadata\":{\"\":\"v\"}}", "'metadata' must be"},
        {"{\"labels\":{\"k\":\"Not A Name\"}}", "'labels' must be an object of at most 64 entries"},
        {"{\"network\":\"open\"}", "'network' must be an object"},
        {"{\"snapshot\":\"\"}", "'snapshot' must be a snapshot id or name"},
        {"{\"on_timeout\":\"sleep\"}", "'on_timeout' must be \"kill\" or \"pause\""},
        {"{\"auto_resume\":\"yes\"}", "'auto_resume' must be a boolean"},
        {"{\"idempotency_key\":\"\"}", "'idempotency_key' must be a string of 1 to 256 bytes"},
        {"{\"colour\":\"red\"}", "unknown field 'colour' (expected id, template"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gbx_create_spec c;
        char msg[512] = "";
        /* a refused field after good ones: what was parsed is freed (ASan's leak check) */
        char body[512];
        snprintf(body, sizeof(body), "{\"template\":\"py\",\"env\":{\"B\":\"2\"},%s",
                 cases[i].body + 1);
        if (parse(body, &c, msg, sizeof(msg)) != -1 || strstr(msg, cases[i].says) == NULL)
            fail_msg("%s: got '%s', expected a refusal saying '%s'", body, msg, cases[i].says);
        assert_null(c.template_name);
        assert_null(c.env);
    }
    /* 65 metadata entries: one over the bound */
    json_t *md = json_object();
    for (int i = 0; i < 65; i++) {
        char k[16];
        snprintf(k, sizeof(k), "k%d", i);
        json_object_set_new(md, k, json_string("v"));
    }
    json_t *body = json_pack("{s:o}", "metadata", md);
    struct gbx_create_spec c;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_create_spec_parse(&lim, body, &c, &err), -1);
    assert_non_null(strstr(err->msg, "at most 64"));
    gbx_err_free(err);
    json_decref(body);
}

/* The spec's JSON parses back to the same spec (compared by its JSON again). */
static void test_round_trip(void **state)
{
    static const char *const bodies[] = {
        "{}",
        "{\"template\":\"py\",\"memory\":\"1G\",\"cpus\":0.25,\"pids\":10,\"disk\":\"3M\"}",
        "{\"timeout\":\"1500ms\"}",
        "{\"timeout\":30,\"on_timeout\":\"kill\"}",
        "{\"timeout\":3,\"on_timeout\":\"pause\",\"auto_resume\":true}",
        "{\"snapshot\":\"snap-1\",\"labels\":{\"a\":\"b\"},\"metadata\":{\"x\":\"y z\"}}",
        "{\"network\":{\"mode\":\"policy\",\"rules\":[]},\"env\":{\"P\":\"q=r\"},"
        "\"idempotency_key\":\"retry me\",\"id\":\"my-box\"}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct gbx_create_spec a, b;
        char msg[512];
        assert_int_equal(parse(bodies[i], &a, msg, sizeof(msg)), 0);
        char *ta = spec_text(&a);
        assert_int_equal(parse(ta, &b, msg, sizeof(msg)), 0);
        char *tb = spec_text(&b);
        assert_string_equal(ta, tb);
        assert_int_equal(a.limits.memory_bytes, b.limits.memory_bytes);
        assert_int_equal(a.limits.cpu_millis, b.limits.cpu_millis);
        assert_int_equal(a.timeout_ms, b.timeout_ms);
        assert_int_equal(a.timeout_set, b.timeout_set);
        assert_int_equal(a.on_timeout_pause, b.on_timeout_pause);
        assert_int_equal(a.auto_resume, b.auto_resume);
        free(ta);
        free(tb);
        gbx_create_spec_clear(&a);
        gbx_create_spec_clear(&b);
    }
    /* two spellings of one request say the same */
    struct gbx_create_spec a, b;
    char msg[512];
    assert_int_equal(parse("{\"memory\":\"512M\",\"timeout\":\"2m\"}", &a, msg, sizeof(msg)), 0);
    assert_int_equal(parse("{\"timeout\":120,\"memory\":536870912}", &b, msg, sizeof(msg)), 0);
    char *ta = spec_text(&a), *tb = spec_text(&b);
    assert_string_equal(ta, tb);
    assert_non_null(strstr(ta, "\"timeout\":120"));
    free(ta);
    free(tb);
    gbx_create_spec_clear(&a);
    gbx_create_spec_clear(&b);
}

/* A policy the front end parsed is what the JSON says, and wins over "network". */
static void test_policy(void **state)
{
    struct gbx_create_spec c;
    char msg[512];
    assert_int_equal(parse("{\"network\":{\"mode\":\"none\"}}", &c, msg, sizeof(msg)), 0);
    c.policy = gbx_egress_policy_new(GBX_EGRESS_OPEN);
    json_t *j = gbx_create_spec_json(&c);
    json_t *want = gbx_egress_policy_json(c.policy);
    assert_true(json_equal(json_object_get(j, "network"), want));
    json_decref(want);
    json_decref(j);
    gbx_create_spec_clear(&c);
    assert_null(c.policy);
}

/* A copy shares nothing with its source. */
static void test_copy(void **state)
{
    struct gbx_create_spec a, b;
    char msg[512];
    assert_int_equal(parse("{\"template\":\"py\",\"env\":{\"A\":\"1\"},\"labels\":{\"l\":\"m\"}}",
                           &a, msg, sizeof(msg)),
                     0);
    a.policy = gbx_egress_policy_new(GBX_EGRESS_NONE);
    gbx_create_spec_copy(&b, &a);
    assert_ptr_not_equal(a.template_name, b.template_name);
    assert_ptr_not_equal(a.env, b.env);
    assert_ptr_not_equal(a.policy, b.policy);
    char *ta = spec_text(&a);
    gbx_create_spec_clear(&a); /* b stands alone */
    char *tb = spec_text(&b);
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
    gbx_create_spec_clear(&b);
}

static void test_setters(void **state)
{
    struct gbx_create_spec c;
    gbx_create_spec_init(&c);
    struct gbx_err *err = NULL;
    json_t *env = json_pack("{s:s}", "HOME", "/root");
    assert_int_equal(gbx_create_spec_set_env(&c, env, &err), 0);
    json_object_set_new(env, "LATER", json_string("x")); /* copied: the spec does not see it */
    assert_null(json_object_get(c.env, "LATER"));
    json_decref(env);
    json_t *bad = json_pack("{s:s}", "NO=GOOD", "x");
    assert_int_equal(gbx_create_spec_set_env(&c, bad, &err), -1);
    assert_non_null(strstr(err->msg, "'env' must be"));
    gbx_err_free(err);
    err = NULL;
    json_decref(bad);
    assert_non_null(json_object_get(c.env, "HOME")); /* a refused set keeps what was there */
    json_t *md = json_pack("{s:i}", "n", 1);
    assert_int_equal(gbx_create_spec_set_metadata(&c, md, &err), -1);
    assert_non_null(strstr(err->msg, "'metadata' must be"));
    gbx_err_free(err);
    json_decref(md);
    gbx_create_spec_clear(&c);
}

static void test_json_values(void **state)
{
    uint64_t v = 0;
    json_t *j = json_integer(0);
    assert_int_equal(gbx_json_size(j, &v), -EINVAL); /* sizes are positive */
    assert_int_equal(gbx_json_timeout_ms(j, &v), 0);
    assert_int_equal(v, 0);
    json_decref(j);
    j = json_integer(2592000);
    assert_int_equal(gbx_json_timeout_ms(j, &v), 0);
    assert_int_equal(v, 2592000000ull);
    json_decref(j);
    j = json_string("30d1ms");
    assert_int_not_equal(gbx_json_timeout_ms(j, &v), 0);
    json_decref(j);
    j = json_string("2K");
    assert_int_equal(gbx_json_size(j, &v), 0);
    assert_int_equal(v, 2048);
    json_decref(j);
    j = json_true();
    assert_int_equal(gbx_json_size(j, &v), -EINVAL);
    assert_int_equal(gbx_json_timeout_ms(j, &v), -EINVAL);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields),      cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_round_trip),  cmocka_unit_test(test_policy),
        cmocka_unit_test(test_copy),        cmocka_unit_test(test_setters),
        cmocka_unit_test(test_json_values),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
