/* SPDX-License-Identifier: MIT */
/* Unit tests for `glovebox run` option parsing (gbx_run_parse in src/cli/run.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "cli/run.h"

/* A mutable argv built from string literals, as main() would receive it. No allocation:
 * the strings live in mem, so a failing assertion cannot leak. */
struct args {
    int argc;
    char *argv[640];
    char mem[16384];
    size_t used;
};

static void args_add(struct args *a, const char *s)
{
    size_t n = strlen(s) + 1;
    assert_true(a->used + n <= sizeof(a->mem));
    assert_true((size_t)a->argc + 1 < sizeof(a->argv) / sizeof(a->argv[0]));
    char *p = a->mem + a->used;
    memcpy(p, s, n);
    a->used += n;
    a->argv[a->argc++] = p;
    a->argv[a->argc] = NULL;
}

static void args_set(struct args *a, const char *const *list)
{
    a->argc = 0;
    a->used = 0;
    a->argv[0] = NULL;
    for (; *list; list++)
        args_add(a, *list);
}

#define ARGS(a, ...) args_set((a), (const char *const[]){__VA_ARGS__, NULL})

static void parse_ok(struct args *a, struct gbx_run_opts *o)
{
    struct gbx_err *err = NULL;
    int r = gbx_run_parse(a->argc, a->argv, o, &err);
    if (r != 0)
        print_error("unexpected error: %s\n", err ? err->msg : "(none)");
    gbx_err_free(err);
    assert_int_equal(r, 0);
}

/* Parse, expect failure with errnum/kind and a message containing needle. */
static void parse_fail(struct args *a, int errnum, enum gbx_err_kind kind, const char *needle)
{
    struct gbx_run_opts o;
    struct gbx_err *err = NULL;
    int r = gbx_run_parse(a->argc, a->argv, &o, &err);
    assert_int_equal(r, -1);
    assert_non_null(err);
    int ok = err->errnum == errnum && err->kind == kind && strstr(err->msg, needle) != NULL;
    if (!ok)
        print_error("got errnum %d kind %d msg '%s'; want %d %d '%s'\n", err->errnum,
                    (int)err->kind, err->msg, errnum, (int)kind, needle);
    gbx_err_free(err);
    assert_true(ok);
}

static void assert_cmd(const struct gbx_run_opts *o, const char *const *want)
{
    assert_non_null(o->argv);
    size_t i = 0;
    for (; want[i]; i++) {
        assert_non_null(o->argv[i]);
        assert_string_equal(o->argv[i], want[i]);
    }
    assert_null(o->argv[i]);
}

#define ASSERT_CMD(o, ...) assert_cmd((o), (const char *const[]){__VA_ARGS__, NULL})

static void test_defaults(void **state)
{
    struct args a;
    struct gbx_run_opts o;
    (void)state;
    ARGS(&a, "run", "true");
    memset(&o, 0xa5, sizeof(o));
    parse_ok(&a, &o);
    assert_int_equal(o.memory_bytes, 0);
    assert_int_equal(o.pids, 0);
    assert_int_equal(o.cpu_millis, 0);
    assert_int_equal(o.disk_bytes, 0);
    assert_int_equal(o.timeout_ms, 0);
    assert_int_equal(o.nenv, 0);
    assert_null(o.env[0]);
    assert_null(o.cwd);
    assert_null(o.user);
    assert_null(o.template_name);
    assert_int_equal(o.tty, -1);
    assert_int_equal(o.help, 0);
    ASSERT_CMD(&o, "true");
    assert_ptr_equal(o.argv, &a.argv[1]); /* points into the caller's argv */
}

static void test_short_options(void **state)
{
    struct args a;
    struct gbx_run_opts o;
    (void)state;
    ARGS(&a, "run", "-m", "512M", "-p", "100", "-c", "0.5", "-d", "2G", "-t", "30s", "-e", "A=1",
         "-e", "B=two", "-w", "/tmp", "-u", "1000:1000", "-T", "base-2", "sh", "-c", "echo hi");
    parse_ok(&a, &o);
    assert_int_equal(o.memory_bytes, 512ull << 20);
    assert_int_equal(o.pids, 100);
    assert_int_equal(o.cpu_millis, 500);
    assert_int_equal(o.disk_bytes, 2ull << 30);
    assert_int_equal(o.timeout_ms, 30000);
    assert_int_equal(o.nenv, 2);
    assert_string_equal(o.env[0], "A=1");
    assert_string_equal(o.env[1], "B=two");
    assert_null(o.env[2]);
    assert_string_equal(o.cwd, "/tmp");
    assert_string_equal(o.user, "1000:1000");
    assert_string_equal(o.template_name, "base-2");
    assert_int_equal(o.tty, -1);
    assert_int_equal(o.help, 0);
    ASSERT_CMD(&o, "sh", "-c", "echo hi");

    /* values attached to short options */
    ARGS(&a, "run", "-m64M", "-p7", "-c2", "-t1500ms", "-eX=", "ls");
    parse_ok(&a, &o);
    assert_int_equal(o.memory_bytes, 64ull << 20);
    assert_int_equal(o.pids, 7);
    assert_int_equal(o.cpu_millis, 2000);
    assert_int_equal(o.timeout_ms, 1500);
    assert_int_equal(o.nenv, 1);
    assert_string_equal(o.env[0], "X=");
    ASSERT_CMD(&o, "ls");
}

static void test_long_options(void **state)
{
    struct args a;
    struct gbx_run_opts o;
    (void)state;
    ARGS(&a, "run", "--memory", "1G", "--pids=5", "--cpus", "2.25", "--disk=1M", "--timeout", "5m",
         "--env=PATH=/bin", "--env", "HOME=/root", "--cwd=/work", "--user", "nobody",
         "--template=host", "--tty", "--", "ls", "-l");
    parse_ok(&a, &o);
    assert_int_equal(o.memory_bytes, 1ull << 30);
    assert_int_equal(o.pids, 5);
    assert_int_equal(o.cpu_millis, 2250);
    assert_int_equal(o.disk_bytes, 1ull << 20);
    assert_int_equal(o.timeout_ms, 300000);
    assert_int_equal(o.nenv, 2);
    assert_string_equal(o.env[0], "PATH=/bin");
    assert_string_equal(o.env[1], "HOME=/root");
    assert_string_equal(o.cwd, "/work");
    assert_string_equal(o.user, "nobody");
    assert_string_equal(o.template_name, "host");
    assert_int_equal(o.tty, 1);
    ASSERT_CMD(&o, "ls", "-l");

    /* unambiguous abbreviations of long options work, as with getopt_long everywhere */
    ARGS(&a, "run", "--mem", "8M", "--no", "x");
    parse_ok(&a, &o);
    assert_int_equal(o.memory_bytes, 8ull << 20);
    assert_int_equal(o.tty, 0);
}

static void test_tty(void **state)
{
    struct args a;
    struct gbx_run_opts o;
    (void)state;
    ARGS(&a, "run", "--tty", "x");
    parse_ok(&a, &o);
    assert_int_equal(o.tty, 1);
    ARGS(&a, "run", "--no-tty", "x");
    parse_ok(&a, &o);
    assert_int_equal(o.tty, 0);
    /* the last one wins */
    ARGS(&a, "run", "--tty", "--no-tty", "x");
    parse_ok(&a, &o);
    assert_int_equal(o.tty, 0);
    ARGS(&a, "run", "--no-tty", "--tty", "x");
    parse_ok(&a, &o);
    assert_int_equal(o.tty, 1);
    /* --tty takes no value */
    ARGS(&a, "run", "--tty=1", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--tty=1");
}

static void test_repeated_env(void **state)
{
    struct args a;
    struct gbx_run_opts o;
    char kv[32];
    (void)state;

    ARGS(&a, "run", "-e", "A=1", "--env", "A=2", "--env=B=3", "-eC=4", "env");
    parse_ok(&a, &o);
    assert_int_equal(o.nenv, 4);
    assert_string_equal(o.env[0], "A=1"); /* duplicates are kept, in order */
    assert_string_equal(o.env[1], "A=2");
    assert_string_equal(o.env[2], "B=3");
    assert_string_equal(o.env[3], "C=4");
    assert_null(o.env[4]);
    assert_ptr_equal(o.env[0], a.argv[2]); /* points into argv, not copied */

    /* exactly GBX_RUN_MAX_ENV is fine, one more is a limit error */
    ARGS(&a, "run");
    for (int i = 0; i < GBX_RUN_MAX_ENV; i++) {
        snprintf(kv, sizeof(kv), "V%d=%d", i, i);
        args_add(&a, "-e");
        args_add(&a, kv);
    }
    args_add(&a, "env");
    parse_ok(&a, &o);
    assert_int_equal(o.nenv, GBX_RUN_MAX_ENV);
    assert_string_equal(o.env[GBX_RUN_MAX_ENV - 1], "V255=255");
    assert_null(o.env[GBX_RUN_MAX_ENV]);
    a.argc--;
    a.argv[a.argc] = NULL;
    args_add(&a, "--env");
    args_add(&a, "ONE_TOO_MANY=1");
    args_add(&a, "env");
    parse_fail(&a, E2BIG, GBX_ERR_LIMIT, "too many --env");
}

static void test_double_dash(void **state)
{
    struct args a;
    struct gbx_run_opts o;
    (void)state;

    /* everything after -- is the command, even if it looks like our options */
    ARGS(&a, "run", "--", "sh", "-c", "x", "--memory", "1");
    parse_ok(&a, &o);
    assert_int_equal(o.memory_bytes, 0);
    ASSERT_CMD(&o, "sh", "-c", "x", "--memory", "1");

    /* a command named like an option */
    ARGS(&a, "run", "-m", "16M", "--", "--memory", "x");
    parse_ok(&a, &o);
    assert_int_equal(o.memory_bytes, 16ull << 20);
    ASSERT_CMD(&o, "--memory", "x");

    /* a second -- belongs to the command */
    ARGS(&a, "run", "--", "cmd", "--", "arg");
    parse_ok(&a, &o);
    ASSERT_CMD(&o, "cmd", "--", "arg");

    /* nothing after -- */
    ARGS(&a, "run", "--pids", "3", "--");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "no command given");
}

static void test_stop_at_command(void **state)
{
    struct args a;
    struct gbx_run_opts o;
    (void)state;

    /* "+" in the optstring: parsing stops at the first non-option (no GNU permutation) */
    ARGS(&a, "run", "sh", "--memory", "1");
    parse_ok(&a, &o);
    assert_int_equal(o.memory_bytes, 0);
    ASSERT_CMD(&o, "sh", "--memory", "1");
    /* the command's own options are not reordered */
    assert_string_equal(a.argv[1], "sh");
    assert_string_equal(a.argv[2], "--memory");

    ARGS(&a, "run", "-p", "10", "ls", "-p", "-e", "BAD", "--help");
    parse_ok(&a, &o);
    assert_int_equal(o.pids, 10);
    assert_int_equal(o.nenv, 0);
    assert_int_equal(o.help, 0);
    ASSERT_CMD(&o, "ls", "-p", "-e", "BAD", "--help");

    /* POSIXLY_CORRECT or not, the result must be the same */
    ARGS(&a, "run", "python3", "-c", "print(1)", "--tty");
    parse_ok(&a, &o);
    assert_int_equal(o.tty, -1);
    ASSERT_CMD(&o, "python3", "-c", "print(1)", "--tty");

    /* a lone "-" is a command, not an option */
    ARGS(&a, "run", "-");
    parse_ok(&a, &o);
    ASSERT_CMD(&o, "-");
}

static void test_missing_value(void **state)
{
    struct args a;
    (void)state;
    /* the option is named in the message, as it was typed */
    ARGS(&a, "run", "--memory");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "option '--memory' needs a value");
    ARGS(&a, "run", "-m");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "option '-m' needs a value");
    ARGS(&a, "run", "--env");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--env");
    ARGS(&a, "run", "-p", "3", "--timeout");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--timeout");
    ARGS(&a, "run", "-T");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "-T");
    /* a value that looks like an option is still taken as the value */
    ARGS(&a, "run", "--cwd", "--tty", "x");
    struct gbx_run_opts o;
    parse_ok(&a, &o);
    assert_string_equal(o.cwd, "--tty");
    assert_int_equal(o.tty, -1);
}

static void test_unknown_option(void **state)
{
    struct args a;
    (void)state;
    ARGS(&a, "run", "--bogus", "sh");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "unknown option '--bogus'");
    ARGS(&a, "run", "-x", "sh");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "unknown option '-x'");
    /* inside a cluster the unknown letter is named, not the previous word */
    ARGS(&a, "run", "-xy", "sh");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "unknown option '-x'");
    ARGS(&a, "run", "-p", "3", "-qm", "sh");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "unknown option '-q'");
    ARGS(&a, "run", "-m", "8M", "--memoryx=1G", "sh");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--memoryx");
    ARGS(&a, "run", "--help=yes", "sh");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--help=yes");
}

static void test_no_command(void **state)
{
    struct args a;
    (void)state;
    ARGS(&a, "run");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "no command given");
    ARGS(&a, "run", "-m", "1G", "--tty");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "no command given");
    ARGS(&a, "run", "--");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "no command given");
}

static void test_bad_values(void **state)
{
    struct args a;
    struct gbx_run_opts o;
    (void)state;

    ARGS(&a, "run", "--memory", "1k", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "invalid --memory '1k'");
    ARGS(&a, "run", "--memory", "4194303", "x"); /* one byte under 4M */
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--memory");
    ARGS(&a, "run", "--memory", "4M", "x");
    parse_ok(&a, &o);
    assert_int_equal(o.memory_bytes, 4ull << 20);
    ARGS(&a, "run", "-m", "lots", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "invalid --memory 'lots'");
    ARGS(&a, "run", "-m", "", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--memory");
    ARGS(&a, "run", "-m", "99999999999T", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--memory");

    ARGS(&a, "run", "--pids", "0", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "invalid --pids '0'");
    ARGS(&a, "run", "--pids", "4194305", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--pids");
    ARGS(&a, "run", "--pids", "-1", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--pids");
    ARGS(&a, "run", "--pids", "10k", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--pids");
    ARGS(&a, "run", "--pids", "4194304", "x");
    parse_ok(&a, &o);
    assert_int_equal(o.pids, 4194304);

    ARGS(&a, "run", "--cpus", "0", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "invalid --cpus '0'");
    ARGS(&a, "run", "--cpus", "0.0001", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--cpus");
    /* below the kernel's smallest quota (1 ms per 100 ms) */
    ARGS(&a, "run", "--cpus", "0.005", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "invalid --cpus '0.005'");
    ARGS(&a, "run", "--cpus", "0.01", "x");
    parse_ok(&a, &o);
    assert_int_equal(o.cpu_millis, 10);
    ARGS(&a, "run", "--cpus", "1025", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--cpus");
    ARGS(&a, "run", "--cpus", "half", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--cpus");

    ARGS(&a, "run", "--disk", "1023k", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "invalid --disk '1023k'");
    ARGS(&a, "run", "--disk", "big", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--disk");

    ARGS(&a, "run", "--timeout", "0", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "invalid --timeout '0'");
    ARGS(&a, "run", "--timeout", "0ms", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--timeout");
    ARGS(&a, "run", "--timeout", "0.1ms", "x"); /* rounds to zero */
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--timeout");
    ARGS(&a, "run", "--timeout", "5d", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--timeout");

    ARGS(&a, "run", "--env", "BAD", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "invalid --env 'BAD'");
    ARGS(&a, "run", "-e", "1A=x", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--env");
    ARGS(&a, "run", "-e", "=x", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--env");
    ARGS(&a, "run", "-e", "A-B=1", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--env");

    ARGS(&a, "run", "--cwd", "", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--cwd must not be empty");
    ARGS(&a, "run", "--user=", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--user must not be empty");
    ARGS(&a, "run", "--template", "Bad!", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "invalid --template 'Bad!'");
    ARGS(&a, "run", "--template", "-x", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--template");
    ARGS(&a, "run", "--template", "", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--template");

    /* the first bad value stops parsing; later options are not looked at */
    ARGS(&a, "run", "--pids", "0", "--bogus", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--pids");
}

static void test_help(void **state)
{
    struct args a;
    struct gbx_run_opts o;
    (void)state;
    ARGS(&a, "run", "--help");
    parse_ok(&a, &o);
    assert_int_equal(o.help, 1);
    ARGS(&a, "run", "-h");
    parse_ok(&a, &o);
    assert_int_equal(o.help, 1);
    /* --help wins over a missing command and over later bad options */
    ARGS(&a, "run", "-m", "1G", "-h", "--pids", "0");
    parse_ok(&a, &o);
    assert_int_equal(o.help, 1);
    /* ... but not over earlier ones */
    ARGS(&a, "run", "--pids", "0", "--help");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--pids");
    /* after the command, --help is the command's */
    ARGS(&a, "run", "man", "--help");
    parse_ok(&a, &o);
    assert_int_equal(o.help, 0);
    ASSERT_CMD(&o, "man", "--help");
}

static void test_twice(void **state)
{
    struct args a, b;
    struct gbx_run_opts o1, o2;
    (void)state;

    ARGS(&a, "run", "-m", "1G", "-e", "A=1", "--tty", "sh", "-c", "x");
    ARGS(&b, "run", "-p", "9", "true");
    parse_ok(&a, &o1);
    parse_ok(&b, &o2);
    /* nothing carried over from the first call */
    assert_int_equal(o2.memory_bytes, 0);
    assert_int_equal(o2.nenv, 0);
    assert_int_equal(o2.tty, -1);
    assert_int_equal(o2.pids, 9);
    ASSERT_CMD(&o2, "true");
    /* and the first result is intact */
    assert_int_equal(o1.memory_bytes, 1ull << 30);
    ASSERT_CMD(&o1, "sh", "-c", "x");

    /* a call that stops in the middle of a group of short options ("-h" of "-hx") leaves
     * getopt's internal state mid-word; the next call must start afresh */
    ARGS(&a, "run", "-hx", "sh");
    parse_ok(&a, &o1);
    assert_int_equal(o1.help, 1);
    ARGS(&b, "run", "-p", "3", "ls");
    parse_ok(&b, &o2);
    assert_int_equal(o2.pids, 3);
    assert_int_equal(o2.help, 0);
    ASSERT_CMD(&o2, "ls");

    /* after an error, too */
    ARGS(&a, "run", "--bogus", "x");
    parse_fail(&a, EINVAL, GBX_ERR_INVALID, "--bogus");
    ARGS(&a, "run", "--no-tty", "id");
    parse_ok(&a, &o1);
    assert_int_equal(o1.tty, 0);
    ASSERT_CMD(&o1, "id");

    /* many times over */
    for (int i = 0; i < 100; i++) {
        ARGS(&a, "run", "--pids", "2", "--", "x", "-m", "1");
        parse_ok(&a, &o1);
        assert_int_equal(o1.pids, 2);
        assert_int_equal(o1.memory_bytes, 0);
        ASSERT_CMD(&o1, "x", "-m", "1");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),        cmocka_unit_test(test_short_options),
        cmocka_unit_test(test_long_options),    cmocka_unit_test(test_tty),
        cmocka_unit_test(test_repeated_env),    cmocka_unit_test(test_double_dash),
        cmocka_unit_test(test_stop_at_command), cmocka_unit_test(test_missing_value),
        cmocka_unit_test(test_unknown_option),  cmocka_unit_test(test_no_command),
        cmocka_unit_test(test_bad_values),      cmocka_unit_test(test_help),
        cmocka_unit_test(test_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
