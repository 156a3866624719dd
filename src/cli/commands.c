/* SPDX-License-Identifier: MIT */
/* The command table: what main() dispatches, what `glovebox help` prints and what
 * `glovebox completion` completes, so the three cannot drift apart. */
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

const struct gbx_cli_command gbx_cli_commands[] = {
    {"run", gbx_cmd_run, "run a command in a one-shot sandbox", &gbx_usage_run, NULL,
     GBX_CMD_HELP_FIRST},
    {"status", gbx_cmd_status, "is the daemon serving, and how many sandboxes", &gbx_usage_status,
     NULL, 0},
    {"daemon", gbx_cmd_daemon,
     "reload the daemon's settings, or show them and where they came from", &gbx_usage_daemon,
     "reload config", 0},
    {"create", gbx_cmd_create, "create a sandbox in the daemon (prints its id)", &gbx_usage_create,
     NULL, 0},
    {"ls", gbx_cmd_ls, "list the daemon's sandboxes (alias: list)", &gbx_usage_ls, NULL, 0},
    {"list", gbx_cmd_ls, "list the daemon's sandboxes", &gbx_usage_ls, NULL, GBX_CMD_HIDDEN},
    {"info", gbx_cmd_info, "show one sandbox of the daemon (JSON)", &gbx_usage_info, NULL, 0},
    {"timeout", gbx_cmd_timeout, "set or clear a sandbox's timeout", &gbx_usage_timeout, NULL, 0},
    {"pause", gbx_cmd_pause, "freeze every process of a sandbox", &gbx_usage_pause, NULL, 0},
    {"resume", gbx_cmd_resume, "thaw a paused sandbox", &gbx_usage_resume, NULL, 0},
    {"snapshot", gbx_cmd_snapshot, "snapshot a sandbox's filesystem (prints the snapshot's id)",
     &gbx_usage_snapshot, NULL, 0},
    {"snapshots", gbx_cmd_snapshots, "list, show and delete snapshots", &gbx_usage_snapshots,
     "ls list show rm delete template", 0},
    {"rollback", gbx_cmd_rollback, "roll a sandbox back to a snapshot", &gbx_usage_rollback, NULL,
     0},
    {"fork", gbx_cmd_fork, "start sandboxes from a live sandbox's current files", &gbx_usage_fork,
     NULL, 0},
    {"clone", gbx_cmd_clone, "start sandboxes from a snapshot", &gbx_usage_clone, NULL, 0},
    {"gc", gbx_cmd_gc, "apply the retention policies now (--dry-run: only show)", &gbx_usage_gc,
     NULL, 0},
    {"template", gbx_cmd_template, "list, show, delete, import and build templates",
     &gbx_usage_template, "ls list show inspect rm delete import build-debian build-browser", 0},
    {"exec", gbx_cmd_exec, "run a command in a sandbox of the daemon", &gbx_usage_exec, NULL,
     GBX_CMD_HELP_FIRST},
    {"port", gbx_cmd_port, "the URL of a port inside a sandbox, through the daemon's ingress",
     &gbx_usage_port, NULL, 0},
    {"browser", gbx_cmd_browser, "start, stop and screenshot a sandbox's Chromium (CDP)",
     &gbx_usage_browser, "start status stop screenshot", 0},
    {"cp", gbx_cmd_cp, "copy a file into or out of a sandbox (ID:/path)", &gbx_usage_cp, NULL, 0},
    {"ps", gbx_cmd_ps, "list the processes of a sandbox (--all: every one, as a tree)",
     &gbx_usage_ps, NULL, 0},
    {"kill", gbx_cmd_kill, "destroy sandboxes of the daemon", &gbx_usage_kill, NULL, 0},
    {"apikey", gbx_cmd_apikey, "create, list and revoke API keys for the TCP listener",
     &gbx_usage_apikey, "create ls list revoke quota", 0},
    {"egress", gbx_cmd_egress, "network policy, egress log and the emergency block",
     &gbx_usage_egress, "status block unblock ca policy log", 0},
    {"secret", gbx_cmd_secret, "credentials injected into sandboxes' HTTPS requests",
     &gbx_usage_secret, "add rotate ls list rm delete revoke", 0},
    {"artifact", gbx_cmd_artifact, "publish, list, download and remove artifacts",
     &gbx_usage_artifact, "publish ls list get rm delete", 0},
    {"mcp", gbx_cmd_mcp, "serve a session's tools as an MCP server on stdio", &gbx_usage_mcp, NULL,
     0},
    {"worker", gbx_cmd_worker, "run Claude Managed Agents tool calls (self-hosted worker)",
     &gbx_usage_worker, NULL, 0},
    {"audit", run_audit, "read (log) and verify the daemon's hash-chained audit log",
     &gbx_usage_audit, "log verify", GBX_CMD_HELP_FIRST},
    {"version", gbx_cmd_version, "print the version", &gbx_usage_version, NULL, 0},
    {"help", gbx_cmd_help, "show the help of a command (glovebox help CMD)", &gbx_usage_help, NULL,
     0},
    {"completion", gbx_cmd_completion, "print a shell completion script (bash or zsh)",
     &gbx_usage_completion, "bash zsh", 0},
};
const size_t gbx_cli_ncommands = sizeof(gbx_cli_commands) / sizeof(gbx_cli_commands[0]);

const struct gbx_cli_command *gbx_cli_command_find(const char *name)
{
    for (size_t i = 0; i < gbx_cli_ncommands; i++)
        if (strcmp(name, gbx_cli_commands[i].name) == 0)
            return &gbx_cli_commands[i];
    return NULL;
}

void gbx_cli_usage_all(FILE *f)
{
    fputs("usage: glovebox <command> [options]\n\ncommands:\n", f);
    for (size_t i = 0; i < gbx_cli_ncommands; i++)
        if (!(gbx_cli_commands[i].flags & GBX_CMD_HIDDEN))
            fprintf(f, "  %-10s %s\n", gbx_cli_commands[i].name, gbx_cli_commands[i].summary);
    fputs("\nRun 'glovebox <command> --help' (or 'glovebox help <command>') for a command's "
          "options.\n"
          "Exit status: 0 ok, 1 the request failed, 2 usage, 3 not found, 4 no daemon\n"
          "(exec and run: the command's own; 124 timeout, 125 glovebox failed, 126/127 cannot\n"
          "execute / no such command, 128+N signal N).\n",
          f);
}

static const char help_usage[] = "usage: glovebox help [COMMAND]\n";
const char *const gbx_usage_help = help_usage;

int gbx_cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        gbx_cli_usage_all(stdout);
        return GBX_EXIT_OK;
    }
    if (argc > 2)
        return gbx_cli_usage(help_usage);
    const struct gbx_cli_command *c = gbx_cli_command_find(argv[1]);
    if (c == NULL) {
        gbx_cli_error("unknown command '%s' (see 'glovebox --help')", argv[1]);
        return GBX_EXIT_USAGE;
    }
    return gbx_cli_help(*c->usage);
}
