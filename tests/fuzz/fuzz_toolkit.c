/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the agent toolset's pure parts (src/session/toolkit.c). Every input
 * goes through each of them, and each result is checked against a slow reference written
 * here, independently:
 *   - bash output framing, fed in pseudo-random chunks: done and status agree with a naive
 *     search for the earliest-ending sentinel, the text equals what the bytes before it give,
 *     and the text is valid UTF-8 without NUL or ESC;
 *   - edit: the count and the result agree with a naive non-overlapping replace;
 *   - read: the slice agrees with Python's split("\n")[start-1:end] join;
 *   - glob: on the patterns fnmatch(3) understands the same way, the two agree;
 *   - grep results and joined paths keep their shape;
 *   - parse: any JSON either fails with a message or gives a call that keeps its promises. */
#include <fnmatch.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "session/toolkit.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char nonce[17] = "0123456789abcdef";

/* Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF), written apart from
 * the one under test */
static bool valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t c = s[i], cp;
        size_t l;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            l = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            l = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            l = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + l > n)
            return false;
        for (size_t k = 1; k < l; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[l] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += l;
    }
    return true;
}

static uint64_t rng_state;

static uint32_t rng(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

/* --- bash output ---------------------------------------------------------------------- */
/* The end of the earliest-ending sentinel "\n__GBX_<nonce>_<1-3 digits>__\n", with its start
 * and status, or 0 */
static size_t find_sentinel(const uint8_t *d, size_t n, size_t *start, int *status)
{
    char prefix[32];
    memcpy(prefix, "\n__GBX_", 7);
    memcpy(prefix + 7, nonce, 16);
    prefix[23] = '_';
    size_t best = 0;
    for (size_t s = 0; s + 24 <= n; s++) {
        if (memcmp(d + s, prefix, 24) != 0)
            continue;
        size_t j = s + 24, v = 0, nd = 0;
        while (j < n && nd < 3 && d[j] >= '0' && d[j] <= '9') {
            v = v * 10 + (d[j] - '0');
            j++;
            nd++;
        }
        if (nd == 0 || j + 3 > n || memcmp(d + j, "__\n", 3) != 0)
            continue;
        size_t end = j + 3;
        if (best == 0 || end < best) {
            best = end;
            *start = s;
            *status = (int)v;
        }
    }
    return best;
}

static char *feed_chunks(const uint8_t *d, size_t n, int *done, int *status)
{
    struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonce);
    size_t pos = 0;
    *done = 0;
    while (pos < n) {
        size_t k = rng() % 4 == 0 ? n - pos : 1 + rng() % 64;
        if (k > n - pos)
            k = n - pos;
        int r = gbx_tool_bash_out_feed(o, d + pos, k, status);
        CHECK(r == 0 || r == 1);
        CHECK(!*done || r == 1); /* once done, always done */
        *done = r;
        pos += k;
    }
    char *t = gbx_tool_bash_out_text(o);
    gbx_tool_bash_out_free(o);
    return t;
}

static void check_text(const char *t)
{
    size_t l = strlen(t);
    CHECK(valid_utf8((const uint8_t *)t, l));
    CHECK(memchr(t, 0x1b, l) == NULL);
    CHECK(l <= 19 + 3 * (size_t)GBX_TOOL_OUTPUT_MAX);
    CHECK(l == 0 || t[l - 1] != '\n' || strcmp(t, "[output truncated]\n") == 0);
}

static void fuzz_bash(const uint8_t *d, size_t n)
{
    size_t start = 0;
    int want_status = -1, done, status = -1;
    size_t end = find_sentinel(d, n, &start, &want_status);
    char *t = feed_chunks(d, n, &done, &status);
    check_text(t);
    CHECK(done == (end != 0));
    if (done) {
        CHECK(status == want_status);
        /* the text is what the bytes before the sentinel give */
        int done2, status2;
        char *t2 = feed_chunks(d, start, &done2, &status2);
        CHECK(!done2);
        CHECK(strcmp(t, t2) == 0);
        free(t2);
    }
    free(t);
}

/* --- edit ----------------------------------------------------------------------------- */
static size_t naive_count(const uint8_t *d, size_t n, const char *old, size_t m)
{
    size_t c = 0;
    for (size_t i = 0; i + m <= n;) {
        if (memcmp(d + i, old, m) == 0) {
            c++;
            i += m;
        } else {
            i++;
        }
    }
    return c;
}

static void fuzz_edit(const uint8_t *d, size_t n)
{
    if (n < 3)
        return;
    int all = d[0] & 1;
    size_t ol = d[1] % 16, nl = d[2] % 16;
    d += 3;
    n -= 3;
    if (ol + nl > n)
        return;
    char *old = strndup((const char *)d, ol), *repl = strndup((const char *)d + ol, nl);
    const uint8_t *file = d + ol + nl;
    size_t fl = n - ol - nl;
    struct gbx_tool_call c = {.tool = GBX_TOOL_EDIT,
                              .file_path = "f",
                              .old_string = old,
                              .new_string = repl,
                              .replace_all = all};
    struct gbx_err *err = NULL;
    char *out = NULL;
    size_t outlen = 0, count = 0;
    int r = gbx_tool_edit_apply(&c, file, fl, &out, &outlen, &count, &err);
    size_t m = strlen(old), rl = strlen(repl);
    if (r == 0) {
        CHECK(err == NULL && out != NULL && m > 0);
        CHECK(valid_utf8(file, fl));
        size_t want = naive_count(file, fl, old, m);
        CHECK(want >= 1 && (all || want == 1));
        CHECK(count == (all ? want : 1));
        /* the naive replace */
        uint8_t *ref = malloc(fl + count * rl + 1);
        size_t o = 0, i = 0, done = 0;
        while (i < fl) {
            if (done < count && i + m <= fl && memcmp(file + i, old, m) == 0) {
                memcpy(ref + o, repl, rl);
                o += rl;
                i += m;
                done++;
            } else {
                ref[o++] = file[i++];
            }
        }
        CHECK(outlen == o && memcmp(out, ref, o) == 0 && out[outlen] == '\0');
        CHECK(outlen <= GBX_TOOL_TEXT_MAX);
        CHECK(valid_utf8((const uint8_t *)old, m) && valid_utf8((const uint8_t *)repl, rl));
        CHECK(valid_utf8((const uint8_t *)out, outlen));
        free(ref);
        free(out);
    } else {
        CHECK(r == -1 && err != NULL && err->msg[0] != '\0' && out == NULL && count == 0);
        if (m > 0 && valid_utf8(file, fl) && fl <= GBX_TOOL_TEXT_MAX &&
            valid_utf8((const uint8_t *)old, m) && valid_utf8((const uint8_t *)repl, rl)) {
            size_t want = naive_count(file, fl, old, m), reps = all ? want : 1;
            CHECK(want == 0 || (want > 1 && !all) || fl - reps * m + reps * rl > GBX_TOOL_TEXT_MAX);
        }
        gbx_err_free(err);
    }
    free(old);
    free(repl);
}

/* --- read ----------------------------------------------------------------------------- */
static void fuzz_read(const uint8_t *d, size_t n)
{
    if (n < 3)
        return;
    struct gbx_tool_call c = {.tool = GBX_TOOL_READ, .file_path = "f.txt"};
    c.has_view = d[0] & 1;
    c.view_start = (int8_t)d[1];
    c.view_end = (int8_t)d[2];
    d += 3;
    n -= 3;
    struct gbx_err *err = NULL;
    char *text = NULL;
    int r = gbx_tool_read_text(&c, d, n, &text, &err);
    bool ok_bytes = valid_utf8(d, n) && memchr(d, 0, n) == NULL;
    if (r != 0) {
        CHECK(r == -1 && text == NULL && err != NULL);
        gbx_err_free(err);
        if (!ok_bytes)
            return;
        /* only view_range errors are left */
        CHECK(c.has_view);
        size_t nl = 0;
        for (size_t i = 0; i < n; i++)
            nl += d[i] == '\n';
        size_t lines = nl + (n > 0 && d[n - 1] != '\n');
        int64_t s = c.view_start < 1 ? 1 : c.view_start;
        CHECK((uint64_t)s > (lines ? lines : 1) || (c.view_end > 0 && c.view_end < s));
        return;
    }
    CHECK(ok_bytes);
    size_t tl = strlen(text);
    if (!c.has_view) {
        CHECK(tl == n && memcmp(text, d, n) == 0);
        free(text);
        return;
    }
    /* Python: lines = text.split("\n"); "\n".join(lines[start-1:end or None]) */
    size_t nparts = 1;
    for (size_t i = 0; i < n; i++)
        nparts += d[i] == '\n';
    size_t s0 = (size_t)(c.view_start < 1 ? 0 : c.view_start - 1);
    size_t e0 = c.view_end > 0 ? (size_t)c.view_end : nparts;
    if (e0 > nparts)
        e0 = nparts;
    size_t part = 0, from = 0, to = 0;
    bool have_from = s0 == 0, have_to = false;
    for (size_t i = 0; i <= n && !have_to; i++) {
        if (i == n || d[i] == '\n') {
            /* part ends at i */
            if (part + 1 == e0) {
                to = i;
                have_to = true;
            }
            part++;
            if (part == s0) {
                from = i + 1;
                have_from = true;
            }
        }
    }
    CHECK(have_from && have_to && from <= to);
    CHECK(tl == to - from && memcmp(text, d + from, tl) == 0);
    free(text);
}

/* --- glob ----------------------------------------------------------------------------- */
/* What a pattern of at most GBX_TOOL_GLOB_PATTERN_MAX bytes that gave r on path must agree with */
static void glob_semantics(const char *pat, const char *path, int r)
{
    /* a pattern without special characters matches itself only */
    if (strpbrk(pat, "*?[{\\") == NULL && strncmp(pat, "./", 2) != 0)
        CHECK(r == (strcmp(pat, path) == 0));
    /* ASCII, no classes, braces, escapes or "**": fnmatch(FNM_PATHNAME) agrees */
    bool simple =
        strncmp(pat, "./", 2) != 0 && strpbrk(pat, "[{\\") == NULL && strstr(pat, "**") == NULL;
    for (const char *q = pat; simple && *q; q++)
        simple = (unsigned char)*q < 0x80;
    for (const char *q = path; simple && *q; q++)
        simple = (unsigned char)*q < 0x80;
    if (simple)
        CHECK(r == (fnmatch(pat, path, FNM_PATHNAME) == 0));
    /* "**" + "/" in front matches what the pattern matches, at any depth */
    size_t pl = strlen(pat), l = strlen(path);
    if (r && pl < 500 && strpbrk(pat, "{}") == NULL && pat[0] != '\0' &&
        strncmp(pat, "./", 2) != 0) {
        char *deep = malloc(pl + 4);
        memcpy(deep, "**/", 3);
        memcpy(deep + 3, pat, pl + 1);
        char *p2 = malloc(l + 6);
        memcpy(p2, "x/yz/", 5);
        memcpy(p2 + 5, path, l + 1);
        CHECK(gbx_tool_glob_match(deep, path) == 1 && gbx_tool_glob_match(deep, p2) == 1);
        free(deep);
        free(p2);
    }
}

static void fuzz_glob(const uint8_t *d, size_t n)
{
    const uint8_t *z = memchr(d, 0, n);
    if (z == NULL)
        return;
    char *pat = strndup((const char *)d, (size_t)(z - d));
    char *path = strndup((const char *)z + 1, n - (size_t)(z - d) - 1);
    int r = gbx_tool_glob_match(pat, path);
    CHECK(r == 0 || r == 1);
    struct gbx_err *err = NULL;
    if (gbx_tool_glob_check(pat, &err) == 0) {
        struct gbx_tool_glob *g = gbx_tool_glob_new(pat, &err);
        CHECK(g != NULL && err == NULL);
        CHECK(gbx_tool_glob_test(g, path) == r);
        gbx_tool_glob_free(g);
    } else {
        CHECK(err != NULL && err->msg[0] != '\0');
        gbx_err_free(err);
    }
    if (strlen(pat) > GBX_TOOL_GLOB_PATTERN_MAX)
        CHECK(r == 0);
    else
        glob_semantics(pat, path, r);
    /* paths: joined and normalized, inside the workdir unless ".." climbs out */
    char *j = gbx_tool_path_join("/work", path);
    size_t jl = strlen(j);
    CHECK(j[0] == '/' && strstr(j, "//") == NULL && strstr(j, "/./") == NULL &&
          strstr(j, "/../") == NULL && (jl == 1 || j[jl - 1] != '/'));
    CHECK(!(jl >= 2 && strcmp(j + jl - 2, "/.") == 0));
    CHECK(!(jl >= 3 && strcmp(j + jl - 3, "/..") == 0));
    if (path[0] != '/' && strstr(path, "..") == NULL)
        CHECK(gbx_tool_path_inside("/work", j));
    free(j);
    free(pat);
    free(path);
}

/* --- grep ----------------------------------------------------------------------------- */
static void fuzz_grep(const uint8_t *d, size_t n)
{
    char *s = gbx_tool_grep_result(d, n);
    size_t l = strlen(s);
    CHECK(l > 0 && valid_utf8((const uint8_t *)s, l));
    CHECK(l <= (size_t)GBX_TOOL_OUTPUT_MAX + 200);
    json_t *j = gbx_tool_result_text(s, 0);
    const char *t = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "content"), 0), "text"));
    CHECK(t != NULL && strcmp(t, s) == 0);
    json_decref(j);
    free(s);
    /* raw bytes become a non-empty, valid result */
    char *raw = strndup((const char *)d, n);
    j = gbx_tool_result_text(raw, 1);
    t = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "content"), 0), "text"));
    CHECK(t != NULL && t[0] != '\0' && valid_utf8((const uint8_t *)t, strlen(t)));
    json_decref(j);
    free(raw);
}

/* --- parse ---------------------------------------------------------------------------- */
static void fuzz_parse(const uint8_t *d, size_t n)
{
    json_t *j = json_loadb((const char *)d, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (j == NULL)
        return;
    static const char *const names[] = {"bash", "read", "write", "edit", "glob", "grep", "x"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct gbx_tool_call c;
        struct gbx_err *err = NULL;
        int r = gbx_tool_parse(names[i], j, &c, &err);
        if (r != 0) {
            CHECK(r == -1 && err != NULL && err->msg[0] != '\0');
            gbx_err_free(err);
            continue;
        }
        CHECK(err == NULL && (int)c.tool == (int)i);
        switch (c.tool) {
        case GBX_TOOL_BASH:
            CHECK(c.command ? c.command[0] != '\0' : c.restart);
            CHECK(c.timeout_ms >= 1 && c.timeout_ms <= GBX_TOOL_BASH_TIMEOUT_MAX_MS);
            break;
        case GBX_TOOL_READ:
            CHECK(c.file_path && c.file_path[0] && (!c.has_view || c.view_start >= 1));
            break;
        case GBX_TOOL_WRITE:
            CHECK(c.file_path && c.file_path[0] && c.content);
            break;
        case GBX_TOOL_EDIT:
            CHECK(c.file_path && c.old_string && c.old_string[0] && c.new_string);
            break;
        case GBX_TOOL_GLOB:
            CHECK(gbx_tool_glob_check(c.pattern, NULL) == 0);
            CHECK(c.path == NULL || c.path[0] != '\0');
            break;
        case GBX_TOOL_GREP:
            CHECK(c.pattern && c.pattern[0] && (c.path == NULL || c.path[0] != '\0'));
            break;
        }
    }
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ULL;
    rng_state = h;
    fuzz_bash(data, size);
    fuzz_edit(data, size);
    fuzz_read(data, size);
    fuzz_glob(data, size);
    fuzz_grep(data, size);
    fuzz_parse(data, size);
    return 0;
}
