/* SPDX-License-Identifier: MIT */
/* The DNS server of one sandbox. Queries arrive on the daemon's UDP listener inside the
 * sandbox's namespace (and on its TCP listener, bridged to the same logic); libevent's evdns
 * parses them and encodes the answers. An allowed name gets a synthetic address from
 * 198.18.0.0/15, remembered as address -> name so the proxy can map a connection back to the
 * name; a denied name gets NXDOMAIN; AAAA and every other type get an empty answer (IPv6
 * never leaves). Nothing is forwarded: the sandbox learns no real address. */
#include <arpa/inet.h>
#include <ctype.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/listener.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "egress/egress_int.h"

#define DNS_TTL 60
#define DNSTCP_MAX 16
#define DNSTCP_MSG_MAX 4096

/* Where a query came from: the sandbox's UDP listener, or one TCP connection's bridge
 * (then only the bridge's own client socket may ask). */
struct dns_src {
    struct gbx_egress_sb *sb;
    struct sockaddr_in peer; /* sin_family 0: anyone (the listener inside the sandbox) */
};

struct gbx_egress_dnstcp {
    struct gbx_egress_dnstcp *prev, *next;
    struct dns_src src;
    struct bufferevent *bev; /* the sandbox's TCP connection */
    int usock;               /* bridge client: sends each query to port, reads answers */
    struct event *uev;
    struct evdns_server_port *port;
};

/* ---- synthetic names ----------------------------------------------------------------------- */

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void index_put(uint32_t *index, uint32_t cap, const char *name, uint32_t slot)
{
    for (uint32_t i = name_hash(name) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (index[i] == 0) {
            index[i] = slot;
            return;
        }
}

/* The pool index of name, added when new; -1 when the pool is full. */
static int64_t name_slot(struct gbx_egress_sb *sb, const char *name)
{
    if (sb->index_cap) {
        for (uint32_t i = name_hash(name) & (sb->index_cap - 1); sb->index[i];
             i = (i + 1) & (sb->index_cap - 1))
            if (strcmp(sb->names[sb->index[i] - 1], name) == 0)
                return sb->index[i] - 1;
    }
    if (sb->nnames >= GBX_EGRESS_POOL_MAX - 2)
        return -1;
    if (sb->nnames == sb->names_cap) {
        sb->names_cap = sb->names_cap ? sb->names_cap * 2 : 16;
        sb->names = gbx_xrealloc(sb->names, sb->names_cap * sizeof(char *));
    }
    sb->names[sb->nnames++] = gbx_xstrdup(name);
    if (sb->nnames * 2 > sb->index_cap) {
        uint32_t cap = sb->index_cap ? sb->index_cap * 2 : 32;
        uint32_t *idx = gbx_xcalloc(cap, sizeof(uint32_t));
        for (uint32_t i = 0; i < sb->nnames; i++)
            index_put(idx, cap, sb->names[i], i + 1);
        free(sb->index);
        sb->index = idx;
        sb->index_cap = cap;
    } else {
        index_put(sb->index, sb->index_cap, name, sb->nnames);
    }
    return sb->nnames - 1;
}

const char *gbx_egress_dns_name(const struct gbx_egress_sb *sb, const struct in_addr *a,
                                int *in_pool)
{
    uint32_t h = ntohl(a->s_addr);
    *in_pool = (h & GBX_EGRESS_POOL_MASK) == GBX_EGRESS_POOL_BASE;
    if (!*in_pool)
        return NULL;
    uint32_t off = h - GBX_EGRESS_POOL_BASE;
    if (off == 0 || off > sb->nnames)
        return NULL;
    return sb->names[off - 1];
}

/* ---- answering ----------------------------------------------------------------------------- */

static const char *type_name(int t)
{
    switch (t) {
    case EVDNS_TYPE_A:
        return "A";
    case EVDNS_TYPE_AAAA:
        return "AAAA";
    case EVDNS_TYPE_CNAME:
        return "CNAME";
    case EVDNS_TYPE_PTR:
        return "PTR";
    case EVDNS_TYPE_MX:
        return "MX";
    case EVDNS_TYPE_TXT:
        return "TXT";
    default:
        return NULL;
    }
}

static void on_query(struct evdns_server_request *req, void *arg)
{
    struct dns_src *src = arg;
    struct gbx_egress_sb *sb = src->sb;
    struct gbx_egress *eg = sb->eg;
    if (src->peer.sin_family) {
        struct sockaddr_in from;
        if (evdns_server_request_get_requesting_addr(req, (struct sockaddr *)&from,
                                                     sizeof(from)) < 0 ||
            from.sin_port != src->peer.sin_port || from.sin_addr.s_addr != src->peer.sin_addr.s_addr) {
            evdns_server_request_drop(req);
            return;
        }
    }
    int rcode = DNS_ERR_NONE;
    if (req->nquestions != 1) {
        evdns_server_request_respond(req, DNS_ERR_FORMAT);
        return;
    }
    const struct evdns_server_question *q = req->questions[0];
    char name[256];
    size_t n = strlen(q->name);
    if (n && q->name[n - 1] == '.')
        n--;
    const char *reason = NULL;
    struct gbx_egress_decision d = {0, -1, 0};
    if (n == 0 || n >= sizeof(name)) {
        rcode = DNS_ERR_NOTEXIST;
        reason = "not a host name";
        n = 0;
    }
    for (size_t i = 0; i < n; i++)
        name[i] = (char)tolower((unsigned char)q->name[i]);
    name[n] = '\0';
    if (rcode == DNS_ERR_NONE) {
        if (q->dns_question_class != EVDNS_CLASS_INET) {
            rcode = DNS_ERR_NOTIMPL;
            reason = "not class IN";
        } else if (gbx_egress_name_valid(name) < 0) {
            rcode = DNS_ERR_NOTEXIST;
            reason = "not a host name";
        } else if (eg->blocked) {
            rcode = DNS_ERR_NOTEXIST;
            reason = "egress is blocked";
        } else {
            gbx_egress_policy_check_name(sb->policy, name, &d);
            if (!d.allow) {
                rcode = DNS_ERR_NOTEXIST;
                reason = "denied by policy";
            }
        }
    }
    char answer[INET_ADDRSTRLEN] = "";
    if (rcode == DNS_ERR_NONE && q->type == EVDNS_TYPE_A) {
        int64_t slot = name_slot(sb, name);
        if (slot < 0) {
            rcode = DNS_ERR_SERVERFAILED;
            reason = "too many names for one sandbox";
        } else {
            struct in_addr a = {htonl(GBX_EGRESS_POOL_BASE + 1 + (uint32_t)slot)};
            inet_ntop(AF_INET, &a, answer, sizeof(answer));
            evdns_server_request_add_a_reply(req, q->name, 1, &a.s_addr, DNS_TTL);
        }
    }
    int allowed = rcode == DNS_ERR_NONE;
    if (allowed) {
        eg->c.dns_allow++;
        sb->c.dns_allow++;
    } else {
        eg->c.dns_deny++;
        sb->c.dns_deny++;
    }
    const char *tn = type_name(q->type);
    json_t *detail = json_pack("{s:s,s:s,s:s}", "name", n ? name : "", "decision",
                               allowed ? "allow" : "deny", "proto",
                               src->peer.sin_family ? "tcp" : "udp");
    if (tn)
        json_object_set_new(detail, "type", json_string(tn));
    else
        json_object_set_new(detail, "type", json_integer(q->type));
    if (answer[0])
        json_object_set_new(detail, "answer", json_string(answer));
    if (d.rule >= 0)
        json_object_set_new(detail, "rule", json_integer(d.rule));
    if (reason)
        json_object_set_new(detail, "reason", json_string(reason));
    gbx_egress_audit(sb, "egress.dns", detail);
    if (evdns_server_request_respond(req, rcode) < 0)
        gbx_log_debug("sandbox '%s': DNS answer not sent", sb->id);
}

/* ---- TCP: length-prefixed messages, bridged to an evdns port on the host's loopback -------- */

static void dnstcp_free(struct gbx_egress_dnstcp *t)
{
    struct gbx_egress_sb *sb = t->src.sb;
    if (t->prev)
        t->prev->next = t->next;
    else
        sb->dnstcps = t->next;
    if (t->next)
        t->next->prev = t->prev;
    if (t->bev)
        bufferevent_free(t->bev);
    if (t->uev)
        event_free(t->uev);
    if (t->usock >= 0)
        close(t->usock);
    if (t->port)
        evdns_close_server_port(t->port);
    free(t);
}

static void dnstcp_on_read(struct bufferevent *bev, void *arg)
{
    struct gbx_egress_dnstcp *t = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    uint8_t msg[DNSTCP_MSG_MAX];
    for (;;) {
        uint8_t len2[2];
        if (evbuffer_copyout(in, len2, 2) < 2)
            return;
        size_t len = (size_t)len2[0] << 8 | len2[1];
        if (len == 0 || len > sizeof(msg)) {
            dnstcp_free(t);
            return;
        }
        if (evbuffer_get_length(in) < 2 + len)
            return;
        evbuffer_drain(in, 2);
        evbuffer_remove(in, msg, len);
        (void)!send(t->usock, msg, len, MSG_DONTWAIT);
    }
}

static void dnstcp_on_event(struct bufferevent *bev, short what, void *arg)
{
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
        dnstcp_free(arg);
}

static void dnstcp_on_answer(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_egress_dnstcp *t = arg;
    uint8_t msg[DNSTCP_MSG_MAX];
    ssize_t n;
    while ((n = recv(fd, msg, sizeof(msg), MSG_DONTWAIT)) > 0) {
        uint8_t len2[2] = {(uint8_t)(n >> 8), (uint8_t)n};
        struct evbuffer *out = bufferevent_get_output(t->bev);
        evbuffer_add(out, len2, 2);
        evbuffer_add(out, msg, (size_t)n);
    }
}

static int udp_loopback(struct sockaddr_in *bound)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = {htonl(INADDR_LOOPBACK)}};
    socklen_t l = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)bound, &l) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static void dnstcp_on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                             int salen, void *arg)
{
    struct gbx_egress_sb *sb = arg;
    unsigned count = 0;
    for (struct gbx_egress_dnstcp *t = sb->dnstcps; t; t = t->next)
        count++;
    if (count >= DNSTCP_MAX) {
        close(fd);
        return;
    }
    struct gbx_egress_dnstcp *t = gbx_xcalloc(1, sizeof(*t));
    t->src.sb = sb;
    t->usock = -1;
    t->next = sb->dnstcps;
    if (sb->dnstcps)
        sb->dnstcps->prev = t;
    sb->dnstcps = t;
    t->bev = bufferevent_socket_new(sb->eg->base, fd, BEV_OPT_CLOSE_ON_FREE);
    struct sockaddr_in srv;
    int sfd = udp_loopback(&srv);
    if (t->bev == NULL || sfd < 0) {
        if (t->bev == NULL)
            close(fd);
        if (sfd >= 0)
            close(sfd);
        dnstcp_free(t);
        return;
    }
    t->port = evdns_add_server_port_with_base(sb->eg->base, sfd, 0, on_query, &t->src);
    if (t->port == NULL)
        close(sfd);
    if (t->port == NULL || (t->usock = udp_loopback(&t->src.peer)) < 0 ||
        connect(t->usock, (struct sockaddr *)&srv, sizeof(srv)) < 0) {
        dnstcp_free(t);
        return;
    }
    t->uev = event_new(sb->eg->base, t->usock, EV_READ | EV_PERSIST, dnstcp_on_answer, t);
    event_add(t->uev, NULL);
    struct timeval tv = {10, 0};
    bufferevent_set_timeouts(t->bev, &tv, &tv);
    bufferevent_setcb(t->bev, dnstcp_on_read, NULL, dnstcp_on_event, t);
    bufferevent_enable(t->bev, EV_READ | EV_WRITE);
}

/* ---- per sandbox ----------------------------------------------------------------------------- */

int gbx_egress_dns_start(struct gbx_egress_sb *sb, struct gbx_err **err)
{
    struct dns_src *src = gbx_xcalloc(1, sizeof(*src));
    src->sb = sb;
    sb->dns_port =
        evdns_add_server_port_with_base(sb->eg->base, sb->socks.dns_udp_fd, 0, on_query, src);
    if (sb->dns_port == NULL) {
        free(src);
        return gbx_err_set(err, ENOMEM, GBX_ERR_INTERNAL, "cannot serve DNS");
    }
    sb->dns_src = src;
    sb->socks.dns_udp_fd = -1; /* the port owns it now */
    sb->dnstcp_lis = evconnlistener_new(sb->eg->base, dnstcp_on_accept, sb,
                                        LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0,
                                        sb->socks.dns_tcp_fd);
    if (sb->dnstcp_lis == NULL)
        return gbx_err_set(err, ENOMEM, GBX_ERR_INTERNAL, "cannot serve DNS over TCP");
    sb->socks.dns_tcp_fd = -1;
    return 0;
}

void gbx_egress_dns_stop(struct gbx_egress_sb *sb)
{
    while (sb->dnstcps)
        dnstcp_free(sb->dnstcps);
    if (sb->dnstcp_lis)
        evconnlistener_free(sb->dnstcp_lis);
    sb->dnstcp_lis = NULL;
    if (sb->dns_port)
        evdns_close_server_port(sb->dns_port);
    sb->dns_port = NULL;
    free(sb->dns_src);
    sb->dns_src = NULL;
}
