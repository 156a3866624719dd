/* SPDX-License-Identifier: MIT */
/* Egress policy: parsing, serialization and evaluation. The semantics are documented at the
 * top of policy.h. No I/O; the check functions allocate nothing. */
#include "egress/policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/mem.h"
#include "base/util.h"

#define HOST_HELP "not a host name, a '*.suffix' wildcard, '*', an IPv4 address or an IPv4 CIDR"
#define SHOW_MAX 72 /* a quoted value in a message: 64 characters and "..." */

/* ---- modes ---------------------------------------------------------------------------- */

static const char *const mode_names[] = {
    [GBX_EGRESS_POLICY] = "policy",
    [GBX_EGRESS_NONE] = "none",
    [GBX_EGRESS_OPEN] = "open",
};

const char *gbx_egress_mode_name(enum gbx_egress_mode m)
{
    if ((unsigned)m >= GBX_ARRAY_SIZE(mode_names))
        return "?";
    return mode_names[m];
}

int gbx_egress_mode_parse(const char *s, enum gbx_egress_mode *m)
{
    for (size_t i = 0; s && i < GBX_ARRAY_SIZE(mode_names); i++)
        if (strcmp(s, mode_names[i]) == 0) {
            *m = (enum gbx_egress_mode)i;
            return 0;
        }
    return -EINVAL;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

struct gbx_egress_policy *gbx_egress_policy_new(enum gbx_egress_mode m)
{
    struct gbx_egress_policy *p = gbx_xcalloc(1, sizeof(*p));
    p->mode = m;
    return p;
}

static void rule_release(struct gbx_egress_rule *r)
{
    free(r->host);
    for (size_t i = 0; i < r->nmethods; i++)
        free(r->methods[i]);
    free(r->methods);
    free(r->path_prefix);
    memset(r, 0, sizeof(*r));
}

void gbx_egress_policy_free(struct gbx_egress_policy *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->nrules; i++)
        rule_release(&p->rules[i]);
    free(p->rules);
    for (size_t i = 0; i < p->nsecrets; i++)
        free(p->secrets[i]);
    free(p->secrets);
    free(p);
}

static void policy_freep(struct gbx_egress_policy **p)
{
    gbx_egress_policy_free(*p);
}
#define auto_policy __attribute__((cleanup(policy_freep)))

static char *strdup_or_null(const char *s)
{
    return s ? gbx_xstrdup(s) : NULL;
}

static void rule_copy(struct gbx_egress_rule *dst, const struct gbx_egress_rule *src)
{
    dst->allow = src->allow;
    dst->host = strdup_or_null(src->host);
    dst->port_lo = src->port_lo;
    dst->port_hi = src->port_hi;
    dst->methods = NULL;
    dst->nmethods = 0;
    if (src->nmethods) {
        dst->methods = gbx_xcalloc(src->nmethods, sizeof(*dst->methods));
        for (size_t i = 0; i < src->nmethods; i++)
            dst->methods[i] = strdup_or_null(src->methods[i]);
        dst->nmethods = src->nmethods;
    }
    dst->path_prefix = strdup_or_null(src->path_prefix);
}

struct gbx_egress_policy *gbx_egress_policy_dup(const struct gbx_egress_policy *p)
{
    struct gbx_egress_policy *c = gbx_egress_policy_new(p->mode);
    if (p->nrules) {
        c->rules = gbx_xcalloc(p->nrules, sizeof(*c->rules));
        for (size_t i = 0; i < p->nrules; i++)
            rule_copy(&c->rules[i], &p->rules[i]);
        c->nrules = p->nrules;
    }
    if (p->nsecrets) {
        c->secrets = gbx_xcalloc(p->nsecrets, sizeof(*c->secrets));
        for (size_t i = 0; i < p->nsecrets; i++)
            c->secrets[i] = strdup_or_null(p->secrets[i]);
        c->nsecrets = p->nsecrets;
    }
    return c;
}

/* Append a zeroed rule (the caller has bounded the count). Only for policies built here from
 * gbx_egress_policy_new: the capacity is 4, 8, 16, ... as nrules reaches it. */
static struct gbx_egress_rule *policy_add_rule(struct gbx_egress_policy *p)
{
    size_t n = p->nrules;
    if (n == 0 || (n >= 4 && (n & (n - 1)) == 0))
        p->rules = gbx_xrealloc(p->rules, (n ? n * 2 : 4) * sizeof(*p->rules));
    struct gbx_egress_rule *r = &p->rules[p->nrules++];
    memset(r, 0, sizeof(*r));
    return r;
}

/* ---- small helpers -------------------------------------------------------------------- */

GBX_PRINTF(2, 3)
static int invalid(struct gbx_err **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = gbx_vasprintf(fmt, ap);
    va_end(ap);
    gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "%s", m);
    free(m);
    return -1;
}

/* A value for a message: at most 64 characters, non-printable bytes as '?'. */
static const char *show(const char *s, size_t len, char buf[SHOW_MAX])
{
    size_t n = len < 64 ? len : 64, o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[o++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    if (len > n) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
    default:
        return "null";
    }
}

/* A JSON string without NUL bytes. 0, or -1 with err set. */
static int get_string(const json_t *v, const char *where, const char **s, size_t *len,
                      struct gbx_err **err)
{
    *s = "";
    *len = 0;
    if (!json_is_string(v))
        return invalid(err, "%s: expected a string, not %s", where, json_type_name(v));
    *s = json_string_value(v);
    *len = json_string_length(v);
    if (strlen(*s) != *len)
        return invalid(err, "%s: contains a NUL character", where);
    return 0;
}

/* jansson iterates objects through non-const pointers; iterating modifies nothing. */
static json_t *unconst(const json_t *j)
{
    return (json_t *)(uintptr_t)j;
}

/* The first key of obj not in known (NULL-terminated), or NULL. */
static const char *unknown_key(const json_t *obj, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach(unconst(obj), key, v)
    {
        size_t i = 0;
        while (known[i] && strcmp(known[i], key) != 0)
            i++;
        if (!known[i])
            return key;
    }
    return NULL;
}

/* A key present and not null. */
static const json_t *get_opt(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* ---- names, addresses, host patterns -------------------------------------------------- */

/* s[0..len) is an RFC 1123 host name without a trailing dot; the last label not all
 * digits. */
static int name_check(const char *s, size_t len)
{
    if (len == 0 || len > GBX_EGRESS_HOST_MAX)
        return -EINVAL;
    size_t label = 0;
    int digits_only = 1;
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? s[i] : '.';
        if (c == '.') {
            if (label == 0 || label > 63 || s[i - 1] == '-')
                return -EINVAL;
            if (i == len && digits_only)
                return -EINVAL;
            label = 0;
            digits_only = 1;
            continue;
        }
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        int digit = c >= '0' && c <= '9';
        if (!alpha && !digit && c != '-')
            return -EINVAL;
        if (c == '-' && label == 0)
            return -EINVAL;
        if (!digit)
            digits_only = 0;
        label++;
    }
    return 0;
}

int gbx_egress_name_valid(const char *name)
{
    if (name == NULL)
        return -EINVAL;
    size_t len = strnlen(name, GBX_EGRESS_HOST_MAX + 2);
    if (len > 1 && name[len - 1] == '.')
        len--;
    return name_check(name, len);
}

int gbx_egress_secret_name_valid(const char *name)
{
    if (name == NULL || name[0] == '\0' || name[0] == '.')
        return -EINVAL;
    size_t i;
    for (i = 0; name[i]; i++) {
        char c = name[i];
        if (i >= GBX_EGRESS_SECRET_MAX)
            return -EINVAL;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return -EINVAL;
    }
    return 0;
}

/* Strict dotted quad: four decimal parts 0-255 without leading zeros. *out in host order. */
static int ipv4_parse(const char *s, size_t len, uint32_t *out)
{
    uint32_t a = 0;
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= len || s[i] != '.')
                return -EINVAL;
            i++;
        }
        size_t start = i;
        unsigned v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 3)
            v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
            return -EINVAL;
        a = a << 8 | v;
    }
    if (i != len)
        return -EINVAL;
    *out = a;
    return 0;
}

static uint32_t prefix_mask(int plen)
{
    return plen <= 0 ? 0 : plen >= 32 ? 0xffffffffu : ~(0xffffffffu >> plen);
}

/* "a.b.c.d" (plen 32) or "a.b.c.d/n". -EINVAL, or -EDOM when bits beyond the prefix are set
 * (*net then holds the masked address). */
static int addr_pattern_parse(const char *s, size_t len, uint32_t *net, int *plen)
{
    const char *slash = memchr(s, '/', len);
    size_t alen = slash ? (size_t)(slash - s) : len;
    uint32_t a;
    if (ipv4_parse(s, alen, &a) < 0)
        return -EINVAL;
    int n = 32;
    if (slash) {
        const char *d = slash + 1;
        size_t dlen = len - alen - 1;
        if (dlen < 1 || dlen > 2 || (dlen == 2 && d[0] == '0'))
            return -EINVAL;
        n = 0;
        for (size_t i = 0; i < dlen; i++) {
            if (d[i] < '0' || d[i] > '9')
                return -EINVAL;
            n = n * 10 + (d[i] - '0');
        }
        if (n > 32)
            return -EINVAL;
    }
    *plen = n;
    *net = a & prefix_mask(n);
    return *net == a ? 0 : -EDOM;
}

/* Validate a host pattern and write its stored form (lowercased, one trailing dot dropped
 * from a name or wildcard) to out (GBX_EGRESS_HOST_MAX + 1 bytes). 0; -EINVAL; -ENAMETOOLONG;
 * -EDOM for a CIDR with host bits set (out then holds the masked CIDR). */
static int host_normalize(const char *in, size_t len, char *out)
{
    if (len > GBX_EGRESS_HOST_MAX + 1)
        return -ENAMETOOLONG;
    int dot = len > 1 && in[len - 1] == '.';
    if (dot)
        len--;
    if (len > GBX_EGRESS_HOST_MAX)
        return -ENAMETOOLONG;
    if (len == 0)
        return -EINVAL;
    for (size_t i = 0; i < len; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    out[len] = '\0';
    if (len == 1 && out[0] == '*')
        return dot ? -EINVAL : 0;
    if (len > 2 && out[0] == '*' && out[1] == '.')
        return name_check(out + 2, len - 2);
    if (name_check(out, len) == 0)
        return 0;
    if (dot)
        return -EINVAL; /* "10.1.2.3." is neither a name nor an address */
    uint32_t net;
    int plen;
    int r = addr_pattern_parse(out, len, &net, &plen);
    if (r == -EDOM) {
        struct in_addr a = {htonl(net)};
        char buf[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a, buf, sizeof(buf));
        snprintf(out, GBX_EGRESS_HOST_MAX + 1, "%s/%d", buf, plen);
    }
    return r;
}

int gbx_egress_host_valid(const char *host)
{
    if (host == NULL)
        return -EINVAL;
    char buf[GBX_EGRESS_HOST_MAX + 1];
    return host_normalize(host, strnlen(host, GBX_EGRESS_HOST_MAX + 2), buf) == 0 ? 0 : -EINVAL;
}

/* Message for a host_normalize failure; -1. */
static int host_error(struct gbx_err **err, const char *where, const char *s, size_t len, int r,
                      const char *masked)
{
    char b[SHOW_MAX];
    if (r == -ENAMETOOLONG)
        return invalid(err, "%s: '%s': longer than %d characters", where, show(s, len, b),
                       GBX_EGRESS_HOST_MAX);
    if (r == -EDOM)
        return invalid(err, "%s: '%s': bits set beyond the prefix length (did you mean '%s'?)",
                       where, show(s, len, b), masked);
    return invalid(err, "%s: '%s': " HOST_HELP, where, show(s, len, b));
}

/* ---- paths ---------------------------------------------------------------------------- */

/* One decoded byte of a path at *s ("%XX" decoded, '\' read as '/'), advancing *s; -1 for a
 * malformed escape. */
static int path_byte(const char **s)
{
    const char *p = *s;
    int c = (unsigned char)p[0];
    if (c == '%') {
        int hi = hexval((unsigned char)p[1]);
        int lo = hi < 0 ? -1 : hexval((unsigned char)p[2]);
        if (lo < 0)
            return -1;
        c = hi << 4 | lo;
        p += 3;
    } else {
        p += 1;
    }
    *s = p;
    return c == '\\' ? '/' : c;
}

static int path_end(char c)
{
    return c == '\0' || c == '?' || c == '#';
}

/* Is path normal (policy.h, "Paths")? As a prefix (is_prefix), the last segment may be
 * incomplete, so it may end in dots ("/." matches "/.well-known"). */
static int path_normal(const char *path, int is_prefix)
{
    if (path == NULL || path[0] != '/')
        return 0;
    const char *s = path + 1;
    size_t name = 0, dots = 0; /* the current segment's name part (before ';') */
    int params = 0;
    for (;;) {
        int end = path_end(*s);
        unsigned char raw = (unsigned char)*s;
        if (!end && (raw <= 0x20 || raw >= 0x7f))
            return 0;
        int c = end ? '/' : path_byte(&s);
        if (c < 0 || (c < 0x20 && !end) || c == 0x7f)
            return 0;
        if (c == '/') {
            if (name == 0 && !(end && !params)) /* "//", "/;x/" ("/" at the end is fine) */
                return 0;
            if (name > 0 && name == dots && dots <= 2 && !(end && is_prefix))
                return 0;
            if (end)
                return 1;
            name = dots = 0;
            params = 0;
        } else if (c == ';') {
            params = 1;
        } else if (!params) {
            name++;
            dots += c == '.';
        }
    }
}

/* Does the normal path start with prefix (a normal prefix), both decoded? */
static int prefix_match(const char *path, const char *prefix)
{
    const char *s = path, *q = prefix;
    while (*q) {
        if (path_end(*s))
            return 0;
        int a = path_byte(&s), b = path_byte(&q);
        if (a < 0 || b < 0 || a != b)
            return 0;
    }
    return 1;
}

/* An HTTP method token: tchar, 1-32 characters. */
static int method_check(const char *s, size_t len)
{
    if (len == 0 || len > GBX_EGRESS_METHOD_MAX)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(isalnum(c) || strchr("!#$%&'*+-.^_`|~", c)) || c == '\0')
            return -EINVAL;
    }
    return 0;
}

/* ---- parsing -------------------------------------------------------------------------- */

/* One "ports" entry: 443, "443" or "8000-8100". */
static int port_entry_parse(const json_t *v, const char *where, uint16_t *lo, uint16_t *hi,
                            struct gbx_err **err)
{
    char b[SHOW_MAX];
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 1 || n > 65535)
            return invalid(err, "%s: %lld: expected a port 1-65535 or a range 'lo-hi'", where,
                           (long long)n);
        *lo = *hi = (uint16_t)n;
        return 0;
    }
    if (!json_is_string(v))
        return invalid(err, "%s: expected a port 1-65535 or a range 'lo-hi', not %s", where,
                       json_type_name(v));
    const char *s;
    size_t len;
    if (get_string(v, where, &s, &len, err) < 0)
        return -1;
    unsigned val[2] = {0, 0};
    size_t i = 0;
    int n = 0;
    for (; n < 2; n++) {
        size_t start = i;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 6)
            val[n] = val[n] * 10 + (unsigned)(s[i++] - '0');
        if (i == start || val[n] < 1 || val[n] > 65535)
            return invalid(err, "%s: '%s': expected a port 1-65535 or a range 'lo-hi'", where,
                           show(s, len, b));
        if (i == len || s[i] != '-' || n == 1)
            break;
        i++;
    }
    if (i != len)
        return invalid(err, "%s: '%s': expected a port 1-65535 or a range 'lo-hi'", where,
                       show(s, len, b));
    if (n == 0)
        val[1] = val[0];
    if (val[1] < val[0])
        return invalid(err, "%s: '%s': the range ends before it starts", where, show(s, len, b));
    *lo = (uint16_t)val[0];
    *hi = (uint16_t)val[1];
    return 0;
}

static int methods_parse(const json_t *v, const char *where, struct gbx_egress_rule *r,
                         struct gbx_err **err)
{
    if (!json_is_array(v))
        return invalid(err, "%s.methods: expected an array of strings, not %s", where,
                       json_type_name(v));
    size_t n = json_array_size(v);
    if (n == 0)
        return invalid(err, "%s.methods: empty (leave it out for any method)", where);
    if (n > GBX_EGRESS_MAX_METHODS)
        return invalid(err, "%s.methods: more than %d methods", where, GBX_EGRESS_MAX_METHODS);
    r->methods = gbx_xcalloc(n, sizeof(*r->methods));
    for (size_t i = 0; i < n; i++) {
        char w[96], b[SHOW_MAX];
        snprintf(w, sizeof(w), "%s.methods[%zu]", where, i);
        const char *s;
        size_t len;
        if (get_string(json_array_get(v, i), w, &s, &len, err) < 0)
            return -1;
        if (method_check(s, len) < 0)
            return invalid(err, "%s: '%s': not an HTTP method", w, show(s, len, b));
        char *m = gbx_xstrdup(s);
        for (char *c = m; *c; c++)
            *c = (char)toupper((unsigned char)*c);
        r->methods[r->nmethods++] = m;
    }
    return 0;
}

static int path_prefix_parse(const json_t *v, const char *where, struct gbx_egress_rule *r,
                             struct gbx_err **err)
{
    char w[96], b[SHOW_MAX];
    snprintf(w, sizeof(w), "%s.path_prefix", where);
    const char *s;
    size_t len;
    if (get_string(v, w, &s, &len, err) < 0)
        return -1;
    if (len == 0 || s[0] != '/')
        return invalid(err, "%s: '%s': must start with '/'", w, show(s, len, b));
    if (len > GBX_EGRESS_PATH_MAX)
        return invalid(err, "%s: longer than %d characters", w, GBX_EGRESS_PATH_MAX);
    if (strpbrk(s, "?#") || !path_normal(s, 1))
        return invalid(err,
                       "%s: '%s': not a normal path (printable, valid %%XX escapes, no '?', "
                       "'#', '//', '.' or '..' segments)",
                       w, show(s, len, b));
    r->path_prefix = gbx_xstrdup(s);
    return 0;
}

static const char *const rule_keys[] = {"action", "host", "ports", "methods", "path_prefix", NULL};

/* Parse rules[idx] into p, one rule per "ports" entry. */
static int rule_parse(const json_t *jr, size_t idx, struct gbx_egress_policy *p,
                      struct gbx_err **err)
{
    char where[48], w[80], b[SHOW_MAX];
    snprintf(where, sizeof(where), "rules[%zu]", idx);
    if (!json_is_object(jr))
        return invalid(err, "%s: expected an object, not %s", where, json_type_name(jr));
    const char *bad = unknown_key(jr, rule_keys);
    if (bad)
        return invalid(err,
                       "%s: '%s': unknown key (expected action, host, ports, methods, "
                       "path_prefix)",
                       where, show(bad, strlen(bad), b));

    struct gbx_egress_rule t = {.allow = 1};
    int ret = -1;
    const json_t *v;
    const char *s;
    size_t len;
    if ((v = get_opt(jr, "action"))) {
        snprintf(w, sizeof(w), "%s.action", where);
        if (get_string(v, w, &s, &len, err) < 0)
            goto out;
        if (strcmp(s, "allow") == 0 || strcmp(s, "deny") == 0) {
            t.allow = s[0] == 'a';
        } else {
            invalid(err, "%s: '%s': expected 'allow' or 'deny'", w, show(s, len, b));
            goto out;
        }
    }
    snprintf(w, sizeof(w), "%s.host", where);
    if (!(v = get_opt(jr, "host"))) {
        invalid(err, "%s: missing", w);
        goto out;
    }
    if (get_string(v, w, &s, &len, err) < 0)
        goto out;
    char host[GBX_EGRESS_HOST_MAX + 1];
    int r = host_normalize(s, len, host);
    if (r < 0) {
        host_error(err, w, s, len, r, host);
        goto out;
    }
    t.host = gbx_xstrdup(host);
    if ((v = get_opt(jr, "methods")) && methods_parse(v, where, &t, err) < 0)
        goto out;
    if ((v = get_opt(jr, "path_prefix")) && path_prefix_parse(v, where, &t, err) < 0)
        goto out;

    const json_t *ports = get_opt(jr, "ports");
    size_t nports = 1;
    if (json_is_array(ports)) {
        nports = json_array_size(ports);
        if (nports == 0) {
            invalid(err, "%s.ports: empty (leave it out for any port)", where);
            goto out;
        }
    }
    if (nports > GBX_EGRESS_MAX_RULES - p->nrules) {
        invalid(err, "%s.ports: more than %d rules in all (each port entry counts as one)", where,
                GBX_EGRESS_MAX_RULES);
        goto out;
    }
    for (size_t i = 0; i < nports; i++) {
        uint16_t lo = 0, hi = 0;
        if (ports) {
            const json_t *e = json_is_array(ports) ? json_array_get(ports, i) : ports;
            if (json_is_array(ports))
                snprintf(w, sizeof(w), "%s.ports[%zu]", where, i);
            else
                snprintf(w, sizeof(w), "%s.ports", where);
            if (port_entry_parse(e, w, &lo, &hi, err) < 0)
                goto out;
        }
        struct gbx_egress_rule *nr = policy_add_rule(p);
        rule_copy(nr, &t);
        nr->port_lo = lo;
        nr->port_hi = hi;
    }
    ret = 0;
out:
    rule_release(&t);
    return ret;
}

static int secrets_parse(const json_t *v, struct gbx_egress_policy *p, struct gbx_err **err)
{
    if (!json_is_array(v))
        return invalid(err, "secrets: expected an array of names, not %s", json_type_name(v));
    size_t n = json_array_size(v);
    if (n > GBX_EGRESS_MAX_SECRETS)
        return invalid(err, "secrets: more than %d secrets", GBX_EGRESS_MAX_SECRETS);
    if (n == 0)
        return 0;
    p->secrets = gbx_xcalloc(n, sizeof(*p->secrets));
    for (size_t i = 0; i < n; i++) {
        char w[32], b[SHOW_MAX];
        snprintf(w, sizeof(w), "secrets[%zu]", i);
        const char *s;
        size_t len;
        if (get_string(json_array_get(v, i), w, &s, &len, err) < 0)
            return -1;
        if (gbx_egress_secret_name_valid(s) < 0)
            return invalid(err,
                           "%s: '%s': not a secret name (1-64 of A-Z a-z 0-9 _ . -, not "
                           "starting with '.')",
                           w, show(s, len, b));
        for (size_t j = 0; j < p->nsecrets; j++)
            if (strcmp(p->secrets[j], s) == 0)
                return invalid(err, "%s: '%s': listed twice", w, s);
        p->secrets[p->nsecrets++] = gbx_xstrdup(s);
    }
    return 0;
}

static const char *const policy_keys[] = {"mode", "rules", "secrets", NULL};

int gbx_egress_policy_parse(const json_t *j, enum gbx_egress_mode dflt,
                            struct gbx_egress_policy **out, struct gbx_err **err)
{
    char b[SHOW_MAX];
    if (j == NULL || json_is_null(j)) {
        *out = gbx_egress_policy_new(dflt);
        return 0;
    }
    if (!json_is_object(j))
        return invalid(err, "expected a policy object, not %s", json_type_name(j));
    const char *bad = unknown_key(j, policy_keys);
    if (bad)
        return invalid(err, "'%s': unknown key (expected mode, rules, secrets)",
                       show(bad, strlen(bad), b));

    auto_policy struct gbx_egress_policy *p = gbx_egress_policy_new(dflt);
    const json_t *v;
    if ((v = get_opt(j, "mode"))) {
        const char *s;
        size_t len;
        if (get_string(v, "mode", &s, &len, err) < 0)
            return -1;
        if (gbx_egress_mode_parse(s, &p->mode) < 0)
            return invalid(err, "mode: '%s': expected 'policy', 'none' or 'open'", show(s, len, b));
    }
    if ((v = get_opt(j, "rules"))) {
        if (!json_is_array(v))
            return invalid(err, "rules: expected an array, not %s", json_type_name(v));
        if (json_array_size(v) > GBX_EGRESS_MAX_RULES)
            return invalid(err, "rules: more than %d rules", GBX_EGRESS_MAX_RULES);
        for (size_t i = 0; i < json_array_size(v); i++)
            if (rule_parse(json_array_get(v, i), i, p, err) < 0)
                return -1;
    }
    if ((v = get_opt(j, "secrets")) && secrets_parse(v, p, err) < 0)
        return -1;
    *out = gbx_steal_ptr(&p);
    return 0;
}

/* ---- serialization -------------------------------------------------------------------- */

static json_t *strings_json(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        if (v[i])
            json_array_append_new(a, json_string(v[i]));
    return a;
}

json_t *gbx_egress_policy_json(const struct gbx_egress_policy *p)
{
    json_t *rules = json_array();
    for (size_t i = 0; i < p->nrules; i++) {
        const struct gbx_egress_rule *r = &p->rules[i];
        json_t *o = json_object();
        json_object_set_new(o, "action", json_string(r->allow ? "allow" : "deny"));
        json_object_set_new(o, "host", json_string(r->host ? r->host : ""));
        if (r->port_lo || r->port_hi) {
            json_t *port = r->port_lo == r->port_hi
                               ? json_integer(r->port_lo)
                               : json_sprintf("%u-%u", (unsigned)r->port_lo, (unsigned)r->port_hi);
            json_object_set_new(o, "ports", json_pack("[o]", port));
        }
        if (r->nmethods)
            json_object_set_new(o, "methods", strings_json(r->methods, r->nmethods));
        if (r->path_prefix)
            json_object_set_new(o, "path_prefix", json_string(r->path_prefix));
        json_array_append_new(rules, o);
    }
    return json_pack("{s:s,s:o,s:o}", "mode", gbx_egress_mode_name(p->mode), "rules", rules,
                     "secrets", strings_json(p->secrets, p->nsecrets));
}

/* ---- evaluation ----------------------------------------------------------------------- */

enum host_kind { HK_NONE = 0, HK_ANY, HK_NAME, HK_WILD, HK_ADDR };

struct host_pat {
    enum host_kind kind;
    const char *s; /* HK_NAME: the name; HK_WILD: the suffix after "*." */
    size_t len;
    uint32_t net, mask; /* HK_ADDR, host order */
    int plen;
};

/* Classify a stored host (as host_normalize writes it); HK_NONE matches nothing. */
static void host_pat_of(const char *h, struct host_pat *hp)
{
    memset(hp, 0, sizeof(*hp));
    if (h == NULL || h[0] == '\0')
        return;
    if (h[0] == '*') {
        if (h[1] == '\0')
            hp->kind = HK_ANY;
        else if (h[1] == '.' && h[2] != '\0') {
            hp->kind = HK_WILD;
            hp->s = h + 2;
            hp->len = strlen(hp->s);
        }
        return;
    }
    if (h[0] >= '0' && h[0] <= '9') {
        size_t len = strnlen(h, 19);
        if (len < 19 && addr_pattern_parse(h, len, &hp->net, &hp->plen) == 0) {
            hp->kind = HK_ADDR;
            hp->mask = prefix_mask(hp->plen);
            return;
        }
    }
    hp->kind = HK_NAME;
    hp->s = h;
    hp->len = strlen(h);
}

/* What a check is about: a normalized name and/or an address. */
struct target {
    const char *name; /* lowercased, no trailing dot; NULL: none */
    size_t nlen;
    int has_addr;
    uint32_t addr; /* host order */
};

/* Fill t; buf holds the normalized name. -1 when the name is given but not valid. */
static int target_init(struct target *t, char *buf, const char *name, const struct in_addr *addr)
{
    memset(t, 0, sizeof(*t));
    if (addr) {
        t->has_addr = 1;
        t->addr = ntohl(addr->s_addr);
    }
    if (name == NULL)
        return 0;
    size_t len = strnlen(name, GBX_EGRESS_HOST_MAX + 2);
    if (len > 1 && name[len - 1] == '.')
        len--;
    if (name_check(name, len) < 0)
        return -1;
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)tolower((unsigned char)name[i]);
    buf[len] = '\0';
    t->name = buf;
    t->nlen = len;
    return 0;
}

static int host_match(const struct host_pat *hp, const struct target *t)
{
    switch (hp->kind) {
    case HK_ANY:
        return t->name != NULL || t->has_addr;
    case HK_NAME:
        return t->name && t->nlen == hp->len && strncasecmp(t->name, hp->s, hp->len) == 0;
    case HK_WILD:
        return t->name && t->nlen > hp->len + 1 && t->name[t->nlen - hp->len - 1] == '.' &&
               strncasecmp(t->name + t->nlen - hp->len, hp->s, hp->len) == 0;
    case HK_ADDR:
        return t->has_addr && (t->addr & hp->mask) == hp->net;
    case HK_NONE:
    default:
        return 0;
    }
}

static int has_ports(const struct gbx_egress_rule *r)
{
    return r->port_lo || r->port_hi;
}

static int has_l7(const struct gbx_egress_rule *r)
{
    return r->nmethods > 0 || r->path_prefix != NULL;
}

/* any: port 0 stands for every port (check_name, names_addr). */
static int port_match(const struct gbx_egress_rule *r, uint16_t port, int any)
{
    if (!has_ports(r))
        return 1;
    if (any && port == 0)
        return r->port_lo <= r->port_hi;
    return r->port_lo <= port && port <= r->port_hi;
}

static unsigned host_score(const struct host_pat *hp)
{
    switch (hp->kind) {
    case HK_NAME:
        return 400;
    case HK_ADDR:
        return hp->plen == 32 ? 400 : 300 + (unsigned)hp->plen;
    case HK_WILD: {
        unsigned labels = 1;
        for (size_t i = 0; i < hp->len; i++)
            labels += hp->s[i] == '.';
        return 100 + (labels < 199 ? labels : 199);
    }
    case HK_ANY:
    case HK_NONE:
    default:
        return 0;
    }
}

/* Specificity as one number, larger wins (policy.h, "Precedence"):
 * host (bits 38+) > port (bits 21-37) > L7 (bits 1-20) > deny (bit 0). */
static uint64_t rule_rank(const struct gbx_egress_rule *r, const struct host_pat *hp)
{
    uint64_t port = 0, l7 = 0;
    if (has_ports(r) && r->port_hi >= r->port_lo)
        port = 65536u - (uint64_t)(r->port_hi - r->port_lo);
    if (r->path_prefix)
        l7 = 2 + 2 * (uint64_t)strnlen(r->path_prefix, 1u << 18) + (r->nmethods > 0);
    else if (r->nmethods)
        l7 = 1;
    return (uint64_t)host_score(hp) << 38 | port << 21 | l7 << 1 | (uint64_t)!r->allow;
}

/* The request-stage L7 test (policy.h, "Paths"). */
static int l7_match(const struct gbx_egress_rule *r, const char *method, const char *path,
                    int path_ok)
{
    if (r->nmethods) {
        int found = 0;
        for (size_t i = 0; method && !found && i < r->nmethods; i++)
            found = r->methods[i] && strcasecmp(r->methods[i], method) == 0;
        if (!found && (method || r->allow))
            return 0;
    }
    if (r->path_prefix) {
        if (!path_ok)
            return !r->allow;
        if (!path_normal(r->path_prefix, 1) || !prefix_match(path, r->path_prefix))
            return 0;
    }
    return 1;
}

/* The best of the rules considered so far. */
struct best {
    int rule; /* -1: none */
    uint64_t rank;
};

static void best_offer(struct best *b, size_t i, uint64_t rank)
{
    if (b->rule < 0 || rank > b->rank) {
        b->rule = (int)i;
        b->rank = rank;
    }
}

static void decide(const struct gbx_egress_policy *p, const struct best *b,
                   struct gbx_egress_decision *d)
{
    if (b->rule >= 0) {
        d->allow = p->rules[b->rule].allow ? 1 : 0;
        d->rule = b->rule;
    } else {
        d->allow = p->mode == GBX_EGRESS_OPEN;
        d->rule = -1;
    }
}

void gbx_egress_policy_check_name(const struct gbx_egress_policy *p, const char *name,
                                  struct gbx_egress_decision *d)
{
    *d = (struct gbx_egress_decision){.allow = 0, .rule = -1, .l7 = 0};
    char buf[GBX_EGRESS_HOST_MAX + 1];
    struct target t;
    if (p == NULL || p->mode == GBX_EGRESS_NONE || name == NULL ||
        target_init(&t, buf, name, NULL) < 0)
        return;
    struct best b = {-1, 0};
    for (size_t i = 0; i < p->nrules; i++) {
        const struct gbx_egress_rule *r = &p->rules[i];
        struct host_pat hp;
        host_pat_of(r->host, &hp);
        if (!host_match(&hp, &t) || !port_match(r, 0, 1))
            continue;
        /* every allow counts; a deny only when it covers all ports and all requests */
        if (r->allow || (!has_ports(r) && !has_l7(r)))
            best_offer(&b, i, rule_rank(r, &hp));
    }
    decide(p, &b, d);
}

void gbx_egress_policy_check_conn(const struct gbx_egress_policy *p, const char *name,
                                  const struct in_addr *addr, uint16_t port,
                                  struct gbx_egress_decision *d)
{
    *d = (struct gbx_egress_decision){.allow = 0, .rule = -1, .l7 = 0};
    char buf[GBX_EGRESS_HOST_MAX + 1];
    struct target t;
    if (p == NULL || p->mode == GBX_EGRESS_NONE || (name == NULL && addr == NULL) ||
        target_init(&t, buf, name, addr) < 0)
        return;
    struct best b = {-1, 0}, plain = {-1, 0}, l7 = {-1, 0};
    for (size_t i = 0; i < p->nrules; i++) {
        const struct gbx_egress_rule *r = &p->rules[i];
        struct host_pat hp;
        host_pat_of(r->host, &hp);
        if (!host_match(&hp, &t) || !port_match(r, port, 0))
            continue;
        uint64_t rank = rule_rank(r, &hp);
        if (has_l7(r)) {
            best_offer(&l7, i, rank);
            if (!r->allow)
                continue; /* denies requests, not the connection */
        } else {
            best_offer(&plain, i, rank);
        }
        best_offer(&b, i, rank);
    }
    decide(p, &b, d);
    d->l7 = d->allow && l7.rule >= 0 && (plain.rule < 0 || l7.rank > plain.rank);
}

void gbx_egress_policy_check_request_addr(const struct gbx_egress_policy *p, const char *name,
                                          const struct in_addr *addr, uint16_t port,
                                          const char *method, const char *path,
                                          struct gbx_egress_decision *d)
{
    *d = (struct gbx_egress_decision){.allow = 0, .rule = -1, .l7 = 0};
    char buf[GBX_EGRESS_HOST_MAX + 1];
    struct target t;
    if (p == NULL || p->mode == GBX_EGRESS_NONE || (name == NULL && addr == NULL) ||
        target_init(&t, buf, name, addr) < 0)
        return;
    int path_ok = path_normal(path, 0);
    struct best b = {-1, 0};
    for (size_t i = 0; i < p->nrules; i++) {
        const struct gbx_egress_rule *r = &p->rules[i];
        struct host_pat hp;
        host_pat_of(r->host, &hp);
        if (host_match(&hp, &t) && port_match(r, port, 0) && l7_match(r, method, path, path_ok))
            best_offer(&b, i, rule_rank(r, &hp));
    }
    decide(p, &b, d);
}

void gbx_egress_policy_check_request(const struct gbx_egress_policy *p, const char *name,
                                     uint16_t port, const char *method, const char *path,
                                     struct gbx_egress_decision *d)
{
    gbx_egress_policy_check_request_addr(p, name, NULL, port, method, path, d);
}

int gbx_egress_policy_names_addr(const struct gbx_egress_policy *p, const struct in_addr *a,
                                 uint16_t port, int *rule)
{
    char buf[1];
    struct target t;
    if (p == NULL || a == NULL || p->mode == GBX_EGRESS_NONE)
        return 0;
    (void)target_init(&t, buf, NULL, a);
    struct best allow = {-1, 0}, deny = {-1, 0};
    for (size_t i = 0; i < p->nrules; i++) {
        const struct gbx_egress_rule *r = &p->rules[i];
        struct host_pat hp;
        host_pat_of(r->host, &hp);
        if (!host_match(&hp, &t) || !port_match(r, port, 1))
            continue;
        if (r->allow && hp.kind == HK_ADDR)
            best_offer(&allow, i, rule_rank(r, &hp));
        else if (!r->allow && !has_l7(r))
            best_offer(&deny, i, rule_rank(r, &hp));
    }
    if (allow.rule < 0 || (deny.rule >= 0 && deny.rank > allow.rank))
        return 0;
    if (rule)
        *rule = allow.rule;
    return 1;
}

int gbx_egress_addr_special(const struct in_addr *a)
{
    static const struct {
        uint32_t net;
        int plen;
    } special[] = {
        {0x00000000, 8},  /* 0.0.0.0/8 "this network" */
        {0x0a000000, 8},  /* 10/8 private */
        {0x64400000, 10}, /* 100.64/10 carrier-grade NAT */
        {0x7f000000, 8},  /* 127/8 loopback */
        {0xa9fe0000, 16}, /* 169.254/16 link-local, cloud metadata */
        {0xac100000, 12}, /* 172.16/12 private */
        {0xc0000000, 24}, /* 192.0.0/24 IETF protocol assignments */
        {0xc0a80000, 16}, /* 192.168/16 private */
        {0xc6120000, 15}, /* 198.18/15 benchmarking */
        {0xe0000000, 4},  /* 224/4 multicast */
        {0xf0000000, 4},  /* 240/4 reserved, broadcast */
    };
    uint32_t h = ntohl(a->s_addr);
    for (size_t i = 0; i < GBX_ARRAY_SIZE(special); i++)
        if ((h & prefix_mask(special[i].plen)) == special[i].net)
            return 1;
    return 0;
}

/* ---- E2B ------------------------------------------------------------------------------ */

/* Does allowing host a already let through everything host d names (both stored forms)? */
static int host_covers(const char *a, const char *d)
{
    struct host_pat ha, hd;
    host_pat_of(a, &ha);
    host_pat_of(d, &hd);
    switch (ha.kind) {
    case HK_ANY:
        return 1;
    case HK_ADDR:
        return hd.kind == HK_ADDR && ha.plen <= hd.plen && (hd.net & ha.mask) == ha.net;
    case HK_NAME:
        return hd.kind == HK_NAME && strcmp(ha.s, hd.s) == 0;
    case HK_WILD:
        if (hd.kind != HK_NAME && hd.kind != HK_WILD)
            return 0;
        if (hd.kind == HK_WILD && strcmp(ha.s, hd.s) == 0)
            return 1;
        return hd.len > ha.len + 1 && hd.s[hd.len - ha.len - 1] == '.' &&
               strcmp(hd.s + hd.len - ha.len, ha.s) == 0;
    case HK_NONE:
    default:
        return 0;
    }
}

struct host_list {
    char **v;
    size_t n;
};

static void host_list_release(struct host_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* An allowOut/denyOut array into stored host forms ("0.0.0.0/0" becomes "*"). */
static int host_list_parse(const json_t *v, const char *where, struct host_list *l,
                           struct gbx_err **err)
{
    if (v == NULL)
        return 0;
    if (!json_is_array(v))
        return invalid(err, "%s: expected an array of strings, not %s", where, json_type_name(v));
    size_t n = json_array_size(v);
    if (n > GBX_EGRESS_MAX_RULES)
        return invalid(err, "%s: more than %d entries", where, GBX_EGRESS_MAX_RULES);
    if (n == 0)
        return 0;
    l->v = gbx_xcalloc(n, sizeof(*l->v));
    for (size_t i = 0; i < n; i++) {
        char w[64], host[GBX_EGRESS_HOST_MAX + 1];
        snprintf(w, sizeof(w), "%s[%zu]", where, i);
        const char *s;
        size_t len;
        if (get_string(json_array_get(v, i), w, &s, &len, err) < 0)
            return -1;
        int r = host_normalize(s, len, host);
        if (r < 0)
            return host_error(err, w, s, len, r, host);
        l->v[l->n++] = gbx_xstrdup(strcmp(host, "0.0.0.0/0") == 0 ? "*" : host);
    }
    return 0;
}

static const char *const network_keys[] = {
    "allowOut",   "denyOut", "allowPublicTraffic", "maskRequestHost",
    "httpsPorts", "rules",   "egressProxy",        "allow_internet_access",
    NULL,
};

/* net: the network object (or NULL); internet: -1 unsaid, 0 false, 1 true; pfx: "network."
 * or "" for messages; update: allow_internet_access is one of net's keys. */
static int e2b_build(const json_t *net, int internet, const char *pfx, int update,
                     enum gbx_egress_mode dflt, struct gbx_egress_policy **out,
                     struct gbx_err **err)
{
    char b[SHOW_MAX], w[64];
    struct host_list allow = {0}, deny = {0};
    struct gbx_egress_policy *p = NULL;
    int ret = -1;
    if (net) {
        const char *bad = unknown_key(net, network_keys);
        if (!update && bad == NULL && json_object_get(net, "allow_internet_access"))
            bad = "allow_internet_access";
        if (bad) {
            invalid(err,
                    "%s%s: unknown key (expected allowOut, denyOut, allowPublicTraffic, "
                    "maskRequestHost, httpsPorts%s)",
                    pfx, show(bad, strlen(bad), b), update ? ", allow_internet_access" : "");
            goto out;
        }
        const json_t *v = get_opt(net, "rules");
        if (v && !(json_is_object(v) && json_object_size(v) == 0)) {
            invalid(err,
                    "%srules: per-host request transforms are not supported (attach a "
                    "credential with the policy's secrets instead)",
                    pfx);
            goto out;
        }
        if (get_opt(net, "egressProxy")) {
            invalid(err,
                    "%segressProxy: not supported (egress leaves through Glovebox's own "
                    "proxy)",
                    pfx);
            goto out;
        }
        snprintf(w, sizeof(w), "%sallowOut", pfx);
        if (host_list_parse(get_opt(net, "allowOut"), w, &allow, err) < 0)
            goto out;
        snprintf(w, sizeof(w), "%sdenyOut", pfx);
        if (host_list_parse(get_opt(net, "denyOut"), w, &deny, err) < 0)
            goto out;
    }

    int deny_all = 0;
    for (size_t i = 0; i < deny.n; i++)
        deny_all |= strcmp(deny.v[i], "*") == 0;
    enum gbx_egress_mode mode = internet == 0 || deny_all ? GBX_EGRESS_POLICY
                                : internet == 1           ? GBX_EGRESS_OPEN
                                                          : dflt;
    p = gbx_egress_policy_new(mode);
    for (size_t i = 0; i < allow.n; i++) {
        struct gbx_egress_rule *r = policy_add_rule(p);
        r->allow = 1;
        r->host = gbx_xstrdup(allow.v[i]);
    }
    if (internet != 0 && !deny_all) {
        for (size_t i = 0; i < deny.n; i++) {
            int covered = 0;
            for (size_t k = 0; !covered && k < allow.n; k++)
                covered = host_covers(allow.v[k], deny.v[i]);
            if (covered)
                continue;
            if (p->nrules >= GBX_EGRESS_MAX_RULES) {
                invalid(err, "%sallowOut and denyOut: more than %d entries together", pfx,
                        GBX_EGRESS_MAX_RULES);
                goto out;
            }
            policy_add_rule(p)->host = gbx_xstrdup(deny.v[i]);
        }
    }
    *out = gbx_steal_ptr(&p);
    ret = 0;
out:
    gbx_egress_policy_free(p);
    host_list_release(&allow);
    host_list_release(&deny);
    return ret;
}

static int internet_get(const json_t *obj, int *internet, struct gbx_err **err)
{
    const json_t *v = get_opt(obj, "allow_internet_access");
    *internet = -1;
    if (v == NULL)
        return 0;
    if (!json_is_boolean(v))
        return invalid(err, "allow_internet_access: expected true or false, not %s",
                       json_type_name(v));
    *internet = json_is_true(v);
    return 0;
}

int gbx_egress_policy_from_e2b(const json_t *body, enum gbx_egress_mode dflt,
                               struct gbx_egress_policy **out, struct gbx_err **err)
{
    if (body == NULL || json_is_null(body)) {
        *out = gbx_egress_policy_new(dflt);
        return 0;
    }
    if (!json_is_object(body))
        return invalid(err, "expected an object, not %s", json_type_name(body));
    int internet;
    if (internet_get(body, &internet, err) < 0)
        return -1;
    const json_t *net = get_opt(body, "network");
    if (net && !json_is_object(net))
        return invalid(err, "network: expected an object, not %s", json_type_name(net));
    return e2b_build(net, internet, "network.", 0, dflt, out, err);
}

int gbx_egress_policy_from_e2b_update(const json_t *body, enum gbx_egress_mode dflt,
                                      struct gbx_egress_policy **out, struct gbx_err **err)
{
    if (body == NULL || json_is_null(body)) {
        *out = gbx_egress_policy_new(dflt);
        return 0;
    }
    if (!json_is_object(body))
        return invalid(err, "expected an object, not %s", json_type_name(body));
    int internet;
    if (internet_get(body, &internet, err) < 0)
        return -1;
    return e2b_build(body, internet, "", 1, dflt, out, err);
}
