/* SPDX-License-Identifier: MIT */
/* glovebox cp [--user U] [--mode MODE] [--parents] SRC DST
 *
 * Copies one file between here and a sandbox of the daemon: `glovebox cp LOCAL ID:/path`
 * uploads (atomically: the sandbox sees the old file or the new one), `glovebox cp ID:/path
 * LOCAL` downloads. LOCAL may be `-` for stdin or stdout; a DST that is a directory gets
 * the source's base name. Exit status: the table in cli.h (3 when the sandbox or the remote
 * file does not exist). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/parse.h"
#include "cli/api.h"
#include "cli/cli.h"

#define USAGE                                                                                      \
    "usage: glovebox cp [--user USER] [--mode MODE] [--parents] LOCAL SANDBOX:/PATH\n"             \
    "       glovebox cp [--user USER] SANDBOX:/PATH LOCAL      (LOCAL may be - for stdin/stdout)"

/* "ID:/path": the sandbox id and the absolute path, or 0 when arg is a local path. */
static int split_remote(const char *arg, char *id, size_t idsz, const char **path)
{
    const char *colon = strchr(arg, ':');
    if (colon == NULL || colon == arg || (size_t)(colon - arg) >= idsz || colon[1] != '/')
        return 0;
    for (const char *c = arg; c < colon; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
            return 0;
    memcpy(id, arg, (size_t)(colon - arg));
    id[colon - arg] = '\0';
    *path = colon + 1;
    return 1;
}

static const char *base_name(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    const char *s = p + n;
    while (s > p && s[-1] != '/')
        s--;
    return s;
}

/* The exit status for a failed call, with the daemon's message and a hint. */
static int failed(int status, json_t *reply)
{
    if (status == 413)
        gbx_cli_error("the file is larger than the daemon accepts (413 Payload Too Large)");
    else if (status >= 0)
        gbx_cli_print_error(status, reply);
    const char *msg =
        json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
    if (status == 404 && msg && strncmp(msg, "sandbox '", 9) == 0)
        fputs("hint: 'glovebox ls' lists the sandboxes\n", stderr);
    else if (status == 413)
        fputs("hint: uploads are bounded by the daemon's largest request body "
              "(gloveboxd --max-upload)\n",
              stderr);
    json_decref(reply);
    return status == 404                 ? GBX_EXIT_NOT_FOUND
           : status == GBX_CLI_NO_DAEMON ? GBX_EXIT_NO_DAEMON
                                         : GBX_EXIT_FAILED;
}

/* Is the remote path an existing directory? */
static int remote_is_dir(const char *id, const char *user_q, const char *path)
{
    gbx_autofree char *p = gbx_url_escape(path, "/");
    gbx_autofree char *url = gbx_asprintf("/v1/sandboxes/%s/files/stat?path=%s%s", id, p, user_q);
    json_t *reply = NULL;
    int status = gbx_cli_call("GET", url, NULL, &reply);
    int dir = status == 200 &&
              strcmp(json_string_value(json_object_get(reply, "type")) ?: "", "dir") == 0;
    json_decref(reply);
    return dir;
}

static int upload(const char *local, const char *id, const char *rpath, const char *user_q,
                  const char *mode, int parents)
{
    int fd = STDIN_FILENO;
    long long len = -1;
    if (strcmp(local, "-") != 0) {
        fd = open(local, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            gbx_cli_error("cannot open '%s': %s", local, strerror(errno));
            if (fd >= 0)
                close(fd);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            gbx_cli_error("'%s' is a directory (glovebox cp copies one file)", local);
            close(fd);
            return 1;
        }
        if (S_ISREG(st.st_mode))
            len = (long long)st.st_size;
    }
    gbx_autofree char *target = NULL;
    size_t n = strlen(rpath);
    if (strcmp(local, "-") != 0 && (rpath[n - 1] == '/' || remote_is_dir(id, user_q, rpath)))
        target = gbx_asprintf("%s%s%s", rpath, rpath[n - 1] == '/' ? "" : "/", base_name(local));
    else
        target = gbx_xstrdup(rpath);
    gbx_autofree char *p = gbx_url_escape(target, "/");
    gbx_autofree char *url =
        gbx_asprintf("/v1/sandboxes/%s/files?path=%s%s%s%s%s", id, p, user_q, mode ? "&mode=" : "",
                     mode ? mode : "", parents ? "&parents=1" : "");
    json_t *reply = NULL;
    int status = gbx_cli_transfer("PUT", url, fd, len, -1, &reply);
    if (fd != STDIN_FILENO)
        close(fd);
    if (status != 200 && status != 201)
        return failed(status, reply);
    json_decref(reply);
    return 0;
}

static int download(const char *id, const char *rpath, const char *user_q, const char *local)
{
    gbx_autofree char *p = gbx_url_escape(rpath, "/");
    gbx_autofree char *url = gbx_asprintf("/v1/sandboxes/%s/files?path=%s%s", id, p, user_q);
    json_t *reply = NULL;
    struct stat st;
    gbx_autofree char *target =
        strcmp(local, "-") != 0 && stat(local, &st) == 0 && S_ISDIR(st.st_mode)
            ? gbx_asprintf("%s/%s", local, base_name(rpath))
            : gbx_xstrdup(local);
    int status = gbx_cli_download(url, target, &reply);
    if (status != 200)
        return failed(status, reply);
    json_decref(reply);
    return 0;
}

int gbx_cmd_cp(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"user", required_argument, NULL, 'u'},
        {"mode", required_argument, NULL, 'm'},
        {"parents", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *user = NULL, *mode = NULL;
    int parents = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "u:m:ph", longopts, NULL)) != -1) {
        switch (c) {
        case 'u':
            user = optarg;
            break;
        case 'm':
            mode = optarg;
            if (strspn(mode, "01234567") != strlen(mode) || strlen(mode) == 0 || strlen(mode) > 5) {
                gbx_cli_error("invalid --mode '%s': use octal permission bits, like 0644", mode);
                return GBX_EXIT_USAGE;
            }
            break;
        case 'p':
            parents = 1;
            break;
        case 'h':
            return gbx_cli_help(USAGE "\n");
        default:
            return GBX_EXIT_USAGE;
        }
    }
    if (argc - optind != 2) {
        return gbx_cli_usage(USAGE "\n");
    }
    const char *src = argv[optind], *dst = argv[optind + 1];
    char sid[64], did[64];
    const char *spath = NULL, *dpath = NULL;
    int sremote = split_remote(src, sid, sizeof(sid), &spath);
    int dremote = split_remote(dst, did, sizeof(did), &dpath);
    if (sremote == dremote) {
        gbx_cli_error("exactly one of SRC and DST must be SANDBOX:/PATH (the other a local "
                      "path, or - for stdin/stdout)");
        return GBX_EXIT_USAGE;
    }
    gbx_autofree char *uq = NULL;
    if (user) {
        gbx_autofree char *u = gbx_url_escape(user, "/");
        uq = gbx_asprintf("&user=%s", u);
    } else {
        uq = gbx_xstrdup("");
    }
    if (dremote)
        return upload(src, did, dpath, uq, mode, parents);
    if (mode || parents) {
        gbx_cli_error("--mode and --parents apply to uploads");
        return GBX_EXIT_USAGE;
    }
    return download(sid, spath, uq, dst);
}
const char *const gbx_usage_cp = USAGE "\n";
