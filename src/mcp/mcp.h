/* SPDX-License-Identifier: MIT */
/* An MCP server (Model Context Protocol, revision 2025-06-18) for the Claude agent toolset of
 * one Glovebox session: the JSON-RPC 2.0 side, with no I/O of its own. A message goes in, the
 * response (or nothing, for a notification) comes out; the tool calls themselves go through an
 * executor the caller supplies (the CLI's calls POST /v1/sessions/{id}/execute). The stdio
 * transport around it (one message per line) is src/cli/mcp.c.
 *
 * What it answers: initialize, ping, tools/list, tools/call; notifications are accepted and
 * ignored; batches (JSON arrays) are refused with -32600, as 2025-06-18 removed them. */
#ifndef GBX_MCP_MCP_H
#define GBX_MCP_MCP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* JSON-RPC 2.0 error codes */
#define GBX_MCP_PARSE_ERROR (-32700)
#define GBX_MCP_INVALID_REQUEST (-32600)
#define GBX_MCP_METHOD_NOT_FOUND (-32601)
#define GBX_MCP_INVALID_PARAMS (-32602)
#define GBX_MCP_INTERNAL_ERROR (-32603)

/* The newest protocol revision spoken (initialize answers with it unless the client asked for
 * one of the older ones supported: 2025-03-26, 2024-11-05). */
#define GBX_MCP_PROTOCOL_VERSION "2025-06-18"

struct gbx_mcp_ops {
    /* Run tool `name` (one of the six) with `input` (borrowed) as call `tool_use_id` in the
     * session. On success return 0 with *reply set to the daemon's answer, which the caller
     * then owns: {"content": [blocks], "is_error": bool}, a tool's own failure included. When
     * the call itself failed (the daemon unreachable, an HTTP error) return -1 with *err set;
     * its message becomes the text of an isError result. */
    int (*execute)(void *arg, const char *tool_use_id, const char *name, json_t *input,
                   json_t **reply, struct gbx_err **err);
};

struct gbx_mcp {
    const struct gbx_mcp_ops *ops; /* borrowed */
    void *arg;                     /* passed to ops */
    char *session;                 /* owned: the session id ("ses-...") */
    char *workdir;                 /* owned, or NULL: where relative paths resolve */
    json_t *tools;                 /* owned: the tools/list array */
    uint64_t calls;                /* tools/call requests executed */
};

/* Serve session `session` (copied; tools/call resources are named glovebox://SESSION/PATH)
 * whose working directory is `workdir` (copied; NULL if unknown) through `ops` (borrowed,
 * must outlive m). */
void gbx_mcp_init(struct gbx_mcp *m, const char *session, const char *workdir,
                  const struct gbx_mcp_ops *ops, void *arg);
/* Free what m holds; an all-zero or already released m is fine. */
void gbx_mcp_release(struct gbx_mcp *m);

/* One parsed message (borrowed) in; the response out (a new reference the caller owns), or
 * NULL when there is none to send (a notification, or a response from the client). Never
 * fails otherwise: anything malformed gets a JSON-RPC error response. */
json_t *gbx_mcp_handle(struct gbx_mcp *m, json_t *msg);

/* One line of the stdio transport (len bytes, no need for a terminating NUL; a trailing
 * newline is fine) in; the response out as one line of compact JSON without its newline
 * (malloc'd, the caller frees it), or NULL when there is none to send: a notification, or a
 * blank line. Text that is not JSON gets a -32700 response. */
char *gbx_mcp_handle_line(struct gbx_mcp *m, const char *line, size_t len);

/* The JSON-RPC error response {"jsonrpc":"2.0","id":id,"error":{code,message}} for id
 * (borrowed; NULL means null). The caller owns the result. */
json_t *gbx_mcp_error(json_t *id, int code, const char *message);

#endif
