/* SPDX-License-Identifier: MIT */
/* `glovebox audit --help`: in both glovebox (the command table) and glovebox-audit. */
#include "cli/cli.h"

static const char audit_usage[] =
    "usage: glovebox audit log [--sandbox ID] [--session ID] [--key NAME] [--kind KIND]\n"
    "                          [--since TIME] [--until TIME] [--limit N] [--json] [-f]\n"
    "       glovebox audit verify [--state-dir DIR] [--json]\n"
    "\n"
    "log: print the audit log through the daemon (its admin socket), oldest first, filtered\n"
    "by sandbox, session, actor (--key), kind (exact, or a prefix with a final '*') and time\n"
    "(unix seconds or RFC 3339); -f follows it as it grows. See 'glovebox audit log --help'.\n"
    "\n"
    "verify: check every record of the audit log against its hash and its predecessor,\n"
    "reading the database itself. Exit status: 0 intact, 1 damaged (the first bad record is\n"
    "named) or the log could not be read, 3 no database there.\n";
const char *const gbx_usage_audit = audit_usage;
