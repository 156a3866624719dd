/* SPDX-License-Identifier: MIT */
/* `glovebox run`: option parsing, separated from execution so it can be unit-tested. */
#ifndef GBX_CLI_RUN_H
#define GBX_CLI_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define GBX_RUN_MAX_ENV 256

struct gbx_run_opts {
    uint64_t memory_bytes; /* 0: no limit */
    uint64_t pids;         /* 0: no limit */
    uint32_t cpu_millis;   /* 0: no limit */
    uint64_t disk_bytes;   /* 0: default */
    uint64_t timeout_ms;   /* 0: none */
    const char *env[GBX_RUN_MAX_ENV + 1];
    size_t nenv;
    const char *cwd;
    const char *user;
    const char *template_name;
    int tty; /* -1: auto (when stdin is a terminal), 0 no, 1 yes */
    int help;
    char **argv; /* the command: points into the caller's argv */
};

/* Parse `run`'s arguments (argv[0] is "run"). Returns 0, or -1 with *err set. */
int gbx_run_parse(int argc, char **argv, struct gbx_run_opts *o, struct gbx_err **err);

#endif
