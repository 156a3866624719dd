/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

void gbx_cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("glovebox: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int gbx_cli_run_helper(const char *name, int argc, char **argv)
{
    char self[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        gbx_cli_error("cannot find where glovebox is installed: %s", strerror(errno));
        return GBX_EXIT_FAILED;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(path, sizeof(path), "%s/%s", self, name);
    static char prog[64];
    snprintf(prog, sizeof(prog), "%s", name);
    argv[0] = prog;
    (void)argc;
    execv(path, argv);
    gbx_cli_error("cannot run '%s': %s (it is installed beside glovebox)", path, strerror(errno));
    return GBX_EXIT_FAILED;
}

int gbx_cli_help(const char *usage)
{
    fputs(usage, stdout);
    return GBX_EXIT_OK;
}

int gbx_cli_usage(const char *usage)
{
    fputs(usage, stderr);
    return GBX_EXIT_USAGE;
}

int gbx_cli_is(const char *arg, const char *canonical)
{
    static const char *const aliases[][2] = {{"ls", "list"}, {"rm", "delete"}};
    if (strcmp(arg, canonical) == 0)
        return 1;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcmp(canonical, aliases[i][0]) == 0 && strcmp(arg, aliases[i][1]) == 0)
            return 1;
    return 0;
}

int gbx_cli_take_flag(int *argc, char **argv, const char *flag)
{
    int found = 0, n = 0, i = 0;
    for (; i < *argc && strcmp(argv[i], "--") != 0; i++) {
        if (i > 0 && strcmp(argv[i], flag) == 0)
            found = 1;
        else
            argv[n++] = argv[i];
    }
    for (; i < *argc; i++)
        argv[n++] = argv[i];
    argv[n] = NULL;
    *argc = n;
    return found;
}

void gbx_cli_print_json(const struct json_t *j)
{
    char *t = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    puts(t ? t : "null");
    free(t);
}

int gbx_cli_cannot_run(const char *msg)
{
    const char *at = msg ? strstr(msg, "cannot run '") : NULL;
    if (at == NULL)
        return GBX_EXIT_GLOVEBOX;
    const char *enoent = strerror(ENOENT);
    size_t n = strlen(at), m = strlen(enoent);
    return n >= m && strcmp(at + n - m, enoent) == 0 ? GBX_EXIT_NO_COMMAND : GBX_EXIT_CANNOT_EXEC;
}
