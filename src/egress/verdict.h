/* SPDX-License-Identifier: MIT */
/* How an egress connection ended, from the gateway's point of view, and what a plain HTTP
 * client is told about it. Four verdicts, each with its own word in the audit ("decision"),
 * the egress log, the counters and /metrics:
 *
 *   allow            the policy allowed and the upstream was reached
 *   deny             the gateway refused: the policy (a rule, the mode, the emergency block,
 *                    a loopback/private address no rule names), a TLS server name or HTTP
 *                    Host that is absent or is not the connection's name (the policy's own
 *                    enforcement), request rules on a protocol that is not HTTP, the per-
 *                    sandbox connection limit
 *   upstream_failed  the policy allowed, then the name did not resolve, had no IPv4 address,
 *                    the connect was refused, failed or timed out, or no socket could be had
 *   client_error     the client sent nothing within the sniff time, closed before sending,
 *                    or sent a ClientHello or request head that does not parse
 *
 * Pure: no I/O. */
#ifndef GBX_EGRESS_VERDICT_H
#define GBX_EGRESS_VERDICT_H

#include <stddef.h>

enum gbx_egress_verdict {
    GBX_EGRESS_ALLOW,
    GBX_EGRESS_DENY,
    GBX_EGRESS_UPSTREAM_FAILED,
    GBX_EGRESS_CLIENT_ERROR,
    GBX_EGRESS_NVERDICTS
};

/* "allow", "deny", "upstream_failed", "client_error" (static). */
const char *gbx_egress_verdict_name(enum gbx_egress_verdict v);
/* The verdict a word names; an unknown word or NULL is DENY (fail closed, and the rate
 * limit's summary counts it as refused). */
enum gbx_egress_verdict gbx_egress_verdict_parse(const char *word);

/* A complete HTTP/1.1 answer that ends the connection (Connection: close): status 403, 502 or
 * 504 with its reason phrase and a one-line text body "glovebox egress: WHAT: REASON\n" (what:
 * "denied by policy", "upstream failed", "upstream timed out"; a long reason is cut to keep
 * the body under 256 bytes). Written to buf, NUL-ended; returns its length, 0 when status is
 * none of those three or buf is too small (GBX_EGRESS_VERDICT_HTTP_MAX always suffices). */
#define GBX_EGRESS_VERDICT_HTTP_MAX 512
size_t gbx_egress_verdict_http(int status, const char *reason, char *buf, size_t bufsz);

#endif
