/* SPDX-License-Identifier: MIT */
/* Egress plumbing inside a sandbox's network namespace (see netns.c). */
#ifndef GBX_EGRESS_NETNS_H
#define GBX_EGRESS_NETNS_H

#include <sys/types.h>

#include "base/err.h"

#define GBX_EGRESS_PROXY_PORT 901 /* 127.0.0.1 inside the sandbox: redirected TCP */
#define GBX_EGRESS_DNS_PORT 53    /* 127.0.0.1 inside the sandbox: DNS, UDP and TCP */

#define GBX_STR_(x) #x
#define GBX_STR(x) GBX_STR_(x)

/* The daemon's listeners inside one sandbox (non-blocking, close-on-exec). */
struct gbx_egress_socks {
    int proxy_fd;
    int dns_udp_fd;
    int dns_tcp_fd;
};

/* Enter the network namespace of pid (a sandbox's init), install the route and the
 * nftables rules (replacing any from an earlier daemon), create the listeners, and
 * return to the calling thread's own namespace. */
int gbx_egress_netns_setup(pid_t pid, struct gbx_egress_socks *out, struct gbx_err **err) GBX_WUR;
/* Close the listeners (-1 entries are skipped); leaves -1 everywhere. */
void gbx_egress_socks_release(struct gbx_egress_socks *s);

#endif
