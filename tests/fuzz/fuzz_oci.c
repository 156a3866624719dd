/* SPDX-License-Identifier: MIT */
/* libFuzzer target for OCI layer import (src/sandbox/oci.c). The input is taken twice:
 *  - as two entry names (split at the first NUL): the sanitizer's output is relative, has no
 *    "..", "." or empty component, and cleaning it again changes nothing; whiteout targets
 *    are clean names too; a symlink judged not to escape never climbs above the root;
 *  - as a layer archive (tar, any compression) applied to a scratch rootfs next to a sentinel
 *    directory: whatever the archive, the sentinel stays as it was and nothing appears beside
 *    the rootfs. The rootfs is emptied between inputs. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileutil.h"
#include "sandbox/oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[64], root[96], outside[96], sentinel[128];
static int rootfd = -1;

static void cleanup(void)
{
    (void)!gbx_rm_rf(base);
}

static void setup(void)
{
    if (rootfd >= 0)
        return;
    snprintf(base, sizeof(base), "/tmp/gbx-fuzz-oci-XXXXXX");
    if (mkdtemp(base) == NULL)
        abort();
    snprintf(root, sizeof(root), "%s/root", base);
    snprintf(outside, sizeof(outside), "%s/outside", base);
    snprintf(sentinel, sizeof(sentinel), "%s/sentinel", outside);
    if (mkdir(root, 0755) < 0 || mkdir(outside, 0755) < 0 ||
        gbx_write_file_atomic(sentinel, "keep\n", 5, 0644) < 0)
        abort();
    rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        abort();
    atexit(cleanup);
}

static void check_clean(const char *in)
{
    char out[PATH_MAX], again[PATH_MAX], target[PATH_MAX];
    int r = gbx_oci_path_clean(in, out, sizeof(out));
    if (r < 0)
        return;
    if (r == 1) {
        if (out[0] != '\0')
            __builtin_trap();
        return;
    }
    if (out[0] == '/' || out[0] == '\0' || out[strlen(out) - 1] == '/' || strstr(out, "//"))
        __builtin_trap();
    for (const char *p = out; *p;) {
        size_t n = strcspn(p, "/");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            __builtin_trap();
        p += n;
        if (*p == '/')
            p++;
    }
    if (gbx_oci_path_clean(out, again, sizeof(again)) != 0 || strcmp(out, again) != 0)
        __builtin_trap();
    int k = gbx_oci_classify(out, target, sizeof(target));
    if (k == GBX_OCI_WHITEOUT &&
        (gbx_oci_path_clean(target, again, sizeof(again)) != 0 || strcmp(target, again) != 0))
        __builtin_trap();
}

static void empty_root(void)
{
    DIR *d = opendir(root);
    if (d == NULL)
        abort();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", root, de->d_name);
        (void)!gbx_rm_rf(p);
    }
    closedir(d);
    (void)!chmod(root, 0755);
}

static void check_outside(void)
{
    char *txt = NULL;
    if (gbx_read_file(sentinel, 64, &txt, NULL) < 0 || strcmp(txt, "keep\n") != 0)
        __builtin_trap();
    free(txt);
    const char *dirs[] = {outside, base};
    for (size_t i = 0; i < 2; i++) {
        DIR *d = opendir(dirs[i]);
        if (d == NULL)
            __builtin_trap();
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            const char *n = de->d_name;
            if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
                continue;
            if (i == 0 ? strcmp(n, "sentinel") != 0
                       : strcmp(n, "root") != 0 && strcmp(n, "outside") != 0)
                __builtin_trap(); /* something was written outside the rootfs */
        }
        closedir(d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    /* names */
    char *s = malloc(size + 2);
    memcpy(s, data, size);
    s[size] = '\0';
    s[size + 1] = '\0';
    check_clean(s);
    const char *second = s + strlen(s) + 1;
    if (second <= s + size) {
        check_clean(second);
        char at[PATH_MAX];
        if (gbx_oci_path_clean(s, at, sizeof(at)) == 0 && second[0] != '/' &&
            !gbx_oci_link_escapes(at, second)) {
            /* resolved lexically from the link's directory, it stays at or below the root */
            long depth = 0;
            for (const char *p = at; *p; p++)
                depth += *p == '/';
            for (const char *p = second; *p;) {
                size_t n = strcspn(p, "/");
                if (n == 2 && p[0] == '.' && p[1] == '.')
                    depth--;
                else if (n && !(n == 1 && p[0] == '.'))
                    depth++;
                if (depth < 0)
                    __builtin_trap();
                p += n;
                if (*p == '/')
                    p++;
            }
        }
    }
    free(s);
    /* a layer */
    struct gbx_oci_opts o = {.max_bytes = 1 << 20, .max_entries = 256};
    struct gbx_err *err = NULL;
    (void)!gbx_oci_apply_layer_mem(rootfd, data, size, &o, NULL, &err);
    gbx_err_free(err);
    check_outside();
    empty_root();
    return 0;
}
