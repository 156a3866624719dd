/* SPDX-License-Identifier: MIT */
/* glovebox completion bash|zsh: completion scripts generated from the command table
 * (commands.c): its commands, their subcommands, and the flags their usage texts name, so
 * the scripts cannot drift from the help. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char completion_usage[] =
    "usage: glovebox completion bash|zsh\n"
    "  bash: source <(glovebox completion bash)   (e.g. in ~/.bashrc)\n"
    "  zsh:  source <(glovebox completion zsh)    (after compinit, e.g. in ~/.zshrc)\n";
const char *const gbx_usage_completion = completion_usage;

static int flag_char(char c)
{
    return isalnum((unsigned char)c) || c == '-';
}

/* Print the flags c's usage names (--long, and -x standing alone), each once, separated by
 * spaces, and --help. */
static void print_flags(FILE *f, const struct gbx_cli_command *c)
{
    const char *u = *c->usage;
    char seen[4096] = " ";
    for (const char *p = u; *p; p++) {
        if (*p != '-' || (p > u && !strchr(" [|(,\t", p[-1])))
            continue;
        size_t n = p[1] == '-' ? 2 : 1;
        if (!isalpha((unsigned char)p[n]))
            continue;
        while (flag_char(p[n]))
            n++;
        if (n == 2 && p[1] != '-' && !strchr(" ]|),\t\n", p[n]))
            continue; /* "-x" followed by something that is not a separator */
        if (n > 2 && p[1] != '-')
            continue; /* "-word": not a flag */
        char tok[64];
        if (n + 2 >= sizeof(tok))
            continue;
        snprintf(tok, sizeof(tok), " %.*s ", (int)n, p);
        if (strstr(seen, tok) == NULL && strlen(seen) + n + 1 < sizeof(seen)) {
            strcat(seen, tok + 1);
            fprintf(f, "%.*s ", (int)n, p);
        }
        p += n - 1;
    }
    if (strstr(seen, " --help ") == NULL)
        fputs("--help", f);
}

/* One case a command: "NAME) subs=OPEN...CLOSE flags=OPEN...CLOSE ;;" (bash: quotes; zsh:
 * an array). help's subcommands are the commands. */
static void print_cases(FILE *f, const char *open, const char *close)
{
    for (size_t i = 0; i < gbx_cli_ncommands; i++) {
        const struct gbx_cli_command *c = &gbx_cli_commands[i];
        fprintf(f, "    %s)\n", c->name);
        if (c->fn == gbx_cmd_help) {
            fprintf(f, "        subs=%s", open);
            for (size_t j = 0; j < gbx_cli_ncommands; j++)
                fprintf(f, "%s%s", j ? " " : "", gbx_cli_commands[j].name);
            fprintf(f, "%s\n", close);
        } else if (c->subcommands) {
            fprintf(f, "        subs=%s%s%s\n", open, c->subcommands, close);
        }
        fprintf(f, "        flags=%s", open);
        print_flags(f, c);
        fprintf(f, "%s ;;\n", close);
    }
}

static void print_bash(FILE *f)
{
    fputs("# bash completion for glovebox: source <(glovebox completion bash)\n"
          "_glovebox() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} subs='' flags=''\n"
          "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
          "        COMPREPLY=($(compgen -W '",
          f);
    for (size_t i = 0; i < gbx_cli_ncommands; i++)
        fprintf(f, "%s ", gbx_cli_commands[i].name);
    fputs("--help --version' -- \"$cur\"))\n"
          "        return 0\n"
          "    fi\n"
          "    case ${COMP_WORDS[1]} in\n",
          f);
    print_cases(f, "'", "'");
    fputs("    esac\n"
          "    if [ \"$COMP_CWORD\" -eq 2 ] && [ -n \"$subs\" ] && [ \"${cur#-}\" = \"$cur\" ]; "
          "then\n"
          "        COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
          "    elif [ \"${cur#-}\" != \"$cur\" ]; then\n"
          "        COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
          "    else\n"
          "        COMPREPLY=()\n"
          "    fi\n"
          "    return 0\n"
          "}\n"
          "complete -o default -F _glovebox glovebox\n",
          f);
}

/* s in single quotes for zsh's _describe: ' and : escaped */
static void zsh_quoted(FILE *f, const char *name, const char *s)
{
    fprintf(f, "'%s:", name);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else if (*s == ':')
            fputs("\\:", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

static void print_zsh(FILE *f)
{
    fputs("#compdef glovebox\n"
          "# zsh completion for glovebox: source <(glovebox completion zsh), after compinit\n"
          "_glovebox() {\n"
          "    local -a cmds subs flags\n"
          "    cmds=(\n",
          f);
    for (size_t i = 0; i < gbx_cli_ncommands; i++) {
        fputs("        ", f);
        zsh_quoted(f, gbx_cli_commands[i].name, gbx_cli_commands[i].summary);
        fputc('\n', f);
    }
    fputs("    )\n"
          "    if (( CURRENT == 2 )); then\n"
          "        _describe -t commands 'glovebox command' cmds\n"
          "        return\n"
          "    fi\n"
          "    case ${words[2]} in\n",
          f);
    print_cases(f, "(", ")");
    fputs("    esac\n"
          "    if (( CURRENT == 3 && $#subs )) && [[ $PREFIX != -* ]]; then\n"
          "        compadd -a subs\n"
          "    elif [[ $PREFIX == -* ]]; then\n"
          "        compadd -a flags\n"
          "    else\n"
          "        _files\n"
          "    fi\n"
          "}\n"
          "if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then\n"
          "    _glovebox \"$@\"\n"
          "else\n"
          "    compdef _glovebox glovebox\n"
          "fi\n",
          f);
}

int gbx_cmd_completion(int argc, char **argv)
{
    if (argc != 2)
        return gbx_cli_usage(completion_usage);
    if (strcmp(argv[1], "bash") == 0)
        print_bash(stdout);
    else if (strcmp(argv[1], "zsh") == 0)
        print_zsh(stdout);
    else
        return gbx_cli_usage(completion_usage);
    return GBX_EXIT_OK;
}
