/* SPDX-License-Identifier: MIT */
/* glovebox ps SANDBOX [--json]: the running processes of a sandbox of the daemon. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/api.h"
#include "cli/cli.h"

static const char ps_usage[] = "usage: glovebox ps SANDBOX [--json]\n";

int gbx_cmd_ps(int argc, char **argv)
{
    const char *id = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(ps_usage, stdout);
            return 0;
        } else if (argv[i][0] != '-' && id == NULL) {
            id = argv[i];
        } else {
            fputs(ps_usage, stderr);
            return GBX_EXIT_USAGE;
        }
    }
    if (id == NULL) {
        fputs(ps_usage, stderr);
        return GBX_EXIT_USAGE;
    }
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/processes", id);
    json_t *reply = NULL;
    int status = gbx_cli_call("GET", path, NULL, &reply);
    if (status == 200) {
        json_t *list = json_object_get(reply, "processes");
        if (json) {
            char *t = json_dumps(list, JSON_COMPACT);
            puts(t);
            free(t);
        } else {
            printf("%-6s %-8s %-4s %-10s %s\n", "PROC", "PID", "PTY", "USER", "CMD");
            size_t i, k;
            json_t *p, *a;
            json_array_foreach(list, i, p)
            {
                printf("%-6lld %-8lld %-4s %-10s",
                       (long long)json_integer_value(json_object_get(p, "process")),
                       (long long)json_integer_value(json_object_get(p, "pid")),
                       json_is_true(json_object_get(p, "pty")) ? "yes" : "no",
                       json_string_value(json_object_get(p, "user")) ?: "?");
                json_t *cmd = json_object_get(p, "cmd");
                json_array_foreach(cmd, k, a)
                {
                    printf(" %s", json_string_value(a));
                }
                putchar('\n');
            }
        }
    }
    int r = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return r;
}
const char *const gbx_usage_ps = ps_usage;
