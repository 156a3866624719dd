/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
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
        return 2;
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
    return 2;
}
