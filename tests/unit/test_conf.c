/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/conf.c: the daemon's configuration file syntax. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/conf.h"

struct seen {
    char text[1024]; /* "key=value@line;" for every setting */
    int stop_at;     /* return this from the callback at the setting numbered stop_at */
    int n;
};

static int collect(void *arg, const char *key, const char *value, unsigned line)
{
    struct seen *s = arg;
    size_t used = strlen(s->text);
    snprintf(s->text + used, sizeof(s->text) - used, "%s=%s@%u;", key, value, line);
    return ++s->n == s->stop_at ? 42 : 0;
}

static int parse(const char *text, struct seen *s, char *err, size_t errsz)
{
    memset(s, 0, sizeof(*s));
    return gbx_conf_parse(text, strlen(text), collect, s, err, errsz);
}

static void test_valid(void **state)
{
    struct seen s;
    char err[128];
    const char *text = "# gloveboxd.conf\n"
                       "\n"
                       "state-dir = /var/lib/glovebox\n"
                       "  pool=4  \n"
                       "listen\t=\t127.0.0.1:7070\r\n"
                       "log-format = \"json\"\n"
                       "kill-on-exit = \"a # b \"\n"
                       "empty =\n"
                       "last = no newline";
    assert_int_equal(parse(text, &s, err, sizeof(err)), 0);
    assert_string_equal(s.text, "state-dir=/var/lib/glovebox@3;pool=4@4;listen=127.0.0.1:7070@5;"
                                "log-format=json@6;kill-on-exit=a # b @7;empty=@8;"
                                "last=no newline@9;");
    assert_string_equal(err, "");
}

static void test_empty(void **state)
{
    struct seen s;
    char err[128];
    assert_int_equal(parse("", &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(parse("\n\n# only comments\n   \n", &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 0);
}

static void test_errors(void **state)
{
    static const struct {
        const char *text;
        const char *msg;
    } c[] = {
        {"pool 4\n", "line 1: expected 'key = value' (keys are a-z, 0-9, '-')"},
        {"ok = 1\n= 4\n", "line 2: expected 'key = value' (keys are a-z, 0-9, '-')"},
        {"Pool = 4\n", "line 1: expected 'key = value' (keys are a-z, 0-9, '-')"},
        {"a = \"open\n", "line 1: unterminated quoted value"},
        {"a = \"x\" y\n", "line 1: text after the quoted value"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        struct seen s;
        char err[128];
        print_message("'%s'\n", c[i].text);
        assert_int_equal(parse(c[i].text, &s, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, c[i].msg);
    }
}

static void test_nul_and_long_lines(void **state)
{
    struct seen s;
    char err[128];
    memset(&s, 0, sizeof(s));
    const char nul[] = "a = b\0c\n";
    assert_int_equal(gbx_conf_parse(nul, sizeof(nul) - 1, collect, &s, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "line 1: contains a NUL byte");
    static char longline[5000];
    memset(longline, 'x', sizeof(longline) - 1);
    memcpy(longline, "k = ", 4);
    assert_int_equal(parse(longline, &s, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "line 1: longer than 4095 bytes");
}

static void test_callback_stops(void **state)
{
    struct seen s;
    memset(&s, 0, sizeof(s));
    s.stop_at = 2;
    char err[128];
    const char *text = "a = 1\nb = 2\nc = 3\n";
    assert_int_equal(gbx_conf_parse(text, strlen(text), collect, &s, err, sizeof(err)), 42);
    assert_string_equal(s.text, "a=1@1;b=2@2;");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),          cmocka_unit_test(test_empty),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_nul_and_long_lines),
        cmocka_unit_test(test_callback_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
