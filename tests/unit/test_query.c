/* SPDX-License-Identifier: MIT */
/* Query strings of the list routes (src/base/query.c): integers at and beyond their bounds,
 * text, booleans, repeatable and callback parameters, unknown and repeated parameters,
 * percent-decoding in both readings (libevent's and the form's), and malformed queries. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/query.h"

/* The parameters of GET /v1/sandboxes, plus a boolean and a sequence number. */
struct outs {
    const char *labels[2];
    size_t nlabels;
    const char *template_name, *cursor;
    uint64_t limit, after;
    int follow;
};

#define NPARAMS 6

static void table(struct outs *o, struct gbx_query_param p[NPARAMS])
{
    memset(o, 0, sizeof(*o));
    o->limit = 100; /* the route's default */
    o->after = 7;
    o->follow = -1;
    const struct gbx_query_param t[NPARAMS] = {
        {.name = "label", .kind = GBX_QUERY_STRS, .out = o->labels, .count = &o->nlabels, .cap = 2},
        {.name = "template", .kind = GBX_QUERY_STR, .out = &o->template_name},
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &o->limit, .min = 1, .max = 1000},
        {.name = "cursor", .kind = GBX_QUERY_STR, .out = &o->cursor},
        {.name = "after", .kind = GBX_QUERY_U64, .out = &o->after, .max = INT64_MAX},
        {.name = "follow", .kind = GBX_QUERY_BOOL, .out = &o->follow},
    };
    memcpy(p, t, sizeof(t));
}

/* Parse s with the table above: the result, and *msg the error's message (or NULL). */
static int parse(struct gbx_query *q, const char *s, unsigned flags, struct outs *o, char *msg,
                 size_t msgsz)
{
    struct gbx_query_param p[NPARAMS];
    table(o, p);
    struct gbx_err *err = NULL;
    int r = gbx_query_parse(q, s, p, NPARAMS, flags, &err);
    msg[0] = '\0';
    if (r < 0) {
        assert_int_equal(r, -1);
        assert_non_null(err);
        assert_int_equal(err->kind, GBX_ERR_INVALID);
        assert_int_equal(err->errnum, EINVAL);
        snprintf(msg, msgsz, "%s", err->msg);
    } else {
        assert_int_equal(r, 0);
        assert_null(err);
    }
    gbx_err_free(err);
    return r;
}

static void test_empty(void **state)
{
    struct gbx_query q = {0};
    struct outs o;
    char msg[256];
    assert_int_equal(parse(&q, NULL, 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.limit, 100);
    assert_int_equal(o.after, 7);
    assert_int_equal(o.follow, -1);
    assert_null(o.template_name);
    assert_int_equal(o.nlabels, 0);
    assert_int_equal(parse(&q, "", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.limit, 100);
    assert_null(q.buf);
    assert_int_equal(parse(&q, "", GBX_QUERY_FORM, &o, msg, sizeof(msg)), 0);
    /* an empty query resets a repeatable parameter's count */
    struct gbx_query_param p[NPARAMS];
    table(&o, p);
    o.nlabels = 5;
    assert_int_equal(gbx_query_parse(&q, "", p, NPARAMS, 0, NULL), 0);
    assert_int_equal(o.nlabels, 0);
    gbx_query_release(&q);
    gbx_query_release(&q); /* twice is fine */
}

static void test_integers(void **state)
{
    struct gbx_query q = {0};
    struct outs o;
    char msg[256];
    assert_int_equal(parse(&q, "limit=1", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.limit, 1);
    assert_int_equal(parse(&q, "limit=1000", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.limit, 1000);
    assert_int_equal(parse(&q, "limit=0", 0, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "'limit' must be an integer from 1 to 1000");
    assert_int_equal(o.limit, 100); /* a refused value is not stored */
    assert_int_equal(parse(&q, "limit=1001", 0, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "'limit' must be an integer from 1 to 1000");
    assert_int_equal(parse(&q, "limit=18446744073709551616", 0, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "'limit' must be an integer from 1 to 1000");
    assert_int_equal(parse(&q, "after=0", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.after, 0);
    assert_int_equal(parse(&q, "after=9223372036854775807", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.after, INT64_MAX);
    assert_int_equal(parse(&q, "after=9223372036854775808", 0, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "'after' must be an integer from 0 to 9223372036854775807");
    assert_int_equal(o.after, 7);
    gbx_query_release(&q);
}

static void test_not_numbers(void **state)
{
    struct gbx_query q = {0};
    struct outs o;
    char msg[256];
    static const char *const bad[] = {
        "limit=",     "limit=abc", "limit=-1",   "limit=1.5", "limit=5x",
        "limit=0x10", "limit=+5",  "limit=%205", "limit= 5",  "limit=1e3",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(&q, bad[i], 0, &o, msg, sizeof(msg)), -1);
        assert_string_equal(msg, "'limit' must be an integer from 1 to 1000");
        assert_int_equal(o.limit, 100);
    }
    assert_int_equal(parse(&q, "after=-1", 0, &o, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "'after'"));
    gbx_query_release(&q);
}

static void test_clamp(void **state)
{
    uint64_t limit = 100;
    const struct gbx_query_param p[] = {
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = 1000, .clamp = 1},
    };
    struct gbx_query q = {0};
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_query_parse(&q, "limit=5000", p, 1, 0, &err), 0);
    assert_int_equal(limit, 1000);
    assert_int_equal(gbx_query_parse(&q, "limit=18446744073709551615", p, 1, 0, &err), 0);
    assert_int_equal(limit, 1000);
    assert_int_equal(gbx_query_parse(&q, "limit=1000", p, 1, 0, &err), 0);
    assert_int_equal(limit, 1000);
    assert_int_equal(gbx_query_parse(&q, "limit=3", p, 1, 0, &err), 0);
    assert_int_equal(limit, 3);
    assert_null(err);
    assert_int_equal(gbx_query_parse(&q, "limit=0", p, 1, 0, &err), -1);
    assert_string_equal(err->msg, "'limit' must be a positive integer");
    assert_int_equal(limit, 3);
    gbx_err_free(err);
    err = NULL;
    /* beyond even UINT64_MAX is not a number it can clamp */
    assert_int_equal(gbx_query_parse(&q, "limit=18446744073709551616", p, 1, 0, &err), -1);
    assert_string_equal(err->msg, "'limit' must be a positive integer");
    gbx_err_free(err);
    gbx_query_release(&q);
}

static void test_strings_and_bools(void **state)
{
    struct gbx_query q = {0};
    struct outs o;
    char msg[256];
    assert_int_equal(parse(&q, "template=base&cursor=12.abc&follow=true", 0, &o, msg, sizeof(msg)),
                     0);
    assert_string_equal(o.template_name, "base");
    assert_string_equal(o.cursor, "12.abc");
    assert_int_equal(o.follow, 1);
    assert_int_equal(parse(&q, "follow=1", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.follow, 1);
    assert_int_equal(parse(&q, "follow=0", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.follow, 0);
    assert_int_equal(parse(&q, "follow=false", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.follow, 0);
    static const char *const bad[] = {"follow=yes", "follow=TRUE", "follow=", "follow=2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(&q, bad[i], 0, &o, msg, sizeof(msg)), -1);
        assert_string_equal(msg, "'follow' must be 1, true, 0 or false");
        assert_int_equal(o.follow, -1);
    }
    /* an empty text value is a value */
    assert_int_equal(parse(&q, "template=", 0, &o, msg, sizeof(msg)), 0);
    assert_string_equal(o.template_name, "");
    gbx_query_release(&q);
}

static void test_repeated_and_missing(void **state)
{
    struct gbx_query q = {0};
    struct outs o;
    char msg[256];
    /* the last one counts, and each is checked */
    assert_int_equal(parse(&q, "limit=5&template=a&limit=7&template=b", 0, &o, msg, sizeof(msg)),
                     0);
    assert_int_equal(o.limit, 7);
    assert_string_equal(o.template_name, "b");
    assert_int_equal(parse(&q, "limit=5&limit=0", 0, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "'limit' must be an integer from 1 to 1000");
    assert_int_equal(parse(&q, "limit=0&limit=5", 0, &o, msg, sizeof(msg)), -1);
    /* the parameters not given keep their defaults */
    assert_int_equal(parse(&q, "cursor=x", 0, &o, msg, sizeof(msg)), 0);
    assert_string_equal(o.cursor, "x");
    assert_int_equal(o.limit, 100);
    assert_int_equal(o.after, 7);
    assert_int_equal(o.follow, -1);
    assert_null(o.template_name);
    assert_int_equal(o.nlabels, 0);
    gbx_query_release(&q);
}

static void test_repeatable(void **state)
{
    struct gbx_query q = {0};
    struct outs o;
    char msg[256];
    assert_int_equal(parse(&q, "label=team=a&limit=3&label=tier=dev", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.nlabels, 2);
    assert_string_equal(o.labels[0], "team=a"); /* only the first '=' splits the pair */
    assert_string_equal(o.labels[1], "tier=dev");
    assert_int_equal(o.limit, 3);
    assert_int_equal(parse(&q, "label=a=1&label=b=2&label=c=3", 0, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "'label' may be given at most 2 times");
    assert_int_equal(o.nlabels, 2);
    /* parsing again starts the count again */
    assert_int_equal(parse(&q, "label=x=1", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.nlabels, 1);
    assert_string_equal(o.labels[0], "x=1");
    gbx_query_release(&q);
}

static void test_unknown(void **state)
{
    struct gbx_query q = {0};
    struct outs o;
    char msg[256];
    assert_int_equal(parse(&q, "limit=5&colour=red", 0, &o, msg, sizeof(msg)), -1);
    assert_string_equal(
        msg, "unknown query parameter 'colour' (expected label, template, limit, cursor, after, "
             "follow)");
    /* names are compared exactly */
    assert_int_equal(parse(&q, "Limit=5", 0, &o, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "'Limit'"));
    /* ignored: the rest is still read, and an unknown one's value is not checked */
    assert_int_equal(parse(&q, "colour=red&limit=5&x=%zz&follow=1", GBX_QUERY_IGNORE_UNKNOWN, &o,
                           msg, sizeof(msg)),
                     0);
    assert_int_equal(o.limit, 5);
    assert_int_equal(o.follow, 1);
    /* a known one's value still is */
    assert_int_equal(
        parse(&q, "colour=red&limit=0", GBX_QUERY_IGNORE_UNKNOWN, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "'limit' must be an integer from 1 to 1000");
    /* a table that takes nothing */
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_query_parse(&q, "a=1", NULL, 0, 0, &err), -1);
    assert_string_equal(err->msg, "unknown query parameter 'a' (expected none)");
    gbx_err_free(err);
    /* what the client sent is shown bounded and as printable ASCII only */
    char longname[200];
    memset(longname, 'n', 100);
    strcpy(longname + 100, "=1");
    assert_int_equal(parse(&q, longname, 0, &o, msg, sizeof(msg)), -1);
    assert_non_null(
        strstr(msg, "'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...'"));
    assert_int_equal(parse(&q, "a%01\xff=1", GBX_QUERY_FORM, &o, msg, sizeof(msg)), -1);
    assert_string_equal(
        msg, "unknown query parameter 'a?\?' (expected label, template, limit, cursor, after, "
             "follow)");
    gbx_query_release(&q);
}

static void test_percent_decoding(void **state)
{
    struct gbx_query q = {0};
    struct outs o;
    char msg[256];
    /* libevent's reading: values decoded, '+' a space, bad escapes kept, %00 ends the value */
    assert_int_equal(parse(&q, "template=a%20b+c%2Bd%3D", 0, &o, msg, sizeof(msg)), 0);
    assert_string_equal(o.template_name, "a b c+d=");
    assert_int_equal(parse(&q, "template=%zz%4", 0, &o, msg, sizeof(msg)), 0);
    assert_string_equal(o.template_name, "%zz%4");
    assert_int_equal(parse(&q, "template=ab%00cd", 0, &o, msg, sizeof(msg)), 0);
    assert_string_equal(o.template_name, "ab");
    assert_int_equal(parse(&q, "limit=%31%30", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.limit, 10);
    assert_int_equal(parse(&q, "label=k%3Dv", 0, &o, msg, sizeof(msg)), 0);
    assert_string_equal(o.labels[0], "k=v");
    /* ... but names are taken as they are */
    assert_int_equal(parse(&q, "tem%70late=x", 0, &o, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "unknown query parameter 'tem%70late'"));

    /* the form reading decodes names too, and refuses bad escapes */
    assert_int_equal(parse(&q, "tem%70late=a%20b+c", GBX_QUERY_FORM, &o, msg, sizeof(msg)), 0);
    assert_string_equal(o.template_name, "a b c");
    assert_int_equal(parse(&q, "template=%2541", GBX_QUERY_FORM, &o, msg, sizeof(msg)), 0);
    assert_string_equal(o.template_name, "%41"); /* decoded once only */
    static const char *const bad[] = {"template=%zz",     "template=%4",   "template=a%",
                                      "template=ab%00cd", "tem%zzplate=x", "x%=1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(
            parse(&q, bad[i], GBX_QUERY_FORM | GBX_QUERY_IGNORE_UNKNOWN, &o, msg, sizeof(msg)), -1);
        assert_non_null(strstr(msg, "malformed query string: '"));
        assert_non_null(strstr(msg, bad[i]));
        assert_non_null(strstr(msg, "holds a bad escape"));
    }
    gbx_query_release(&q);
}

static void test_malformed(void **state)
{
    struct gbx_query q = {0};
    struct outs o;
    char msg[256];
    /* libevent's reading: every pair NAME=VALUE, no empty ones but one trailing '&' */
    assert_int_equal(parse(&q, "limit", 0, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "malformed query string: 'limit' is not NAME=VALUE");
    assert_int_equal(parse(&q, "=5", 0, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "malformed query string: '=5' has no name (expected NAME=VALUE)");
    static const char *const empty[] = {"&limit=5", "limit=5&&follow=1", "&", "limit=5&&"};
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        assert_int_equal(parse(&q, empty[i], 0, &o, msg, sizeof(msg)), -1);
        assert_non_null(strstr(msg, "malformed query string: an empty parameter"));
    }
    assert_int_equal(parse(&q, "limit=5&", 0, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.limit, 5);
    /* the form reading skips empty pairs; a bare name has an empty value */
    assert_int_equal(parse(&q, "&limit=5&&template&", GBX_QUERY_FORM, &o, msg, sizeof(msg)), 0);
    assert_int_equal(o.limit, 5);
    assert_string_equal(o.template_name, "");
    assert_int_equal(parse(&q, "limit", GBX_QUERY_FORM, &o, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "'limit' must be an integer from 1 to 1000");
    /* ... and an empty name is a name it does not know */
    assert_int_equal(parse(&q, "=5", GBX_QUERY_FORM, &o, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "unknown query parameter ''"));
    assert_int_equal(
        parse(&q, "=5", GBX_QUERY_FORM | GBX_QUERY_IGNORE_UNKNOWN, &o, msg, sizeof(msg)), 0);
    gbx_query_release(&q);
}

/* A callback parameter: E2B's order=asc|desc. */
static const char *order_fn(void *out, const char *value)
{
    if (strcmp(value, "asc") != 0 && strcmp(value, "desc") != 0)
        return "asc or desc";
    *(int *)out = strcmp(value, "asc") == 0;
    return NULL;
}

static void test_callback(void **state)
{
    int asc = -1;
    const struct gbx_query_param p[] = {
        {.name = "order", .kind = GBX_QUERY_FN, .out = &asc, .fn = order_fn},
    };
    struct gbx_query q = {0};
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_query_parse(&q, "order=asc", p, 1, 0, &err), 0);
    assert_int_equal(asc, 1);
    assert_int_equal(gbx_query_parse(&q, "order=desc", p, 1, GBX_QUERY_FORM, &err), 0);
    assert_int_equal(asc, 0);
    assert_int_equal(gbx_query_parse(&q, "order=%61sc", p, 1, GBX_QUERY_FORM, &err), 0);
    assert_int_equal(asc, 1);
    assert_null(err);
    assert_int_equal(gbx_query_parse(&q, "order=up", p, 1, 0, &err), -1);
    assert_string_equal(err->msg, "'order' must be asc or desc");
    assert_int_equal(asc, 1);
    gbx_err_free(err);
    gbx_query_release(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_not_numbers),
        cmocka_unit_test(test_clamp),
        cmocka_unit_test(test_strings_and_bools),
        cmocka_unit_test(test_repeated_and_missing),
        cmocka_unit_test(test_repeatable),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_percent_decoding),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
