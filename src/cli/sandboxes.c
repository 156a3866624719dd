/* SPDX-License-Identifier: MIT */
/* glovebox create | ls | kill | status: sandboxes through the daemon's API. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/api.h"
#include "cli/cli.h"

static const char create_usage[] =
    "usage: glovebox create [--id ID] [--template NAME] [--memory SIZE] [--pids N]\n"
    "                       [--cpus N] [--disk SIZE] [--timeout DURATION]\n"
    "                       [--env K=V]... [--label K=V]... [--meta K=V]...\n"
    "                       [--idempotency-key KEY] [--allow HOST]...\n"
    "                       [--network POLICY-JSON|@FILE] [--public]\n"
    "                       [--on-timeout kill|pause] [--auto-resume] [--json]\n"
    "  --public        ingress takes requests to its ports without a credential (docs/ingress.md)\n"
    "  --on-timeout    at its timeout: kill it (the default), or pause it (it keeps its state)\n"
    "  --auto-resume   a paused sandbox is thawed by the next request that needs it (exec,\n"
    "                  files, ingress, envd) instead of answering that it is paused\n";
const char *const gbx_usage_create = create_usage;
static const char ls_usage[] =
    "usage: glovebox ls [--label K=V]... [--template NAME] [--json]   (alias: list)\n";
const char *const gbx_usage_ls = ls_usage;
static const char kill_usage[] = "usage: glovebox kill SANDBOX...\n";
const char *const gbx_usage_kill = kill_usage;
static const char status_usage[] = "usage: glovebox status [--json]\n";
const char *const gbx_usage_status = status_usage;
static const char info_usage[] = "usage: glovebox info SANDBOX [--json]\n";
const char *const gbx_usage_info = info_usage;
static const char timeout_usage[] =
    "usage: glovebox timeout SANDBOX DURATION [--json]   (e.g. 30m; 0 removes it)\n";
const char *const gbx_usage_timeout = timeout_usage;

int gbx_cmd_create(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"id", required_argument, NULL, 'i'},
        {"template", required_argument, NULL, 'T'},
        {"memory", required_argument, NULL, 'm'},
        {"pids", required_argument, NULL, 'p'},
        {"cpus", required_argument, NULL, 'c'},
        {"disk", required_argument, NULL, 'd'},
        {"timeout", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},
        {"env", required_argument, NULL, 'e'},
        {"label", required_argument, NULL, 'l'},
        {"meta", required_argument, NULL, 'M'},
        {"idempotency-key", required_argument, NULL, 'k'},
        {"network", required_argument, NULL, 'N'},
        {"allow", required_argument, NULL, 'A'},
        {"public", no_argument, NULL, 'P'},
        {"on-timeout", required_argument, NULL, 'O'},
        {"auto-resume", no_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    json_t *body = json_object();
    int json = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "i:T:m:p:c:d:t:je:l:M:k:N:A:PO:Rh", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 'e':
        case 'l':
        case 'M': {
            const char *field = c == 'e' ? "env" : c == 'l' ? "labels" : "metadata";
            const char *eq = strchr(optarg, '=');
            if (eq == NULL || eq == optarg) {
                gbx_cli_error("invalid --%s '%s': use KEY=VALUE",
                              c == 'e'   ? "env"
                              : c == 'l' ? "label"
                                         : "meta",
                              optarg);
                json_decref(body);
                return GBX_EXIT_USAGE;
            }
            json_t *map = json_object_get(body, field);
            if (map == NULL) {
                map = json_object();
                json_object_set_new(body, field, map);
            }
            char *key = strndup(optarg, (size_t)(eq - optarg));
            json_object_set_new(map, key, json_string(eq + 1));
            free(key);
            break;
        }
        case 'k':
            json_object_set_new(body, "idempotency_key", json_string(optarg));
            break;
        case 'P':
            json_object_set_new(body, "public", json_true());
            break;
        case 'O': /* the daemon says what it takes */
            json_object_set_new(body, "on_timeout", json_string(optarg));
            break;
        case 'R':
            json_object_set_new(body, "auto_resume", json_true());
            break;
        case 'N': {
            json_t *net = gbx_cli_json_arg("--network", optarg);
            if (net == NULL) {
                json_decref(body);
                return GBX_EXIT_USAGE;
            }
            json_object_set_new(body, "network", net);
            break;
        }
        case 'A': { /* --allow HOST: an allow rule in the (default) policy */
            json_t *net = json_object_get(body, "network");
            if (net == NULL) {
                net = json_object();
                json_object_set_new(body, "network", net);
            }
            json_t *rules = json_object_get(net, "rules");
            if (rules == NULL) {
                rules = json_array();
                json_object_set_new(net, "rules", rules);
            }
            json_array_append_new(rules, json_pack("{s:s,s:s}", "action", "allow", "host", optarg));
            break;
        }
        case 'i':
            json_object_set_new(body, "id", json_string(optarg));
            break;
        case 'T':
            json_object_set_new(body, "template", json_string(optarg));
            break;
        case 'm':
            json_object_set_new(body, "memory", json_string(optarg));
            break;
        case 'd':
            json_object_set_new(body, "disk", json_string(optarg));
            break;
        case 't':
            json_object_set_new(body, "timeout", json_string(optarg));
            break;
        case 'p': {
            char *end;
            long long v = strtoll(optarg, &end, 10);
            if (*end) {
                gbx_cli_error("invalid --pids '%s': use a number", optarg);
                json_decref(body);
                return GBX_EXIT_USAGE;
            }
            json_object_set_new(body, "pids", json_integer(v));
            break;
        }
        case 'c': {
            char *end;
            double v = strtod(optarg, &end);
            if (*end) {
                gbx_cli_error("invalid --cpus '%s': use a number of CPUs", optarg);
                json_decref(body);
                return GBX_EXIT_USAGE;
            }
            json_object_set_new(body, "cpus", json_real(v));
            break;
        }
        case 'j':
            json = 1;
            break;
        case 'h':
            json_decref(body);
            return gbx_cli_help(create_usage);
        default:
            json_decref(body);
            return GBX_EXIT_USAGE;
        }
    }
    json_t *reply = NULL;
    int status = gbx_cli_call("POST", "/v1/sandboxes", body, &reply);
    json_decref(body);
    if (status == 201 || status == 200) { /* 200: a retried create (idempotency key) */
        if (json)
            gbx_cli_print_json(reply);
        else
            puts(json_string_value(json_object_get(reply, "id")));
    }
    int r = gbx_cli_result(status, reply, status == 200 ? 200 : 201);
    json_decref(reply);
    return r;
}

/* Append s to a query string, percent-encoded. */
static void query_add(char *q, size_t qsz, const char *key, const char *s)
{
    size_t n = strlen(q);
    n += (size_t)snprintf(q + n, qsz > n ? qsz - n : 0, "%s%s=", strchr(q, '?') ? "&" : "?", key);
    for (; *s && n + 4 < qsz; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            strchr("-_.~", ch))
            q[n++] = (char)ch;
        else
            n += (size_t)snprintf(q + n, qsz - n, "%%%02X", ch);
    }
    q[n < qsz ? n : qsz - 1] = '\0';
}

int gbx_cmd_ls(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"label", required_argument, NULL, 'l'},
        {"template", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char filter[2048] = "";
    int json = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "jl:T:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = 1;
            break;
        case 'l':
            query_add(filter, sizeof(filter), "label", optarg);
            break;
        case 'T':
            query_add(filter, sizeof(filter), "template", optarg);
            break;
        case 'h':
            return gbx_cli_help(ls_usage);
        default:
            return GBX_EXIT_USAGE;
        }
    }
    /* every page, following next_cursor */
    json_t *all = json_array();
    json_t *reply = NULL;
    int status = 0;
    char *cursor = NULL;
    for (;;) {
        char path[4096];
        snprintf(path, sizeof(path), "/v1/sandboxes%s", filter);
        query_add(path, sizeof(path), "limit", "1000");
        if (cursor)
            query_add(path, sizeof(path), "cursor", cursor);
        free(cursor);
        cursor = NULL;
        json_decref(reply);
        reply = NULL;
        status = gbx_cli_call("GET", path, NULL, &reply);
        if (status != 200)
            break;
        json_array_extend(all, json_object_get(reply, "sandboxes"));
        const char *next = json_string_value(json_object_get(reply, "next_cursor"));
        if (next == NULL)
            break;
        cursor = strdup(next);
    }
    if (status == 200) {
        if (json) {
            gbx_cli_print_json(all);
        } else {
            printf("%-24s %-10s %-11s %-26s %-26s %s\n", "ID", "TEMPLATE", "STATE", "CREATED",
                   "EXPIRES", "LABELS");
            size_t i;
            json_t *sb;
            json_array_foreach(all, i, sb)
            {
                const char *exp = json_string_value(json_object_get(sb, "expires_at"));
                char labels[256] = "";
                const char *k;
                json_t *v;
                json_object_foreach(json_object_get(sb, "labels"), k, v)
                {
                    size_t n = strlen(labels);
                    snprintf(labels + n, sizeof(labels) - n, "%s%s=%s", n ? "," : "", k,
                             json_string_value(v));
                }
                const char *state = json_string_value(json_object_get(sb, "state"));
                printf("%-24s %-10s %-11s %-26s %-26s %s\n",
                       json_string_value(json_object_get(sb, "id")),
                       json_string_value(json_object_get(sb, "template")), state ? state : "-",
                       json_string_value(json_object_get(sb, "created_at")), exp ? exp : "-",
                       labels[0] ? labels : "-");
            }
        }
    }
    json_decref(all);
    int r = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return r;
}

int gbx_cmd_kill(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-')
        return gbx_cli_usage(kill_usage);
    int worst = 0;
    for (int i = 1; i < argc; i++) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/sandboxes/%s", argv[i]);
        json_t *reply = NULL;
        int status = gbx_cli_call("DELETE", path, NULL, &reply);
        int r = gbx_cli_result(status, reply, 204);
        json_decref(reply);
        if (r > worst)
            worst = r;
    }
    return worst;
}

int gbx_cmd_status(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc > 1)
        return gbx_cli_usage(status_usage);
    json_t *version = NULL, *list = NULL;
    int s1 = gbx_cli_call("GET", "/version", NULL, &version);
    if (s1 != 200) {
        json_decref(version);
        return gbx_cli_result(s1, NULL, 200);
    }
    int s2 = gbx_cli_call("GET", "/v1/sandboxes", NULL, &list);
    json_t *health = NULL;
    int s3 = gbx_cli_call("GET", "/healthz", NULL, &health);
    int r = s2 == 200 && s3 == 200 ? GBX_EXIT_OK : GBX_EXIT_FAILED;
    /* the settings: the admin's (a key over TCP is not shown them) */
    json_t *cfg = NULL;
    if (gbx_cli_call("GET", "/v1/daemon/config", NULL, &cfg) != 200) {
        json_decref(cfg);
        cfg = NULL;
    }
    if (json) {
        json_t *caps = json_object_get(health, "capabilities");
        json_t *o =
            json_pack("{s:O?,s:s,s:I,s:O?,s:O?}", "version", json_object_get(version, "version"),
                      "socket", gbx_cli_socket(), "sandboxes",
                      (json_int_t)json_array_size(json_object_get(list, "sandboxes")),
                      "capabilities", caps, "config", cfg);
        gbx_cli_print_json(o);
        json_decref(o);
        json_decref(cfg);
        json_decref(version);
        json_decref(list);
        json_decref(health);
        return r;
    }
    printf("gloveboxd %s on %s: serving, %zu sandboxes\n",
           json_string_value(json_object_get(version, "version")), gbx_cli_socket(),
           json_array_size(json_object_get(list, "sandboxes")));
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(health, "capabilities"), k, v)
    {
        const char *why = json_string_value(json_object_get(v, "reason"));
        printf("  %-10s %s%s%s\n", k, json_string_value(json_object_get(v, "state")),
               why ? ": " : "", why ? why : "");
    }
    if (cfg) {
        json_t *listening = json_object_get(cfg, "listening");
        printf("  %-10s %s", "listening", gbx_cli_socket());
        size_t i;
        json_array_foreach(listening, i, v)
        {
            printf(", %s", json_string_value(v));
        }
        printf("\nsettings from %s%s, read %s (%lld reloads); not at their defaults:\n",
               json_string_value(json_object_get(cfg, "file")),
               json_is_true(json_object_get(cfg, "file_found")) ? "" : " (not there) and flags",
               json_string_value(json_object_get(cfg, "loaded_at")),
               (long long)json_integer_value(json_object_get(cfg, "reloads")));
        gbx_cli_print_settings(cfg, 0);
        const char *lerr = json_string_value(json_object_get(cfg, "last_reload_error"));
        if (lerr)
            printf("the last reload failed (nothing changed): %s\n", lerr);
    }
    json_decref(cfg);
    json_decref(version);
    json_decref(list);
    json_decref(health);
    return r;
}

int gbx_cmd_info(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json"); /* one line instead of indented */
    if (argc != 2 || argv[1][0] == '-')
        return gbx_cli_usage(info_usage);
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", argv[1]);
    json_t *reply = NULL;
    int status = gbx_cli_call("GET", path, NULL, &reply);
    if (status == 200 && json) {
        gbx_cli_print_json(reply);
    } else if (status == 200) {
        char *t = json_dumps(reply, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        puts(t);
        free(t);
    }
    int r = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return r;
}

int gbx_cmd_timeout(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc != 3 || argv[1][0] == '-')
        return gbx_cli_usage(timeout_usage);
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/timeout", argv[1]);
    json_t *body = json_pack("{s:s}", "timeout", argv[2]);
    json_t *reply = NULL;
    int status = gbx_cli_call("POST", path, body, &reply);
    json_decref(body);
    if (status == 200 && json) {
        gbx_cli_print_json(reply);
    } else if (status == 200) {
        const char *exp = json_string_value(json_object_get(reply, "expires_at"));
        printf("%s\n", exp ? exp : "no timeout");
    }
    int r = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return r;
}
