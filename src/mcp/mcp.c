/* SPDX-License-Identifier: MIT */
/* The MCP server's JSON-RPC side: message classification, initialize, ping, tools/list and
 * tools/call, and the mapping of the daemon's tool results (Anthropic content blocks) onto MCP
 * content. No I/O: tool calls go through the caller's executor (mcp.h). */
#include "mcp/mcp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"

/* The six tools of the Claude agent toolset, with the input fields and required lists of the
 * tool contract (docs: managed-agents-worker §6). bash's "command" is required unless
 * "restart" is true, which a plain required list cannot say: it is checked in check_args. */
static const char tools_json[] =
    "["
    "{\"name\":\"bash\",\"title\":\"Bash\","
    "\"description\":\"Run a shell command in the session's sandbox. One persistent bash shell "
    "per session: the working directory, environment variables and shell state carry over "
    "between calls; it starts in the session's working directory; stdin is /dev/null. stdout "
    "and stderr are merged; output over 100 KiB keeps its tail, prefixed [output truncated]. A "
    "non-zero exit status is reported as an error, with the output. The default timeout is 120 "
    "seconds (timeout_ms overrides it); on a timeout the shell is killed and the next call gets "
    "a fresh one. restart: true starts a new shell instead of running a command.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"description\":\"The command to run (bash syntax). "
    "Required unless restart is true.\"},"
    "\"restart\":{\"type\":\"boolean\",\"description\":\"Kill the shell and start a new one "
    "(command is then not needed).\"},"
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"Timeout in "
    "milliseconds; 0 or absent: 120000.\"}}},"
    "\"annotations\":{\"title\":\"Bash\",\"readOnlyHint\":false,\"destructiveHint\":true,"
    "\"idempotentHint\":false,\"openWorldHint\":true}},"

    "{\"name\":\"read\",\"title\":\"Read file\","
    "\"description\":\"Read a file in the session's sandbox. A text file (UTF-8, at most 256 "
    "KiB) comes back as its raw text, without line numbers; view_range selects lines. A .png, "
    ".jpg, .jpeg, .gif or .webp file comes back as an image, a .pdf as a document (no "
    "view_range for those). Paths are relative to the session's working directory and must "
    "stay inside it. A directory is an error: use glob or bash to list one.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"file_path\":{\"type\":\"string\",\"description\":\"The file to read.\"},"
    "\"view_range\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,"
    "\"maxItems\":2,\"description\":\"[start_line, end_line]: 1-based and inclusive; end_line 0 "
    "or less reads to the end of the file.\"}},"
    "\"required\":[\"file_path\"]},"
    "\"annotations\":{\"title\":\"Read file\",\"readOnlyHint\":true,\"openWorldHint\":false}},"

    "{\"name\":\"write\",\"title\":\"Write file\","
    "\"description\":\"Write a whole file in the session's sandbox: parent directories are "
    "created, an existing file is replaced. Paths are relative to the session's working "
    "directory and must stay inside it.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"file_path\":{\"type\":\"string\",\"description\":\"The file to write.\"},"
    "\"content\":{\"type\":\"string\",\"description\":\"The whole content of the file.\"}},"
    "\"required\":[\"file_path\",\"content\"]},"
    "\"annotations\":{\"title\":\"Write file\",\"readOnlyHint\":false,\"destructiveHint\":true,"
    "\"idempotentHint\":true,\"openWorldHint\":false}},"

    "{\"name\":\"edit\",\"title\":\"Edit file\","
    "\"description\":\"Replace an exact substring of a file in the session's sandbox. "
    "old_string must occur exactly once unless replace_all is true (then every occurrence is "
    "replaced); no occurrence is an error. Text files of at most 256 KiB. Paths are relative "
    "to the session's working directory and must stay inside it.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"file_path\":{\"type\":\"string\",\"description\":\"The file to edit.\"},"
    "\"old_string\":{\"type\":\"string\",\"description\":\"The exact text to replace.\"},"
    "\"new_string\":{\"type\":\"string\",\"description\":\"The text to put in its place.\"},"
    "\"replace_all\":{\"type\":\"boolean\",\"description\":\"Replace every occurrence "
    "(default: false).\"}},"
    "\"required\":[\"file_path\",\"old_string\",\"new_string\"]},"
    "\"annotations\":{\"title\":\"Edit file\",\"readOnlyHint\":false,\"destructiveHint\":true,"
    "\"idempotentHint\":false,\"openWorldHint\":false}},"

    "{\"name\":\"glob\",\"title\":\"Find files\","
    "\"description\":\"Find files whose path matches a glob pattern (doublestar: ** matches any "
    "number of directories, e.g. **/*.c) under path, the session's working directory by "
    "default. Newest first, at most 200; 'no matches' when none. Absolute patterns and .. "
    "segments are refused.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"pattern\":{\"type\":\"string\",\"description\":\"The glob pattern, relative to path.\"},"
    "\"path\":{\"type\":\"string\",\"description\":\"The directory to search (default: the "
    "working directory).\"}},"
    "\"required\":[\"pattern\"]},"
    "\"annotations\":{\"title\":\"Find files\",\"readOnlyHint\":true,\"openWorldHint\":false}},"

    "{\"name\":\"grep\",\"title\":\"Search file contents\","
    "\"description\":\"Search the contents of files under path (the session's working directory "
    "by default) for a regular expression. Each match is a line path:line_number:text; output "
    "is capped at 100 KiB; 'no matches' when none.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"pattern\":{\"type\":\"string\",\"description\":\"The regular expression.\"},"
    "\"path\":{\"type\":\"string\",\"description\":\"The file or directory to search (default: "
    "the working directory).\"}},"
    "\"required\":[\"pattern\"]},"
    "\"annotations\":{\"title\":\"Search file contents\",\"readOnlyHint\":true,"
    "\"openWorldHint\":false}}"
    "]";

static const char *const versions[] = {GBX_MCP_PROTOCOL_VERSION, "2025-03-26", "2024-11-05"};

/* ---- small helpers ------------------------------------------------------------------------ */

/* The length of s cut to at most max bytes, at a UTF-8 character boundary. */
static int clip(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    return (int)n;
}

/* A JSON string for a message of ours; never NULL (jansson refuses invalid UTF-8, which clip
 * and the callers avoid, but a response must carry its message in any case). */
static json_t *str_new(const char *s)
{
    json_t *j = json_string(s);
    return j ? j : json_string("(message not valid UTF-8)");
}

static json_t *str_fmt(const char *fmt, ...) GBX_PRINTF(1, 2);
static json_t *str_fmt(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = gbx_vasprintf(fmt, ap);
    va_end(ap);
    json_t *j = str_new(s);
    free(s);
    return j;
}

/* A JSON string is a name when it has no NUL inside (JSON_ALLOW_NUL lets "\u0000" through). */
static const char *name_of(json_t *j)
{
    const char *s = json_string_value(j);
    return s && strlen(s) == json_string_length(j) ? s : NULL;
}

static int is_id(json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

static json_t *response(json_t *id, const char *key, json_t *val)
{
    json_t *r = json_object();
    json_object_set_new(r, "jsonrpc", json_string("2.0"));
    json_object_set(r, "id", id ? id : json_null());
    json_object_set_new(r, key, val);
    return r;
}

static json_t *error_new(json_t *id, int code, json_t *message)
{
    json_t *e = json_object();
    json_object_set_new(e, "code", json_integer(code));
    json_object_set_new(e, "message", message);
    return response(id, "error", e);
}

json_t *gbx_mcp_error(json_t *id, int code, const char *message)
{
    return error_new(is_id(id) ? id : NULL, code, str_new(message));
}

/* ---- tool results ------------------------------------------------------------------------- */

static json_t *text_block(json_t *text)
{
    json_t *b = json_object();
    json_object_set_new(b, "type", json_string("text"));
    json_object_set_new(b, "text", text);
    return b;
}

/* A CallToolResult whose only content is text (a new string). */
static json_t *tool_error(json_t *text)
{
    json_t *content = json_array();
    json_array_append_new(content, text_block(text));
    json_t *r = json_object();
    json_object_set_new(r, "content", content);
    json_object_set_new(r, "isError", json_true());
    return r;
}

/* glovebox://SESSION/ABSOLUTE-PATH, percent-encoded (and so plain ASCII) but for '/'. */
static json_t *file_uri(struct gbx_mcp *m, json_t *args)
{
    const char *path = json_string_value(json_object_get(args, "file_path"));
    if (path == NULL)
        path = "";
    const char *dir = path[0] == '/' ? "" : m->workdir ? m->workdir : "";
    gbx_autofree char *full = gbx_asprintf("%s/%s", dir, path[0] == '/' ? path + 1 : path);
    const char *parts[2] = {m->session ? m->session : "", full};
    size_t need = strlen("glovebox://") + 3 * (strlen(parts[0]) + strlen(parts[1])) + 1;
    gbx_autofree char *uri = gbx_xmalloc(need);
    size_t n = (size_t)snprintf(uri, need, "glovebox://");
    static const char hex[] = "0123456789ABCDEF";
    for (int p = 0; p < 2; p++)
        for (const unsigned char *c = (const unsigned char *)parts[p]; *c; c++) {
            if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                strchr("-._~", *c) || (*c == '/' && p == 1)) {
                uri[n++] = (char)*c;
            } else {
                uri[n++] = '%';
                uri[n++] = hex[*c >> 4];
                uri[n++] = hex[*c & 15];
            }
        }
    uri[n] = '\0';
    return str_new(uri);
}

/* The text that stands for a block MCP cannot carry. */
static json_t *fallback(const char *what, json_t *b)
{
    const char *type = json_string_value(json_object_get(b, "type"));
    json_t *src = json_object_get(b, "source");
    const char *stype = json_string_value(json_object_get(src, "type"));
    const char *url = json_string_value(json_object_get(src, "url"));
    if (url)
        return text_block(str_fmt("[%s: %.*s]", what, clip(url, 2048), url));
    if (type == NULL)
        type = "";
    if (stype == NULL)
        stype = "";
    return text_block(str_fmt("[%s not representable in MCP (type '%.*s', source '%.*s')]", what,
                              clip(type, 64), type, clip(stype, 64), stype));
}

/* One content block of the daemon's answer (Anthropic's shapes) as MCP content:
 *   text                            -> {type:text, text}
 *   image, base64 source            -> {type:image, data, mimeType}
 *   document, base64 source (a PDF) -> {type:resource, resource:{uri, mimeType, blob}}
 *   document, text source           -> {type:resource, resource:{uri, mimeType, text}}
 * where uri is glovebox://SESSION/PATH of the file read. Anything else (a url source, an
 * unknown type) becomes a text block that says what it was. */
static json_t *map_block(struct gbx_mcp *m, json_t *args, json_t *b)
{
    const char *type = json_string_value(json_object_get(b, "type"));
    json_t *src = json_object_get(b, "source");
    const char *stype = json_string_value(json_object_get(src, "type"));
    json_t *data = json_object_get(src, "data");
    json_t *media = json_object_get(src, "media_type");
    if (type && strcmp(type, "text") == 0) {
        json_t *t = json_object_get(b, "text");
        return text_block(json_is_string(t) ? json_incref(t) : json_string(""));
    }
    if (type && strcmp(type, "image") == 0) {
        if (!stype || strcmp(stype, "base64") != 0 || !json_is_string(data) ||
            !json_is_string(media))
            return fallback("image", b);
        json_t *r = json_object();
        json_object_set_new(r, "type", json_string("image"));
        json_object_set(r, "data", data);
        json_object_set(r, "mimeType", media);
        return r;
    }
    if (type && strcmp(type, "document") == 0) {
        int text = stype && strcmp(stype, "text") == 0;
        if (!stype || (!text && strcmp(stype, "base64") != 0) || !json_is_string(data))
            return fallback("document", b);
        json_t *res = json_object();
        json_object_set_new(res, "uri", file_uri(m, args));
        if (json_is_string(media))
            json_object_set(res, "mimeType", media);
        else
            json_object_set_new(res, "mimeType",
                                json_string(text ? "text/plain" : "application/octet-stream"));
        json_object_set(res, text ? "text" : "blob", data);
        json_t *r = json_object();
        json_object_set_new(r, "type", json_string("resource"));
        json_object_set_new(r, "resource", res);
        return r;
    }
    return text_block(str_fmt("[content block of type '%.*s' not representable in MCP]",
                              clip(type ? type : "", 64), type ? type : ""));
}

/* The daemon's {"content": [...], "is_error": bool} as a CallToolResult. */
static json_t *map_reply(struct gbx_mcp *m, json_t *args, json_t *reply)
{
    json_t *content = json_object_get(reply, "content");
    if (!json_is_array(content))
        return tool_error(str_new("gloveboxd answered without content"));
    json_t *out = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b)
    {
        json_array_append_new(out, map_block(m, args, b));
    }
    json_t *r = json_object();
    json_object_set_new(r, "content", out);
    json_object_set_new(r, "isError",
                        json_boolean(json_is_true(json_object_get(reply, "is_error"))));
    return r;
}

/* ---- tools/call --------------------------------------------------------------------------- */

static json_t *find_tool(struct gbx_mcp *m, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(m->tools, i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            return t;
    }
    return NULL;
}

/* One argument against its property schema (the few JSON Schema keywords the tools use). */
static int check_value(json_t *prop, json_t *v)
{
    const char *type = json_string_value(json_object_get(prop, "type"));
    if (type == NULL)
        return 0;
    if (strcmp(type, "string") == 0)
        return json_is_string(v) ? 0 : -1;
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v) ? 0 : -1;
    if (strcmp(type, "integer") == 0) {
        json_t *min = json_object_get(prop, "minimum");
        if (!json_is_integer(v))
            return -1;
        return min && json_integer_value(v) < json_integer_value(min) ? -1 : 0;
    }
    if (strcmp(type, "array") == 0) {
        json_t *lo = json_object_get(prop, "minItems"), *hi = json_object_get(prop, "maxItems");
        json_t *items = json_object_get(prop, "items");
        if (!json_is_array(v) || (lo && json_array_size(v) < (size_t)json_integer_value(lo)) ||
            (hi && json_array_size(v) > (size_t)json_integer_value(hi)))
            return -1;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (items && check_value(items, e) < 0)
                return -1;
        }
        return 0;
    }
    return 0;
}

static const char *a_type(json_t *prop)
{
    const char *type = json_string_value(json_object_get(prop, "type"));
    if (type && strcmp(type, "array") == 0)
        return "an array of 2 integers";
    if (type && strcmp(type, "integer") == 0)
        return "an integer of at least 0";
    if (type && strcmp(type, "boolean") == 0)
        return "a boolean";
    return "a string";
}

/* The arguments against the tool's input schema: required members present, known members of
 * their type. Unknown members pass through to the daemon. NULL, or why not (a new string). */
static json_t *check_args(json_t *tool, json_t *args)
{
    const char *name = json_string_value(json_object_get(tool, "name"));
    json_t *schema = json_object_get(tool, "inputSchema");
    json_t *props = json_object_get(schema, "properties");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(schema, "required"), i, r)
    {
        if (json_object_get(args, json_string_value(r)) == NULL)
            return str_fmt("invalid input for tool '%s': '%s' is required", name,
                           json_string_value(r));
    }
    if (strcmp(name, "bash") == 0 && !json_is_true(json_object_get(args, "restart")) &&
        json_object_get(args, "command") == NULL)
        return str_fmt("invalid input for tool 'bash': 'command' is required unless 'restart' "
                       "is true");
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v)
    {
        json_t *prop = json_object_get(props, key);
        if (prop && check_value(prop, v) < 0)
            return str_fmt("invalid input for tool '%s': '%s' must be %s", name, key, a_type(prop));
    }
    return NULL;
}

/* mcp-<16 hex digits>: a fresh tool_use_id for each call. */
static void new_tool_use_id(struct gbx_mcp *m, char *buf, size_t size)
{
    uint64_t r;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
            (m->calls * 0x9e3779b97f4a7c15ull) ^ (uint64_t)getpid() << 40;
    }
    snprintf(buf, size, "mcp-%016llx", (unsigned long long)r);
}

static json_t *tools_call(struct gbx_mcp *m, json_t *id, json_t *params)
{
    const char *name = name_of(json_object_get(params, "name"));
    if (name == NULL)
        return gbx_mcp_error(id, GBX_MCP_INVALID_PARAMS,
                             "tools/call needs \"name\": the name of a tool (see tools/list)");
    json_t *tool = find_tool(m, name);
    if (tool == NULL)
        return error_new(id, GBX_MCP_INVALID_PARAMS,
                         str_fmt("unknown tool '%.*s' (the tools are bash, read, write, edit, "
                                 "glob, grep)",
                                 clip(name, 64), name));
    json_t *given = json_object_get(params, "arguments");
    if (given && !json_is_null(given) && !json_is_object(given))
        return gbx_mcp_error(id, GBX_MCP_INVALID_PARAMS, "\"arguments\" must be an object");
    /* members set to null mean absent (what some clients send for an optional field) */
    json_t *args = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(given, key, v)
    {
        if (!json_is_null(v))
            json_object_set(args, key, v);
    }
    /* invalid arguments are a tool error the model can correct, not a protocol error (the
     * MCP revisions after 2025-06-18 say so explicitly) */
    json_t *why = check_args(tool, args);
    if (why) {
        json_decref(args);
        return response(id, "result", tool_error(why));
    }
    json_t *result;
    if (m->ops == NULL || m->ops->execute == NULL) {
        result = tool_error(str_new("no session to run the tool in"));
    } else {
        char tool_use_id[32];
        new_tool_use_id(m, tool_use_id, sizeof(tool_use_id));
        json_t *reply = NULL;
        struct gbx_err *err = NULL;
        int r = m->ops->execute(m->arg, tool_use_id, name, args, &reply, &err);
        m->calls++;
        if (r < 0)
            result = tool_error(str_new(err && err->msg ? err->msg : "the tool call failed"));
        else
            result = map_reply(m, args, reply);
        json_decref(reply);
        gbx_err_free(err);
    }
    json_decref(args);
    return response(id, "result", result);
}

/* ---- the other methods -------------------------------------------------------------------- */

static json_t *initialize(struct gbx_mcp *m, json_t *id, json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    if (want == NULL)
        return gbx_mcp_error(id, GBX_MCP_INVALID_PARAMS,
                             "initialize needs \"protocolVersion\" (a string)");
    const char *version = versions[0];
    for (size_t i = 0; i < GBX_ARRAY_SIZE(versions); i++)
        if (strcmp(want, versions[i]) == 0)
            version = versions[i];
    json_t *r = json_object();
    json_object_set_new(r, "protocolVersion", json_string(version));
    json_object_set_new(r, "capabilities", json_pack("{s:{s:b}}", "tools", "listChanged", 0));
    json_object_set_new(r, "serverInfo",
                        json_pack("{s:s,s:s,s:s}", "name", "glovebox", "title", "Glovebox",
                                  "version", GBX_VERSION));
    const char *s = m->session ? m->session : "";
    const char *w = m->workdir ? m->workdir : "";
    json_object_set_new(
        r, "instructions",
        str_fmt("These tools act on Glovebox session '%.*s': an isolated Linux sandbox%s%.*s%s. "
                "File paths are relative to that working directory; the file tools reach the "
                "whole sandbox, as bash does, unless the session was created with a narrower "
                "tools_root. bash keeps one shell across calls (cd and exported variables "
                "persist). Files in the working directory persist for the life of the session.",
                clip(s, 256), s, *w ? " whose working directory is '" : "", clip(w, 1024), w,
                *w ? "'" : ""));
    return response(id, "result", r);
}

static json_t *tools_list(struct gbx_mcp *m, json_t *id, json_t *params)
{
    json_t *cursor = json_object_get(params, "cursor");
    if (cursor && !json_is_null(cursor))
        return gbx_mcp_error(id, GBX_MCP_INVALID_PARAMS,
                             "invalid cursor: tools/list answers in one page");
    json_t *r = json_object();
    json_object_set_new(r, "tools", m->tools ? json_incref(m->tools) : json_array());
    return response(id, "result", r);
}

static int method_is(const char *method, const char *name)
{
    return method && strcmp(method, name) == 0;
}

json_t *gbx_mcp_handle(struct gbx_mcp *m, json_t *msg)
{
    if (json_is_array(msg))
        return gbx_mcp_error(NULL, GBX_MCP_INVALID_REQUEST,
                             "JSON-RPC batches are not supported (MCP 2025-06-18 removed them): "
                             "send one message per line");
    if (!json_is_object(msg))
        return gbx_mcp_error(NULL, GBX_MCP_INVALID_REQUEST, "a JSON-RPC message is a JSON object");
    json_t *id = json_object_get(msg, "id");
    json_t *method = json_object_get(msg, "method");
    /* a response (to a request this server never sends): never answer one, lest two peers
     * answer each other's errors forever */
    if (method == NULL && (json_object_get(msg, "result") || json_object_get(msg, "error")))
        return NULL;
    json_t *echo = is_id(id) ? id : NULL;
    const char *v = json_string_value(json_object_get(msg, "jsonrpc"));
    if (v == NULL || strcmp(v, "2.0") != 0)
        return gbx_mcp_error(echo, GBX_MCP_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
    if (!json_is_string(method))
        return gbx_mcp_error(echo, GBX_MCP_INVALID_REQUEST, "\"method\" must be a string");
    if (id && !is_id(id)) /* MCP: a string or an integer, never null */
        return gbx_mcp_error(NULL, GBX_MCP_INVALID_REQUEST,
                             "\"id\" must be a string or an integer");
    json_t *params = json_object_get(msg, "params");
    if (json_is_null(params))
        params = NULL;
    if (params && !json_is_object(params) && !json_is_array(params))
        return gbx_mcp_error(echo, GBX_MCP_INVALID_REQUEST, "\"params\" must be an object");
    if (id == NULL) /* a notification (initialized, cancelled, ...): nothing to answer */
        return NULL;
    if (params && !json_is_object(params))
        return gbx_mcp_error(id, GBX_MCP_INVALID_PARAMS, "\"params\" must be an object");

    const char *name = name_of(method);
    if (method_is(name, "initialize"))
        return initialize(m, id, params);
    if (method_is(name, "ping"))
        return response(id, "result", json_object());
    if (method_is(name, "tools/list"))
        return tools_list(m, id, params);
    if (method_is(name, "tools/call")) {
        if (params == NULL)
            return gbx_mcp_error(id, GBX_MCP_INVALID_PARAMS, "tools/call needs params");
        return tools_call(m, id, params);
    }
    if (name == NULL)
        return gbx_mcp_error(id, GBX_MCP_METHOD_NOT_FOUND, "no method has a NUL in its name");
    return error_new(id, GBX_MCP_METHOD_NOT_FOUND,
                     str_fmt("method '%.*s' not found (this server offers initialize, ping, "
                             "tools/list, tools/call)",
                             clip(name, 64), name));
}

char *gbx_mcp_handle_line(struct gbx_mcp *m, const char *line, size_t len)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n'))
        i++;
    if (i == len)
        return NULL;
    json_error_t je;
    json_t *msg = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    json_t *resp;
    if (msg == NULL) {
        /* jansson's text may quote the input: keep it printable ASCII */
        for (char *c = je.text; *c; c++)
            if (*c < 0x20 || *c > 0x7e)
                *c = '?';
        resp = error_new(NULL, GBX_MCP_PARSE_ERROR,
                         str_fmt("parse error: %s (at byte %d)", je.text, je.position));
    } else {
        resp = gbx_mcp_handle(m, msg);
        json_decref(msg);
    }
    if (resp == NULL)
        return NULL;
    char *out = json_dumps(resp, JSON_COMPACT);
    json_decref(resp);
    GBX_BUG_ON(out == NULL);
    return out;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

void gbx_mcp_init(struct gbx_mcp *m, const char *session, const char *workdir,
                  const struct gbx_mcp_ops *ops, void *arg)
{
    memset(m, 0, sizeof(*m));
    m->ops = ops;
    m->arg = arg;
    m->session = gbx_xstrdup(session ? session : "");
    m->workdir = workdir && *workdir ? gbx_xstrdup(workdir) : NULL;
    json_error_t je;
    m->tools = json_loads(tools_json, 0, &je);
    GBX_BUG_ON(m->tools == NULL);
}

void gbx_mcp_release(struct gbx_mcp *m)
{
    free(m->session);
    free(m->workdir);
    json_decref(m->tools);
    m->session = m->workdir = NULL;
    m->tools = NULL;
}
