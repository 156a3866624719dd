/* SPDX-License-Identifier: MIT */
/* Internals shared by egress.c (sandboxes, secrets, block), dns.c and proxy.c. */
#ifndef GBX_EGRESS_INT_H
#define GBX_EGRESS_INT_H

#include <event2/dns.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <openssl/ssl.h>

#include "egress/auditrate.h"
#include "egress/ca.h"
#include "egress/egress.h"
#include "egress/netns.h"
#include "egress/seal.h"
#include "egress/verdict.h"

/* Synthetic addresses handed out by the DNS server: 198.18.0.0/15 (RFC 2544, never routed),
 * one pool per sandbox, address = base + 1 + index of the name. */
#define GBX_EGRESS_POOL_BASE 0xc6120000u /* 198.18.0.0 */
#define GBX_EGRESS_POOL_MASK 0xfffe0000u
#define GBX_EGRESS_POOL_MAX 65536u

struct gbx_egress_secret {
    struct gbx_egress_secret *next;
    char *name;
    char **hosts;
    size_t nhosts;
    char *header_name;
    char *header_value; /* the template with ${secret} replaced: the only copy of the value */
    char *header_line;  /* "Name: template" as given (no value) */
    int64_t created_ns;
};

struct gbx_egress_counters {
    /* connections by verdict (verdict.h): conn_deny counts refusals by policy only */
    uint64_t conn_allow, conn_deny, conn_upstream_failed, conn_client_error;
    uint64_t dns_allow, dns_deny, http_allow, http_deny;
    uint64_t bytes_up, bytes_down;
};

struct gbx_egress_conn;
struct gbx_egress_dnstcp;

struct gbx_egress {
    struct event_base *base;
    struct evdns_base *resolver; /* the host's resolver, for upstream names */
    struct gbx_ca *ca;
    SSL_CTX *client_ctx;
    uint8_t key[GBX_SEAL_KEY_LEN];
    struct gbx_store *store;
    struct gbx_egress_host {
        char *name;
        struct in_addr addr;
    } * hosts;
    size_t nhosts;
    struct in_addr *own; /* the host's own IPv4 addresses */
    size_t nown;
    enum gbx_egress_mode default_mode;
    unsigned max_conns;
    struct timeval connect_tv, idle_tv;
    int blocked;
    struct gbx_egress_secret *secrets;
    struct gbx_egress_sb *sandboxes;
    gbx_egress_audit_fn audit;
    void *audit_arg;
    unsigned audit_rate, audit_burst; /* egress audit rows per sandbox per kind (auditrate.h) */
    char *trust_path;
    struct gbx_egress_counters c;
    uint64_t open_conns;
    struct gbx_egress_conn *reap; /* closed connections, freed after dispatch */
    struct event *reap_ev;
};

struct gbx_egress_sb {
    struct gbx_egress *eg;
    struct gbx_egress_sb *prev, *next;
    char *id;
    struct gbx_egress_policy *policy;
    struct gbx_egress_socks socks;
    struct evconnlistener *proxy_lis, *dnstcp_lis;
    struct event *dns_ev; /* the UDP listener */
    /* synthetic names: names[i] has address POOL_BASE + 1 + i; index is an open-addressing
     * hash of name -> i + 1 (0: empty) */
    char **names;
    uint32_t nnames, names_cap;
    uint32_t *index;
    uint32_t index_cap;
    struct gbx_egress_conn *conns;
    unsigned nconns;
    struct gbx_egress_dnstcp *dnstcps;
    struct gbx_egress_counters c;
    /* the audit's rate limit: one bucket per kind of row (dns, conn, http), and the timer
     * that writes the summary of what they held back */
    struct gbx_egress_bucket buckets[3];
    struct event *summary_ev;
};

/* egress.c */
void gbx_egress_audit(struct gbx_egress_sb *sb, const char *kind, json_t *detail);
const struct gbx_egress_secret *gbx_egress_secret_for(const struct gbx_egress_sb *sb,
                                                      const char *host);
int gbx_egress_host_lookup(const struct gbx_egress *eg, const char *name, struct in_addr *out);
int gbx_egress_addr_own(const struct gbx_egress *eg, const struct in_addr *a);

/* dns.c */
int gbx_egress_dns_start(struct gbx_egress_sb *sb, struct gbx_err **err);
void gbx_egress_dns_stop(struct gbx_egress_sb *sb);
/* The answer to one DNS message (malloc'd wire format), or -1 when it is dropped. Audited. */
int gbx_egress_dns_reply(struct gbx_egress_sb *sb, const uint8_t *msg, size_t len, int tcp,
                         uint8_t **out, size_t *outlen);
/* The name behind a synthetic address (network order), or NULL. 1 when a is in the pool. */
const char *gbx_egress_dns_name(const struct gbx_egress_sb *sb, const struct in_addr *a,
                                int *in_pool);

/* proxy.c */
int gbx_egress_proxy_start(struct gbx_egress_sb *sb, struct gbx_err **err);
void gbx_egress_proxy_stop(struct gbx_egress_sb *sb);
/* Close every connection the sandbox's current policy (or the block) denies; all: close all. */
void gbx_egress_proxy_recheck(struct gbx_egress_sb *sb, int all);
void gbx_egress_proxy_reap(struct gbx_egress *eg);

#endif
