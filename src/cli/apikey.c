/* SPDX-License-Identifier: MIT */
/* glovebox apikey create NAME [--json] | list [--json] | revoke NAME
 * API keys let clients use the daemon's TCP listener (gloveboxd --listen); each key sees only
 * its own sandboxes. The key is shown once, at creation; the daemon keeps only its hash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/api.h"
#include "cli/cli.h"

static const char apikey_usage[] = "usage: glovebox apikey create NAME [--json]\n"
                                   "       glovebox apikey list [--json]\n"
                                   "       glovebox apikey revoke NAME\n";

static int has_json(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0)
            return 1;
    return 0;
}

int gbx_cmd_apikey(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fputs(apikey_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int json = has_json(argc, argv);
    json_t *reply = NULL;
    int r;
    if (strcmp(argv[1], "create") == 0 && argc >= 3 && argv[2][0] != '-') {
        json_t *body = json_pack("{s:s}", "name", argv[2]);
        int status = gbx_cli_call("POST", "/v1/apikeys", body, &reply);
        json_decref(body);
        if (status == 201) {
            const char *key = json_string_value(json_object_get(reply, "key"));
            if (json) {
                json_t *o = json_pack("{s:s,s:s}", "name", argv[2], "key", key);
                char *t = json_dumps(o, JSON_COMPACT);
                puts(t);
                free(t);
                json_decref(o);
            } else {
                printf("%s\n", key);
                fprintf(stderr, "glovebox: keep this key: it is shown only once\n");
            }
        }
        r = gbx_cli_result(status, reply, 201);
    } else if (strcmp(argv[1], "list") == 0) {
        int status = gbx_cli_call("GET", "/v1/apikeys", NULL, &reply);
        if (status == 200) {
            json_t *keys = json_object_get(reply, "apikeys");
            if (json) {
                char *t = json_dumps(keys, JSON_COMPACT);
                puts(t);
                free(t);
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
    } else if (strcmp(argv[1], "revoke") == 0 && argc >= 3) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/apikeys/%s", argv[2]);
        int status = gbx_cli_call("DELETE", path, NULL, &reply);
        r = gbx_cli_result(status, reply, 204);
    } else {
        fputs(apikey_usage, stderr);
        r = 2;
    }
    json_decref(reply);
    return r;
}
