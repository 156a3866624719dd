/* SPDX-License-Identifier: MIT */
/* glovebox mcp [--session ID]
 * An MCP server on standard input and output (the stdio transport of MCP 2025-06-18: one
 * JSON-RPC message per line) serving the Claude agent toolset (bash, read, write, edit, glob,
 * grep) of one Glovebox session. Without --session it creates a session at start
 * (POST /v1/sessions) and prints its id on stderr. Each tools/call is one
 * POST /v1/sessions/{id}/execute. Standard output carries nothing but MCP messages; logs go to
 * stderr. Requests are answered one at a time, in order; end of input ends the server. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "cli/api.h"
#include "cli/cli.h"
#include "mcp/mcp.h"

/* A message larger than this is refused (and skipped up to its newline) before it is parsed. */
#define MCP_MAX_LINE (64u << 20)

static const char mcp_usage[] =
    "usage: glovebox mcp [--session ID]\n"
    "\n"
    "Serve the tools of a Glovebox session (bash, read, write, edit, glob, grep) as an MCP\n"
    "server on standard input and output. Without --session, a new session is created and\n"
    "its id printed on stderr.\n"
    "\n"
    "  -s, --session ID   use this existing session\n";

static int execute(void *arg, const char *tool_use_id, const char *name, json_t *input,
                   json_t **reply, struct gbx_err **err)
{
    const char *session = arg;
    json_t *body =
        json_pack("{s:s,s:s,s:O}", "tool_use_id", tool_use_id, "name", name, "input", input);
    gbx_autofree char *path = gbx_asprintf("/v1/sessions/%s/execute", session);
    json_t *r = NULL;
    int status = gbx_cli_call("POST", path, body, &r);
    json_decref(body);
    if (status == 200 && json_is_object(r)) {
        *reply = r;
        return 0;
    }
    const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    if (status < 0)
        gbx_err_set(err, ECONNREFUSED, GBX_ERR_UNAVAILABLE, "cannot reach gloveboxd at '%s'",
                    gbx_cli_socket());
    else if (msg)
        gbx_err_set(err, 0, status == 404 ? GBX_ERR_NOT_FOUND : GBX_ERR_INVALID, "%s", msg);
    else
        gbx_err_set(err, 0, GBX_ERR_INTERNAL, "gloveboxd answered %d to tool '%s'", status, name);
    gbx_cli_error("mcp: tool '%s' (%s): %s", name, tool_use_id, (*err)->msg);
    json_decref(r);
    return -1;
}

static const struct gbx_mcp_ops mcp_ops = {.execute = execute};

/* Session ids go into URL paths: letters, digits, '.', '_', '-'. */
static int id_valid(const char *id)
{
    size_t n = strlen(id);
    return n > 0 && n <= 128 &&
           strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789._-") == n;
}

/* Write one message and its newline; -1 when standard output is gone. */
static int send_line(const char *text)
{
    if (fputs(text, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) == EOF) {
        gbx_cli_error("mcp: cannot write to standard output: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static int serve_line(struct gbx_mcp *m, const char *line, size_t len)
{
    char *out = gbx_mcp_handle_line(m, line, len);
    if (out == NULL)
        return 0;
    int r = send_line(out);
    free(out);
    return r;
}

static int send_too_large(void)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "message larger than %u MiB", MCP_MAX_LINE >> 20);
    json_t *e = gbx_mcp_error(NULL, GBX_MCP_INVALID_REQUEST, msg);
    char *out = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    int r = send_line(out);
    free(out);
    return r;
}

/* Read standard input to its end, one line at a time. Returns the exit status. */
static int serve(struct gbx_mcp *m)
{
    char *buf = NULL;
    size_t len = 0, cap = 0, scanned = 0;
    int skipping = 0, rc = 0;
    for (;;) {
        if (cap - len < 65536) {
            cap = cap * 2 > len + 65536 ? cap * 2 : len + 65536;
            buf = gbx_xrealloc(buf, cap);
        }
        ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            gbx_cli_error("mcp: cannot read standard input: %s", strerror(errno));
            rc = 1;
            break;
        }
        if (n == 0) { /* end of input: a last line without its newline still counts */
            if (len > 0 && (skipping ? send_too_large() : serve_line(m, buf, len)) < 0)
                rc = 1;
            break;
        }
        len += (size_t)n;
        size_t start = 0;
        for (size_t i = scanned; i < len; i++) {
            if (buf[i] != '\n')
                continue;
            int r = skipping ? send_too_large() : serve_line(m, buf + start, i - start);
            skipping = 0;
            start = i + 1;
            if (r < 0) {
                free(buf);
                return 1;
            }
        }
        memmove(buf, buf + start, len - start);
        len -= start;
        scanned = len;
        if (len > MCP_MAX_LINE) { /* drop what came of it so far, answer at its newline */
            skipping = 1;
            len = scanned = 0;
        }
    }
    free(buf);
    return rc;
}

int gbx_cmd_mcp(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"session", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *session = NULL;
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "s:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            session = optarg;
            break;
        case 'h':
            fputs(mcp_usage, stdout);
            return 0;
        default:
            fputs(mcp_usage, stderr);
            return GBX_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fputs(mcp_usage, stderr);
        return GBX_EXIT_USAGE;
    }
    if (session && !id_valid(session)) {
        gbx_cli_error("invalid session id '%s'", session);
        return GBX_EXIT_USAGE;
    }

    json_t *reply = NULL;
    int status;
    if (session) {
        gbx_autofree char *path = gbx_asprintf("/v1/sessions/%s", session);
        status = gbx_cli_call("GET", path, NULL, &reply);
        if (status == 404) {
            gbx_cli_error("no session '%s'", session);
            json_decref(reply);
            return GBX_EXIT_NOT_FOUND;
        }
        if (status != 200) {
            int r = gbx_cli_result(status, reply, 200);
            json_decref(reply);
            return r;
        }
    } else {
        json_t *body = json_object();
        status = gbx_cli_call("POST", "/v1/sessions", body, &reply);
        json_decref(body);
        if (status != 201) {
            int r = gbx_cli_result(status, reply, 201);
            json_decref(reply);
            return r;
        }
    }
    const char *id = json_string_value(json_object_get(reply, "id"));
    const char *sandbox = json_string_value(json_object_get(reply, "sandbox_id"));
    const char *workdir = json_string_value(json_object_get(reply, "workdir"));
    if (session == NULL && (id == NULL || !id_valid(id))) {
        gbx_cli_error("gloveboxd created a session without a valid id");
        json_decref(reply);
        return 1;
    }
    if (session == NULL)
        session = id;
    gbx_autofree char *sid = gbx_xstrdup(session);
    fprintf(stderr, "glovebox: mcp: %s session '%s' (sandbox '%s', workdir '%s')%s\n",
            status == 201 ? "created" : "serving", sid, sandbox ? sandbox : "?",
            workdir ? workdir : "?", status == 201 ? "; reuse it with --session" : "");

    signal(SIGPIPE, SIG_IGN);
    struct gbx_mcp m;
    gbx_mcp_init(&m, sid, workdir, &mcp_ops, sid);
    json_decref(reply);
    int rc = serve(&m);
    gbx_mcp_release(&m);
    return rc;
}
const char *const gbx_usage_mcp = mcp_usage;
