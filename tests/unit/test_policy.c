/* SPDX-License-Identifier: MIT */
/* Unit tests for src/egress/policy.c: parsing, serialization, precedence, the three check
 * stages, explicit addresses, special ranges and the E2B mapping. Addresses here are only
 * numbers in memory: nothing is sent anywhere. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "egress/policy.h"

/* ---- helpers -------------------------------------------------------------------------- */

static json_t *load(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (j == NULL)
        fail_msg("bad test JSON '%s': %s", text, je.text);
    return j;
}

static struct gbx_egress_policy *pol_mode(const char *text, enum gbx_egress_mode dflt)
{
    json_t *j = load(text);
    struct gbx_egress_policy *p = NULL;
    struct gbx_err *err = NULL;
    int r = gbx_egress_policy_parse(j, dflt, &p, &err);
    if (r != 0)
        fail_msg("parse '%s': %s", text, err->msg);
    assert_null(err);
    json_decref(j);
    return p;
}

static struct gbx_egress_policy *pol(const char *text)
{
    return pol_mode(text, GBX_EGRESS_POLICY);
}

static void expect_parse_error(const char *text, const char *msg)
{
    json_t *j = load(text);
    struct gbx_egress_policy *p = NULL;
    struct gbx_err *err = NULL;
    print_message("%.200s\n", text);
    assert_int_equal(gbx_egress_policy_parse(j, GBX_EGRESS_POLICY, &p, &err), -1);
    assert_null(p);
    assert_non_null(err);
    assert_int_equal(err->kind, GBX_ERR_INVALID);
    assert_int_equal(err->errnum, EINVAL);
    assert_string_equal(err->msg, msg);
    gbx_err_free(err);
    json_decref(j);
}

static struct in_addr ip(const char *s)
{
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1)
        fail_msg("bad test address '%s'", s);
    return a;
}

/* "allow 3", "deny -1", "allow 0 l7" */
static char *show(const struct gbx_egress_decision *d, char *buf, size_t n)
{
    snprintf(buf, n, "%s %d%s", d->allow ? "allow" : "deny", d->rule, d->l7 ? " l7" : "");
    return buf;
}

struct conn_case {
    const char *name; /* or NULL */
    const char *addr; /* or NULL */
    uint16_t port;
    const char *want;
};

static void run_conn(const char *policy, const struct conn_case *c, size_t n)
{
    struct gbx_egress_policy *p = pol(policy);
    for (size_t i = 0; i < n; i++) {
        struct gbx_egress_decision d;
        struct in_addr a;
        char b[64];
        if (c[i].addr)
            a = ip(c[i].addr);
        gbx_egress_policy_check_conn(p, c[i].name, c[i].addr ? &a : NULL, c[i].port, &d);
        print_message("%s: conn %s %s :%u\n", policy, c[i].name ? c[i].name : "-",
                      c[i].addr ? c[i].addr : "-", c[i].port);
        assert_string_equal(show(&d, b, sizeof(b)), c[i].want);
    }
    gbx_egress_policy_free(p);
}
#define RUN_CONN(policy, ...)                                                                      \
    do {                                                                                           \
        static const struct conn_case c_[] = {__VA_ARGS__};                                        \
        run_conn(policy, c_, sizeof(c_) / sizeof(c_[0]));                                          \
    } while (0)

struct name_case {
    const char *name;
    const char *want;
};

static void run_name(const char *policy, const struct name_case *c, size_t n)
{
    struct gbx_egress_policy *p = pol(policy);
    for (size_t i = 0; i < n; i++) {
        struct gbx_egress_decision d;
        char b[64];
        gbx_egress_policy_check_name(p, c[i].name, &d);
        print_message("%s: name %s\n", policy, c[i].name ? c[i].name : "(null)");
        assert_string_equal(show(&d, b, sizeof(b)), c[i].want);
    }
    gbx_egress_policy_free(p);
}
#define RUN_NAME(policy, ...)                                                                      \
    do {                                                                                           \
        static const struct name_case c_[] = {__VA_ARGS__};                                        \
        run_name(policy, c_, sizeof(c_) / sizeof(c_[0]));                                          \
    } while (0)

struct req_case {
    const char *method;
    const char *path;
    const char *want;
};

static void run_req(const char *policy, const char *name, const char *addr, uint16_t port,
                    const struct req_case *c, size_t n)
{
    struct gbx_egress_policy *p = pol(policy);
    for (size_t i = 0; i < n; i++) {
        struct gbx_egress_decision d;
        struct in_addr a;
        char b[64];
        if (addr) {
            a = ip(addr);
            gbx_egress_policy_check_request_addr(p, name, &a, port, c[i].method, c[i].path, &d);
        } else {
            gbx_egress_policy_check_request(p, name, port, c[i].method, c[i].path, &d);
        }
        print_message("%s: %s %s\n", policy, c[i].method ? c[i].method : "(null)",
                      c[i].path ? c[i].path : "(null)");
        assert_string_equal(show(&d, b, sizeof(b)), c[i].want);
    }
    gbx_egress_policy_free(p);
}
#define RUN_REQ(policy, name, addr, port, ...)                                                     \
    do {                                                                                           \
        static const struct req_case c_[] = {__VA_ARGS__};                                         \
        run_req(policy, name, addr, port, c_, sizeof(c_) / sizeof(c_[0]));                         \
    } while (0)

/* ---- modes, validators ---------------------------------------------------------------- */

static void test_modes_names(void **state)
{
    enum gbx_egress_mode m;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gbx_egress_mode_parse(gbx_egress_mode_name(i), &m), 0);
        assert_int_equal(m, i);
    }
    assert_string_equal(gbx_egress_mode_name(GBX_EGRESS_POLICY), "policy");
    assert_string_equal(gbx_egress_mode_name(GBX_EGRESS_NONE), "none");
    assert_string_equal(gbx_egress_mode_name(GBX_EGRESS_OPEN), "open");
    assert_string_equal(gbx_egress_mode_name((enum gbx_egress_mode)7), "?");
    assert_int_equal(gbx_egress_mode_parse("Open", &m), -EINVAL);
    assert_int_equal(gbx_egress_mode_parse("", &m), -EINVAL);
    assert_int_equal(gbx_egress_mode_parse(NULL, &m), -EINVAL);
}

static void test_validators(void **state)
{
    static const char *const names_ok[] = {
        "a",         "example.com",   "API.Example.COM", "example.com.", "xn--bcher-kva.example",
        "a-b.c-d.e", "1password.com", "123.example.com", "localhost",
    };
    static const char *const names_bad[] = {
        "",        ".",       "a..b",    ".a",         "-a.com", "a-.com",        "a_b.com",
        "a b.com", "*.a.com", "1.2.3.4", "10.0.0.0/8", "a.123",  "example.com..", "a/b",
    };
    for (size_t i = 0; i < sizeof(names_ok) / sizeof(names_ok[0]); i++)
        assert_int_equal(gbx_egress_name_valid(names_ok[i]), 0);
    for (size_t i = 0; i < sizeof(names_bad) / sizeof(names_bad[0]); i++) {
        print_message("'%s'\n", names_bad[i]);
        assert_int_equal(gbx_egress_name_valid(names_bad[i]), -EINVAL);
    }
    assert_int_equal(gbx_egress_name_valid(NULL), -EINVAL);

    char label63[64], label64[65], long253[260];
    memset(label63, 'a', 63);
    label63[63] = '\0';
    memset(label64, 'a', 64);
    label64[64] = '\0';
    assert_int_equal(gbx_egress_name_valid(label63), 0);
    assert_int_equal(gbx_egress_name_valid(label64), -EINVAL);
    /* 4 labels of 63 + 3 dots = 255: too long; 253 is the limit */
    snprintf(long253, sizeof(long253), "%s.%s.%s.%.61s", label63, label63, label63, label63);
    assert_int_equal(strlen(long253), 253);
    assert_int_equal(gbx_egress_name_valid(long253), 0);
    strcat(long253, ".");
    assert_int_equal(gbx_egress_name_valid(long253), 0); /* trailing dot */
    long253[253] = 'a';
    assert_int_equal(gbx_egress_name_valid(long253), -EINVAL);

    static const char *const hosts_ok[] = {
        "*",          "*.example.com", "*.COM",      "*.example.com.",  "10.1.2.3",
        "10.0.0.0/8", "0.0.0.0/0",     "1.2.3.4/32", "api.example.com",
    };
    static const char *const hosts_bad[] = {
        "",
        "*.",
        "**",
        "*.*.com",
        "foo*.com",
        "*example.com",
        "1.2.3.4.",
        "256.1.1.1",
        "1.2.3",
        "01.2.3.4",
        "10.0.0.0/33",
        "10.0.0.0/",
        "10.0.0.0/08",
        "10.1.0.0/8",
        "*.1.2.3",
        "1.2.3.4/8/8",
    };
    for (size_t i = 0; i < sizeof(hosts_ok) / sizeof(hosts_ok[0]); i++) {
        print_message("'%s'\n", hosts_ok[i]);
        assert_int_equal(gbx_egress_host_valid(hosts_ok[i]), 0);
    }
    for (size_t i = 0; i < sizeof(hosts_bad) / sizeof(hosts_bad[0]); i++) {
        print_message("'%s'\n", hosts_bad[i]);
        assert_int_equal(gbx_egress_host_valid(hosts_bad[i]), -EINVAL);
    }

    static const char *const secrets_ok[] = {"gh", "GH_TOKEN", "a.b-c_d", "0", "x."};
    static const char *const secrets_bad[] = {"", ".gh", "a b", "a/b", "é"};
    for (size_t i = 0; i < sizeof(secrets_ok) / sizeof(secrets_ok[0]); i++)
        assert_int_equal(gbx_egress_secret_name_valid(secrets_ok[i]), 0);
    for (size_t i = 0; i < sizeof(secrets_bad) / sizeof(secrets_bad[0]); i++)
        assert_int_equal(gbx_egress_secret_name_valid(secrets_bad[i]), -EINVAL);
    char s64[66];
    memset(s64, 'x', 64);
    s64[64] = '\0';
    assert_int_equal(gbx_egress_secret_name_valid(s64), 0);
    s64[64] = 'x';
    s64[65] = '\0';
    assert_int_equal(gbx_egress_secret_name_valid(s64), -EINVAL);
}

/* ---- parsing -------------------------------------------------------------------------- */

static void test_parse_defaults(void **state)
{
    struct gbx_egress_policy *p = NULL;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_egress_policy_parse(NULL, GBX_EGRESS_OPEN, &p, &err), 0);
    assert_int_equal(p->mode, GBX_EGRESS_OPEN);
    assert_int_equal(p->nrules, 0);
    assert_int_equal(p->nsecrets, 0);
    gbx_egress_policy_free(p);

    json_t *null = json_null();
    assert_int_equal(gbx_egress_policy_parse(null, GBX_EGRESS_NONE, &p, &err), 0);
    assert_int_equal(p->mode, GBX_EGRESS_NONE);
    gbx_egress_policy_free(p);
    json_decref(null);

    p = pol_mode("{}", GBX_EGRESS_OPEN);
    assert_int_equal(p->mode, GBX_EGRESS_OPEN);
    gbx_egress_policy_free(p);
    p = pol_mode("{\"mode\":null,\"rules\":null,\"secrets\":null}", GBX_EGRESS_OPEN);
    assert_int_equal(p->mode, GBX_EGRESS_OPEN);
    gbx_egress_policy_free(p);
    p = pol_mode("{\"mode\":\"none\"}", GBX_EGRESS_OPEN);
    assert_int_equal(p->mode, GBX_EGRESS_NONE);
    gbx_egress_policy_free(p);

    p = gbx_egress_policy_new(GBX_EGRESS_OPEN);
    assert_int_equal(p->mode, GBX_EGRESS_OPEN);
    assert_int_equal(p->nrules, 0);
    gbx_egress_policy_free(p);
    gbx_egress_policy_free(NULL);
}

static void test_parse_normalizes(void **state)
{
    struct gbx_egress_policy *p =
        pol("{\"mode\":\"open\",\"rules\":["
            "{\"host\":\"API.Example.COM.\",\"ports\":[443,\"8000-8100\",\"22\"],"
            "\"methods\":[\"get\",\"Post\"],\"path_prefix\":\"/v1/\"},"
            "{\"action\":\"deny\",\"host\":\"*.Evil.com\",\"ports\":25},"
            "{\"action\":\"deny\",\"host\":\"10.0.0.0/8\",\"ports\":\"1-1024\"}],"
            "\"secrets\":[\"gh\",\"openai_key\"]}");
    assert_int_equal(p->mode, GBX_EGRESS_OPEN);
    assert_int_equal(p->nrules, 5);
    for (int i = 0; i < 3; i++) {
        const struct gbx_egress_rule *r = &p->rules[i];
        assert_int_equal(r->allow, 1);
        assert_string_equal(r->host, "api.example.com");
        assert_int_equal(r->nmethods, 2);
        assert_string_equal(r->methods[0], "GET");
        assert_string_equal(r->methods[1], "POST");
        assert_string_equal(r->path_prefix, "/v1/");
    }
    assert_int_equal(p->rules[0].port_lo, 443);
    assert_int_equal(p->rules[0].port_hi, 443);
    assert_int_equal(p->rules[1].port_lo, 8000);
    assert_int_equal(p->rules[1].port_hi, 8100);
    assert_int_equal(p->rules[2].port_lo, 22);
    assert_int_equal(p->rules[2].port_hi, 22);
    assert_int_equal(p->rules[3].allow, 0);
    assert_string_equal(p->rules[3].host, "*.evil.com");
    assert_int_equal(p->rules[3].port_lo, 25);
    assert_null(p->rules[3].methods);
    assert_null(p->rules[3].path_prefix);
    assert_string_equal(p->rules[4].host, "10.0.0.0/8");
    assert_int_equal(p->rules[4].port_lo, 1);
    assert_int_equal(p->rules[4].port_hi, 1024);
    assert_int_equal(p->nsecrets, 2);
    assert_string_equal(p->secrets[1], "openai_key");
    gbx_egress_policy_free(p);
}

#define HOST_HELP "not a host name, a '*.suffix' wildcard, '*', an IPv4 address or an IPv4 CIDR"

static void test_parse_errors(void **state)
{
    static const struct {
        const char *json, *msg;
    } c[] = {
        {"[]", "expected a policy object, not an array"},
        {"{\"mode\":\"closed\"}", "mode: 'closed': expected 'policy', 'none' or 'open'"},
        {"{\"mode\":1}", "mode: expected a string, not a number"},
        {"{\"foo\":1}", "'foo': unknown key (expected mode, rules, secrets)"},
        {"{\"rules\":{}}", "rules: expected an array, not an object"},
        {"{\"rules\":[1]}", "rules[0]: expected an object, not a number"},
        {"{\"rules\":[{\"host\":\"a.com\"},{\"host\":\"b.com\"},{\"host\":\"*.\"}]}",
         "rules[2].host: '*.': " HOST_HELP},
        {"{\"rules\":[{\"host\":\"a..com\"}]}", "rules[0].host: 'a..com': " HOST_HELP},
        {"{\"rules\":[{\"host\":\"-a.com\"}]}", "rules[0].host: '-a.com': " HOST_HELP},
        {"{\"rules\":[{\"host\":\"a_b.com\"}]}", "rules[0].host: 'a_b.com': " HOST_HELP},
        {"{\"rules\":[{\"host\":\"\"}]}", "rules[0].host: '': " HOST_HELP},
        {"{\"rules\":[{\"host\":\"256.1.1.1\"}]}", "rules[0].host: '256.1.1.1': " HOST_HELP},
        {"{\"rules\":[{\"host\":\"10.0.0.0/33\"}]}", "rules[0].host: '10.0.0.0/33': " HOST_HELP},
        {"{\"rules\":[{\"host\":\"a\\n.com\"}]}", "rules[0].host: 'a?.com': " HOST_HELP},
        {"{\"rules\":[{\"host\":\"a.com\\u0000.evil\"}]}",
         "rules[0].host: contains a NUL character"},
        {"{\"rules\":[{\"host\":\"10.1.0.0/8\"}]}",
         "rules[0].host: '10.1.0.0/8': bits set beyond the prefix length (did you mean "
         "'10.0.0.0/8'?)"},
        {"{\"rules\":[{}]}", "rules[0].host: missing"},
        {"{\"rules\":[{\"host\":7}]}", "rules[0].host: expected a string, not a number"},
        {"{\"rules\":[{\"host\":\"a.com\",\"port\":1}]}",
         "rules[0]: 'port': unknown key (expected action, host, ports, methods, path_prefix)"},
        {"{\"rules\":[{\"host\":\"a.com\",\"action\":\"permit\"}]}",
         "rules[0].action: 'permit': expected 'allow' or 'deny'"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[0]}]}",
         "rules[0].ports[0]: 0: expected a port 1-65535 or a range 'lo-hi'"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[443,65536]}]}",
         "rules[0].ports[1]: 65536: expected a port 1-65535 or a range 'lo-hi'"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[\"9-3\"]}]}",
         "rules[0].ports[0]: '9-3': the range ends before it starts"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[\"http\"]}]}",
         "rules[0].ports[0]: 'http': expected a port 1-65535 or a range 'lo-hi'"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[\"1-2-3\"]}]}",
         "rules[0].ports[0]: '1-2-3': expected a port 1-65535 or a range 'lo-hi'"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[\"80 \"]}]}",
         "rules[0].ports[0]: '80 ': expected a port 1-65535 or a range 'lo-hi'"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[\"0-80\"]}]}",
         "rules[0].ports[0]: '0-80': expected a port 1-65535 or a range 'lo-hi'"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[true]}]}",
         "rules[0].ports[0]: expected a port 1-65535 or a range 'lo-hi', not a boolean"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[443.0]}]}",
         "rules[0].ports[0]: expected a port 1-65535 or a range 'lo-hi', not a number"},
        {"{\"rules\":[{\"host\":\"a.com\",\"ports\":[]}]}",
         "rules[0].ports: empty (leave it out for any port)"},
        {"{\"rules\":[{\"host\":\"a.com\",\"methods\":[1]}]}",
         "rules[0].methods[0]: expected a string, not a number"},
        {"{\"rules\":[{\"host\":\"a.com\",\"methods\":\"GET\"}]}",
         "rules[0].methods: expected an array of strings, not a string"},
        {"{\"rules\":[{\"host\":\"a.com\",\"methods\":[\"GET\",\"G T\"]}]}",
         "rules[0].methods[1]: 'G T': not an HTTP method"},
        {"{\"rules\":[{\"host\":\"a.com\",\"methods\":[]}]}",
         "rules[0].methods: empty (leave it out for any method)"},
        {"{\"rules\":[{\"host\":\"a.com\",\"path_prefix\":\"v1/\"}]}",
         "rules[0].path_prefix: 'v1/': must start with '/'"},
        {"{\"rules\":[{\"host\":\"a.com\",\"path_prefix\":\"/a/../b\"}]}",
         "rules[0].path_prefix: '/a/../b': not a normal path (printable, valid %XX escapes, no "
         "'?', '#', '//', '.' or '..' segments)"},
        {"{\"rules\":[{\"host\":\"a.com\",\"path_prefix\":\"/a?b\"}]}",
         "rules[0].path_prefix: '/a?b': not a normal path (printable, valid %XX escapes, no "
         "'?', '#', '//', '.' or '..' segments)"},
        {"{\"rules\":[{\"host\":\"a.com\",\"path_prefix\":\"/a%zz\"}]}",
         "rules[0].path_prefix: '/a%zz': not a normal path (printable, valid %XX escapes, no "
         "'?', '#', '//', '.' or '..' segments)"},
        {"{\"secrets\":\"gh\"}", "secrets: expected an array of names, not a string"},
        {"{\"secrets\":[\".gh\"]}",
         "secrets[0]: '.gh': not a secret name (1-64 of A-Z a-z 0-9 _ . -, not starting with "
         "'.')"},
        {"{\"secrets\":[\"gh\",\"gh\"]}", "secrets[1]: 'gh': listed twice"},
        {"{\"secrets\":[null]}", "secrets[0]: expected a string, not null"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        expect_parse_error(c[i].json, c[i].msg);
}

/* Builds {"rules":[n rules of `rule`]} or {"secrets":[...]}. */
static char *repeat(const char *head, const char *item, size_t n, const char *tail)
{
    size_t il = strlen(item), len = strlen(head) + n * (il + 1) + strlen(tail) + 1;
    char *s = malloc(len), *o = s;
    assert_non_null(s);
    o += sprintf(o, "%s", head);
    for (size_t i = 0; i < n; i++)
        o += sprintf(o, "%s%s", i ? "," : "", item);
    sprintf(o, "%s", tail);
    return s;
}

static void test_parse_limits(void **state)
{
    char *s = repeat("{\"rules\":[", "{\"host\":\"a.com\"}", 1024, "]}");
    struct gbx_egress_policy *p = pol(s);
    assert_int_equal(p->nrules, 1024);
    gbx_egress_policy_free(p);
    free(s);
    s = repeat("{\"rules\":[", "{\"host\":\"a.com\"}", 1025, "]}");
    expect_parse_error(s, "rules: more than 1024 rules");
    free(s);
    /* port lists count one rule each */
    s = repeat("{\"rules\":[{\"host\":\"b.com\"},{\"host\":\"a.com\",\"ports\":[", "80", 1024,
               "]}]}");
    expect_parse_error(s, "rules[1].ports: more than 1024 rules in all (each port entry counts "
                          "as one)");
    free(s);
    s = repeat("{\"secrets\":[", "\"x\"", 65, "]}");
    expect_parse_error(s, "secrets: more than 64 secrets");
    free(s);
    s = repeat("{\"rules\":[{\"host\":\"a.com\",\"methods\":[", "\"GET\"", 33, "]}]}");
    expect_parse_error(s, "rules[0].methods: more than 32 methods");
    free(s);

    char host[300], json[400];
    memset(host, 'a', sizeof(host));
    for (int i = 63; i < 253; i += 64)
        host[i] = '.';
    host[253] = '\0';
    snprintf(json, sizeof(json), "{\"rules\":[{\"host\":\"%s\"}]}", host);
    p = pol(json);
    assert_int_equal(strlen(p->rules[0].host), 253);
    gbx_egress_policy_free(p);
    host[253] = 'a';
    host[254] = '\0';
    snprintf(json, sizeof(json), "{\"rules\":[{\"host\":\"%s\"}]}", host);
    expect_parse_error(json,
                       "rules[0].host: "
                       "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa....': "
                       "longer than 253 characters");

    char path[1100], pjson[1200];
    memset(path, 'p', sizeof(path));
    path[0] = '/';
    path[1024] = '\0';
    snprintf(pjson, sizeof(pjson), "{\"rules\":[{\"host\":\"a.com\",\"path_prefix\":\"%s\"}]}",
             path);
    p = pol(pjson);
    gbx_egress_policy_free(p);
    path[1024] = 'p';
    path[1025] = '\0';
    snprintf(pjson, sizeof(pjson), "{\"rules\":[{\"host\":\"a.com\",\"path_prefix\":\"%s\"}]}",
             path);
    expect_parse_error(pjson, "rules[0].path_prefix: longer than 1024 characters");
}

static void test_roundtrip(void **state)
{
    const char *text =
        "{\"mode\":\"open\",\"rules\":["
        "{\"action\":\"allow\",\"host\":\"api.example.com\",\"ports\":[443],"
        "\"methods\":[\"GET\",\"POST\"],\"path_prefix\":\"/v1/\"},"
        "{\"action\":\"deny\",\"host\":\"*.example.com\",\"ports\":[\"8000-8100\"]},"
        "{\"action\":\"allow\",\"host\":\"*\"},"
        "{\"action\":\"deny\",\"host\":\"10.0.0.0/8\"},"
        "{\"action\":\"allow\",\"host\":\"10.1.2.3\",\"path_prefix\":\"/%7Euser/\"}],"
        "\"secrets\":[\"gh\",\"openai\"]}";
    struct gbx_egress_policy *p = pol(text);
    json_t *j = gbx_egress_policy_json(p);
    char *dumped = json_dumps(j, JSON_COMPACT);
    assert_string_equal(dumped, text); /* already in the stored form */
    free(dumped);

    struct gbx_egress_policy *q = NULL;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_egress_policy_parse(j, GBX_EGRESS_NONE, &q, &err), 0);
    json_t *j2 = gbx_egress_policy_json(q);
    assert_true(json_equal(j, j2));

    struct gbx_egress_policy *d = gbx_egress_policy_dup(q);
    json_t *j3 = gbx_egress_policy_json(d);
    assert_true(json_equal(j, j3));
    assert_ptr_not_equal(d->rules[0].host, q->rules[0].host);

    json_decref(j);
    json_decref(j2);
    json_decref(j3);
    gbx_egress_policy_free(p);
    gbx_egress_policy_free(q);
    gbx_egress_policy_free(d);

    /* a list of ports is stored as one rule per entry; the JSON says so */
    p = pol("{\"rules\":[{\"host\":\"A.com\",\"ports\":[1,\"2-3\"]}]}");
    j = gbx_egress_policy_json(p);
    dumped = json_dumps(j, JSON_COMPACT);
    assert_string_equal(dumped, "{\"mode\":\"policy\",\"rules\":["
                                "{\"action\":\"allow\",\"host\":\"a.com\",\"ports\":[1]},"
                                "{\"action\":\"allow\",\"host\":\"a.com\",\"ports\":[\"2-3\"]}],"
                                "\"secrets\":[]}");
    free(dumped);
    json_decref(j);
    gbx_egress_policy_free(p);

    /* an empty policy */
    p = gbx_egress_policy_new(GBX_EGRESS_NONE);
    j = gbx_egress_policy_json(p);
    dumped = json_dumps(j, JSON_COMPACT);
    assert_string_equal(dumped, "{\"mode\":\"none\",\"rules\":[],\"secrets\":[]}");
    free(dumped);
    json_decref(j);
    d = gbx_egress_policy_dup(p);
    assert_int_equal(d->mode, GBX_EGRESS_NONE);
    gbx_egress_policy_free(d);
    gbx_egress_policy_free(p);
}

/* ---- modes and precedence ------------------------------------------------------------- */

static void test_mode_defaults(void **state)
{
    /* none: rules are ignored */
    RUN_CONN("{\"mode\":\"none\",\"rules\":[{\"host\":\"*\"},{\"host\":\"a.com\"}]}",
             {"a.com", NULL, 443, "deny -1"}, {NULL, "8.8.8.8", 53, "deny -1"},
             {"b.com", NULL, 80, "deny -1"});
    RUN_NAME("{\"mode\":\"none\",\"rules\":[{\"host\":\"*\"}]}", {"a.com", "deny -1"});
    RUN_REQ("{\"mode\":\"none\",\"rules\":[{\"host\":\"*\"}]}", "a.com", NULL, 443,
            {"GET", "/", "deny -1"});
    struct gbx_egress_policy *p = pol("{\"mode\":\"none\",\"rules\":[{\"host\":\"10.0.0.1\"}]}");
    struct in_addr a = ip("10.0.0.1");
    int rule = 99;
    assert_int_equal(gbx_egress_policy_names_addr(p, &a, 80, &rule), 0);
    assert_int_equal(rule, 99);
    gbx_egress_policy_free(p);

    /* policy: default deny; open: default allow */
    RUN_CONN("{\"mode\":\"policy\"}", {"a.com", NULL, 443, "deny -1"},
             {NULL, "8.8.8.8", 53, "deny -1"});
    RUN_CONN("{\"mode\":\"open\"}", {"a.com", NULL, 443, "allow -1"},
             {NULL, "8.8.8.8", 53, "allow -1"});
    RUN_NAME("{\"mode\":\"policy\"}", {"a.com", "deny -1"});
    RUN_NAME("{\"mode\":\"open\"}", {"a.com", "allow -1"});
    RUN_REQ("{\"mode\":\"open\"}", "a.com", NULL, 443, {"GET", "/", "allow -1"});
    RUN_REQ("{\"mode\":\"policy\"}", "a.com", NULL, 443, {"GET", "/", "deny -1"});

    /* no name and no address, or an invalid name: denied in every mode */
    RUN_CONN("{\"mode\":\"open\"}", {NULL, NULL, 443, "deny -1"}, {"a..com", NULL, 443, "deny -1"},
             {"1.2.3.4", NULL, 443, "deny -1"});
    RUN_NAME("{\"mode\":\"open\",\"rules\":[{\"host\":\"*\"}]}", {NULL, "deny -1"}, {"", "deny -1"},
             {"a_b.com", "deny -1"}, {"-x.com", "deny -1"}, {"a.com..", "deny -1"},
             {"A.COM.", "allow 0"});
    RUN_REQ("{\"mode\":\"open\"}", NULL, NULL, 443, {"GET", "/", "deny -1"});
    /* a NULL policy denies */
    struct gbx_egress_decision d;
    gbx_egress_policy_check_conn(NULL, "a.com", NULL, 443, &d);
    assert_int_equal(d.allow, 0);
}

static void test_precedence_host(void **state)
{
    /* exact beats wildcard, either way round; a wildcard never matches its apex */
    RUN_CONN("{\"rules\":[{\"host\":\"*.example.com\"},"
             "{\"action\":\"deny\",\"host\":\"api.example.com\"}]}",
             {"api.example.com", NULL, 443, "deny 1"}, {"www.example.com", NULL, 443, "allow 0"},
             {"a.b.example.com", NULL, 443, "allow 0"}, {"example.com", NULL, 443, "deny -1"},
             {"API.Example.Com.", NULL, 443, "deny 1"}, {"xexample.com", NULL, 443, "deny -1"});
    RUN_CONN("{\"mode\":\"open\",\"rules\":[{\"action\":\"deny\",\"host\":\"*.example.com\"},"
             "{\"host\":\"api.example.com\"}]}",
             {"api.example.com", NULL, 443, "allow 1"}, {"www.example.com", NULL, 443, "deny 0"},
             {"example.com", NULL, 443, "allow -1"});
    /* a longer wildcard beats a shorter one */
    RUN_CONN("{\"mode\":\"open\",\"rules\":[{\"action\":\"deny\",\"host\":\"*.com\"},"
             "{\"host\":\"*.example.com\"},"
             "{\"action\":\"deny\",\"host\":\"*.corp.example.com\"}]}",
             {"a.example.com", NULL, 80, "allow 1"}, {"x.corp.example.com", NULL, 80, "deny 2"},
             {"corp.example.com", NULL, 80, "allow 1"}, {"foo.com", NULL, 80, "deny 0"},
             {"foo.org", NULL, 80, "allow -1"});
    /* "*" is lowest, and matches names and addresses */
    RUN_CONN("{\"rules\":[{\"host\":\"*\"},{\"action\":\"deny\",\"host\":\"*.evil.com\"},"
             "{\"action\":\"deny\",\"host\":\"9.9.9.9\"}]}",
             {"x.evil.com", NULL, 443, "deny 1"}, {"good.com", NULL, 443, "allow 0"},
             {NULL, "8.8.8.8", 53, "allow 0"}, {NULL, "9.9.9.9", 53, "deny 2"});
    RUN_CONN("{\"mode\":\"open\",\"rules\":[{\"action\":\"deny\",\"host\":\"*\"},"
             "{\"host\":\"good.com\"},{\"host\":\"*.co\"}]}",
             {"good.com", NULL, 443, "allow 1"}, {"bad.com", NULL, 443, "deny 0"},
             {"x.co", NULL, 443, "allow 2"});
    /* address rules match only addresses, CIDRs rank by prefix length, /32 = a literal */
    RUN_CONN("{\"rules\":[{\"host\":\"10.0.0.0/8\"},{\"action\":\"deny\",\"host\":\"10.1.0.0/16\"},"
             "{\"host\":\"10.1.2.3\"},{\"host\":\"0.0.0.0/0\",\"action\":\"deny\"}]}",
             {NULL, "10.2.0.1", 80, "allow 0"}, {NULL, "10.1.9.9", 80, "deny 1"},
             {NULL, "10.1.2.3", 80, "allow 2"}, {NULL, "11.0.0.1", 80, "deny 3"},
             {"a.com", NULL, 80, "deny -1"});
    RUN_CONN("{\"rules\":[{\"host\":\"10.1.2.3\"},{\"action\":\"deny\",\"host\":\"10.1.2.3/32\"}]}",
             {NULL, "10.1.2.3", 80, "deny 1"});
    /* with a name and an address: an address rule beats a wildcard, an exact name beats a
     * CIDR */
    RUN_CONN("{\"rules\":[{\"host\":\"*.a.com\"},{\"action\":\"deny\",\"host\":\"10.0.0.0/8\"},"
             "{\"host\":\"db.a.com\"}]}",
             {"x.a.com", "10.1.1.1", 443, "deny 1"}, {"x.a.com", "8.8.8.8", 443, "allow 0"},
             {"db.a.com", "10.1.1.1", 443, "allow 2"}, {"x.a.com", NULL, 443, "allow 0"});
}

static void test_precedence_ties_ports(void **state)
{
    /* a full tie: deny beats allow, whichever comes first */
    RUN_CONN("{\"rules\":[{\"host\":\"a.com\"},{\"action\":\"deny\",\"host\":\"a.com\"}]}",
             {"a.com", NULL, 443, "deny 1"});
    RUN_CONN("{\"rules\":[{\"action\":\"deny\",\"host\":\"a.com\"},{\"host\":\"a.com\"}]}",
             {"a.com", NULL, 443, "deny 0"});
    /* the same action: the first */
    RUN_CONN("{\"rules\":[{\"host\":\"a.com\"},{\"host\":\"a.com\"}]}",
             {"a.com", NULL, 443, "allow 0"});
    /* a port range beats none; a narrower range beats a wider */
    RUN_CONN("{\"rules\":[{\"action\":\"deny\",\"host\":\"a.com\"},"
             "{\"host\":\"a.com\",\"ports\":[443]}]}",
             {"a.com", NULL, 443, "allow 1"}, {"a.com", NULL, 80, "deny 0"});
    RUN_CONN("{\"rules\":[{\"host\":\"a.com\",\"ports\":[\"1-1024\"]},"
             "{\"action\":\"deny\",\"host\":\"a.com\",\"ports\":[\"400-500\"]},"
             "{\"host\":\"a.com\",\"ports\":[\"440-450\"]}]}",
             {"a.com", NULL, 80, "allow 0"}, {"a.com", NULL, 400, "deny 1"},
             {"a.com", NULL, 443, "allow 2"}, {"a.com", NULL, 2000, "deny -1"});
    /* the host comes before the port */
    RUN_CONN("{\"rules\":[{\"host\":\"*.a.com\",\"ports\":[443]},"
             "{\"action\":\"deny\",\"host\":\"x.a.com\"}]}",
             {"x.a.com", NULL, 443, "deny 1"}, {"y.a.com", NULL, 443, "allow 0"},
             {"y.a.com", NULL, 80, "deny -1"});
    /* an equal range: tie, deny */
    RUN_CONN("{\"rules\":[{\"host\":\"a.com\",\"ports\":[\"80-90\"]},"
             "{\"action\":\"deny\",\"host\":\"a.com\",\"ports\":[\"100-110\"]}]}",
             {"a.com", NULL, 85, "allow 0"}, {"a.com", NULL, 105, "deny 1"},
             {"a.com", NULL, 95, "deny -1"});
    /* port 0 at the connection stage is no port at all: only rules without ports */
    RUN_CONN("{\"rules\":[{\"host\":\"a.com\",\"ports\":[443]}]}", {"a.com", NULL, 0, "deny -1"});
}

static void test_precedence_l7(void **state)
{
    /* a rule with methods/path beats one without; a longer path beats a shorter one */
    RUN_REQ("{\"rules\":[{\"host\":\"a.com\"},{\"action\":\"deny\",\"host\":\"a.com\","
            "\"methods\":[\"POST\",\"DELETE\"]}]}",
            "a.com", NULL, 443, {"GET", "/x", "allow 0"}, {"POST", "/x", "deny 1"},
            {"post", "/x", "deny 1"}, {"DELETE", "/", "deny 1"});
    RUN_REQ("{\"rules\":[{\"host\":\"a.com\",\"path_prefix\":\"/v1/\"},"
            "{\"action\":\"deny\",\"host\":\"a.com\",\"path_prefix\":\"/v1/admin\"},"
            "{\"host\":\"a.com\",\"path_prefix\":\"/v1/admin/public/\"}]}",
            "a.com", NULL, 443, {"GET", "/v1/x", "allow 0"}, {"GET", "/v1/admin", "deny 1"},
            {"GET", "/v1/adminx", "deny 1"}, {"GET", "/v1/admin/public/a", "allow 2"},
            {"GET", "/v2/", "deny -1"}, {"GET", "/v1", "deny -1"});
    /* a path beats methods alone; the same path with methods beats it without */
    RUN_REQ("{\"rules\":[{\"host\":\"a.com\",\"methods\":[\"GET\"]},"
            "{\"action\":\"deny\",\"host\":\"a.com\",\"path_prefix\":\"/p\"},"
            "{\"host\":\"a.com\",\"path_prefix\":\"/p\",\"methods\":[\"HEAD\"]}]}",
            "a.com", NULL, 443, {"GET", "/q", "allow 0"}, {"GET", "/p", "deny 1"},
            {"HEAD", "/p", "allow 2"}, {"PUT", "/q", "deny -1"});
    /* the host and port still come first: an exact deny beats a wildcard allow with a path */
    RUN_REQ("{\"rules\":[{\"host\":\"*.a.com\",\"path_prefix\":\"/x\"},"
            "{\"action\":\"deny\",\"host\":\"b.a.com\"}]}",
            "b.a.com", NULL, 443, {"GET", "/x", "deny 1"});
    RUN_REQ("{\"rules\":[{\"host\":\"*.a.com\",\"path_prefix\":\"/x\"},"
            "{\"action\":\"deny\",\"host\":\"b.a.com\"}]}",
            "c.a.com", NULL, 443, {"GET", "/x", "allow 0"}, {"GET", "/y", "deny -1"});
}

/* ---- the stages ----------------------------------------------------------------------- */

static void test_check_name(void **state)
{
    /* a port-restricted deny does not block DNS */
    RUN_NAME("{\"rules\":[{\"action\":\"deny\",\"host\":\"a.com\",\"ports\":[25]},"
             "{\"host\":\"*\"}]}",
             {"a.com", "allow 1"}, {"b.com", "allow 1"});
    RUN_CONN("{\"rules\":[{\"action\":\"deny\",\"host\":\"a.com\",\"ports\":[25]},"
             "{\"host\":\"*\"}]}",
             {"a.com", NULL, 25, "deny 0"}, {"a.com", NULL, 443, "allow 1"});
    /* nor does a deny with L7 parts */
    RUN_NAME("{\"mode\":\"open\",\"rules\":[{\"action\":\"deny\",\"host\":\"a.com\","
             "\"methods\":[\"POST\"]},{\"action\":\"deny\",\"host\":\"b.com\","
             "\"path_prefix\":\"/\"}]}",
             {"a.com", "allow -1"}, {"b.com", "allow -1"});
    /* an all-ports deny does */
    RUN_NAME("{\"mode\":\"open\",\"rules\":[{\"action\":\"deny\",\"host\":\"a.com\"},"
             "{\"action\":\"deny\",\"host\":\"*.b.com\"}]}",
             {"a.com", "deny 0"}, {"x.b.com", "deny 1"}, {"b.com", "allow -1"});
    /* policy: an allow on some port lets the name resolve; IP rules never match a name */
    RUN_NAME("{\"rules\":[{\"host\":\"a.com\",\"ports\":[443]},{\"host\":\"10.0.0.0/8\"},"
             "{\"host\":\"b.com\",\"methods\":[\"GET\"]}]}",
             {"a.com", "allow 0"}, {"b.com", "allow 2"}, {"c.com", "deny -1"});
    /* the allow must not be beaten by an all-ports deny at least as specific */
    RUN_NAME("{\"rules\":[{\"host\":\"*.a.com\"},{\"action\":\"deny\",\"host\":\"x.a.com\"},"
             "{\"host\":\"y.a.com\",\"ports\":[443]},{\"action\":\"deny\",\"host\":\"*.a.com\"},"
             "{\"host\":\"z.a.com\"}]}",
             {"x.a.com", "deny 1"}, {"y.a.com", "allow 2"}, {"w.a.com", "deny 3"},
             {"z.a.com", "allow 4"});
    /* a port-specific allow is more specific than an all-ports deny on the same host */
    RUN_NAME("{\"rules\":[{\"host\":\"a.com\",\"ports\":[443]},"
             "{\"action\":\"deny\",\"host\":\"a.com\"}]}",
             {"a.com", "allow 0"});
    RUN_NAME("{\"mode\":\"open\",\"rules\":[{\"action\":\"deny\",\"host\":\"*\"},"
             "{\"host\":\"ok.com\",\"ports\":[443]}]}",
             {"ok.com", "allow 1"}, {"no.com", "deny 0"});
}

static void test_l7_flag(void **state)
{
    /* the winning allow has L7 parts */
    RUN_CONN("{\"rules\":[{\"host\":\"a.com\",\"methods\":[\"GET\"]}]}",
             {"a.com", NULL, 443, "allow 0 l7"}, {"b.com", NULL, 443, "deny -1"});
    /* a more specific deny with L7 parts: allowed, but requests are checked */
    RUN_CONN("{\"rules\":[{\"host\":\"a.com\"},{\"action\":\"deny\",\"host\":\"a.com\","
             "\"path_prefix\":\"/admin\"}]}",
             {"a.com", NULL, 443, "allow 0 l7"});
    /* a deny with L7 parts ranking below the allow cannot change any request: no l7 */
    RUN_CONN("{\"rules\":[{\"host\":\"a.com\"},{\"action\":\"deny\",\"host\":\"*\","
             "\"methods\":[\"POST\"]}]}",
             {"a.com", NULL, 443, "allow 0"}, {"b.com", NULL, 443, "deny -1"});
    RUN_REQ("{\"rules\":[{\"host\":\"a.com\"},{\"action\":\"deny\",\"host\":\"*\","
            "\"methods\":[\"POST\"]}]}",
            "a.com", NULL, 443, {"POST", "/", "allow 0"});
    /* open mode, only a deny with L7 parts matches: default allow with l7 */
    RUN_CONN("{\"mode\":\"open\",\"rules\":[{\"action\":\"deny\",\"host\":\"a.com\","
             "\"methods\":[\"DELETE\"]}]}",
             {"a.com", NULL, 443, "allow -1 l7"}, {"b.com", NULL, 443, "allow -1"});
    /* policy mode, only a deny with L7 parts matches: it allows nothing */
    RUN_CONN("{\"rules\":[{\"action\":\"deny\",\"host\":\"a.com\",\"methods\":[\"POST\"]}]}",
             {"a.com", NULL, 443, "deny -1"});
    /* denied connections carry no l7 */
    RUN_CONN("{\"rules\":[{\"action\":\"deny\",\"host\":\"a.com\"},"
             "{\"host\":\"*.com\",\"path_prefix\":\"/x\"}]}",
             {"a.com", NULL, 443, "deny 0"}, {"b.com", NULL, 443, "allow 1 l7"});
    /* a port-specific deny beats an any-port allow with a path */
    RUN_CONN("{\"rules\":[{\"host\":\"a.com\",\"path_prefix\":\"/v1/\"},"
             "{\"action\":\"deny\",\"host\":\"a.com\",\"ports\":[443]}]}",
             {"a.com", NULL, 443, "deny 1"}, {"a.com", NULL, 80, "allow 0 l7"});
    /* an L7 allow with an any-path allow below it */
    RUN_CONN("{\"rules\":[{\"host\":\"*.a.com\"},{\"host\":\"x.a.com\",\"methods\":[\"GET\"]}]}",
             {"x.a.com", NULL, 443, "allow 1 l7"}, {"y.a.com", NULL, 443, "allow 0"});
}

static void test_check_request(void **state)
{
    /* methods compare case-insensitively; paths by prefix after decoding %XX */
    RUN_REQ("{\"rules\":[{\"host\":\"a.com\",\"methods\":[\"GET\",\"HEAD\"],"
            "\"path_prefix\":\"/v1/\"}]}",
            "a.com", NULL, 443, {"GET", "/v1/x", "allow 0"}, {"get", "/v1/x", "allow 0"},
            {"HEAD", "/v1/", "allow 0"}, {"POST", "/v1/x", "deny -1"}, {"GET", "/v2/x", "deny -1"},
            {"GET", "/v1/x?y=../z", "allow 0"}, {"GET", "/v%31/x", "allow 0"},
            {"GET", "/V1/x", "deny -1"},
            /* not normal: no allow with a path matches */
            {"GET", "/v1/../admin", "deny -1"}, {"GET", "/v1/%2e%2E/admin", "deny -1"},
            {"GET", "/v1//x", "deny -1"}, {"GET", "/v1/./x", "deny -1"},
            {"GET", "/v1/..;/admin", "deny -1"}, {"GET", "/v1\\..\\admin", "deny -1"},
            {"GET", "/v1/%zz", "deny -1"}, {"GET", "/v1/%00", "deny -1"},
            {"GET", "v1/x", "deny -1"}, {"GET", "", "deny -1"}, {"GET", NULL, "deny -1"},
            {NULL, "/v1/x", "deny -1"}, {"GET", "http://a.com/v1/x", "deny -1"});
    /* a deny with a path catches every spelling of it, and anything not normal */
    RUN_REQ("{\"rules\":[{\"host\":\"a.com\"},{\"action\":\"deny\",\"host\":\"a.com\","
            "\"path_prefix\":\"/admin\"},{\"action\":\"deny\",\"host\":\"a.com\","
            "\"methods\":[\"TRACE\"]}]}",
            "a.com", NULL, 443, {"GET", "/public", "allow 0"}, {"GET", "/admin", "deny 1"},
            {"GET", "/%61dmin", "deny 1"}, {"GET", "//admin", "deny 1"},
            {"GET", "/x/../admin", "deny 1"}, {"GET", "/admin/x?q", "deny 1"},
            {"GET", "/adminx", "deny 1"}, {"GET", NULL, "deny 1"}, {"GET", "/./public", "deny 1"},
            {"TRACE", "/public", "deny 2"}, {"trace", "/public", "deny 2"},
            {NULL, "/public", "deny 2"}, {"GET", "/public/", "allow 0"});
    /* ports apply to requests too */
    RUN_REQ("{\"rules\":[{\"host\":\"a.com\",\"ports\":[8080],\"path_prefix\":\"/\"}]}", "a.com",
            NULL, 443, {"GET", "/", "deny -1"});
    /* a connection to a literal address: pass the address */
    RUN_REQ("{\"rules\":[{\"host\":\"10.0.0.5\",\"path_prefix\":\"/api/\"}]}", NULL, "10.0.0.5", 80,
            {"GET", "/api/x", "allow 0"}, {"GET", "/other", "deny -1"});
    RUN_REQ("{\"rules\":[{\"host\":\"10.0.0.5\",\"path_prefix\":\"/api/\"}]}", NULL, "10.0.0.6", 80,
            {"GET", "/api/x", "deny -1"});
    /* check_request gives no l7 */
    RUN_REQ("{\"rules\":[{\"host\":\"a.com\",\"methods\":[\"GET\"]}]}", "a.com", NULL, 443,
            {"GET", "/", "allow 0"});
}

static void test_names_addr(void **state)
{
    struct gbx_egress_policy *p =
        pol("{\"rules\":[{\"host\":\"10.0.0.0/8\",\"ports\":[5432]},{\"host\":\"*\"},"
            "{\"host\":\"internal.corp\"},{\"action\":\"deny\",\"host\":\"10.9.0.0/16\"},"
            "{\"host\":\"169.254.169.254\",\"methods\":[\"GET\"]},"
            "{\"host\":\"192.168.1.1\"},{\"action\":\"deny\",\"host\":\"192.168.1.1\"},"
            "{\"host\":\"172.16.0.1\"},{\"action\":\"deny\",\"host\":\"172.16.0.1\","
            "\"path_prefix\":\"/x\"},{\"action\":\"deny\",\"host\":\"*\"}]}");
    static const struct {
        const char *addr;
        uint16_t port;
        int want, rule;
    } c[] = {
        {"10.1.2.3", 5432, 1, 0},      /* a CIDR names it, on that port */
        {"10.1.2.3", 80, 0, -1},       /* not on this port ("*" does not count) */
        {"10.1.2.3", 0, 1, 0},         /* port 0: any */
        {"10.9.1.1", 5432, 0, -1},     /* a more specific deny */
        {"127.0.0.1", 80, 0, -1},      /* "*" does not name anything */
        {"169.254.169.254", 80, 1, 4}, /* an allow with L7 parts still names it */
        {"192.168.1.1", 80, 0, -1},    /* a tie goes to the deny */
        {"172.16.0.1", 80, 1, 7},      /* a deny with L7 parts does not count */
        {"8.8.8.8", 443, 0, -1},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        struct in_addr a = ip(c[i].addr);
        int rule = -1;
        print_message("names_addr %s:%u\n", c[i].addr, c[i].port);
        assert_int_equal(gbx_egress_policy_names_addr(p, &a, c[i].port, &rule), c[i].want);
        assert_int_equal(rule, c[i].rule);
    }
    struct in_addr a = ip("10.1.2.3");
    assert_int_equal(gbx_egress_policy_names_addr(p, &a, 5432, NULL), 1);
    assert_int_equal(gbx_egress_policy_names_addr(p, NULL, 5432, NULL), 0);
    gbx_egress_policy_free(p);
}

static void test_addr_special(void **state)
{
    static const char *const special[] = {
        "0.0.0.0",     "0.255.255.255",   "10.0.0.1",    "10.255.255.255",
        "100.64.0.1",  "100.127.255.255", "127.0.0.1",   "127.255.255.254",
        "169.254.0.1", "169.254.169.254", "172.16.0.1",  "172.31.255.255",
        "192.0.0.1",   "192.0.0.255",     "192.168.0.1", "192.168.255.255",
        "198.18.0.1",  "198.19.255.255",  "224.0.0.1",   "239.255.255.255",
        "240.0.0.1",   "255.255.255.255",
    };
    static const char *const public[] = {
        "8.8.8.8",         "1.1.1.1",        "1.0.0.0",         "9.255.255.255", "11.0.0.0",
        "100.63.255.255",  "100.128.0.0",    "126.255.255.255", "128.0.0.0",     "169.253.255.255",
        "169.255.0.0",     "172.15.255.255", "172.32.0.0",      "192.0.1.0",     "192.0.2.1",
        "192.167.255.255", "192.169.0.0",    "198.17.255.255",  "198.20.0.0",    "223.255.255.255",
    };
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
        struct in_addr a = ip(special[i]);
        print_message("special %s\n", special[i]);
        assert_int_equal(gbx_egress_addr_special(&a), 1);
    }
    for (size_t i = 0; i < sizeof(public) / sizeof(public[0]); i++) {
        struct in_addr a = ip(public[i]);
        print_message("public %s\n", public[i]);
        assert_int_equal(gbx_egress_addr_special(&a), 0);
    }
}

/* ---- E2B ------------------------------------------------------------------------------ */

/* The E2B mapping as "mode: +allowed -denied ..." or the error message. */
static char *e2b(const char *body, enum gbx_egress_mode dflt, int update)
{
    json_t *j = load(body);
    struct gbx_egress_policy *p = NULL;
    struct gbx_err *err = NULL;
    int r = update ? gbx_egress_policy_from_e2b_update(j, dflt, &p, &err)
                   : gbx_egress_policy_from_e2b(j, dflt, &p, &err);
    json_decref(j);
    if (r < 0) {
        assert_null(p);
        assert_int_equal(err->kind, GBX_ERR_INVALID);
        char *msg = strdup(err->msg);
        gbx_err_free(err);
        return msg;
    }
    assert_null(err);
    assert_int_equal(p->nsecrets, 0);
    size_t len = 16;
    for (size_t i = 0; i < p->nrules; i++)
        len += strlen(p->rules[i].host) + 2;
    char *out = malloc(len), *o = out;
    assert_non_null(out);
    o += sprintf(o, "%s:", gbx_egress_mode_name(p->mode));
    for (size_t i = 0; i < p->nrules; i++) {
        const struct gbx_egress_rule *rl = &p->rules[i];
        assert_true(rl->port_lo == 0 && rl->nmethods == 0 && rl->path_prefix == NULL);
        o += sprintf(o, " %c%s", rl->allow ? '+' : '-', rl->host);
    }
    gbx_egress_policy_free(p);
    return out;
}

static void expect_e2b(const char *body, enum gbx_egress_mode dflt, int update, const char *want)
{
    char *got = e2b(body, dflt, update);
    print_message("%.200s\n", body);
    assert_string_equal(got, want);
    free(got);
}

static void test_e2b(void **state)
{
    const enum gbx_egress_mode P = GBX_EGRESS_POLICY, O = GBX_EGRESS_OPEN;
    /* no internet: policy mode, allowOut as allow rules (names, wildcards, IPs, CIDRs) */
    expect_e2b("{\"allow_internet_access\":false,\"network\":{\"allowOut\":[\"API.example.com\","
               "\"*.github.com\",\"8.8.8.8/32\",\"1.1.1.1\",\"10.0.0.0/8\"],"
               "\"denyOut\":[\"9.9.9.9\"]}}",
               O, 0, "policy: +api.example.com +*.github.com +8.8.8.8/32 +1.1.1.1 +10.0.0.0/8");
    /* "0.0.0.0/0" in denyOut: the same */
    expect_e2b("{\"network\":{\"allowOut\":[\"example.com\"],\"denyOut\":[\"0.0.0.0/0\"]}}", O, 0,
               "policy: +example.com");
    /* even when allow_internet_access says true */
    expect_e2b("{\"allow_internet_access\":true,\"network\":{\"denyOut\":[\"0.0.0.0/0\"]}}", O, 0,
               "policy:");
    /* internet explicitly: open, denyOut as deny rules minus what allowOut covers */
    expect_e2b("{\"allow_internet_access\":true,\"network\":{"
               "\"allowOut\":[\"8.8.8.8\",\"10.1.0.0/16\",\"*.example.com\"],"
               "\"denyOut\":[\"10.0.0.0/8\",\"1.2.3.4\",\"8.8.8.8\",\"10.1.2.0/24\","
               "\"api.example.com\",\"*.x.example.com\",\"example.com\"]}}",
               P, 0,
               "open: +8.8.8.8 +10.1.0.0/16 +*.example.com -10.0.0.0/8 -1.2.3.4 -example.com");
    /* "0.0.0.0/0" in allowOut stands for everything: it covers every deny */
    expect_e2b("{\"allow_internet_access\":true,\"network\":{\"allowOut\":[\"0.0.0.0/0\"],"
               "\"denyOut\":[\"10.0.0.0/8\",\"a.com\"]}}",
               P, 0, "open: +*");
    /* neither said: the default mode, both lists */
    expect_e2b("{\"network\":{\"allowOut\":[\"a.com\"],\"denyOut\":[\"1.2.3.4\"]}}", O, 0,
               "open: +a.com -1.2.3.4");
    expect_e2b("{\"network\":{\"allowOut\":[\"a.com\"],\"denyOut\":[\"1.2.3.4\"]}}", P, 0,
               "policy: +a.com -1.2.3.4");
    expect_e2b("{}", O, 0, "open:");
    expect_e2b("null", P, 0, "policy:");
    expect_e2b("{\"network\":null,\"allow_internet_access\":null}", O, 0, "open:");
    /* other body keys are not ours; ignored network keys; an empty rules map */
    expect_e2b("{\"templateID\":\"base\",\"timeout\":30,\"network\":{\"allowPublicTraffic\":false,"
               "\"maskRequestHost\":\"${PORT}-x\",\"httpsPorts\":[3000],\"rules\":{},"
               "\"egressProxy\":null}}",
               O, 0, "open:");

    /* errors */
    expect_e2b("{\"allow_internet_access\":\"yes\"}", O, 0,
               "allow_internet_access: expected true or false, not a string");
    expect_e2b("[]", O, 0, "expected an object, not an array");
    expect_e2b("{\"network\":[]}", O, 0, "network: expected an object, not an array");
    expect_e2b("{\"network\":{\"allowOut\":\"a.com\"}}", O, 0,
               "network.allowOut: expected an array of strings, not a string");
    expect_e2b("{\"network\":{\"allowOut\":[\"a.com\",\"bad host!\"]}}", O, 0,
               "network.allowOut[1]: 'bad host!': " HOST_HELP);
    expect_e2b("{\"network\":{\"denyOut\":[1]}}", O, 0,
               "network.denyOut[0]: expected a string, not a number");
    expect_e2b("{\"network\":{\"denyOut\":[\"10.1.0.0/8\"]}}", O, 0,
               "network.denyOut[0]: '10.1.0.0/8': bits set beyond the prefix length (did you "
               "mean '10.0.0.0/8'?)");
    expect_e2b("{\"network\":{\"foo\":1}}", O, 0,
               "network.foo: unknown key (expected allowOut, denyOut, allowPublicTraffic, "
               "maskRequestHost, httpsPorts)");
    expect_e2b("{\"network\":{\"allow_internet_access\":true}}", O, 0,
               "network.allow_internet_access: unknown key (expected allowOut, denyOut, "
               "allowPublicTraffic, maskRequestHost, httpsPorts)");
    expect_e2b("{\"network\":{\"rules\":{\"api.openai.com\":[{\"transform\":{}}]}}}", O, 0,
               "network.rules: per-host request transforms are not supported (attach a "
               "credential with the policy's secrets instead)");
    expect_e2b("{\"network\":{\"egressProxy\":{\"address\":\"p.example.com:1080\"}}}", O, 0,
               "network.egressProxy: not supported (egress leaves through Glovebox's own proxy)");

    /* the update body: the network object itself, allow_internet_access among its keys */
    expect_e2b("{\"allow_internet_access\":false,\"allowOut\":[\"a.com\"]}", O, 1,
               "policy: +a.com");
    expect_e2b("{\"allow_internet_access\":true,\"denyOut\":[\"1.2.3.4\"]}", P, 1,
               "open: -1.2.3.4");
    expect_e2b("{}", P, 1, "policy:");
    expect_e2b("{\"egressProxy\":{\"address\":\"p:1\"}}", O, 1,
               "egressProxy: not supported (egress leaves through Glovebox's own proxy)");
    expect_e2b("{\"foo\":1}", O, 1,
               "foo: unknown key (expected allowOut, denyOut, allowPublicTraffic, "
               "maskRequestHost, httpsPorts, allow_internet_access)");

    /* limits */
    char *s = repeat("{\"network\":{\"allowOut\":[", "\"a.com\"", 1025, "]}}");
    expect_e2b(s, O, 0, "network.allowOut: more than 1024 entries");
    free(s);
    s = repeat("{\"network\":{\"denyOut\":[\"1.1.1.1\"],\"allowOut\":[", "\"a.com\"", 1024, "]}}");
    expect_e2b(s, O, 0, "network.allowOut and denyOut: more than 1024 entries together");
    free(s);

    /* and the mapping decides as E2B would */
    json_t *j = load("{\"network\":{\"allowOut\":[\"example.com\",\"*.github.com\"],"
                     "\"denyOut\":[\"0.0.0.0/0\"]}}");
    struct gbx_egress_policy *p = NULL;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_egress_policy_from_e2b(j, O, &p, &err), 0);
    struct gbx_egress_decision d;
    gbx_egress_policy_check_conn(p, "example.com", NULL, 443, &d);
    assert_true(d.allow);
    gbx_egress_policy_check_conn(p, "api.github.com", NULL, 22, &d);
    assert_true(d.allow);
    gbx_egress_policy_check_conn(p, "github.com", NULL, 443, &d);
    assert_false(d.allow);
    struct in_addr a = ip("1.1.1.1");
    gbx_egress_policy_check_conn(p, NULL, &a, 443, &d);
    assert_false(d.allow);
    gbx_egress_policy_free(p);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes_names),
        cmocka_unit_test(test_validators),
        cmocka_unit_test(test_parse_defaults),
        cmocka_unit_test(test_parse_normalizes),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_limits),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_mode_defaults),
        cmocka_unit_test(test_precedence_host),
        cmocka_unit_test(test_precedence_ties_ports),
        cmocka_unit_test(test_precedence_l7),
        cmocka_unit_test(test_check_name),
        cmocka_unit_test(test_l7_flag),
        cmocka_unit_test(test_check_request),
        cmocka_unit_test(test_names_addr),
        cmocka_unit_test(test_addr_special),
        cmocka_unit_test(test_e2b),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
