/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/diskguard.c: admission against the reserve, the reserve file made,
 * given up before a delete on a short disk, and made again once there is room. The "disk" is
 * the file system of a temporary directory; a reserve larger than it is short by design. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/diskguard.h"
#include "base/fileutil.h"
#include "base/mem.h"

static char *tmpdir(void)
{
    char *d = gbx_xstrdup("/tmp/gbx-diskguard-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void test_room(void **state)
{
    gbx_autofree char *d = tmpdir();
    struct gbx_diskguard g;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_diskguard_init(&g, d, 4096, 1, &err), 0);
    assert_true(g.file_present);
    gbx_autofree char *f = gbx_asprintf("%s/reserve", d);
    struct stat st;
    assert_int_equal(stat(f, &st), 0);
    assert_true((uint64_t)st.st_size == g.file_size && g.file_size > 0);
    int64_t fr = -1;
    assert_int_equal(gbx_diskguard_admit(&g, &fr, &err), 0);
    assert_true(fr > 4096);
    /* not short: a delete leaves the file alone */
    assert_int_equal(gbx_diskguard_before_delete(&g), 0);
    assert_int_equal(stat(f, &st), 0);
    gbx_diskguard_release(&g);
    /* an earlier run's file is kept as it is */
    assert_int_equal(gbx_diskguard_init(&g, d, 4096, 1, &err), 0);
    assert_true(g.file_present);
    gbx_diskguard_release(&g);
    (void)!gbx_rm_rf(d);
}

static void test_short(void **state)
{
    gbx_autofree char *d = tmpdir();
    struct gbx_diskguard g;
    struct gbx_err *err = NULL;
    /* a reserve no file system has: always short */
    assert_int_equal(gbx_diskguard_init(&g, d, UINT64_MAX / 2, 1, &err), 0);
    int64_t fr = -1;
    assert_int_equal(gbx_diskguard_admit(&g, &fr, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->kind, GBX_ERR_STORAGE);
    assert_int_equal(err->errnum, ENOSPC);
    assert_non_null(strstr(err->msg, "disk is full"));
    assert_non_null(strstr(err->msg, d));
    assert_true(fr >= 0);
    gbx_err_free(err);
    err = NULL;
    assert_int_equal(g.refused, 1);
    /* short: the file (made at start, there was room for it) is given up for a delete, once */
    gbx_autofree char *f = gbx_asprintf("%s/reserve", d);
    assert_true(g.file_present);
    assert_int_equal(gbx_diskguard_before_delete(&g), 1);
    assert_int_equal(access(f, F_OK), -1);
    assert_int_equal(gbx_diskguard_before_delete(&g), 0);
    assert_int_equal(g.released, 1);
    gbx_diskguard_release(&g);
    (void)!gbx_rm_rf(d);
}

static void test_comes_back(void **state)
{
    gbx_autofree char *d = tmpdir();
    struct gbx_diskguard g;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_diskguard_init(&g, d, 4096, 1, &err), 0);
    gbx_autofree char *f = gbx_asprintf("%s/reserve", d);
    /* as if a delete on a short disk gave it up */
    assert_int_equal(unlink(f), 0);
    g.file_present = 0;
    assert_int_equal(gbx_diskguard_admit(&g, NULL, &err), 0);
    assert_true(g.file_present);
    assert_int_equal(access(f, F_OK), 0);
    gbx_diskguard_release(&g);
    (void)!gbx_rm_rf(d);
}

static void test_off(void **state)
{
    gbx_autofree char *d = tmpdir();
    struct gbx_diskguard g;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_diskguard_init(&g, d, 0, 1, &err), 0);
    assert_false(g.file_present);
    gbx_autofree char *f = gbx_asprintf("%s/reserve", d);
    assert_int_equal(access(f, F_OK), -1);
    assert_int_equal(gbx_diskguard_admit(&g, NULL, &err), 0);
    assert_int_equal(gbx_diskguard_before_delete(&g), 0);
    gbx_diskguard_release(&g);
    /* the default: the smaller of 64 MiB and 1% of the file system */
    assert_int_equal(gbx_diskguard_init(&g, d, 0, 0, &err), 0);
    assert_true(g.reserve > 0 && g.reserve <= GBX_DISKGUARD_RESERVE_MAX);
    assert_true(g.file_size <= GBX_DISKGUARD_FILE_MAX);
    gbx_diskguard_release(&g);
    (void)!gbx_rm_rf(d);
    /* a state dir that is not there is an error that names it */
    assert_int_equal(gbx_diskguard_init(&g, "/nonexistent/gbx-state", 0, 0, &err), -1);
    assert_non_null(strstr(err->msg, "/nonexistent/gbx-state"));
    gbx_err_free(err);
    gbx_diskguard_release(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_room),
        cmocka_unit_test(test_short),
        cmocka_unit_test(test_comes_back),
        cmocka_unit_test(test_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
