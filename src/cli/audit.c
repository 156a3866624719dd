/* SPDX-License-Identifier: MIT */
/* glovebox audit verify: walk the hash-chained audit log and say whether it is intact.
 * (glovebox audit log is the daemon's API, in glovebox itself: audit_log.c.) */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "cli/cli.h"
#include "sandbox/backend.h"
#include "store/store.h"

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
    "named), 2 the log could not be read.\n";

int gbx_cmd_audit(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"state-dir", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *state = getenv("GLOVEBOX_STATE_DIR");
    int json = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            state = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            fputs(audit_usage, stdout);
            return 0;
        default:
            fputs(audit_usage, stderr);
            return 2;
        }
    }
    if (optind >= argc || strcmp(argv[optind], "verify") != 0) {
        fputs(audit_usage, stderr);
        return 2;
    }
    if (state == NULL || *state == '\0')
        state = GBX_DEFAULT_STATE_DIR;
    gbx_autofree char *db = gbx_asprintf("%s/glovebox.db", state);
    if (access(db, F_OK) < 0) {
        gbx_cli_error("no database at '%s' (is --state-dir right?)", db);
        return 2;
    }
    struct gbx_store *s = NULL;
    struct gbx_err *err = NULL;
    if (gbx_store_open(db, &s, &err) < 0) {
        gbx_cli_error("%s", err->msg);
        gbx_err_free(err);
        return 2;
    }
    struct gbx_audit_report rep;
    int r = gbx_store_audit_verify(s, &rep, &err);
    gbx_store_close(s);
    if (r < 0) {
        gbx_cli_error("%s", err->msg);
        gbx_err_free(err);
        return 2;
    }
    if (json) {
        printf("{\"intact\":%s,\"records\":%lld,\"bad_record\":%lld,\"reason\":\"%s\"}\n",
               rep.bad_seq ? "false" : "true", (long long)rep.rows, (long long)rep.bad_seq,
               rep.reason);
    } else if (rep.bad_seq == 0) {
        printf("audit log intact: %lld records\n", (long long)rep.rows);
    } else {
        printf("audit log damaged at record %lld: %s\n", (long long)rep.bad_seq, rep.reason);
    }
    return rep.bad_seq ? 1 : 0;
}
