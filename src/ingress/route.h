/* SPDX-License-Identifier: MIT */
/* Where an ingress request goes, from its first head alone: the host form
 * "<port>-<id>.<domain>" and the path form "/v1/sandboxes/<id>/ports/<port>/..." (for setups
 * without wildcard DNS), and the head rewritten for the path form (its target without the
 * prefix; "Connection: close", since the next request on the connection would carry the
 * prefix again). Pure functions over bytes: unit-tested (test_ingress_route) and fuzzed
 * (fuzz_ingress). */
#ifndef GBX_INGRESS_ROUTE_H
#define GBX_INGRESS_ROUTE_H

#include <stddef.h>

struct gbx_ingress_route {
    char id[64];       /* the sandbox */
    unsigned port;     /* 1..65535 */
    size_t prefix_len; /* path form: the bytes of the target to drop; host form: 0 */
    const char *error; /* the request is ingress's but malformed: why (then id/port are not set) */
};

/* Host form (host lowercased, without its port; domain likewise): 1 when host is a name under
 * domain (r filled, or r->error), 0 when it is not ingress's. */
int gbx_ingress_route_host(const char *domain, const char *host, struct gbx_ingress_route *r);
/* Path form (the request target as sent): 1 when it is "/v1/sandboxes/<id>/ports/<p>", alone
 * or followed by '/' or '?' (r filled, or r->error), 0 otherwise. */
int gbx_ingress_route_path(const char *target, struct gbx_ingress_route *r);
/* The first head, head[0..len) up to and including its blank line, for the path form: the
 * target's first prefix_len bytes dropped ("/" when nothing is left; a query keeps its '/'),
 * and unless upgrade, every Connection and Keep-Alive header replaced by one
 * "Connection: close"; with host (no CR or LF in it), every Host header replaced by one
 * "Host: <host>". A malloc'd head into *out and *outlen: 0; -1 when the head is not
 * "METHOD SP TARGET SP VERSION CRLF ... CRLF CRLF" or the target is shorter than the prefix. */
int gbx_ingress_rewrite_head(const char *head, size_t len, size_t prefix_len, int upgrade,
                             const char *host, char **out, size_t *outlen);

#endif
