/* SPDX-License-Identifier: MIT */
/* glovebox ps SANDBOX [--all] [--json]: the processes of a sandbox of the daemon: those
 * started through the API, or (--all) every one, as a tree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/api.h"
#include "cli/cli.h"

static const char ps_usage[] =
    "usage: glovebox ps SANDBOX [--all] [--json]\n"
    "  (default) the processes started through the API (exec, run)\n"
    "  -a, --all  every process of the sandbox, as a tree; PROC marks glovebox-init (init),\n"
    "             its copies about to exec a command (helper) and the API's (their handle)\n";

#define TREE_INDENT_MAX 32 /* levels shown as indentation; deeper ones align there */

static void print_cmd(json_t *p)
{
    json_t *cmd = json_object_get(p, "cmd"), *a;
    size_t k;
    if (json_array_size(cmd) == 0) { /* a zombie, or one that cleared its argv */
        printf("[%s]", json_string_value(json_object_get(p, "name")) ?: "?");
        return;
    }
    json_array_foreach(cmd, k, a)
    {
        printf("%s%s", k ? " " : "", json_string_value(a) ?: "?");
    }
}

/* Print p, then its children (in pid order: the list is sorted), depth levels deep. done
 * marks what is printed (a parent loop cannot recurse forever). */
static void print_tree(json_t *list, size_t i, int depth, char *done)
{
    json_t *p = json_array_get(list, i);
    done[i] = 1;
    json_int_t pid = json_integer_value(json_object_get(p, "pid"));
    const char *kind = json_string_value(json_object_get(p, "kind")) ?: "other";
    char mark[24] = "-";
    json_t *handle = json_object_get(p, "process");
    if (json_is_integer(handle))
        snprintf(mark, sizeof(mark), "%lld", (long long)json_integer_value(handle));
    else if (strcmp(kind, "init") == 0 || strcmp(kind, "helper") == 0)
        snprintf(mark, sizeof(mark), "%s", kind);
    printf("%-7lld %-7lld %-10s %-6s %-2s ", (long long)pid,
           (long long)json_integer_value(json_object_get(p, "ppid")),
           json_string_value(json_object_get(p, "user")) ?: "?", mark,
           json_string_value(json_object_get(p, "state")) ?: "?");
    int shown = depth < TREE_INDENT_MAX ? depth : TREE_INDENT_MAX;
    for (int d = 0; d < shown; d++)
        fputs(d + 1 == shown ? " \\_ " : "    ", stdout);
    print_cmd(p);
    putchar('\n');
    size_t k;
    json_t *c;
    json_array_foreach(list, k, c)
    {
        if (!done[k] && json_integer_value(json_object_get(c, "ppid")) == pid && k != i)
            print_tree(list, k, depth + 1, done);
    }
}

static void print_all(json_t *reply)
{
    json_t *list = json_object_get(reply, "processes");
    size_t n = json_array_size(list);
    char *done = calloc(n ? n : 1, 1);
    if (done == NULL)
        return;
    printf("%-7s %-7s %-10s %-6s %-2s %s\n", "PID", "PPID", "USER", "PROC", "S", "CMD");
    /* roots: whose parent is not listed (pid 1's is outside the sandbox) */
    for (size_t i = 0; i < n; i++) {
        json_int_t ppid = json_integer_value(json_object_get(json_array_get(list, i), "ppid"));
        int parent_listed = 0;
        for (size_t k = 0; k < n && ppid > 0; k++)
            if (json_integer_value(json_object_get(json_array_get(list, k), "pid")) == ppid)
                parent_listed = 1;
        if (!parent_listed && !done[i])
            print_tree(list, i, 0, done);
    }
    for (size_t i = 0; i < n; i++) /* anything in a loop of parents */
        if (!done[i])
            print_tree(list, i, 0, done);
    free(done);
    if (json_is_true(json_object_get(reply, "truncated")))
        fprintf(stderr, "glovebox: %lld processes; the first %lld are shown\n",
                (long long)json_integer_value(json_object_get(reply, "total")), (long long)n);
}

static void print_api(json_t *list)
{
    printf("%-6s %-8s %-4s %-10s %s\n", "PROC", "PID", "PTY", "USER", "CMD");
    size_t i, k;
    json_t *p, *a;
    json_array_foreach(list, i, p)
    {
        printf("%-6lld %-8lld %-4s %-10s",
               (long long)json_integer_value(json_object_get(p, "process")),
               (long long)json_integer_value(json_object_get(p, "pid")),
               json_is_true(json_object_get(p, "pty")) ? "yes" : "no",
               json_string_value(json_object_get(p, "user")) ?: "?");
        json_t *cmd = json_object_get(p, "cmd");
        json_array_foreach(cmd, k, a)
        {
            printf(" %s", json_string_value(a));
        }
        putchar('\n');
    }
}

int gbx_cmd_ps(int argc, char **argv)
{
    const char *id = NULL;
    int json = 0, all = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--all") == 0 || strcmp(argv[i], "-a") == 0) {
            all = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(ps_usage, stdout);
            return 0;
        } else if (argv[i][0] != '-' && id == NULL) {
            id = argv[i];
        } else {
            fputs(ps_usage, stderr);
            return GBX_EXIT_USAGE;
        }
    }
    if (id == NULL) {
        fputs(ps_usage, stderr);
        return GBX_EXIT_USAGE;
    }
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/processes%s", id, all ? "?all=true" : "");
    json_t *reply = NULL;
    int status = gbx_cli_call("GET", path, NULL, &reply);
    if (status == 200) {
        /* --json: the list as it was; with --all, the whole answer (its total and
         * truncated say whether every process is in it) */
        json_t *shown = all ? reply : json_object_get(reply, "processes");
        if (json) {
            char *t = json_dumps(shown, JSON_COMPACT);
            puts(t);
            free(t);
        } else if (all) {
            print_all(reply);
        } else {
            print_api(shown);
        }
    }
    int r = gbx_cli_result(status, reply, 200);
    json_decref(reply);
    return r;
}
const char *const gbx_usage_ps = ps_usage;
