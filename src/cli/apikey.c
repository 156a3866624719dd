/* SPDX-License-Identifier: MIT */
/* glovebox apikey create NAME [--quota Q] [--json] | ls [--json] | revoke NAME
 *                | quota NAME [Q | --clear] [--json]
 * API keys let clients use the daemon's TCP listener (gloveboxd --listen); each key sees only
 * its own sandboxes. The key is shown once, at creation; the daemon keeps only its hash. A
 * key's own quota ("sandboxes=10,memory=4G,...") overrides the daemon's --quota-* settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/api.h"
#include "cli/cli.h"

static const char apikey_usage[] =
    "usage: glovebox apikey create NAME [--quota Q] [--json]\n"
    "       glovebox apikey ls [--json]                  (alias: list)\n"
    "       glovebox apikey revoke NAME\n"
    "       glovebox apikey quota NAME [Q | --clear] [--json]\n"
    "  Q: sandboxes=N,memory=SIZE,disk=SIZE,snapshots=N,sessions=N,artifacts=N,\n"
    "     artifact-bytes=SIZE (any of them; 0: none); the others are the daemon's\n";

/* The value of --quota Q or --quota=Q, or NULL. */
static const char *quota_arg(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--quota") == 0 && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], "--quota=", 8) == 0)
            return argv[i] + 8;
    }
    return NULL;
}

static void print_quota(json_t *reply)
{
    static const char *const names[] = {"sandboxes", "memory",    "disk",          "snapshots",
                                        "sessions",  "artifacts", "artifact-bytes"};
    json_t *q = json_object_get(reply, "quota"), *u = json_object_get(reply, "use");
    const char *own = json_string_value(json_object_get(reply, "own"));
    printf("%-16s %-20s %s\n", "QUOTA", "LIMIT", "IN USE");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        json_t *lim = json_object_get(q, names[i]), *use = json_object_get(u, names[i]);
        char l[32] = "none", n[32] = "-";
        if (json_integer_value(lim))
            snprintf(l, sizeof(l), "%lld", (long long)json_integer_value(lim));
        if (use)
            snprintf(n, sizeof(n), "%lld", (long long)json_integer_value(use));
        printf("%-16s %-20s %s\n", names[i], l, n);
    }
    printf("(own: %s)\n", own ? own : "none: the daemon's quotas");
}

int gbx_cmd_apikey(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc < 2)
        return gbx_cli_usage(apikey_usage);
    json_t *reply = NULL;
    int r;
    if (strcmp(argv[1], "create") == 0 && argc >= 3 && argv[2][0] != '-') {
        json_t *body = json_pack("{s:s}", "name", argv[2]);
        const char *quota = quota_arg(argc, argv);
        if (quota)
            json_object_set_new(body, "quota", json_string(quota));
        int status = gbx_cli_call("POST", "/v1/apikeys", body, &reply);
        json_decref(body);
        if (status == 201) {
            const char *key = json_string_value(json_object_get(reply, "key"));
            if (json) {
                json_t *o = json_pack("{s:s,s:s}", "name", argv[2], "key", key);
                gbx_cli_print_json(o);
                json_decref(o);
            } else {
                printf("%s\n", key);
                fprintf(stderr, "glovebox: keep this key: it is shown only once\n");
            }
        }
        r = gbx_cli_result(status, reply, 201);
    } else if (gbx_cli_is(argv[1], "ls") && argc == 2) {
        int status = gbx_cli_call("GET", "/v1/apikeys", NULL, &reply);
        if (status == 200) {
            json_t *keys = json_object_get(reply, "apikeys");
            if (json) {
                gbx_cli_print_json(keys);
            } else {
                printf("%-32s %s\n", "NAME", "STATE");
                size_t i;
                json_t *k;
                json_array_foreach(keys, i, k)
                {
                    printf("%-32s %s\n", json_string_value(json_object_get(k, "name")),
                           json_is_true(json_object_get(k, "revoked")) ? "revoked" : "live");
                }
            }
        }
        r = gbx_cli_result(status, reply, 200);
    } else if (strcmp(argv[1], "quota") == 0 && argc >= 3 && argv[2][0] != '-') {
        char path[256];
        snprintf(path, sizeof(path), "/v1/apikeys/%s/quota", argv[2]);
        const char *q = NULL;
        int clear = 0;
        for (int i = 3; i < argc; i++) {
            if (strcmp(argv[i], "--clear") == 0)
                clear = 1;
            else if (argv[i][0] != '-')
                q = argv[i];
        }
        int status;
        if (q || clear) {
            json_t *body = json_pack("{s:s?}", "quota", clear ? NULL : q);
            if (clear)
                json_object_set_new(body, "quota", json_null());
            status = gbx_cli_call("PUT", path, body, &reply);
            json_decref(body);
        } else {
            status = gbx_cli_call("GET", path, NULL, &reply);
        }
        if (status == 200) {
            if (json) {
                gbx_cli_print_json(reply);
            } else {
                print_quota(reply);
            }
        }
        r = gbx_cli_result(status, reply, 200);
    } else if (strcmp(argv[1], "revoke") == 0 && argc == 3) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/apikeys/%s", argv[2]);
        int status = gbx_cli_call("DELETE", path, NULL, &reply);
        r = gbx_cli_result(status, reply, 204);
    } else {
        r = gbx_cli_usage(apikey_usage);
    }
    json_decref(reply);
    return r;
}
const char *const gbx_usage_apikey = apikey_usage;
