/* SPDX-License-Identifier: MIT */
/* Ingress: a port inside a sandbox, reached through the daemon's TCP listener.
 *
 * A request whose Host is "<port>-<sandbox id>.<ingress domain>" (what E2B's getHost(port)
 * returns) is not the API's: the HTTP gate hands its whole connection over (gate.h, the
 * takeover) on its first request head. Ingress checks the credential — the API key of the
 * sandbox's owner (Authorization: Bearer, X-API-Key) or the sandbox's traffic token
 * (e2b-traffic-access-token) — then opens a TCP connection to 127.0.0.1:<port> inside the
 * sandbox's own network namespace (a socket made there by the loop thread, which returns to
 * its own namespace before anything else: nothing on the host is reachable this way, and a
 * sandbox's loopback is its own), and from then on passes bytes both ways unchanged: HTTP/1.1
 * keep-alive, chunked bodies and WebSocket upgrades alike. A side that cannot keep up stops
 * the other from being read (high-water marks), so a slow client never grows the daemon's
 * memory. Errors a person can read: 400 for a malformed host, 401 without a credential, 404
 * for a sandbox that does not exist or is not the caller's (the same answer: nothing is
 * revealed), 409 for a paused one, 502 when nobody listens on the port. Each proxied
 * connection is an audit record (ingress.connection: port, client, bytes each way,
 * duration) and every connection is counted in /metrics. */
#ifndef GBX_INGRESS_INGRESS_H
#define GBX_INGRESS_INGRESS_H

#include <stddef.h>

struct gbx_server;
struct gbx_gate_takeover;
struct evbuffer;

#define GBX_INGRESS_MAX_CONNS 4096

struct gbx_ingress;

/* domain: "example.com" or "localhost:7070" (a port is ignored when matching Hosts); NULL or
 * "": ingress off (nothing is claimed). */
struct gbx_ingress *gbx_ingress_new(struct gbx_server *s, const char *domain);
/* The most open ingress connections from one client address (the listener's
 * --max-conns-per-ip; 0: no cap), checked when a connection is handed over. */
void gbx_ingress_set_max_per_ip(struct gbx_ingress *ig, unsigned n);
/* A reload's new domain (open connections go on). */
void gbx_ingress_set_domain(struct gbx_ingress *ig, const char *domain);
/* Close every connection (the daemon is stopping). */
void gbx_ingress_free(struct gbx_ingress *ig);
/* The gate's takeover, with ig as its argument. */
extern const struct gbx_gate_takeover gbx_ingress_takeover;
/* Its series for /metrics (NULL-safe; the admin's). */
void gbx_ingress_metrics(const struct gbx_ingress *ig, struct evbuffer *b);

#endif
