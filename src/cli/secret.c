/* SPDX-License-Identifier: MIT */
/* glovebox secret add NAME --host H... --header 'Authorization: Bearer ${secret}'
 *        | rotate NAME | ls [--json] | rm NAME
 * Credentials the egress proxy injects into matching requests. The value is read from
 * standard input (one line) or --value-file, never from the command line (which other users
 * can see in ps); the daemon never shows it again. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileutil.h"
#include "cli/api.h"
#include "cli/cli.h"

static const char secret_usage[] =
    "usage: glovebox secret add NAME --host HOST... --header 'NAME: ...${secret}...'\n"
    "                           [--value-file FILE]   (else the value is read from stdin)\n"
    "                           [--json]\n"
    "       glovebox secret rotate NAME [--value-file FILE] [--json]\n"
    "       glovebox secret ls [--json]                 (alias: list)\n"
    "       glovebox secret rm NAME                     (alias: delete, revoke)\n"
    "Attach one to a sandbox by name: its network policy's \"secrets\" list.\n";

/* The value: the file's content or standard input's, without one final newline. */
static char *read_value(const char *file)
{
    char *v = NULL;
    size_t n = 0;
    if (file) {
        if (gbx_read_file(file, 65536, &v, &n) < 0) {
            gbx_cli_error("cannot read '%s'", file);
            return NULL;
        }
    } else {
        size_t cap = 0;
        ssize_t got = getline(&v, &cap, stdin);
        if (got < 0) {
            free(v);
            gbx_cli_error("no value on standard input");
            return NULL;
        }
        n = (size_t)got;
    }
    if (n && v[n - 1] == '\n')
        v[--n] = '\0';
    if (n && v[n - 1] == '\r')
        v[--n] = '\0';
    return v;
}

static void wipe_free(char *v)
{
    if (v == NULL)
        return;
    volatile char *p = v;
    while (*p)
        *p++ = 0;
    free(v);
}

static int secret_add(int argc, char **argv, int rotate, int json)
{
    static const struct option longopts[] = {
        {"host", required_argument, NULL, 'H'},
        {"header", required_argument, NULL, 'e'},
        {"value-file", required_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    json_t *hosts = json_array();
    const char *header = NULL, *file = NULL;
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "H:e:f:", longopts, NULL)) != -1) {
        if (c == 'H')
            json_array_append_new(hosts, json_string(optarg));
        else if (c == 'e')
            header = optarg;
        else if (c == 'f')
            file = optarg;
        else {
            json_decref(hosts);
            return GBX_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc || (!rotate && (json_array_size(hosts) == 0 || header == NULL))) {
        json_decref(hosts);
        return gbx_cli_usage(secret_usage);
    }
    const char *name = argv[optind];
    char path[256];
    snprintf(path, sizeof(path), "/v1/secrets/%s", name);
    json_t *reply = NULL;
    if (rotate) { /* keep hosts and header unless given */
        int status = gbx_cli_call("GET", path, NULL, &reply);
        if (status != 200) {
            json_decref(hosts);
            int r = gbx_cli_result(status, reply, 200);
            json_decref(reply);
            return r;
        }
        if (json_array_size(hosts) == 0)
            json_array_extend(hosts, json_object_get(reply, "hosts"));
        if (header == NULL)
            header = json_string_value(json_object_get(reply, "header"));
    }
    char *value = read_value(file);
    if (value == NULL) {
        json_decref(hosts);
        json_decref(reply);
        return GBX_EXIT_FAILED;
    }
    json_t *body = json_pack("{s:s,s:s,s:O,s:s}", "name", name, "value", value, "hosts", hosts,
                             "header", header);
    wipe_free(value);
    json_decref(hosts);
    json_decref(reply);
    reply = NULL;
    int status = gbx_cli_call(rotate ? "PUT" : "POST", rotate ? path : "/v1/secrets", body, &reply);
    json_t *v = json_object_get(body, "value");
    if (v)
        json_string_set(v, ""); /* no copy of the value outlives the call */
    json_decref(body);
    if ((status == 200 || status == 201) && json)
        gbx_cli_print_json(reply);
    else if (status == 200 || status == 201)
        printf("secret '%s' %s\n", name, rotate ? "rotated" : "stored");
    int r = gbx_cli_result(status, reply, rotate ? 200 : 201);
    json_decref(reply);
    return r;
}

int gbx_cmd_secret(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc < 2)
        return gbx_cli_usage(secret_usage);
    json_t *reply = NULL;
    int r;
    if (strcmp(argv[1], "add") == 0 || strcmp(argv[1], "rotate") == 0)
        return secret_add(argc - 1, argv + 1, argv[1][0] == 'r', json);
    if (gbx_cli_is(argv[1], "ls") && argc == 2) {
        int status = gbx_cli_call("GET", "/v1/secrets", NULL, &reply);
        if (status == 200) {
            json_t *list = json_object_get(reply, "secrets");
            if (json) {
                gbx_cli_print_json(list);
            } else {
                printf("%-24s %-40s %s\n", "NAME", "HOSTS", "HEADER");
                size_t i;
                json_t *sct;
                json_array_foreach(list, i, sct)
                {
                    char *h = json_dumps(json_object_get(sct, "hosts"), JSON_COMPACT);
                    printf("%-24s %-40s %s\n", json_string_value(json_object_get(sct, "name")),
                           h ? h : "", json_string_value(json_object_get(sct, "header")));
                    free(h);
                }
            }
        }
        r = gbx_cli_result(status, reply, 200);
    } else if ((gbx_cli_is(argv[1], "rm") || strcmp(argv[1], "revoke") == 0) && argc == 3) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/secrets/%s", argv[2]);
        int status = gbx_cli_call("DELETE", path, NULL, &reply);
        r = gbx_cli_result(status, reply, 204);
    } else {
        r = gbx_cli_usage(secret_usage);
    }
    json_decref(reply);
    return r;
}
const char *const gbx_usage_secret = secret_usage;
