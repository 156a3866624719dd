/* SPDX-License-Identifier: MIT */
/* The glovebox CLI: one file per subcommand. Each returns the process exit status. */
#ifndef GBX_CLI_H
#define GBX_CLI_H

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
/* daemon.c: the settings of GET /v1/daemon/config as a table (all: also those at their
 * default), for `daemon config` and `status`. */
struct json_t;
void gbx_cli_print_settings(struct json_t *cfg, int all);

/* A JSON argument: literal JSON, @FILE, or - (standard input). NULL after printing why. */
struct json_t;
struct json_t *gbx_cli_json_arg(const char *what, const char *arg);

/* Print "glovebox: <message>" to stderr. */
void gbx_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
