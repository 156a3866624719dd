/* SPDX-License-Identifier: MIT */
#include "base/conf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define LINE_MAX_BYTES 4096

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static int key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Parse one line (NUL-terminated, without its newline) in place. */
static int parse_line(char *s, unsigned line, gbx_conf_fn fn, void *arg, char *errbuf, size_t errsz)
{
    while (is_space(*s))
        s++;
    if (*s == '\0' || *s == '#')
        return 0;
    char *key = s;
    while (key_char(*s))
        s++;
    char *key_end = s;
    while (is_space(*s))
        s++;
    if (key_end == key || *s != '=') {
        snprintf(errbuf, errsz, "line %u: expected 'key = value' (keys are a-z, 0-9, '-')", line);
        return -EINVAL;
    }
    *key_end = '\0';
    s++;
    while (is_space(*s))
        s++;
    char *value = s;
    if (*s == '"') {
        value = ++s;
        char *q = strchr(s, '"');
        if (q == NULL) {
            snprintf(errbuf, errsz, "line %u: unterminated quoted value", line);
            return -EINVAL;
        }
        *q = '\0';
        for (char *t = q + 1; *t; t++) {
            if (!is_space(*t)) {
                snprintf(errbuf, errsz, "line %u: text after the quoted value", line);
                return -EINVAL;
            }
        }
    } else {
        char *end = value + strlen(value);
        while (end > value && is_space(end[-1]))
            end--;
        *end = '\0';
    }
    return fn(arg, key, value, line);
}

int gbx_conf_parse(const char *text, size_t len, gbx_conf_fn fn, void *arg, char *errbuf,
                   size_t errsz)
{
    char buf[LINE_MAX_BYTES];
    unsigned line = 0;
    size_t i = 0;
    if (errsz)
        errbuf[0] = '\0';
    while (i < len) {
        line++;
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        if (n >= sizeof(buf)) {
            snprintf(errbuf, errsz, "line %u: longer than %d bytes", line, LINE_MAX_BYTES - 1);
            return -EINVAL;
        }
        if (memchr(text + i, '\0', n)) {
            snprintf(errbuf, errsz, "line %u: contains a NUL byte", line);
            return -EINVAL;
        }
        memcpy(buf, text + i, n);
        buf[n] = '\0';
        int r = parse_line(buf, line, fn, arg, errbuf, errsz);
        if (r != 0)
            return r;
        i += n + (nl ? 1 : 0);
    }
    return 0;
}
