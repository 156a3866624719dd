/* SPDX-License-Identifier: MIT */
/* glovebox audit log: the audit log through the daemon's GET /v1/audit (the admin socket,
 * so every record), filtered, as lines or JSON, and with -f followed as it grows. (audit
 * verify reads the database itself, in glovebox-audit: audit.c.) */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/parse.h"
#include "cli/api.h"
#include "cli/cli.h"

static const char log_usage[] =
    "usage: glovebox audit log [--sandbox ID] [--session ID] [--key NAME] [--kind KIND]\n"
    "                          [--since TIME] [--until TIME] [--limit N] [--json] [-f]\n"
    "\n"
    "Print the daemon's audit log, oldest first, one record a line: time, actor, kind,\n"
    "sandbox and the record's detail. Each option narrows it:\n"
    "  --sandbox ID    records about that sandbox\n"
    "  --session ID    records naming that session (its create and delete, its sandbox's)\n"
    "  --key NAME      records whose actor is NAME (an API key, admin, system)\n"
    "  --kind KIND     one kind (sandbox.create), or with a final '*' those starting so\n"
    "                  (egress.*)\n"
    "  --since TIME    at or after TIME; --until TIME: before it (unix seconds, or RFC 3339\n"
    "                  with a zone: 2026-12-03T19:00:00Z)\n"
    "  --limit N       at most N records, -f or not (1-1000; default: all of them)\n"
    "  --json          one JSON object a record: seq, time, actor, kind, sandbox, detail, hash\n"
    "  -f, --follow    then wait for new records (every 500 ms) until interrupted (^C: 0)\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void print_record(const json_t *r, int json)
{
    if (json) {
        char *t = json_dumps(r, JSON_COMPACT);
        puts(t);
        free(t);
        return;
    }
    const char *sb = json_string_value(json_object_get(r, "sandbox"));
    char *detail = json_dumps(json_object_get(r, "detail"), JSON_COMPACT | JSON_SORT_KEYS);
    printf("%-24s %-16s %-20s %-20s %s\n", json_string_value(json_object_get(r, "time")),
           json_string_value(json_object_get(r, "actor")),
           json_string_value(json_object_get(r, "kind")), sb ? sb : "-",
           detail && strcmp(detail, "{}") != 0 ? detail : "");
    free(detail);
}

/* Append "&name=value" (escaped) to q when value is set. */
static void add_param(char **q, const char *name, const char *value)
{
    if (value == NULL)
        return;
    gbx_autofree char *v = gbx_url_escape(value, NULL);
    char *n = gbx_asprintf("%s&%s=%s", *q, name, v);
    free(*q);
    *q = n;
}

int gbx_cmd_audit_log(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"sandbox", required_argument, NULL, 'S'},
        {"session", required_argument, NULL, 'E'},
        {"key", required_argument, NULL, 'k'},
        {"kind", required_argument, NULL, 'K'},
        {"since", required_argument, NULL, 's'},
        {"until", required_argument, NULL, 'u'},
        {"limit", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"follow", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *v[6] = {NULL}; /* sandbox, session, key, kind, since, until */
    static const char *const names[6] = {"sandbox", "session", "key", "kind", "since", "until"};
    uint64_t limit = 0;
    int json = 0, follow = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "fh", longopts, NULL)) != -1) {
        switch (c) {
        case 'S':
        case 'E':
        case 'k':
        case 'K':
        case 's':
        case 'u':
            v[strchr("SEkKsu", c) - "SEkKsu"] = optarg;
            break;
        case 'n':
            if (gbx_parse_u64(optarg, 1, 1000, &limit) < 0) {
                gbx_cli_error("--limit: expected 1 to 1000, not '%s'", optarg);
                return GBX_EXIT_USAGE;
            }
            break;
        case 'j':
            json = 1;
            break;
        case 'f':
            follow = 1;
            break;
        case 'h':
            fputs(log_usage, stdout);
            return 0;
        default:
            fputs(log_usage, stderr);
            return GBX_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        gbx_cli_error("audit log: unexpected argument '%s'", argv[optind]);
        fputs(log_usage, stderr);
        return GBX_EXIT_USAGE;
    }
    char *filters = gbx_xstrdup("");
    for (size_t i = 0; i < GBX_ARRAY_SIZE(names); i++)
        add_param(&filters, names[i], v[i]);
    struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART: the sleep ends */
    sigemptyset(&sa.sa_mask);
    if (follow)
        sigaction(SIGINT, &sa, NULL);
    long long after = 0;
    uint64_t left = limit; /* 0: no bound */
    int r = 0;
    while (!interrupted) {
        uint64_t page = left && left < 1000 ? left : 1000;
        gbx_autofree char *path = gbx_asprintf("/v1/audit?after=%lld&limit=%llu%s", after,
                                               (unsigned long long)page, filters);
        json_t *reply = NULL;
        int status = gbx_cli_call("GET", path, NULL, &reply);
        if (interrupted) {
            json_decref(reply);
            break;
        }
        if (status != 200) {
            r = gbx_cli_result(status, reply, 200);
            json_decref(reply);
            break;
        }
        json_t *records = json_object_get(reply, "records"), *rec;
        size_t i, n = json_array_size(records);
        json_array_foreach(records, i, rec)
        {
            print_record(rec, json);
        }
        fflush(stdout);
        after = json_integer_value(json_object_get(reply, "next_after"));
        json_decref(reply);
        if (limit && (left -= n < left ? n : left) == 0)
            break; /* as many as --limit said, followed or not */
        if (n == page)
            continue; /* more waiting */
        if (!follow)
            break;
        usleep(500000);
    }
    free(filters);
    return r;
}
