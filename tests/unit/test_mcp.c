/* SPDX-License-Identifier: MIT */
/* Unit tests for src/mcp/mcp.c, the MCP server's JSON-RPC side: initialize, tools/list,
 * tools/call routed to a stubbed executor and its results mapped to MCP content, and the
 * JSON-RPC errors (-32700, -32600, -32601, -32602), notifications and batches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mcp/mcp.h"

/* ---- a stubbed executor: records each call, answers with a scripted reply ------------------- */

struct stub {
    int calls;
    char name[32];
    char tool_use_id[64];
    char ids[8][64];
    json_t *input;  /* the last input (a reference) */
    json_t *answer; /* what to answer (borrowed), or NULL: fail with fail_msg */
    const char *fail_msg;
};

static int stub_execute(void *arg, const char *tool_use_id, const char *name, json_t *input,
                        json_t **reply, struct gbx_err **err)
{
    struct stub *s = arg;
    snprintf(s->name, sizeof(s->name), "%s", name);
    snprintf(s->tool_use_id, sizeof(s->tool_use_id), "%s", tool_use_id);
    if (s->calls < 8)
        snprintf(s->ids[s->calls], sizeof(s->ids[0]), "%s", tool_use_id);
    s->calls++;
    json_decref(s->input);
    s->input = json_incref(input);
    if (s->answer == NULL)
        return gbx_err_set(err, 0, GBX_ERR_NOT_FOUND, "%s", s->fail_msg);
    *reply = json_incref(s->answer);
    return 0;
}

static const struct gbx_mcp_ops stub_ops = {.execute = stub_execute};

struct fixture {
    struct gbx_mcp m;
    struct stub s;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    gbx_mcp_init(&f->m, "ses-test", "/workspace", &stub_ops, &f->s);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    gbx_mcp_release(&f->m);
    gbx_mcp_release(&f->m); /* twice is fine */
    json_decref(f->s.input);
    free(f);
    return 0;
}

/* One line through the transport entry point; the parsed reply (NULL: none). Every reply is a
 * single line of JSON with "jsonrpc":"2.0". */
static json_t *line(struct fixture *f, const char *text)
{
    char *out = gbx_mcp_handle_line(&f->m, text, strlen(text));
    if (out == NULL)
        return NULL;
    assert_null(strchr(out, '\n'));
    json_error_t je;
    json_t *r = json_loads(out, 0, &je);
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "jsonrpc")), "2.0");
    free(out);
    return r;
}

static json_t *result(json_t *r)
{
    assert_non_null(r);
    assert_null(json_object_get(r, "error"));
    json_t *res = json_object_get(r, "result");
    assert_true(json_is_object(res));
    return res;
}

/* An error reply with code, whose id is want_id (NULL: null). */
static void assert_error(json_t *r, int code, json_t *want_id)
{
    assert_non_null(r);
    assert_null(json_object_get(r, "result"));
    json_t *e = json_object_get(r, "error");
    print_message("error: %s\n", json_string_value(json_object_get(e, "message")));
    assert_int_equal(json_integer_value(json_object_get(e, "code")), code);
    assert_true(json_is_string(json_object_get(e, "message")));
    assert_true(strlen(json_string_value(json_object_get(e, "message"))) > 0);
    json_t *id = json_object_get(r, "id");
    assert_non_null(id);
    if (want_id)
        assert_true(json_equal(id, want_id));
    else
        assert_true(json_is_null(id));
}

static void expect_error(struct fixture *f, const char *text, int code, json_t *want_id)
{
    print_message("in: %s\n", text);
    json_t *r = line(f, text);
    assert_error(r, code, want_id);
    json_decref(r);
    json_decref(want_id);
}

/* ---- initialize and ping ------------------------------------------------------------------- */

static json_t *initialize(struct fixture *f, const char *version)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"%s\",\"capabilities\":{},"
             "\"clientInfo\":{\"name\":\"test\",\"version\":\"1\"}}}",
             version);
    return line(f, buf);
}

static void test_initialize(void **state)
{
    struct fixture *f = *state;
    static const struct {
        const char *ask, *want;
    } v[] = {
        {"2025-06-18", "2025-06-18"},
        {"2025-03-26", "2025-03-26"},
        {"2024-11-05", "2024-11-05"},
        {"2099-01-01", GBX_MCP_PROTOCOL_VERSION}, /* unknown: our latest */
        {"", GBX_MCP_PROTOCOL_VERSION},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        json_t *r = initialize(f, v[i].ask);
        json_t *res = result(r);
        assert_int_equal(json_integer_value(json_object_get(r, "id")), 0);
        assert_string_equal(json_string_value(json_object_get(res, "protocolVersion")), v[i].want);
        json_t *tools = json_object_get(json_object_get(res, "capabilities"), "tools");
        assert_true(json_is_false(json_object_get(tools, "listChanged")));
        json_t *info = json_object_get(res, "serverInfo");
        assert_string_equal(json_string_value(json_object_get(info, "name")), "glovebox");
        assert_string_equal(json_string_value(json_object_get(info, "version")), GBX_VERSION);
        const char *ins = json_string_value(json_object_get(res, "instructions"));
        assert_non_null(ins);
        assert_non_null(strstr(ins, "'ses-test'"));
        assert_non_null(strstr(ins, "/workspace"));
        json_decref(r);
    }
    /* then the initialized notification: no reply */
    assert_null(line(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));

    /* protocolVersion is required and a string */
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
                 GBX_MCP_INVALID_PARAMS, json_integer(1));
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}",
                 GBX_MCP_INVALID_PARAMS, json_integer(1));
    expect_error(f,
                 "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"initialize\","
                 "\"params\":{\"protocolVersion\":20250618}}",
                 GBX_MCP_INVALID_PARAMS, json_string("x"));
}

static void test_ping(void **state)
{
    struct fixture *f = *state;
    json_t *r = line(f, "{\"jsonrpc\":\"2.0\",\"id\":\"p-1\",\"method\":\"ping\"}\n");
    assert_int_equal(json_object_size(result(r)), 0);
    assert_string_equal(json_string_value(json_object_get(r, "id")), "p-1");
    json_decref(r);
    /* ping with params (a _meta) is fine too; a big integer id comes back as given */
    r = line(f, "{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"method\":\"ping\","
                "\"params\":{\"_meta\":{}}}");
    result(r);
    assert_true(json_integer_value(json_object_get(r, "id")) == 9007199254740993LL);
    json_decref(r);
}

/* ---- tools/list ---------------------------------------------------------------------------- */

static void check_tool(json_t *tool, const char *name, const char *const *props,
                       const char *const *required)
{
    assert_string_equal(json_string_value(json_object_get(tool, "name")), name);
    const char *desc = json_string_value(json_object_get(tool, "description"));
    assert_non_null(desc);
    assert_true(strlen(desc) > 40);
    json_t *schema = json_object_get(tool, "inputSchema");
    assert_string_equal(json_string_value(json_object_get(schema, "type")), "object");
    json_t *p = json_object_get(schema, "properties");
    size_t np = 0;
    for (; props[np]; np++) {
        json_t *prop = json_object_get(p, props[np]);
        print_message("%s.%s\n", name, props[np]);
        assert_non_null(prop);
        assert_true(json_is_string(json_object_get(prop, "type")));
        assert_true(json_is_string(json_object_get(prop, "description")));
    }
    assert_int_equal(json_object_size(p), np);
    json_t *req = json_object_get(schema, "required");
    size_t nr = 0;
    for (; required[nr]; nr++)
        assert_string_equal(json_string_value(json_array_get(req, nr)), required[nr]);
    assert_int_equal(json_array_size(req), nr);
}

static void test_tools_list(void **state)
{
    struct fixture *f = *state;
    json_t *r = line(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
    json_t *tools = json_object_get(result(r), "tools");
    assert_int_equal(json_array_size(tools), 6);
    assert_null(json_object_get(result(r), "nextCursor"));
    static const char *const none[] = {NULL};
    check_tool(json_array_get(tools, 0), "bash",
               (const char *const[]){"command", "restart", "timeout_ms", NULL}, none);
    check_tool(json_array_get(tools, 1), "read",
               (const char *const[]){"file_path", "view_range", NULL},
               (const char *const[]){"file_path", NULL});
    check_tool(json_array_get(tools, 2), "write",
               (const char *const[]){"file_path", "content", NULL},
               (const char *const[]){"file_path", "content", NULL});
    check_tool(json_array_get(tools, 3), "edit",
               (const char *const[]){"file_path", "old_string", "new_string", "replace_all", NULL},
               (const char *const[]){"file_path", "old_string", "new_string", NULL});
    check_tool(json_array_get(tools, 4), "glob", (const char *const[]){"pattern", "path", NULL},
               (const char *const[]){"pattern", NULL});
    check_tool(json_array_get(tools, 5), "grep", (const char *const[]){"pattern", "path", NULL},
               (const char *const[]){"pattern", NULL});
    json_t *vr = json_object_get(
        json_object_get(json_object_get(json_array_get(tools, 1), "inputSchema"), "properties"),
        "view_range");
    assert_string_equal(json_string_value(json_object_get(vr, "type")), "array");
    assert_int_equal(json_integer_value(json_object_get(vr, "minItems")), 2);
    assert_int_equal(json_integer_value(json_object_get(vr, "maxItems")), 2);
    json_decref(r);

    /* a cursor this server never gave out */
    expect_error(f,
                 "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\","
                 "\"params\":{\"cursor\":\"abc\"}}",
                 GBX_MCP_INVALID_PARAMS, json_integer(3));
    /* an empty (zero) server still answers with a list */
    struct gbx_mcp zero;
    memset(&zero, 0, sizeof(zero));
    json_t *msg = json_loads("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", 0, NULL);
    r = gbx_mcp_handle(&zero, msg);
    assert_true(json_is_array(json_object_get(result(r), "tools")));
    json_decref(r);
    json_decref(msg);
    gbx_mcp_release(&zero);
}

/* ---- tools/call ---------------------------------------------------------------------------- */

static json_t *call(struct fixture *f, const char *tool, const char *args)
{
    char buf[4096];
    snprintf(buf, sizeof(buf),
             "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"%s\",\"arguments\":%s}}",
             tool, args);
    return line(f, buf);
}

static json_t *content0(json_t *r)
{
    json_t *c = json_object_get(result(r), "content");
    assert_true(json_is_array(c));
    return json_array_get(c, 0);
}

static void test_call_routing(void **state)
{
    struct fixture *f = *state;
    json_t *ok = json_loads(
        "{\"content\":[{\"type\":\"text\",\"text\":\"hi\\n\"}],\"is_error\":false}", 0, NULL);
    f->s.answer = ok;
    static const struct {
        const char *tool, *args;
    } calls[] = {
        {"bash", "{\"command\":\"echo hi\"}"},
        {"bash", "{\"restart\":true}"},
        {"read", "{\"file_path\":\"a.txt\",\"view_range\":[1,-1]}"},
        {"write", "{\"file_path\":\"a.txt\",\"content\":\"x\"}"},
        {"edit", "{\"file_path\":\"a.txt\",\"old_string\":\"x\",\"new_string\":\"y\","
                 "\"replace_all\":true}"},
        {"glob", "{\"pattern\":\"**/*.txt\",\"path\":\"sub\"}"},
        {"grep", "{\"pattern\":\"^h\"}"},
    };
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        json_t *r = call(f, calls[i].tool, calls[i].args);
        assert_int_equal(json_integer_value(json_object_get(r, "id")), 42);
        assert_int_equal(f->s.calls, (int)i + 1);
        assert_string_equal(f->s.name, calls[i].tool);
        json_t *want = json_loads(calls[i].args, 0, NULL);
        assert_true(json_equal(f->s.input, want));
        json_decref(want);
        /* mcp-<16 hex digits>, fresh each call */
        assert_int_equal(strlen(f->s.tool_use_id), 20);
        assert_memory_equal(f->s.tool_use_id, "mcp-", 4);
        assert_int_equal(strspn(f->s.tool_use_id + 4, "0123456789abcdef"), 16);
        for (size_t k = 0; k < i; k++)
            assert_string_not_equal(f->s.ids[k], f->s.tool_use_id);
        json_t *b = content0(r);
        assert_string_equal(json_string_value(json_object_get(b, "type")), "text");
        assert_string_equal(json_string_value(json_object_get(b, "text")), "hi\n");
        assert_true(json_is_false(json_object_get(result(r), "isError")));
        json_decref(r);
    }

    /* arguments omitted or null: an empty input (bash then needs command) */
    json_t *r = line(f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
                        "\"params\":{\"name\":\"bash\",\"arguments\":{\"restart\":true,"
                        "\"timeout_ms\":null}}}");
    result(r);
    json_t *want = json_loads("{\"restart\":true}", 0, NULL);
    assert_true(json_equal(f->s.input, want)); /* null members dropped */
    json_decref(want);
    json_decref(r);

    /* a tool's own failure: is_error -> isError, its content kept */
    json_t *failed = json_loads("{\"content\":[{\"type\":\"text\",\"text\":\"exit status 3\"}],"
                                "\"is_error\":true}",
                                0, NULL);
    f->s.answer = failed;
    r = call(f, "bash", "{\"command\":\"sh -c 'exit 3'\"}");
    assert_true(json_is_true(json_object_get(result(r), "isError")));
    assert_string_equal(json_string_value(json_object_get(content0(r), "text")), "exit status 3");
    json_decref(r);

    /* the call itself failed (an HTTP error): isError with the daemon's message, not an error */
    f->s.answer = NULL;
    f->s.fail_msg = "no session 'ses-test'";
    r = call(f, "read", "{\"file_path\":\"x\"}");
    assert_true(json_is_true(json_object_get(result(r), "isError")));
    assert_string_equal(json_string_value(json_object_get(content0(r), "text")),
                        "no session 'ses-test'");
    json_decref(r);

    json_decref(ok);
    json_decref(failed);
}

static void test_call_content(void **state)
{
    struct fixture *f = *state;
    json_t *answer = json_loads(
        "{\"content\":["
        "{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
        "\"data\":\"iVBORw0KGgo=\"}},"
        "{\"type\":\"document\",\"source\":{\"type\":\"base64\",\"media_type\":"
        "\"application/pdf\",\"data\":\"JVBERi0=\"}},"
        "{\"type\":\"document\",\"source\":{\"type\":\"text\",\"media_type\":\"text/plain\","
        "\"data\":\"plain\"}},"
        "{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://x/y.png\"}},"
        "{\"type\":\"thing\"},"
        "{\"type\":\"text\"},"
        "7"
        "]}",
        0, NULL);
    assert_non_null(answer);
    f->s.answer = answer;
    json_t *r = call(f, "read", "{\"file_path\":\"docs/a b.pdf\"}");
    json_t *c = json_object_get(result(r), "content");
    assert_int_equal(json_array_size(c), 8);
    assert_true(json_is_false(json_object_get(result(r), "isError"))); /* is_error absent */

    json_t *img = json_array_get(c, 1);
    assert_string_equal(json_string_value(json_object_get(img, "type")), "image");
    assert_string_equal(json_string_value(json_object_get(img, "data")), "iVBORw0KGgo=");
    assert_string_equal(json_string_value(json_object_get(img, "mimeType")), "image/png");

    json_t *doc = json_array_get(c, 2);
    assert_string_equal(json_string_value(json_object_get(doc, "type")), "resource");
    json_t *res = json_object_get(doc, "resource");
    assert_string_equal(json_string_value(json_object_get(res, "uri")),
                        "glovebox://ses-test/workspace/docs/a%20b.pdf");
    assert_string_equal(json_string_value(json_object_get(res, "mimeType")), "application/pdf");
    assert_string_equal(json_string_value(json_object_get(res, "blob")), "JVBERi0=");
    assert_null(json_object_get(res, "text"));

    res = json_object_get(json_array_get(c, 3), "resource");
    assert_string_equal(json_string_value(json_object_get(res, "text")), "plain");
    assert_string_equal(json_string_value(json_object_get(res, "mimeType")), "text/plain");

    /* what MCP cannot carry becomes text saying what it was */
    for (size_t i = 4; i < 8; i++) {
        json_t *b = json_array_get(c, i);
        assert_string_equal(json_string_value(json_object_get(b, "type")), "text");
        assert_true(json_is_string(json_object_get(b, "text")));
    }
    assert_non_null(strstr(json_string_value(json_object_get(json_array_get(c, 4), "text")),
                           "https://x/y.png"));
    assert_non_null(
        strstr(json_string_value(json_object_get(json_array_get(c, 5), "text")), "'thing'"));
    assert_string_equal(json_string_value(json_object_get(json_array_get(c, 6), "text")), "");
    json_decref(r);

    /* an absolute path keeps its own directory */
    r = call(f, "read", "{\"file_path\":\"/tmp/r\\u00e9.pdf\"}");
    res = json_object_get(json_array_get(json_object_get(result(r), "content"), 2), "resource");
    assert_string_equal(json_string_value(json_object_get(res, "uri")),
                        "glovebox://ses-test/tmp/r%C3%A9.pdf");
    json_decref(r);

    /* an answer without content is a tool error, not a crash */
    json_decref(answer);
    answer = json_loads("{\"is_error\":false}", 0, NULL);
    f->s.answer = answer;
    r = call(f, "glob", "{\"pattern\":\"*\"}");
    assert_true(json_is_true(json_object_get(result(r), "isError")));
    json_decref(r);
    json_decref(answer);
}

static void test_call_invalid(void **state)
{
    struct fixture *f = *state;
    /* protocol errors: -32602 */
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\"}",
                 GBX_MCP_INVALID_PARAMS, json_integer(7));
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{}}",
                 GBX_MCP_INVALID_PARAMS, json_integer(7));
    expect_error(f,
                 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                 "\"params\":{\"name\":\"rm\",\"arguments\":{}}}",
                 GBX_MCP_INVALID_PARAMS, json_integer(7));
    expect_error(f,
                 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                 "\"params\":{\"name\":\"bash\\u0000x\",\"arguments\":{}}}",
                 GBX_MCP_INVALID_PARAMS, json_integer(7));
    expect_error(f,
                 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                 "\"params\":{\"name\":7}}",
                 GBX_MCP_INVALID_PARAMS, json_integer(7));
    expect_error(f,
                 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                 "\"params\":{\"name\":\"read\",\"arguments\":[\"a\"]}}",
                 GBX_MCP_INVALID_PARAMS, json_integer(7));
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":[1]}",
                 GBX_MCP_INVALID_PARAMS, json_integer(7));
    assert_int_equal(f->s.calls, 0);

    /* arguments that do not fit the schema: a tool error (isError) the model can correct,
     * and the executor is not called */
    static const char *const bad[][2] = {
        {"bash", "{}"},
        {"bash", "{\"restart\":false}"},
        {"bash", "{\"command\":1}"},
        {"bash", "{\"command\":\"x\",\"timeout_ms\":-1}"},
        {"bash", "{\"command\":\"x\",\"timeout_ms\":1.5}"},
        {"read", "{}"},
        {"read", "{\"file_path\":\"a\",\"view_range\":[1]}"},
        {"read", "{\"file_path\":\"a\",\"view_range\":[1,\"2\"]}"},
        {"write", "{\"file_path\":\"a\"}"},
        {"edit", "{\"file_path\":\"a\",\"old_string\":\"x\"}"},
        {"edit", "{\"file_path\":\"a\",\"old_string\":\"x\",\"new_string\":\"y\","
                 "\"replace_all\":\"yes\"}"},
        {"glob", "{\"path\":\"/\"}"},
        {"grep", "{\"pattern\":[]}"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *r = call(f, bad[i][0], bad[i][1]);
        print_message("%s %s -> %s\n", bad[i][0], bad[i][1],
                      json_string_value(json_object_get(content0(r), "text")));
        assert_true(json_is_true(json_object_get(result(r), "isError")));
        assert_non_null(
            strstr(json_string_value(json_object_get(content0(r), "text")), "invalid input"));
        json_decref(r);
    }
    assert_int_equal(f->s.calls, 0);

    /* no executor: a tool error */
    struct gbx_mcp bare;
    gbx_mcp_init(&bare, "s", NULL, NULL, NULL);
    json_t *msg = json_loads("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                             "\"params\":{\"name\":\"grep\",\"arguments\":{\"pattern\":\"x\"}}}",
                             0, NULL);
    json_t *r = gbx_mcp_handle(&bare, msg);
    assert_true(json_is_true(json_object_get(result(r), "isError")));
    json_decref(r);
    json_decref(msg);
    gbx_mcp_release(&bare);
}

/* ---- JSON-RPC errors, notifications, batches ------------------------------------------------ */

static void test_errors(void **state)
{
    struct fixture *f = *state;
    /* -32700: not JSON (id unknown: null) */
    static const char *const garbage[] = {
        "{", "{\"jsonrpc\":\"2.0\",", "nul", "\"\\x\"", "{} {}", "\xff\xfe", "{\"a\":1}x", "[1,]"};
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
        expect_error(f, garbage[i], GBX_MCP_PARSE_ERROR, NULL);
    /* a NUL inside the line is not JSON either */
    char *out = gbx_mcp_handle_line(&f->m, "{}\0{}", 5);
    json_t *r = json_loads(out, 0, NULL);
    assert_error(r, GBX_MCP_PARSE_ERROR, NULL);
    json_decref(r);
    free(out);

    /* -32600: JSON, but not a request */
    expect_error(f, "42", GBX_MCP_INVALID_REQUEST, NULL);
    expect_error(f, "\"ping\"", GBX_MCP_INVALID_REQUEST, NULL);
    expect_error(f, "null", GBX_MCP_INVALID_REQUEST, NULL);
    expect_error(f, "{}", GBX_MCP_INVALID_REQUEST, NULL);
    expect_error(f, "{\"id\":1,\"method\":\"ping\"}", GBX_MCP_INVALID_REQUEST, json_integer(1));
    expect_error(f, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", GBX_MCP_INVALID_REQUEST,
                 json_integer(1));
    expect_error(f, "{\"jsonrpc\":2,\"id\":\"a\",\"method\":\"ping\"}", GBX_MCP_INVALID_REQUEST,
                 json_string("a"));
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1}", GBX_MCP_INVALID_REQUEST, json_integer(1));
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", GBX_MCP_INVALID_REQUEST,
                 json_integer(1));
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"method\":5}", GBX_MCP_INVALID_REQUEST, NULL);
    /* MCP ids are strings or integers, never null */
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
                 GBX_MCP_INVALID_REQUEST, NULL);
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", GBX_MCP_INVALID_REQUEST,
                 NULL);
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", GBX_MCP_INVALID_REQUEST,
                 NULL);
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":\"x\"}",
                 GBX_MCP_INVALID_REQUEST, json_integer(1));

    /* -32601: unknown methods, and the ones not offered */
    static const char *const unknown[] = {
        "tools/lis", "resources/list", "prompts/list", "logging/setLevel", "", "initialize\\u0000"};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        char buf[256];
        snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":\"u%zu\",\"method\":\"%s\"}", i,
                 unknown[i]);
        char idbuf[16];
        snprintf(idbuf, sizeof(idbuf), "u%zu", i);
        expect_error(f, buf, GBX_MCP_METHOD_NOT_FOUND, json_string(idbuf));
    }
    /* -32602: params by position */
    expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":[]}",
                 GBX_MCP_INVALID_PARAMS, json_integer(1));
}

static void test_notifications(void **state)
{
    struct fixture *f = *state;
    static const char *const quiet[] = {
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
        "\"params\":{\"requestId\":3,\"reason\":\"x\"}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\",\"params\":[1]}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"bash\","
        "\"arguments\":{\"command\":\"rm -rf /\"}}}", /* a notification runs nothing */
        /* responses (this server sends no requests): never answered, even malformed ones */
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"x\"}}",
        "{\"error\":1}",
        /* blank lines */
        "",
        "  \r\n",
    };
    for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
        print_message("quiet: %s\n", quiet[i]);
        assert_null(line(f, quiet[i]));
    }
    assert_int_equal(f->s.calls, 0);
}

static void test_batch(void **state)
{
    struct fixture *f = *state;
    /* 2025-06-18 removed JSON-RPC batching: an array is one Invalid Request, id null, and
     * nothing inside it runs */
    expect_error(f,
                 "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
                 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"bash\",\"arguments\":{\"command\":\"x\"}}}]",
                 GBX_MCP_INVALID_REQUEST, NULL);
    expect_error(f, "[]", GBX_MCP_INVALID_REQUEST, NULL);
    expect_error(f, "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]",
                 GBX_MCP_INVALID_REQUEST, NULL);
    assert_int_equal(f->s.calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_initialize, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tools_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_routing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_content, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_invalid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notifications, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
