/* SPDX-License-Identifier: MIT */
#include <jansson.h>
#include <stdio.h>

#include "agent/proto.h"
#include "cli/cli.h"

static const char version_usage[] = "usage: glovebox version [--json]\n";
const char *const gbx_usage_version = version_usage;

int gbx_cmd_version(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc > 1)
        return gbx_cli_usage(version_usage);
    if (json) {
        json_t *o = json_pack("{s:s,s:i}", "version", GBX_VERSION, "agent_protocol",
                              (int)GBX_AGENT_VERSION);
        gbx_cli_print_json(o);
        json_decref(o);
        return GBX_EXIT_OK;
    }
    printf("glovebox %s (agent protocol %d)\n", GBX_VERSION, GBX_AGENT_VERSION);
    return 0;
}
