/* SPDX-License-Identifier: MIT */
/* Unit tests for src/sandbox/fscred.c: a thread that takes a sandbox's root's file-system
 * credentials sees the kernel refuse what the sandbox could not read, reads its sandbox's
 * own files as their owner, not files of uids outside the sandbox's range, keeps no
 * capability but the two that change ids back, and is root again after leaving; the other
 * threads keep the daemon's credentials throughout. Needs root (CAP_SETUID and friends). */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "sandbox/fscred.h"

#define HOST_UID 1500000000u

static char dir[64];
static pthread_barrier_t entered, checked;

static void make_file(const char *name, uid_t uid, gid_t gid)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
    assert_int_equal(chown(p, uid, gid), 0);
}

static int open_in(const char *name)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", dir, name);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    return fd >= 0 ? 0 : -errno;
}

static int as_owner(const char *name, struct gbx_fsids *used)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1000 - errno;
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        int e = errno;
        close(dfd);
        return -1000 - e;
    }
    int fd = gbx_fscred_open_as_owner(HOST_UID, dfd, name, O_RDONLY, &st, used);
    int e = errno;
    close(dfd);
    if (fd >= 0)
        close(fd);
    return fd >= 0 ? 0 : -e;
}

static void effective_caps(uint32_t out[2])
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2] = {{0}};
    if (syscall(SYS_capget, &hdr, d) < 0)
        d[0].effective = d[1].effective = UINT32_MAX;
    out[0] = d[0].effective;
    out[1] = d[1].effective;
}

/* The thread that acts as the sandbox's root. cmocka's assertions jump, and must not from
 * another thread: it records its first failed check for the test's thread to report. */
static int fail_line;
static const char *fail_what;
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c) && fail_line == 0) {                                                              \
            fail_line = __LINE__;                                                                  \
            fail_what = #c;                                                                        \
        }                                                                                          \
    } while (0)

static void *sandbox_root(void *arg)
{
    (void)arg;
    uint32_t before[2], during[2], after[2];
    effective_caps(before);
    struct gbx_fscred c;
    CHECK(gbx_fscred_enter(&c, HOST_UID) == 0);
    struct gbx_fsids now = gbx_fsids_get();
    CHECK(now.uid == HOST_UID);
    CHECK(now.gid == HOST_UID);
    CHECK(geteuid() == HOST_UID);
    CHECK(getgroups(0, NULL) == 0);
    effective_caps(during);
    CHECK(during[0] == ((1u << CAP_SETUID) | (1u << CAP_SETGID)));
    CHECK(during[1] == 0);

    /* the host's root's file: refused, and not opened as its owner (uid 0 is not the
     * sandbox's) */
    CHECK(open_in("host-root") == -EACCES);
    struct gbx_fsids used;
    CHECK(as_owner("host-root", &used) == -EACCES);
    /* a file of the sandbox's uid 1000: opened as its owner, and the ids are back after */
    CHECK(open_in("sandbox-user") == -EACCES);
    CHECK(as_owner("sandbox-user", &used) == 0);
    CHECK(used.uid == HOST_UID + 1000);
    CHECK(used.gid == HOST_UID + 1000);
    now = gbx_fsids_get();
    CHECK(now.uid == HOST_UID);
    /* a group outside the range: the owner's uid with the sandbox root's gid */
    CHECK(as_owner("sandbox-user-host-group", &used) == 0);
    CHECK(used.uid == HOST_UID + 1001);
    CHECK(used.gid == HOST_UID);
    /* one past the sandbox's range: another sandbox's file, refused */
    CHECK(as_owner("next-sandbox", &used) == -EACCES);
    /* its own root's file opens with the ids it has */
    CHECK(as_owner("sandbox-root", &used) == 0);
    CHECK(used.uid == HOST_UID);

    pthread_barrier_wait(&entered); /* the main thread checks its own credentials */
    pthread_barrier_wait(&checked);

    gbx_fscred_leave(&c);
    now = gbx_fsids_get();
    CHECK(now.uid == 0);
    CHECK(now.gid == 0);
    CHECK(geteuid() == 0);
    effective_caps(after);
    CHECK(after[0] == before[0]);
    CHECK(after[1] == before[1]);
    CHECK(open_in("host-root") == 0);
    return NULL;
}

static void test_thread_credentials(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    snprintf(dir, sizeof(dir), "/tmp/gbx-fscred-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    make_file("host-root", 0, 0);
    make_file("sandbox-root", HOST_UID, HOST_UID);
    make_file("sandbox-user", HOST_UID + 1000, HOST_UID + 1000);
    make_file("sandbox-user-host-group", HOST_UID + 1001, 0);
    make_file("next-sandbox", HOST_UID + GBX_FSCRED_RANGE, HOST_UID + GBX_FSCRED_RANGE);
    int ngroups = getgroups(0, NULL);

    pthread_barrier_init(&entered, NULL, 2);
    pthread_barrier_init(&checked, NULL, 2);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sandbox_root, NULL), 0);
    pthread_barrier_wait(&entered);
    /* this thread is still the daemon's root while the other acts as the sandbox's */
    struct gbx_fsids mine = gbx_fsids_get();
    int uid_ok = mine.uid == 0 && geteuid() == 0 && getgroups(0, NULL) == ngroups;
    int read_ok = open_in("host-root") == 0;
    pthread_barrier_wait(&checked);
    assert_int_equal(pthread_join(t, NULL), 0);
    if (fail_line != 0)
        fail_msg("line %d: %s", fail_line, fail_what);
    assert_true(uid_ok);
    assert_true(read_ok);
    pthread_barrier_destroy(&entered);
    pthread_barrier_destroy(&checked);
    assert_int_equal(gbx_rm_rf(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
