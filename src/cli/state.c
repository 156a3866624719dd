/* SPDX-License-Identifier: MIT */
/* glovebox pause | resume | snapshot | snapshots | rollback | fork | clone: a sandbox's state
 * over its life (docs/snapshots.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/api.h"
#include "cli/cli.h"

static const char pause_usage[] = "usage: glovebox pause SANDBOX [--json]\n";
static const char resume_usage[] = "usage: glovebox resume SANDBOX [--timeout DURATION] [--json]\n";
static const char snapshot_usage[] = "usage: glovebox snapshot SANDBOX [--name NAME] [--json]\n";
static const char snapshots_usage[] =
    "usage: glovebox snapshots [ls] [--sandbox ID] [--json]   (alias: list)\n"
    "       glovebox snapshots show SNAPSHOT... [--json]\n"
    "       glovebox snapshots rm SNAPSHOT...                (alias: delete)\n"
    "       glovebox snapshots template SNAPSHOT NAME [--json]\n";
static const char rollback_usage[] = "usage: glovebox rollback SANDBOX SNAPSHOT [--json]\n";
static const char fork_usage[] = "usage: glovebox fork SANDBOX [-n COUNT] [--json]\n";
static const char clone_usage[] = "usage: glovebox clone SNAPSHOT [-n COUNT] [--json]\n";
static const char gc_usage[] = "usage: glovebox gc [--dry-run|-n] [--json]\n";
const char *const gbx_usage_pause = pause_usage;
const char *const gbx_usage_resume = resume_usage;
const char *const gbx_usage_snapshot = snapshot_usage;
const char *const gbx_usage_snapshots = snapshots_usage;
const char *const gbx_usage_rollback = rollback_usage;
const char *const gbx_usage_fork = fork_usage;
const char *const gbx_usage_clone = clone_usage;
const char *const gbx_usage_gc = gc_usage;

/* POST path; on ok print the reply's print_field (or, json, the whole reply as one line) */
static int simple_post(const char *path, json_t *body, int ok, const char *print_field, int json)
{
    json_t *reply = NULL;
    int status = gbx_cli_call("POST", path, body, &reply);
    if (status == ok && json) {
        gbx_cli_print_json(reply);
    } else if (status == ok && print_field) {
        json_t *v = json_object_get(reply, print_field);
        printf("%s\n", json_is_string(v) ? json_string_value(v) : "");
    }
    int r = gbx_cli_result(status, reply, ok);
    json_decref(reply);
    return r;
}

/* glovebox pause|resume SANDBOX [--timeout D] */
static int pause_resume(int argc, char **argv, int pause)
{
    const char *usage = pause ? pause_usage : resume_usage;
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc < 2 || argv[1][0] == '-')
        return gbx_cli_usage(usage);
    json_t *body = json_object();
    for (int i = 2; i < argc; i++) {
        if (!pause && strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            json_object_set_new(body, "timeout", json_string(argv[++i]));
        } else {
            json_decref(body);
            return gbx_cli_usage(usage);
        }
    }
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", argv[1], pause ? "pause" : "resume");
    int r = simple_post(path, body, 200, "state", json);
    json_decref(body);
    return r;
}

int gbx_cmd_pause(int argc, char **argv)
{
    return pause_resume(argc, argv, 1);
}

int gbx_cmd_resume(int argc, char **argv)
{
    return pause_resume(argc, argv, 0);
}

/* glovebox snapshot SANDBOX [--name N]: prints the snapshot's id */
int gbx_cmd_snapshot(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc < 2 || argv[1][0] == '-')
        return gbx_cli_usage(snapshot_usage);
    json_t *body = json_object();
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
            json_object_set_new(body, "name", json_string(argv[++i]));
        } else {
            json_decref(body);
            return gbx_cli_usage(snapshot_usage);
        }
    }
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots", argv[1]);
    int r = simple_post(path, body, 201, "id", json);
    json_decref(body);
    return r;
}

static void print_snapshots(json_t *list)
{
    printf("%-16s %-20s %-9s %-16s %-16s %10s  %s\n", "ID", "NAME", "KIND", "SANDBOX", "PARENT",
           "BYTES", "CREATED");
    size_t i;
    json_t *p;
    json_array_foreach(list, i, p)
    {
        const char *name = json_string_value(json_object_get(p, "name"));
        const char *parent = json_string_value(json_object_get(p, "parent"));
        printf("%-16s %-20s %-9s %-16s %-16s %10lld  %s\n",
               json_string_value(json_object_get(p, "id")), name ? name : "-",
               json_string_value(json_object_get(p, "kind")),
               json_string_value(json_object_get(p, "sandbox")), parent ? parent : "-",
               (long long)json_integer_value(json_object_get(p, "size_bytes")),
               json_string_value(json_object_get(p, "created_at")));
    }
}

/* glovebox snapshots [ls] [--sandbox ID] [--json] | rm REF... | show REF | template REF NAME */
int gbx_cmd_snapshots(int argc, char **argv)
{
    int a = 1;
    int as_json = gbx_cli_take_flag(&argc, argv, "--json");
    const char *sub = argc > 1 && argv[1][0] != '-' ? argv[a++] : "ls";
    int rm = gbx_cli_is(sub, "rm");
    if (rm || strcmp(sub, "show") == 0) {
        if (a >= argc)
            return gbx_cli_usage(snapshots_usage);
        int rc = 0;
        for (; a < argc; a++) {
            char path[256];
            snprintf(path, sizeof(path), "/v1/snapshots/%s", argv[a]);
            json_t *reply = NULL;
            int status = gbx_cli_call(rm ? "DELETE" : "GET", path, NULL, &reply);
            if (!rm && status == 200 && as_json) {
                gbx_cli_print_json(reply);
            } else if (!rm && status == 200) {
                char *t = json_dumps(reply, JSON_INDENT(2));
                printf("%s\n", t);
                free(t);
            }
            int r = gbx_cli_result(status, reply, rm ? (status == 202 ? 202 : 204) : 200);
            json_decref(reply);
            if (r)
                rc = r;
        }
        return rc;
    }
    if (strcmp(sub, "template") == 0) {
        if (a + 2 != argc)
            return gbx_cli_usage(snapshots_usage);
        char path[256];
        snprintf(path, sizeof(path), "/v1/snapshots/%s/template", argv[a]);
        json_t *body = json_pack("{s:s}", "name", argv[a + 1]);
        int r = simple_post(path, body, 201, "name", as_json);
        json_decref(body);
        return r;
    }
    if (!gbx_cli_is(sub, "ls"))
        return gbx_cli_usage(snapshots_usage);
    const char *sandbox = NULL;
    for (; a < argc; a++) {
        if (strcmp(argv[a], "--sandbox") == 0 && a + 1 < argc)
            sandbox = argv[++a];
        else
            return gbx_cli_usage(snapshots_usage);
    }
    char path[256];
    if (sandbox)
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots", sandbox);
    else
        snprintf(path, sizeof(path), "/v1/snapshots");
    json_t *reply = NULL;
    int status = gbx_cli_call("GET", path, NULL, &reply);
    if (status == 200) {
        if (as_json) {
            gbx_cli_print_json(json_object_get(reply, "snapshots"));
        } else {
            print_snapshots(json_object_get(reply, "snapshots"));
        }
    }
    int r = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return r;
}

/* glovebox rollback SANDBOX SNAPSHOT */
int gbx_cmd_rollback(int argc, char **argv)
{
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc != 3 || argv[1][0] == '-')
        return gbx_cli_usage(rollback_usage);
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/rollback", argv[1]);
    json_t *body = json_pack("{s:s}", "snapshot", argv[2]);
    int r = simple_post(path, body, 200, "snapshot", json);
    json_decref(body);
    return r;
}

/* glovebox fork SANDBOX [-n N] | glovebox clone SNAPSHOT [-n N]: prints the new ids */
static int fork_or_clone(int argc, char **argv, int fork)
{
    const char *usage = fork ? fork_usage : clone_usage;
    int json = gbx_cli_take_flag(&argc, argv, "--json");
    if (argc < 2 || argv[1][0] == '-')
        return gbx_cli_usage(usage);
    long count = 1;
    for (int i = 2; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc &&
            (count = strtol(argv[i + 1], &end, 10)) > 0 && *end == '\0') {
            i++;
        } else {
            return gbx_cli_usage(usage);
        }
    }
    char path[256];
    snprintf(path, sizeof(path), fork ? "/v1/sandboxes/%s/fork" : "/v1/snapshots/%s/clone",
             argv[1]);
    json_t *body = json_pack("{s:i}", "count", (json_int_t)count);
    json_t *reply = NULL;
    int status = gbx_cli_call("POST", path, body, &reply);
    json_decref(body);
    size_t i;
    json_t *sb;
    if (status == 201 && json)
        gbx_cli_print_json(reply);
    else
        json_array_foreach(json_object_get(reply, "sandboxes"), i, sb)
        {
            printf("%s\n", json_string_value(json_object_get(sb, "id")));
        }
    int r = gbx_cli_result(status, reply, 201);
    json_decref(reply);
    return r;
}

int gbx_cmd_fork(int argc, char **argv)
{
    return fork_or_clone(argc, argv, 1);
}

int gbx_cmd_clone(int argc, char **argv)
{
    return fork_or_clone(argc, argv, 0);
}

/* glovebox gc [--dry-run] [--json]: one retention pass now (dry: what it would remove) */
int gbx_cmd_gc(int argc, char **argv)
{
    int dry = 0, as_json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dry-run") == 0 || strcmp(argv[i], "-n") == 0) {
            dry = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = 1;
        } else {
            return gbx_cli_usage(gc_usage);
        }
    }
    json_t *body = json_pack("{s:b}", "dry_run", dry);
    json_t *reply = NULL;
    int status = gbx_cli_call("POST", "/v1/gc", body, &reply);
    json_decref(body);
    if (status == 200 && as_json) {
        gbx_cli_print_json(reply);
    } else if (status == 200) {
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(reply, "removed"), i, r)
        {
            printf("%s %-9s %-20s %-6s %10lld bytes  %lld s old\n",
                   dry ? "would remove" : "removed", json_string_value(json_object_get(r, "kind")),
                   json_string_value(json_object_get(r, "id")),
                   json_string_value(json_object_get(r, "rule")),
                   (long long)json_integer_value(json_object_get(r, "bytes")),
                   (long long)json_integer_value(json_object_get(r, "age_s")));
        }
        printf("%s %zu, %lld bytes\n", dry ? "would remove" : "removed",
               json_array_size(json_object_get(reply, "removed")),
               (long long)json_integer_value(json_object_get(reply, "bytes")));
    }
    int rc = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return rc;
}
