/* SPDX-License-Identifier: MIT */
/* The DevTools server's /json answers, re-addressed (cdp_json.h): http_parser reads the
 * response, jansson the body. */
#include "ingress/cdp_json.h"

#include <ctype.h>
#include <http_parser.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

struct parsed {
    const char *body;
    size_t blen;
    int body_split; /* the body came in more than one piece (chunked): copied */
    char *copy;
    int complete;
};

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct parsed *r = p->data;
    if (r->body == NULL) {
        r->body = at;
        r->blen = len;
        return 0;
    }
    if (!r->body_split) { /* the second piece: from now on a copy */
        r->copy = gbx_xmalloc(r->blen + 1);
        memcpy(r->copy, r->body, r->blen);
        r->body_split = 1;
    }
    r->copy = gbx_xrealloc(r->copy, r->blen + len + 1);
    memcpy(r->copy + r->blen, at, len);
    r->blen += len;
    r->body = r->copy;
    return 0;
}

static int on_complete(http_parser *p)
{
    ((struct parsed *)p->data)->complete = 1;
    return 0;
}

/* The next "127.0.0.1:<port>" in s that is that port (not a longer one: 9222 is not 92220). */
static const char *find_addr(const char *s, const char *from, size_t fl)
{
    for (const char *p = strstr(s, from); p; p = strstr(p + 1, from))
        if (!isdigit((unsigned char)p[fl]))
            return p;
    return NULL;
}

/* Every "127.0.0.1:<port>" in s replaced by to: a new string, or NULL when s has none. */
static char *replace_all(const char *s, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    for (const char *p = find_addr(s, from, fl); p; p = find_addr(p + fl, from, fl))
        n++;
    if (n == 0)
        return NULL;
    char *o = gbx_xmalloc(strlen(s) + n * tl + 1), *w = o;
    for (const char *q; (q = find_addr(s, from, fl)) != NULL; s = q + fl) {
        memcpy(w, s, (size_t)(q - s));
        w += q - s;
        memcpy(w, to, tl);
        w += tl;
    }
    strcpy(w, s);
    return o;
}

static void readdress(json_t *o, const char *from, const char *to, const char *prefix)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        const char *s = json_string_value(v);
        if (s == NULL)
            continue;
        char *n = replace_all(s, from, to);
        if (strcmp(k, "devtoolsFrontendUrl") == 0 && prefix[0] && (n ? n : s)[0] == '/') {
            char *p = gbx_asprintf("%s%s", prefix, n ? n : s);
            free(n);
            n = p;
        }
        if (n)
            json_object_set_new(o, k, json_string(n));
        free(n);
    }
}

int gbx_ingress_cdp_answer(const char *resp, size_t len, int eof, unsigned port, const char *ext,
                           const char *prefix, char **out, size_t *outlen)
{
    http_parser_settings s;
    http_parser_settings_init(&s);
    s.on_body = on_body;
    s.on_message_complete = on_complete;
    http_parser p;
    http_parser_init(&p, HTTP_RESPONSE);
    struct parsed r = {0};
    p.data = &r;
    size_t used = http_parser_execute(&p, &s, resp, len);
    int ok = HTTP_PARSER_ERRNO(&p) == HPE_OK && used == len;
    if (!r.complete && ok && eof)
        (void)http_parser_execute(&p, &s, resp, 0); /* a body that ends with the connection */
    if (!r.complete || p.status_code < 100 || p.status_code > 599) {
        free(r.copy);
        return ok && !eof && !r.complete ? 1 : -1;
    }
    char from[32];
    snprintf(from, sizeof(from), "127.0.0.1:%u", port);
    gbx_autofree char *to = gbx_asprintf("%s%s", ext, prefix);
    json_t *j = r.body ? json_loadb(r.body, r.blen, JSON_DECODE_ANY, NULL) : NULL;
    char *body = NULL;
    if (json_is_object(j)) {
        readdress(j, from, to, prefix);
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            readdress(json_array_get(j, i), from, to, prefix);
    }
    if (j)
        body = json_dumps(j, JSON_INDENT(3) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    json_decref(j);
    size_t bl = body ? strlen(body) : r.blen;
    const char *b = body ? body : r.body ? r.body : "";
    gbx_autofree char *head = gbx_asprintf(
        "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
        p.status_code, http_status_str((enum http_status)p.status_code),
        body ? "application/json; charset=UTF-8" : "text/plain", bl);
    size_t hl = strlen(head);
    *out = gbx_xmalloc(hl + bl + 1);
    memcpy(*out, head, hl);
    memcpy(*out + hl, b, bl);
    (*out)[hl + bl] = '\0';
    *outlen = hl + bl;
    free(body);
    free(r.copy);
    return 0;
}
