/* SPDX-License-Identifier: MIT */
/* The store: schema migrations, WAL, and the hash-chained audit log — which must notice any
 * record edited, inserted or deleted behind its back (tampering done here with raw SQL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "store/store.h"

static char dir[64];
static char *path;

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/gbx-store-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    path = gbx_asprintf("%s/glovebox.db", dir);
    return 0;
}

static int teardown(void **state)
{
    free(path);
    return gbx_rm_rf(dir) == 0 ? 0 : -1;
}

static struct gbx_store *open_fresh(void)
{
    (void)!unlink(path);
    gbx_autofree char *wal = gbx_asprintf("%s-wal", path);
    gbx_autofree char *shm = gbx_asprintf("%s-shm", path);
    (void)!unlink(wal);
    (void)!unlink(shm);
    struct gbx_store *s = NULL;
    struct gbx_err *err = NULL;
    if (gbx_store_open(path, &s, &err) < 0) {
        fprintf(stderr, "open: %s\n", err->msg);
        gbx_err_free(err);
        fail();
    }
    return s;
}

/* Run raw SQL on the database file, as someone with write access to it would. */
static void tamper(const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "tamper: %s\n", msg);
        fail();
    }
    sqlite3_close(db);
}

static void append_n(struct gbx_store *s, int n)
{
    for (int i = 0; i < n; i++) {
        char detail[64];
        snprintf(detail, sizeof(detail), "{\"i\":%d}", i);
        struct gbx_audit_entry e = {
            .actor = "admin", .kind = "exec.start", .sandbox = "sb-1", .detail = detail};
        int64_t seq = 0;
        assert_int_equal(gbx_store_audit_append(s, &e, &seq, NULL), 0);
    }
}

static void verify(struct gbx_store *s, struct gbx_audit_report *rep)
{
    assert_int_equal(gbx_store_audit_verify(s, rep, NULL), 0);
}

static void schema_and_wal(void **state)
{
    struct gbx_store *s = open_fresh();
    assert_int_equal(gbx_store_schema_version(s), gbx_store_schema_latest());
    gbx_store_close(s);
    /* reopening is idempotent */
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_open(path, &s, &err), 0);
    assert_int_equal(gbx_store_schema_version(s), gbx_store_schema_latest());
    gbx_store_close(s);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void newer_schema_is_refused(void **state)
{
    struct gbx_store *s = open_fresh();
    gbx_store_close(s);
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", gbx_store_schema_latest() + 1);
    tamper(sql);
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_open(path, &s, &err), -1);
    assert_int_equal(err->kind, GBX_ERR_CONFLICT);
    assert_non_null(strstr(err->msg, "newer than this glovebox"));
    gbx_err_free(err);
}

static void chain_intact(void **state)
{
    struct gbx_store *s = open_fresh();
    struct gbx_audit_report rep;
    verify(s, &rep); /* empty log */
    assert_int_equal(rep.rows, 0);
    assert_int_equal(rep.bad_seq, 0);
    append_n(s, 50);
    struct gbx_audit_entry odd = {
        .actor = NULL, .kind = "sandbox.create", .sandbox = NULL, .detail = NULL};
    int64_t seq = 0;
    assert_int_equal(gbx_store_audit_append(s, &odd, &seq, NULL), 0);
    assert_int_equal(seq, 51);
    verify(s, &rep);
    assert_int_equal(rep.rows, 51);
    assert_int_equal(rep.bad_seq, 0);
    gbx_store_close(s);
    /* and across a reopen */
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_open(path, &s, &err), 0);
    append_n(s, 1);
    verify(s, &rep);
    assert_int_equal(rep.rows, 52);
    assert_int_equal(rep.bad_seq, 0);
    gbx_store_close(s);
}

static void edited_record_is_found(void **state)
{
    struct gbx_store *s = open_fresh();
    append_n(s, 20);
    gbx_store_close(s);
    tamper("UPDATE audit SET detail = '{\"i\":999}' WHERE seq = 7");
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_open(path, &s, &err), 0);
    struct gbx_audit_report rep;
    verify(s, &rep);
    assert_int_equal(rep.bad_seq, 7);
    assert_non_null(strstr(rep.reason, "changed"));
    gbx_store_close(s);
}

static void replaced_hash_is_found(void **state)
{
    /* a record's stored hash overwritten: its content no longer matches it, and the next
     * record's link to it breaks too */
    struct gbx_store *s = open_fresh();
    append_n(s, 10);
    gbx_store_close(s);
    tamper("UPDATE audit SET hash = 'ff' || substr(hash, 3) WHERE seq = 4");
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_open(path, &s, &err), 0);
    struct gbx_audit_report rep;
    verify(s, &rep);
    assert_int_equal(rep.bad_seq, 4);
    gbx_store_close(s);
    /* copying record 4's hash into record 5's link instead: record 5 is the one found */
    s = open_fresh();
    append_n(s, 10);
    gbx_store_close(s);
    tamper("UPDATE audit SET prev_hash = 'ab' || substr(prev_hash, 3) WHERE seq = 5");
    assert_int_equal(gbx_store_open(path, &s, &err), 0);
    verify(s, &rep);
    assert_int_equal(rep.bad_seq, 5);
    assert_non_null(strstr(rep.reason, "does not follow"));
    gbx_store_close(s);
}

static void deleted_records_are_found(void **state)
{
    struct gbx_store *s = open_fresh();
    append_n(s, 20);
    gbx_store_close(s);
    tamper("DELETE FROM audit WHERE seq = 12");
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_open(path, &s, &err), 0);
    struct gbx_audit_report rep;
    verify(s, &rep);
    assert_int_equal(rep.bad_seq, 12);
    assert_non_null(strstr(rep.reason, "missing"));
    gbx_store_close(s);

    /* the newest records, too */
    s = open_fresh();
    append_n(s, 20);
    gbx_store_close(s);
    tamper("DELETE FROM audit WHERE seq >= 18");
    assert_int_equal(gbx_store_open(path, &s, &err), 0);
    verify(s, &rep);
    assert_int_not_equal(rep.bad_seq, 0);
    assert_non_null(strstr(rep.reason, "removed"));
    gbx_store_close(s);

    /* and an inserted one */
    s = open_fresh();
    append_n(s, 5);
    gbx_store_close(s);
    tamper("INSERT INTO audit SELECT 6, ts_ns, actor, kind, sandbox, detail, hash, hash "
           "FROM audit WHERE seq = 5");
    assert_int_equal(gbx_store_open(path, &s, &err), 0);
    verify(s, &rep);
    assert_int_equal(rep.bad_seq, 6);
    gbx_store_close(s);
}

/* ---- session logs ------------------------------------------------------------------------ */

static int count_events(void *arg, const struct gbx_store_event *ev)
{
    int *n = arg;
    (*n)++;
    assert_int_equal(ev->seq, *n);
    return 0;
}

static void session_log_chains_and_detects(void **state)
{
    struct gbx_store *s = open_fresh();
    struct gbx_err *err = NULL;
    struct gbx_store_session ses = {.id = "ses-000000000001",
                                    .owner = "",
                                    .spec = "{}",
                                    .workdir = "/workspace",
                                    .created_ns = 1};
    assert_int_equal(gbx_store_session_put(s, &ses, &err), 0);
    int64_t seq = 0;
    assert_int_equal(
        gbx_store_session_append(s, ses.id, "tool.call", "t1", "{\"n\":1}", &seq, &err), 0);
    assert_int_equal(seq, 1);
    assert_int_equal(
        gbx_store_session_append(s, ses.id, "tool.result", "t1", "{\"r\":1}", &seq, &err), 0);
    assert_int_equal(seq, 2);
    /* one result per tool_use_id */
    assert_int_equal(
        gbx_store_session_append(s, ses.id, "tool.result", "t1", "{\"r\":2}", &seq, &err), -1);
    assert_int_equal(err->kind, GBX_ERR_CONFLICT);
    gbx_err_free(err);
    err = NULL;
    char *r = gbx_store_session_result(s, ses.id, "t1");
    assert_string_equal(r, "{\"r\":1}");
    free(r);
    assert_null(gbx_store_session_result(s, ses.id, "t2"));
    r = gbx_store_session_call(s, ses.id, "t1");
    assert_string_equal(r, "{\"n\":1}");
    free(r);
    assert_null(gbx_store_session_call(s, ses.id, "t2"));
    int n = 0;
    assert_int_equal(gbx_store_session_events(s, ses.id, 0, 100, count_events, &n, &err), 0);
    assert_int_equal(n, 2);
    struct gbx_audit_report rep;
    assert_int_equal(gbx_store_session_verify(s, ses.id, &rep, &err), 0);
    assert_int_equal(rep.bad_seq, 0);
    assert_int_equal(rep.rows, 2);
    gbx_store_close(s);
    tamper("UPDATE session_events SET data = '{\"r\":9}' WHERE seq = 2");
    struct gbx_store *s2 = NULL;
    assert_int_equal(gbx_store_open(path, &s2, &err), 0);
    assert_int_equal(gbx_store_session_verify(s2, ses.id, &rep, &err), 0);
    assert_int_equal(rep.bad_seq, 2);
    /* an unknown session */
    assert_int_equal(gbx_store_session_append(s2, "ses-ffffffffffff", "x", NULL, "{}", NULL, &err),
                     -1);
    assert_int_equal(err->kind, GBX_ERR_NOT_FOUND);
    gbx_err_free(err);
    err = NULL;
    assert_int_equal(gbx_store_session_delete(s2, ses.id, &err), 0);
    n = 0;
    assert_int_equal(gbx_store_session_events(s2, ses.id, 0, 100, count_events, &n, &err), 0);
    assert_int_equal(n, 0);
    gbx_store_close(s2);
}

/* ---- gbx_store_audit_find: each filter, the owner's view, paging ---- */

struct seqs {
    char buf[128];
};

static int collect_seq(void *arg, const struct gbx_audit_row *r)
{
    struct seqs *c = arg;
    size_t n = strlen(c->buf);
    snprintf(c->buf + n, sizeof(c->buf) - n, "%s%lld", n ? "," : "", (long long)r->seq);
    assert_non_null(r->hash);
    assert_int_equal(strlen(r->hash), 64);
    return 0;
}

/* The seqs f finds, as "2,4,5". */
static const char *find(struct gbx_store *s, struct gbx_audit_filter f, struct seqs *c)
{
    c->buf[0] = '\0';
    if (f.limit == 0)
        f.limit = 100;
    struct gbx_err *err = NULL;
    if (gbx_store_audit_find(s, &f, collect_seq, c, &err) < 0) {
        fprintf(stderr, "find: %s\n", err->msg);
        gbx_err_free(err);
        fail();
    }
    return c->buf;
}

static void audit_find_filters(void **state)
{
    struct gbx_store *s = open_fresh();
    static const struct gbx_audit_entry recs[] = {
        {"system", "sandbox.timeout", "sb-a", "{}"}, /* 1: an earlier sandbox named sb-a */
        {"team-a", "sandbox.create", "sb-a", "{}"},  /* 2 */
        {"team-b", "sandbox.create", "sb-b", "{}"},  /* 3 */
        {"system", "sandbox.timeout", "sb-a", "{}"}, /* 4: about A's sb-a */
        {"team-a", "exec.start", "sb-a", "{\"cmd\":\"x\"}"},
        {"team-a", "session.create", "sb-s", "{\"session\":\"ses-1\"}"}, /* 6 */
        {"admin", "egress.dns", "sb-b", "{}"},                           /* 7 */
        {"admin", "sandbox.delete", "sb-x", NULL},                       /* 8: no detail */
        {"team-a", "session.delete", NULL, "{\"session\":\"ses-1\",\"reason\":\"x\"}"},
    };
    for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++)
        assert_int_equal(gbx_store_audit_append(s, &recs[i], NULL, NULL), 0);
    /* sb-a (A's, made after record 1) and sb-b (B's) exist; sb-s and sb-x are gone */
    struct gbx_store_sandbox a = {.id = "sb-a",
                                  .owner = "team-a",
                                  .template_name = "host",
                                  .state = "running",
                                  .spec = "{}",
                                  .created_ns = 1500};
    struct gbx_store_sandbox b = a;
    b.id = "sb-b", b.owner = "team-b", b.created_ns = 2500;
    assert_int_equal(gbx_store_sandbox_put(s, &a, NULL), 0);
    assert_int_equal(gbx_store_sandbox_put(s, &b, NULL), 0);
    gbx_store_close(s);
    /* times the test can name: record n at n microseconds */
    tamper("UPDATE audit SET ts_ns = seq * 1000");
    struct gbx_err *err = NULL;
    assert_int_equal(gbx_store_open(path, &s, &err), 0);

    struct seqs c;
    assert_string_equal(find(s, (struct gbx_audit_filter){0}, &c), "1,2,3,4,5,6,7,8,9");
    /* a key: its own records, and those about the sandboxes it has, from their creation */
    assert_string_equal(find(s, (struct gbx_audit_filter){.visible_to = "team-a"}, &c),
                        "2,4,5,6,9");
    assert_string_equal(find(s, (struct gbx_audit_filter){.visible_to = "team-b"}, &c), "3,7");
    assert_string_equal(find(s, (struct gbx_audit_filter){.visible_to = "team-c"}, &c), "");
    assert_string_equal(find(s, (struct gbx_audit_filter){.sandbox = "sb-a"}, &c), "1,2,4,5");
    assert_string_equal(
        find(s, (struct gbx_audit_filter){.sandbox = "sb-a", .visible_to = "team-a"}, &c), "2,4,5");
    assert_string_equal(
        find(s, (struct gbx_audit_filter){.sandbox = "sb-a", .visible_to = "team-b"}, &c), "");
    assert_string_equal(find(s, (struct gbx_audit_filter){.actor = "team-a"}, &c), "2,5,6,9");
    assert_string_equal(find(s, (struct gbx_audit_filter){.kind = "sandbox.create"}, &c), "2,3");
    assert_string_equal(find(s, (struct gbx_audit_filter){.kind = "sandbox."}, &c), "");
    assert_string_equal(
        find(s, (struct gbx_audit_filter){.kind = "sandbox.", .kind_prefix = 1}, &c), "1,2,3,4,8");
    /* a prefix is text, not a LIKE pattern */
    assert_string_equal(
        find(s, (struct gbx_audit_filter){.kind = "sandbox.%", .kind_prefix = 1}, &c), "");
    assert_string_equal(find(s, (struct gbx_audit_filter){.session = "ses-1"}, &c), "6,9");
    assert_string_equal(find(s, (struct gbx_audit_filter){.session = "ses-2"}, &c), "");
    assert_string_equal(find(s, (struct gbx_audit_filter){.since_ns = 4000, .until_ns = 7000}, &c),
                        "4,5,6");
    assert_string_equal(find(s, (struct gbx_audit_filter){.after_seq = 5, .limit = 2}, &c), "6,7");
    assert_string_equal(find(s, (struct gbx_audit_filter){.limit = -1}, &c), "");
    /* paging through a key's view finds each record once */
    char all[256] = "";
    int64_t after = 0;
    for (int pages = 0; pages < 10; pages++) {
        find(s, (struct gbx_audit_filter){.visible_to = "team-a", .after_seq = after, .limit = 2},
             &c);
        if (!c.buf[0])
            break;
        snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s", all[0] ? "," : "", c.buf);
        after = atoll(strrchr(c.buf, ',') ? strrchr(c.buf, ',') + 1 : c.buf);
    }
    assert_string_equal(all, "2,4,5,6,9");
    gbx_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schema_and_wal),
        cmocka_unit_test(newer_schema_is_refused),
        cmocka_unit_test(session_log_chains_and_detects),
        cmocka_unit_test(chain_intact),
        cmocka_unit_test(edited_record_is_found),
        cmocka_unit_test(replaced_hash_is_found),
        cmocka_unit_test(deleted_records_are_found),
        cmocka_unit_test(audit_find_filters),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
