/* SPDX-License-Identifier: MIT */
/* Path resolution confined to a root (src/base/path.c), against a real directory tree full
 * of hostile links: "..", absolute symlinks, a link to "/", /proc magic links. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "base/path.h"

static char root[64];
static int rootfd = -1;

static void put(const char *rel, const char *text)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", root, rel);
    assert_int_equal(gbx_write_file_atomic(p, text, strlen(text), 0644), 0);
}

static void link_to(const char *target, const char *rel)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", root, rel);
    assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
    snprintf(root, sizeof(root), "/tmp/gbx-path-XXXXXX");
    if (mkdtemp(root) == NULL)
        return -1;
    gbx_autofree char *etc = gbx_asprintf("%s/etc", root);
    gbx_autofree char *home = gbx_asprintf("%s/home/user/sub", root);
    if (mkdir(etc, 0755) < 0 || gbx_mkdir_p(home, 0755) < 0)
        return -1;
    put("etc/passwd", "inside\n");
    put("home/user/file", "home file\n");
    link_to("/", "home/user/rootlink");                      /* absolute, to the root */
    link_to("/etc/passwd", "home/user/abs");                 /* absolute, to a file */
    link_to("../../../../../../etc/passwd", "home/user/up"); /* climbs past the root */
    link_to("/proc/self/root/etc/passwd", "home/user/magic");
    link_to("sub/../file", "home/user/rel"); /* relative, stays inside */
    link_to("loop2", "home/user/loop1");
    link_to("loop1", "home/user/loop2");
    rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return rootfd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    close(rootfd);
    return gbx_rm_rf(root) == 0 ? 0 : -1;
}

/* Read the file that abs resolves to inside the root, or return -errno. */
static int read_in(const char *abs, char *buf, size_t size)
{
    int fd = gbx_path_open_in(rootfd, abs, O_RDONLY, 0);
    if (fd < 0)
        return fd;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 0;
}

static void abs_paths(void **state)
{
    char out[PATH_MAX];
    assert_int_equal(gbx_path_abs("/home/user", "a/b", out, sizeof(out)), 0);
    assert_string_equal(out, "/home/user/a/b");
    assert_int_equal(gbx_path_abs("/home/user", "/etc/x/", out, sizeof(out)), 0);
    assert_string_equal(out, "/etc/x");
    assert_int_equal(gbx_path_abs("/home/user", "/", out, sizeof(out)), 0);
    assert_string_equal(out, "/");
    assert_int_equal(gbx_path_abs("/home/user", "///", out, sizeof(out)), 0);
    assert_string_equal(out, "/");
    assert_int_equal(gbx_path_abs("/home/user", "", out, sizeof(out)), -ENOENT);
    assert_int_equal(gbx_path_abs("/home/user", "abcdef", out, 8), -ENAMETOOLONG);
    char *huge = gbx_xmalloc(PATH_MAX + 10);
    memset(huge, 'a', PATH_MAX + 9);
    huge[0] = '/';
    huge[PATH_MAX + 9] = '\0';
    char *big = gbx_xmalloc(2 * PATH_MAX);
    assert_int_equal(gbx_path_abs("/", huge, big, 2 * PATH_MAX), -ENAMETOOLONG);
    free(huge);
    free(big);
}

static void split_paths(void **state)
{
    char dir[PATH_MAX], base[NAME_MAX + 1];
    assert_int_equal(gbx_path_split("/a/b/c", dir, sizeof(dir), base, sizeof(base)), 0);
    assert_string_equal(dir, "/a/b");
    assert_string_equal(base, "c");
    assert_int_equal(gbx_path_split("/c", dir, sizeof(dir), base, sizeof(base)), 0);
    assert_string_equal(dir, "/");
    assert_string_equal(base, "c");
    assert_int_equal(gbx_path_split("/", dir, sizeof(dir), base, sizeof(base)), 1);
    assert_int_equal(gbx_path_split("/a/..", dir, sizeof(dir), base, sizeof(base)), -EINVAL);
    assert_int_equal(gbx_path_split("/a/.", dir, sizeof(dir), base, sizeof(base)), -EINVAL);
    assert_int_equal(gbx_path_split("/a/bcdef", dir, sizeof(dir), base, 4), -ENAMETOOLONG);
}

static void dotdot_stops_at_the_root(void **state)
{
    char buf[64];
    assert_int_equal(read_in("/../../../etc/passwd", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "inside\n");
    assert_int_equal(read_in("/home/user/../../../../../etc/passwd", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "inside\n");
    assert_int_equal(read_in("../etc/passwd", buf, sizeof(buf)), 0); /* relative = from root */
    assert_string_equal(buf, "inside\n");
}

static void absolute_symlinks_resolve_from_the_root(void **state)
{
    char buf[64];
    assert_int_equal(read_in("/home/user/abs", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "inside\n");
    assert_int_equal(read_in("/home/user/rootlink/etc/passwd", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "inside\n");
    assert_int_equal(read_in("/home/user/up", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "inside\n");
    assert_int_equal(read_in("/home/user/rel", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "home file\n");
    /* the host's /etc/passwd is never what comes back */
    assert_int_equal(read_in("/home/user/rootlink/home/user/file", buf, sizeof(buf)), 0);
}

static void magic_links_and_loops_are_refused(void **state)
{
    char buf[64];
    /* /proc does not exist in this root; even when it does (in a sandbox), magic links are
     * refused by RESOLVE_NO_MAGICLINKS */
    assert_true(read_in("/home/user/magic", buf, sizeof(buf)) < 0);
    assert_int_equal(read_in("/home/user/loop1", buf, sizeof(buf)), -ELOOP);
    /* with the real "/" as root, /proc exists: the fd magic link is still refused */
    int real = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(real >= 0);
    gbx_autofree char *fdlink = gbx_asprintf("/proc/self/fd/%d", rootfd);
    assert_int_equal(gbx_path_open_in(real, fdlink, O_RDONLY | O_DIRECTORY, 0), -ELOOP);
    assert_int_equal(gbx_path_open_in(real, "/proc/self/root/etc", O_RDONLY, 0), -ELOOP);
    close(real);
}

static void creation_lands_inside(void **state)
{
    int fd = gbx_path_open_in(rootfd, "/home/user/rootlink/created", O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    gbx_autofree char *inside = gbx_asprintf("%s/created", root);
    assert_int_equal(access(inside, F_OK), 0);
    assert_int_not_equal(access("/created", F_OK), 0);
    fd = gbx_path_open_in(rootfd, "/../../tmp-gbx-escape", O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    gbx_autofree char *esc = gbx_asprintf("%s/tmp-gbx-escape", root);
    assert_int_equal(access(esc, F_OK), 0);
    assert_int_not_equal(access("/tmp-gbx-escape", F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(abs_paths),
        cmocka_unit_test(split_paths),
        cmocka_unit_test(dotdot_stops_at_the_root),
        cmocka_unit_test(absolute_symlinks_resolve_from_the_root),
        cmocka_unit_test(magic_links_and_loops_are_refused),
        cmocka_unit_test(creation_lands_inside),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
