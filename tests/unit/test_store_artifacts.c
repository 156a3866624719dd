/* SPDX-License-Identifier: MIT */
/* Artifact rows: insert and get, list filters and the (created_ns, id) cursor, delete saying
 * whether the blob is still named, the retention walk by age, totals, and the session lookup. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "store/artifacts.h"
#include "store/store.h"

static char dir[64];
static struct gbx_store *st;

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/gbx-store-art-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    gbx_autofree char *path = gbx_asprintf("%s/glovebox.db", dir);
    struct gbx_err *err = NULL;
    if (gbx_store_open(path, &st, &err) < 0) {
        fprintf(stderr, "open: %s\n", err->msg);
        gbx_err_free(err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    gbx_store_close(st);
    st = NULL;
    return gbx_rm_rf(dir) == 0 ? 0 : -1;
}

static void put(const char *id, const char *sha, const char *name, const char *owner,
                const char *session, const char *sandbox, int64_t size, int64_t ns)
{
    struct gbx_store_artifact a = {
        .id = id,
        .sha256 = sha,
        .name = name,
        .kind = "file",
        .size_bytes = size,
        .owner = owner,
        .session = session,
        .sandbox = sandbox,
        .metadata = "{\"k\":\"v\"}",
        .created_ns = ns,
    };
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_artifacts_insert(st, &a, &err), 0);
}

/* Collects the ids a walk gives, comma-separated. */
struct ids {
    char buf[512];
    int stop_after; /* 0: never */
    int n;
    int64_t bytes;
};

static int collect(void *arg, const struct gbx_store_artifact *a)
{
    struct ids *c = arg;
    size_t len = strlen(c->buf);
    snprintf(c->buf + len, sizeof(c->buf) - len, "%s%s", len ? "," : "", a->id);
    c->bytes += a->size_bytes;
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

static const char *list(const struct gbx_store_artifact_filter *f, struct ids *c)
{
    memset(c, 0, sizeof(*c));
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_artifacts_list(st, f, collect, c, &err), 0);
    return c->buf;
}

static void fill(void)
{
    put("art-1", SHA_A, "report", "", "ses-1", "sb-1", 10, 100);
    put("art-2", SHA_A, "report", "team", NULL, "sb-2", 10, 200);
    put("art-3", SHA_B, "logs", "", "ses-1", "sb-1", 30, 200); /* same time as art-2 */
    put("art-4", SHA_B, "logs", "", NULL, NULL, 30, 300);
}

/* A row copied out of its callback. */
struct row {
    char *sha256, *name, *metadata, *session;
    int64_t size_bytes, created_ns;
};

static int copy_one(void *arg, const struct gbx_store_artifact *a)
{
    struct row *out = arg;
    out->sha256 = gbx_xstrdup(a->sha256);
    out->name = gbx_xstrdup(a->name);
    out->metadata = a->metadata ? gbx_xstrdup(a->metadata) : NULL;
    out->session = a->session ? gbx_xstrdup(a->session) : NULL;
    out->size_bytes = a->size_bytes;
    out->created_ns = a->created_ns;
    return 1;
}

static void row_free(struct row *r)
{
    free(r->sha256);
    free(r->name);
    free(r->metadata);
    free(r->session);
    memset(r, 0, sizeof(*r));
}

static void insert_and_get(void **state)
{
    fill();
    struct row a = {0};
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_artifacts_get(st, "art-1", copy_one, &a, &err), 1);
    assert_string_equal(a.sha256, SHA_A);
    assert_string_equal(a.name, "report");
    assert_string_equal(a.metadata, "{\"k\":\"v\"}");
    assert_string_equal(a.session, "ses-1");
    assert_int_equal(a.size_bytes, 10);
    assert_int_equal(a.created_ns, 100);
    row_free(&a);
    assert_int_equal(gbx_store_artifacts_get(st, "art-4", copy_one, &a, &err), 1);
    assert_null(a.session);
    row_free(&a);
    assert_int_equal(gbx_store_artifacts_get(st, "art-none", copy_one, &a, &err), 0);
    /* a taken id is a conflict */
    struct gbx_store_artifact dup = {.id = "art-1", .sha256 = SHA_B, .name = "x", .created_ns = 1};
    assert_int_equal(gbx_store_artifacts_insert(st, &dup, &err), -1);
    assert_int_equal(err->kind, GBX_ERR_CONFLICT);
    gbx_err_free(err);
}

static void list_filters_and_pages(void **state)
{
    fill();
    struct ids c;
    struct gbx_store_artifact_filter all = {0};
    assert_string_equal(list(&all, &c), "art-1,art-2,art-3,art-4");
    struct gbx_store_artifact_filter own = {.owner = ""};
    assert_string_equal(list(&own, &c), "art-1,art-3,art-4");
    struct gbx_store_artifact_filter team = {.owner = "team"};
    assert_string_equal(list(&team, &c), "art-2");
    struct gbx_store_artifact_filter ses = {.session = "ses-1"};
    assert_string_equal(list(&ses, &c), "art-1,art-3");
    struct gbx_store_artifact_filter sb = {.sandbox = "sb-1", .name = "logs"};
    assert_string_equal(list(&sb, &c), "art-3");
    struct gbx_store_artifact_filter none = {.name = "nothing"};
    assert_string_equal(list(&none, &c), "");
    /* pages of 2, the cursor in the middle of two rows created at the same time */
    struct gbx_store_artifact_filter p1 = {.limit = 2};
    assert_string_equal(list(&p1, &c), "art-1,art-2");
    struct gbx_store_artifact_filter p2 = {.limit = 2, .after_id = "art-2", .after_ns = 200};
    assert_string_equal(list(&p2, &c), "art-3,art-4");
    struct gbx_store_artifact_filter p3 = {.limit = 2, .after_id = "art-4", .after_ns = 300};
    assert_string_equal(list(&p3, &c), "");
    /* newest first, and its pages: the cursor goes older, past a tie of created_ns */
    struct gbx_store_artifact_filter d1 = {.limit = 2, .newest_first = 1};
    assert_string_equal(list(&d1, &c), "art-4,art-3");
    struct gbx_store_artifact_filter d2 = {
        .limit = 2, .newest_first = 1, .after_id = "art-3", .after_ns = 200};
    assert_string_equal(list(&d2, &c), "art-2,art-1");
    struct gbx_store_artifact_filter dn = {.name = "report", .newest_first = 1, .limit = 1};
    assert_string_equal(list(&dn, &c), "art-2");
    struct gbx_store_artifact_filter dno = {
        .name = "report", .owner = "", .newest_first = 1, .limit = 1};
    assert_string_equal(list(&dno, &c), "art-1"); /* the newest of this owner's */
    /* the callback stops the walk */
    memset(&c, 0, sizeof(c));
    c.stop_after = 1;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_artifacts_list(st, &all, collect, &c, &err), 0);
    assert_string_equal(c.buf, "art-1");
}

static void delete_says_whether_blob_is_named(void **state)
{
    fill();
    char sha[65];
    bool referenced = false;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_artifacts_refs(st, SHA_A), 2);
    assert_int_equal(gbx_store_artifacts_delete(st, "art-1", sha, &referenced, &err), 1);
    assert_string_equal(sha, SHA_A);
    assert_true(referenced);
    assert_int_equal(gbx_store_artifacts_delete(st, "art-1", sha, &referenced, &err), 0);
    assert_int_equal(gbx_store_artifacts_delete(st, "art-2", sha, &referenced, &err), 1);
    assert_false(referenced);
    assert_int_equal(gbx_store_artifacts_refs(st, SHA_A), 0);
    assert_int_equal(gbx_store_artifacts_refs(st, SHA_B), 2);
    assert_int_equal(gbx_store_artifacts_delete(st, "art-3", NULL, NULL, &err), 1);
    assert_int_equal(gbx_store_artifacts_refs(st, SHA_B), 1);
    assert_false(gbx_store_in_transaction(st));
}

static void retention_walk_and_totals(void **state)
{
    fill();
    int64_t n = 0, bytes = 0;
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_artifacts_totals(st, NULL, &n, &bytes, &err), 0);
    assert_int_equal(n, 4);
    assert_int_equal(bytes, 80);
    assert_int_equal(gbx_store_artifacts_totals(st, "team", &n, &bytes, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(bytes, 10);
    /* oldest first, every owner */
    struct ids c = {0};
    assert_int_equal(gbx_store_artifacts_by_age(st, 0, 0, collect, &c, &err), 0);
    assert_string_equal(c.buf, "art-1,art-2,art-3,art-4");
    /* a count policy keeping 2 of 4 drops the 2 oldest */
    memset(&c, 0, sizeof(c));
    assert_int_equal(gbx_store_artifacts_by_age(st, 0, 2, collect, &c, &err), 0);
    assert_string_equal(c.buf, "art-1,art-2");
    assert_int_equal(c.bytes, 20);
    /* an age policy: rows from created_ns 200 on */
    memset(&c, 0, sizeof(c));
    assert_int_equal(gbx_store_artifacts_by_age(st, 200, 0, collect, &c, &err), 0);
    assert_string_equal(c.buf, "art-2,art-3,art-4");
    assert_int_equal(gbx_store_artifacts_totals(st, "nobody", &n, &bytes, &err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(bytes, 0);
}

static void session_owner(void **state)
{
    assert_int_equal(gbx_store_artifacts_session_owner(st, "ses-x", (char[8]){0}, 8), 0);
    struct gbx_store_session ses = {.id = "ses-x", .owner = "team", .workdir = "/workspace"};
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_session_put(st, &ses, &err), 0);
    char owner[32];
    assert_int_equal(gbx_store_artifacts_session_owner(st, "ses-x", owner, sizeof(owner)), 1);
    assert_string_equal(owner, "team");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(insert_and_get, setup, teardown),
        cmocka_unit_test_setup_teardown(list_filters_and_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(delete_says_whether_blob_is_named, setup, teardown),
        cmocka_unit_test_setup_teardown(retention_walk_and_totals, setup, teardown),
        cmocka_unit_test_setup_teardown(session_owner, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
