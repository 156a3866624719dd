/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the egress policy (src/egress/policy.c): arbitrary JSON text is parsed
 * as a policy (and as E2B create and update bodies). A failure always says why; a policy that
 * parses serializes to JSON that parses back to the same policy, with the same decisions; and
 * on a fixed set of names, addresses, ports, methods and paths the stages agree with each
 * other as policy.h promises:
 *   - a decision's rule is -1 or a rule of the same action; mode none denies everything;
 *   - a denied name denies every connection to it;
 *   - a connection decision without l7 is the decision of every request on it (and a denied
 *     connection denies every request);
 *   - names_addr = 1 names an allow rule for an address, and check_conn allows that address.
 * The input's length modulo 3 picks the default mode. */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "egress/policy.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
    "example.com", "api.example.com", "a.b.example.com", "github.com",
    "x.evil.com",  "localhost",       "A.COM.",          "a..b",
    NULL,
};
static const char *const addrs[] = {"10.1.2.3", "8.8.8.8", "169.254.169.254", "0.0.0.0"};
static const uint16_t ports[] = {22, 80, 443, 8080};
static const char *const methods[] = {"GET", "POST", "delete", NULL};
static const char *const paths[] = {"/",         "/v1/x", "/admin", "//admin", "/v1/../admin",
                                    "/%61dmin/", "/a?b",  NULL,     "x"};

static void check_decision(const struct gbx_egress_policy *p, const struct gbx_egress_decision *d)
{
    CHECK(d->allow == 0 || d->allow == 1);
    CHECK(d->rule >= -1 && (d->rule < 0 || (size_t)d->rule < p->nrules));
    if (d->rule >= 0)
        CHECK(p->rules[d->rule].allow == d->allow);
    if (p->mode == GBX_EGRESS_NONE)
        CHECK(!d->allow && d->rule == -1 && !d->l7);
}

static int same(const struct gbx_egress_decision *a, const struct gbx_egress_decision *b)
{
    return a->allow == b->allow && a->rule == b->rule && a->l7 == b->l7;
}

/* Names to try: the fixed ones and one derived from each of the first rules' hosts. */
static void check_policy(const struct gbx_egress_policy *p, const struct gbx_egress_policy *q)
{
    char extra[4][300];
    const char *tries[GBX_ARRAY_SIZE(names) + 4];
    size_t nt = 0;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(names); i++)
        tries[nt++] = names[i];
    for (size_t i = 0; i < p->nrules && i < 4; i++) {
        const char *h = p->rules[i].host;
        snprintf(extra[i], sizeof(extra[i]), "%s%s", h[0] == '*' ? "w" : "",
                 h[0] == '*' ? h + 1 : h);
        tries[nt++] = extra[i];
    }
    const char *prefix = NULL;
    for (size_t i = 0; i < p->nrules && !prefix; i++)
        prefix = p->rules[i].path_prefix;

    for (size_t n = 0; n < nt; n++) {
        struct gbx_egress_decision dn, dn2;
        gbx_egress_policy_check_name(p, tries[n], &dn);
        gbx_egress_policy_check_name(q, tries[n], &dn2);
        check_decision(p, &dn);
        CHECK(same(&dn, &dn2) && !dn.l7);
        for (size_t a = 0; a <= GBX_ARRAY_SIZE(addrs); a++) {
            struct in_addr in;
            const struct in_addr *ap = NULL;
            if (a < GBX_ARRAY_SIZE(addrs)) {
                inet_pton(AF_INET, addrs[a], &in);
                ap = &in;
            }
            for (size_t k = 0; k < GBX_ARRAY_SIZE(ports); k++) {
                struct gbx_egress_decision dc, dc2;
                gbx_egress_policy_check_conn(p, tries[n], ap, ports[k], &dc);
                gbx_egress_policy_check_conn(q, tries[n], ap, ports[k], &dc2);
                check_decision(p, &dc);
                CHECK(same(&dc, &dc2));
                CHECK(dc.allow || !dc.l7);
                if (dc.rule >= 0 && !dc.allow)
                    CHECK(p->rules[dc.rule].nmethods == 0 && !p->rules[dc.rule].path_prefix);
                if (ap == NULL && !dn.allow)
                    CHECK(!dc.allow);
                for (size_t m = 0; m < GBX_ARRAY_SIZE(methods); m++)
                    for (size_t t = 0; t <= GBX_ARRAY_SIZE(paths); t++) {
                        const char *path = t < GBX_ARRAY_SIZE(paths) ? paths[t] : prefix;
                        struct gbx_egress_decision dr;
                        gbx_egress_policy_check_request_addr(p, tries[n], ap, ports[k], methods[m],
                                                             path, &dr);
                        check_decision(p, &dr);
                        CHECK(!dr.l7);
                        if (!dc.allow || !dc.l7)
                            CHECK(dr.allow == dc.allow);
                    }
            }
        }
    }
    for (size_t a = 0; a < GBX_ARRAY_SIZE(addrs); a++) {
        struct in_addr in;
        inet_pton(AF_INET, addrs[a], &in);
        for (size_t k = 0; k < GBX_ARRAY_SIZE(ports); k++) {
            int rule = -1, rule2 = -1;
            int yes = gbx_egress_policy_names_addr(p, &in, ports[k], &rule);
            CHECK(yes == gbx_egress_policy_names_addr(q, &in, ports[k], &rule2));
            CHECK(rule == rule2);
            if (!yes)
                continue;
            CHECK(rule >= 0 && (size_t)rule < p->nrules && p->rules[rule].allow);
            CHECK(p->rules[rule].host[0] >= '0' && p->rules[rule].host[0] <= '9');
            struct gbx_egress_decision dc;
            gbx_egress_policy_check_conn(p, NULL, &in, ports[k], &dc);
            CHECK(dc.allow);
        }
    }
}

/* parse(json(p)) == p, and decisions agree. */
static void roundtrip(const struct gbx_egress_policy *p)
{
    CHECK(p->nrules <= GBX_EGRESS_MAX_RULES && p->nsecrets <= GBX_EGRESS_MAX_SECRETS);
    for (size_t i = 0; i < p->nrules; i++) {
        CHECK(gbx_egress_host_valid(p->rules[i].host) == 0);
        CHECK(p->rules[i].port_lo <= p->rules[i].port_hi);
    }
    for (size_t i = 0; i < p->nsecrets; i++)
        CHECK(gbx_egress_secret_name_valid(p->secrets[i]) == 0);
    json_t *j = gbx_egress_policy_json(p);
    CHECK(j != NULL);
    struct gbx_egress_policy *q = NULL;
    struct gbx_err *err = NULL;
    CHECK(gbx_egress_policy_parse(j, GBX_EGRESS_NONE, &q, &err) == 0);
    json_t *j2 = gbx_egress_policy_json(q);
    CHECK(json_equal(j, j2));
    struct gbx_egress_policy *d = gbx_egress_policy_dup(q);
    json_t *j3 = gbx_egress_policy_json(d);
    CHECK(json_equal(j, j3));
    check_policy(p, d);
    json_decref(j);
    json_decref(j2);
    json_decref(j3);
    gbx_egress_policy_free(q);
    gbx_egress_policy_free(d);
}

typedef int (*parse_fn)(const json_t *, enum gbx_egress_mode, struct gbx_egress_policy **,
                        struct gbx_err **);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum gbx_egress_mode dflt = (enum gbx_egress_mode)(size % 3);
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (j == NULL)
        return 0;
    static const parse_fn parsers[] = {gbx_egress_policy_parse, gbx_egress_policy_from_e2b,
                                       gbx_egress_policy_from_e2b_update};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(parsers); i++) {
        struct gbx_egress_policy *p = NULL;
        struct gbx_err *err = NULL;
        int r = parsers[i](j, dflt, &p, &err);
        if (r != 0) {
            /* a failure always says why, and leaves nothing behind */
            CHECK(r == -1 && p == NULL && err != NULL && err->kind == GBX_ERR_INVALID &&
                  err->msg[0] != '\0');
            gbx_err_free(err);
            continue;
        }
        CHECK(p != NULL && err == NULL);
        if (i > 0)
            CHECK(p->nsecrets == 0);
        roundtrip(p);
        gbx_egress_policy_free(p);
    }
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        (void)gbx_egress_name_valid(s);
        (void)gbx_egress_secret_name_valid(s);
        if (gbx_egress_host_valid(s) == 0 && gbx_egress_name_valid(s) == 0) {
            struct in_addr in;
            CHECK(inet_pton(AF_INET, s, &in) != 1); /* a name is never an address */
        }
    }
    json_decref(j);
    return 0;
}
