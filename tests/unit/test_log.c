/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/log.c: a JSON line carries typed fields with their JSON types
 * (numbers bare, strings quoted even when they look numeric), and a text line is as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/log.h"

/* What the log wrote to stderr while fn ran (malloc'd). */
static char *capture(void (*fn)(void))
{
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    assert_true(dup2(fileno(tmp), 2) == 2);
    fn();
    fflush(stderr);
    assert_true(dup2(saved, 2) == 2);
    close(saved);
    long n = ftell(tmp);
    assert_true(n > 0);
    char *buf = calloc(1, (size_t)n + 1);
    rewind(tmp);
    assert_int_equal(fread(buf, 1, (size_t)n, tmp), (size_t)n);
    fclose(tmp);
    return buf;
}

static void request_line(void)
{
    gbx_log_fields(GBX_LOG_INFO, "request", GBX_LOG_STR("method", "GET"),
                   GBX_LOG_STR("path", "/v1/sandboxes?x=1"), GBX_LOG_INT("status", 404),
                   GBX_LOG_REAL("ms", 1.25, 3), GBX_LOG_NONE("wait"), GBX_LOG_STR("sandbox", "123"),
                   GBX_LOG_STR("key", "1e5"), GBX_LOG_INT("big", -9007199254740993LL));
}

static void test_json_types(void **state)
{
    (void)state;
    gbx_log_set_level(GBX_LOG_INFO);
    gbx_log_set_json(1);
    char *line = capture(request_line);
    gbx_log_set_json(0);
    json_error_t e;
    json_t *j = json_loads(line, 0, &e);
    if (j == NULL)
        fail_msg("not JSON: %s (%s)", line, e.text);
    assert_true(json_is_integer(json_object_get(j, "status")));
    assert_int_equal(json_integer_value(json_object_get(j, "status")), 404);
    assert_true(json_is_number(json_object_get(j, "ms")));
    assert_true(json_number_value(json_object_get(j, "ms")) == 1.25);
    assert_true(json_is_null(json_object_get(j, "wait")));
    assert_true(json_is_integer(json_object_get(j, "big")));
    assert_int_equal(json_integer_value(json_object_get(j, "big")), -9007199254740993LL);
    /* strings that look like numbers stay strings */
    assert_string_equal(json_string_value(json_object_get(j, "sandbox")), "123");
    assert_string_equal(json_string_value(json_object_get(j, "key")), "1e5");
    assert_string_equal(json_string_value(json_object_get(j, "method")), "GET");
    assert_string_equal(json_string_value(json_object_get(j, "msg")), "request");
    assert_string_equal(json_string_value(json_object_get(j, "level")), "info");
    assert_true(json_is_string(json_object_get(j, "ts")));
    json_decref(j);
    free(line);
}

static void test_text_unchanged(void **state)
{
    (void)state;
    gbx_log_set_level(GBX_LOG_INFO);
    char *line = capture(request_line);
    /* "<ts> info request k=v ...": what the string-only writer printed for the same text */
    const char *rest = strstr(line, " info request ");
    assert_non_null(rest);
    assert_string_equal(rest, " info request method=GET path=\"/v1/sandboxes?x=1\" status=404 "
                              "ms=1.250 wait=\"\" sandbox=123 key=1e5 "
                              "big=-9007199254740993\n");
    free(line);
}

static void kv_line(void)
{
    gbx_log_kv(GBX_LOG_WARN, "old", "status", "200", "note", "a b", (const char *)NULL);
}

static void test_kv_strings(void **state)
{
    (void)state;
    gbx_log_set_level(GBX_LOG_INFO);
    gbx_log_set_json(1);
    char *line = capture(kv_line);
    gbx_log_set_json(0);
    json_t *j = json_loads(line, 0, NULL);
    assert_non_null(j);
    /* the string-pair writer says nothing about types: its values stay strings */
    assert_string_equal(json_string_value(json_object_get(j, "status")), "200");
    assert_string_equal(json_string_value(json_object_get(j, "note")), "a b");
    json_decref(j);
    free(line);
    line = capture(kv_line);
    assert_non_null(strstr(line, " warn old status=200 note=\"a b\"\n"));
    free(line);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_types),
        cmocka_unit_test(test_text_unchanged),
        cmocka_unit_test(test_kv_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
