/* SPDX-License-Identifier: MIT */
/* uid slots within one process: every create gets its own range, even though the byte lock
 * of the process's own file description never conflicts with itself; reserved slots (a
 * hibernated sandbox's) are skipped by creates and taken over by the restore. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <sys/stat.h>

#include "base/fileutil.h"
#include "sandbox/ns.h"

static struct gbx_runtime rt;
static char dir[64];

static int setup(void **state)
{
    (void)state;
    if (geteuid() != 0)
        return 0;
    snprintf(dir, sizeof(dir), "/tmp/gbx-slots-XXXXXX");
    if (mkdtemp(dir) == NULL || chmod(dir, 0711) < 0) /* sandboxes must reach the runtime dir */
        return -1;
    char st[96], run[96];
    snprintf(st, sizeof(st), "%s/state", dir);
    snprintf(run, sizeof(run), "%s/run", dir);
    /* a lock file of its own: this test takes every slot, which must not starve the host's
     * sandboxes (other tests, daemons) that claim theirs in the host-wide file */
    char lock[96];
    snprintf(lock, sizeof(lock), "%s/uids.lock", dir);
    setenv("GLOVEBOX_UID_LOCK", lock, 1);
    struct gbx_runtime_opts o = {.state_dir = st, .runtime_dir = run};
    struct gbx_err *err = NULL;
    if (gbx_runtime_init(&rt, &o, &err) < 0) {
        fprintf(stderr, "%s\n", err->msg);
        gbx_err_free(err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (geteuid() != 0)
        return 0;
    gbx_runtime_release(&rt);
    (void)!gbx_rm_rf(dir);
    return 0;
}

static void every_create_its_own_range(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    uint8_t *seen = calloc(rt.uid_slots, 1);
    for (uint32_t i = 0; i < rt.uid_slots; i++) {
        uint32_t s = UINT32_MAX;
        assert_int_equal(gbx_ns_slot_acquire(&rt, &s), 0);
        assert_true(s < rt.uid_slots);
        assert_int_equal(seen[s], 0); /* never handed out twice */
        seen[s] = 1;
    }
    uint32_t s;
    assert_int_equal(gbx_ns_slot_acquire(&rt, &s), -EUSERS);
    /* a held slot cannot be taken by adoption either */
    assert_int_equal(gbx_ns_slot_lock(&rt, 7), -EBUSY);
    gbx_ns_slot_release(&rt, 7);
    assert_int_equal(gbx_ns_slot_acquire(&rt, &s), 0);
    assert_int_equal(s, 7);
    for (uint32_t i = 0; i < rt.uid_slots; i++)
        gbx_ns_slot_release(&rt, i);
    free(seen);
}

static void reserved_for_a_restore(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    assert_int_equal(gbx_ns_slot_reserve(&rt, 5), 0);
    assert_int_equal(gbx_ns_slot_reserve(&rt, 5), -EBUSY);
    /* creates skip it: take every other slot, 5 stays out */
    uint32_t s;
    for (uint32_t i = 0; i + 1 < rt.uid_slots; i++) {
        assert_int_equal(gbx_ns_slot_acquire(&rt, &s), 0);
        assert_int_not_equal(s, 5);
    }
    assert_int_equal(gbx_ns_slot_acquire(&rt, &s), -EUSERS);
    /* the restore takes it over; then it is in use like any other */
    assert_int_equal(gbx_ns_slot_lock(&rt, 5), 0);
    assert_int_equal(gbx_ns_slot_lock(&rt, 5), -EBUSY);
    for (uint32_t i = 0; i < rt.uid_slots; i++)
        gbx_ns_slot_release(&rt, i);
    assert_int_equal(gbx_ns_slot_acquire(&rt, &s), 0);
    gbx_ns_slot_release(&rt, s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_create_its_own_range),
        cmocka_unit_test(reserved_for_a_restore),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
