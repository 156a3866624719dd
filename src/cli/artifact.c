/* SPDX-License-Identifier: MIT */
/* glovebox artifact publish SANDBOX PATH [--name N] [--session S] [--meta k=v]... [--max-bytes N]
 *        | ls [--session S] [--sandbox ID] [--name N] [--json]
 *        | get ID|NAME [-o FILE]   (standard output by default; a name: the newest with it)
 *        | rm ID
 * Artifacts: files and directories (as tar) published out of sandboxes into the daemon's
 * content-addressed store; they outlive the sandbox (docs/artifacts.md). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/util.h"
#include "cli/api.h"
#include "base/parse.h"
#include "cli/cli.h"

static const char artifact_usage[] =
    "usage: glovebox artifact publish SANDBOX PATH [--name NAME] [--session SESSION]\n"
    "                                 [--meta KEY=VALUE]... [--max-bytes N] [--json]\n"
    "       glovebox artifact ls [--session SESSION] [--sandbox ID] [--name NAME] [--json]\n"
    "                                               (alias: list)\n"
    "       glovebox artifact get ID|NAME [-o FILE] (standard output by default)\n"
    "       glovebox artifact rm ID                 (alias: delete)\n"
    "A directory is published as a tar of its tree (symlinks kept as symlinks).\n"
    "get takes an artifact's id or the name publish gave it: of several with that name, the\n"
    "newest of yours; an id wins over a name.\n";

/* An id for a URL path: letters, digits, '-' and '_' only. */
static int id_ok(const char *id)
{
    size_t n = strlen(id);
    return n > 0 && n < 64 &&
           strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789-_") == n;
}

static int publish(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"name", required_argument, NULL, 'n'}, {"session", required_argument, NULL, 's'},
        {"meta", required_argument, NULL, 'm'}, {"max-bytes", required_argument, NULL, 'x'},
        {"json", no_argument, NULL, 'j'},       {NULL, 0, NULL, 0},
    };
    json_t *body = json_object(), *meta = json_object();
    gbx_autofree char *url = NULL;
    int c, json = 0;
    optind = 0;
    while ((c = getopt_long(argc, argv, "n:s:m:x:j", longopts, NULL)) != -1) {
        if (c == 'n') {
            json_object_set_new(body, "name", json_string(optarg));
        } else if (c == 's') {
            json_object_set_new(body, "session", json_string(optarg));
        } else if (c == 'm') {
            char *eq = strchr(optarg, '=');
            if (eq == NULL || eq == optarg) {
                gbx_cli_error("--meta takes KEY=VALUE, not '%s'", optarg);
                goto usage;
            }
            *eq = '\0';
            json_object_set_new(meta, optarg, json_string(eq + 1));
            *eq = '=';
        } else if (c == 'x') {
            char *end = NULL;
            errno = 0;
            long long v = strtoll(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 1) {
                gbx_cli_error("--max-bytes takes a positive number of bytes");
                goto usage;
            }
            json_object_set_new(body, "max_bytes", json_integer(v));
        } else if (c == 'j') {
            json = 1;
        } else {
            goto usage;
        }
    }
    if (optind + 2 != argc || !id_ok(argv[optind]))
        goto usage;
    json_object_set_new(body, "path", json_string(argv[optind + 1]));
    if (json_object_size(meta))
        json_object_set(body, "metadata", meta);
    json_decref(meta);
    url = gbx_asprintf("/v1/sandboxes/%s/artifacts", argv[optind]);
    json_t *reply = NULL;
    int status = gbx_cli_call("POST", url, body, &reply);
    json_decref(body);
    if (status == 201) {
        if (json)
            gbx_cli_print_json(reply);
        else
            printf("%s %s %lld\n", json_string_value(json_object_get(reply, "id")),
                   json_string_value(json_object_get(reply, "sha256")),
                   (long long)json_integer_value(json_object_get(reply, "size")));
    }
    int r = gbx_cli_result(status, reply, 201);
    json_decref(reply);
    return r;
usage:
    json_decref(body);
    json_decref(meta);
    fputs(artifact_usage, stderr);
    return GBX_EXIT_USAGE;
}

static int list(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"session", required_argument, NULL, 's'},
        {"sandbox", required_argument, NULL, 'b'},
        {"name", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    const char *session = NULL, *sandbox = NULL, *name = NULL;
    int c, json = 0;
    optind = 0;
    while ((c = getopt_long(argc, argv, "s:b:n:j", longopts, NULL)) != -1) {
        if (c == 's')
            session = optarg;
        else if (c == 'b')
            sandbox = optarg;
        else if (c == 'n')
            name = optarg;
        else if (c == 'j')
            json = 1;
        else {
            fputs(artifact_usage, stderr);
            return GBX_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fputs(artifact_usage, stderr);
        return GBX_EXIT_USAGE;
    }
    gbx_autofree char *qs = session ? gbx_url_escape(session, NULL) : NULL;
    gbx_autofree char *qb = sandbox ? gbx_url_escape(sandbox, NULL) : NULL;
    gbx_autofree char *qn = name ? gbx_url_escape(name, NULL) : NULL;
    json_t *all = json_array();
    char *after = NULL;
    int status, r = 0;
    for (;;) { /* every page */
        gbx_autofree char *qa = after ? gbx_url_escape(after, NULL) : NULL;
        gbx_autofree char *url =
            gbx_asprintf("/v1/artifacts?limit=1000%s%s%s%s%s%s%s%s", qs ? "&session=" : "",
                         qs ? qs : "", qb ? "&sandbox=" : "", qb ? qb : "", qn ? "&name=" : "",
                         qn ? qn : "", qa ? "&after=" : "", qa ? qa : "");
        json_t *reply = NULL;
        status = gbx_cli_call("GET", url, NULL, &reply);
        if (status != 200) {
            r = gbx_cli_result(status, reply, 200);
            json_decref(reply);
            break;
        }
        json_array_extend(all, json_object_get(reply, "artifacts"));
        const char *next = json_string_value(json_object_get(reply, "next_after"));
        free(after);
        after = next ? gbx_xstrdup(next) : NULL;
        json_decref(reply);
        if (after == NULL)
            break;
    }
    free(after);
    if (r == 0) {
        if (json) {
            gbx_cli_print_json(all);
        } else {
            printf("%-20s %-12s %-5s %12s %-20s %s\n", "ID", "SHA256", "KIND", "SIZE", "SANDBOX",
                   "NAME");
            size_t i;
            json_t *a;
            json_array_foreach(all, i, a)
            {
                const char *sb = json_string_value(json_object_get(a, "sandbox"));
                printf("%-20s %-12.12s %-5s %12lld %-20s %s\n",
                       json_string_value(json_object_get(a, "id")),
                       json_string_value(json_object_get(a, "sha256")),
                       json_string_value(json_object_get(a, "kind")),
                       (long long)json_integer_value(json_object_get(a, "size")), sb ? sb : "-",
                       json_string_value(json_object_get(a, "name")));
            }
        }
    }
    json_decref(all);
    return r;
}

/* The id of the artifact ref names: ref itself when it is one the caller may see, else the
 * newest of the caller's artifacts named ref. 0 with *id (owned), or the exit status. */
static int resolve(const char *ref, char **id)
{
    json_t *reply = NULL;
    int status = 404;
    if (id_ok(ref)) {
        gbx_autofree char *url = gbx_asprintf("/v1/artifacts/%s", ref);
        status = gbx_cli_call("GET", url, NULL, &reply);
        if (status == 200) {
            json_decref(reply);
            *id = gbx_xstrdup(ref);
            return 0;
        }
    }
    if (status != 404) {
        int r = gbx_cli_result(status, reply, 200);
        json_decref(reply);
        return r;
    }
    json_decref(reply);
    gbx_autofree char *qn = gbx_url_escape(ref, NULL);
    gbx_autofree char *url = gbx_asprintf("/v1/artifacts?name=%s&order=desc&limit=1", qn);
    int r = gbx_cli_call_ok("GET", url, NULL, &reply);
    if (r != GBX_EXIT_OK)
        return r;
    const char *found = json_string_value(
        json_object_get(json_array_get(json_object_get(reply, "artifacts"), 0), "id"));
    if (found == NULL || !id_ok(found)) {
        json_decref(reply);
        gbx_cli_error("artifact '%s' not found (no artifact of yours has that id or name)", ref);
        return GBX_EXIT_NOT_FOUND;
    }
    *id = gbx_xstrdup(found);
    json_decref(reply);
    return 0;
}

static int get(int argc, char **argv)
{
    const char *out = NULL;
    int c;
    optind = 0;
    while ((c = getopt(argc, argv, "o:")) != -1) {
        if (c == 'o') {
            out = optarg;
        } else {
            fputs(artifact_usage, stderr);
            return GBX_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc || argv[optind][0] == '\0') {
        fputs(artifact_usage, stderr);
        return GBX_EXIT_USAGE;
    }
    gbx_autofree char *id = NULL;
    int rr = resolve(argv[optind], &id);
    if (rr != 0)
        return rr;
    gbx_autofree char *url = gbx_asprintf("/v1/artifacts/%s/content", id);
    json_t *reply = NULL;
    int status = gbx_cli_download(url, out ? out : "-", &reply);
    int r = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return r;
}

int gbx_cmd_artifact(int argc, char **argv)
{
    if (argc < 2)
        return gbx_cli_usage(artifact_usage);
    if (strcmp(argv[1], "publish") == 0)
        return publish(argc - 1, argv + 1);
    if (gbx_cli_is(argv[1], "ls"))
        return list(argc - 1, argv + 1);
    if (strcmp(argv[1], "get") == 0)
        return get(argc - 1, argv + 1);
    if (gbx_cli_is(argv[1], "rm") && argc == 3 && id_ok(argv[2])) {
        gbx_autofree char *url = gbx_asprintf("/v1/artifacts/%s", argv[2]);
        json_t *reply = NULL;
        int status = gbx_cli_call("DELETE", url, NULL, &reply);
        int r = gbx_cli_result(status, reply, 204);
        json_decref(reply);
        return r;
    }
    fputs(artifact_usage, stderr);
    return GBX_EXIT_USAGE;
}
const char *const gbx_usage_artifact = artifact_usage;
