/* SPDX-License-Identifier: MIT */
/* The egress gateway's TLS-interception CA: a long-lived CA key and certificate on disk, leaf
 * certificates minted per host on first use (one shared leaf key, so a mint is one signature)
 * and cached as ready server SSL_CTXs, plus the upstream client side. Everything runs on the
 * event-loop thread: no locks. */
#ifndef GBX_EGRESS_CA_H
#define GBX_EGRESS_CA_H

#include <openssl/ssl.h>

#include "base/err.h"

struct gbx_ca;

/* Load dir/ca.key and dir/ca.crt, creating what is missing (dir is created 0700 when absent):
 * an EC P-256 key (PEM, mode 0600) and a self-signed X.509v3 CA certificate (mode 0644,
 * CN "Glovebox egress CA (<hostname>)", O "Glovebox", valid 10 years, CA:TRUE pathlen:0). Both
 * files are written through a temp file, fsync'd and renamed. A present key without a
 * certificate gets a new certificate; an absent key replaces both.
 * Refuses with GBX_ERR_PERMISSION a ca.key that is not owned by the effective uid or that is
 * group/other accessible, and with GBX_ERR_INVALID a certificate that does not match the key,
 * is not a CA or has expired (delete ca.crt to have a new one issued for the same key).
 * *out is owned by the caller (gbx_ca_free). */
int gbx_ca_open(const char *dir, struct gbx_ca **out, struct gbx_err **err) GBX_WUR;
/* Free the CA and its cache. SSL_CTXs handed out earlier stay valid (refcounted). NULL-safe. */
void gbx_ca_free(struct gbx_ca *ca);
/* PEM of the CA certificate (never the key), NUL-terminated; owned by ca. */
const char *gbx_ca_cert_pem(const struct gbx_ca *ca);

/* A server SSL_CTX that presents a leaf certificate for host: a DNS name (case-insensitive,
 * one trailing dot ignored; letters, digits, '-', '_') or an IPv4/IPv6 literal (IP SAN).
 * Minted on first use and cached (1024 hosts, least recently used evicted; re-minted when the
 * cached leaf has less than a day left). The leaf: CN=host (omitted when longer than 64),
 * SAN, EKU serverAuth, keyUsage digitalSignature, CA:FALSE, authorityKeyIdentifier, valid from
 * now-1h to now+30 days, chain includes the CA certificate. The ctx: TLS 1.2 minimum, ALPN
 * selects "http/1.1" when offered and otherwise proceeds without ALPN, no compression, no
 * session tickets, no session cache, no renegotiation.
 * Returns a new reference owned by the caller (SSL_CTX_free), so an evicted ctx stays valid for
 * the connections using it; NULL with err (GBX_ERR_INVALID for a malformed host). */
SSL_CTX *gbx_ca_server_ctx(struct gbx_ca *ca, const char *host, struct gbx_err **err) GBX_WUR;

/* An upstream client SSL_CTX, owned by the caller: SSL_VERIFY_PEER against the system trust
 * store plus, when extra_ca_file is non-NULL, the PEM certificates in that file; TLS 1.2
 * minimum; ALPN offers only "http/1.1". Per connection, call gbx_ca_client_prepare. NULL with
 * err. */
SSL_CTX *gbx_ca_client_ctx_new(const char *extra_ca_file, struct gbx_err **err) GBX_WUR;
/* Prepare an SSL for an upstream connection to host: SNI and hostname verification for a DNS
 * name, IP address verification (no SNI) for an IPv4/IPv6 literal. 0, or -1 with err. */
int gbx_ca_client_prepare(SSL *ssl, const char *host, struct gbx_err **err) GBX_WUR;

/* Fill *err (kind) with the message and the OpenSSL error at the bottom of the queue, then
 * clear the queue. Returns -1. (Shared by ca.c and seal.c.) */
int gbx_egress_ssl_fail(struct gbx_err **err, enum gbx_err_kind kind, const char *fmt, ...)
    GBX_PRINTF(3, 4);

#endif
