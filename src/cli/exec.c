/* SPDX-License-Identifier: MIT */
/* glovebox exec SANDBOX [--user U] [--cwd DIR] [--env K=V]... -- CMD [ARG...]
 * Runs CMD in a sandbox of the daemon, streams its output here and exits with its status
 * (128+N when signal N killed it). */
#include <getopt.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileutil.h"
#include "base/parse.h"
#include "cli/api.h"
#include "cli/cli.h"

struct exec_state {
    int status; /* -1 until the exit event */
};

static void on_line(void *arg, const char *line, size_t len)
{
    struct exec_state *st = arg;
    json_t *ev = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type == NULL) {
        json_decref(ev);
        return;
    }
    if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        const char *b64 = json_string_value(json_object_get(ev, "data"));
        size_t n = b64 ? strlen(b64) : 0;
        unsigned char *out = malloc(n / 4 * 3 + 3);
        int m = out ? EVP_DecodeBlock(out, (const unsigned char *)b64, (int)n) : -1;
        if (m > 0) {
            /* EVP_DecodeBlock counts the padding as zero bytes */
            if (n >= 1 && b64[n - 1] == '=')
                m--;
            if (n >= 2 && b64[n - 2] == '=')
                m--;
            (void)!gbx_write_all(strcmp(type, "stdout") == 0 ? STDOUT_FILENO : STDERR_FILENO, out,
                                 (size_t)m);
        }
        free(out);
    } else if (strcmp(type, "exit") == 0) {
        json_t *sig = json_object_get(ev, "signal");
        st->status = sig ? 128 + (int)json_integer_value(sig)
                         : (int)json_integer_value(json_object_get(ev, "exit_code"));
    } else if (strcmp(type, "error") == 0) {
        gbx_cli_error("%s", json_string_value(json_object_get(ev, "message")));
    }
    json_decref(ev);
}

int gbx_cmd_exec(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"user", required_argument, NULL, 'u'},
        {"cwd", required_argument, NULL, 'w'},
        {"env", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    json_t *body = json_object(), *env = json_object();
    int c;
    /* glovebox exec ID [options] -- CMD, or glovebox exec [options] ID -- CMD */
    const char *id = NULL;
    if (argc > 1 && argv[1][0] != '-') {
        id = argv[1];
        argc--;
        argv++;
    }
    optind = 0;
    while ((c = getopt_long(argc, argv, "+u:w:e:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'u':
            json_object_set_new(body, "user", json_string(optarg));
            break;
        case 'w':
            json_object_set_new(body, "cwd", json_string(optarg));
            break;
        case 'e': {
            const char *eq = strchr(optarg, '=');
            if (gbx_env_valid(optarg) < 0 || eq == NULL) {
                gbx_cli_error("invalid --env '%s': use KEY=VALUE", optarg);
                json_decref(body);
                json_decref(env);
                return 125;
            }
            char *key = strndup(optarg, (size_t)(eq - optarg));
            json_object_set_new(env, key, json_string(eq + 1));
            free(key);
            break;
        }
        case 'h':
            puts("usage: glovebox exec SANDBOX [--user U] [--cwd DIR] [--env K=V]... -- CMD "
                 "[ARG...]");
            json_decref(body);
            json_decref(env);
            return 0;
        default:
            json_decref(body);
            json_decref(env);
            return 125;
        }
    }
    if (id == NULL && optind < argc)
        id = argv[optind++];
    if (id == NULL) {
        gbx_cli_error("usage: glovebox exec SANDBOX [options] -- CMD [ARG...]");
        json_decref(body);
        json_decref(env);
        return 125;
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc) {
        gbx_cli_error("usage: glovebox exec SANDBOX [options] -- CMD [ARG...]");
        json_decref(body);
        json_decref(env);
        return 125;
    }
    json_t *cmd = json_array();
    for (int i = optind; i < argc; i++)
        json_array_append_new(cmd, json_string(argv[i]));
    json_object_set_new(body, "cmd", cmd);
    if (json_object_size(env))
        json_object_set(body, "env", env);
    json_decref(env);
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
    struct exec_state st = {.status = -1};
    json_t *reply = NULL;
    int status = gbx_cli_stream("POST", path, body, on_line, &st, &reply);
    json_decref(body);
    if (status != 200) {
        if (status >= 0)
            gbx_cli_print_error(status, reply);
        json_decref(reply);
        return status == 404 ? 125 : status == 400 ? 127 : 125;
    }
    json_decref(reply);
    if (st.status < 0) {
        gbx_cli_error("the stream ended before the process did");
        return 125;
    }
    return st.status;
}
