/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>

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
