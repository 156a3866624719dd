/* SPDX-License-Identifier: MIT */
/* Egress policy: which names a sandbox may resolve, which connections it may open and which
 * intercepted HTTP requests it may send. Pure functions, no I/O: parsed from JSON, evaluated
 * per DNS question, per connection and per request, unit-tested and fuzzed.
 *
 * Modes
 *   none    everything is denied; rules are ignored (names_addr is 0 too).
 *   policy  default deny: only what an allow rule lets through.
 *   open    default allow: everything but what a deny rule stops.
 *
 * Rules
 *   {"action": "allow"|"deny" (default "allow"), "host": "...", "ports": [443, "8000-8100"],
 *    "methods": ["GET"], "path_prefix": "/v1/"}
 *   host is one of
 *     "api.example.com"  exactly that name (RFC 1123; the last label is not all digits)
 *     "*.example.com"    any name with at least one more label ending in ".example.com";
 *                        not "example.com" itself
 *     "*"                every name and every address
 *     "10.1.2.3"         that IPv4 address: matches only an address, never a name
 *     "10.0.0.0/8"       an IPv4 CIDR (no host bits set): matches only an address
 *   Hosts are stored lowercased with no trailing dot. A rule with several "ports" entries is
 *   stored as one rule per entry (same index order), so rule indices in decisions count those.
 *   No "ports": any port. "methods" (uppercased) and "path_prefix" (starts with '/') are the
 *   rule's L7 parts: they only exist for intercepted HTTP requests.
 *
 * Matching: a rule matches (name, addr, port[, method, path]) when
 *   - its host matches: a name rule matches the name, an address/CIDR rule the address, "*"
 *     either; when both a name and an address are given, a rule matches if it matches either;
 *   - its port range contains port (no range: any port; port 0 in check_name and names_addr
 *     means "any port");
 *   - for check_request only: method is one of its methods (compared case-insensitively) and
 *     the path starts with path_prefix (see "Paths" below).
 *
 * Precedence: the most specific matching rule decides. Specificity compares, in order:
 *   1. host: an exact name or an IPv4 address (a /32) > a CIDR, longer prefix first > a
 *      wildcard, more suffix labels first > "*". (A CIDR and a wildcard can only both match
 *      when the caller passes a name and an address.)
 *   2. port: a rule with a port range > one without; a narrower range > a wider one.
 *   3. L7: a rule with methods or path_prefix > one without; then a longer path_prefix >
 *      a shorter one (methods-only ranks below any path_prefix); then, for the same prefix,
 *      a rule with methods > one without.
 *   4. on a full tie, deny > allow; between rules of the same action, the first one.
 *   Nothing matches: the mode's default, rule = -1.
 *
 * The three stages
 *   check_name (DNS): no port, no request. Allowed iff mode != none and
 *     - policy: the best matching allow rule (any ports, L7 parts or not) ranks above every
 *       matching "all-ports deny" (a deny with no port range and no L7 parts);
 *     - open: no matching all-ports deny, or the best matching allow ranks above all of them.
 *     So a deny limited to some ports or some requests never blocks DNS.
 *   check_conn (connection): deny rules with L7 parts are left out (they deny requests, not
 *     connections); allow rules with L7 parts take part (the connection may proceed). The
 *     most specific remaining rule decides. l7 = 1 when the connection is allowed and some
 *     matching rule with L7 parts (allow or deny) ranks above the best matching rule without
 *     L7 parts (or no such rule matches): exactly when some request on this connection could
 *     be decided differently from the connection, so the proxy must intercept HTTP and call
 *     check_request for every request. l7 = 0 guarantees check_request would agree with the
 *     connection decision for every method and path.
 *   check_request (intercepted HTTP request): every rule takes part, L7 parts included.
 *   Invariants (fuzzed): a denied name denies every connection to it; an allowed request's
 *   connection is allowed; names_addr = 1 implies check_conn allows that address and port.
 *
 * Paths (check_request): a path is "normal" when it starts with '/', has no control bytes,
 *   only valid %XX escapes, and (after decoding %XX and reading '\' as '/') no empty segment
 *   ("//") and no "." or ".." segment (a segment's ";params" are ignored for this). Only the
 *   part before '?' or '#' counts. A path_prefix matches a normal path when the path starts
 *   with it, both compared after decoding %XX escapes. A path that is not normal (or NULL)
 *   matches no allow rule with a path_prefix and every deny rule with one, so no spelling of
 *   a path slips past a deny or into an allow. Likewise a NULL method matches no allow rule
 *   with methods and every deny rule with methods.
 *
 * Names given to the checks are lowercased and lose one trailing dot before matching. A name
 * that is not a valid host name (gbx_egress_name_valid) is denied in every mode (rule -1),
 * and so is a check_conn with neither a name nor an address. The checks allocate nothing and
 * cost O(rules) (each rule's host string is read once).
 *
 * Special addresses (gbx_egress_addr_special) are refused by the proxy unless an allow rule
 * names them explicitly (gbx_egress_policy_names_addr): "*" and name rules never do.
 */
#ifndef GBX_EGRESS_POLICY_H
#define GBX_EGRESS_POLICY_H

#include <jansson.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define GBX_EGRESS_MAX_RULES 1024 /* after expanding "ports" lists */
#define GBX_EGRESS_MAX_SECRETS 64
#define GBX_EGRESS_MAX_METHODS 32 /* per rule */
#define GBX_EGRESS_METHOD_MAX 32  /* characters */
#define GBX_EGRESS_HOST_MAX 253   /* characters, without a trailing dot */
#define GBX_EGRESS_PATH_MAX 1024  /* characters of a path_prefix */
#define GBX_EGRESS_SECRET_MAX 64  /* characters of a secret name */

enum gbx_egress_mode { GBX_EGRESS_POLICY = 0, GBX_EGRESS_NONE, GBX_EGRESS_OPEN };

struct gbx_egress_rule {
    int allow;                 /* 1 allow, 0 deny */
    char *host;                /* owned; lowercased, no trailing dot (see above) */
    uint16_t port_lo, port_hi; /* 0,0: any port; else 1 <= lo <= hi */
    char **methods;            /* owned; uppercased; NULL/0: any method */
    size_t nmethods;
    char *path_prefix; /* owned; NULL: any path; starts with '/' */
};

struct gbx_egress_policy {
    enum gbx_egress_mode mode;
    struct gbx_egress_rule *rules; /* owned */
    size_t nrules;
    char **secrets; /* owned; names of credentials attached (gbx_egress_secret_name_valid) */
    size_t nsecrets;
};

struct gbx_egress_decision {
    int allow; /* 1 or 0 */
    int rule;  /* index of the deciding rule, or -1: the mode's default (or an invalid name) */
    int l7;    /* check_conn only: allowed, but every HTTP request must go through
                * check_request (see above); 0 from the other checks */
};

/* "policy" "none" "open" ("?" for a value out of range). */
const char *gbx_egress_mode_name(enum gbx_egress_mode m);
/* 0 or -EINVAL. */
int gbx_egress_mode_parse(const char *s, enum gbx_egress_mode *m);

/* A policy with mode m and no rules or secrets. Caller owns it (gbx_egress_policy_free). */
struct gbx_egress_policy *gbx_egress_policy_new(enum gbx_egress_mode m);

/* JSON form: {"mode": "policy"|"none"|"open", "rules": [rule...], "secrets": ["gh"]}.
 * Every key is optional ("mode" defaults to dflt; a null value counts as absent); unknown
 * keys are an error; at most GBX_EGRESS_MAX_RULES rules (counted after expanding "ports"),
 * GBX_EGRESS_MAX_SECRETS secrets. A rule needs "host"; "ports" entries are a number 1-65535
 * or a string "443" or "8000-8100" (a single number or string instead of a list is accepted
 * too). j NULL or JSON null: the default policy. On success *out is the caller's; on failure
 * *err (GBX_ERR_INVALID) names the field and index: "rules[2].host: '*.': not a host name, a
 * '*.suffix' wildcard, '*', an IPv4 address or an IPv4 CIDR". j is borrowed. */
int gbx_egress_policy_parse(const json_t *j, enum gbx_egress_mode dflt,
                            struct gbx_egress_policy **out, struct gbx_err **err) GBX_WUR;
/* New reference. Every key is written ("rules" and "secrets" possibly empty); each rule has
 * "action" and "host", and "ports" (one entry), "methods", "path_prefix" when it has them.
 * parse(json(p)) equals p. */
json_t *gbx_egress_policy_json(const struct gbx_egress_policy *p);
/* Deep copy; caller owns it. */
struct gbx_egress_policy *gbx_egress_policy_dup(const struct gbx_egress_policy *p);
/* NULL-safe. */
void gbx_egress_policy_free(struct gbx_egress_policy *p);

/* RFC 1123 host name: labels of 1-63 [a-z0-9-] (any case), not starting or ending with '-',
 * at most 253 characters, an optional trailing dot, and a last label that is not all digits
 * (so a name is never an IPv4 address). 0 or -EINVAL. */
int gbx_egress_name_valid(const char *name);
/* A rule host as "host" accepts it (any case, an optional trailing dot on a name or
 * wildcard). 0 or -EINVAL. */
int gbx_egress_host_valid(const char *host);
/* [A-Za-z0-9_.-]{1,64}, not starting with '.'. 0 or -EINVAL. */
int gbx_egress_secret_name_valid(const char *name);

/* DNS stage: may `name` be resolved at all? Allowed when some port or request could be. */
void gbx_egress_policy_check_name(const struct gbx_egress_policy *p, const char *name,
                                  struct gbx_egress_decision *d);
/* Connection stage: name is the DNS name the sandbox resolved (NULL when it dialled a
 * literal address); addr the IPv4 destination (the literal dialled, or the upstream address
 * when the caller wants address rules applied to a named connection too; NULL: unknown). */
void gbx_egress_policy_check_conn(const struct gbx_egress_policy *p, const char *name,
                                  const struct in_addr *addr, uint16_t port,
                                  struct gbx_egress_decision *d);
/* One intercepted HTTP request on an allowed connection (method as sent, path the request
 * target in origin form, query included or not). */
void gbx_egress_policy_check_request(const struct gbx_egress_policy *p, const char *name,
                                     uint16_t port, const char *method, const char *path,
                                     struct gbx_egress_decision *d);
/* The same with the connection's address, for connections to a literal address (name NULL)
 * or when check_conn was given an address: pass what check_conn was given. */
void gbx_egress_policy_check_request_addr(const struct gbx_egress_policy *p, const char *name,
                                          const struct in_addr *addr, uint16_t port,
                                          const char *method, const char *path,
                                          struct gbx_egress_decision *d);
/* Does an allow rule name this address explicitly (an IPv4 address or a CIDR containing it;
 * "*" and name rules do not count), on this port (0: any), with no matching deny without L7
 * parts ranking above it? For the exception to the special-range refusal and for literal
 * connections. 1 yes (*rule = its index, if rule is non-NULL) / 0 no (mode none: always 0). */
int gbx_egress_policy_names_addr(const struct gbx_egress_policy *p, const struct in_addr *a,
                                 uint16_t port, int *rule);

/* Refused unless a rule names them: 0.0.0.0/8, 10/8, 100.64/10, 127/8, 169.254/16 (the
 * 169.254.169.254 metadata service included), 172.16/12, 192.0.0/24, 192.168/16,
 * 198.18/15, 224/4 and 240/4 (255.255.255.255 included). a is in network byte order.
 * 1 special / 0 public. */
int gbx_egress_addr_special(const struct in_addr *a);

/* E2B's create body: {"allow_internet_access": bool?, "network": {"allowOut": [...],
 * "denyOut": [...], ...}, other keys ignored}. Entries are IPv4 addresses, CIDRs, names or
 * "*.suffix" wildcards; "0.0.0.0/0" stands for all traffic (stored as "*"). In E2B an
 * allowOut entry beats a denyOut entry, so a denyOut entry covered by an allowOut entry (the
 * same host, a CIDR inside an allowed one, a name under an allowed wildcard, anything under
 * "*") is dropped. Mapping:
 *   allow_internet_access false, or "0.0.0.0/0" in denyOut: mode policy, allowOut as allow
 *     rules (other denyOut entries are moot);
 *   else allow_internet_access true: mode open, allowOut as allow rules, then denyOut as deny
 *     rules;
 *   else: mode dflt, the same rules.
 * network keys other than allowOut, denyOut, allowPublicTraffic, maskRequestHost, httpsPorts
 * (those three are ignored), rules and egressProxy are an error; a non-empty "rules" or a
 * non-null "egressProxy" is GBX_ERR_INVALID "not supported". No secrets. body NULL or JSON
 * null: the default policy. */
int gbx_egress_policy_from_e2b(const json_t *body, enum gbx_egress_mode dflt,
                               struct gbx_egress_policy **out, struct gbx_err **err) GBX_WUR;
/* E2B's network update body (PUT /sandboxes/{id}/network): the network object itself with
 * "allow_internet_access" among its keys. Same mapping; other keys as for "network". */
int gbx_egress_policy_from_e2b_update(const json_t *body, enum gbx_egress_mode dflt,
                                      struct gbx_egress_policy **out, struct gbx_err **err) GBX_WUR;

#endif
