/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static int run_audit(int argc, char **argv)
{
    /* log goes through the daemon (glovebox); verify reads the store (glovebox-audit) */
    if (argc >= 2 && strcmp(argv[1], "log") == 0)
        return gbx_cmd_audit_log(argc - 1, argv + 1);
    return gbx_cli_run_helper("glovebox-audit", argc, argv);
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", gbx_cmd_run, "run a command in a one-shot sandbox"},
    {"status", gbx_cmd_status, "is the daemon serving, and how many sandboxes"},
    {"create", gbx_cmd_create, "create a sandbox in the daemon (prints its id)"},
    {"ls", gbx_cmd_ls, "list the daemon's sandboxes (--json)"},
    {"info", gbx_cmd_info, "show one sandbox of the daemon (JSON)"},
    {"timeout", gbx_cmd_timeout, "set or clear a sandbox's timeout"},
    {"pause", gbx_cmd_pause, "freeze every process of a sandbox"},
    {"resume", gbx_cmd_resume, "thaw a paused sandbox"},
    {"snapshot", gbx_cmd_snapshot, "snapshot a sandbox's filesystem (prints the snapshot's id)"},
    {"snapshots", gbx_cmd_snapshots, "list, show and delete snapshots"},
    {"rollback", gbx_cmd_rollback, "roll a sandbox back to a snapshot"},
    {"fork", gbx_cmd_fork, "start sandboxes from a live sandbox's current files"},
    {"clone", gbx_cmd_clone, "start sandboxes from a snapshot"},
    {"gc", gbx_cmd_gc, "apply the retention policies now (--dry-run: only show)"},
    {"template", gbx_cmd_template, "list, show, delete, import and build templates"},
    {"exec", gbx_cmd_exec, "run a command in a sandbox of the daemon"},
    {"cp", gbx_cmd_cp, "copy a file into or out of a sandbox (ID:/path)"},
    {"ps", gbx_cmd_ps, "list the processes of a sandbox (--all: every one, as a tree)"},
    {"kill", gbx_cmd_kill, "destroy sandboxes of the daemon"},
    {"apikey", gbx_cmd_apikey, "create, list and revoke API keys for the TCP listener"},
    {"egress", gbx_cmd_egress, "network policy, egress log and the emergency block"},
    {"secret", gbx_cmd_secret, "credentials injected into sandboxes' HTTPS requests"},
    {"artifact", gbx_cmd_artifact, "publish, list, download and remove artifacts"},
    {"mcp", gbx_cmd_mcp, "serve a session's tools as an MCP server on stdio"},
    {"worker", gbx_cmd_worker, "run Claude Managed Agents tool calls (self-hosted worker)"},
    {"audit", run_audit, "read (log) and verify the daemon's hash-chained audit log"},
    {"version", gbx_cmd_version, "print the version"},
};

static void usage(FILE *f)
{
    fputs("usage: glovebox <command> [options]\n\ncommands:\n", f);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fputs("\nRun 'glovebox <command> --help' for a command's options.\n", f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0)
        return gbx_cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    gbx_cli_error("unknown command '%s' (see 'glovebox --help')", argv[1]);
    return 2;
}
