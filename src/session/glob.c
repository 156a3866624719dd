/* SPDX-License-Identifier: MIT */
/* The glob tool's matcher and its result (see toolkit.h). Nothing here does I/O. */
#include "session/toolkit.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "session/toolkit_int.h"

/* --- glob ------------------------------------------------------------------------------- */
/* A pattern compiles to a Thompson NFA run as a Pike VM: O(pattern x path) time and
 * O(pattern) space, whatever the braces and stars (no backtracking, no brace expansion). */
enum { G_CHAR, G_ANY, G_ANYNS, G_CLASS, G_SPLIT, G_JMP, G_MATCH };
#define G_NONE UINT32_MAX
#define GLOB_DEPTH_MAX 32

struct ginst {
    uint8_t op;
    uint8_t neg;   /* G_CLASS: negated */
    uint32_t c;    /* G_CHAR: the code point */
    uint32_t x, y; /* G_SPLIT: both targets; G_JMP: x; G_CLASS: first range, count */
};

struct grange {
    uint32_t lo, hi;
};

struct gbx_tool_glob {
    struct ginst *prog;
    uint32_t n, cap;
    struct grange *ranges;
    uint32_t nr, rcap;
};

struct gcomp {
    const uint8_t *p;
    size_t n, i, start;
    struct gbx_tool_glob *g;
    const char *bad; /* what is malformed */
};

static uint32_t gemit(struct gbx_tool_glob *g, uint8_t op, uint32_t x, uint32_t y)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 32;
        g->prog = gbx_xrealloc(g->prog, g->cap * sizeof(*g->prog));
    }
    g->prog[g->n] = (struct ginst){.op = op, .x = x, .y = y};
    return g->n++;
}

static void gchar(struct gbx_tool_glob *g, uint32_t cp)
{
    uint32_t pc = gemit(g, G_CHAR, 0, 0); /* may move g->prog */
    g->prog[pc].c = cp;
}

/* [^/]*  or  .*  */
static void gstar(struct gbx_tool_glob *g, uint8_t any)
{
    uint32_t l = gemit(g, G_SPLIT, 0, 0);
    gemit(g, any, 0, 0);
    gemit(g, G_JMP, l, 0);
    g->prog[l].x = l + 1;
    g->prog[l].y = g->n;
}

/* the code point at c->i in a class, honouring "\" */
static uint32_t gclass_char(struct gcomp *c)
{
    size_t adv;
    if (c->p[c->i] == '\\' && c->i + 1 < c->n)
        c->i++;
    uint32_t cp = gbx_tk_cp_next(c->p + c->i, c->n - c->i, &adv);
    c->i += adv;
    return cp;
}

static int gclass(struct gcomp *c)
{
    struct gbx_tool_glob *g = c->g;
    uint8_t neg = 0;
    c->i++; /* '[' */
    if (c->i < c->n && (c->p[c->i] == '!' || c->p[c->i] == '^')) {
        neg = 1;
        c->i++;
    }
    uint32_t first = g->nr, count = 0;
    for (;;) {
        if (c->i >= c->n) {
            c->bad = "an unterminated '['";
            return -1;
        }
        if (c->p[c->i] == ']' && count > 0) {
            c->i++;
            break;
        }
        uint32_t lo = gclass_char(c), hi = lo;
        if (c->i + 1 < c->n && c->p[c->i] == '-' && c->p[c->i + 1] != ']') {
            c->i++;
            hi = gclass_char(c);
            if (hi < lo) {
                c->bad = "a reversed range in '[...]'";
                return -1;
            }
        }
        if (g->nr == g->rcap) {
            g->rcap = g->rcap ? g->rcap * 2 : 8;
            g->ranges = gbx_xrealloc(g->ranges, g->rcap * sizeof(*g->ranges));
        }
        g->ranges[g->nr++] = (struct grange){lo, hi};
        count++;
    }
    uint32_t pc = gemit(g, G_CLASS, first, count);
    g->prog[pc].neg = neg;
    return 0;
}

static bool gseq_end(const struct gcomp *c, size_t j, int depth)
{
    return j >= c->n || (depth > 0 && (c->p[j] == ',' || c->p[j] == '}'));
}

static int gseq(struct gcomp *c, int depth);

static int gbraces(struct gcomp *c, int depth)
{
    struct gbx_tool_glob *g = c->g;
    if (depth >= GLOB_DEPTH_MAX) {
        c->bad = "braces nested too deeply";
        return -1;
    }
    c->i++; /* '{' */
    uint32_t jumps = G_NONE;
    for (;;) {
        uint32_t split = gemit(g, G_SPLIT, 0, 0);
        g->prog[split].x = split + 1;
        if (gseq(c, depth + 1) < 0)
            return -1;
        if (c->i >= c->n) {
            c->bad = "an unterminated '{'";
            return -1;
        }
        uint8_t ch = c->p[c->i++];
        jumps = gemit(g, G_JMP, jumps, 0); /* chained through x until patched */
        if (ch == '}') {
            g->prog[split].y = g->prog[split].x;
            break;
        }
        g->prog[split].y = g->n;
    }
    while (jumps != G_NONE) {
        uint32_t next = g->prog[jumps].x;
        g->prog[jumps].x = g->n;
        jumps = next;
    }
    return 0;
}

static int gseq(struct gcomp *c, int depth)
{
    struct gbx_tool_glob *g = c->g;
    while (!gseq_end(c, c->i, depth)) {
        const uint8_t *p = c->p;
        size_t i = c->i, adv;
        switch (p[i]) {
        case '\\':
            if (i + 1 >= c->n) {
                c->bad = "a trailing '\\'";
                return -1;
            }
            gchar(g, gbx_tk_cp_next(p + i + 1, c->n - i - 1, &adv));
            c->i = i + 1 + adv;
            break;
        case '?':
            gemit(g, G_ANYNS, 0, 0);
            c->i++;
            break;
        case '*': {
            size_t j = i;
            while (j < c->n && p[j] == '*')
                j++;
            bool seg = i == c->start || p[i - 1] == '/' ||
                       (depth > 0 && (p[i - 1] == '{' || p[i - 1] == ','));
            if (j - i >= 2 && seg && j < c->n && p[j] == '/') {
                /* "**" + "/": zero or more directories, (?:.*\/)? */
                uint32_t l = gemit(g, G_SPLIT, 0, 0);
                g->prog[l].x = l + 1;
                gstar(g, G_ANY);
                gchar(g, '/');
                g->prog[l].y = g->n;
                c->i = j + 1;
            } else if (j - i >= 2 && seg && gseq_end(c, j, depth)) {
                gstar(g, G_ANY);
                c->i = j;
            } else {
                gstar(g, G_ANYNS);
                c->i = j;
            }
            break;
        }
        case '/': {
            size_t j = i + 1;
            while (j < c->n && p[j] == '*')
                j++;
            if (j - i - 1 >= 2 && gseq_end(c, j, depth)) {
                /* a final "**" segment after "/": the directory itself or anything below it,
                 * (?:/.*)? */
                uint32_t l = gemit(g, G_SPLIT, 0, 0);
                g->prog[l].x = l + 1;
                gchar(g, '/');
                gstar(g, G_ANY);
                g->prog[l].y = g->n;
                c->i = j;
            } else {
                gchar(g, '/');
                c->i++;
            }
            break;
        }
        case '[':
            if (gclass(c) < 0)
                return -1;
            break;
        case '{':
            if (gbraces(c, depth) < 0)
                return -1;
            break;
        default:
            gchar(g, gbx_tk_cp_next(p + i, c->n - i, &adv));
            c->i = i + adv;
            break;
        }
    }
    return 0;
}

void gbx_tool_glob_free(struct gbx_tool_glob *g)
{
    if (g == NULL)
        return;
    free(g->prog);
    free(g->ranges);
    free(g);
}

/* Compile; NULL with *bad set for a malformed pattern */
static struct gbx_tool_glob *glob_compile(const char *pattern, const char **bad)
{
    struct gbx_tool_glob *g = gbx_xcalloc(1, sizeof(*g));
    struct gcomp c = {.p = (const uint8_t *)pattern, .n = strlen(pattern), .g = g};
    while (c.i + 1 < c.n && c.p[c.i] == '.' && c.p[c.i + 1] == '/')
        c.i += 2;
    c.start = c.i;
    if (gseq(&c, 0) < 0) {
        *bad = c.bad;
        gbx_tool_glob_free(g);
        return NULL;
    }
    gemit(g, G_MATCH, 0, 0);
    return g;
}

int gbx_tool_glob_check(const char *pattern, struct gbx_err **err)
{
    if (pattern == NULL || pattern[0] == '\0')
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "glob: 'pattern' is required");
    size_t n = strlen(pattern);
    if (n > GBX_TOOL_GLOB_PATTERN_MAX)
        return gbx_err_set(err, 0, GBX_ERR_LIMIT, "glob: 'pattern' is longer than %d bytes",
                           GBX_TOOL_GLOB_PATTERN_MAX);
    if (pattern[0] == '/')
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "glob: absolute pattern not permitted");
    /* a ".." segment, also as a brace alternative ("{..,a}/b") */
    for (size_t i = 0; i + 1 < n; i++) {
        if (pattern[i] == '.' && pattern[i + 1] == '.' &&
            (i == 0 || strchr("/{,", pattern[i - 1])) &&
            (i + 2 == n || strchr("/},", pattern[i + 2])))
            return gbx_err_set(err, 0, GBX_ERR_INVALID,
                               "glob: '..' is not permitted in the pattern");
    }
    const char *bad = NULL;
    struct gbx_tool_glob *g = glob_compile(pattern, &bad);
    if (g == NULL)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "glob: malformed pattern: %s", bad);
    gbx_tool_glob_free(g);
    return 0;
}

struct gbx_tool_glob *gbx_tool_glob_new(const char *pattern, struct gbx_err **err)
{
    if (gbx_tool_glob_check(pattern, err) < 0)
        return NULL;
    const char *bad = NULL;
    return glob_compile(pattern, &bad);
}

static void gadd(const struct gbx_tool_glob *g, uint32_t *list, uint32_t *cnt, uint32_t pc,
                 uint32_t *mark, uint32_t gen, uint32_t *stack)
{
    uint32_t sp = 0;
    stack[sp++] = pc;
    while (sp) {
        pc = stack[--sp];
        if (mark[pc] == gen)
            continue;
        mark[pc] = gen;
        const struct ginst *in = &g->prog[pc];
        if (in->op == G_JMP) {
            stack[sp++] = in->x;
        } else if (in->op == G_SPLIT) {
            stack[sp++] = in->y;
            stack[sp++] = in->x;
        } else {
            list[(*cnt)++] = pc;
        }
    }
}

int gbx_tool_glob_test(const struct gbx_tool_glob *g, const char *relpath)
{
    if (g == NULL || relpath == NULL)
        return 0;
    uint32_t n = g->n, gen = 1, cn = 0;
    /* clist, nlist, mark: n each; stack: every pc is expanded once, pushing at most two */
    uint32_t *mem = gbx_xcalloc((size_t)n * 5 + 2, sizeof(uint32_t));
    uint32_t *clist = mem, *nlist = mem + n, *mark = mem + 2 * (size_t)n,
             *stack = mem + 3 * (size_t)n;
    gadd(g, clist, &cn, 0, mark, gen, stack);
    const uint8_t *p = (const uint8_t *)relpath;
    size_t len = strlen(relpath), i = 0;
    while (i < len && cn > 0) {
        size_t adv;
        uint32_t cp = gbx_tk_cp_next(p + i, len - i, &adv), nn = 0;
        i += adv;
        gen++;
        for (uint32_t k = 0; k < cn; k++) {
            const struct ginst *in = &g->prog[clist[k]];
            bool ok = false;
            switch (in->op) {
            case G_CHAR:
                ok = in->c == cp;
                break;
            case G_ANY:
                ok = true;
                break;
            case G_ANYNS:
                ok = cp != '/';
                break;
            case G_CLASS:
                if (cp != '/') {
                    for (uint32_t r = in->x; r < in->x + in->y && !ok; r++)
                        ok = cp >= g->ranges[r].lo && cp <= g->ranges[r].hi;
                    ok = ok != (in->neg != 0);
                }
                break;
            default:
                break;
            }
            if (ok)
                gadd(g, nlist, &nn, clist[k] + 1, mark, gen, stack);
        }
        uint32_t *t = clist;
        clist = nlist;
        nlist = t;
        cn = nn;
    }
    int matched = 0;
    for (uint32_t k = 0; i == len && k < cn && !matched; k++)
        matched = g->prog[clist[k]].op == G_MATCH;
    free(mem);
    return matched;
}

int gbx_tool_glob_match(const char *pattern, const char *relpath)
{
    if (pattern == NULL || relpath == NULL || strlen(pattern) > GBX_TOOL_GLOB_PATTERN_MAX)
        return 0;
    const char *bad = NULL;
    struct gbx_tool_glob *g = glob_compile(pattern, &bad);
    int r = gbx_tool_glob_test(g, relpath);
    gbx_tool_glob_free(g);
    return r;
}

static int hit_cmp(const void *a, const void *b)
{
    const struct gbx_tool_glob_hit *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns)
        return x->mtime_ns > y->mtime_ns ? -1 : 1;
    return strcmp(x->path ? x->path : "", y->path ? y->path : "");
}

char *gbx_tool_glob_result(const char *root, struct gbx_tool_glob_hit *hits, size_t n)
{
    if (hits == NULL || n == 0)
        return gbx_xstrdup("no matches");
    qsort(hits, n, sizeof(*hits), hit_cmp);
    struct sbuf b = {0};
    for (size_t i = 0; i < n && i < GBX_TOOL_GLOB_RESULTS_MAX; i++) {
        const char *rel = hits[i].path ? hits[i].path : "";
        while (*rel == '/')
            rel++;
        char *full = gbx_tool_path_join(root ? root : "/", rel);
        if (i)
            gbx_tk_sb_add(&b, "\n", 1);
        gbx_tk_sanitize(&b, (const uint8_t *)full, strlen(full));
        free(full);
    }
    return gbx_tk_sb_steal(&b);
}
