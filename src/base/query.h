/* SPDX-License-Identifier: MIT */
/* Query strings of the list routes (?label=k=v&limit=10&cursor=...), read against a table of
 * the parameters a route takes. One parser for the native API, the sessions and the E2B front
 * end, so that each route's table says what it accepts and every error names the parameter
 * and what it expects. Pure (no I/O; libevent's decoder for %XX), so it is unit-tested and
 * fuzzed. It lives in base, not http, because session/ may not include from http/
 * (tools/layers.py). */
#ifndef GBX_BASE_QUERY_H
#define GBX_BASE_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum gbx_query_kind {
    GBX_QUERY_U64,  /* a decimal integer in [min, max]; out is a uint64_t * */
    GBX_QUERY_STR,  /* any text; out is a const char ** (pointing into the struct gbx_query) */
    GBX_QUERY_BOOL, /* 1, true, 0 or false; out is an int * */
    GBX_QUERY_STRS, /* repeatable text; out is a const char *[cap], *count says how many */
    GBX_QUERY_FN,   /* fn(out, value) checks the value and stores it where out says */
};

/* One parameter a route takes. A parameter that is absent leaves its out as it was (the
 * caller's default); one given twice (other than STRS) is checked each time and the last
 * counts, as evhttp's readers of the query did before. */
struct gbx_query_param {
    const char *name;
    enum gbx_query_kind kind;
    void *out;
    uint64_t min, max; /* U64: the range */
    int clamp;         /* U64: a value above max becomes max, rather than an error */
    size_t *count;     /* STRS: how many values out holds (set to 0 when parsing starts) */
    size_t cap;        /* STRS: how many out can hold; more is an error */
    /* FN: NULL when the value is good, else what it must be ("asc or desc"). The value
     * points into the struct gbx_query, and may be kept as long as that is. */
    const char *(*fn)(void *out, const char *value);
};

/* Flags of gbx_query_parse. */
enum {
    /* A parameter the table does not name is skipped (E2B ignores them, as it does unknown
     * JSON fields); without this flag it is an error listing the names the table has. */
    GBX_QUERY_IGNORE_UNKNOWN = 1 << 0,
    /* Read the query as web clients write one (E2B's): names are percent-decoded as well as
     * values, a name without '=' has an empty value and empty pairs ("a=1&&b=2") are
     * skipped, but an escape that is not %XX, or is %00, makes the query malformed.
     * Without this flag the reading is libevent's evhttp_parse_query_str, which the native
     * routes always used: each pair must be NAME=VALUE with a non-empty NAME (one trailing
     * '&' aside), names are taken as they are, and in values a '%' not followed by two hex
     * digits stays as it is and a %00 ends the value. In both readings '+' is a space. */
    GBX_QUERY_FORM = 1 << 1,
};

/* The decoded text of one query string: STR, STRS and FN values point into it. An all-zero
 * struct is empty; release it once those values are no longer used. */
struct gbx_query {
    char *buf; /* owned */
};

/* Parse query (NULL or "" is an empty query) against params[0..n), storing each value it
 * finds through its parameter's out. 0, or -1 with *err (GBX_ERR_INVALID, EINVAL) saying
 * what is wrong: a malformed query, an unknown parameter, or a value that is not what its
 * parameter takes, naming the parameter and what it expects. Pairs are read in order and the
 * first error stops the parse (outs may then hold the values read before it). q is released
 * first, so one struct may be parsed into again; release it even after an error. */
int gbx_query_parse(struct gbx_query *q, const char *query, const struct gbx_query_param *params,
                    size_t n, unsigned flags, struct gbx_err **err) GBX_WUR;
void gbx_query_release(struct gbx_query *q);

/* Percent-decode s[0..n) into a new string ('+' is a space when plus is set), as E2B's form
 * readings want it: NULL for a '%' not followed by two hex digits, for %00, and for a NUL
 * byte. */
char *gbx_pct_decode(const char *s, size_t n, int plus);

#endif
