/* SPDX-License-Identifier: MIT */
/* glovebox daemon reload [--json] | config [--json]
 * reload: the daemon reads its configuration file and its flags again (as on SIGHUP) and
 * applies what a running daemon can change; config: the settings in force, where each came
 * from, and which ones wait for a restart. The admin's (the unix socket). */
#include <stdio.h>
#include <string.h>

#include "cli/api.h"
#include "cli/cli.h"

static const char daemon_usage[] =
    "usage: glovebox daemon reload [--json]   re-read the configuration file and flags now\n"
    "       glovebox daemon config [--json]   the settings in force and where each came from\n";

const char *const gbx_usage_daemon = daemon_usage;

static void print_names(const char *what, json_t *names)
{
    if (json_array_size(names) == 0)
        return;
    printf("%s:", what);
    size_t i;
    json_t *v;
    json_array_foreach(names, i, v)
    {
        printf(" %s", json_string_value(v));
    }
    putchar('\n');
}

/* The table of settings: name, value, source; pending ones and those a reload cannot change
 * are marked. all: every setting, else those not at their default. */
void gbx_cli_print_settings(json_t *cfg, int all)
{
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(cfg, "settings"), k, v)
    {
        const char *src = json_string_value(json_object_get(v, "source"));
        const char *pending = json_string_value(json_object_get(v, "pending"));
        if (!all && src && strcmp(src, "default") == 0 && pending == NULL)
            continue;
        const char *val = json_string_value(json_object_get(v, "value"));
        printf("  %-22s %-24s %s%s%s%s\n", k, val ? val : "(none)", src ? src : "?",
               json_is_false(json_object_get(v, "reload")) ? ", restart to change" : "",
               pending ? "; the file now says: " : "", pending ? pending : "");
    }
}

static int cmd_config(int json)
{
    json_t *reply;
    int r = gbx_cli_call_ok("GET", "/v1/daemon/config", NULL, &reply);
    if (r != GBX_EXIT_OK)
        return r;
    if (json) {
        gbx_cli_print_json(reply);
    } else {
        printf("configuration file: %s%s (read %s)\n",
               json_string_value(json_object_get(reply, "file")),
               json_is_true(json_object_get(reply, "file_found")) ? "" : " (not there)",
               json_string_value(json_object_get(reply, "loaded_at")));
        gbx_cli_print_settings(reply, 1);
    }
    json_decref(reply);
    return 0;
}

static int cmd_reload(int json)
{
    json_t *reply;
    int r = gbx_cli_call_ok("POST", "/v1/daemon/reload", NULL, &reply);
    if (r != GBX_EXIT_OK)
        return r;
    if (json) {
        gbx_cli_print_json(reply);
    } else {
        json_t *changed = json_object_get(reply, "changed");
        printf("reloaded %s%s: %s\n", json_string_value(json_object_get(reply, "file")),
               json_is_true(json_object_get(reply, "file_found")) ? "" : " (not there)",
               json_array_size(changed) ? "changed" : "nothing changed");
        print_names("  applied", changed);
        print_names("  needs a restart of gloveboxd", json_object_get(reply, "restart_needed"));
    }
    json_decref(reply);
    return 0;
}

int gbx_cmd_daemon(int argc, char **argv)
{
    int json = 0;
    const char *sub = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (sub == NULL && argv[i][0] != '-')
            sub = argv[i];
        else {
            gbx_cli_error("daemon: unexpected argument '%s'", argv[i]);
            return gbx_cli_usage(daemon_usage);
        }
    }
    if (sub && strcmp(sub, "reload") == 0)
        return cmd_reload(json);
    if (sub && strcmp(sub, "config") == 0)
        return cmd_config(json);
    return gbx_cli_usage(daemon_usage);
}
