/* SPDX-License-Identifier: MIT */
/* The DNS server of one sandbox. Queries arrive on the daemon's UDP and TCP listeners inside
 * the sandbox's namespace; ldns parses them and encodes the answers (libevent 2.1's evdns
 * server was the first choice: it dereferences NULL on any datagram shorter than a DNS header,
 * so one packet from a sandbox would take the daemon down). An allowed name gets a synthetic
 * address from 198.18.0.0/15, remembered as address -> name so the proxy can map a connection
 * back to the name; a denied name gets NXDOMAIN; AAAA and every other type get an empty
 * answer (IPv6 never leaves). Nothing is forwarded: the sandbox learns no real address. */
#include <arpa/inet.h>
#include <ctype.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <ldns/ldns.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "egress/egress_int.h"

#define DNS_TTL 60
#define DNSTCP_MAX 16
#define DNS_MSG_MAX 4096
#define UDP_BATCH 64

struct gbx_egress_dnstcp {
    struct gbx_egress_dnstcp *prev, *next;
    struct gbx_egress_sb *sb;
    struct bufferevent *bev;
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

static const char *type_name(ldns_rr_type t, char *buf, size_t n)
{
    switch (t) {
    case LDNS_RR_TYPE_A:
        return "A";
    case LDNS_RR_TYPE_AAAA:
        return "AAAA";
    case LDNS_RR_TYPE_CNAME:
        return "CNAME";
    case LDNS_RR_TYPE_PTR:
        return "PTR";
    case LDNS_RR_TYPE_MX:
        return "MX";
    case LDNS_RR_TYPE_TXT:
        return "TXT";
    case LDNS_RR_TYPE_HTTPS:
        return "HTTPS";
    default:
        snprintf(buf, n, "TYPE%u", (unsigned)t);
        return buf;
    }
}

/* The reply to one query, or NULL to drop it (not a query at all). */
static ldns_pkt *answer(struct gbx_egress_sb *sb, const ldns_pkt *q, int tcp)
{
    struct gbx_egress *eg = sb->eg;
    if (ldns_pkt_qr(q))
        return NULL; /* an answer: nobody asked */
    ldns_pkt *r = ldns_pkt_new();
    GBX_BUG_ON(r == NULL);
    ldns_pkt_set_id(r, ldns_pkt_id(q));
    ldns_pkt_set_qr(r, true);
    ldns_pkt_set_rd(r, ldns_pkt_rd(q));
    ldns_pkt_set_ra(r, true);
    ldns_pkt_set_opcode(r, ldns_pkt_get_opcode(q));
    ldns_rr_list *qs = ldns_pkt_question(q);
    if (ldns_pkt_get_opcode(q) != LDNS_PACKET_QUERY) {
        ldns_pkt_set_rcode(r, LDNS_RCODE_NOTIMPL);
        return r;
    }
    if (ldns_rr_list_rr_count(qs) != 1) {
        ldns_pkt_set_rcode(r, LDNS_RCODE_FORMERR);
        return r;
    }
    const ldns_rr *qrr = ldns_rr_list_rr(qs, 0);
    ldns_pkt_push_rr(r, LDNS_SECTION_QUESTION, ldns_rr_clone(qrr));
    ldns_rr_type type = ldns_rr_get_type(qrr);
    char *owner = ldns_rdf2str(ldns_rr_owner(qrr));
    char name[256] = "";
    size_t n = owner ? strlen(owner) : 0;
    if (n && owner[n - 1] == '.')
        n--;
    const char *reason = NULL;
    int rcode = LDNS_RCODE_NOERROR;
    struct gbx_egress_decision d = {0, -1, 0};
    if (n == 0 || n >= sizeof(name)) {
        rcode = LDNS_RCODE_NXDOMAIN;
        reason = "not a host name";
        n = 0;
    }
    for (size_t i = 0; i < n; i++)
        name[i] = (char)tolower((unsigned char)owner[i]);
    name[n] = '\0';
    free(owner);
    if (rcode == LDNS_RCODE_NOERROR) {
        if (ldns_rr_get_class(qrr) != LDNS_RR_CLASS_IN) {
            rcode = LDNS_RCODE_NOTIMPL;
            reason = "not class IN";
        } else if (gbx_egress_name_valid(name) < 0) {
            rcode = LDNS_RCODE_NXDOMAIN;
            reason = "not a host name";
        } else if (eg->blocked) {
            rcode = LDNS_RCODE_NXDOMAIN;
            reason = "egress is blocked";
        } else {
            gbx_egress_policy_check_name(sb->policy, name, &d);
            if (!d.allow) {
                rcode = LDNS_RCODE_NXDOMAIN;
                reason = "denied by policy";
            }
        }
    }
    char ans[INET_ADDRSTRLEN] = "";
    if (rcode == LDNS_RCODE_NOERROR && type == LDNS_RR_TYPE_A) {
        int64_t slot = name_slot(sb, name);
        if (slot < 0) {
            rcode = LDNS_RCODE_SERVFAIL;
            reason = "too many names for one sandbox";
        } else {
            struct in_addr a = {htonl(GBX_EGRESS_POOL_BASE + 1 + (uint32_t)slot)};
            inet_ntop(AF_INET, &a, ans, sizeof(ans));
            ldns_rr *rr = ldns_rr_new(); /* (new_frm_type would add empty rdata slots) */
            GBX_BUG_ON(rr == NULL);
            ldns_rr_set_type(rr, LDNS_RR_TYPE_A);
            ldns_rr_set_owner(rr, ldns_rdf_clone(ldns_rr_owner(qrr)));
            ldns_rr_set_ttl(rr, DNS_TTL);
            ldns_rr_set_class(rr, LDNS_RR_CLASS_IN);
            ldns_rr_push_rdf(rr, ldns_rdf_new_frm_data(LDNS_RDF_TYPE_A, 4, &a.s_addr));
            ldns_pkt_push_rr(r, LDNS_SECTION_ANSWER, rr);
        }
    }
    ldns_pkt_set_rcode(r, (uint8_t)rcode);
    int allowed = rcode == LDNS_RCODE_NOERROR;
    if (allowed) {
        eg->c.dns_allow++;
        sb->c.dns_allow++;
    } else {
        eg->c.dns_deny++;
        sb->c.dns_deny++;
    }
    char tbuf[16];
    json_t *detail =
        json_pack("{s:s,s:s,s:s,s:s}", "name", name, "type", type_name(type, tbuf, sizeof(tbuf)),
                  "decision", allowed ? "allow" : "deny", "proto", tcp ? "tcp" : "udp");
    if (ans[0])
        json_object_set_new(detail, "answer", json_string(ans));
    if (d.rule >= 0)
        json_object_set_new(detail, "rule", json_integer(d.rule));
    if (reason)
        json_object_set_new(detail, "reason", json_string(reason));
    gbx_egress_audit(sb, "egress.dns", detail);
    return r;
}

int gbx_egress_dns_reply(struct gbx_egress_sb *sb, const uint8_t *msg, size_t len, int tcp,
                         uint8_t **out, size_t *outlen)
{
    ldns_pkt *q = NULL;
    if (len < LDNS_HEADER_SIZE || ldns_wire2pkt(&q, msg, len) != LDNS_STATUS_OK) {
        ldns_pkt_free(q);
        return -1; /* not DNS: dropped, like any server drops noise */
    }
    ldns_pkt *r = answer(sb, q, tcp);
    ldns_pkt_free(q);
    if (r == NULL)
        return -1;
    int rc = ldns_pkt2wire(out, r, outlen) == LDNS_STATUS_OK ? 0 : -1;
    ldns_pkt_free(r);
    if (rc == 0 && !tcp && *outlen > 512) { /* over UDP's classic limit: say truncated */
        (*out)[2] |= 0x02;
        *outlen = 512;
    }
    return rc;
}

static void on_udp(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_egress_sb *sb = arg;
    uint8_t msg[DNS_MSG_MAX];
    for (int i = 0; i < UDP_BATCH; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fd, msg, sizeof(msg), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (n < 0)
            return;
        uint8_t *out = NULL;
        size_t outlen = 0;
        if (gbx_egress_dns_reply(sb, msg, (size_t)n, 0, &out, &outlen) == 0)
            (void)!sendto(fd, out, outlen, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
        free(out);
    }
}

/* ---- TCP: length-prefixed messages ----------------------------------------------------------- */

static void dnstcp_free(struct gbx_egress_dnstcp *t)
{
    struct gbx_egress_sb *sb = t->sb;
    if (t->prev)
        t->prev->next = t->next;
    else
        sb->dnstcps = t->next;
    if (t->next)
        t->next->prev = t->prev;
    bufferevent_free(t->bev);
    free(t);
}

static void dnstcp_on_read(struct bufferevent *bev, void *arg)
{
    struct gbx_egress_dnstcp *t = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    uint8_t msg[DNS_MSG_MAX];
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
        uint8_t *out = NULL;
        size_t outlen = 0;
        if (gbx_egress_dns_reply(t->sb, msg, len, 1, &out, &outlen) == 0 && outlen <= 65535) {
            uint8_t l2[2] = {(uint8_t)(outlen >> 8), (uint8_t)outlen};
            evbuffer_add(bufferevent_get_output(bev), l2, 2);
            evbuffer_add(bufferevent_get_output(bev), out, outlen);
        }
        free(out);
    }
}

static void dnstcp_on_event(struct bufferevent *bev, short what, void *arg)
{
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
        dnstcp_free(arg);
}

static void dnstcp_on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                             int salen, void *arg)
{
    struct gbx_egress_sb *sb = arg;
    unsigned count = 0;
    for (struct gbx_egress_dnstcp *t = sb->dnstcps; t; t = t->next)
        count++;
    struct bufferevent *bev =
        count < DNSTCP_MAX ? bufferevent_socket_new(sb->eg->base, fd, BEV_OPT_CLOSE_ON_FREE) : NULL;
    if (bev == NULL) {
        close(fd);
        return;
    }
    struct gbx_egress_dnstcp *t = gbx_xcalloc(1, sizeof(*t));
    t->sb = sb;
    t->bev = bev;
    t->next = sb->dnstcps;
    if (sb->dnstcps)
        sb->dnstcps->prev = t;
    sb->dnstcps = t;
    struct timeval tv = {10, 0};
    bufferevent_set_timeouts(bev, &tv, &tv);
    bufferevent_setcb(bev, dnstcp_on_read, NULL, dnstcp_on_event, t);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/* ---- per sandbox ----------------------------------------------------------------------------- */

int gbx_egress_dns_start(struct gbx_egress_sb *sb, struct gbx_err **err)
{
    sb->dns_ev = event_new(sb->eg->base, sb->socks.dns_udp_fd, EV_READ | EV_PERSIST, on_udp, sb);
    if (sb->dns_ev == NULL || event_add(sb->dns_ev, NULL) < 0)
        return gbx_err_set(err, ENOMEM, GBX_ERR_INTERNAL, "cannot serve DNS");
    sb->dnstcp_lis =
        evconnlistener_new(sb->eg->base, dnstcp_on_accept, sb,
                           LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, sb->socks.dns_tcp_fd);
    if (sb->dnstcp_lis == NULL)
        return gbx_err_set(err, ENOMEM, GBX_ERR_INTERNAL, "cannot serve DNS over TCP");
    sb->socks.dns_tcp_fd = -1; /* the listener owns it now */
    return 0;
}

void gbx_egress_dns_stop(struct gbx_egress_sb *sb)
{
    struct gbx_egress_dnstcp *next;
    for (struct gbx_egress_dnstcp *t = sb->dnstcps; t; t = next) {
        next = t->next;
        bufferevent_free(t->bev);
        free(t);
    }
    sb->dnstcps = NULL;
    if (sb->dnstcp_lis)
        evconnlistener_free(sb->dnstcp_lis);
    sb->dnstcp_lis = NULL;
    if (sb->dns_ev)
        event_free(sb->dns_ev);
    sb->dns_ev = NULL; /* the UDP socket is closed with the others (socks) */
}
