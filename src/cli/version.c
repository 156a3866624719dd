/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "agent/proto.h"
#include "cli/cli.h"

int gbx_cmd_version(int argc, char **argv)
{
    printf("glovebox %s (agent protocol %d)\n", GBX_VERSION, GBX_AGENT_VERSION);
    return 0;
}
