/* SPDX-License-Identifier: MIT */
/* Ingress routes (route.h). */
#include "ingress/route.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mem.h"

static const char BAD_FORM[] = "the host must be <port>-<sandbox id>.<domain>";
static const char BAD_PORT[] = "the port must be a number from 1 to 65535";
static const char BAD_PATH[] = "the path must be /v1/sandboxes/<sandbox id>/ports/<port>/...";

/* digits[0..n) as a port: 1..65535, or 0 */
static unsigned port_of(const char *digits, size_t n)
{
    unsigned long port = 0;
    if (n == 0 || n > 5)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)digits[i]))
            return 0;
        port = port * 10 + (unsigned long)(digits[i] - '0');
    }
    return port <= 65535 ? (unsigned)port : 0;
}

/* An id: 1 to 63 bytes of letters, digits, '-', '_' and '.' (as the API's ids): copied. */
static int set_id(struct gbx_ingress_route *r, const char *id, size_t n)
{
    if (n == 0 || n >= sizeof(r->id))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && id[i] != '-' && id[i] != '_' && id[i] != '.')
            return -1;
    memcpy(r->id, id, n);
    r->id[n] = '\0';
    return 0;
}

int gbx_ingress_route_host(const char *domain, const char *host, struct gbx_ingress_route *r)
{
    memset(r, 0, sizeof(*r));
    size_t hl = strlen(host), dl = strlen(domain);
    if (dl == 0 || hl <= dl + 1 || host[hl - dl - 1] != '.' || strcmp(host + hl - dl, domain) != 0)
        return 0;
    size_t ll = hl - dl - 1; /* the label before the domain */
    const char *dash = memchr(host, '-', ll);
    if (memchr(host, '.', ll) != NULL || dash == NULL) {
        r->error = BAD_FORM;
        return 1;
    }
    if ((r->port = port_of(host, (size_t)(dash - host))) == 0) {
        r->error = BAD_PORT;
        return 1;
    }
    if (set_id(r, dash + 1, ll - (size_t)(dash + 1 - host)) < 0) {
        r->error = BAD_FORM;
        r->port = 0;
    }
    return 1;
}

int gbx_ingress_route_path(const char *target, struct gbx_ingress_route *r)
{
    static const char pre[] = "/v1/sandboxes/";
    memset(r, 0, sizeof(*r));
    if (strncmp(target, pre, sizeof(pre) - 1) != 0)
        return 0;
    const char *id = target + sizeof(pre) - 1;
    size_t idl = strcspn(id, "/?");
    if (strncmp(id + idl, "/ports/", 7) != 0)
        return 0; /* another /v1/sandboxes route: the API's */
    const char *p = id + idl + 7;
    size_t pl = strcspn(p, "/?");
    if (set_id(r, id, idl) < 0) {
        r->error = BAD_PATH;
        return 1;
    }
    if ((r->port = port_of(p, pl)) == 0) {
        r->error = BAD_PORT;
        return 1;
    }
    r->prefix_len = (size_t)(p + pl - target);
    return 1;
}

/* Does the header line l[0..n) have the name name (case-insensitive)? */
static int header_is(const char *l, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && strncasecmp(l, name, k) == 0 && l[k] == ':';
}

int gbx_ingress_rewrite_head(const char *head, size_t len, size_t prefix_len, int upgrade,
                             const char *host, char **out, size_t *outlen)
{
    /* the request line */
    const char *eol = NULL;
    for (size_t i = 0; i + 1 < len; i++)
        if (head[i] == '\r' && head[i + 1] == '\n') {
            eol = head + i;
            break;
        }
    if (eol == NULL || len < 4 || memcmp(head + len - 4, "\r\n\r\n", 4) != 0)
        return -1;
    const char *sp1 = memchr(head, ' ', (size_t)(eol - head));
    if (sp1 == NULL)
        return -1;
    const char *target = sp1 + 1;
    const char *sp2 = memchr(target, ' ', (size_t)(eol - target));
    if (sp2 == NULL || (size_t)(sp2 - target) < prefix_len)
        return -1;
    const char *rest = target + prefix_len;
    size_t restl = (size_t)(sp2 - rest);
    size_t hostl = host ? strlen(host) : 0;
    char *o = gbx_xmalloc(len + 32 + (host ? hostl + 8 : 0));
    size_t n = 0;
    memcpy(o, head, (size_t)(target - head));
    n += (size_t)(target - head);
    if (restl == 0 || rest[0] != '/')
        o[n++] = '/';
    memcpy(o + n, rest, restl);
    n += restl;
    memcpy(o + n, sp2, (size_t)(eol + 2 - sp2)); /* " HTTP/1.1\r\n" */
    n += (size_t)(eol + 2 - sp2);
    /* the headers, line by line, up to the blank line */
    const char *l = eol + 2, *end = head + len - 2;
    while (l < end) {
        const char *le = l;
        while (le + 1 < end + 2 && !(le[0] == '\r' && le[1] == '\n'))
            le++;
        size_t ln = (size_t)(le - l);
        int keep = upgrade || (!header_is(l, ln, "Connection") && !header_is(l, ln, "Keep-Alive"));
        if (host && header_is(l, ln, "Host"))
            keep = 0;
        if (keep) {
            memcpy(o + n, l, ln + 2);
            n += ln + 2;
        }
        l = le + 2;
    }
    if (!upgrade) {
        memcpy(o + n, "Connection: close\r\n", 19);
        n += 19;
    }
    if (host) {
        memcpy(o + n, "Host: ", 6);
        memcpy(o + n + 6, host, hostl);
        memcpy(o + n + 6 + hostl, "\r\n", 2);
        n += hostl + 8;
    }
    memcpy(o + n, "\r\n", 2);
    n += 2;
    *out = o;
    *outlen = n;
    return 0;
}
