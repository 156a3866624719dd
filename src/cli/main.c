/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static int is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

/* Does -h/--help stand among the command's arguments (before any "--")? */
static int wants_help(const struct gbx_cli_command *c, int argc, char **argv)
{
    if (argc > 1 && is_help(argv[1]))
        return 1;
    if (c->flags & GBX_CMD_HELP_FIRST)
        return 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (is_help(argv[i]))
            return 1;
    return 0;
}

/* Is arg one of c's subcommands (the table's list, aliases included)? */
static int is_subcommand(const struct gbx_cli_command *c, const char *arg)
{
    size_t n = strlen(arg);
    for (const char *p = c->subcommands; *p; p += strspn(p, " ")) {
        size_t m = strcspn(p, " ");
        if (m == n && strncmp(p, arg, n) == 0)
            return 1;
        p += m;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        gbx_cli_usage_all(stderr);
        return GBX_EXIT_USAGE;
    }
    if (is_help(argv[1])) {
        gbx_cli_usage_all(stdout);
        return GBX_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0)
        return gbx_cmd_version(argc - 1, argv + 1);
    const struct gbx_cli_command *c = gbx_cli_command_find(argv[1]);
    if (c == NULL) {
        gbx_cli_error("unknown command '%s' (see 'glovebox --help')", argv[1]);
        return GBX_EXIT_USAGE;
    }
    if (wants_help(c, argc - 1, argv + 1))
        return gbx_cli_help(*c->usage);
    if (c->subcommands && argc > 2 && argv[2][0] != '-' && !is_subcommand(c, argv[2])) {
        gbx_cli_error("unknown subcommand '%s %s' (see 'glovebox %s --help')", argv[1], argv[2],
                      argv[1]);
        return GBX_EXIT_USAGE;
    }
    return c->fn(argc - 1, argv + 1);
}
