/* SPDX-License-Identifier: MIT */
/* glovebox template ls [--json] | show NAME | rm NAME
 *                 | import FILE --name N [--upload] [--no-wait]
 *                 | build-debian --name N [--suite S] [--mirror URL] [--variant V]
 *                                [--include a,b] [--no-wait]
 *                 | build-browser (build-debian with chromium and fonts-liberation)
 * Templates in the daemon. An import passes FILE's path to the daemon (the CLI speaks on the
 * admin socket), or uploads it with --upload; builds run in the daemon and the command
 * follows their progress until they end. */
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/api.h"
#include "base/mem.h"
#include "base/parse.h"
#include "cli/cli.h"

static const char template_usage[] =
    "usage: glovebox template ls [--json]                  (alias: list)\n"
    "       glovebox template show NAME [--json]           (alias: inspect)\n"
    "       glovebox template rm NAME                      (alias: delete)\n"
    "       glovebox template import FILE --name NAME [--upload] [COMMON]\n"
    "       glovebox template build-debian --name NAME [--suite bookworm] [--mirror URL]\n"
    "                                      [--variant minbase] [--include PKG,PKG] [COMMON]\n"
    "       glovebox template build-browser --name NAME [the options of build-debian]\n"
    "                 (build-debian with chromium and fonts-liberation included: a template\n"
    "                 for glovebox browser start; docs/browser.md)\n"
    "COMMON: [--description TEXT] [--start CMD] [--ready CMD] [--no-wait] [--json]\n"
    "  --json        the build's events as NDJSON (with --no-wait: the template, JSON)\n"
    "  --start CMD   a shell command started in the background when a sandbox of it starts\n"
    "  --ready CMD   a shell command that must exit 0 before such a sandbox is ready\n"
    "FILE is an image archive: `docker save` output or a tarball of an OCI image layout.\n";

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void human(unsigned long long n, char *out, size_t sz)
{
    static const char *const u[] = {"B", "K", "M", "G", "T"};
    double v = (double)n;
    size_t i = 0;
    while (v >= 1024 && i + 1 < sizeof(u) / sizeof(u[0])) {
        v /= 1024;
        i++;
    }
    snprintf(out, sz, i ? "%.1f%s" : "%.0f%s", v, u[i]);
}

static int cmd_ls(int json)
{
    json_t *reply = NULL;
    int status = gbx_cli_call("GET", "/v1/templates", NULL, &reply);
    if (status == 200) {
        json_t *list = json_object_get(reply, "templates");
        if (json) {
            gbx_cli_print_json(list);
        } else {
            printf("%-24s %-9s %-8s %-30s %s\n", "NAME", "STATE", "SIZE", "SOURCE", "CREATED");
            size_t i;
            json_t *t;
            json_array_foreach(list, i, t)
            {
                char size[32] = "-";
                json_t *sz = json_object_get(t, "size_bytes");
                if (json_is_integer(sz))
                    human((unsigned long long)json_integer_value(sz), size, sizeof(size));
                printf("%-24s %-9s %-8s %-30s %s\n", str(t, "name"), str(t, "state"), size,
                       str(t, "source"), str(t, "created"));
            }
        }
    }
    int r = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return r;
}

static int cmd_show(const char *name, int json)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/templates/%s", name);
    json_t *reply = NULL;
    int status = gbx_cli_call("GET", path, NULL, &reply);
    if (status == 200 && json) {
        gbx_cli_print_json(reply);
    } else if (status == 200) {
        char *t = json_dumps(reply, JSON_INDENT(2) | JSON_SORT_KEYS);
        puts(t ? t : "{}");
        free(t);
    }
    int r = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return r;
}

struct follow {
    int failed, done, json;
    char last_phase[32];
};

/* One NDJSON event of a build: progress lines, then done or error. */
static void on_event(void *arg, const char *line, size_t len)
{
    struct follow *f = arg;
    json_t *ev = json_loadb(line, len, 0, NULL);
    if (ev == NULL)
        return;
    const char *type = str(ev, "type");
    if (f->json) { /* NDJSON: each event as it came (an error's message on stderr too) */
        printf("%.*s\n", (int)len, line);
        fflush(stdout);
        f->done |= strcmp(type, "done") == 0;
        if (strcmp(type, "error") == 0) {
            f->failed = 1;
            gbx_cli_error("%s", str(ev, "message"));
        }
    } else if (strcmp(type, "progress") == 0 && strcmp(str(ev, "phase"), "done") != 0) {
        const char *phase = str(ev, "phase");
        long long step = json_integer_value(json_object_get(ev, "step"));
        long long total = json_integer_value(json_object_get(ev, "total"));
        const char *pkg = str(ev, "package");
        if (total > 0 && pkg[0])
            printf("%-10s %4lld/%-4lld %s\n", phase, step, total, pkg);
        else if (total > 0)
            printf("%-10s %4lld/%-4lld\n", phase, step, total);
        else if (pkg[0])
            printf("%-10s %s\n", phase, pkg);
        else if (strcmp(phase, f->last_phase) != 0 || strcmp(phase, "note") == 0)
            printf("%-10s %s\n", phase, str(ev, "line"));
        snprintf(f->last_phase, sizeof(f->last_phase), "%s", phase);
        fflush(stdout);
    } else if (strcmp(type, "done") == 0) {
        f->done = 1;
        printf("template '%s' is ready\n", str(ev, "name"));
    } else if (strcmp(type, "error") == 0) {
        f->failed = 1;
        gbx_cli_error("%s", str(ev, "message"));
    }
    json_decref(ev);
}

/* Follow the build of name to its end: 0 when it is ready. */
static int follow(const char *name, int json)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/templates/%s/events", name);
    struct follow f = {.json = json};
    json_t *reply = NULL;
    int status = gbx_cli_stream("GET", path, NULL, on_event, &f, &reply);
    if (status != 200) {
        int r = gbx_cli_result(status, reply, 200);
        json_decref(reply);
        return r;
    }
    json_decref(reply);
    if (f.failed)
        return GBX_EXIT_FAILED;
    if (!f.done) {
        gbx_cli_error("the event stream ended before the build did ('glovebox template show "
                      "%s')",
                      name);
        return GBX_EXIT_FAILED;
    }
    return GBX_EXIT_OK;
}

/* The 202 of a build request; then follow it unless no_wait. */
static int started(int status, json_t *reply, const char *name, int no_wait, int json)
{
    if (status != 202) {
        int r = gbx_cli_result(status, reply, 202);
        json_decref(reply);
        return r;
    }
    if (no_wait && json)
        gbx_cli_print_json(reply);
    else if (no_wait)
        printf("template '%s' is building ('glovebox template show %s')\n", name, name);
    json_decref(reply);
    return no_wait ? GBX_EXIT_OK : follow(name, json);
}

/* --description, --start, --ready: into body (JSON) or a query string (upload). */
struct common {
    const char *description, *start, *ready;
    int no_wait;
};

static int common_opt(int c, struct common *co)
{
    switch (c) {
    case 'D':
        co->description = optarg;
        return 1;
    case 'S':
        co->start = optarg;
        return 1;
    case 'R':
        co->ready = optarg;
        return 1;
    case 'W':
        co->no_wait = 1;
        return 1;
    default:
        return 0;
    }
}

static void common_json(const struct common *co, json_t *body)
{
    if (co->description)
        json_object_set_new(body, "description", json_string(co->description));
    if (co->start)
        json_object_set_new(body, "start", json_string(co->start));
    if (co->ready)
        json_object_set_new(body, "ready", json_string(co->ready));
}

/* Append "&key=<percent-encoded value>" to a heap string. */
static char *query_add(char *q, const char *key, const char *v)
{
    if (v == NULL)
        return q;
    size_t n = strlen(q), vl = strlen(v);
    char *out = realloc(q, n + strlen(key) + 3 + vl * 3 + 1);
    if (out == NULL)
        abort();
    gbx_autofree char *e = gbx_url_escape(v, NULL);
    sprintf(out + n, "%c%s=%s", n ? '&' : '?', key, e);
    return out;
}

static int cmd_import(int argc, char **argv, int json)
{
    static const struct option longopts[] = {
        {"name", required_argument, NULL, 'n'},
        {"upload", no_argument, NULL, 'u'},
        {"description", required_argument, NULL, 'D'},
        {"start", required_argument, NULL, 'S'},
        {"ready", required_argument, NULL, 'R'},
        {"no-wait", no_argument, NULL, 'W'},
        {NULL, 0, NULL, 0},
    };
    const char *name = NULL;
    struct common co = {0};
    int upload = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
        if (c == 'n')
            name = optarg;
        else if (c == 'u')
            upload = 1;
        else if (!common_opt(c, &co))
            return GBX_EXIT_USAGE;
    }
    if (optind + 1 != argc || name == NULL)
        return gbx_cli_usage(template_usage);
    const char *file = argv[optind];
    json_t *reply = NULL;
    int status;
    if (upload) {
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            gbx_cli_error("cannot read '%s'", file);
            if (fd >= 0)
                close(fd);
            return GBX_EXIT_FAILED;
        }
        char *q = strdup("");
        if (q == NULL)
            abort();
        q = query_add(q, "description", co.description);
        q = query_add(q, "start", co.start);
        q = query_add(q, "ready", co.ready);
        char *path = malloc(strlen(name) + strlen(q) + 32);
        if (path == NULL)
            abort();
        sprintf(path, "/v1/templates/%s/oci%s", name, q);
        status = gbx_cli_transfer("POST", path, fd, (long long)st.st_size, -1, &reply);
        free(path);
        free(q);
        close(fd);
    } else {
        char abs[PATH_MAX];
        if (realpath(file, abs) == NULL) {
            gbx_cli_error("cannot find '%s'", file);
            return GBX_EXIT_FAILED;
        }
        json_t *body = json_pack("{s:s,s:{s:{s:s}}}", "name", name, "from", "oci", "path", abs);
        common_json(&co, body);
        status = gbx_cli_call("POST", "/v1/templates", body, &reply);
        json_decref(body);
    }
    return started(status, reply, name, co.no_wait, json);
}

/* The packages a browser template has (build-browser): Debian's Chromium and a font, and
 * dbus-x11: debootstrap does not resolve the session bus Chromium's dconf-service depends on
 * (default-dbus-session-bus | dbus-session-bus), so one that provides it is named. */
static const char *const browser_pkgs[] = {"chromium", "fonts-liberation", "dbus-x11", NULL};

static int cmd_build_debian(int argc, char **argv, int json, const char *const *preset)
{
    static const struct option longopts[] = {
        {"name", required_argument, NULL, 'n'},    {"suite", required_argument, NULL, 's'},
        {"mirror", required_argument, NULL, 'm'},  {"variant", required_argument, NULL, 'v'},
        {"include", required_argument, NULL, 'i'}, {"description", required_argument, NULL, 'D'},
        {"start", required_argument, NULL, 'S'},   {"ready", required_argument, NULL, 'R'},
        {"no-wait", no_argument, NULL, 'W'},       {NULL, 0, NULL, 0},
    };
    const char *name = NULL;
    json_t *deb = json_object();
    json_t *inc = json_array();
    for (size_t i = 0; preset && preset[i]; i++)
        json_array_append_new(inc, json_string(preset[i]));
    struct common co = {0};
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "n:s:m:v:i:", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            name = optarg;
            break;
        case 's':
            json_object_set_new(deb, "suite", json_string(optarg));
            break;
        case 'm':
            json_object_set_new(deb, "mirror", json_string(optarg));
            break;
        case 'v':
            json_object_set_new(deb, "variant", json_string(optarg));
            break;
        case 'i': {
            char *list = strdup(optarg), *save = NULL;
            for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save))
                json_array_append_new(inc, json_string(p));
            free(list);
            break;
        }
        default:
            if (common_opt(c, &co))
                break;
            json_decref(deb);
            json_decref(inc);
            return GBX_EXIT_USAGE;
        }
    }
    if (optind != argc || name == NULL) {
        json_decref(deb);
        json_decref(inc);
        return gbx_cli_usage(template_usage);
    }
    json_object_set_new(deb, "include", inc);
    json_t *body = json_pack("{s:s,s:{s:o}}", "name", name, "from", "debian", deb);
    common_json(&co, body);
    json_t *reply = NULL;
    int status = gbx_cli_call("POST", "/v1/templates", body, &reply);
    json_decref(body);
    return started(status, reply, name, co.no_wait, json);
}

int gbx_cmd_template(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc < 2)
        return gbx_cli_usage(template_usage);
    const char *sub = argv[1];
    if (gbx_cli_is(sub, "ls") && argc == 2)
        return cmd_ls(json);
    if ((strcmp(sub, "show") == 0 || strcmp(sub, "inspect") == 0) && argc == 3)
        return cmd_show(argv[2], json);
    if (gbx_cli_is(sub, "rm") && argc == 3) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/templates/%s", argv[2]);
        json_t *reply = NULL;
        int status = gbx_cli_call("DELETE", path, NULL, &reply);
        int r = gbx_cli_result(status, reply, 204);
        json_decref(reply);
        return r;
    }
    if (strcmp(sub, "import") == 0)
        return cmd_import(argc - 1, argv + 1, json);
    if (strcmp(sub, "build-debian") == 0)
        return cmd_build_debian(argc - 1, argv + 1, json, NULL);
    if (strcmp(sub, "build-browser") == 0)
        return cmd_build_debian(argc - 1, argv + 1, json, browser_pkgs);
    return gbx_cli_usage(template_usage);
}
const char *const gbx_usage_template = template_usage;
