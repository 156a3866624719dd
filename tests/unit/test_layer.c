/* SPDX-License-Identifier: MIT */
/* The snapshot layer copy over a tree a sandbox controls: owners shifted into the sandbox's
 * view (others become 65534), whiteouts, the opaque mark and user.* attributes kept, hard
 * links kept as links, symlinks copied and never followed (a link to / stays a link), fifos
 * kept and sockets dropped, too deep a tree refused with nothing left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fileutil.h"
#include "sandbox/layer.h"

#define BASE 200000u

static char root[64], src[96], dst[96];

static void put(const char *rel, const char *data, uid_t uid)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", src, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    close(fd);
    assert_int_equal(lchown(p, uid, uid), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/gbx-layer-XXXXXX");
    if (mkdtemp(root) == NULL)
        return -1;
    snprintf(src, sizeof(src), "%s/src", root);
    snprintf(dst, sizeof(dst), "%s/dst", root);
    return mkdir(src, 0755);
}

static int teardown(void **state)
{
    (void)state;
    (void)!gbx_rm_rf(root);
    return 0;
}

static void copies_what_overlay_needs(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* chown and whiteouts need root */
    char p[256], q[256];
    snprintf(p, sizeof(p), "%s/d", src);
    assert_int_equal(mkdir(p, 0750), 0);
    assert_int_equal(chown(p, BASE + 1000, BASE + 1000), 0);
    assert_int_equal(setxattr(p, "user.overlay.opaque", "y", 1, 0), 0);
    put("d/f", "hello", BASE);
    put("hostfile", "x", 1234); /* an owner outside the range */
    snprintf(p, sizeof(p), "%s/gone", src);
    assert_int_equal(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0); /* a whiteout */
    snprintf(p, sizeof(p), "%s/d/f", src);
    snprintf(q, sizeof(q), "%s/hard", src);
    assert_int_equal(link(p, q), 0);
    snprintf(p, sizeof(p), "%s/toroot", src);
    assert_int_equal(symlink("/", p), 0);
    snprintf(p, sizeof(p), "%s/fifo", src);
    assert_int_equal(mkfifo(p, 0600), 0);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", src);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(s);

    int fd = open(src, O_RDONLY | O_DIRECTORY);
    struct gbx_layer_stats st = {0};
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_layer_copy(fd, dst, BASE, 0, &st, &err), 0);
    close(fd);
    assert_int_equal(st.bytes, 6);

    struct stat a, b;
    snprintf(p, sizeof(p), "%s/d", dst);
    assert_int_equal(lstat(p, &a), 0);
    assert_int_equal(a.st_uid, 1000);
    assert_int_equal(a.st_mode & 07777, 0750);
    char v[8] = "";
    assert_int_equal(getxattr(p, "user.overlay.opaque", v, sizeof(v)), 1);
    assert_int_equal(v[0], 'y');
    snprintf(p, sizeof(p), "%s/d/f", dst);
    snprintf(q, sizeof(q), "%s/hard", dst);
    assert_int_equal(lstat(p, &a), 0);
    assert_int_equal(lstat(q, &b), 0);
    assert_int_equal(a.st_ino, b.st_ino); /* still one file */
    assert_int_equal(a.st_uid, 0);
    assert_int_equal(a.st_mode & 07777, 0640);
    snprintf(p, sizeof(p), "%s/hostfile", dst);
    assert_int_equal(lstat(p, &a), 0);
    assert_int_equal(a.st_uid, 65534);
    snprintf(p, sizeof(p), "%s/gone", dst);
    assert_int_equal(lstat(p, &a), 0);
    assert_true(S_ISCHR(a.st_mode) && a.st_rdev == makedev(0, 0));
    snprintf(p, sizeof(p), "%s/toroot", dst);
    char t[16] = "";
    assert_int_equal(readlink(p, t, sizeof(t)), 1);
    assert_int_equal(t[0], '/');
    snprintf(p, sizeof(p), "%s/fifo", dst);
    assert_int_equal(lstat(p, &a), 0);
    assert_true(S_ISFIFO(a.st_mode));
    snprintf(p, sizeof(p), "%s/sock", dst);
    assert_int_equal(lstat(p, &a), -1);
    (void)!gbx_rm_rf(dst);
}

static void too_deep_is_refused_and_removed(void **state)
{
    (void)state;
    (void)!gbx_rm_rf(src);
    assert_int_equal(mkdir(src, 0755), 0);
    int fd = open(src, O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < 300; i++) {
        assert_int_equal(mkdirat(fd, "a", 0755), 0);
        int n = openat(fd, "a", O_RDONLY | O_DIRECTORY);
        close(fd);
        fd = n;
    }
    close(fd);
    fd = open(src, O_RDONLY | O_DIRECTORY);
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_layer_copy(fd, dst, BASE, 0, NULL, &err), -1);
    close(fd);
    assert_non_null(strstr(err->msg, "deeper"));
    gbx_err_free(err);
    struct stat st;
    assert_int_equal(stat(dst, &st), -1); /* nothing left behind */
}

static void size_limit(void **state)
{
    (void)state;
    (void)!gbx_rm_rf(src);
    assert_int_equal(mkdir(src, 0755), 0);
    put("big", "0123456789", getuid());
    int fd = open(src, O_RDONLY | O_DIRECTORY);
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_layer_copy(fd, dst, BASE, 5, NULL, &err), -1);
    close(fd);
    assert_int_equal(err->kind, GBX_ERR_LIMIT);
    gbx_err_free(err);
    struct stat st;
    assert_int_equal(stat(dst, &st), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(copies_what_overlay_needs),
        cmocka_unit_test(too_deep_is_refused_and_removed),
        cmocka_unit_test(size_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
