/* SPDX-License-Identifier: MIT */
/* Unit tests for src/session/toolkit.c: the pure parts of the agent toolset (input parsing,
 * paths, read/edit, the bash sentinel framing, glob, grep, result JSON). One test runs the
 * generated bash scripts through a real /bin/bash, when there is one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "session/toolkit.h"

static const char nonce[17] = "0123456789abcdef";

static json_t *js(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (j == NULL)
        fail_msg("bad test json %s: %s", text, e.text);
    return j;
}

/* Assert that err holds msg with kind, and free it */
static void check_err(struct gbx_err **err, enum gbx_err_kind kind, const char *msg)
{
    assert_non_null(*err);
    assert_string_equal((*err)->msg, msg);
    assert_int_equal((*err)->kind, kind);
    gbx_err_free(*err);
    *err = NULL;
}

/* --- parse ---------------------------------------------------------------------------- */
static void test_parse_ok(void **state)
{
    struct gbx_tool_call c;
    struct gbx_err *err = NULL;
    json_t *in;

    in = js("{\"command\":\"ls -la\",\"timeout_ms\":5000}");
    assert_int_equal(gbx_tool_parse("bash", in, &c, &err), 0);
    assert_int_equal(c.tool, GBX_TOOL_BASH);
    assert_string_equal(c.command, "ls -la");
    assert_int_equal(c.restart, 0);
    assert_int_equal(c.timeout_ms, 5000);
    json_decref(in);

    in = js("{\"restart\":true}");
    assert_int_equal(gbx_tool_parse("bash", in, &c, &err), 0);
    assert_null(c.command);
    assert_int_equal(c.restart, 1);
    assert_int_equal(c.timeout_ms, GBX_TOOL_BASH_TIMEOUT_DEFAULT_MS);
    json_decref(in);

    in = js("{\"command\":\"\",\"restart\":true}");
    assert_int_equal(gbx_tool_parse("bash", in, &c, &err), 0);
    assert_null(c.command);
    json_decref(in);

    in = js("{\"command\":\"x\",\"restart\":null,\"timeout_ms\":0}");
    assert_int_equal(gbx_tool_parse("bash", in, &c, &err), 0);
    assert_int_equal(c.timeout_ms, 120000);
    json_decref(in);

    in = js("{\"command\":\"x\",\"timeout_ms\":600000}");
    assert_int_equal(gbx_tool_parse("bash", in, &c, &err), 0);
    assert_int_equal(c.timeout_ms, 600000);
    json_decref(in);

    in = js("{\"file_path\":\"src/a.c\"}");
    assert_int_equal(gbx_tool_parse("read", in, &c, &err), 0);
    assert_int_equal(c.tool, GBX_TOOL_READ);
    assert_string_equal(c.file_path, "src/a.c");
    assert_int_equal(c.has_view, 0);
    json_decref(in);

    in = js("{\"file_path\":\"a\",\"view_range\":[0,-1]}");
    assert_int_equal(gbx_tool_parse("read", in, &c, &err), 0);
    assert_int_equal(c.has_view, 1);
    assert_int_equal(c.view_start, 1);
    assert_int_equal(c.view_end, -1);
    json_decref(in);

    in = js("{\"file_path\":\"a\",\"view_range\":[3,7]}");
    assert_int_equal(gbx_tool_parse("read", in, &c, &err), 0);
    assert_int_equal(c.view_start, 3);
    assert_int_equal(c.view_end, 7);
    json_decref(in);

    in = js("{\"file_path\":\"a.png\",\"view_range\":[]}");
    assert_int_equal(gbx_tool_parse("read", in, &c, &err), 0);
    assert_int_equal(c.has_view, 0);
    json_decref(in);

    in = js("{\"file_path\":\"a\",\"view_range\":null}");
    assert_int_equal(gbx_tool_parse("read", in, &c, &err), 0);
    assert_int_equal(c.has_view, 0);
    json_decref(in);

    in = js("{\"file_path\":\"/w/a\",\"content\":\"a\\u0000b\"}");
    assert_int_equal(gbx_tool_parse("write", in, &c, &err), 0);
    assert_int_equal(c.tool, GBX_TOOL_WRITE);
    assert_int_equal(c.content_len, 3);
    assert_memory_equal(c.content, "a\0b", 3);
    json_decref(in);

    in = js("{\"file_path\":\"a\",\"content\":\"\"}");
    assert_int_equal(gbx_tool_parse("write", in, &c, &err), 0);
    assert_string_equal(c.content, "");
    json_decref(in);

    in = js("{\"file_path\":\"a\",\"old_string\":\"x\",\"new_string\":\"\",\"replace_all\":true}");
    assert_int_equal(gbx_tool_parse("edit", in, &c, &err), 0);
    assert_int_equal(c.tool, GBX_TOOL_EDIT);
    assert_string_equal(c.old_string, "x");
    assert_string_equal(c.new_string, "");
    assert_int_equal(c.replace_all, 1);
    json_decref(in);

    in = js("{\"pattern\":\"**/*.c\",\"path\":\"\"}");
    assert_int_equal(gbx_tool_parse("glob", in, &c, &err), 0);
    assert_int_equal(c.tool, GBX_TOOL_GLOB);
    assert_string_equal(c.pattern, "**/*.c");
    assert_null(c.path);
    json_decref(in);

    in = js("{\"pattern\":\"int main\\\\(\",\"path\":\"src\"}");
    assert_int_equal(gbx_tool_parse("grep", in, &c, &err), 0);
    assert_int_equal(c.tool, GBX_TOOL_GREP);
    assert_string_equal(c.pattern, "int main\\(");
    assert_string_equal(c.path, "src");
    json_decref(in);
    assert_null(err);
}

static void test_parse_errors(void **state)
{
    static const struct {
        const char *name, *input;
        enum gbx_err_kind kind;
        const char *msg;
    } cases[] = {
        {"Bash", "{}", GBX_ERR_INVALID, "unknown tool 'Bash'"},
        {"web_fetch", "{}", GBX_ERR_INVALID, "unknown tool 'web_fetch'"},
        {NULL, "{}", GBX_ERR_INVALID, "unknown tool ''"},
        {"bash", "[]", GBX_ERR_INVALID, "bash: input must be a JSON object"},
        {"bash", "\"ls\"", GBX_ERR_INVALID, "bash: input must be a JSON object"},
        {"bash", "{}", GBX_ERR_INVALID, "bash: 'command' is required"},
        {"bash", "{\"command\":\"\"}", GBX_ERR_INVALID, "bash: 'command' is required"},
        {"bash", "{\"command\":null,\"restart\":false}", GBX_ERR_INVALID,
         "bash: 'command' is required"},
        {"bash", "{\"command\":5}", GBX_ERR_INVALID, "bash: 'command' must be a string"},
        {"bash", "{\"command\":\"ls\\u0000x\"}", GBX_ERR_INVALID,
         "bash: 'command' must not contain NUL bytes"},
        {"bash", "{\"command\":\"ls\",\"restart\":\"yes\"}", GBX_ERR_INVALID,
         "bash: 'restart' must be a boolean (true or false)"},
        {"bash", "{\"command\":\"ls\",\"timeout_ms\":1.5}", GBX_ERR_INVALID,
         "bash: 'timeout_ms' must be an integer (milliseconds)"},
        {"bash", "{\"command\":\"ls\",\"timeout_ms\":\"10\"}", GBX_ERR_INVALID,
         "bash: 'timeout_ms' must be an integer (milliseconds)"},
        {"bash", "{\"command\":\"ls\",\"timeout_ms\":-1}", GBX_ERR_INVALID,
         "bash: 'timeout_ms' must be between 0 and 600000 (0: the default 120000)"},
        {"bash", "{\"command\":\"ls\",\"timeout_ms\":600001}", GBX_ERR_INVALID,
         "bash: 'timeout_ms' must be between 0 and 600000 (0: the default 120000)"},
        {"bash", "{\"command\":\"ls\",\"cwd\":\"/\"}", GBX_ERR_INVALID,
         "bash: unknown field 'cwd' (fields: command, restart, timeout_ms)"},
        {"read", "{}", GBX_ERR_INVALID, "read: 'file_path' is required"},
        {"read", "{\"file_path\":\"\"}", GBX_ERR_INVALID, "read: 'file_path' is required"},
        {"read", "{\"file_path\":[\"a\"]}", GBX_ERR_INVALID, "read: 'file_path' must be a string"},
        {"read", "{\"file_path\":\"a\\u0000b\"}", GBX_ERR_INVALID,
         "read: 'file_path' must not contain NUL bytes"},
        {"read", "{\"file_path\":\"a\",\"offset\":1,\"limit\":10}", GBX_ERR_INVALID,
         "read: unknown field 'offset' (fields: file_path, view_range)"},
        {"read", "{\"file_path\":\"a\",\"view_range\":[1]}", GBX_ERR_INVALID,
         "read: 'view_range' must be [start_line, end_line] (two integers, 1-based, end_line -1 "
         "for the end of the file)"},
        {"read", "{\"file_path\":\"a\",\"view_range\":[1,2,3]}", GBX_ERR_INVALID,
         "read: 'view_range' must be [start_line, end_line] (two integers, 1-based, end_line -1 "
         "for the end of the file)"},
        {"read", "{\"file_path\":\"a\",\"view_range\":[1,\"2\"]}", GBX_ERR_INVALID,
         "read: 'view_range' must be [start_line, end_line] (two integers, 1-based, end_line -1 "
         "for the end of the file)"},
        {"read", "{\"file_path\":\"a\",\"view_range\":[1.0,2]}", GBX_ERR_INVALID,
         "read: 'view_range' must be [start_line, end_line] (two integers, 1-based, end_line -1 "
         "for the end of the file)"},
        {"read", "{\"file_path\":\"a\",\"view_range\":\"1-2\"}", GBX_ERR_INVALID,
         "read: 'view_range' must be [start_line, end_line] (two integers, 1-based, end_line -1 "
         "for the end of the file)"},
        {"read", "{\"file_path\":\"pic.PNG\",\"view_range\":[1,2]}", GBX_ERR_INVALID,
         "read: 'view_range' cannot be used with image or PDF files"},
        {"read", "{\"file_path\":\"doc.pdf\",\"view_range\":[1,-1]}", GBX_ERR_INVALID,
         "read: 'view_range' cannot be used with image or PDF files"},
        {"write", "{\"file_path\":\"a\"}", GBX_ERR_INVALID, "write: 'content' is required"},
        {"write", "{\"content\":\"x\"}", GBX_ERR_INVALID, "write: 'file_path' is required"},
        {"write", "{\"file_path\":\"a\",\"content\":5}", GBX_ERR_INVALID,
         "write: 'content' must be a string"},
        {"write", "{\"file_path\":\"a\",\"content\":\"x\",\"mode\":\"0644\"}", GBX_ERR_INVALID,
         "write: unknown field 'mode' (fields: file_path, content)"},
        {"edit", "{\"file_path\":\"a\",\"new_string\":\"b\"}", GBX_ERR_INVALID,
         "edit: 'old_string' is required"},
        {"edit", "{\"file_path\":\"a\",\"old_string\":\"\",\"new_string\":\"b\"}", GBX_ERR_INVALID,
         "edit: 'old_string' must not be empty (use write to create a file)"},
        {"edit", "{\"file_path\":\"a\",\"old_string\":\"x\"}", GBX_ERR_INVALID,
         "edit: 'new_string' is required"},
        {"edit", "{\"old_string\":\"x\",\"new_string\":\"y\"}", GBX_ERR_INVALID,
         "edit: 'file_path' is required"},
        {"edit",
         "{\"file_path\":\"a\",\"old_string\":\"x\",\"new_string\":\"y\",\"replace_all\":1}",
         GBX_ERR_INVALID, "edit: 'replace_all' must be a boolean (true or false)"},
        {"edit", "{\"file_path\":\"a\",\"old_string\":\"x\",\"new_string\":null}", GBX_ERR_INVALID,
         "edit: 'new_string' is required"},
        {"edit", "{\"file_path\":\"a\",\"old_string\":\"x\\u0000\",\"new_string\":\"y\"}",
         GBX_ERR_INVALID, "edit: 'old_string' must not contain NUL bytes"},
        {"glob", "{}", GBX_ERR_INVALID, "glob: 'pattern' is required"},
        {"glob", "{\"pattern\":\"/etc/*\"}", GBX_ERR_INVALID,
         "glob: absolute pattern not permitted"},
        {"glob", "{\"pattern\":\"../*\"}", GBX_ERR_INVALID,
         "glob: '..' is not permitted in the pattern"},
        {"glob", "{\"pattern\":\"a/[b\"}", GBX_ERR_INVALID,
         "glob: malformed pattern: an unterminated '['"},
        {"glob", "{\"pattern\":\"*.c\",\"path\":3}", GBX_ERR_INVALID,
         "glob: 'path' must be a string"},
        {"grep", "{}", GBX_ERR_INVALID, "grep: 'pattern' is required"},
        {"grep", "{\"pattern\":\"\"}", GBX_ERR_INVALID, "grep: 'pattern' is required"},
        {"grep", "{\"pattern\":\"x\",\"glob\":\"*.c\"}", GBX_ERR_INVALID,
         "grep: unknown field 'glob' (fields: pattern, path)"},
        {"grep", "{\"pattern\":\"x\",\"path\":{}}", GBX_ERR_INVALID,
         "grep: 'path' must be a string"},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        struct gbx_tool_call c;
        struct gbx_err *err = NULL;
        json_t *in = js(cases[i].input);
        if (gbx_tool_parse(cases[i].name, in, &c, &err) != -1)
            fail_msg("case %zu (%s %s) parsed", i, cases[i].name, cases[i].input);
        check_err(&err, cases[i].kind, cases[i].msg);
        assert_null(c.command);
        assert_null(c.file_path);
        json_decref(in);
    }

    /* NULL input, and sizes over the bounds */
    struct gbx_tool_call c;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_tool_parse("read", NULL, &c, &err), -1);
    check_err(&err, GBX_ERR_INVALID, "read: input must be a JSON object");

    char *longp = malloc(GBX_TOOL_PATH_MAX + 2);
    memset(longp, 'a', GBX_TOOL_PATH_MAX + 1);
    longp[GBX_TOOL_PATH_MAX + 1] = '\0';
    json_t *in = json_pack("{s:s}", "file_path", longp);
    assert_int_equal(gbx_tool_parse("read", in, &c, &err), -1);
    check_err(&err, GBX_ERR_LIMIT, "read: 'file_path' is longer than 4096 bytes");
    json_decref(in);
    longp[GBX_TOOL_PATH_MAX] = '\0';
    in = json_pack("{s:s}", "file_path", longp);
    assert_int_equal(gbx_tool_parse("read", in, &c, &err), 0);
    json_decref(in);
    free(longp);

    char *pat = malloc(GBX_TOOL_GLOB_PATTERN_MAX + 2);
    memset(pat, 'a', GBX_TOOL_GLOB_PATTERN_MAX + 1);
    pat[GBX_TOOL_GLOB_PATTERN_MAX + 1] = '\0';
    in = json_pack("{s:s}", "pattern", pat);
    assert_int_equal(gbx_tool_parse("glob", in, &c, &err), -1);
    check_err(&err, GBX_ERR_LIMIT, "glob: 'pattern' is longer than 1024 bytes");
    json_decref(in);
    free(pat);

    char *cmd = malloc(GBX_TOOL_COMMAND_MAX + 2);
    memset(cmd, 'x', GBX_TOOL_COMMAND_MAX + 1);
    cmd[GBX_TOOL_COMMAND_MAX + 1] = '\0';
    in = json_pack("{s:s}", "command", cmd);
    assert_int_equal(gbx_tool_parse("bash", in, &c, &err), -1);
    check_err(&err, GBX_ERR_LIMIT, "bash: 'command' is longer than 1048576 bytes");
    json_decref(in);
    free(cmd);
}

static void test_names(void **state)
{
    static const char *const names[] = {"bash", "read", "write", "edit", "glob", "grep"};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(names); i++) {
        enum gbx_tool t;
        assert_int_equal(gbx_tool_from_name(names[i], &t), 0);
        assert_int_equal(t, (enum gbx_tool)i);
        assert_string_equal(gbx_tool_name(t), names[i]);
    }
    enum gbx_tool t;
    assert_int_equal(gbx_tool_from_name("web_search", &t), -1);
    assert_int_equal(gbx_tool_from_name("READ", &t), -1);
    assert_int_equal(gbx_tool_from_name(NULL, &t), -1);
    assert_string_equal(gbx_tool_name((enum gbx_tool)42), "unknown");
    assert_true(gbx_tool_mutates(GBX_TOOL_BASH));
    assert_true(gbx_tool_mutates(GBX_TOOL_WRITE));
    assert_true(gbx_tool_mutates(GBX_TOOL_EDIT));
    assert_false(gbx_tool_mutates(GBX_TOOL_READ));
    assert_false(gbx_tool_mutates(GBX_TOOL_GLOB));
    assert_false(gbx_tool_mutates(GBX_TOOL_GREP));
}

/* --- paths ---------------------------------------------------------------------------- */
static void test_path_join(void **state)
{
    static const struct {
        const char *workdir, *path, *want;
    } cases[] = {
        {"/work", "a.c", "/work/a.c"},
        {"/work", "src/a.c", "/work/src/a.c"},
        {"/work/", "src//a.c", "/work/src/a.c"},
        {"/work", "./src/./a.c", "/work/src/a.c"},
        {"/work", "src/../b.c", "/work/b.c"},
        {"/work", "../etc/passwd", "/etc/passwd"},
        {"/work", "../../../../etc", "/etc"},
        {"/work", "/etc/passwd", "/etc/passwd"},
        {"/work", "/../../x", "/x"},
        {"/work", "//x//y//", "/x/y"},
        {"/work", "src/", "/work/src"},
        {"/work", ".", "/work"},
        {"/work", "..", "/"},
        {"/work", "", "/work"},
        {"/work", NULL, "/work"},
        {"/work/./a/../b/", NULL, "/work/b"},
        {"/", "a", "/a"},
        {"/", "..", "/"},
        {NULL, "a/b", "/a/b"},
        {"work", "a", "/work/a"},
        {"/work", "...", "/work/..."},
        {"/work", "..a/.b", "/work/..a/.b"},
        {"/work", "a/b/c/../../d", "/work/a/d"},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        char *got = gbx_tool_path_join(cases[i].workdir, cases[i].path);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("join(%s, %s) = %s, want %s", cases[i].workdir, cases[i].path, got,
                     cases[i].want);
        free(got);
    }
}

static void test_path_inside(void **state)
{
    static const struct {
        const char *root, *path;
        int want;
    } cases[] = {
        {"/work", "/work", 1},
        {"/work", "/work/", 1},
        {"/work/", "/work", 1},
        {"/work", "/work/a/b", 1},
        {"/work", "/workspace", 0},
        {"/work", "/workspace/a", 0},
        {"/work", "/wor", 0},
        {"/work", "/", 0},
        {"/work", "/etc/passwd", 0},
        {"/work", "/work/../etc", 0},
        {"/work", "/work/a/../../work/b", 1},
        {"/work", "//work//a", 1},
        {"/work", "work/a", 0},
        {"work", "/work/a", 0},
        {"/", "/anything", 1},
        {"/", "/", 1},
        {"/a/b", "/a", 0},
        {"/work", NULL, 0},
        {NULL, "/work", 0},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        if (gbx_tool_path_inside(cases[i].root, cases[i].path) != cases[i].want)
            fail_msg("inside(%s, %s) != %d", cases[i].root, cases[i].path, cases[i].want);
    }
}

/* --- read ----------------------------------------------------------------------------- */
static void test_read_kind(void **state)
{
    static const struct {
        const char *path, *kind, *media;
    } cases[] = {
        {"a.png", "image", "image/png"},
        {"/w/x/A.PNG", "image", "image/png"},
        {"a.jpg", "image", "image/jpeg"},
        {"a.JPEG", "image", "image/jpeg"},
        {"a.gif", "image", "image/gif"},
        {"a.webp", "image", "image/webp"},
        {"doc.pdf", "document", "application/pdf"},
        {"a.png.txt", NULL, NULL},
        {"a.c", NULL, NULL},
        {"png", NULL, NULL},
        {".png", NULL, NULL},
        {"dir.png/file", NULL, NULL},
        {"a.svg", NULL, NULL},
        {"a.", NULL, NULL},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        const char *kind = NULL, *media = NULL;
        int r = gbx_tool_read_kind(cases[i].path, &kind, &media);
        assert_int_equal(r, cases[i].kind != NULL);
        if (cases[i].kind) {
            assert_string_equal(kind, cases[i].kind);
            assert_string_equal(media, cases[i].media);
        }
    }
    assert_int_equal(gbx_tool_read_kind(NULL, NULL, NULL), 0);
}

static struct gbx_tool_call read_call(const char *path, int has_view, int64_t start, int64_t end)
{
    struct gbx_tool_call c = {.tool = GBX_TOOL_READ, .file_path = path};
    c.has_view = has_view;
    c.view_start = start;
    c.view_end = end;
    return c;
}

static void test_read_views(void **state)
{
    static const struct {
        const char *file;
        int has_view;
        int64_t start, end;
        const char *want; /* NULL: error msg below */
        const char *msg;
    } cases[] = {
        {"a\nb\nc\n", 0, 0, 0, "a\nb\nc\n", NULL},
        {"a\nb\nc\n", 1, 1, -1, "a\nb\nc\n", NULL},
        {"a\nb\nc\n", 1, 1, 0, "a\nb\nc\n", NULL},
        {"a\nb\nc\n", 1, 1, 1, "a", NULL},
        {"a\nb\nc\n", 1, 2, 2, "b", NULL},
        {"a\nb\nc\n", 1, 1, 2, "a\nb", NULL},
        {"a\nb\nc\n", 1, 1, 3, "a\nb\nc", NULL},
        {"a\nb\nc\n", 1, 1, 4, "a\nb\nc\n", NULL},
        {"a\nb\nc\n", 1, 2, 100, "b\nc\n", NULL},
        {"a\nb\nc\n", 1, 3, -1, "c\n", NULL},
        {"a\nb\nc\n", 1, 3, 3, "c", NULL},
        {"a\nb\nc\n", 1, -5, 1, "a", NULL},
        {"a\nb\nc\n", 1, 4, 4, NULL, "read: view_range starts at line 4 but f has 3 lines"},
        {"a\nb\nc\n", 1, 9, -1, NULL, "read: view_range starts at line 9 but f has 3 lines"},
        {"a\nb\nc\n", 1, 3, 2, NULL, "read: view_range end_line 2 is before start_line 3"},
        {"a\nb", 1, 2, 2, "b", NULL},
        {"a\nb", 1, 1, 1, "a", NULL},
        {"a\nb", 1, 2, -1, "b", NULL},
        {"a\nb", 1, 3, -1, NULL, "read: view_range starts at line 3 but f has 2 lines"},
        {"one", 1, 1, 1, "one", NULL},
        {"one", 1, 2, 2, NULL, "read: view_range starts at line 2 but f has 1 line"},
        {"", 1, 1, -1, "", NULL},
        {"", 1, 1, 5, "", NULL},
        {"", 1, 2, -1, NULL, "read: view_range starts at line 2 but f has 0 lines"},
        {"\n\n\n", 1, 2, 2, "", NULL},
        {"\n\n\n", 1, 3, -1, "\n", NULL},
        {"x\r\ny\r\n", 1, 1, 1, "x\r", NULL},
        {"héllo\nwörld\n", 1, 2, 2, "wörld", NULL},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        struct gbx_tool_call c = read_call("f", cases[i].has_view, cases[i].start, cases[i].end);
        struct gbx_err *err = NULL;
        char *text = NULL;
        int r = gbx_tool_read_text(&c, (const uint8_t *)cases[i].file, strlen(cases[i].file), &text,
                                   &err);
        if (cases[i].want) {
            if (r != 0)
                fail_msg("case %zu: %s", i, err->msg);
            assert_string_equal(text, cases[i].want);
            free(text);
        } else {
            assert_int_equal(r, -1);
            assert_null(text);
            check_err(&err, GBX_ERR_INVALID, cases[i].msg);
        }
    }
}

static void test_read_errors(void **state)
{
    struct gbx_tool_call c = read_call("src/x.bin", 0, 0, 0);
    struct gbx_err *err = NULL;
    char *text = NULL;
    static const char *const bad[] = {
        "\xff",
        "abc\x80",
        "\xc0\xaf",
        "\xe0\x80\xaf",
        "\xed\xa0\x80",
        "\xf4\x90\x80\x80",
        "\xf8\x88\x80\x80\x80",
        "\xe2\x82",
        "a\0b",
    };
    static const size_t badlen[] = {1, 4, 2, 3, 3, 4, 5, 2, 3};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(bad); i++) {
        assert_int_equal(gbx_tool_read_text(&c, (const uint8_t *)bad[i], badlen[i], &text, &err),
                         -1);
        assert_null(text);
        check_err(&err, GBX_ERR_INVALID,
                  "read: src/x.bin is not UTF-8 text; use bash to inspect it");
    }
    /* valid multibyte up to U+10FFFF */
    const char *good = "\xc2\x80\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";
    assert_int_equal(gbx_tool_read_text(&c, (const uint8_t *)good, strlen(good), &text, &err), 0);
    assert_string_equal(text, good);
    free(text);

    /* the cap: exactly 256 KiB is fine, one more byte is not */
    uint8_t *big = malloc(GBX_TOOL_TEXT_MAX + 1);
    memset(big, 'x', GBX_TOOL_TEXT_MAX + 1);
    assert_int_equal(gbx_tool_read_text(&c, big, GBX_TOOL_TEXT_MAX, &text, &err), 0);
    assert_int_equal(strlen(text), GBX_TOOL_TEXT_MAX);
    free(text);
    assert_int_equal(gbx_tool_read_text(&c, big, GBX_TOOL_TEXT_MAX + 1, &text, &err), -1);
    check_err(&err, GBX_ERR_LIMIT,
              "read: src/x.bin is 262145 bytes, exceeds 262144-byte limit. Use bash "
              "(head/tail/sed) to read a slice.");
    free(big);

    /* empty file, no view */
    assert_int_equal(gbx_tool_read_text(&c, NULL, 0, &text, &err), 0);
    assert_string_equal(text, "");
    free(text);

    /* image and PDF paths are blocks, not text */
    c = read_call("a.png", 0, 0, 0);
    assert_int_equal(gbx_tool_read_text(&c, (const uint8_t *)"x", 1, &text, &err), -1);
    check_err(&err, GBX_ERR_INVALID,
              "read: a.png is an image or PDF file, returned as a content "
              "block");
}

static void test_size_check(void **state)
{
    struct gbx_err *err = NULL;
    struct gbx_tool_call c = read_call("a.txt", 0, 0, 0);
    assert_int_equal(gbx_tool_size_check(&c, GBX_TOOL_TEXT_MAX, &err), 0);
    assert_int_equal(gbx_tool_size_check(&c, (uint64_t)1 << 40, &err), -1);
    check_err(&err, GBX_ERR_LIMIT,
              "read: a.txt is 1099511627776 bytes, exceeds 262144-byte limit. Use bash "
              "(head/tail/sed) to read a slice.");
    c.file_path = "p.jpg";
    assert_int_equal(gbx_tool_size_check(&c, 3932160, &err), 0);
    assert_int_equal(gbx_tool_size_check(&c, 3932161, &err), -1);
    check_err(&err, GBX_ERR_LIMIT,
              "read: p.jpg is 3932161 bytes, exceeds 3932160-byte limit for images (5 MiB as "
              "base64). Use bash to make a smaller copy.");
    c.file_path = "d.pdf";
    assert_int_equal(gbx_tool_size_check(&c, 15728640, &err), 0);
    assert_int_equal(gbx_tool_size_check(&c, 15728641, &err), -1);
    check_err(&err, GBX_ERR_LIMIT,
              "read: d.pdf is 15728641 bytes, exceeds 15728640-byte limit for PDFs (20 MiB as "
              "base64). Use bash to split it or extract its text.");
    struct gbx_tool_call e = {.tool = GBX_TOOL_EDIT, .file_path = "big.c"};
    assert_int_equal(gbx_tool_size_check(&e, GBX_TOOL_TEXT_MAX, &err), 0);
    assert_int_equal(gbx_tool_size_check(&e, GBX_TOOL_TEXT_MAX + 1, &err), -1);
    check_err(&err, GBX_ERR_LIMIT,
              "edit: big.c is 262145 bytes, exceeds 262144-byte limit. Use bash (sed/awk) to "
              "edit a large file.");
    struct gbx_tool_call w = {.tool = GBX_TOOL_WRITE, .file_path = "w"};
    assert_int_equal(gbx_tool_size_check(&w, UINT64_MAX, &err), 0);
}

/* Build a read block and check its JSON against OpenSSL's base64 */
static void check_block(const char *kind, const char *media, const uint8_t *data, size_t len,
                        const char *want_media)
{
    struct gbx_err *err = NULL;
    json_t *b = gbx_tool_read_block(kind, media, data, len, &err);
    if (b == NULL)
        fail_msg("block %s %s %zu: %s", kind, media, len, err->msg);
    assert_string_equal(json_string_value(json_object_get(b, "type")), kind);
    json_t *src = json_object_get(b, "source");
    assert_int_equal(json_object_size(b), 2);
    assert_int_equal(json_object_size(src), 3);
    assert_string_equal(json_string_value(json_object_get(src, "type")), "base64");
    assert_string_equal(json_string_value(json_object_get(src, "media_type")), want_media);
    unsigned char *want = malloc((len + 2) / 3 * 4 + 1);
    int wl = EVP_EncodeBlock(want, data, (int)len);
    assert_int_equal(json_string_length(json_object_get(src, "data")), wl);
    assert_string_equal(json_string_value(json_object_get(src, "data")), (char *)want);
    free(want);
    json_decref(b);
}

static void test_read_block(void **state)
{
    uint8_t buf[4096];
    static const uint8_t png[] = "\x89PNG\r\n\x1a\n";
    static const uint8_t jpg[] = "\xff\xd8\xff\xe0";
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    /* every tail length 0..2 and a few sizes, against EVP_EncodeBlock */
    static const size_t sizes[] = {8, 9, 10, 11, 12, 13, 100, 1000, 4095, 4096};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(sizes); i++) {
        memcpy(buf, png, 8);
        check_block("image", "image/png", buf, sizes[i], "image/png");
        memcpy(buf, "%PDF-1.7", 8);
        check_block("document", "application/pdf", buf, sizes[i], "application/pdf");
    }
    /* the bytes decide the image type: a JPEG named .png is sent as image/jpeg */
    memcpy(buf, jpg, 4);
    check_block("image", "image/png", buf, 100, "image/jpeg");
    memcpy(buf, "GIF89a", 6);
    check_block("image", "image/jpeg", buf, 100, "image/gif");
    memcpy(buf, "GIF87a", 6);
    check_block("image", "image/gif", buf, 6, "image/gif");
    memcpy(buf, "RIFF\0\0\0\0WEBPVP8 ", 16);
    check_block("image", "image/webp", buf, 100, "image/webp");
    /* a PDF header after some junk (within the first KiB) is accepted */
    memset(buf, ' ', 600);
    memcpy(buf + 600, "%PDF-1.4", 8);
    check_block("document", "application/pdf", buf, 700, "application/pdf");

    struct gbx_err *err = NULL;
    memset(buf, 'x', sizeof(buf));
    assert_null(gbx_tool_read_block("image", "image/png", buf, 100, &err));
    check_err(&err, GBX_ERR_INVALID,
              "read: the file is not a PNG, JPEG, GIF or WebP image (its bytes do not match); "
              "use bash to inspect it");
    assert_null(gbx_tool_read_block("image", "image/png", NULL, 0, &err));
    check_err(&err, GBX_ERR_INVALID,
              "read: the file is not a PNG, JPEG, GIF or WebP image (its bytes do not match); "
              "use bash to inspect it");
    assert_null(gbx_tool_read_block("document", "application/pdf", buf, 2000, &err));
    check_err(&err, GBX_ERR_INVALID,
              "read: the file is not a PDF (no %PDF- header); use bash to inspect it");
    assert_null(gbx_tool_read_block("image", "image/svg+xml", buf, 10, &err));
    check_err(&err, GBX_ERR_INVALID, "read: unsupported image type 'image/svg+xml'");
    assert_null(gbx_tool_read_block("document", "text/plain", buf, 10, &err));
    check_err(&err, GBX_ERR_INVALID, "read: unsupported document type 'text/plain'");
    assert_null(gbx_tool_read_block("video", "video/mp4", buf, 10, &err));
    check_err(&err, GBX_ERR_INVALID, "read: unknown block kind 'video'");
    assert_null(gbx_tool_read_block(NULL, "image/png", buf, 10, &err));
    check_err(&err, GBX_ERR_INTERNAL, "read: no block kind");

    /* caps on the base64 size, checked before encoding: the largest image that fits */
    size_t max = (size_t)GBX_TOOL_IMAGE_B64_MAX / 4 * 3;
    uint8_t *img = calloc(1, max + 1);
    memcpy(img, png, 8);
    json_t *b = gbx_tool_read_block("image", "image/png", img, max, &err);
    assert_non_null(b);
    assert_int_equal(json_string_length(json_object_get(json_object_get(b, "source"), "data")),
                     GBX_TOOL_IMAGE_B64_MAX);
    json_decref(b);
    assert_null(gbx_tool_read_block("image", "image/png", img, max + 1, &err));
    check_err(&err, GBX_ERR_LIMIT,
              "read: the image is 3932161 bytes, exceeds 3932160-byte limit for images (5 MiB "
              "as base64). Use bash to make a smaller copy.");
    free(img);
    size_t pmax = (size_t)GBX_TOOL_DOCUMENT_B64_MAX / 4 * 3;
    assert_null(gbx_tool_read_block("document", "application/pdf", buf, pmax + 1, &err));
    check_err(&err, GBX_ERR_LIMIT,
              "read: the PDF is 15728641 bytes, exceeds 15728640-byte limit for PDFs (20 MiB as "
              "base64). Use bash to split it or extract its text.");

    /* a block result */
    memcpy(buf, png, 8);
    json_t *r = gbx_tool_result_block(gbx_tool_read_block("image", "image/png", buf, 8, &err));
    assert_int_equal(json_is_false(json_object_get(r, "is_error")), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(r, "content"), 0), "type")),
                        "image");
    json_decref(r);
}

/* --- edit / write --------------------------------------------------------------------- */
static void test_edit(void **state)
{
    static const struct {
        const char *file, *old, *new;
        int all;
        const char *want; /* NULL: error */
        size_t count;
        const char *msg;
    } cases[] = {
        {"int a = 1;\n", "1", "2", 0, "int a = 2;\n", 1, NULL},
        {"abc", "abc", "", 0, "", 1, NULL},
        {"abc", "b", "xyz", 0, "axyzc", 1, NULL},
        {"a.a.a", "a", "b", 1, "b.b.b", 3, NULL},
        {"a.a.a", "a", "b", 0, NULL, 0, "edit: old_string appears 3 times in f (must be unique)"},
        {"aaa", "aa", "X", 0, "Xa", 1, NULL},
        {"aaa", "aa", "X", 1, "Xa", 1, NULL},
        {"aaaa", "aa", "X", 1, "XX", 2, NULL},
        {"aaaa", "aa", "X", 0, NULL, 0, "edit: old_string appears 2 times in f (must be unique)"},
        {"abababab", "abab", "-", 1, "--", 2, NULL},
        {"aabaabaab", "aab", "$&", 1, "$&$&$&", 3, NULL},
        {"xyz", "q", "r", 0, NULL, 0, "edit: old_string not found in f"},
        {"xyz", "xyzz", "r", 0, NULL, 0, "edit: old_string not found in f"},
        {"", "a", "b", 0, NULL, 0, "edit: old_string not found in f"},
        {"ab", "", "x", 0, NULL, 0,
         "edit: 'old_string' must not be empty (use write to create a file)"},
        {"héllo", "é", "e", 0, "hello", 1, NULL},
        {"a\nb\nc", "\nb\n", "\n", 0, "a\nc", 1, NULL},
        {"foo foo", "foo", "foo foo", 1, "foo foo foo foo", 2, NULL},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        struct gbx_tool_call c = {.tool = GBX_TOOL_EDIT,
                                  .file_path = "f",
                                  .old_string = cases[i].old,
                                  .new_string = cases[i].new,
                                  .replace_all = cases[i].all};
        struct gbx_err *err = NULL;
        char *out = NULL;
        size_t outlen = 99, count = 99;
        int r = gbx_tool_edit_apply(&c, (const uint8_t *)cases[i].file, strlen(cases[i].file), &out,
                                    &outlen, &count, &err);
        if (cases[i].want) {
            if (r != 0)
                fail_msg("case %zu: %s", i, err->msg);
            assert_int_equal(outlen, strlen(cases[i].want));
            assert_string_equal(out, cases[i].want);
            assert_int_equal(count, cases[i].count);
            free(out);
        } else {
            assert_int_equal(r, -1);
            assert_null(out);
            assert_int_equal(outlen, 0);
            assert_int_equal(count, 0);
            check_err(&err, GBX_ERR_INVALID, cases[i].msg);
        }
    }

    struct gbx_tool_call c = {
        .tool = GBX_TOOL_EDIT, .file_path = "f", .old_string = "b", .new_string = "B"};
    struct gbx_err *err = NULL;
    char *out;
    size_t outlen, count;
    /* NUL bytes in the file survive */
    assert_int_equal(
        gbx_tool_edit_apply(&c, (const uint8_t *)"a\0b\0c", 5, &out, &outlen, &count, &err), 0);
    assert_int_equal(outlen, 5);
    assert_memory_equal(out, "a\0B\0c", 5);
    free(out);
    /* invalid UTF-8 */
    assert_int_equal(
        gbx_tool_edit_apply(&c, (const uint8_t *)"b\xff", 2, &out, &outlen, &count, &err), -1);
    check_err(&err, GBX_ERR_INVALID, "edit: f is not UTF-8 text; use bash to edit it");
    /* NULL old_string */
    c.old_string = NULL;
    assert_int_equal(gbx_tool_edit_apply(&c, (const uint8_t *)"b", 1, &out, &outlen, &count, &err),
                     -1);
    check_err(&err, GBX_ERR_INVALID,
              "edit: 'old_string' must not be empty (use write to create a file)");

    /* the input cap and the output cap */
    uint8_t *big = malloc(GBX_TOOL_TEXT_MAX + 1);
    memset(big, 'a', GBX_TOOL_TEXT_MAX + 1);
    c.old_string = "a";
    c.new_string = "b";
    c.replace_all = 1;
    assert_int_equal(gbx_tool_edit_apply(&c, big, GBX_TOOL_TEXT_MAX, &out, &outlen, &count, &err),
                     0);
    assert_int_equal(count, GBX_TOOL_TEXT_MAX);
    assert_int_equal(outlen, GBX_TOOL_TEXT_MAX);
    assert_int_equal(out[0], 'b');
    assert_int_equal(out[outlen - 1], 'b');
    free(out);
    assert_int_equal(
        gbx_tool_edit_apply(&c, big, GBX_TOOL_TEXT_MAX + 1, &out, &outlen, &count, &err), -1);
    check_err(&err, GBX_ERR_LIMIT,
              "edit: f is 262145 bytes, exceeds 262144-byte limit. Use bash (sed/awk) to edit a "
              "large file.");
    c.new_string = "bb"; /* would double the file */
    assert_int_equal(
        gbx_tool_edit_apply(&c, big, GBX_TOOL_TEXT_MAX / 2 + 1, &out, &outlen, &count, &err), -1);
    check_err(&err, GBX_ERR_LIMIT,
              "edit: the result would be 262146 bytes, exceeds 262144-byte limit. Use bash to "
              "edit a large file.");
    /* a worst case for a naive search: "aaa...ab" in "aaaa...a" */
    char *needle = malloc(5001);
    memset(needle, 'a', 5000);
    needle[4999] = 'b';
    needle[5000] = '\0';
    c.old_string = needle;
    c.replace_all = 0;
    assert_int_equal(gbx_tool_edit_apply(&c, big, GBX_TOOL_TEXT_MAX, &out, &outlen, &count, &err),
                     -1);
    check_err(&err, GBX_ERR_INVALID, "edit: old_string not found in f");
    big[GBX_TOOL_TEXT_MAX - 1] = 'b';
    assert_int_equal(gbx_tool_edit_apply(&c, big, GBX_TOOL_TEXT_MAX, &out, &outlen, &count, &err),
                     0);
    assert_int_equal(outlen, GBX_TOOL_TEXT_MAX - 5000 + 2);
    free(out);
    free(needle);
    free(big);
}

static void test_result_strings(void **state)
{
    char *s = gbx_tool_edit_result("src/a.c", 1);
    assert_string_equal(s, "edited src/a.c (1 replacement(s))");
    free(s);
    s = gbx_tool_edit_result("/w/b.c", 12);
    assert_string_equal(s, "edited /w/b.c (12 replacement(s))");
    free(s);
    s = gbx_tool_write_result("notes.md", 0);
    assert_string_equal(s, "wrote 0 bytes to notes.md");
    free(s);
    s = gbx_tool_write_result("é.txt", 2);
    assert_string_equal(s, "wrote 2 bytes to é.txt");
    free(s);
}

/* --- bash ----------------------------------------------------------------------------- */
static void test_bash_script(void **state)
{
    char *s = gbx_tool_bash_script("echo hi", nonce);
    assert_string_equal(s, "eval -- 'echo hi' </dev/null 2>&1; builtin printf '\\n__GBX_'"
                           "'0123456789abcdef_%d__\\n' \"$?\"\n");
    /* the sentinel literal is not in the script */
    assert_null(strstr(s, "__GBX_0123456789abcdef"));
    free(s);
    s = gbx_tool_bash_script("echo 'a' \"b\" '", nonce);
    assert_string_equal(s, "eval -- 'echo '\\''a'\\'' \"b\" '\\''' </dev/null 2>&1; builtin "
                           "printf '\\n__GBX_''0123456789abcdef_%d__\\n' \"$?\"\n");
    free(s);
    s = gbx_tool_bash_script("'", nonce);
    assert_string_equal(s, "eval -- ''\\''' </dev/null 2>&1; builtin printf '\\n__GBX_'"
                           "'0123456789abcdef_%d__\\n' \"$?\"\n");
    free(s);
    s = gbx_tool_bash_script("a\nb", nonce);
    assert_non_null(strstr(s, "eval -- 'a\nb' "));
    free(s);
    assert_null(gbx_tool_bash_script(NULL, nonce));
    char *cmd = malloc(GBX_TOOL_COMMAND_MAX + 2);
    memset(cmd, '\'', GBX_TOOL_COMMAND_MAX);
    cmd[GBX_TOOL_COMMAND_MAX] = '\0';
    s = gbx_tool_bash_script(cmd, nonce);
    assert_non_null(s);
    assert_int_equal(strlen(s), strlen("eval -- '' </dev/null 2>&1; builtin printf '\\n__GBX_''"
                                       "0123456789abcdef_%d__\\n' \"$?\"\n") +
                                    4 * (size_t)GBX_TOOL_COMMAND_MAX);
    free(s);
    cmd[GBX_TOOL_COMMAND_MAX] = 'x';
    cmd[GBX_TOOL_COMMAND_MAX + 1] = '\0';
    assert_null(gbx_tool_bash_script(cmd, nonce));
    free(cmd);
}

/* Feed all of data in pieces cut at the given offsets; returns the feed result of the last */
static int feed_split(struct gbx_tool_bash_out *o, const char *data, size_t len, const size_t *cuts,
                      size_t ncuts, int *status)
{
    size_t pos = 0;
    int r = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        r = gbx_tool_bash_out_feed(o, (const uint8_t *)data + pos, end - pos, status);
        if (r && end < len)
            fail_msg("done early at %zu of %zu", end, len);
        pos = end;
    }
    return r;
}

static void test_bash_out_split(void **state)
{
    const char *data = "hello\nworld\n\n__GBX_0123456789abcdef_3__\n";
    size_t len = strlen(data);
    /* one cut at every byte boundary */
    for (size_t k = 0; k <= len; k++) {
        struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonce);
        int status = -1;
        assert_int_equal(feed_split(o, data, len, &k, 1, &status), 1);
        assert_int_equal(status, 3);
        char *t = gbx_tool_bash_out_text(o);
        assert_string_equal(t, "hello\nworld");
        free(t);
        gbx_tool_bash_out_free(o);
    }
    /* two cuts at every pair of boundaries */
    for (size_t a = 0; a <= len; a++) {
        for (size_t b = a; b <= len; b++) {
            struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonce);
            int status = -1;
            size_t cuts[2] = {a, b};
            assert_int_equal(feed_split(o, data, len, cuts, 2, &status), 1);
            assert_int_equal(status, 3);
            gbx_tool_bash_out_free(o);
        }
    }
    /* byte by byte; the status is not set before the end */
    struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonce);
    for (size_t i = 0; i < len; i++) {
        int status = -7;
        int r = gbx_tool_bash_out_feed(o, (const uint8_t *)data + i, 1, &status);
        assert_int_equal(r, i + 1 == len);
        assert_int_equal(status, r ? 3 : -7);
    }
    /* later feeds change nothing */
    int status = -1;
    assert_int_equal(gbx_tool_bash_out_feed(o, (const uint8_t *)"more\n", 5, &status), 1);
    assert_int_equal(status, 3);
    assert_int_equal(gbx_tool_bash_out_feed(o, NULL, 0, NULL), 1);
    char *t = gbx_tool_bash_out_text(o);
    assert_string_equal(t, "hello\nworld");
    free(t);
    gbx_tool_bash_out_free(o);
    gbx_tool_bash_out_free(NULL);
}

struct outcase {
    const char *data;
    size_t len; /* 0: strlen */
    int done, status;
    const char *text;
};

static void run_outcases(const struct outcase *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].data);
        /* whole, and byte by byte */
        for (int mode = 0; mode < 2; mode++) {
            struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonce);
            int status = -1, r = 0;
            if (mode == 0) {
                r = gbx_tool_bash_out_feed(o, (const uint8_t *)cases[i].data, len, &status);
            } else {
                for (size_t k = 0; k < len; k++)
                    r = gbx_tool_bash_out_feed(o, (const uint8_t *)cases[i].data + k, 1, &status);
            }
            if (r != cases[i].done)
                fail_msg("case %zu mode %d: done %d", i, mode, r);
            if (r)
                assert_int_equal(status, cases[i].status);
            char *t = gbx_tool_bash_out_text(o);
            if (strcmp(t, cases[i].text) != 0)
                fail_msg("case %zu mode %d: text '%s', want '%s'", i, mode, t, cases[i].text);
            free(t);
            gbx_tool_bash_out_free(o);
        }
    }
}

static void test_bash_out_sentinels(void **state)
{
    static const struct outcase cases[] = {
        /* empty output */
        {"\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, ""},
        /* statuses */
        {"x\n\n__GBX_0123456789abcdef_1__\n", 0, 1, 1, "x"},
        {"\n__GBX_0123456789abcdef_127__\n", 0, 1, 127, ""},
        {"\n__GBX_0123456789abcdef_255__\n", 0, 1, 255, ""},
        /* a fake sentinel with another nonce is output */
        {"\n__GBX_fedcba9876543210_0__\nafter\n__GBX_0123456789abcdef_1__\n", 0, 1, 1,
         "\n__GBX_fedcba9876543210_0__\nafter"},
        /* a nonce prefix, then a mismatch that starts the real one */
        {"\n__GBX_0123456789ab\n__GBX_0123456789abcdef_5__\n", 0, 1, 5, "\n__GBX_0123456789ab"},
        /* malformed statuses are output; the newline that breaks them starts the real one */
        {"\n__GBX_0123456789abcdef_1234__\n__GBX_0123456789abcdef_2__\n", 0, 1, 2,
         "\n__GBX_0123456789abcdef_1234__"},
        {"\n__GBX_0123456789abcdef___\n__GBX_0123456789abcdef_4__\n", 0, 1, 4,
         "\n__GBX_0123456789abcdef___"},
        {"\n__GBX_0123456789abcdef_1_x\n__GBX_0123456789abcdef_6__\n", 0, 1, 6,
         "\n__GBX_0123456789abcdef_1_x"},
        {"\n__GBX_0123456789abcdef_1__x\n__GBX_0123456789abcdef_7__\n", 0, 1, 7,
         "\n__GBX_0123456789abcdef_1__x"},
        {"\n__GBX_0123456789abcdef_-1__\n__GBX_0123456789abcdef_8__\n", 0, 1, 8,
         "\n__GBX_0123456789abcdef_-1__"},
        /* uppercase nonce is not ours */
        {"\n__GBX_0123456789ABCDEF_0__\n", 0, 0, 0, "\n__GBX_0123456789ABCDEF_0__"},
        /* without the leading newline it is no sentinel */
        {"x__GBX_0123456789abcdef_0__\n", 0, 0, 0, "x__GBX_0123456789abcdef_0__"},
        /* no sentinel (a timeout): everything is output */
        {"partial\n__GBX_0123", 0, 0, 0, "partial\n__GBX_0123"},
        /* bytes after the sentinel are not output */
        {"a\n__GBX_0123456789abcdef_0__\nstray", 0, 1, 0, "a"},
    };
    run_outcases(cases, GBX_ARRAY_SIZE(cases));
}

static void test_bash_out_clean(void **state)
{
    static const struct outcase cases[] = {
        {"\x1b[31mred\x1b[0m plain\x1b[1;32;4m!\x1b[m\n__GBX_0123456789abcdef_0__\n", 0, 1, 0,
         "red plain!"},
        {"\x1b[?25l\x1b[2K\x1b[1A\x1b[10;20Hx\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, "x"},
        {"\x1b]0;title\x07text\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, "text"},
        {"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, "link"},
        {"\x1b"
         "7a\x1b"
         "8b\x1b"
         "=c\x1b(Bd\x1b)0e\n__GBX_0123456789abcdef_0__\n",
         0, 1, 0, "abcde"},
        /* unterminated: only the introducer goes */
        {"a\x1b[12\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, "a12"},
        {"a\x1b]no end\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, "ano end"},
        {"a\x1b]x\x1b]y\x07z\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, "az"},
        {"a\x1b\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, "a"},
        {"a\x1b", 0, 0, 0, "a"},
        {"a\x1b\xc3\xa9\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, "a\xc3\xa9"},
        /* trailing newlines trimmed, leading kept, CR kept */
        {"\n\na\r\nb\n\n\n\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, "\n\na\r\nb"},
        {"\n\n\n\n__GBX_0123456789abcdef_0__\n", 0, 1, 0, ""},
        /* invalid UTF-8 and NUL become U+FFFD */
        {"a\xff"
         "b\xe2\x82"
         "c\n__GBX_0123456789abcdef_0__\n",
         0, 1, 0,
         "a\xef\xbf\xbd"
         "b\xef\xbf\xbd"
         "c"},
        {"a\0b\n\n__GBX_0123456789abcdef_0__\n", 32, 1, 0,
         "a\xef\xbf\xbd"
         "b"},
    };
    run_outcases(cases, GBX_ARRAY_SIZE(cases));
}

static void test_bash_out_cap(void **state)
{
    /* sizes around the cap, fed in chunks of several sizes */
    static const size_t sizes[] = {GBX_TOOL_OUTPUT_MAX - 1, GBX_TOOL_OUTPUT_MAX,
                                   GBX_TOOL_OUTPUT_MAX + 1, 300 * 1024, 1024 * 1024};
    static const size_t chunks[] = {1, 7, 4096, 65536, SIZE_MAX};
    const char *sent = "\n__GBX_0123456789abcdef_9__\n";
    for (size_t si = 0; si < GBX_ARRAY_SIZE(sizes); si++) {
        size_t n = sizes[si], len = n + strlen(sent);
        char *data = malloc(len + 1);
        for (size_t i = 0; i < n; i++)
            data[i] = (char)('a' + (i % 26));
        memcpy(data + n - 4, "TAIL", 4);
        memcpy(data + n, sent, strlen(sent) + 1);
        for (size_t ci = 0; ci < GBX_ARRAY_SIZE(chunks); ci++) {
            if (chunks[ci] == 1 && n > 400 * 1024)
                continue;
            struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonce);
            int status = -1, r = 0;
            for (size_t pos = 0; pos < len;) {
                size_t k = len - pos < chunks[ci] ? len - pos : chunks[ci];
                r = gbx_tool_bash_out_feed(o, (const uint8_t *)data + pos, k, &status);
                pos += k;
            }
            assert_int_equal(r, 1);
            assert_int_equal(status, 9);
            char *t = gbx_tool_bash_out_text(o);
            size_t tl = strlen(t);
            if (n > GBX_TOOL_OUTPUT_MAX) {
                assert_true(gbx_tool_bash_out_truncated(o));
                assert_memory_equal(t, "[output truncated]\n", 19);
                assert_int_equal(tl, 19 + GBX_TOOL_OUTPUT_MAX);
                assert_memory_equal(t + 19, data + n - GBX_TOOL_OUTPUT_MAX, GBX_TOOL_OUTPUT_MAX);
            } else {
                assert_false(gbx_tool_bash_out_truncated(o));
                assert_int_equal(tl, n);
                assert_memory_equal(t, data, n);
            }
            assert_memory_equal(t + tl - 4, "TAIL", 4);
            free(t);
            gbx_tool_bash_out_free(o);
        }
        free(data);
    }

    /* a character cut by the truncation is dropped, not replaced */
    size_t n = GBX_TOOL_OUTPUT_MAX + 1;
    char *data = malloc(n + 64);
    memset(data, 'x', n);
    memcpy(data, "\xe2\x82\xac", 3); /* the cut falls after its first byte */
    memcpy(data + n, sent, strlen(sent) + 1);
    struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonce);
    int status;
    assert_int_equal(gbx_tool_bash_out_feed(o, (const uint8_t *)data, strlen(data), &status), 1);
    char *t = gbx_tool_bash_out_text(o);
    assert_int_equal(strlen(t), 19 + GBX_TOOL_OUTPUT_MAX - 2);
    assert_memory_equal(t + 19, data + 3, n - 3);
    free(t);
    gbx_tool_bash_out_free(o);

    /* truncated without a sentinel (a timeout) */
    o = gbx_tool_bash_out_new(nonce);
    assert_int_equal(gbx_tool_bash_out_feed(o, (const uint8_t *)data + 3, n - 3, &status), 0);
    assert_int_equal(gbx_tool_bash_out_feed(o, (const uint8_t *)"END", 3, &status), 0);
    t = gbx_tool_bash_out_text(o);
    assert_memory_equal(t, "[output truncated]\n", 19);
    assert_int_equal(strlen(t), 19 + GBX_TOOL_OUTPUT_MAX);
    assert_string_equal(t + strlen(t) - 4, "xEND");
    free(t);
    gbx_tool_bash_out_free(o);
    free(data);
}

static void test_bash_result(void **state)
{
    struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonce);
    int status;
    const char *d = "out\nerr\n\n__GBX_0123456789abcdef_1__\n";
    assert_int_equal(gbx_tool_bash_out_feed(o, (const uint8_t *)d, strlen(d), &status), 1);
    json_t *r = gbx_tool_bash_result(o, status);
    char *s = json_dumps(r, JSON_COMPACT);
    assert_string_equal(s, "{\"content\":[{\"type\":\"text\",\"text\":\"out\\nerr\"}],"
                           "\"is_error\":true}");
    free(s);
    json_decref(r);
    gbx_tool_bash_out_free(o);

    o = gbx_tool_bash_out_new(nonce);
    d = "\n__GBX_0123456789abcdef_2__\n";
    assert_int_equal(gbx_tool_bash_out_feed(o, (const uint8_t *)d, strlen(d), &status), 1);
    r = gbx_tool_bash_result(o, status);
    s = json_dumps(r, JSON_COMPACT);
    assert_string_equal(s, "{\"content\":[{\"type\":\"text\",\"text\":\"exit 2\"}],"
                           "\"is_error\":true}");
    free(s);
    json_decref(r);
    r = gbx_tool_bash_result(o, 0);
    s = json_dumps(r, JSON_COMPACT);
    assert_string_equal(s, "{\"content\":[{\"type\":\"text\",\"text\":\"(no output)\"}],"
                           "\"is_error\":false}");
    free(s);
    json_decref(r);
    gbx_tool_bash_out_free(o);
}

/* Run scripts through a real bash and parse its output with the accumulator */
static void test_bash_real(void **state)
{
    if (access("/bin/bash", X_OK) != 0)
        skip();
    static const struct {
        const char *cmd;
        int status;
        const char *text; /* NULL: only check that it contains want_sub */
        const char *sub;
    } cases[] = {
        {"echo out; echo err >&2", 0, "out\nerr", NULL},
        {"cd /tmp && X=42", 0, "", NULL},
        {"echo $X; pwd", 0, "42\n/tmp", NULL},
        {"echo 'unterminated", 2, NULL, "unexpected EOF"},
        {"}", 2, NULL, "syntax error"},
        {"echo still alive", 0, "still alive", NULL},
        {"cat; read x; echo \"done $?\"", 0, "done 1", NULL},
        {"printf 'no newline'", 0, "no newline", NULL},
        {"(exit 7)", 7, "", NULL},
        {"echo \"it's\" 'a \"quote\"'", 0, "it's a \"quote\"", NULL},
        {"printf '\\n__GBX_fedcba9876543210_0__\\n'; echo after", 0,
         "\n__GBX_fedcba9876543210_0__\nafter", NULL},
        {"cat <<'EOF'\nline $HOME\nEOF\nf() { echo fn; }; f # comment", 0, "line $HOME\nfn", NULL},
        {"printf '\\033[1;31mred\\033[0m\\n'", 0, "red", NULL},
        {"echo -n -e 'a\\xffb'", 0,
         "a\xef\xbf\xbd"
         "b",
         NULL},
        {"-x", 127, NULL, "command not found"},
        {"false", 1, "", NULL},
    };
    char path[] = "/tmp/gbx-test-toolkit-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    char nonces[GBX_ARRAY_SIZE(cases)][17];
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        snprintf(nonces[i], sizeof(nonces[i]), "%016zx", 0xabc000 + i);
        char *s = gbx_tool_bash_script(cases[i].cmd, nonces[i]);
        fputs(s, f);
        free(s);
    }
    char *last = gbx_tool_bash_script("exit 3", nonce);
    fputs(last, f);
    free(last);
    fclose(f);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "env -i /bin/bash --noprofile --norc < %s", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0, got;
    char *out = malloc(cap);
    while ((got = fread(out + len, 1, cap - len, p)) > 0) {
        len += got;
        if (len == cap)
            out = realloc(out, cap *= 2);
    }
    int rc = pclose(p);
    unlink(path);
    assert_int_equal(WEXITSTATUS(rc), 3);

    size_t pos = 0;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        char sent[48];
        snprintf(sent, sizeof(sent), "\n__GBX_%.16s_", nonces[i]);
        const char *s = memmem(out + pos, len - pos, sent, strlen(sent));
        if (s == NULL)
            fail_msg("case %zu (%s): no sentinel", i, cases[i].cmd);
        const char *e = memmem(s + 1, len - (size_t)(s + 1 - out), "__\n", 3);
        assert_non_null(e);
        size_t end = (size_t)(e + 3 - out);
        struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonces[i]);
        int status = -1;
        /* in two pieces cut in the sentinel */
        size_t cut = (size_t)(s - out) + 5;
        assert_int_equal(gbx_tool_bash_out_feed(o, (const uint8_t *)out + pos, cut - pos, &status),
                         0);
        assert_int_equal(gbx_tool_bash_out_feed(o, (const uint8_t *)out + cut, end - cut, &status),
                         1);
        char *t = gbx_tool_bash_out_text(o);
        if (status != cases[i].status)
            fail_msg("case %zu (%s): status %d, output '%s'", i, cases[i].cmd, status, t);
        if (cases[i].text && strcmp(t, cases[i].text) != 0)
            fail_msg("case %zu (%s): '%s'", i, cases[i].cmd, t);
        if (cases[i].sub && strstr(t, cases[i].sub) == NULL)
            fail_msg("case %zu (%s): '%s'", i, cases[i].cmd, t);
        free(t);
        gbx_tool_bash_out_free(o);
        pos = end;
    }
    /* "exit 3" ends the shell: no sentinel */
    struct gbx_tool_bash_out *o = gbx_tool_bash_out_new(nonce);
    int status;
    assert_int_equal(gbx_tool_bash_out_feed(o, (const uint8_t *)out + pos, len - pos, &status), 0);
    gbx_tool_bash_out_free(o);
    free(out);
}

/* --- glob ----------------------------------------------------------------------------- */
static void test_glob_match(void **state)
{
    static const struct {
        const char *pattern, *path;
        int want;
    } cases[] = {
        {"*.c", "a.c", 1},
        {"*.c", ".c", 1},
        {"*.c", "a.h", 0},
        {"*.c", "src/a.c", 0},
        {"*", "a/b", 0},
        {"a*b", "ab", 1},
        {"a*b", "axxb", 1},
        {"a*b", "ax/b", 0},
        {"a*b*c", "abxbc", 1},
        {"**/*.c", "a.c", 1},
        {"**/*.c", "src/a/b.c", 1},
        {"**/*.c", "src/a/b.h", 0},
        {"src/**/*.c", "src/a.c", 1},
        {"src/**/*.c", "src/x/y/a.c", 1},
        {"src/**/*.c", "srcx/a.c", 0},
        {"src/**/*.c", "x/src/a.c", 0},
        {"src/**", "src", 1},
        {"src/**", "src/a", 1},
        {"src/**", "src/a/b", 1},
        {"src/**", "srcx", 0},
        {"src/**", "srcx/a", 0},
        {"**", "a", 1},
        {"**", "a/b/c", 1},
        {"**/b", "b", 1},
        {"**/b", "a/b", 1},
        {"**/b", "xb", 0},
        {"a/**/b", "a/b", 1},
        {"a/**/b", "a/x/b", 1},
        {"a/**/b", "a/x/y/b", 1},
        {"a/**/b", "a/xb", 0},
        {"a/**/**/b", "a/b", 1},
        {"a**b", "axxb", 1},
        {"a**b", "ax/b", 0},
        {"**a", "xa", 1},
        {"**a", "x/a", 0},
        {"?.c", "a.c", 1},
        {"?.c", "ab.c", 0},
        {"?.c", ".c", 0},
        {"a?b", "a/b", 0},
        {"?", "\xc3\xa9", 1},
        {"??", "\xc3\xa9", 0},
        {"[abc].c", "b.c", 1},
        {"[abc].c", "d.c", 0},
        {"[a-c]x", "bx", 1},
        {"[a-c]x", "dx", 0},
        {"[!a-c]", "d", 1},
        {"[!a-c]", "a", 0},
        {"[^a]", "b", 1},
        {"[^a]", "a", 0},
        {"[]]", "]", 1},
        {"[]a]", "a", 1},
        {"[!]]", "]", 0},
        {"[\\]]", "]", 1},
        {"[a-]", "-", 1},
        {"a[/]b", "a/b", 0},
        {"a[!x]b", "a/b", 0},
        {"[\xc3\xa0-\xc3\xa9]", "\xc3\xa8", 1},
        {"[\xc3\xa0-\xc3\xa9]", "e", 0},
        {"*.{c,h}", "a.c", 1},
        {"*.{c,h}", "a.h", 1},
        {"*.{c,h}", "a.o", 0},
        {"{src,include}/**/*.{c,h}", "include/x/y.h", 1},
        {"{src,include}/**/*.{c,h}", "lib/x.c", 0},
        {"{a,b/c}/d", "b/c/d", 1},
        {"{a,{b,c}}x", "cx", 1},
        {"{a,{b,c}}x", "dx", 0},
        {"a{,b}c", "ac", 1},
        {"a{,b}c", "abc", 1},
        {"a{}c", "ac", 1},
        {"{**/x,y}", "a/b/x", 1},
        {"{**/x,y}", "y", 1},
        {"x,y", "x,y", 1},
        {"x}", "x}", 1},
        {"*", ".hidden", 1},
        {".*", ".git", 1},
        {"**/*.c", ".git/a.c", 1},
        {"**", ".a/.b", 1},
        {"\\*", "*", 1},
        {"\\*", "a", 0},
        {"\\{a,b\\}", "{a,b}", 1},
        {"./src/*.c", "src/a.c", 1},
        {"././a", "a", 1},
        {"*.C", "a.c", 0},
        {"a/[b", "a/[b", 0},
        {"{a,b", "a", 0},
        {"a\\", "a\\", 0},
        {"[z-a]", "m", 0},
        {"", "", 1},
        {"", "a", 0},
        {"a", "", 0},
        {"\xc3\xa9*", "\xc3\xa9t\xc3\xa9", 1},
        {"\xff*",
         "\xff"
         "a",
         1},
        {"?", "\xff", 1},
        {"a\xff", "a\xfe", 0},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        if (gbx_tool_glob_match(cases[i].pattern, cases[i].path) != cases[i].want)
            fail_msg("match(%s, %s) != %d", cases[i].pattern, cases[i].path, cases[i].want);
    }
    assert_int_equal(gbx_tool_glob_match(NULL, "a"), 0);
    assert_int_equal(gbx_tool_glob_match("a", NULL), 0);

    /* no exponential blowup: stars against a near miss, and many braces */
    char path[4001], pat[GBX_TOOL_GLOB_PATTERN_MAX + 1];
    memset(path, 'a', 4000);
    path[4000] = '\0';
    assert_int_equal(gbx_tool_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", path), 0);
    assert_int_equal(gbx_tool_glob_match("**/**/**/**/**/**/**/**/**/**/b", path), 0);
    pat[0] = '\0';
    for (int i = 0; i < 100; i++)
        strcat(pat, "{a,aa}");
    memset(path, 'a', 150);
    path[150] = '\0';
    assert_int_equal(gbx_tool_glob_match(pat, path), 1);
    path[149] = 'b';
    assert_int_equal(gbx_tool_glob_match(pat, path), 0);
    /* too deep */
    pat[0] = '\0';
    for (int i = 0; i < 40; i++)
        strcat(pat, "{");
    assert_int_equal(gbx_tool_glob_match(pat, "a"), 0);
    /* too long */
    memset(pat, '*', sizeof(pat) - 1);
    pat[sizeof(pat) - 1] = '\0';
    assert_int_equal(gbx_tool_glob_match(pat, "a"), 1);
    char *huge = malloc(GBX_TOOL_GLOB_PATTERN_MAX + 2);
    memset(huge, '*', GBX_TOOL_GLOB_PATTERN_MAX + 1);
    huge[GBX_TOOL_GLOB_PATTERN_MAX + 1] = '\0';
    assert_int_equal(gbx_tool_glob_match(huge, "a"), 0);
    free(huge);

    /* compiled once */
    struct gbx_err *err = NULL;
    struct gbx_tool_glob *g = gbx_tool_glob_new("src/**/*.{c,h}", &err);
    assert_non_null(g);
    assert_int_equal(gbx_tool_glob_test(g, "src/a.c"), 1);
    assert_int_equal(gbx_tool_glob_test(g, "src/x/a.h"), 1);
    assert_int_equal(gbx_tool_glob_test(g, "a.c"), 0);
    assert_int_equal(gbx_tool_glob_test(NULL, "a.c"), 0);
    gbx_tool_glob_free(g);
    gbx_tool_glob_free(NULL);
    assert_null(gbx_tool_glob_new("/abs", &err));
    check_err(&err, GBX_ERR_INVALID, "glob: absolute pattern not permitted");
}

static void test_glob_check(void **state)
{
    static const struct {
        const char *pattern;
        const char *msg; /* NULL: fine */
    } cases[] = {
        {"**/*.c", NULL},
        {"a/..b/c", NULL},
        {"...", NULL},
        {"a..", NULL},
        {"..a", NULL},
        {"{a,b}", NULL},
        {"[]]", NULL},
        {"\\[", NULL},
        {"", "glob: 'pattern' is required"},
        {NULL, "glob: 'pattern' is required"},
        {"/etc/*", "glob: absolute pattern not permitted"},
        {"/", "glob: absolute pattern not permitted"},
        {"..", "glob: '..' is not permitted in the pattern"},
        {"../x", "glob: '..' is not permitted in the pattern"},
        {"a/../b", "glob: '..' is not permitted in the pattern"},
        {"a/..", "glob: '..' is not permitted in the pattern"},
        {"{..,a}/b", "glob: '..' is not permitted in the pattern"},
        {"{a,..}/b", "glob: '..' is not permitted in the pattern"},
        {"[a", "glob: malformed pattern: an unterminated '['"},
        {"[]", "glob: malformed pattern: an unterminated '['"},
        {"[!", "glob: malformed pattern: an unterminated '['"},
        {"{a,b", "glob: malformed pattern: an unterminated '{'"},
        {"{a,{b}", "glob: malformed pattern: an unterminated '{'"},
        {"a\\", "glob: malformed pattern: a trailing '\\'"},
        {"[z-a]", "glob: malformed pattern: a reversed range in '[...]'"},
        {"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{a}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}",
         "glob: malformed pattern: braces nested too deeply"},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        struct gbx_err *err = NULL;
        int r = gbx_tool_glob_check(cases[i].pattern, &err);
        if (cases[i].msg == NULL) {
            if (r != 0)
                fail_msg("check(%s): %s", cases[i].pattern, err->msg);
        } else {
            if (r != -1)
                fail_msg("check(%s) passed", cases[i].pattern);
            check_err(&err, GBX_ERR_INVALID, cases[i].msg);
        }
    }
}

static void test_glob_result(void **state)
{
    struct gbx_tool_glob_hit hits[] = {
        {"a.c", 100}, {"b.c", 300}, {"src/c.c", 300}, {"d.c", 200}, {"./e.c", -5},
    };
    char *s = gbx_tool_glob_result("/w", hits, GBX_ARRAY_SIZE(hits));
    assert_string_equal(s, "/w/b.c\n/w/src/c.c\n/w/d.c\n/w/a.c\n/w/e.c");
    free(s);
    s = gbx_tool_glob_result("/w/", hits, 1);
    assert_string_equal(s, "/w/b.c");
    free(s);
    s = gbx_tool_glob_result("/", hits, 1);
    assert_string_equal(s, "/b.c");
    free(s);
    s = gbx_tool_glob_result("/w", hits, 0);
    assert_string_equal(s, "no matches");
    free(s);
    s = gbx_tool_glob_result("/w", NULL, 3);
    assert_string_equal(s, "no matches");
    free(s);
    struct gbx_tool_glob_hit bad = {"x\xff.c", 0};
    s = gbx_tool_glob_result("/w", &bad, 1);
    assert_string_equal(s, "/w/x\xef\xbf\xbd.c");
    free(s);

    /* at most 200, the newest */
    enum { N = 450 };
    struct gbx_tool_glob_hit *many = calloc(N, sizeof(*many));
    char(*names)[16] = calloc(N, 16);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], 16, "f%03d", i);
        many[i].path = names[i];
        many[i].mtime_ns = (int64_t)((i * 7919) % N) * 1000000000LL;
    }
    s = gbx_tool_glob_result("/w", many, N);
    int lines = 1;
    for (const char *q = s; *q; q++)
        lines += *q == '\n';
    assert_int_equal(lines, GBX_TOOL_GLOB_RESULTS_MAX);
    /* the first line is the newest (mtime N-1) and mtimes never increase */
    for (int i = 1; i < N; i++)
        assert_true(many[i - 1].mtime_ns >= many[i].mtime_ns);
    char want[32];
    snprintf(want, sizeof(want), "/w/%s\n", many[0].path);
    assert_memory_equal(s, want, strlen(want));
    assert_int_equal(many[0].mtime_ns, (int64_t)(N - 1) * 1000000000LL);
    free(s);
    free(many);
    free(names);
}

/* --- grep ----------------------------------------------------------------------------- */
static void test_grep_result(void **state)
{
    static const struct {
        const char *raw;
        const char *want;
    } cases[] = {
        {"", "no matches"},
        {"\n\n", "no matches"},
        {"/sandbox/src/m.c:1:int main(){return 0;}\n", "/sandbox/src/m.c:1:int main(){return 0;}"},
        {"a.c:1:x\nb.c:22:y\n", "a.c:1:x\nb.c:22:y"},
        {"a.c:1:x\r\nb.c:2:y\r\n", "a.c:1:x\nb.c:2:y"},
        {"a.c:1:no newline", "a.c:1:no newline"},
        {"a.c:1:bad \xff\xfe byte\n", "a.c:1:bad \xef\xbf\xbd\xef\xbf\xbd byte"},
        {"Binary file x.bin matches\n", "Binary file x.bin matches"},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        char *s = gbx_tool_grep_result((const uint8_t *)cases[i].raw, strlen(cases[i].raw));
        assert_string_equal(s, cases[i].want);
        free(s);
    }
    char *s = gbx_tool_grep_result(NULL, 0);
    assert_string_equal(s, "no matches");
    free(s);
    s = gbx_tool_grep_result((const uint8_t *)"a:1:x\0y\n", 8);
    assert_string_equal(s, "a:1:x\xef\xbf\xbdy");
    free(s);

    /* long lines: the text after "path:N:" counts; a ':' in the path is fine */
    size_t cap = 3 * 4096;
    char *raw = malloc(cap);
    int n = snprintf(raw, cap, "long/pa:th.c:12:");
    memset(raw + n, 'x', 2000);
    n += 2000;
    n += snprintf(raw + n, cap - n, "\nd:1:ok\ne:3:");
    memset(raw + n, 'y', 2001);
    n += 2001;
    n += snprintf(raw + n, cap - n, "\nf:4:");
    memset(raw + n, 'z', 2500);
    n += 2500;
    raw[n++] = '\n';
    s = gbx_tool_grep_result((const uint8_t *)raw, (size_t)n);
    assert_int_equal(strncmp(s, "long/pa:th.c:12:xxx", 19), 0);
    assert_non_null(strstr(s, "x\nd:1:ok\n[2 matching lines longer than 2000 bytes omitted]"));
    assert_int_equal(strlen(s), 16 + 2000 + 1 + 6 + 1 + 49);
    free(s);
    /* only long lines */
    s = gbx_tool_grep_result((const uint8_t *)raw + 2017 + 7, (size_t)n - 2017 - 7 - 2506);
    assert_string_equal(s, "[1 matching line longer than 2000 bytes omitted]");
    free(s);
    free(raw);

    /* the output cap keeps whole lines and ends with the marker */
    size_t lines = 3000, ll = 99; /* 100 bytes per line with its newline */
    raw = malloc(lines * (ll + 1));
    for (size_t i = 0; i < lines; i++) {
        char *l = raw + i * (ll + 1);
        memset(l, 'q', ll);
        int h = snprintf(l, ll, "f.c:%zu:", i + 1);
        l[h] = 'q';
        l[ll] = '\n';
    }
    s = gbx_tool_grep_result((const uint8_t *)raw, lines * (ll + 1));
    size_t sl = strlen(s), ml = strlen(GBX_TOOL_GREP_TRUNCATED);
    assert_true(sl <= GBX_TOOL_OUTPUT_MAX + 1 + ml);
    assert_int_equal(sl, (GBX_TOOL_OUTPUT_MAX / 100) * 100 + ml);
    assert_string_equal(s + sl - ml - 1, "\n" GBX_TOOL_GREP_TRUNCATED);
    assert_memory_equal(s, raw, (GBX_TOOL_OUTPUT_MAX / 100) * 100);
    free(s);
    /* exactly at the cap: no marker */
    s = gbx_tool_grep_result((const uint8_t *)raw, (GBX_TOOL_OUTPUT_MAX / 100) * 100);
    assert_null(strstr(s, "[output truncated"));
    free(s);
    free(raw);
}

/* --- results -------------------------------------------------------------------------- */
static void test_result_text(void **state)
{
    static const struct {
        const char *text;
        int is_error;
        const char *want;
    } cases[] = {
        {"hello\n/sandbox", 0,
         "{\"content\":[{\"type\":\"text\",\"text\":\"hello\\n/sandbox\"}],"
         "\"is_error\":false}"},
        {"", 0, "{\"content\":[{\"type\":\"text\",\"text\":\"(no output)\"}],\"is_error\":false}"},
        {NULL, 1, "{\"content\":[{\"type\":\"text\",\"text\":\"(no output)\"}],\"is_error\":true}"},
        {"bad\xc3", 1,
         "{\"content\":[{\"type\":\"text\",\"text\":\"bad\\uFFFD\"}],"
         "\"is_error\":true}"},
        {"tab\tquote\"", 0,
         "{\"content\":[{\"type\":\"text\",\"text\":\"tab\\tquote\\\"\"}],"
         "\"is_error\":false}"},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(cases); i++) {
        json_t *r = gbx_tool_result_text(cases[i].text, cases[i].is_error);
        char *s = json_dumps(r, JSON_COMPACT | JSON_ENSURE_ASCII);
        assert_string_equal(s, cases[i].want);
        free(s);
        json_decref(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_path_join),
        cmocka_unit_test(test_path_inside),
        cmocka_unit_test(test_read_kind),
        cmocka_unit_test(test_read_views),
        cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_size_check),
        cmocka_unit_test(test_read_block),
        cmocka_unit_test(test_edit),
        cmocka_unit_test(test_result_strings),
        cmocka_unit_test(test_bash_script),
        cmocka_unit_test(test_bash_out_split),
        cmocka_unit_test(test_bash_out_sentinels),
        cmocka_unit_test(test_bash_out_clean),
        cmocka_unit_test(test_bash_out_cap),
        cmocka_unit_test(test_bash_result),
        cmocka_unit_test(test_bash_real),
        cmocka_unit_test(test_glob_match),
        cmocka_unit_test(test_glob_check),
        cmocka_unit_test(test_glob_result),
        cmocka_unit_test(test_grep_result),
        cmocka_unit_test(test_result_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
