/* SPDX-License-Identifier: MIT */
/* glovebox audit verify: walk the hash-chained audit log and say whether it is intact.
 * (glovebox audit log is the daemon's API, in glovebox itself: audit_log.c.) */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "cli/cli.h"
#include "sandbox/backend.h"
#include "store/store.h"

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
            return gbx_cli_help(gbx_usage_audit);
        default:
            return gbx_cli_usage(gbx_usage_audit);
        }
    }
    if (optind + 1 != argc || strcmp(argv[optind], "verify") != 0)
        return gbx_cli_usage(gbx_usage_audit);
    if (state == NULL || *state == '\0')
        state = GBX_DEFAULT_STATE_DIR;
    gbx_autofree char *db = gbx_asprintf("%s/glovebox.db", state);
    if (access(db, F_OK) < 0) {
        gbx_cli_error("no database at '%s' (is --state-dir right?)", db);
        return GBX_EXIT_NOT_FOUND;
    }
    struct gbx_store *s = NULL;
    struct gbx_err *err = NULL;
    if (gbx_store_open(db, &s, &err) < 0) {
        gbx_cli_error("%s", err->msg);
        gbx_err_free(err);
        return GBX_EXIT_FAILED;
    }
    struct gbx_audit_report rep;
    int r = gbx_store_audit_verify(s, &rep, &err);
    gbx_store_close(s);
    if (r < 0) {
        gbx_cli_error("%s", err->msg);
        gbx_err_free(err);
        return GBX_EXIT_FAILED;
    }
    if (json) {
        json_t *o = json_pack("{s:b,s:I,s:I,s:s}", "intact", rep.bad_seq == 0, "records",
                              (json_int_t)rep.rows, "bad_record", (json_int_t)rep.bad_seq, "reason",
                              rep.reason);
        gbx_cli_print_json(o);
        json_decref(o);
    } else if (rep.bad_seq == 0) {
        printf("audit log intact: %lld records\n", (long long)rep.rows);
    } else {
        printf("audit log damaged at record %lld: %s\n", (long long)rep.bad_seq, rep.reason);
    }
    return rep.bad_seq ? GBX_EXIT_FAILED : GBX_EXIT_OK;
}
