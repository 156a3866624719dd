/* SPDX-License-Identifier: MIT */
/* OCI image import (src/sandbox/oci.c): the entry-name sanitizer and whiteout classification
 * as tables, then layers and whole image archives built here with libarchive's writer:
 * whiteouts and opaque directories against a lower layer, hard links, and hostile entries
 * ("..", absolute names, writes through a symlink, hard links out of the tree or through a
 * symlink, escaping symlinks, owners above 65535), each refused with its name while a
 * sentinel directory next to the rootfs stays untouched. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "sandbox/oci.h"
#include "sandbox/template.h"

/* ---- pure ------------------------------------------------------------------------------- */

static void test_path_clean(void **state)
{
    static const struct {
        const char *in, *out;
        int r;
    } cases[] = {
        {"a/b/c", "a/b/c", 0},
        {"./a/b", "a/b", 0},
        {"a/b/", "a/b", 0},
        {"a//b/./c", "a/b/c", 0},
        {"./", "", 1},
        {".", "", 1},
        {"", "", 1},
        {"..", NULL, -EINVAL},
        {"../x", NULL, -EINVAL},
        {"a/../../etc/evil", NULL, -EINVAL},
        {"a/..", NULL, -EINVAL},
        {"/abs/path", NULL, -EINVAL},
        {"/", NULL, -EINVAL},
        {"...", "...", 0},
        {"a/..b", "a/..b", 0},
        {".wh.x", ".wh.x", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[PATH_MAX];
        int r = gbx_oci_path_clean(cases[i].in, out, sizeof(out));
        if (r != cases[i].r)
            fail_msg("'%s': %d, expected %d", cases[i].in, r, cases[i].r);
        if (r >= 0)
            assert_string_equal(out, cases[i].out);
    }
    char small[4];
    assert_int_equal(gbx_oci_path_clean("abcd", small, sizeof(small)), -ENAMETOOLONG);
    char longname[NAME_MAX + 3];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    char out[PATH_MAX];
    assert_int_equal(gbx_oci_path_clean(longname, out, sizeof(out)), -ENAMETOOLONG);
}

static void test_classify(void **state)
{
    static const struct {
        const char *in, *target;
        int kind;
    } cases[] = {
        {"a/b", NULL, GBX_OCI_ENTRY},
        {"a/.wh.x", "a/x", GBX_OCI_WHITEOUT},
        {".wh.x", "x", GBX_OCI_WHITEOUT},
        {"a/b/.wh..wh..opq", "a/b", GBX_OCI_OPAQUE},
        {".wh..wh..opq", "", GBX_OCI_OPAQUE},
        {"a/.wh..wh.plnk", NULL, GBX_OCI_WH_META},
        {"a/.wh.", NULL, -EINVAL},
        {"a/.wh..", NULL, -EINVAL},
        {".wh...", NULL, -EINVAL},
        {"a/x.wh.y", NULL, GBX_OCI_ENTRY},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char t[PATH_MAX];
        int k = gbx_oci_classify(cases[i].in, t, sizeof(t));
        if (k != cases[i].kind)
            fail_msg("'%s': %d, expected %d", cases[i].in, k, cases[i].kind);
        if (cases[i].target)
            assert_string_equal(t, cases[i].target);
    }
}

static void test_link_escapes(void **state)
{
    assert_int_equal(gbx_oci_link_escapes("a", "/etc"), 0);
    assert_int_equal(gbx_oci_link_escapes("usr/bin/x", "../lib/y"), 0);
    assert_int_equal(gbx_oci_link_escapes("usr/bin/x", "../../etc/y"), 0);
    assert_int_equal(gbx_oci_link_escapes("usr/bin/x", "../../../etc/y"), 1);
    assert_int_equal(gbx_oci_link_escapes("x", "../y"), 1);
    assert_int_equal(gbx_oci_link_escapes("x", "a/../../y"), 1);
    assert_int_equal(gbx_oci_link_escapes("x", "./a/./b"), 0);
    char hex[65];
    assert_int_equal(gbx_oci_digest_hex(
                         "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                         hex, sizeof(hex)),
                     0);
    assert_int_equal(gbx_oci_digest_hex("sha256:../../etc/passwd", hex, sizeof(hex)), -EINVAL);
    assert_int_equal(gbx_oci_digest_hex(
                         "sha512:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                         hex, sizeof(hex)),
                     -EINVAL);
}

/* ---- archives built here ----------------------------------------------------------------- */

struct ent {
    const char *name;
    char type;        /* f file, d dir, l symlink, h hardlink, c char device */
    const char *data; /* file data, or the link target */
    int mode;
    long uid;
};

struct buf {
    char *p;
    size_t len;
};

/* gzip: 0 none, 1 gzip, 2 zstd */
static void build_tar(const struct ent *e, size_t n, int gzip, struct buf *out)
{
    size_t cap = 4 << 20;
    out->p = gbx_xmalloc(cap);
    struct archive *a = archive_write_new();
    assert_non_null(a);
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    if (gzip == 1)
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    else if (gzip == 2)
        assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_memory(a, out->p, cap, &out->len), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_set_pathname(ae, e[i].name);
        archive_entry_set_uid(ae, e[i].uid);
        archive_entry_set_gid(ae, e[i].uid);
        archive_entry_set_mtime(ae, 1700000000, 0);
        size_t len = 0;
        switch (e[i].type) {
        case 'f':
            archive_entry_set_filetype(ae, AE_IFREG);
            len = strlen(e[i].data);
            break;
        case 'd':
            archive_entry_set_filetype(ae, AE_IFDIR);
            break;
        case 'l':
            archive_entry_set_filetype(ae, AE_IFLNK);
            archive_entry_set_symlink(ae, e[i].data);
            break;
        case 'h':
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_hardlink(ae, e[i].data);
            break;
        case 'c':
            archive_entry_set_filetype(ae, AE_IFCHR);
            archive_entry_set_rdev(ae, makedev(1, 3));
            break;
        }
        archive_entry_set_perm(ae, e[i].mode ? (mode_t)e[i].mode : 0644);
        archive_entry_set_size(ae, (la_int64_t)len);
        assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
        if (len)
            assert_int_equal(archive_write_data(a, e[i].data, len), (la_ssize_t)len);
        archive_entry_free(ae);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

static char base[64], rootdir[96], outside[96];
static int rootfd = -1;

static int setup(void **state)
{
    snprintf(base, sizeof(base), "/tmp/gbx-oci-XXXXXX");
    if (mkdtemp(base) == NULL)
        return -1;
    snprintf(rootdir, sizeof(rootdir), "%s/root", base);
    snprintf(outside, sizeof(outside), "%s/outside", base);
    gbx_autofree char *sentinel = gbx_asprintf("%s/sentinel", outside);
    if (mkdir(rootdir, 0755) < 0 || mkdir(outside, 0755) < 0 ||
        gbx_write_file_atomic(sentinel, "keep\n", 5, 0644) < 0)
        return -1;
    rootfd = open(rootdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return rootfd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    if (rootfd >= 0)
        close(rootfd);
    return gbx_rm_rf(base) < 0 ? -1 : 0;
}

/* outside holds exactly the sentinel, unchanged; nothing new next to root */
static void assert_outside_untouched(void)
{
    gbx_autofree char *sentinel = gbx_asprintf("%s/sentinel", outside);
    gbx_autofree char *txt = NULL;
    assert_int_equal(gbx_read_file(sentinel, 64, &txt, NULL), 0);
    assert_string_equal(txt, "keep\n");
    DIR *d = opendir(outside);
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    assert_int_equal(n, 1);
    d = opendir(base);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.' && strcmp(de->d_name, "root") != 0 &&
            strcmp(de->d_name, "outside") != 0 && strcmp(de->d_name, "state") != 0)
            fail_msg("'%s' appeared next to the rootfs", de->d_name);
    closedir(d);
    struct stat st;
    assert_int_equal(stat("/etc/evil", &st), -1);
    assert_int_equal(stat("/abs/path", &st), -1);
}

static int exists(const char *rel)
{
    struct stat st;
    return fstatat(rootfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static char *slurp(const char *rel)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", rootdir, rel);
    char *txt = NULL;
    if (gbx_read_file(p, 1 << 20, &txt, NULL) < 0)
        return NULL;
    return txt;
}

static int apply(const struct ent *e, size_t n, int gzip, struct gbx_err **err)
{
    struct buf b;
    build_tar(e, n, gzip, &b);
    struct gbx_oci_opts o = {.max_bytes = 1 << 20, .max_entries = 1000};
    int r = gbx_oci_apply_layer_mem(rootfd, b.p, b.len, &o, NULL, err);
    free(b.p);
    return r;
}

static void test_layers_whiteouts(void **state)
{
    static const struct ent lower[] = {
        {"./", 'd', NULL, 0755, 0},
        {"./keep.txt", 'f', "keep\n", 0644, 0},
        {"./gone.txt", 'f', "gone\n", 0644, 0},
        {"./gonedir/", 'd', NULL, 0755, 0},
        {"./gonedir/f", 'f', "f\n", 0644, 0},
        {"./opq/", 'd', NULL, 0755, 0},
        {"./opq/old1", 'f', "1\n", 0644, 0},
        {"./opq/sub/", 'd', NULL, 0755, 0},
        {"./opq/sub/old2", 'f', "2\n", 0644, 0},
        {"./home/user/", 'd', NULL, 0755, 1000},
        {"./home/user/mine", 'f', "mine\n", 0600, 1000},
        {"./usr/bin/su", 'f', "suid\n", 04755, 0},
        {"./dev/null", 'c', NULL, 0666, 0},
    };
    struct gbx_err *err = NULL;
    assert_int_equal(apply(lower, GBX_ARRAY_SIZE(lower), 0, &err), 0);
    static const struct ent upper[] = {
        /* the same layer's new entry survives its own opaque marker, wherever it comes */
        {"opq/new", 'f', "new\n", 0644, 0},        {"opq/.wh..wh..opq", 'f', "", 0644, 0},
        {".wh.gone.txt", 'f', "", 0644, 0},        {".wh.gonedir", 'f', "", 0644, 0},
        {".wh.never-existed", 'f', "", 0644, 0},   {"hard", 'h', "keep.txt", 0644, 0},
        {"abs-link", 'l', "/etc/passwd", 0777, 0}, {"rel-link", 'l', "usr/bin/su", 0777, 0},
        {"keep.txt", 'f', "replaced\n", 0644, 0},
    };
    assert_int_equal(apply(upper, GBX_ARRAY_SIZE(upper), 1, &err), 0); /* gzip */
    assert_null(err);
    static const struct ent top[] = {{"zstd.txt", 'f', "zstd\n", 0644, 0}};
    assert_int_equal(apply(top, 1, 2, &err), 0); /* zstd */
    gbx_autofree char *z = slurp("zstd.txt");
    assert_string_equal(z, "zstd\n");
    assert_false(exists("gone.txt"));
    assert_false(exists("gonedir"));
    assert_false(exists("opq/old1"));
    assert_false(exists("opq/sub"));
    assert_true(exists("opq/new"));
    assert_false(exists("opq/.wh..wh..opq"));
    assert_false(exists(".wh.gone.txt"));
    assert_false(exists("dev/null")); /* device nodes are skipped */
    gbx_autofree char *k = slurp("keep.txt");
    assert_string_equal(k, "replaced\n");
    gbx_autofree char *h = slurp("hard");
    assert_string_equal(h, "keep\n"); /* linked to the lower one, then keep.txt was replaced */
    struct stat st;
    assert_int_equal(fstatat(rootfd, "home/user/mine", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_uid, 1000);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(fstatat(rootfd, "usr/bin/su", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_mode & 07777, 04755);
    char t[64];
    ssize_t n = readlinkat(rootfd, "abs-link", t, sizeof(t) - 1);
    assert_true(n > 0);
    t[n] = '\0';
    assert_string_equal(t, "/etc/passwd");
    assert_outside_untouched();
}

static void refused(const struct ent *e, size_t n, const char *name)
{
    struct gbx_err *err = NULL;
    int r = apply(e, n, 0, &err);
    if (r == 0)
        fail_msg("an archive with '%s' was accepted", name);
    assert_non_null(err);
    assert_int_equal(err->kind, GBX_ERR_INVALID);
    if (strstr(err->msg, name) == NULL)
        fail_msg("the error does not name '%s': %s", name, err->msg);
    gbx_err_free(err);
    assert_outside_untouched();
}

static void test_hostile(void **state)
{
    gbx_autofree char *out_abs = gbx_xstrdup(outside);
    struct ent dotdot[] = {{"ok", 'f', "ok\n", 0644, 0}, {"../outside/evil", 'f', "x", 0644, 0}};
    refused(dotdot, 2, "../outside/evil");
    struct ent dotdot2[] = {{"../../etc/evil", 'f', "x", 0644, 0}};
    refused(dotdot2, 1, "../../etc/evil");
    struct ent abs[] = {{"/abs/path", 'f', "x", 0644, 0}};
    refused(abs, 1, "/abs/path");
    /* a symlink to a directory outside, then a file through it */
    struct ent through[] = {{"a", 'l', out_abs, 0777, 0}, {"a/passwd", 'f', "x", 0644, 0}};
    refused(through, 2, "a/passwd");
    struct ent through_etc[] = {{"b", 'l', "/etc", 0777, 0}, {"b/passwd", 'f', "x", 0644, 0}};
    refused(through_etc, 2, "b/passwd");
    /* a directory entry through the symlink */
    struct ent dir_through[] = {{"c", 'l', out_abs, 0777, 0}, {"c/sub/", 'd', NULL, 0755, 0}};
    refused(dir_through, 2, "c/sub/");
    /* hard links out of the tree, and through a symlink */
    struct ent hl_abs[] = {{"h1", 'h', "/etc/shadow", 0644, 0}};
    refused(hl_abs, 1, "h1");
    struct ent hl_up[] = {{"h2", 'h', "../outside/sentinel", 0644, 0}};
    refused(hl_up, 1, "h2");
    gbx_autofree char *sentinel_abs = gbx_asprintf("%s/sentinel", outside);
    struct ent hl_link[] = {{"d", 'l', out_abs, 0777, 0}, {"h3", 'h', "d/sentinel", 0644, 0}};
    refused(hl_link, 2, "h3");
    /* a hard link to a symlink links the symlink itself (as tar does), never its target */
    struct ent hl_link2[] = {{"e", 'l', sentinel_abs, 0777, 0}, {"h4", 'h', "e", 0644, 0}};
    struct gbx_err *err = NULL;
    assert_int_equal(apply(hl_link2, 2, 0, &err), 0);
    struct stat st;
    assert_int_equal(fstatat(rootfd, "h4", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_outside_untouched();
    /* a relative symlink that climbs out */
    struct ent up_link[] = {{"usr/x", 'l', "../../../etc", 0777, 0}};
    refused(up_link, 1, "usr/x");
    struct ent big_uid[] = {{"f", 'f', "x", 0644, 70000}};
    refused(big_uid, 1, "f");
    struct ent bad_wh[] = {{"a/.wh..", 'f', "", 0644, 0}};
    refused(bad_wh, 1, "a/.wh..");
    /* whiteouts and opaque markers below a lower-layer symlink to the outside */
    struct ent lower[] = {{"lnk", 'l', out_abs, 0777, 0}};
    assert_int_equal(apply(lower, 1, 0, &err), 0);
    struct ent wh[] = {{"lnk/.wh.sentinel", 'f', "", 0644, 0}};
    refused(wh, 1, "lnk/.wh.sentinel");
    struct ent opq[] = {{"lnk/.wh..wh..opq", 'f', "", 0644, 0}};
    refused(opq, 1, "lnk/.wh..wh..opq");
    /* a whiteout of the symlink itself removes the link, not what it points to */
    struct ent wh_link[] = {{".wh.lnk", 'f', "", 0644, 0}};
    assert_int_equal(apply(wh_link, 1, 0, &err), 0);
    assert_false(exists("lnk"));
    assert_outside_untouched();
    /* garbage is a bad archive, not a crash */
    assert_int_equal(gbx_oci_apply_layer_mem(rootfd, "not a tar at all", 16, NULL, NULL, &err), -1);
    assert_non_null(err);
    gbx_err_free(err);
}

/* ---- whole images ------------------------------------------------------------------------ */

/* An outer tar of named blobs (binary-safe). */
static void build_outer(const char *const *names, const struct buf *blobs, size_t n,
                        struct buf *out)
{
    size_t cap = 8 << 20;
    out->p = gbx_xmalloc(cap);
    struct archive *a = archive_write_new();
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_memory(a, out->p, cap, &out->len), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_set_pathname(ae, names[i]);
        archive_entry_set_filetype(ae, AE_IFREG);
        archive_entry_set_perm(ae, 0644);
        archive_entry_set_size(ae, (la_int64_t)blobs[i].len);
        assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
        assert_int_equal(archive_write_data(a, blobs[i].p, blobs[i].len), (la_ssize_t)blobs[i].len);
        archive_entry_free(ae);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

static struct buf text(const char *s)
{
    struct buf b = {gbx_xstrdup(s), strlen(s)};
    return b;
}

static const struct ent img_l1[] = {
    {"etc/", 'd', NULL, 0755, 0},         {"etc/os-release", 'f', "ID=test\n", 0644, 0},
    {"bin/", 'd', NULL, 0755, 0},         {"bin/tool", 'f', "#!/bin/sh\n", 0755, 0},
    {"data/", 'd', NULL, 0755, 0},        {"data/old", 'f', "old\n", 0644, 0},
    {"data/keep", 'f', "keep\n", 0644, 0}};
static const struct ent img_l2[] = {{"data/.wh.old", 'f', "", 0644, 0},
                                    {"data/new", 'f', "new\n", 0644, 0}};
static const char config[] =
    "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/bin\",\"A=b\"],"
    "\"Cmd\":[\"/bin/tool\"],\"WorkingDir\":\"/data\"}}";

static void check_imported(const char *state, const char *name)
{
    gbx_autofree char *r = gbx_asprintf("%s/templates/%s/rootfs", state, name);
    gbx_autofree char *keep = gbx_asprintf("%s/data/keep", r);
    gbx_autofree char *old = gbx_asprintf("%s/data/old", r);
    gbx_autofree char *nw = gbx_asprintf("%s/data/new", r);
    gbx_autofree char *resolv = gbx_asprintf("%s/etc/resolv.conf", r);
    struct stat st;
    assert_int_equal(stat(keep, &st), 0);
    assert_int_equal(stat(nw, &st), 0);
    assert_int_equal(stat(old, &st), -1);
    gbx_autofree char *txt = NULL;
    assert_int_equal(gbx_read_file(resolv, 1024, &txt, NULL), 0);
    assert_string_equal(txt, "nameserver 127.0.0.1\n");
    struct gbx_template_info info;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_template_inspect(state, name, 1, &info, &err), 0);
    assert_non_null(info.oci_env);
    assert_string_equal(info.oci_env, "[\"PATH=/bin\",\"A=b\"]");
    assert_string_equal(info.oci_cmd, "[\"/bin/tool\"]");
    assert_non_null(info.source);
    assert_true(strncmp(info.source, "oci:", 4) == 0);
    assert_true(info.size_bytes > 0);
    gbx_template_info_release(&info);
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    assert_int_equal(EVP_Digest(data, len, md, &n, EVP_sha256(), NULL), 1);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int no_staging_left(const char *state)
{
    gbx_autofree char *t = gbx_asprintf("%s/templates", state);
    DIR *d = opendir(t);
    if (d == NULL)
        return 1;
    struct dirent *de;
    int ok = 1;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, ".build.", 7) == 0)
            ok = 0;
    closedir(d);
    return ok;
}

static void test_import(void **state)
{
    gbx_autofree char *st = gbx_asprintf("%s/state", base);
    assert_int_equal(mkdir(st, 0700), 0);
    struct buf l1, l2;
    build_tar(img_l1, GBX_ARRAY_SIZE(img_l1), 0, &l1);
    build_tar(img_l2, GBX_ARRAY_SIZE(img_l2), 1, &l2); /* gzip */

    /* docker save */
    {
        const char *names[] = {"manifest.json", "cfg.json", "l1/layer.tar", "l2/layer.tar"};
        struct buf blobs[] = {
            text("[{\"Config\":\"cfg.json\",\"RepoTags\":[\"t:1\"],\"Layers\":[\"l1/layer.tar\","
                 "\"l2/layer.tar\"]}]"),
            text(config), l1, l2};
        struct buf outer;
        build_outer(names, blobs, 4, &outer);
        free(blobs[0].p);
        free(blobs[1].p);
        struct gbx_err *err = NULL;
        int r = gbx_oci_import(st, "dock", NULL, outer.p, outer.len, "upload", NULL, NULL, &err);
        if (r < 0)
            fail_msg("import: %s", err->msg);
        check_imported(st, "dock");
        /* the name is taken now */
        assert_int_equal(
            gbx_oci_import(st, "dock", NULL, outer.p, outer.len, "upload", NULL, NULL, &err), -1);
        assert_int_equal(err->kind, GBX_ERR_CONFLICT);
        gbx_err_free(err);
        free(outer.p);
    }
    /* OCI layout: index.json -> manifest -> config and layers by digest; then the same with
     * a layer that does not hash to its name */
    for (int tamper = 0; tamper < 2; tamper++) {
        char h_cfg[65], h_l1[65], h_l2[65], h_man[65];
        sha256_hex(config, strlen(config), h_cfg);
        sha256_hex(l1.p, l1.len, h_l1);
        sha256_hex(l2.p, l2.len, h_l2);
        gbx_autofree char *man =
            gbx_asprintf("{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:%s\"},\"layers\":[{"
                         "\"digest\":\"sha256:%s\"},{\"digest\":\"sha256:%s\"}]}",
                         h_cfg, h_l1, h_l2);
        sha256_hex(man, strlen(man), h_man);
        gbx_autofree char *index =
            gbx_asprintf("{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/"
                         "vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:%s\",\"size\":1}]}",
                         h_man);
        gbx_autofree char *n_man = gbx_asprintf("blobs/sha256/%s", h_man);
        gbx_autofree char *n_cfg = gbx_asprintf("blobs/sha256/%s", h_cfg);
        gbx_autofree char *n_l1 = gbx_asprintf("blobs/sha256/%s", h_l1);
        gbx_autofree char *n_l2 = gbx_asprintf("blobs/sha256/%s", h_l2);
        const char *names[] = {"oci-layout", "index.json", n_man, n_cfg, n_l1, n_l2};
        struct buf l2t = {gbx_xmalloc(l2.len), l2.len};
        memcpy(l2t.p, l2.p, l2.len);
        if (tamper)
            l2t.p[l2t.len - 1] ^= 1; /* one bit of the last layer */
        struct buf blobs[] = {text("{\"imageLayoutVersion\":\"1.0.0\"}"),
                              text(index),
                              text(man),
                              text(config),
                              l1,
                              l2t};
        struct buf outer;
        build_outer(names, blobs, 6, &outer);
        for (int i = 0; i < 4; i++)
            free(blobs[i].p);
        free(l2t.p);
        gbx_autofree char *file = gbx_asprintf("%s/image.tar", base);
        assert_int_equal(gbx_write_file_atomic(file, outer.p, outer.len, 0600), 0);
        free(outer.p);
        struct gbx_err *err = NULL;
        const char *name = tamper ? "tampered" : "ocil";
        int r = gbx_oci_import(st, name, file, NULL, 0, file, NULL, NULL, &err);
        if (!tamper) {
            if (r < 0)
                fail_msg("import: %s", err->msg);
            check_imported(st, "ocil");
        } else {
            assert_int_equal(r, -1);
            assert_non_null(strstr(err->msg, "does not match its digest"));
            gbx_err_free(err);
            assert_true(no_staging_left(st));
        }
        (void)unlink(file);
    }
    /* a hostile layer: refused with its entry's name, nothing installed, nothing left */
    {
        struct ent bad[] = {{"x", 'l', "/etc", 0777, 0}, {"x/passwd", 'f', "evil", 0644, 0}};
        struct buf lb;
        build_tar(bad, 2, 0, &lb);
        const char *names[] = {"manifest.json", "cfg.json", "bad/layer.tar"};
        struct buf blobs[] = {text("[{\"Config\":\"cfg.json\",\"Layers\":[\"bad/layer.tar\"]}]"),
                              text(config), lb};
        struct buf outer;
        build_outer(names, blobs, 3, &outer);
        for (int i = 0; i < 3; i++)
            free(blobs[i].p);
        struct gbx_err *err = NULL;
        assert_int_equal(
            gbx_oci_import(st, "evil", NULL, outer.p, outer.len, "upload", NULL, NULL, &err), -1);
        assert_non_null(strstr(err->msg, "x/passwd"));
        gbx_err_free(err);
        free(outer.p);
        gbx_autofree char *t = gbx_asprintf("%s/templates/evil", st);
        struct stat sb;
        assert_int_equal(stat(t, &sb), -1);
        assert_true(no_staging_left(st));
    }
    /* a manifest whose layer path climbs out of the archive */
    {
        const char *names[] = {"manifest.json", "cfg.json"};
        struct buf blobs[] = {
            text("[{\"Config\":\"cfg.json\",\"Layers\":[\"../../outside/sentinel\"]}]"),
            text(config)};
        struct buf outer;
        build_outer(names, blobs, 2, &outer);
        free(blobs[0].p);
        free(blobs[1].p);
        struct gbx_err *err = NULL;
        assert_int_equal(
            gbx_oci_import(st, "evil2", NULL, outer.p, outer.len, "upload", NULL, NULL, &err), -1);
        gbx_err_free(err);
        free(outer.p);
        assert_true(no_staging_left(st));
    }
    free(l1.p);
    free(l2.p);
    /* list, then delete through the trash */
    struct gbx_template_info *v;
    size_t n;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_template_list(st, &v, &n, &err), 0);
    assert_int_equal(n, 3); /* dock, host (not generated), ocil */
    assert_string_equal(v[0].name, "dock");
    assert_string_equal(v[1].name, "host");
    assert_string_equal(v[2].name, "ocil");
    gbx_template_list_free(v, n);
    char *trash = NULL;
    assert_int_equal(gbx_template_trash(st, "dock", &trash, &err), 0);
    assert_int_equal(gbx_rm_rf(trash), 0);
    free(trash);
    assert_int_equal(gbx_template_trash(st, "dock", &trash, &err), -1);
    assert_int_equal(err->kind, GBX_ERR_NOT_FOUND);
    gbx_err_free(err);
    assert_outside_untouched();
}

/* A staging tree with a bind mount of an outside directory inside (what a debootstrap stopped
 * mid-way leaves): removing it detaches the mount and never empties what was bound. In a
 * child with its own mount namespace. */
static void test_remove_tree(void **state)
{
    if (geteuid() != 0) {
        printf("skip: needs root for mounts\n");
        skip();
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            _exit(77);
        gbx_autofree char *stage = gbx_asprintf("%s/.build.x.1.1", base);
        gbx_autofree char *shm = gbx_asprintf("%s/rootfs/dev/shm", stage);
        gbx_autofree char *proc = gbx_asprintf("%s/rootfs/proc", stage);
        if (gbx_mkdir_p(shm, 0755) < 0 || gbx_mkdir_p(proc, 0755) < 0 ||
            mount(outside, shm, NULL, MS_BIND, NULL) < 0 ||
            mount("proc", proc, "proc", 0, NULL) < 0)
            _exit(2);
        if (gbx_template_remove_tree(stage) < 0)
            _exit(3);
        struct stat st;
        if (stat(stage, &st) == 0)
            _exit(4);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_outside_untouched();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_clean),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_link_escapes),
        cmocka_unit_test_setup_teardown(test_layers_whiteouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_tree, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
