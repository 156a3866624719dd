/* SPDX-License-Identifier: MIT */
#include "http/multipart.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mem.h"

static int is_bchar(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           strchr("'()+_,-./:=? ", c) != NULL;
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* A parameter value at p (token or quoted-string, with backslash escapes) into a new string;
 * *end is set past it. NULL when malformed. Bounded by n bytes of input. */
static char *param_value(const char *p, size_t n, const char **end)
{
    char *out = gbx_xmalloc(n + 1);
    size_t k = 0, i = 0;
    if (n > 0 && p[0] == '"') {
        for (i = 1; i < n && p[i] != '"'; i++) {
            if (p[i] == '\\' && i + 1 < n)
                i++;
            out[k++] = p[i];
        }
        if (i >= n) {
            free(out);
            return NULL; /* unterminated */
        }
        i++;
    } else {
        for (; i < n && p[i] != ';' && p[i] != ' ' && p[i] != '\t'; i++)
            out[k++] = p[i];
    }
    out[k] = '\0';
    *end = p + i;
    return out;
}

int gbx_multipart_boundary(const char *content_type, char *out, size_t outsz)
{
    static const char type[] = "multipart/form-data";
    if (content_type == NULL || outsz < GBX_MULTIPART_BOUNDARY_MAX + 1)
        return -EINVAL;
    const char *p = skip_ws(content_type);
    if (strncasecmp(p, type, sizeof(type) - 1) != 0)
        return -EINVAL;
    p = skip_ws(p + sizeof(type) - 1);
    int found = 0;
    while (*p == ';') {
        p = skip_ws(p + 1);
        const char *eq = strchr(p, '=');
        if (eq == NULL)
            return -EINVAL;
        size_t klen = (size_t)(eq - p);
        const char *end;
        char *v = param_value(eq + 1, strlen(eq + 1), &end);
        if (v == NULL)
            return -EINVAL;
        if (klen == 8 && strncasecmp(p, "boundary", 8) == 0 && !found) {
            size_t n = strlen(v);
            int ok = n >= 1 && n <= GBX_MULTIPART_BOUNDARY_MAX && v[n - 1] != ' ';
            for (size_t i = 0; ok && i < n; i++)
                ok = is_bchar(v[i]);
            if (!ok) {
                free(v);
                return -EINVAL;
            }
            memcpy(out, v, n + 1);
            found = 1;
        }
        free(v);
        p = skip_ws(end);
    }
    if (*p != '\0' || !found)
        return -EINVAL;
    return 0;
}

/* Parse one header line of a part (without its CRLF) into part. */
static int part_header(struct gbx_multipart_part *part, const char *line, size_t n,
                       const char **why)
{
    const char *colon = memchr(line, ':', n);
    if (colon == NULL) {
        *why = "a part header has no ':'";
        return -EINVAL;
    }
    size_t klen = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vlen = n - klen - 1;
    while (vlen > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
        vlen--;
    if (klen == 12 && strncasecmp(line, "Content-Type", 12) == 0) {
        if (part->content_type == NULL)
            part->content_type = gbx_xstrndup(v, vlen);
        return 0;
    }
    if (klen != 19 || strncasecmp(line, "Content-Disposition", 19) != 0)
        return 0; /* other headers do not matter here */
    if (vlen < 9 || strncasecmp(v, "form-data", 9) != 0 ||
        (vlen > 9 && v[9] != ';' && v[9] != ' ' && v[9] != '\t')) {
        *why = "a part's Content-Disposition is not form-data";
        return -EINVAL;
    }
    /* a NUL-terminated copy to walk */
    gbx_autofree char *copy = gbx_xstrndup(v + 9, vlen - 9);
    const char *p = skip_ws(copy);
    while (*p == ';') {
        p = skip_ws(p + 1);
        const char *eq = strchr(p, '=');
        if (eq == NULL) {
            *why = "a Content-Disposition parameter has no value";
            return -EINVAL;
        }
        size_t plen = (size_t)(eq - p);
        while (plen > 0 && (p[plen - 1] == ' ' || p[plen - 1] == '\t'))
            plen--;
        const char *end;
        char *val = param_value(skip_ws(eq + 1), strlen(skip_ws(eq + 1)), &end);
        if (val == NULL) {
            *why = "a Content-Disposition parameter is an unterminated quoted string";
            return -EINVAL;
        }
        if (plen == 4 && strncasecmp(p, "name", 4) == 0 && part->name == NULL)
            part->name = gbx_steal_ptr(&val);
        else if (plen == 8 && strncasecmp(p, "filename", 8) == 0 && part->filename == NULL)
            part->filename = gbx_steal_ptr(&val);
        free(val);
        p = skip_ws(end);
    }
    if (*p != '\0') {
        *why = "a part's Content-Disposition is malformed";
        return -EINVAL;
    }
    return 0;
}

static int part_headers(struct gbx_multipart_part *part, const uint8_t *h, size_t n,
                        const char **why)
{
    for (size_t i = 0; i < n; i++) {
        if (h[i] == 0 || (h[i] < 0x20 && h[i] != '\t' && h[i] != '\r' && h[i] != '\n') ||
            h[i] == 0x7f) {
            *why = "a part header holds a control character";
            return -EINVAL;
        }
    }
    size_t start = 0;
    while (start < n) {
        const uint8_t *crlf = memmem(h + start, n - start, "\r\n", 2);
        size_t end = crlf ? (size_t)(crlf - h) : n;
        if (end > start) {
            if (h[start] == ' ' || h[start] == '\t') {
                *why = "folded part headers are not supported";
                return -EINVAL;
            }
            int r = part_header(part, (const char *)h + start, end - start, why);
            if (r < 0)
                return r;
        }
        start = end + 2;
    }
    return 0;
}

/* Find the next delimiter "\r\n--boundary" at or after from, followed by "--" or by
 * transport padding and CRLF. Returns its offset (of the CR) or -1; *after is set past the
 * delimiter line, *last to 1 when it is the close delimiter. */
static long find_delim(const uint8_t *b, size_t len, size_t from, const char *delim, size_t dlen,
                       size_t *after, int *last)
{
    while (from < len) {
        const uint8_t *m = memmem(b + from, len - from, delim, dlen);
        if (m == NULL)
            return -1;
        size_t at = (size_t)(m - b), p = at + dlen;
        if (p + 2 <= len && b[p] == '-' && b[p + 1] == '-') {
            *after = p + 2;
            *last = 1;
            return (long)at;
        }
        while (p < len && (b[p] == ' ' || b[p] == '\t'))
            p++;
        if (p + 2 <= len && b[p] == '\r' && b[p + 1] == '\n') {
            *after = p + 2;
            *last = 0;
            return (long)at;
        }
        from = at + 1; /* the boundary's text inside data: not a delimiter */
    }
    return -1;
}

void gbx_multipart_release(struct gbx_multipart *mp)
{
    if (mp == NULL)
        return;
    for (size_t i = 0; i < mp->n; i++) {
        free(mp->parts[i].name);
        free(mp->parts[i].filename);
        free(mp->parts[i].content_type);
    }
    free(mp->parts);
    mp->parts = NULL;
    mp->n = 0;
}

int gbx_multipart_parse(const char *boundary, const uint8_t *body, size_t len, size_t max_parts,
                        struct gbx_multipart *mp, const char **why)
{
    const char *dummy;
    if (why == NULL)
        why = &dummy;
    memset(mp, 0, sizeof(*mp));
    size_t blen = boundary ? strlen(boundary) : 0;
    if (blen == 0 || blen > GBX_MULTIPART_BOUNDARY_MAX) {
        *why = "the boundary is empty or too long";
        return -EINVAL;
    }
    /* "\r\n--" boundary: the delimiter; the first one may start the body without the CRLF */
    char delim[GBX_MULTIPART_BOUNDARY_MAX + 5];
    memcpy(delim, "\r\n--", 4);
    memcpy(delim + 4, boundary, blen);
    size_t dlen = blen + 4;
    size_t pos, cap = 0;
    int last = 0;
    long at;
    if (len >= dlen - 2 && memcmp(body, delim + 2, dlen - 2) == 0) {
        /* the body starts with the first boundary line */
        const uint8_t *b = body;
        size_t p = dlen - 2;
        if (p + 2 <= len && b[p] == '-' && b[p + 1] == '-')
            return 0; /* only a close delimiter: no parts */
        while (p < len && (b[p] == ' ' || b[p] == '\t'))
            p++;
        if (!(p + 2 <= len && b[p] == '\r' && b[p + 1] == '\n')) {
            *why = "the first boundary line is malformed";
            return -EINVAL;
        }
        pos = p + 2;
    } else {
        at = find_delim(body, len, 0, delim, dlen, &pos, &last);
        if (at < 0) {
            *why = "no boundary line in the body";
            return -EINVAL;
        }
        if (last)
            return 0;
    }
    for (;;) {
        /* headers: up to an empty line */
        size_t hstart = pos, hend, cstart;
        if (len - pos >= 2 && body[pos] == '\r' && body[pos + 1] == '\n') {
            hend = pos;
            cstart = pos + 2;
        } else {
            size_t window = len - pos;
            if (window > GBX_MULTIPART_HEADERS_MAX + 4)
                window = GBX_MULTIPART_HEADERS_MAX + 4;
            const uint8_t *e = memmem(body + pos, window, "\r\n\r\n", 4);
            if (e == NULL) {
                *why = window > GBX_MULTIPART_HEADERS_MAX ? "a part's headers are too large"
                                                          : "a part's headers do not end";
                gbx_multipart_release(mp);
                return window > GBX_MULTIPART_HEADERS_MAX ? -E2BIG : -EINVAL;
            }
            hend = (size_t)(e - body);
            cstart = hend + 4;
        }
        size_t next;
        at = find_delim(body, len, cstart, delim, dlen, &next, &last);
        if (at < 0) {
            *why = "the body ends without a closing boundary";
            gbx_multipart_release(mp);
            return -EINVAL;
        }
        if (mp->n == max_parts) {
            *why = "too many parts";
            gbx_multipart_release(mp);
            return -E2BIG;
        }
        if (mp->n == cap) {
            cap = cap ? cap * 2 : 4;
            mp->parts = gbx_xrealloc(mp->parts, cap * sizeof(*mp->parts));
        }
        struct gbx_multipart_part *part = &mp->parts[mp->n++];
        memset(part, 0, sizeof(*part));
        int r = part_headers(part, body + hstart, hend - hstart, why);
        if (r < 0) {
            gbx_multipart_release(mp);
            return r;
        }
        part->data = body + cstart;
        part->len = (size_t)at - cstart; /* up to the delimiter's CRLF */
        if (last)
            return 0;
        pos = next;
    }
}
