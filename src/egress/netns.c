/* SPDX-License-Identifier: MIT */
/* The egress plumbing inside a sandbox's network namespace, installed by the daemon:
 *
 *   default route via lo, source 127.0.0.1   every IPv4 destination is "reachable" ...
 *   nftables (table inet glovebox):          ... and every outbound TCP connection is
 *     TCP and UDP port 53 -> 127.0.0.1:53      redirected to the daemon's proxy listener,
 *     other TCP to non-loopback -> :901        DNS to its DNS listeners; everything else
 *     filter: only loopback leaves             (UDP, ICMP, IPv6) is dropped
 *   listeners 127.0.0.1:901/tcp, :53/udp, :53/tcp, created here, owned by the daemon
 *
 * The calling thread enters the namespace (setns), does the work, and returns to its own
 * namespace before this function returns; a thread that could not get back aborts the
 * process (its next upstream connection would otherwise start inside a sandbox). The
 * listeners keep the namespace they were created in, and are bound before anything of the
 * sandbox's own runs: root inside (which keeps CAP_NET_BIND_SERVICE) cannot bind the same
 * address and port while they exist, and a wildcard bind of its own loses to their more
 * specific address.
 *
 * The architecture brief has init create the listeners and pass them over its control
 * socket; the daemon creates them itself instead, the same way at create and at adoption
 * after a restart (the old listeners died with the old daemon), with no capability inside
 * the sandbox and no agent message. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sched.h"
#include "base/util.h"
#include "egress/netns.h"
#include "sandbox/backend.h"

/* The ruleset as one nf_tables netlink batch, built once with libnftnl and sent as it is to
 * every sandbox (parsing nft's text language per sandbox cost 0.5-1.2 ms):
 *
 *   table inet glovebox            (created, deleted and created again: a daemon adopting
 *   chain nat_out  nat    output -100 accept      a sandbox replaces the old rules)
 *     meta l4proto tcp th dport 53 redirect to :53
 *     meta l4proto udp th dport 53 redirect to :53
 *     meta nfproto ipv4 ip daddr & 255.0.0.0 == 127.0.0.0 return
 *     meta l4proto tcp redirect to :901
 *   chain out      filter output 0 drop
 *     meta nfproto ipv4 ip daddr & 255.0.0.0 == 127.0.0.0 accept
 *     meta nfproto ipv6 ip6 daddr == ::1 accept
 */
static char nft_batch[8192];
static size_t nft_batch_len;
static uint32_t nft_batch_msgs; /* messages that want an ack */
static pthread_once_t nft_batch_once = PTHREAD_ONCE_INIT;

static void add_meta(struct nftnl_rule *r, uint32_t key)
{
    struct nftnl_expr *e = nftnl_expr_alloc("meta");
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
    nftnl_rule_add_expr(r, e);
}

static void add_cmp(struct nftnl_rule *r, const void *data, uint32_t len)
{
    struct nftnl_expr *e = nftnl_expr_alloc("cmp");
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
    nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
    nftnl_rule_add_expr(r, e);
}

static void add_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len)
{
    struct nftnl_expr *e = nftnl_expr_alloc("payload");
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
    nftnl_rule_add_expr(r, e);
}

static void add_l4proto(struct nftnl_rule *r, uint8_t proto)
{
    add_meta(r, NFT_META_L4PROTO);
    add_cmp(r, &proto, 1);
}

static void add_nfproto(struct nftnl_rule *r, uint8_t proto)
{
    add_meta(r, NFT_META_NFPROTO);
    add_cmp(r, &proto, 1);
}

static void add_loopback4(struct nftnl_rule *r)
{
    add_nfproto(r, NFPROTO_IPV4);
    add_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4); /* daddr */
    struct nftnl_expr *e = nftnl_expr_alloc("bitwise");
    uint32_t mask = htonl(0xff000000u), zero = 0, net = htonl(0x7f000000u);
    nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
    nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, 4);
    nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
    nftnl_rule_add_expr(r, e);
    add_cmp(r, &net, 4);
}

static void add_verdict(struct nftnl_rule *r, int verdict)
{
    struct nftnl_expr *e = nftnl_expr_alloc("immediate");
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
    nftnl_rule_add_expr(r, e);
}

static void add_redirect(struct nftnl_rule *r, uint16_t port)
{
    struct nftnl_expr *e = nftnl_expr_alloc("immediate");
    uint16_t p = htons(port);
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
    nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &p, sizeof(p));
    nftnl_rule_add_expr(r, e);
    e = nftnl_expr_alloc("redir");
    nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
    nftnl_rule_add_expr(r, e);
}

struct batch {
    struct mnl_nlmsg_batch *b;
    uint32_t seq;
};

static void put_table(struct batch *bt, uint16_t type)
{
    struct nftnl_table *t = nftnl_table_alloc();
    nftnl_table_set_str(t, NFTNL_TABLE_NAME, "glovebox");
    nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
    struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), type, NFPROTO_INET,
                                                 NLM_F_CREATE | NLM_F_ACK, bt->seq++);
    nftnl_table_nlmsg_build_payload(nlh, t);
    nftnl_table_free(t);
    mnl_nlmsg_batch_next(bt->b);
    nft_batch_msgs++;
}

static void put_chain(struct batch *bt, const char *name, const char *type, int prio,
                      uint32_t policy)
{
    struct nftnl_chain *c = nftnl_chain_alloc();
    nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, "glovebox");
    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
    nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
    nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
    nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
    nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, policy);
    struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), NFT_MSG_NEWCHAIN,
                                                 NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, bt->seq++);
    nftnl_chain_nlmsg_build_payload(nlh, c);
    nftnl_chain_free(c);
    mnl_nlmsg_batch_next(bt->b);
    nft_batch_msgs++;
}

static struct nftnl_rule *rule_new(const char *chain)
{
    struct nftnl_rule *r = nftnl_rule_alloc();
    nftnl_rule_set_str(r, NFTNL_RULE_TABLE, "glovebox");
    nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
    nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
    return r;
}

static void put_rule(struct batch *bt, struct nftnl_rule *r)
{
    struct nlmsghdr *nlh =
        nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), NFT_MSG_NEWRULE, NFPROTO_INET,
                              NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, bt->seq++);
    nftnl_rule_nlmsg_build_payload(nlh, r);
    nftnl_rule_free(r);
    mnl_nlmsg_batch_next(bt->b);
    nft_batch_msgs++;
}

static void build_batch(void)
{
    struct batch bt = {.b = mnl_nlmsg_batch_start(nft_batch, sizeof(nft_batch)), .seq = 1};
    nftnl_batch_begin(mnl_nlmsg_batch_current(bt.b), bt.seq++);
    mnl_nlmsg_batch_next(bt.b);
    put_table(&bt, NFT_MSG_NEWTABLE);
    put_table(&bt, NFT_MSG_DELTABLE);
    put_table(&bt, NFT_MSG_NEWTABLE);
    put_chain(&bt, "nat_out", "nat", -100, NF_ACCEPT);
    put_chain(&bt, "out", "filter", 0, NF_DROP);
    static const uint8_t dns_protos[] = {IPPROTO_TCP, IPPROTO_UDP};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(dns_protos); i++) {
        struct nftnl_rule *r = rule_new("nat_out");
        uint16_t p53 = htons(53);
        add_l4proto(r, dns_protos[i]);
        add_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2); /* dport */
        add_cmp(r, &p53, 2);
        add_redirect(r, GBX_EGRESS_DNS_PORT);
        put_rule(&bt, r);
    }
    struct nftnl_rule *r = rule_new("nat_out");
    add_loopback4(r);
    add_verdict(r, NFT_RETURN);
    put_rule(&bt, r);
    r = rule_new("nat_out");
    add_l4proto(r, IPPROTO_TCP);
    add_redirect(r, GBX_EGRESS_PROXY_PORT);
    put_rule(&bt, r);
    r = rule_new("out");
    add_loopback4(r);
    add_verdict(r, NF_ACCEPT);
    put_rule(&bt, r);
    r = rule_new("out");
    struct in6_addr lo6 = IN6ADDR_LOOPBACK_INIT;
    add_nfproto(r, NFPROTO_IPV6);
    add_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 24, 16); /* ip6 daddr */
    add_cmp(r, &lo6, 16);
    add_verdict(r, NF_ACCEPT);
    put_rule(&bt, r);
    nftnl_batch_end(mnl_nlmsg_batch_current(bt.b), bt.seq++);
    mnl_nlmsg_batch_next(bt.b);
    GBX_BUG_ON(!mnl_nlmsg_batch_is_empty(bt.b) && mnl_nlmsg_batch_size(bt.b) == 0);
    nft_batch_len = mnl_nlmsg_batch_size(bt.b);
    mnl_nlmsg_batch_stop(bt.b);
}

/* Closing a netfilter netlink socket that ran a batch waits ~10 ms in the kernel (RCU):
 * sockets are handed to this thread to close off the event loop. */
static int closer_fd = -1;
static pthread_once_t closer_once = PTHREAD_ONCE_INIT;

static void *closer_main(void *arg)
{
    gbx_sched_unboost_self();
    int rd = (int)(intptr_t)arg;
    int fd;
    while (GBX_RETRY(read(rd, &fd, sizeof(fd))) == (ssize_t)sizeof(fd))
        close(fd);
    return NULL;
}

static void closer_start(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return;
    pthread_t t;
    if (pthread_create(&t, NULL, closer_main, (void *)(intptr_t)p[0]) != 0) {
        close(p[0]);
        close(p[1]);
        return;
    }
    pthread_detach(t);
    closer_fd = p[1];
}

static void close_later(int fd)
{
    pthread_once(&closer_once, closer_start);
    if (closer_fd < 0 || GBX_RETRY(write(closer_fd, &fd, sizeof(fd))) != (ssize_t)sizeof(fd))
        close(fd);
}

static int install_rules(struct gbx_err **err)
{
    pthread_once(&nft_batch_once, build_batch);
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd < 0)
        return gbx_err_sys(err, errno, "cannot open a netfilter socket");
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    int r = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        GBX_RETRY(send(fd, nft_batch, nft_batch_len, 0)) < 0) {
        r = gbx_err_sys(err, errno, "cannot send the nftables ruleset");
        goto out;
    }
    /* one ack per message; the first error ends the batch */
    char buf[16384];
    for (uint32_t acked = 0; acked < nft_batch_msgs;) {
        ssize_t n = GBX_RETRY(recv(fd, buf, sizeof(buf), 0));
        if (n < 0) {
            r = gbx_err_sys(err, errno, "cannot read the nftables acknowledgements");
            goto out;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, (int)n);
             h = mnl_nlmsg_next(h, (int *)&n)) {
            if (h->nlmsg_type != NLMSG_ERROR)
                continue;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
            if (e->error != 0) {
                r = gbx_err_sys(err, -e->error, "nftables refused the ruleset");
                goto out;
            }
            acked++;
        }
    }
out:
    close_later(fd);
    return r;
}
/* default dev lo src 127.0.0.1 (replacing one that exists: adoption runs this again) */
static int route_default_lo(void)
{
    char buf[16384];
    struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (nl == NULL)
        return -errno;
    int r = 0;
    if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        r = -errno;
        goto out;
    }
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWROUTE;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK;
    nlh->nlmsg_seq = (uint32_t)time(NULL);
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
    rtm->rtm_family = AF_INET;
    rtm->rtm_dst_len = 0;
    rtm->rtm_table = RT_TABLE_MAIN;
    rtm->rtm_protocol = RTPROT_BOOT;
    rtm->rtm_scope = RT_SCOPE_LINK;
    rtm->rtm_type = RTN_UNICAST;
    struct in_addr src = {htonl(INADDR_LOOPBACK)};
    mnl_attr_put_u32(nlh, RTA_OIF, 1); /* lo is always ifindex 1 in a fresh namespace */
    mnl_attr_put(nlh, RTA_PREFSRC, sizeof(src), &src);
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
        r = -errno;
        goto out;
    }
    ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
    if (n < 0) {
        r = -errno;
        goto out;
    }
    if (mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, mnl_socket_get_portid(nl), NULL, NULL) < 0)
        r = -errno;
out:
    mnl_socket_close(nl);
    return r;
}

static int listen_on(int type, uint16_t port)
{
    int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* TCP: a listener made again after a daemon restart must not wait for TIME_WAIT. Never
     * on UDP: two UDP sockets with SO_REUSEADDR can share an address (root in the sandbox has
     * CAP_NET_BIND_SERVICE and could bind :53 beside ours) */
    int one = 1;
    if (type == SOCK_STREAM)
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = {htonl(INADDR_LOOPBACK)}};
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        (type == SOCK_STREAM && listen(fd, 512) < 0)) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

void gbx_egress_socks_release(struct gbx_egress_socks *s)
{
    int *fds[] = {&s->proxy_fd, &s->dns_udp_fd, &s->dns_tcp_fd};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(fds); i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
}

static int setup_inside(struct gbx_egress_socks *out, struct gbx_err **err)
{
    /* up already for a created sandbox; a restored one's namespace starts empty */
    int r = gbx_sandbox_loopback_up();
    if (r < 0)
        return gbx_err_sys(err, -r, "bring up loopback");
    r = route_default_lo();
    if (r < 0)
        return gbx_err_sys(err, -r, "add the default route");
    if (install_rules(err) < 0)
        return -1;
    if ((r = out->proxy_fd = listen_on(SOCK_STREAM, GBX_EGRESS_PROXY_PORT)) < 0)
        return gbx_err_sys(err, -r, "listen on port %d", GBX_EGRESS_PROXY_PORT);
    if ((r = out->dns_udp_fd = listen_on(SOCK_DGRAM, GBX_EGRESS_DNS_PORT)) < 0)
        return gbx_err_sys(err, -r, "bind DNS port %d/udp", GBX_EGRESS_DNS_PORT);
    if ((r = out->dns_tcp_fd = listen_on(SOCK_STREAM, GBX_EGRESS_DNS_PORT)) < 0)
        return gbx_err_sys(err, -r, "listen on DNS port %d/tcp", GBX_EGRESS_DNS_PORT);
    return 0;
}

int gbx_egress_netns_setup(pid_t pid, struct gbx_egress_socks *out, struct gbx_err **err)
{
    out->proxy_fd = out->dns_udp_fd = out->dns_tcp_fd = -1;
    gbx_autoclose int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        return gbx_err_sys(err, errno, "cannot open this thread's network namespace");
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)pid);
    gbx_autoclose int target = open(p, O_RDONLY | O_CLOEXEC);
    if (target < 0)
        return gbx_err_sys(err, errno, "cannot open the sandbox's network namespace");
    if (setns(target, CLONE_NEWNET) < 0)
        return gbx_err_sys(err, errno, "cannot enter the sandbox's network namespace");
    int r = setup_inside(out, err);
    /* back home before anything else: this thread makes upstream connections */
    if (setns(self, CLONE_NEWNET) < 0) {
        gbx_log_error("cannot return to the daemon's network namespace: %s", strerror(errno));
        abort();
    }
    if (r < 0) {
        gbx_egress_socks_release(out);
        return gbx_err_wrap(err, "egress setup");
    }
    return 0;
}
