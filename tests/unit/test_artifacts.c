/* SPDX-License-Identifier: MIT */
/* Unit tests for src/core/capture.c, the part of an artifact publish that reads a sandbox's
 * tree into one blob: over a temporary directory standing in for a sandbox's root (its files
 * owned by the sandbox's host uids), a file is its bytes and a directory a tar (read back with
 * libarchive: entries sorted, owners shifted into the sandbox's view, symlinks stored and
 * never followed, fifos and sockets left out and counted), the sha256 is the blob's, the size
 * limit holds to the byte, and what is refused is refused: a path that is neither a file nor a
 * directory, a missing one, a symlink out of the root (it resolves inside), a file the
 * sandbox's root may not read, too deep a tree. Needs root (the capture takes the sandbox's
 * root's credentials, sandbox/fscred.h). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "core/capture.h"

#define HOST_UID 1500000000u
#define OUTSIDE_UID 12345u /* a uid of no sandbox */

static char top[64];      /* the test's directory */
static char root[96];     /* the sandbox's root */
static char blobpath[96]; /* where captures are written */

static void put(const char *rel, const char *data, mode_t mode, uid_t uid)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", root, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    close(fd);
    assert_int_equal(chmod(p, mode), 0);
    assert_int_equal(lchown(p, uid, uid), 0);
}

static void dir(const char *rel, uid_t uid)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", root, rel);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(lchown(p, uid, uid), 0);
}

static void symlink_in(const char *rel, const char *target)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", root, rel);
    assert_int_equal(symlink(target, p), 0);
    assert_int_equal(lchown(p, HOST_UID, HOST_UID), 0);
}

static void fifo_in(const char *rel)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", root, rel);
    assert_int_equal(mkfifo(p, 0644), 0);
    assert_int_equal(lchown(p, HOST_UID, HOST_UID), 0);
}

static void socket_in(const char *rel)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", root, rel);
    assert_true(n > 0 && (size_t)n < sizeof(sa.sun_path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
}

static int setup(void **state)
{
    (void)state;
    snprintf(top, sizeof(top), "/tmp/gbx-capture-XXXXXX");
    if (mkdtemp(top) == NULL || chmod(top, 0755) < 0)
        return -1;
    snprintf(root, sizeof(root), "%s/root", top);
    snprintf(blobpath, sizeof(blobpath), "%s/blob", top);
    if (mkdir(root, 0755) < 0 || chown(root, HOST_UID, HOST_UID) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    (void)!gbx_rm_rf(top);
    return 0;
}

/* Capture path (in the sandbox) into a fresh blobpath: the capture's return. */
static int run(const char *path, uint64_t max_bytes, struct gbx_capture_out *out,
               struct gbx_err **err)
{
    int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(rootfd >= 0);
    int fd = open(blobpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    const struct gbx_capture_in in = {
        .rootfd = rootfd,
        .path = path,
        .host_uid = HOST_UID,
        .max_bytes = max_bytes,
        .out = fd,
    };
    int r = gbx_capture(&in, out, err);
    close(fd);
    close(rootfd);
    /* the thread is the daemon's root again */
    assert_int_equal(geteuid(), 0);
    assert_int_equal(getegid(), 0);
    return r;
}

/* The blob's bytes (malloc'd; *n its size). */
static char *blob(size_t *n)
{
    char *b = NULL;
    assert_int_equal(gbx_read_file(blobpath, 64u << 20, &b, n), 0);
    return b;
}

static void sha256_hex(const void *b, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    assert_int_equal(EVP_Digest(b, n, md, &len, EVP_sha256(), NULL), 1);
    assert_int_equal(len, 32);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The capture failed with kind and errnum, its message containing what. */
static void refused(const char *path, uint64_t max_bytes, enum gbx_err_kind kind, int errnum,
                    const char *what)
{
    struct gbx_capture_out out;
    struct gbx_err *err = NULL;
    assert_int_equal(run(path, max_bytes, &out, &err), -1);
    assert_non_null(err);
    if (err->kind != kind || err->errnum != errnum || strstr(err->msg, what) == NULL)
        fail_msg("%s: got kind %d errnum %d '%s', want kind %d errnum %d '%s'", path, err->kind,
                 err->errnum, err->msg, kind, errnum, what);
    gbx_err_free(err);
}

static void file_is_its_bytes(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    put("hello.txt", "hello world", 0644, HOST_UID);
    struct gbx_capture_out out;
    struct gbx_err *err = NULL;
    assert_int_equal(run("/hello.txt", 1024, &out, &err), 0);
    assert_null(err);
    assert_string_equal(out.kind, "file");
    assert_int_equal(out.size, 11);
    assert_int_equal(out.skipped, 0);
    assert_string_equal(out.sha256,
                        "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9");
    size_t n = 0;
    gbx_autofree char *b = blob(&n);
    assert_int_equal(n, 11);
    assert_memory_equal(b, "hello world", 11);

    /* empty: the empty string's hash; a file of the sandbox's user the sandbox's root reads */
    put("empty", "", 0600, HOST_UID + 1000);
    assert_int_equal(run("/empty", 1024, &out, &err), 0);
    assert_int_equal(out.size, 0);
    assert_string_equal(out.sha256,
                        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* One entry of the tar as read back. */
struct entry {
    char path[128];
    mode_t type;
    int64_t uid, gid, size;
    char link[128];
    char data[64];
};

static size_t read_tar(struct entry *v, size_t max)
{
    struct archive *a = archive_read_new();
    assert_non_null(a);
    assert_int_equal(archive_read_support_format_tar(a), ARCHIVE_OK);
    assert_int_equal(archive_read_open_filename(a, blobpath, 10240), ARCHIVE_OK);
    struct archive_entry *e;
    size_t n = 0;
    int r;
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        assert_true(n < max);
        struct entry *x = &v[n++];
        memset(x, 0, sizeof(*x));
        snprintf(x->path, sizeof(x->path), "%s", archive_entry_pathname(e));
        x->type = archive_entry_filetype(e);
        x->uid = archive_entry_uid(e);
        x->gid = archive_entry_gid(e);
        x->size = archive_entry_size(e);
        if (archive_entry_symlink(e))
            snprintf(x->link, sizeof(x->link), "%s", archive_entry_symlink(e));
        la_ssize_t got = archive_read_data(a, x->data, sizeof(x->data) - 1);
        assert_true(got >= 0);
    }
    assert_int_equal(r, ARCHIVE_EOF);
    archive_read_free(a);
    return n;
}

static void directory_is_a_tar(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    dir("work", HOST_UID);
    put("work/b.txt", "bee\n", 0644, HOST_UID);
    put("work/a.txt", "ay\n", 0644, HOST_UID);
    dir("work/sub", HOST_UID + 1000);
    put("work/sub/c.txt", "sea\n", 0600, HOST_UID + 1000); /* the sandbox's user's own */
    put("work/stranger", "x", 0644, OUTSIDE_UID);          /* an owner of no sandbox */
    symlink_in("work/passwd", "/etc/passwd");              /* stored, never followed */
    symlink_in("work/up", "../../..");
    fifo_in("work/fifo");
    socket_in("work/sock");
    gbx_autofree char *dev = gbx_asprintf("%s/work/null", root);
    int devs = mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0; /* where the kernel lets us */

    struct gbx_capture_out out;
    struct gbx_err *err = NULL;
    assert_int_equal(run("/work", 1u << 20, &out, &err), 0);
    assert_null(err);
    assert_string_equal(out.kind, "dir");
    assert_int_equal(out.skipped, 2 + devs); /* the fifo, the socket (and the device) */

    /* the hash and size are the blob's */
    size_t n = 0;
    gbx_autofree char *b = blob(&n);
    assert_int_equal(out.size, n);
    assert_int_equal(n % 512, 0);
    char sha[65];
    sha256_hex(b, n, sha);
    assert_string_equal(out.sha256, sha);

    struct entry v[16];
    size_t ne = read_tar(v, 16);
    /* sorted by name within each directory, a directory's entries right after it */
    const char *want[] = {"a.txt", "b.txt", "passwd", "stranger", "sub/", "sub/c.txt", "up"};
    assert_int_equal(ne, GBX_ARRAY_SIZE(want));
    for (size_t i = 0; i < ne; i++)
        assert_string_equal(v[i].path, want[i]);
    assert_int_equal(v[0].type, AE_IFREG);
    assert_int_equal(v[0].size, 3);
    assert_string_equal(v[0].data, "ay\n");
    assert_int_equal(v[0].uid, 0); /* the sandbox's root */
    assert_int_equal(v[0].gid, 0);
    assert_string_equal(v[1].data, "bee\n");
    assert_int_equal(v[2].type, AE_IFLNK);
    assert_string_equal(v[2].link, "/etc/passwd");
    assert_int_equal(v[2].size, 0);
    assert_string_equal(v[2].data, "");
    assert_int_equal(v[3].uid, 65534); /* outside the sandbox's uids: nobody */
    assert_int_equal(v[3].gid, 65534);
    assert_string_equal(v[3].data, "x");
    assert_int_equal(v[4].type, AE_IFDIR);
    assert_int_equal(v[4].uid, 1000);
    assert_int_equal(v[5].type, AE_IFREG);
    assert_int_equal(v[5].uid, 1000);
    assert_string_equal(v[5].data, "sea\n");
    assert_int_equal(v[6].type, AE_IFLNK);
    assert_string_equal(v[6].link, "../../..");

    /* the same tree again: the same bytes */
    char again[65];
    memcpy(again, out.sha256, sizeof(again));
    assert_int_equal(run("/work", 1u << 20, &out, &err), 0);
    assert_string_equal(out.sha256, again);
}

static void size_limit(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    char hundred[101];
    memset(hundred, 'x', 100);
    hundred[100] = '\0';
    put("f", hundred, 0644, HOST_UID);
    struct gbx_capture_out out;
    struct gbx_err *err = NULL;
    assert_int_equal(run("/f", 100, &out, &err), 0); /* exactly the limit */
    assert_int_equal(out.size, 100);
    refused("/f", 99, GBX_ERR_LIMIT, EFBIG, "'/f' is 100 bytes, larger than the limit of 99 bytes");

    /* a directory: the tar's bytes count (here 3 blocks of headers and data plus the end) */
    dir("d", HOST_UID);
    put("d/f", hundred, 0644, HOST_UID);
    assert_int_equal(run("/d", 1u << 20, &out, &err), 0);
    uint64_t whole = out.size;
    assert_true(whole > 100);
    assert_int_equal(run("/d", whole, &out, &err), 0);
    refused("/d", whole - 1, GBX_ERR_LIMIT, EFBIG, "'/d' is larger than the limit of");
    refused("/d", 1000, GBX_ERR_LIMIT, EFBIG, "larger than the limit of 1000 bytes");
}

static void refusals(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    refused("/nothing", 1024, GBX_ERR_NOT_FOUND, ENOENT,
            "publishing '/nothing': no such file or directory in the sandbox");

    fifo_in("fifo");
    refused("/fifo", 1024, GBX_ERR_INVALID, 0, "'/fifo' is neither a regular file nor a directory");
    socket_in("sock");
    refused("/sock", 1024, GBX_ERR_INVALID, 0, "neither a regular file nor a directory");
    gbx_autofree char *dev = gbx_asprintf("%s/null", root);
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0)
        refused("/null", 1024, GBX_ERR_INVALID, 0, "neither a regular file nor a directory");

    /* symlinks out of the tree resolve inside it: the host's file is never read */
    gbx_autofree char *outside = gbx_asprintf("%s/outside", top);
    assert_int_equal(mkdir(outside, 0755), 0);
    gbx_autofree char *secret = gbx_asprintf("%s/secret", outside);
    int fd = open(secret, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "host", 4), 4);
    close(fd);
    symlink_in("rel", "../outside/secret");
    symlink_in("abs", secret);
    refused("/rel", 1024, GBX_ERR_NOT_FOUND, ENOENT, "publishing '/rel': no such file");
    refused("/abs", 1024, GBX_ERR_NOT_FOUND, ENOENT, "publishing '/abs': no such file");
    refused("/../outside/secret", 1024, GBX_ERR_NOT_FOUND, ENOENT, "no such file");
    dir("outside", HOST_UID);
    put("outside/secret", "inside", 0644, HOST_UID);
    struct gbx_capture_out out;
    struct gbx_err *err = NULL;
    assert_int_equal(run("/rel", 1024, &out, &err), 0);
    size_t n = 0;
    gbx_autofree char *b = blob(&n);
    assert_int_equal(n, 6);
    assert_memory_equal(b, "inside", 6);

    /* what the sandbox's root may not read, at the top and beneath a directory */
    put("private", "no", 0600, OUTSIDE_UID);
    refused("/private", 1024, GBX_ERR_PERMISSION, EACCES,
            "publishing '/private': permission denied (read as the sandbox's root)");
    dir("d", HOST_UID);
    put("d/ok", "ok", 0644, HOST_UID);
    put("d/private", "no", 0600, OUTSIDE_UID);
    refused("/d", 1024, GBX_ERR_PERMISSION, EACCES, "reading 'private': permission denied");

    /* too deep: GBX_CAPTURE_MAX_DEPTH directories below the captured one are the most */
    char rel[4 * (GBX_CAPTURE_MAX_DEPTH + 4)] = "deep";
    dir(rel, HOST_UID);
    for (int i = 0; i <= GBX_CAPTURE_MAX_DEPTH; i++) {
        strcat(rel, "/d");
        dir(rel, HOST_UID);
    }
    refused("/deep", 1u << 24, GBX_ERR_INVALID, 0, "'/deep' nests deeper than 128 directories");
    gbx_autofree char *last = gbx_asprintf("%s/%s", root, rel);
    assert_int_equal(rmdir(last), 0);
    assert_int_equal(run("/deep", 1u << 24, &out, &err), 0);
    assert_null(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(file_is_its_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(directory_is_a_tar, setup, teardown),
        cmocka_unit_test_setup_teardown(size_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
