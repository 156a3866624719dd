/* SPDX-License-Identifier: MIT */
/* glovebox port SANDBOX PORT [--json]: the URL that reaches PORT inside the sandbox through
 * the daemon's ingress ("http://<port>-<id>.<ingress domain>/", what E2B's getHost gives). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "cli/api.h"
#include "cli/cli.h"

static const char port_usage[] =
    "usage: glovebox port SANDBOX PORT [--json]\n"
    "Print the URL that reaches PORT (1-65535) on the sandbox's own loopback through the\n"
    "daemon's TCP listener: http://PORT-ID.DOMAIN/ with an ingress domain (the daemon's\n"
    "ingress-domain setting), else http://LISTENER/v1/sandboxes/ID/ports/PORT/. A request\n"
    "there needs the sandbox owner's API key (Authorization: Bearer) or its traffic token\n"
    "(E2B-Traffic-Access-Token), unless the sandbox was created public.\n";

const char *const gbx_usage_port = port_usage;

const char gbx_cli_ingress_off[] =
    "ingress is off: the daemon serves no TCP listener (listen = ADDR:PORT, and for "
    "<port>-<id> names ingress-domain = ...), then 'glovebox daemon reload'";

int gbx_cmd_port(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    uint64_t port = 0;
    if (argc != 3 || gbx_parse_u64(argv[2], 1, 65535, &port) < 0) {
        if (argc == 3)
            gbx_cli_error("port: '%s' is not a port (1-65535)", argv[2]);
        return gbx_cli_usage(port_usage);
    }
    char url[512] = "", id[64] = "";
    int r = gbx_cli_port_url(argv[1], (unsigned)port, url, sizeof(url), id, sizeof(id));
    if (r != GBX_EXIT_OK)
        return r;
    if (url[0] == '\0') {
        gbx_cli_error("%s", gbx_cli_ingress_off);
        return GBX_EXIT_FAILED;
    }
    if (json) {
        json_t *o = json_pack("{s:s,s:i,s:s}", "sandbox", id, "port", (int)port, "url", url);
        gbx_cli_print_json(o);
        json_decref(o);
    } else {
        printf("%s\n", url);
    }
    return r;
}

int gbx_cli_port_url(const char *sandbox, unsigned port, char *url, size_t urlsz, char *id,
                     size_t idsz)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", sandbox);
    json_t *reply, *cfg;
    int r = gbx_cli_call_ok("GET", path, NULL, &reply);
    if (r != GBX_EXIT_OK)
        return r;
    snprintf(id, idsz, "%s", json_string_value(json_object_get(reply, "id")));
    if ((r = gbx_cli_call_ok("GET", "/v1/daemon/config", NULL, &cfg)) != GBX_EXIT_OK) {
        json_decref(reply);
        return r;
    }
    const char *domain = json_string_value(json_object_get(
        json_object_get(json_object_get(cfg, "settings"), "ingress-domain"), "value"));
    /* the host form under the ingress domain; else the path form on the first listener */
    const char *listener = json_string_value(json_array_get(json_object_get(cfg, "listening"), 0));
    url[0] = '\0';
    if (domain && domain[0])
        snprintf(url, urlsz, "http://%u-%s.%s/", port, id, domain);
    else if (listener)
        snprintf(url, urlsz, "http://%s/v1/sandboxes/%s/ports/%u/", listener, id, port);
    json_decref(cfg);
    json_decref(reply);
    return GBX_EXIT_OK;
}
