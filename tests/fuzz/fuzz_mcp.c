/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the MCP server's JSON-RPC side (src/mcp/mcp.c): arbitrary bytes go in
 * as one line of the stdio transport. It never crashes, and what comes out is always one valid
 * JSON-RPC 2.0 response on one line:
 *   - an object with "jsonrpc":"2.0", an "id" (string, integer or null) and exactly one of
 *     "result" (an object) or "error" ({code: a JSON-RPC code, message: a non-empty string});
 *   - the request's id when the input was a request with a valid id;
 *   - no response only for a blank line, a notification or a response (an object without an id,
 *     or with "result"/"error" and no method);
 *   - a tools/call result carries MCP content (text, image, resource) and a boolean isError.
 * The stubbed executor answers with what the arguments' "_reply" member holds (so the fuzzer
 * reaches the content mapping), fails when they hold "_fail", and otherwise answers with one
 * block of each kind.
 *
 * src/mcp is built into the CLI, not the library the fuzz targets link, so the module is
 * compiled in here. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#ifndef GBX_VERSION
#define GBX_VERSION "0.0.0-fuzz"
#endif
#include "mcp/mcp.c"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char default_reply[] =
    "{\"content\":[{\"type\":\"text\",\"text\":\"ok\"},"
    "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
    "\"data\":\"AAAA\"}},"
    "{\"type\":\"document\",\"source\":{\"type\":\"base64\",\"media_type\":\"application/pdf\","
    "\"data\":\"JVBERi0=\"}}],\"is_error\":false}";

static int fuzz_execute(void *arg, const char *tool_use_id, const char *name, json_t *input,
                        json_t **reply, struct gbx_err **err)
{
    CHECK(strncmp(tool_use_id, "mcp-", 4) == 0 && strlen(tool_use_id) == 20);
    CHECK(json_is_object(input));
    json_t *fail = json_object_get(input, "_fail");
    if (json_is_string(fail))
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "%s", json_string_value(fail));
    json_t *r = json_object_get(input, "_reply");
    *reply = r ? json_incref(r) : json_loads(default_reply, 0, NULL);
    CHECK(*reply != NULL);
    return 0;
}

static const struct gbx_mcp_ops fuzz_ops = {.execute = fuzz_execute};

static int valid_code(json_int_t c)
{
    return c == GBX_MCP_PARSE_ERROR || c == GBX_MCP_INVALID_REQUEST ||
           c == GBX_MCP_METHOD_NOT_FOUND || c == GBX_MCP_INVALID_PARAMS;
}

static void check_content(json_t *res)
{
    json_t *content = json_object_get(res, "content");
    CHECK(json_is_array(content));
    CHECK(json_is_boolean(json_object_get(res, "isError")));
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b)
    {
        const char *type = json_string_value(json_object_get(b, "type"));
        CHECK(type != NULL);
        if (strcmp(type, "text") == 0) {
            CHECK(json_is_string(json_object_get(b, "text")));
        } else if (strcmp(type, "image") == 0) {
            CHECK(json_is_string(json_object_get(b, "data")));
            CHECK(json_is_string(json_object_get(b, "mimeType")));
        } else {
            CHECK(strcmp(type, "resource") == 0);
            json_t *r = json_object_get(b, "resource");
            const char *uri = json_string_value(json_object_get(r, "uri"));
            CHECK(uri && strncmp(uri, "glovebox://", 11) == 0);
            for (const char *c = uri; *c; c++)
                CHECK(*c > 0x20 && *c < 0x7f);
            CHECK(json_is_string(json_object_get(r, "mimeType")));
            CHECK(json_is_string(json_object_get(r, "blob")) ^
                  json_is_string(json_object_get(r, "text")));
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gbx_mcp m;
    static int ready;
    if (!ready) {
        gbx_mcp_init(&m, "ses-fuzz", size % 2 ? "/workspace" : NULL, &fuzz_ops, NULL);
        ready = 1;
    }
    char *out = gbx_mcp_handle_line(&m, (const char *)data, size);

    /* what the input was, as the handler's parser sees it */
    json_t *in = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    json_t *in_id = json_object_get(in, "id");
    json_t *in_method = json_object_get(in, "method");
    const char *in_v = json_string_value(json_object_get(in, "jsonrpc"));
    int request = json_is_object(in) && in_v && strcmp(in_v, "2.0") == 0 &&
                  json_is_string(in_method) && (json_is_string(in_id) || json_is_integer(in_id));

    if (out == NULL) {
        size_t blank = 0;
        while (blank < size && strchr(" \t\r\n", data[blank]) && data[blank] != '\0')
            blank++;
        int quiet = json_is_object(in) &&
                    (in_id == NULL || (in_method == NULL && (json_object_get(in, "result") ||
                                                             json_object_get(in, "error"))));
        CHECK(blank == size || quiet);
        CHECK(!request);
        json_decref(in);
        return 0;
    }
    CHECK(strchr(out, '\n') == NULL);
    json_error_t je;
    json_t *r = json_loads(out, 0, &je);
    CHECK(json_is_object(r));
    const char *v = json_string_value(json_object_get(r, "jsonrpc"));
    CHECK(v != NULL && strcmp(v, "2.0") == 0);
    json_t *id = json_object_get(r, "id");
    CHECK(json_is_null(id) || json_is_string(id) || json_is_integer(id));
    json_t *res = json_object_get(r, "result"), *err = json_object_get(r, "error");
    CHECK((res == NULL) != (err == NULL));
    CHECK(json_object_size(r) == 3);
    if (err) {
        CHECK(json_is_object(err));
        CHECK(json_is_integer(json_object_get(err, "code")));
        CHECK(valid_code(json_integer_value(json_object_get(err, "code"))));
        const char *msg = json_string_value(json_object_get(err, "message"));
        CHECK(msg != NULL && msg[0] != '\0');
        if (in == NULL)
            CHECK(json_integer_value(json_object_get(err, "code")) == GBX_MCP_PARSE_ERROR);
    } else {
        CHECK(json_is_object(res));
        CHECK(request); /* only a request gets a result */
        if (json_object_get(res, "content"))
            check_content(res);
    }
    if (request)
        CHECK(json_equal(id, in_id));
    json_decref(r);
    json_decref(in);
    free(out);
    return 0;
}
