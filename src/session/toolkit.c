/* SPDX-License-Identifier: MIT */
/* The pure parts of the agent toolset: see toolkit.h. Nothing here does I/O. */
#include "session/toolkit.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "base/mem.h"
#include "session/toolkit_int.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* --- small growable buffer (sizes are bounded by the callers) --------------------------- */

static void sb_reserve(struct sbuf *b, size_t extra)
{
    GBX_BUG_ON(extra > SIZE_MAX / 4 || b->len > SIZE_MAX / 4);
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    if (cap < need)
        cap = need;
    b->p = gbx_xrealloc(b->p, cap);
    b->cap = cap;
    b->p[b->len] = '\0';
}

void gbx_tk_sb_add(struct sbuf *b, const void *p, size_t n)
{
    sb_reserve(b, n);
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_adds(struct sbuf *b, const char *s)
{
    gbx_tk_sb_add(b, s, strlen(s));
}

char *gbx_tk_sb_steal(struct sbuf *b)
{
    if (b->p == NULL)
        return gbx_xstrdup("");
    char *r = b->p;
    b->p = NULL;
    b->len = b->cap = 0;
    return r;
}

/* --- UTF-8 ------------------------------------------------------------------------------ */
/* The length (1..4) of the valid UTF-8 character at p, or 0 when p starts an invalid
 * sequence; then *bad is the maximal subpart to replace by one U+FFFD (>= 1), as the Unicode
 * standard recommends (and Python's errors="replace" does). n >= 1. */
static size_t utf8_char(const uint8_t *p, size_t n, size_t *bad)
{
    uint8_t c = p[0], lo = 0x80, hi = 0xbf;
    size_t need;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else {
        *bad = 1;
        return 0;
    }
    size_t i;
    for (i = 1; i <= need && i < n; i++) {
        uint8_t b = p[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf))
            break;
    }
    if (i > need)
        return need + 1;
    *bad = i;
    return 0;
}

static bool utf8_valid(const uint8_t *p, size_t n)
{
    size_t i = 0, bad;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = utf8_char(p + i, n - i, &bad);
        if (l == 0)
            return false;
        i += l;
    }
    return true;
}

static const char fffd[] = "\xef\xbf\xbd";

/* Append p[0..n) to b (when b is non-NULL) with invalid UTF-8 and NUL bytes replaced by
 * U+FFFD; returns the length appended. At most 3 * n bytes. */
size_t gbx_tk_sanitize(struct sbuf *b, const uint8_t *p, size_t n)
{
    size_t i = 0, out = 0, bad;
    if (b)
        sb_reserve(b, n); /* the common case: valid text */
    while (i < n) {
        size_t run = i;
        while (run < n && p[run] >= 0x01 && p[run] < 0x80)
            run++;
        if (run > i) {
            if (b)
                gbx_tk_sb_add(b, p + i, run - i);
            out += run - i;
            i = run;
            continue;
        }
        size_t l = 0;
        bad = 1; /* a NUL byte */
        if (p[i] != 0)
            l = utf8_char(p + i, n - i, &bad);
        if (l) {
            if (b)
                gbx_tk_sb_add(b, p + i, l);
            out += l;
            i += l;
        } else {
            if (b)
                gbx_tk_sb_add(b, fffd, 3);
            out += 3;
            i += bad;
        }
    }
    return out;
}

static char *sanitized_dup(const uint8_t *p, size_t n)
{
    struct sbuf b = {0};
    gbx_tk_sanitize(&b, p, n);
    return gbx_tk_sb_steal(&b);
}

/* Decode one code point for glob matching; an invalid byte becomes 0x110000 + byte (no valid
 * code point), so it still matches itself. n >= 1. */
uint32_t gbx_tk_cp_next(const uint8_t *p, size_t n, size_t *adv)
{
    size_t bad;
    size_t l = p[0] < 0x80 ? 1 : utf8_char(p, n, &bad);
    *adv = l ? l : 1;
    switch (l) {
    case 1:
        return p[0];
    case 2:
        return (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
    case 3:
        return (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
    case 4:
        return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
               (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f);
    default:
        return 0x110000u + p[0];
    }
}

/* --- inputs ----------------------------------------------------------------------------- */
static const char *const tool_names[] = {
    [GBX_TOOL_BASH] = "bash", [GBX_TOOL_READ] = "read", [GBX_TOOL_WRITE] = "write",
    [GBX_TOOL_EDIT] = "edit", [GBX_TOOL_GLOB] = "glob", [GBX_TOOL_GREP] = "grep",
};

/* The fields each tool takes, as listed in the unknown-field error */
static const char *const tool_fields[][5] = {
    [GBX_TOOL_BASH] = {"command", "restart", "timeout_ms", NULL},
    [GBX_TOOL_READ] = {"file_path", "view_range", NULL},
    [GBX_TOOL_WRITE] = {"file_path", "content", NULL},
    [GBX_TOOL_EDIT] = {"file_path", "old_string", "new_string", "replace_all", NULL},
    [GBX_TOOL_GLOB] = {"pattern", "path", NULL},
    [GBX_TOOL_GREP] = {"pattern", "path", NULL},
};

const char *gbx_tool_name(enum gbx_tool t)
{
    if ((unsigned)t >= GBX_ARRAY_SIZE(tool_names))
        return "unknown";
    return tool_names[t];
}

int gbx_tool_from_name(const char *name, enum gbx_tool *t)
{
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(tool_names); i++) {
        if (strcmp(name, tool_names[i]) == 0) {
            *t = (enum gbx_tool)i;
            return 0;
        }
    }
    return -1;
}

int gbx_tool_mutates(enum gbx_tool t)
{
    return t == GBX_TOOL_WRITE || t == GBX_TOOL_EDIT || t == GBX_TOOL_BASH;
}

static int unknown_field(enum gbx_tool t, const char *key, struct gbx_err **err)
{
    struct sbuf b = {0};
    for (const char *const *f = tool_fields[t]; *f; f++) {
        if (b.len)
            sb_adds(&b, ", ");
        sb_adds(&b, *f);
    }
    gbx_err_set(err, 0, GBX_ERR_INVALID, "%s: unknown field '%.64s' (fields: %s)", tool_names[t],
                key, b.p);
    free(b.p);
    return -1;
}

/* An optional string field: absent or null leaves *out NULL. */
static int get_string(enum gbx_tool t, const json_t *in, const char *key, size_t max,
                      bool allow_nul, const char **out, size_t *lenp, struct gbx_err **err)
{
    const json_t *v = json_object_get(in, key);
    *out = NULL;
    if (lenp)
        *lenp = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "%s: '%s' must be a string", tool_names[t],
                           key);
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len > max)
        return gbx_err_set(err, 0, GBX_ERR_LIMIT, "%s: '%s' is longer than %zu bytes",
                           tool_names[t], key, max);
    if (!allow_nul && memchr(s, '\0', len))
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "%s: '%s' must not contain NUL bytes",
                           tool_names[t], key);
    *out = s;
    if (lenp)
        *lenp = len;
    return 0;
}

static int get_required(enum gbx_tool t, const json_t *in, const char *key, size_t max,
                        const char **out, struct gbx_err **err)
{
    if (get_string(t, in, key, max, false, out, NULL, err) < 0)
        return -1;
    if (*out == NULL || **out == '\0')
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "%s: '%s' is required", tool_names[t], key);
    return 0;
}

static int get_bool(enum gbx_tool t, const json_t *in, const char *key, int *out,
                    struct gbx_err **err)
{
    const json_t *v = json_object_get(in, key);
    *out = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "%s: '%s' must be a boolean (true or false)",
                           tool_names[t], key);
    *out = json_is_true(v);
    return 0;
}

static int parse_bash(const json_t *in, struct gbx_tool_call *c, struct gbx_err **err)
{
    if (get_string(GBX_TOOL_BASH, in, "command", GBX_TOOL_COMMAND_MAX, false, &c->command, NULL,
                   err) < 0 ||
        get_bool(GBX_TOOL_BASH, in, "restart", &c->restart, err) < 0)
        return -1;
    if (c->command && c->command[0] == '\0')
        c->command = NULL;
    if (c->command == NULL && !c->restart)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "bash: 'command' is required");
    c->timeout_ms = GBX_TOOL_BASH_TIMEOUT_DEFAULT_MS;
    const json_t *v = json_object_get(in, "timeout_ms");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v))
            return gbx_err_set(err, 0, GBX_ERR_INVALID,
                               "bash: 'timeout_ms' must be an integer (milliseconds)");
        json_int_t ms = json_integer_value(v);
        if (ms < 0 || ms > GBX_TOOL_BASH_TIMEOUT_MAX_MS)
            return gbx_err_set(err, 0, GBX_ERR_INVALID,
                               "bash: 'timeout_ms' must be between 0 and %d (0: the default %d)",
                               GBX_TOOL_BASH_TIMEOUT_MAX_MS, GBX_TOOL_BASH_TIMEOUT_DEFAULT_MS);
        if (ms > 0)
            c->timeout_ms = ms;
    }
    return 0;
}

static int parse_read(const json_t *in, struct gbx_tool_call *c, struct gbx_err **err)
{
    if (get_required(GBX_TOOL_READ, in, "file_path", GBX_TOOL_PATH_MAX, &c->file_path, err) < 0)
        return -1;
    const json_t *v = json_object_get(in, "view_range");
    if (v == NULL || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
        return 0;
    const json_t *a = json_array_get(v, 0), *b = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(a) || !json_is_integer(b))
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "read: 'view_range' must be [start_line, end_line] (two integers, "
                           "1-based, end_line -1 for the end of the file)");
    const char *kind, *media;
    if (gbx_tool_read_kind(c->file_path, &kind, &media))
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "read: 'view_range' cannot be used with image or PDF files");
    c->has_view = 1;
    c->view_start = json_integer_value(a);
    c->view_end = json_integer_value(b);
    if (c->view_start < 1)
        c->view_start = 1;
    return 0;
}

static int parse_edit(const json_t *in, struct gbx_tool_call *c, struct gbx_err **err)
{
    if (get_required(GBX_TOOL_EDIT, in, "file_path", GBX_TOOL_PATH_MAX, &c->file_path, err) < 0 ||
        get_string(GBX_TOOL_EDIT, in, "old_string", GBX_TOOL_EDIT_STRING_MAX, false, &c->old_string,
                   NULL, err) < 0 ||
        get_string(GBX_TOOL_EDIT, in, "new_string", GBX_TOOL_EDIT_STRING_MAX, false, &c->new_string,
                   NULL, err) < 0 ||
        get_bool(GBX_TOOL_EDIT, in, "replace_all", &c->replace_all, err) < 0)
        return -1;
    if (c->old_string == NULL)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "edit: 'old_string' is required");
    if (c->old_string[0] == '\0')
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "edit: 'old_string' must not be empty (use write to create a file)");
    if (c->new_string == NULL)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "edit: 'new_string' is required");
    return 0;
}

static int parse_search(enum gbx_tool t, const json_t *in, struct gbx_tool_call *c,
                        struct gbx_err **err)
{
    size_t max = t == GBX_TOOL_GLOB ? GBX_TOOL_GLOB_PATTERN_MAX : GBX_TOOL_GREP_PATTERN_MAX;
    if (get_required(t, in, "pattern", max, &c->pattern, err) < 0 ||
        get_string(t, in, "path", GBX_TOOL_PATH_MAX, false, &c->path, NULL, err) < 0)
        return -1;
    if (c->path && c->path[0] == '\0')
        c->path = NULL;
    if (t == GBX_TOOL_GLOB && gbx_tool_glob_check(c->pattern, err) < 0)
        return -1;
    return 0;
}

int gbx_tool_parse(const char *name, const json_t *input, struct gbx_tool_call *out,
                   struct gbx_err **err)
{
    enum gbx_tool t;
    memset(out, 0, sizeof(*out));
    if (gbx_tool_from_name(name, &t) < 0)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "unknown tool '%.64s'", name ? name : "");
    out->tool = t;
    if (!json_is_object(input))
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "%s: input must be a JSON object",
                           tool_names[t]);
    /* json_object_iter takes a non-const object but only reads it */
    json_t *obj = (json_t *)(uintptr_t)input;
    for (void *it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
        const char *key = json_object_iter_key(it);
        bool known = false;
        for (const char *const *f = tool_fields[t]; *f && !known; f++)
            known = strcmp(key, *f) == 0;
        if (!known)
            return unknown_field(t, key, err);
    }
    int r;
    switch (t) {
    case GBX_TOOL_BASH:
        r = parse_bash(input, out, err);
        break;
    case GBX_TOOL_READ:
        r = parse_read(input, out, err);
        break;
    case GBX_TOOL_WRITE:
        r = get_required(t, input, "file_path", GBX_TOOL_PATH_MAX, &out->file_path, err);
        if (r == 0)
            r = get_string(t, input, "content", GBX_TOOL_CONTENT_MAX, true, &out->content,
                           &out->content_len, err);
        if (r == 0 && out->content == NULL)
            r = gbx_err_set(err, 0, GBX_ERR_INVALID, "write: 'content' is required");
        break;
    case GBX_TOOL_EDIT:
        r = parse_edit(input, out, err);
        break;
    default:
        r = parse_search(t, input, out, err);
        break;
    }
    if (r < 0) {
        memset(out, 0, sizeof(*out));
        out->tool = t;
    }
    return r;
}

/* --- paths ------------------------------------------------------------------------------ */
/* Append the segments of s to the normalized absolute path out[0..n) ("/" or "/a/b", no
 * trailing slash); returns the new length. Amortized O(strlen(s)): ".." only removes what an
 * earlier segment added. out has room for n + strlen(s) + 1 more bytes. */
static size_t push_norm(char *out, size_t n, const char *s)
{
    while (*s) {
        while (*s == '/')
            s++;
        const char *e = s;
        while (*e && *e != '/')
            e++;
        size_t l = (size_t)(e - s);
        if (l == 0 || (l == 1 && s[0] == '.')) {
            /* nothing */
        } else if (l == 2 && s[0] == '.' && s[1] == '.') {
            while (n > 1 && out[n - 1] != '/')
                n--;
            if (n > 1)
                n--;
        } else {
            if (n > 1)
                out[n++] = '/';
            memcpy(out + n, s, l);
            n += l;
        }
        s = e;
    }
    return n;
}

char *gbx_tool_path_join(const char *workdir, const char *path)
{
    if (workdir == NULL)
        workdir = "/";
    size_t wl = strlen(workdir), pl = path ? strlen(path) : 0;
    GBX_BUG_ON(wl > SIZE_MAX / 4 || pl > SIZE_MAX / 4);
    char *out = gbx_xmalloc(wl + pl + 3);
    size_t n = 0;
    out[n++] = '/';
    if (path == NULL || path[0] != '/')
        n = push_norm(out, n, workdir);
    if (path)
        n = push_norm(out, n, path);
    out[n] = '\0';
    return out;
}

int gbx_tool_path_inside(const char *root, const char *resolved)
{
    if (root == NULL || resolved == NULL || root[0] != '/' || resolved[0] != '/')
        return 0;
    gbx_autofree char *r = gbx_tool_path_join(NULL, root);
    gbx_autofree char *p = gbx_tool_path_join(NULL, resolved);
    size_t rl = strlen(r);
    if (rl == 1)
        return 1; /* root "/" */
    return strncmp(p, r, rl) == 0 && (p[rl] == '\0' || p[rl] == '/');
}

/* --- read ------------------------------------------------------------------------------- */
static const char *fp(const struct gbx_tool_call *c)
{
    return c->file_path ? c->file_path : "(no path)";
}

int gbx_tool_read_kind(const char *path, const char **kind, const char **media_type)
{
    static const struct {
        const char *ext, *kind, *media;
    } kinds[] = {
        {"png", "image", "image/png"},   {"jpg", "image", "image/jpeg"},
        {"jpeg", "image", "image/jpeg"}, {"gif", "image", "image/gif"},
        {"webp", "image", "image/webp"}, {"pdf", "document", "application/pdf"},
    };
    if (path == NULL)
        return 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    if (dot == NULL || dot == base) /* no extension, or a dotfile like ".png" */
        return 0;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(kinds); i++) {
        if (strcasecmp(dot + 1, kinds[i].ext) == 0) {
            if (kind)
                *kind = kinds[i].kind;
            if (media_type)
                *media_type = kinds[i].media;
            return 1;
        }
    }
    return 0;
}

/* The largest input whose base64 text fits in b64max bytes (b64max a multiple of 4) */
#define B64_RAW_MAX(b64max) ((uint64_t)(b64max) / 4 * 3)

int gbx_tool_size_check(const struct gbx_tool_call *c, uint64_t size, struct gbx_err **err)
{
    const char *kind, *media;
    if (c->tool == GBX_TOOL_EDIT) {
        if (size > GBX_TOOL_TEXT_MAX)
            return gbx_err_set(err, 0, GBX_ERR_LIMIT,
                               "edit: %s is %llu bytes, exceeds %d-byte limit. Use bash "
                               "(sed/awk) to edit a large file.",
                               fp(c), (unsigned long long)size, GBX_TOOL_TEXT_MAX);
        return 0;
    }
    if (c->tool != GBX_TOOL_READ)
        return 0;
    if (!gbx_tool_read_kind(c->file_path, &kind, &media)) {
        if (size > GBX_TOOL_TEXT_MAX)
            return gbx_err_set(err, 0, GBX_ERR_LIMIT,
                               "read: %s is %llu bytes, exceeds %d-byte limit. Use bash "
                               "(head/tail/sed) to read a slice.",
                               fp(c), (unsigned long long)size, GBX_TOOL_TEXT_MAX);
        return 0;
    }
    if (strcmp(kind, "image") == 0) {
        if (size > B64_RAW_MAX(GBX_TOOL_IMAGE_B64_MAX))
            return gbx_err_set(err, 0, GBX_ERR_LIMIT,
                               "read: %s is %llu bytes, exceeds %llu-byte limit for images (5 "
                               "MiB as base64). Use bash to make a smaller copy.",
                               fp(c), (unsigned long long)size,
                               (unsigned long long)B64_RAW_MAX(GBX_TOOL_IMAGE_B64_MAX));
        return 0;
    }
    if (size > B64_RAW_MAX(GBX_TOOL_DOCUMENT_B64_MAX))
        return gbx_err_set(err, 0, GBX_ERR_LIMIT,
                           "read: %s is %llu bytes, exceeds %llu-byte limit for PDFs (20 MiB "
                           "as base64). Use bash to split it or extract its text.",
                           fp(c), (unsigned long long)size,
                           (unsigned long long)B64_RAW_MAX(GBX_TOOL_DOCUMENT_B64_MAX));
    return 0;
}

int gbx_tool_read_text(const struct gbx_tool_call *c, const uint8_t *data, size_t len, char **text,
                       struct gbx_err **err)
{
    *text = NULL;
    GBX_BUG_ON(data == NULL && len > 0);
    if (gbx_tool_read_kind(c->file_path, NULL, NULL))
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "read: %s is an image or PDF file, returned as a content block", fp(c));
    struct gbx_tool_call textcall = *c;
    textcall.tool = GBX_TOOL_READ;
    if (gbx_tool_size_check(&textcall, len, err) < 0)
        return -1;
    if ((len && memchr(data, '\0', len)) || !utf8_valid(data, len))
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "read: %s is not UTF-8 text; use bash to inspect it", fp(c));
    size_t from = 0, to = len;
    if (c->has_view) {
        size_t nl = 0;
        for (const uint8_t *q = data; len && (q = memchr(q, '\n', len - (size_t)(q - data))); q++)
            nl++;
        size_t lines = nl + (len > 0 && data[len - 1] != '\n');
        int64_t start = c->view_start < 1 ? 1 : c->view_start, end = c->view_end;
        if ((uint64_t)start > (lines ? lines : 1))
            return gbx_err_set(err, 0, GBX_ERR_INVALID,
                               "read: view_range starts at line %lld but %s has %zu line%s",
                               (long long)start, fp(c), lines, lines == 1 ? "" : "s");
        if (end > 0 && end < start)
            return gbx_err_set(err, 0, GBX_ERR_INVALID,
                               "read: view_range end_line %lld is before start_line %lld",
                               (long long)end, (long long)start);
        /* from: after the (start-1)th newline; to: at the end-th newline, unless the range
         * runs to the end of the file (then the file's own final newline is kept, as the
         * reference's split/join does) */
        size_t seen = 0;
        for (size_t i = 0; i < len && seen < (uint64_t)start - 1; i++) {
            if (data[i] == '\n' && ++seen == (uint64_t)start - 1)
                from = i + 1;
        }
        if (end > 0 && (uint64_t)end <= nl) {
            seen = 0;
            for (size_t i = 0; i < len; i++) {
                if (data[i] == '\n' && ++seen == (uint64_t)end) {
                    to = i;
                    break;
                }
            }
        }
    }
    *text = len ? gbx_xstrndup((const char *)data + from, to - from) : gbx_xstrdup("");
    return 0;
}

static void b64_encode(const uint8_t *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i = 0, o = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63];
        out[o++] = tab[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
}

/* The image type the bytes are, whatever the extension said, or NULL */
static const char *sniff_image(const uint8_t *d, size_t n)
{
    if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return "image/png";
    if (n >= 3 && memcmp(d, "\xff\xd8\xff", 3) == 0)
        return "image/jpeg";
    if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return "image/gif";
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return "image/webp";
    return NULL;
}

json_t *gbx_tool_read_block(const char *kind, const char *media_type, const uint8_t *data,
                            size_t len, struct gbx_err **err)
{
    if (kind == NULL || media_type == NULL || (data == NULL && len > 0)) {
        gbx_err_set(err, 0, GBX_ERR_INTERNAL, "read: no block kind");
        return NULL;
    }
    if (strcmp(kind, "image") == 0) {
        if (strcmp(media_type, "image/png") != 0 && strcmp(media_type, "image/jpeg") != 0 &&
            strcmp(media_type, "image/gif") != 0 && strcmp(media_type, "image/webp") != 0) {
            gbx_err_set(err, 0, GBX_ERR_INVALID, "read: unsupported image type '%.64s'",
                        media_type);
            return NULL;
        }
        if (len > B64_RAW_MAX(GBX_TOOL_IMAGE_B64_MAX)) {
            gbx_err_set(err, 0, GBX_ERR_LIMIT,
                        "read: the image is %zu bytes, exceeds %llu-byte limit for images (5 "
                        "MiB as base64). Use bash to make a smaller copy.",
                        len, (unsigned long long)B64_RAW_MAX(GBX_TOOL_IMAGE_B64_MAX));
            return NULL;
        }
        media_type = sniff_image(data, len);
        if (media_type == NULL) {
            gbx_err_set(err, 0, GBX_ERR_INVALID,
                        "read: the file is not a PNG, JPEG, GIF or WebP image (its bytes do "
                        "not match); use bash to inspect it");
            return NULL;
        }
    } else if (strcmp(kind, "document") == 0) {
        if (strcmp(media_type, "application/pdf") != 0) {
            gbx_err_set(err, 0, GBX_ERR_INVALID, "read: unsupported document type '%.64s'",
                        media_type);
            return NULL;
        }
        if (len > B64_RAW_MAX(GBX_TOOL_DOCUMENT_B64_MAX)) {
            gbx_err_set(err, 0, GBX_ERR_LIMIT,
                        "read: the PDF is %zu bytes, exceeds %llu-byte limit for PDFs (20 MiB "
                        "as base64). Use bash to split it or extract its text.",
                        len, (unsigned long long)B64_RAW_MAX(GBX_TOOL_DOCUMENT_B64_MAX));
            return NULL;
        }
        if (len < 5 || memmem(data, MIN(len, 1024), "%PDF-", 5) == NULL) {
            gbx_err_set(err, 0, GBX_ERR_INVALID,
                        "read: the file is not a PDF (no %%PDF- header); use bash to inspect it");
            return NULL;
        }
    } else {
        gbx_err_set(err, 0, GBX_ERR_INVALID, "read: unknown block kind '%.64s'", kind);
        return NULL;
    }
    size_t b64len = (len + 2) / 3 * 4;
    char *b64 = gbx_xmalloc(b64len + 1);
    b64_encode(data, len, b64);
    json_t *source = json_object();
    json_object_set_new(source, "type", json_string("base64"));
    json_object_set_new(source, "media_type", json_string(media_type));
    json_object_set_new(source, "data", json_stringn_nocheck(b64, b64len));
    free(b64);
    json_t *block = json_object();
    json_object_set_new(block, "type", json_string(kind));
    json_object_set_new(block, "source", source);
    return block;
}

/* --- edit ------------------------------------------------------------------------------- */
/* Knuth-Morris-Pratt: O(n + m) whatever the text, unlike a naive search. fail has m slots. */
static void kmp_init(const uint8_t *pat, size_t m, size_t *fail)
{
    fail[0] = 0;
    for (size_t i = 1, k = 0; i < m; i++) {
        while (k > 0 && pat[i] != pat[k])
            k = fail[k - 1];
        if (pat[i] == pat[k])
            k++;
        fail[i] = k;
    }
}

/* Leftmost non-overlapping occurrences, as Python's str.count/replace, up to limit; with e,
 * also writes the text up to each one and its replacement to e->out. Returns the count. */
struct kmp_emit {
    struct sbuf *out;
    size_t last; /* end of the previous occurrence */
    const char *repl;
    size_t repl_len;
};

static size_t kmp_scan(const uint8_t *d, size_t n, const uint8_t *pat, size_t m, const size_t *fail,
                       size_t limit, struct kmp_emit *e)
{
    size_t count = 0;
    for (size_t i = 0, k = 0; i < n && count < limit; i++) {
        while (k > 0 && d[i] != pat[k])
            k = fail[k - 1];
        if (d[i] == pat[k])
            k++;
        if (k == m) {
            count++;
            k = 0; /* non-overlapping: the next occurrence starts after this one */
            if (e) {
                size_t pos = i + 1 - m;
                gbx_tk_sb_add(e->out, d + e->last, pos - e->last);
                gbx_tk_sb_add(e->out, e->repl, e->repl_len);
                e->last = i + 1;
            }
        }
    }
    return count;
}

int gbx_tool_edit_apply(const struct gbx_tool_call *c, const uint8_t *data, size_t len, char **out,
                        size_t *outlen, size_t *count, struct gbx_err **err)
{
    *out = NULL;
    *outlen = 0;
    *count = 0;
    GBX_BUG_ON(data == NULL && len > 0);
    const char *old = c->old_string, *repl = c->new_string ? c->new_string : "";
    if (old == NULL || old[0] == '\0')
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "edit: 'old_string' must not be empty (use write to create a file)");
    size_t m = strlen(old), rl = strlen(repl), n = 0;
    if (!utf8_valid((const uint8_t *)old, m) || !utf8_valid((const uint8_t *)repl, rl))
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "edit: 'old_string' and 'new_string' must be UTF-8 text");
    struct gbx_tool_call editcall = *c;
    editcall.tool = GBX_TOOL_EDIT;
    if (gbx_tool_size_check(&editcall, len, err) < 0)
        return -1;
    if (!utf8_valid(data, len))
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "edit: %s is not UTF-8 text; use bash to edit it", fp(c));
    if (m <= len) {
        size_t *fail = gbx_xcalloc(m, sizeof(*fail));
        kmp_init((const uint8_t *)old, m, fail);
        n = kmp_scan(data, len, (const uint8_t *)old, m, fail, SIZE_MAX, NULL);
        free(fail);
    }
    if (n == 0)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "edit: old_string not found in %s", fp(c));
    if (n > 1 && !c->replace_all)
        return gbx_err_set(err, 0, GBX_ERR_INVALID,
                           "edit: old_string appears %zu times in %s (must be unique)", n, fp(c));
    size_t reps = c->replace_all ? n : 1;
    /* n <= len <= 256 KiB and m, rl <= 256 KiB (m <= len): no overflow in 64 bits */
    uint64_t size = (uint64_t)len - (uint64_t)reps * m + (uint64_t)reps * rl;
    if (size > GBX_TOOL_TEXT_MAX)
        return gbx_err_set(err, 0, GBX_ERR_LIMIT,
                           "edit: the result would be %llu bytes, exceeds %d-byte limit. Use "
                           "bash to edit a large file.",
                           (unsigned long long)size, GBX_TOOL_TEXT_MAX);
    struct sbuf b = {0};
    sb_reserve(&b, (size_t)size);
    struct kmp_emit e = {.out = &b, .repl = repl, .repl_len = rl};
    size_t *fail = gbx_xcalloc(m, sizeof(*fail));
    kmp_init((const uint8_t *)old, m, fail);
    size_t done = kmp_scan(data, len, (const uint8_t *)old, m, fail, reps, &e);
    free(fail);
    GBX_BUG_ON(done != reps);
    gbx_tk_sb_add(&b, data + e.last, len - e.last);
    GBX_BUG_ON(b.len != size);
    *outlen = b.len;
    *count = reps;
    *out = gbx_tk_sb_steal(&b);
    return 0;
}

char *gbx_tool_edit_result(const char *path, size_t count)
{
    return gbx_asprintf("edited %s (%zu replacement(s))", path ? path : "", count);
}

char *gbx_tool_write_result(const char *path, size_t bytes)
{
    return gbx_asprintf("wrote %zu bytes to %s", bytes, path ? path : "");
}

/* --- bash ------------------------------------------------------------------------------- */
#define SENT_PREFIX_LEN 24 /* "\n__GBX_" + 16 hex + "_" */
#define SENT_MAX (SENT_PREFIX_LEN + 3 + 3)
/* the buffer keeps the output cap plus room for the sentinel */
#define BASH_KEEP ((size_t)GBX_TOOL_OUTPUT_MAX + 64)

static bool nonce_ok(const char *nonce)
{
    if (nonce == NULL)
        return false;
    for (int i = 0; i < 16; i++) {
        char ch = nonce[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return false;
    }
    return nonce[16] == '\0';
}

char *gbx_tool_bash_script(const char *command, const char nonce[17])
{
    GBX_BUG_ON(!nonce_ok(nonce));
    if (command == NULL)
        return NULL;
    size_t len = strlen(command), quotes = 0;
    if (len > GBX_TOOL_COMMAND_MAX)
        return NULL;
    for (size_t i = 0; i < len; i++)
        quotes += command[i] == '\'';
    static const char head[] = "eval -- '";
    static const char mid[] = "' </dev/null 2>&1; builtin printf '\\n__GBX_''";
    static const char tail[] = "_%d__\\n' \"$?\"\n";
    struct sbuf b = {0};
    sb_reserve(&b, sizeof(head) + len + 3 * quotes + sizeof(mid) + 16 + sizeof(tail));
    gbx_tk_sb_add(&b, head, sizeof(head) - 1);
    for (const char *s = command; *s;) {
        const char *q = strchr(s, '\'');
        size_t l = q ? (size_t)(q - s) : strlen(s);
        gbx_tk_sb_add(&b, s, l);
        if (q == NULL)
            break;
        gbx_tk_sb_add(&b, "'\\''", 4); /* close, escaped quote, reopen */
        s = q + 1;
    }
    gbx_tk_sb_add(&b, mid, sizeof(mid) - 1);
    gbx_tk_sb_add(&b, nonce, 16);
    gbx_tk_sb_add(&b, tail, sizeof(tail) - 1);
    return gbx_tk_sb_steal(&b);
}

struct gbx_tool_bash_out {
    uint8_t prefix[SENT_PREFIX_LEN];
    size_t pos; /* bytes of prefix matched */
    int phase;  /* 0: prefix, 1: digits, 2: one '_' after them, 3: two */
    int ndigits, value;
    bool done;
    int status;
    size_t sent_len; /* the sentinel's length, once done */
    uint8_t *buf;    /* the last BASH_KEEP bytes fed, at buf[off..off+len) */
    size_t off, len, cap;
    uint64_t total; /* bytes fed up to the sentinel's end */
};

struct gbx_tool_bash_out *gbx_tool_bash_out_new(const char nonce[17])
{
    GBX_BUG_ON(!nonce_ok(nonce));
    struct gbx_tool_bash_out *o = gbx_xcalloc(1, sizeof(*o));
    memcpy(o->prefix, "\n__GBX_", 7);
    memcpy(o->prefix + 7, nonce, 16);
    o->prefix[23] = '_';
    return o;
}

void gbx_tool_bash_out_free(struct gbx_tool_bash_out *o)
{
    if (o == NULL)
        return;
    free(o->buf);
    free(o);
}

/* One byte of the sentinel matcher; 1 when it completes the sentinel line. The prefix holds
 * '\n' only at its start and the rest of the line holds none, so after a mismatch the only
 * place a new sentinel can start is the mismatching byte itself: no backtracking. */
static int sent_step(struct gbx_tool_bash_out *o, uint8_t c)
{
    for (;;) {
        switch (o->phase) {
        case 0:
            if (c == o->prefix[o->pos]) {
                if (++o->pos == SENT_PREFIX_LEN) {
                    o->phase = 1;
                    o->ndigits = 0;
                    o->value = 0;
                }
            } else {
                o->pos = c == '\n';
            }
            return 0;
        case 1:
            if (c >= '0' && c <= '9' && o->ndigits < 3) {
                o->ndigits++;
                o->value = o->value * 10 + (c - '0');
                return 0;
            }
            if (c == '_' && o->ndigits > 0) {
                o->phase = 2;
                return 0;
            }
            break;
        case 2:
            if (c == '_') {
                o->phase = 3;
                return 0;
            }
            break;
        default:
            if (c == '\n') {
                o->sent_len = SENT_PREFIX_LEN + (size_t)o->ndigits + 3;
                return 1;
            }
            break;
        }
        o->phase = 0;
        o->pos = 0;
    }
}

/* Keep the last BASH_KEEP bytes. Amortized O(n): a compaction moves at most half the buffer
 * and happens only after that many bytes were appended. */
static void out_append(struct gbx_tool_bash_out *o, const uint8_t *p, size_t n)
{
    if (n == 0)
        return;
    o->total += n;
    if (n >= BASH_KEEP) {
        p += n - BASH_KEEP;
        n = BASH_KEEP;
        o->off = o->len = 0;
    } else if (o->len + n > BASH_KEEP) {
        size_t drop = o->len + n - BASH_KEEP;
        o->off += drop;
        o->len -= drop;
    }
    size_t need = o->len + n;
    if (o->off + need > o->cap) {
        if (o->off) {
            memmove(o->buf, o->buf + o->off, o->len);
            o->off = 0;
        }
        if (need > o->cap / 2 && o->cap < 2 * BASH_KEEP) {
            size_t cap = need * 2 < 4096 ? 4096 : need * 2;
            if (cap > 2 * BASH_KEEP)
                cap = 2 * BASH_KEEP;
            o->buf = gbx_xrealloc(o->buf, cap);
            o->cap = cap;
        }
    }
    memcpy(o->buf + o->off + o->len, p, n);
    o->len += n;
}

int gbx_tool_bash_out_feed(struct gbx_tool_bash_out *o, const uint8_t *p, size_t n, int *status)
{
    GBX_BUG_ON(p == NULL && n > 0);
    if (o->done) {
        if (status)
            *status = o->status;
        return 1;
    }
    size_t k = n;
    for (size_t i = 0; i < n; i++) {
        if (sent_step(o, p[i])) {
            o->done = true;
            o->status = o->value;
            k = i + 1;
            break;
        }
    }
    out_append(o, p, k);
    if (o->done && status)
        *status = o->status;
    return o->done;
}

int gbx_tool_bash_out_truncated(const struct gbx_tool_bash_out *o)
{
    uint64_t payload = o->total - (o->done ? o->sent_len : 0);
    return payload > GBX_TOOL_OUTPUT_MAX;
}

/* Remove ANSI escapes: CSI (ESC [ params intermediates final), OSC (ESC ] ... BEL or ESC \),
 * nF (ESC intermediates final) and lone ESC x. An unterminated CSI or OSC loses only its
 * introducer. O(n): an OSC search that finds no terminator is not repeated. */
static size_t strip_ansi(const uint8_t *p, size_t n, uint8_t *out)
{
    size_t i = 0, o = 0;
    bool osc_open = true; /* an OSC terminator may still follow */
    while (i < n) {
        if (p[i] != 0x1b) {
            out[o++] = p[i++];
            continue;
        }
        if (i + 1 >= n) {
            i++;
            continue;
        }
        uint8_t c2 = p[i + 1];
        size_t j = i + 2;
        if (c2 == '[') {
            while (j < n && p[j] >= 0x30 && p[j] <= 0x3f)
                j++;
            while (j < n && p[j] >= 0x20 && p[j] <= 0x2f)
                j++;
            i = (j < n && p[j] >= 0x40 && p[j] <= 0x7e) ? j + 1 : i + 2;
        } else if (c2 == ']') {
            size_t end = 0;
            for (; osc_open && j < n; j++) {
                if (p[j] == 0x07) {
                    end = j + 1;
                    break;
                }
                if (p[j] == 0x1b && j + 1 < n && p[j + 1] == '\\') {
                    end = j + 2;
                    break;
                }
            }
            if (end == 0)
                osc_open = false;
            i = end ? end : i + 2;
        } else if (c2 >= 0x20 && c2 <= 0x2f) {
            j = i + 1;
            while (j < n && p[j] >= 0x20 && p[j] <= 0x2f)
                j++;
            i = (j < n && p[j] >= 0x30 && p[j] <= 0x7e) ? j + 1 : i + 2;
        } else if (c2 >= 0x30 && c2 <= 0x7e) {
            i += 2;
        } else {
            i++;
        }
    }
    return o;
}

char *gbx_tool_bash_out_text(struct gbx_tool_bash_out *o)
{
    size_t inbuf = o->len - (o->done ? o->sent_len : 0);
    size_t keep = MIN(inbuf, (size_t)GBX_TOOL_OUTPUT_MAX);
    const uint8_t *p = o->len ? o->buf + o->off + (inbuf - keep) : (const uint8_t *)"";
    bool truncated = gbx_tool_bash_out_truncated(o);
    if (truncated) {
        /* drop the tail of a character the cut split */
        for (int i = 0; i < 3 && keep > 0 && (*p & 0xc0) == 0x80; i++) {
            p++;
            keep--;
        }
    }
    uint8_t *plain = gbx_xmalloc(keep + 1);
    size_t pl = strip_ansi(p, keep, plain);
    while (pl > 0 && plain[pl - 1] == '\n')
        pl--;
    struct sbuf b = {0};
    if (truncated)
        sb_adds(&b, "[output truncated]\n");
    gbx_tk_sanitize(&b, plain, pl);
    free(plain);
    return gbx_tk_sb_steal(&b);
}

json_t *gbx_tool_bash_result(struct gbx_tool_bash_out *o, int status)
{
    char *text = gbx_tool_bash_out_text(o);
    if (status != 0 && text[0] == '\0') {
        free(text);
        text = gbx_asprintf("exit %d", status);
    }
    json_t *r = gbx_tool_result_text(text, status != 0);
    free(text);
    return r;
}

/* --- grep ------------------------------------------------------------------------------- */
/* Where the text starts after "path:lineno:" (the first ":digits:"), or 0 */
static size_t grep_prefix(const uint8_t *l, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        if (l[j] != ':')
            continue;
        size_t k = j + 1;
        while (k < n && l[k] >= '0' && l[k] <= '9')
            k++;
        if (k > j + 1 && k < n && l[k] == ':')
            return k + 1;
        j = k - 1; /* resume at k: the digits hold no ':' */
    }
    return 0;
}

char *gbx_tool_grep_result(const uint8_t *raw, size_t len)
{
    GBX_BUG_ON(raw == NULL && len > 0);
    struct sbuf b = {0};
    size_t used = 0, kept = 0, omitted = 0, pos = 0;
    bool truncated = false;
    while (pos < len) {
        const uint8_t *line = raw + pos;
        const uint8_t *eol = memchr(line, '\n', len - pos);
        size_t ll = eol ? (size_t)(eol - line) : len - pos;
        pos += ll + (eol != NULL);
        if (ll > 0 && line[ll - 1] == '\r')
            ll--;
        if (ll == 0)
            continue;
        if (ll - grep_prefix(line, ll) > GBX_TOOL_GREP_LINE_MAX) {
            omitted++;
            continue;
        }
        if (truncated)
            continue;
        size_t sl = gbx_tk_sanitize(NULL, line, ll);
        if (used + sl + 1 > GBX_TOOL_OUTPUT_MAX) {
            truncated = true;
            continue;
        }
        if (kept++)
            gbx_tk_sb_add(&b, "\n", 1);
        gbx_tk_sanitize(&b, line, ll);
        used += sl + 1;
    }
    if (!kept && !truncated && !omitted)
        return gbx_xstrdup("no matches");
    if (truncated) {
        if (b.len)
            gbx_tk_sb_add(&b, "\n", 1);
        sb_adds(&b, GBX_TOOL_GREP_TRUNCATED);
    }
    if (omitted) {
        char note[96];
        snprintf(note, sizeof(note), "[%zu matching line%s longer than %d bytes omitted]", omitted,
                 omitted == 1 ? "" : "s", GBX_TOOL_GREP_LINE_MAX);
        if (b.len)
            gbx_tk_sb_add(&b, "\n", 1);
        sb_adds(&b, note);
    }
    return gbx_tk_sb_steal(&b);
}

/* --- results ---------------------------------------------------------------------------- */
json_t *gbx_tool_result_text(const char *text, int is_error)
{
    if (text == NULL || text[0] == '\0')
        text = "(no output)";
    char *clean = sanitized_dup((const uint8_t *)text, strlen(text));
    json_t *block = json_object();
    json_object_set_new(block, "type", json_string("text"));
    json_object_set_new(block, "text", json_string_nocheck(clean));
    free(clean);
    json_t *content = json_array();
    json_array_append_new(content, block);
    json_t *r = json_object();
    json_object_set_new(r, "content", content);
    json_object_set_new(r, "is_error", json_boolean(is_error));
    return r;
}

json_t *gbx_tool_result_block(json_t *block)
{
    json_t *content = json_array();
    json_array_append_new(content, block);
    json_t *r = json_object();
    json_object_set_new(r, "content", content);
    json_object_set_new(r, "is_error", json_false());
    return r;
}
