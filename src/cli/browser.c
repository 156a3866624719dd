/* SPDX-License-Identifier: MIT */
/* glovebox browser start|status|stop|screenshot SANDBOX: the sandbox's Chromium
 * (docs/browser.md), over /v1/sandboxes/{id}/browser. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/parse.h"
#include "cli/api.h"
#include "cli/cli.h"

static const char browser_usage[] =
    "usage: glovebox browser start SANDBOX [--port N] [--profile DIR] [--json]\n"
    "       glovebox browser status SANDBOX [--json]\n"
    "       glovebox browser stop SANDBOX [--json]\n"
    "       glovebox browser screenshot SANDBOX [-o FILE] [--save PATH] [--artifact NAME]\n"
    "start: Chromium, headless, inside the sandbox as its user, with its profile in the\n"
    "sandbox's home (default /home/user/.glovebox/browser), its DevTools server on the\n"
    "sandbox's loopback port N (default 9222); prints the URL that reaches it through the\n"
    "daemon's ingress, for chromium.connectOverCDP(URL) with the owner's key (idempotent: a\n"
    "running browser is kept). stop: closes it (Chromium writes its profile out first).\n"
    "screenshot: a PNG of its page into FILE (-o, '-' for standard output), or saved in the\n"
    "sandbox at PATH (--save; default /tmp/glovebox-screenshot-TIME.png with --artifact) and\n"
    "published as the artifact NAME (--artifact).\n";

const char *const gbx_usage_browser = browser_usage;

static int print_state(json_t *st, const char *id, int json)
{
    if (json) {
        gbx_cli_print_json(st);
        return GBX_EXIT_OK;
    }
    int running = json_is_true(json_object_get(st, "running"));
    unsigned port = (unsigned)json_integer_value(json_object_get(st, "port"));
    if (!running) {
        printf("not running (profile %s)\n", json_string_value(json_object_get(st, "profile")));
        return GBX_EXIT_OK;
    }
    char url[512] = "", sid[64] = "";
    int r = gbx_cli_port_url(id, port, url, sizeof(url), sid, sizeof(sid));
    if (r != GBX_EXIT_OK)
        return r;
    if (url[0] == '\0') { /* running, but nothing outside reaches it yet */
        fprintf(stderr, "glovebox: the browser runs; %s\n", gbx_cli_ingress_off);
        printf("%s\n", json_string_value(json_object_get(st, "ingress_path")));
        return GBX_EXIT_OK;
    }
    printf("%s\n", url);
    return GBX_EXIT_OK;
}

static int start(int argc, char **argv, int json)
{
    static const struct option longopts[] = {
        {"port", required_argument, NULL, 'p'}, {"profile", required_argument, NULL, 'P'}, {0}};
    json_t *body = json_object();
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        uint64_t port = 0;
        if (c == 'p' && gbx_parse_u64(optarg, 1, 65535, &port) == 0) {
            json_object_set_new(body, "port", json_integer((json_int_t)port));
        } else if (c == 'P') {
            json_object_set_new(body, "profile", json_string(optarg));
        } else {
            if (c == 'p')
                gbx_cli_error("browser start: '%s' is not a port (1-65535)", optarg);
            json_decref(body);
            return gbx_cli_usage(browser_usage);
        }
    }
    if (optind != argc - 1) {
        json_decref(body);
        return gbx_cli_usage(browser_usage);
    }
    const char *id = argv[optind];
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/browser", id);
    json_t *reply;
    int r = gbx_cli_call_ok("POST", path, body, &reply);
    json_decref(body);
    if (r != GBX_EXIT_OK)
        return r;
    r = print_state(reply, id, json);
    json_decref(reply);
    return r;
}

static int simple(const char *method, int argc, char **argv, int json)
{
    if (argc != 2)
        return gbx_cli_usage(browser_usage);
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/browser", argv[1]);
    json_t *reply;
    int r = gbx_cli_call_ok(method, path, NULL, &reply);
    if (r != GBX_EXIT_OK)
        return r;
    r = print_state(reply, argv[1], json);
    json_decref(reply);
    return r;
}

static int screenshot(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"save", required_argument, NULL, 's'}, {"artifact", required_argument, NULL, 'a'}, {0}};
    const char *out = NULL, *save = NULL, *artifact = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        if (c == 'o')
            out = optarg;
        else if (c == 's')
            save = optarg;
        else if (c == 'a')
            artifact = optarg;
        else
            return gbx_cli_usage(browser_usage);
    }
    if (optind != argc - 1 || (!out && !save && !artifact))
        return gbx_cli_usage(browser_usage);
    const char *id = argv[optind];
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/browser/screenshot", id);
    json_t *reply = NULL;
    if (out) {
        int st = gbx_cli_download(path, out, &reply);
        if (st != 200) {
            int r = st < 0 ? GBX_EXIT_FAILED : gbx_cli_result(st, reply, 0);
            json_decref(reply);
            return r;
        }
        json_decref(reply);
    }
    if (!save && !artifact)
        return GBX_EXIT_OK;
    char dflt[128];
    if (save == NULL) {
        snprintf(dflt, sizeof(dflt), "/tmp/glovebox-screenshot-%lld.png", (long long)time(NULL));
        save = dflt;
    }
    json_t *body = json_pack("{s:s}", "path", save);
    int r = gbx_cli_call_want("POST", path, body, 201, &reply);
    json_decref(body);
    if (r != GBX_EXIT_OK)
        return r;
    json_decref(reply);
    if (artifact == NULL) {
        printf("%s\n", save);
        return GBX_EXIT_OK;
    }
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/artifacts", id);
    body = json_pack("{s:s,s:s}", "path", save, "name", artifact);
    r = gbx_cli_call_want("POST", path, body, 201, &reply);
    json_decref(body);
    if (r != GBX_EXIT_OK)
        return r;
    printf("%s\n", json_string_value(json_object_get(reply, "id")));
    json_decref(reply);
    return GBX_EXIT_OK;
}

int gbx_cmd_browser(int argc, char **argv)
{
    if (argc < 2)
        return gbx_cli_usage(browser_usage);
    const char *sub = argv[1];
    argc--;
    argv++;
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (strcmp(sub, "start") == 0)
        return start(argc, argv, json);
    if (strcmp(sub, "status") == 0)
        return simple("GET", argc, argv, json);
    if (strcmp(sub, "stop") == 0)
        return simple("DELETE", argc, argv, json);
    if (strcmp(sub, "screenshot") == 0 && !json)
        return screenshot(argc, argv);
    gbx_cli_error("browser: unknown subcommand '%s'", sub);
    return gbx_cli_usage(browser_usage);
}
