/* SPDX-License-Identifier: MIT */
/* glovebox egress status | block | unblock | ca | policy ID [POLICY] | log ID [-f] [--json]
 * The egress gateway through the daemon's API: the emergency block, the CA certificate
 * sandboxes trust, a sandbox's policy (shown, or replaced live), and its egress log. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/api.h"
#include "cli/cli.h"

static const char egress_usage[] =
    "usage: glovebox egress status [--json]\n"
    "       glovebox egress block | unblock [--json]  cut every sandbox's egress now / lift it\n"
    "       glovebox egress ca [--json]               the CA certificate sandboxes trust (PEM)\n"
    "       glovebox egress policy ID [POLICY] [--json]\n"
    "                                show, or replace live (JSON, @FILE or -)\n"
    "       glovebox egress log ID [-f|--follow] [--json]\n"
    "                                DNS answers, connections and requests (--json: NDJSON)\n";

json_t *gbx_cli_json_arg(const char *what, const char *arg)
{
    json_error_t e;
    json_t *j;
    if (strcmp(arg, "-") == 0)
        j = json_loadf(stdin, 0, &e);
    else if (arg[0] == '@')
        j = json_load_file(arg + 1, 0, &e);
    else
        j = json_loads(arg, 0, &e);
    if (j == NULL)
        gbx_cli_error("%s: not JSON: %s (line %d)", what, e.text, e.line);
    return j;
}

static void print_json(json_t *j, int compact)
{
    if (compact) {
        gbx_cli_print_json(j);
        return;
    }
    char *t = json_dumps(j, JSON_INDENT(2));
    if (t)
        puts(t);
    free(t);
}

/* a string member, "" when absent */
static const char *str(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* one event as a line: TIME KIND DECISION NAME[:PORT] details */
static void print_event(json_t *e)
{
    const char *kind = str(e, "kind"), *name = str(e, "name");
    json_t *port = json_object_get(e, "port");
    char target[300];
    if (port)
        snprintf(target, sizeof(target), "%s:%lld", *name ? name : str(e, "addr"),
                 (long long)json_integer_value(port));
    else
        snprintf(target, sizeof(target), "%s", name);
    printf("%-24s %-5s %-5s %-40s", str(e, "time"), kind, str(e, "decision"), target);
    if (strcmp(kind, "dns") == 0) {
        const char *ans = str(e, "answer");
        printf(" %s%s%s", str(e, "type"), *ans ? " " : "", ans);
    } else if (strcmp(kind, "http") == 0) {
        printf(" %s %s", str(e, "method"), str(e, "path"));
    } else if (json_object_get(e, "bytes_up")) {
        printf(" %s up=%lld down=%lld %lldms", str(e, "mode"),
               (long long)json_integer_value(json_object_get(e, "bytes_up")),
               (long long)json_integer_value(json_object_get(e, "bytes_down")),
               (long long)json_integer_value(json_object_get(e, "duration_ms")));
    }
    if (*str(e, "secret"))
        printf(" secret=%s", str(e, "secret"));
    if (*str(e, "reason"))
        printf(" (%s)", str(e, "reason"));
    putchar('\n');
}

static int egress_log(const char *id, int follow, int json)
{
    long long after = 0;
    for (;;) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/egress?after=%lld&limit=1000", id, after);
        json_t *reply;
        int r = gbx_cli_call_ok("GET", path, NULL, &reply);
        if (r != GBX_EXIT_OK)
            return r;
        json_t *events = json_object_get(reply, "events");
        size_t i;
        json_t *e;
        json_array_foreach(events, i, e)
        {
            if (json)
                gbx_cli_print_json(e);
            else
                print_event(e);
        }
        fflush(stdout);
        after = json_integer_value(json_object_get(reply, "next_after"));
        size_t n = json_array_size(events);
        json_decref(reply);
        if (n == 1000)
            continue; /* more waiting */
        if (!follow)
            return 0;
        usleep(500000);
    }
}

int gbx_cmd_egress(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc < 2)
        return gbx_cli_usage(egress_usage);
    const char *sub = argv[1];
    json_t *reply = NULL;
    int r;
    if ((strcmp(sub, "status") == 0 || strcmp(sub, "ca") == 0) && argc == 2) {
        int status = gbx_cli_call("GET", "/v1/egress", NULL, &reply);
        if (status == 200 && json && sub[0] == 'c') { /* {"ca_certificate"} alone */
            json_object_del(reply, "blocked");
            json_object_del(reply, "default_mode");
        }
        if (status == 200 && json)
            gbx_cli_print_json(reply);
        else if (status == 200 && sub[0] == 'c')
            fputs(json_string_value(json_object_get(reply, "ca_certificate")), stdout);
        else if (status == 200)
            printf("egress: %s\ndefault mode for new sandboxes: %s\n",
                   json_is_true(json_object_get(reply, "blocked")) ? "BLOCKED" : "flowing",
                   json_string_value(json_object_get(reply, "default_mode")));
        r = gbx_cli_result(status, reply, 200);
    } else if ((strcmp(sub, "block") == 0 || strcmp(sub, "unblock") == 0) && argc == 2) {
        int status =
            gbx_cli_call(sub[0] == 'b' ? "POST" : "DELETE", "/v1/egress/block", NULL, &reply);
        if (status == 200 && json)
            gbx_cli_print_json(reply);
        else if (status == 200)
            printf("egress %s\n",
                   sub[0] == 'b' ? "blocked: every connection was cut" : "unblocked");
        r = gbx_cli_result(status, reply, 200);
    } else if (strcmp(sub, "policy") == 0 && argc >= 3 && argc <= 4) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/network", argv[2]);
        json_t *body = NULL;
        if (argc == 4 && (body = gbx_cli_json_arg("policy", argv[3])) == NULL)
            return GBX_EXIT_USAGE;
        int status = gbx_cli_call(body ? "PUT" : "GET", path, body, &reply);
        json_decref(body);
        if (status == 200)
            print_json(json_object_get(reply, "network"), json);
        r = gbx_cli_result(status, reply, 200);
    } else if (strcmp(sub, "log") == 0 && argc >= 3) {
        int follow = 0;
        const char *id = NULL;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--follow") == 0)
                follow = 1;
            else if (id == NULL && argv[i][0] != '-')
                id = argv[i];
            else
                return gbx_cli_usage(egress_usage);
        }
        if (id == NULL)
            return gbx_cli_usage(egress_usage);
        return egress_log(id, follow, json);
    } else {
        return gbx_cli_usage(egress_usage);
    }
    json_decref(reply);
    return r;
}
const char *const gbx_usage_egress = egress_usage;
