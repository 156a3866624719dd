/* SPDX-License-Identifier: MIT */
/* Debian templates (src/sandbox/debootstrap.c): debootstrap's output lines as progress
 * (pure), the option checks, and, with GLOVEBOX_TEST_DEBOOTSTRAP=1, a real bookworm minbase
 * build from deb.debian.org (a few minutes; skipped otherwise). */
#include <errno.h>
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
#include "sandbox/debootstrap.h"
#include "sandbox/template.h"

static void test_parse(void **state)
{
    static const struct {
        const char *line;
        enum gbx_deb_phase phase;
        const char *package;
        int counts;
    } cases[] = {
        {"I: Retrieving InRelease ", GBX_DEB_RETRIEVE, "", 0},
        {"I: Checking Release signature", GBX_DEB_OTHER, "", 0},
        {"I: Retrieving Packages ", GBX_DEB_RETRIEVE, "", 0},
        {"I: Retrieving coreutils 9.1-1", GBX_DEB_RETRIEVE, "coreutils", 1},
        {"I: Validating coreutils 9.1-1", GBX_DEB_RETRIEVE, "coreutils", 0},
        {"I: Extracting libacl1...", GBX_DEB_EXTRACT, "libacl1", 1},
        {"I: Installing core packages...", GBX_DEB_INSTALL, "", 0},
        {"I: Unpacking required packages...", GBX_DEB_INSTALL, "", 0},
        {"I: Unpacking libpam-modules:amd64...", GBX_DEB_INSTALL, "libpam-modules", 1},
        {"I: Configuring required packages...", GBX_DEB_CONFIGURE, "", 0},
        {"I: Configuring gzip...", GBX_DEB_CONFIGURE, "gzip", 1},
        {"I: Base system installed successfully.", GBX_DEB_DONE, "", 0},
        {"E: Couldn't download packages: foo", GBX_DEB_ERROR, "", 0},
        {"W: Failure trying to run: chroot", GBX_DEB_OTHER, "", 0},
        {"dpkg: warning: something", GBX_DEB_OTHER, "", 0},
        {"", GBX_DEB_OTHER, "", 0},
        {"I: ", GBX_DEB_OTHER, "", 0},
        {"I: Retrieving ", GBX_DEB_RETRIEVE, "", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gbx_deb_line l;
        gbx_deb_parse_line(cases[i].line, &l);
        if (l.phase != cases[i].phase || strcmp(l.package, cases[i].package) != 0 ||
            l.counts != cases[i].counts)
            fail_msg("'%s': phase %s package '%s' counts %d", cases[i].line,
                     gbx_deb_phase_name(l.phase), l.package, l.counts);
    }
    assert_string_equal(gbx_deb_phase_name(GBX_DEB_CONFIGURE), "configure");
}

static void test_opts(void **state)
{
    struct gbx_err *err = NULL;
    struct gbx_deb_opts o = {.suite = "bookworm"};
    assert_int_equal(gbx_deb_opts_check(&o, &err), 0);
    const char *good[] = {"python3", "g++", "libstdc++6", "ca-certificates"};
    o.include = good;
    o.n_include = 4;
    o.mirror = "http://deb.debian.org/debian";
    o.variant = "minbase";
    assert_int_equal(gbx_deb_opts_check(&o, &err), 0);
    const char *bad[] = {"python3", "--foo"};
    o.include = bad;
    o.n_include = 2;
    assert_int_equal(gbx_deb_opts_check(&o, &err), -1);
    assert_non_null(strstr(err->msg, "--foo"));
    gbx_err_free(err);
    err = NULL;
    o.n_include = 0;
    o.mirror = "file:///etc";
    assert_int_equal(gbx_deb_opts_check(&o, &err), -1);
    gbx_err_free(err);
    err = NULL;
    o.mirror = NULL;
    o.suite = "../x";
    assert_int_equal(gbx_deb_opts_check(&o, &err), -1);
    gbx_err_free(err);
    err = NULL;
    o.suite = "bookworm";
    o.variant = "anything";
    assert_int_equal(gbx_deb_opts_check(&o, &err), -1);
    gbx_err_free(err);
}

struct seen {
    unsigned lines, configured, total;
    int done;
};

static void on_progress(void *arg, const struct gbx_deb_progress *p)
{
    struct seen *s = arg;
    s->lines++;
    if (p->phase == GBX_DEB_CONFIGURE)
        s->configured = p->step;
    if (p->phase == GBX_DEB_DONE)
        s->done = 1;
    s->total = p->total;
}

static void test_real(void **state)
{
    const char *on = getenv("GLOVEBOX_TEST_DEBOOTSTRAP");
    if (on == NULL || strcmp(on, "1") != 0) {
        printf("skip: a real debootstrap (set GLOVEBOX_TEST_DEBOOTSTRAP=1)\n");
        skip();
    }
    char dir[] = "/tmp/gbx-deb-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct seen s = {0};
    struct gbx_deb_opts o = {.suite = "bookworm", .progress = on_progress, .arg = &s};
    struct gbx_err *err = NULL;
    int r = gbx_template_build_debian(dir, "deb", &o, &err);
    if (r < 0)
        fail_msg("build: %s", err->msg);
    assert_true(s.done);
    assert_true(s.total > 50);
    assert_true(s.configured > 50);
    gbx_autofree char *passwd = gbx_asprintf("%s/templates/deb/rootfs/etc/passwd", dir);
    gbx_autofree char *txt = NULL;
    assert_int_equal(gbx_read_file(passwd, 1 << 20, &txt, NULL), 0);
    assert_non_null(strstr(txt, "\nuser:x:1000:1000:"));
    gbx_autofree char *resolv = gbx_asprintf("%s/templates/deb/rootfs/etc/resolv.conf", dir);
    gbx_autofree char *rtxt = NULL;
    assert_int_equal(gbx_read_file(resolv, 1024, &rtxt, NULL), 0);
    assert_string_equal(rtxt, "nameserver 127.0.0.1\n");
    struct gbx_template_info info;
    assert_int_equal(gbx_template_inspect(dir, "deb", 0, &info, &err), 0);
    assert_string_equal(info.source, "debootstrap:bookworm");
    printf("bookworm minbase: %llu bytes on disk, %u packages\n",
           (unsigned long long)info.size_bytes, s.total);
    gbx_template_info_release(&info);
    assert_int_equal(gbx_rm_rf(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_opts),
        cmocka_unit_test(test_real),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
