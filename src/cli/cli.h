/* SPDX-License-Identifier: MIT */
/* The glovebox CLI: one file per subcommand. Each returns the process exit status. */
#ifndef GBX_CLI_H
#define GBX_CLI_H

#include <stddef.h>
#include <stdio.h>

/* The exit statuses of every glovebox command: the one table (README "Exit codes",
 * docs/cli.md). exec and run pass the command's own status through (0-255), so their own
 * failures use the 12x values instead of 1-4. */
enum gbx_exit {
    GBX_EXIT_OK = 0,
    GBX_EXIT_FAILED = 1,        /* the request failed: refused, invalid, conflict, server error */
    GBX_EXIT_USAGE = 2,         /* bad flags or arguments */
    GBX_EXIT_NOT_FOUND = 3,     /* the sandbox, snapshot, template, key... does not exist */
    GBX_EXIT_NO_DAEMON = 4,     /* the daemon cannot be reached */
    GBX_EXIT_TIMEOUT = 124,     /* exec/run: the command's timeout killed it */
    GBX_EXIT_GLOVEBOX = 125,    /* exec/run: glovebox itself failed (usage, not found, daemon) */
    GBX_EXIT_CANNOT_EXEC = 126, /* exec/run: the command cannot be executed */
    GBX_EXIT_NO_COMMAND = 127,  /* exec/run: the command was not found */
    GBX_EXIT_SIGNAL = 128,      /* exec/run: + N when signal N killed the command */
};

/* One entry of the command table (commands.c): what main() dispatches, `glovebox help`
 * prints and `glovebox completion` completes. */
struct gbx_cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;      /* one line for `glovebox --help` */
    const char *const *usage; /* the text of `glovebox NAME --help` */
    const char *subcommands;  /* space-separated, aliases included: main() refuses others */
    unsigned flags;           /* GBX_CMD_* */
};
/* -h/--help is the command's only as its first argument: after that it may belong to the
 * command run in the sandbox (exec, run) or to a subcommand with help of its own (audit). */
#define GBX_CMD_HELP_FIRST 1u
#define GBX_CMD_HIDDEN 2u /* an alias: not listed in `glovebox --help` */

extern const struct gbx_cli_command gbx_cli_commands[];
extern const size_t gbx_cli_ncommands;
/* The command called name, or NULL. */
const struct gbx_cli_command *gbx_cli_command_find(const char *name);
int gbx_cmd_help(int argc, char **argv);
int gbx_cmd_completion(int argc, char **argv);
/* Print the global usage to f. */
void gbx_cli_usage_all(FILE *f);

/* Print usage to stdout and return 0 (-h, --help), or to stderr and return GBX_EXIT_USAGE. */
int gbx_cli_help(const char *usage);
int gbx_cli_usage(const char *usage);
/* Is the subcommand arg canonical or its alias (ls: list; rm: delete)? */
int gbx_cli_is(const char *arg, const char *canonical);
/* Remove flag from argv (before any "--"), shifting the rest down; 1 when it was there. */
int gbx_cli_take_flag(int *argc, char **argv, const char *flag);

/* The usage texts, each defined beside its command. */
extern const char *const gbx_usage_run;
extern const char *const gbx_usage_status;
extern const char *const gbx_usage_create;
extern const char *const gbx_usage_ls;
extern const char *const gbx_usage_info;
extern const char *const gbx_usage_timeout;
extern const char *const gbx_usage_pause;
extern const char *const gbx_usage_resume;
extern const char *const gbx_usage_snapshot;
extern const char *const gbx_usage_snapshots;
extern const char *const gbx_usage_rollback;
extern const char *const gbx_usage_fork;
extern const char *const gbx_usage_clone;
extern const char *const gbx_usage_gc;
extern const char *const gbx_usage_template;
extern const char *const gbx_usage_exec;
extern const char *const gbx_usage_cp;
extern const char *const gbx_usage_ps;
extern const char *const gbx_usage_kill;
extern const char *const gbx_usage_apikey;
extern const char *const gbx_usage_daemon;
extern const char *const gbx_usage_port;
extern const char *const gbx_usage_browser;
extern const char *const gbx_usage_egress;
extern const char *const gbx_usage_secret;
extern const char *const gbx_usage_artifact;
extern const char *const gbx_usage_mcp;
extern const char *const gbx_usage_worker;
extern const char *const gbx_usage_audit;
extern const char *const gbx_usage_version;
extern const char *const gbx_usage_help;
extern const char *const gbx_usage_completion;

int gbx_cmd_run(int argc, char **argv);
int gbx_cmd_audit(int argc, char **argv);     /* in glovebox-audit (audit_main.c) */
int gbx_cmd_audit_log(int argc, char **argv); /* audit_log.c, in glovebox */
/* Run NAME, the program installed beside glovebox, with argv (argv[0] is replaced); returns
 * only on failure, with an exit status. */
int gbx_cli_run_helper(const char *name, int argc, char **argv);
int gbx_cmd_create(int argc, char **argv);
int gbx_cmd_ls(int argc, char **argv);
int gbx_cmd_kill(int argc, char **argv);
int gbx_cmd_exec(int argc, char **argv);
int gbx_cmd_cp(int argc, char **argv);
int gbx_cmd_ps(int argc, char **argv);
int gbx_cmd_status(int argc, char **argv);
int gbx_cmd_apikey(int argc, char **argv);
int gbx_cmd_info(int argc, char **argv);
int gbx_cmd_timeout(int argc, char **argv);
int gbx_cmd_pause(int argc, char **argv);
int gbx_cmd_resume(int argc, char **argv);
int gbx_cmd_snapshot(int argc, char **argv);
int gbx_cmd_snapshots(int argc, char **argv);
int gbx_cmd_rollback(int argc, char **argv);
int gbx_cmd_fork(int argc, char **argv);
int gbx_cmd_clone(int argc, char **argv);
int gbx_cmd_gc(int argc, char **argv);
int gbx_cmd_template(int argc, char **argv);
int gbx_cmd_version(int argc, char **argv);
int gbx_cmd_egress(int argc, char **argv);
int gbx_cmd_secret(int argc, char **argv);
int gbx_cmd_artifact(int argc, char **argv);
int gbx_cmd_mcp(int argc, char **argv);
int gbx_cmd_worker(int argc, char **argv);
int gbx_cmd_daemon(int argc, char **argv);
int gbx_cmd_port(int argc, char **argv);
int gbx_cmd_browser(int argc, char **argv);
/* The URL that reaches port in sandbox through the daemon's ingress (port.c), into url ("" when
 * the daemon has no TCP listener: gbx_cli_ingress_off says so); the sandbox's id into id.
 * GBX_EXIT_OK, or the exit status (a message printed). */
extern const char gbx_cli_ingress_off[];
int gbx_cli_port_url(const char *sandbox, unsigned port, char *url, size_t urlsz, char *id,
                     size_t idsz);
/* daemon.c: the settings of GET /v1/daemon/config as a table (all: also those at their
 * default), for `daemon config` and `status`. */
struct json_t;
void gbx_cli_print_settings(struct json_t *cfg, int all);

/* A JSON argument: literal JSON, @FILE, or - (standard input). NULL after printing why. */
struct json_t;
struct json_t *gbx_cli_json_arg(const char *what, const char *arg);
/* Print j as one line of compact JSON (the --json output of every command). */
void gbx_cli_print_json(const struct json_t *j);

/* The exit status of exec or run when the command could not be started, from the message
 * ("cannot run 'CMD': <strerror>"): 127 when CMD does not exist, 126 when it cannot be
 * executed; 125 for anything else (a bad user or directory: glovebox's failure). */
int gbx_cli_cannot_run(const char *msg);

/* Print "glovebox: <message>" to stderr. */
void gbx_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
