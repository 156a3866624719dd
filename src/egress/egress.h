/* SPDX-License-Identifier: MIT */
/* The egress gateway: per sandbox, a DNS server and a TCP proxy on listeners the daemon owns
 * inside the sandbox's network namespace (netns.c), a policy (policy.h) deciding every name,
 * connection and intercepted request, credentials injected into HTTP requests on the way out
 * (never entering the sandbox), and an audit row for every answer, connection and request.
 *
 * Everything runs on the event loop's thread. */
#ifndef GBX_EGRESS_EGRESS_H
#define GBX_EGRESS_EGRESS_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "egress/policy.h"
#include "store/store.h"

struct gbx_egress;
struct gbx_egress_sb;

struct gbx_egress_opts {
    enum gbx_egress_mode default_mode; /* for sandboxes that do not say */
    const char *dir;                   /* CA and secret key live here (created 0700) */
    const char *runtime_dir;           /* the trust bundle for sandboxes is written here */
    const char *extra_ca_file;         /* extra upstream trust anchors (PEM), or NULL */
    const char *hosts;                 /* "name=1.2.3.4 name2=5.6.7.8": upstream overrides */
    const char *resolver;              /* "IPv4[:PORT]": nameserver for upstream names, or NULL */
    unsigned max_conns;                /* per sandbox; 0: 256 */
    unsigned connect_timeout_ms;       /* 0: 10 s */
    unsigned idle_timeout_ms;          /* 0: 5 min */
    struct gbx_store *store;           /* secrets and the block flag (borrowed) */
    /* audit rows per second per sandbox per kind (dns, conn, http) beyond which rows are
     * counted, not written, and summarised (auditrate.h); 0: 20. audit_unlimited: none. */
    unsigned audit_rate, audit_burst; /* 0: 20 rows/s, a burst of 100 */
    int audit_unlimited;
};

/* Audit sink: kind ("egress.dns", "egress.conn", "egress.http", "egress.block", and the
 * summaries of rows the rate limit held back: "egress.dns.suppressed" ...), the sandbox (or
 * NULL), and the detail object (reference stolen). */
typedef void (*gbx_egress_audit_fn)(void *arg, const char *kind, const char *sandbox,
                                    json_t *detail);

int gbx_egress_new(struct event_base *base, const struct gbx_egress_opts *o,
                   gbx_egress_audit_fn audit, void *arg, struct gbx_egress **out,
                   struct gbx_err **err) GBX_WUR;
/* Detach every sandbox (closing its connections) and free. NULL-safe. */
void gbx_egress_free(struct gbx_egress *eg);

/* The CA bundle sandboxes trust (the host's bundle plus the egress CA certificate), a
 * world-readable file; and the environment variables that point tools at it. */
const char *gbx_egress_trust_bundle(const struct gbx_egress *eg);
extern const char *const gbx_egress_trust_env[]; /* NULL-terminated variable names */
const char *gbx_egress_ca_pem(const struct gbx_egress *eg);
enum gbx_egress_mode gbx_egress_default_mode(const struct gbx_egress *eg);
/* A reload's: for sandboxes created from now on (a live sandbox keeps its policy). */
void gbx_egress_set_default_mode(struct gbx_egress *eg, enum gbx_egress_mode mode);

/* Plumb a sandbox (its init is pid) and start serving it under policy p (copied; NULL: the
 * default mode with no rules). */
int gbx_egress_attach(struct gbx_egress *eg, const char *id, pid_t pid,
                      const struct gbx_egress_policy *p, struct gbx_egress_sb **out,
                      struct gbx_err **err) GBX_WUR;
/* The same in two steps: the plumbing inside the namespace (gbx_egress_netns_setup, which
 * any thread may run), then, on the loop, serving the sockets it made (taken, released on
 * failure too). */
struct gbx_egress_socks;
int gbx_egress_attach_socks(struct gbx_egress *eg, const char *id,
                            const struct gbx_egress_policy *p, struct gbx_egress_socks *socks,
                            struct gbx_egress_sb **out, struct gbx_err **err) GBX_WUR;
/* Close its connections and listeners and free it. NULL-safe. */
void gbx_egress_detach(struct gbx_egress_sb *sb);
/* Replace the policy (copied). Every secret it names must exist (NOT_FOUND otherwise).
 * Open connections the new policy denies are closed. */
int gbx_egress_set_policy(struct gbx_egress_sb *sb, const struct gbx_egress_policy *p,
                          struct gbx_err **err) GBX_WUR;
const struct gbx_egress_policy *gbx_egress_policy_of(const struct gbx_egress_sb *sb);
/* Check that every secret a policy names exists (NOT_FOUND otherwise). */
int gbx_egress_check_secrets(struct gbx_egress *eg, const struct gbx_egress_policy *p,
                             struct gbx_err **err) GBX_WUR;
/* {connections_open, connections, denied, dns_answers, requests, bytes_up, bytes_down} */
json_t *gbx_egress_sb_stats(const struct gbx_egress_sb *sb);

/* The emergency block: on, every live egress connection of every sandbox is closed before
 * this returns and nothing new is allowed until it is lifted; durable across restarts. */
int gbx_egress_block(struct gbx_egress *eg, int on, struct gbx_err **err) GBX_WUR;
int gbx_egress_blocked(const struct gbx_egress *eg);

/* Prometheus text (counters by decision, open connections, the block). */
void gbx_egress_metrics(const struct gbx_egress *eg, struct evbuffer *out);

/* Credentials. value never leaves the daemon again; hosts is a JSON array of host patterns
 * ("api.example.com", "*.example.com"); header is "Name: template" where the template holds
 * ${secret} once. replace: overwrite an existing one (a rotation). */
int gbx_egress_secret_put(struct gbx_egress *eg, const char *name, const char *value,
                          const json_t *hosts, const char *header, int replace,
                          struct gbx_err **err) GBX_WUR;
/* Revoke: effective for the next request (open connections look it up per request). */
int gbx_egress_secret_delete(struct gbx_egress *eg, const char *name, struct gbx_err **err) GBX_WUR;
/* [{name, hosts, header_name, created}] — never a value. */
json_t *gbx_egress_secret_list(const struct gbx_egress *eg);
json_t *gbx_egress_secret_info(const struct gbx_egress *eg, const char *name);

#endif
