/* SPDX-License-Identifier: MIT */
/* Network namespace: loopback only. No interface leads anywhere (egress arrives later
 * through sockets the daemon owns inside the namespace). */
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/ns.h"

int gbx_ns_loopback_up(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strcpy(ifr.ifr_name, "lo");
    int r = 0;
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
        r = -errno;
    } else {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
            r = -errno;
    }
    close(fd);
    return r;
}

int gbx_sandbox_loopback_up(void)
{
    return gbx_ns_loopback_up();
}

/* ---- tables left behind ---------------------------------------------------------------- */

struct found_tables {
    const char *prefix;
    char names[16][64];
    uint32_t families[16];
    size_t n;
};

static int on_table(const struct nlmsghdr *nlh, void *arg)
{
    struct found_tables *f = arg;
    struct nftnl_table *t = nftnl_table_alloc();
    if (t == NULL)
        return MNL_CB_ERROR;
    if (nftnl_table_nlmsg_parse(nlh, t) == 0) {
        const char *name = nftnl_table_get_str(t, NFTNL_TABLE_NAME);
        if (name && strncmp(name, f->prefix, strlen(f->prefix)) == 0 &&
            strlen(name) < sizeof(f->names[0]) && f->n < GBX_ARRAY_SIZE(f->names)) {
            snprintf(f->names[f->n], sizeof(f->names[0]), "%s", name);
            f->families[f->n++] = nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY);
        }
    }
    nftnl_table_free(t);
    return MNL_CB_OK;
}

int gbx_ns_socket_in(pid_t pid, int domain, int type, int protocol)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)pid);
    int target = open(p, O_RDONLY | O_CLOEXEC);
    if (target < 0)
        return -errno;
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0) {
        int e = errno;
        close(target);
        return -e;
    }
    int fd = -EINVAL;
    if (setns(target, CLONE_NEWNET) < 0) {
        fd = -errno;
    } else {
        fd = socket(domain, type, protocol);
        if (fd < 0)
            fd = -errno;
        /* this thread's later sockets must be the daemon's again */
        GBX_BUG_ON(setns(self, CLONE_NEWNET) < 0);
    }
    close(target);
    close(self);
    return fd;
}

int gbx_ns_netns_drop_tables(pid_t pid, const char *prefix)
{
    int fd = gbx_ns_socket_in(pid, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd < 0)
        return fd;
    struct mnl_socket *nl = mnl_socket_fdopen(fd);
    if (nl == NULL) {
        close(fd);
        return -ENOMEM;
    }
    int r = 0;
    char buf[16384];
    struct found_tables f = {.prefix = prefix};
    uint32_t seq = 1;
    struct nlmsghdr *nlh =
        nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETTABLE, NFPROTO_UNSPEC, NLM_F_DUMP, seq);
    if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ||
        mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
        r = -errno;
        goto out;
    }
    uint32_t portid = mnl_socket_get_portid(nl);
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
        if (n < 0) {
            r = -errno;
            goto out;
        }
        int cr = mnl_cb_run(buf, (size_t)n, seq, portid, on_table, &f);
        if (cr < 0) {
            r = -errno;
            goto out;
        }
        if (cr == MNL_CB_STOP)
            break;
    }
    for (size_t i = 0; i < f.n; i++) {
        struct mnl_nlmsg_batch *b = mnl_nlmsg_batch_start(buf, sizeof(buf));
        nftnl_batch_begin(mnl_nlmsg_batch_current(b), ++seq);
        mnl_nlmsg_batch_next(b);
        struct nftnl_table *t = nftnl_table_alloc();
        nftnl_table_set_str(t, NFTNL_TABLE_NAME, f.names[i]);
        nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, f.families[i]);
        uint32_t del_seq = ++seq;
        nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_DELTABLE,
                                    (uint16_t)f.families[i], NLM_F_ACK, del_seq);
        nftnl_table_nlmsg_build_payload(nlh, t);
        nftnl_table_free(t);
        mnl_nlmsg_batch_next(b);
        nftnl_batch_end(mnl_nlmsg_batch_current(b), ++seq);
        mnl_nlmsg_batch_next(b);
        ssize_t sent = mnl_socket_sendto(nl, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b));
        mnl_nlmsg_batch_stop(b);
        if (sent < 0) {
            r = -errno;
            goto out;
        }
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
        if (n < 0 || mnl_cb_run(buf, (size_t)n, del_seq, portid, NULL, NULL) < 0) {
            r = -errno;
            goto out;
        }
    }
out:
    mnl_socket_close(nl);
    return r;
}
