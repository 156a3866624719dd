/* SPDX-License-Identifier: MIT */
/* glovebox-audit: `glovebox audit` as its own program. Only it reads the store (SQLite,
 * libcrypto for the hash chain), so `glovebox` does not load those libraries: they cost
 * every glovebox process about a millisecond at start (docs/benchmarks.md). `glovebox audit`
 * runs this program from beside itself. */
#include "cli/cli.h"

int main(int argc, char **argv)
{
    return gbx_cmd_audit(argc, argv);
}
