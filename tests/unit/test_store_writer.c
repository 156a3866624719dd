/* SPDX-License-Identifier: MIT */
/* The store writer: group-committed writes on its own thread and connection, completions in
 * queueing order through an eventfd, a failing job undone alone while its batch neighbours
 * commit, an audit chain that stays intact when the loop's connection appends in between,
 * and a free that finishes what was queued. */
#include <poll.h>
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
#include "store/writer.h"

static char dir[64];
static char *path;

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/gbx-writer-XXXXXX");
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

static struct gbx_store *open_store(void)
{
    struct gbx_store *s = NULL;
    struct gbx_err *err = NULL;
    if (gbx_store_open(path, &s, &err) < 0) {
        fprintf(stderr, "open: %s\n", err->msg);
        gbx_err_free(err);
        fail();
    }
    return s;
}

/* A fresh database, migrated by the loop's connection, as the daemon does it. */
static struct gbx_store *open_fresh(void)
{
    (void)!unlink(path);
    gbx_autofree char *wal = gbx_asprintf("%s-wal", path);
    gbx_autofree char *shm = gbx_asprintf("%s-shm", path);
    (void)!unlink(wal);
    (void)!unlink(shm);
    return open_store();
}

static struct gbx_store_writer *writer_new(void)
{
    struct gbx_store_writer *w = NULL;
    struct gbx_err *err = NULL;
    if (gbx_store_writer_new(path, &w, &err) < 0) {
        fprintf(stderr, "writer: %s\n", err->msg);
        gbx_err_free(err);
        fail();
    }
    return w;
}

/* Completions record themselves here, so order and status can be checked. */
#define MAX_TICKS 4096
struct tick {
    struct ticks *t;
    int idx;
    int status;
    char msg[200];
};
struct ticks {
    struct tick tick[MAX_TICKS];
    int queued, completed;
    int order_ok;
};

static void *tick_arg(struct ticks *t)
{
    GBX_BUG_ON(t->queued >= MAX_TICKS);
    struct tick *k = &t->tick[t->queued];
    k->t = t;
    k->idx = t->queued++;
    k->status = 1; /* not completed */
    return k;
}

static void on_done(void *arg, int status, const char *msg)
{
    struct tick *k = arg;
    if (k->idx != k->t->completed)
        k->t->order_ok = 0;
    k->t->completed++;
    k->status = status;
    snprintf(k->msg, sizeof(k->msg), "%s", msg ? msg : "");
}

/* The loop's side: wait on the fd, run completions, until all have run. */
static void run_until_done(struct gbx_store_writer *w, struct ticks *t)
{
    while (t->completed < t->queued) {
        struct pollfd p = {.fd = gbx_store_writer_fd(w), .events = POLLIN};
        assert_int_equal(poll(&p, 1, 20000), 1);
        gbx_store_writer_complete(w);
    }
}

static void audit(struct gbx_store_writer *w, struct ticks *t, int i)
{
    char detail[64];
    snprintf(detail, sizeof(detail), "{\"i\":%d}", i);
    struct gbx_audit_entry e = {
        .actor = "admin", .kind = "exec.start", .sandbox = "sb-1", .detail = detail};
    gbx_store_writer_audit(w, &e, on_done, tick_arg(t));
}

static void sandbox_put(struct gbx_store_writer *w, struct ticks *t, const char *id)
{
    struct gbx_store_sandbox row = {.id = id,
                                    .owner = "k1",
                                    .template_name = "base",
                                    .state = "running",
                                    .spec = "{}",
                                    .created_ns = 1,
                                    .host_uid = 100000,
                                    .uid_slot = 1,
                                    .init_pid = 42};
    gbx_store_writer_sandbox_put(w, &row, on_done, tick_arg(t));
}

/* The chain as seen from another connection. */
static void assert_chain(int64_t rows)
{
    struct gbx_store *s = open_store();
    struct gbx_audit_report rep;
    assert_int_equal(gbx_store_audit_verify(s, &rep, NULL), 0);
    if (rep.bad_seq)
        fprintf(stderr, "chain: %s\n", rep.reason);
    assert_int_equal(rep.bad_seq, 0);
    assert_int_equal(rep.rows, rows);
    gbx_store_close(s);
}

static void raw_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "sql: %s\n", msg);
        fail();
    }
}

struct expiry_seen {
    int rows;
    int64_t expires_ns;
};

static int count_rows(void *arg, const struct gbx_store_sandbox *row)
{
    struct expiry_seen *x = arg;
    x->rows++;
    if (strcmp(row->id, "sb-0") == 0)
        x->expires_ns = row->expires_ns;
    return 0;
}

static void thousand_in_order(void **state)
{
    struct gbx_store *s = open_fresh();
    struct gbx_store_writer *w = writer_new();
    static struct ticks t = {.order_ok = 1};
    char id[32];
    for (int i = 0; i < 1000; i++) {
        audit(w, &t, i);
        if (i % 10 == 0) {
            snprintf(id, sizeof(id), "sb-%d", i / 10);
            sandbox_put(w, &t, id);
        }
        if (i % 20 == 19) { /* delete every other one of those */
            snprintf(id, sizeof(id), "sb-%d", i / 10);
            gbx_store_writer_sandbox_delete(w, id, on_done, tick_arg(&t));
        }
    }
    gbx_store_writer_sandbox_set_expiry(w, "sb-0", 777, on_done, tick_arg(&t));
    assert_int_equal(t.queued, 1000 + 100 + 50 + 1);
    run_until_done(w, &t);
    assert_true(t.order_ok);
    for (int i = 0; i < t.queued; i++) {
        if (t.tick[i].status != 0)
            fprintf(stderr, "job %d: %s\n", i, t.tick[i].msg);
        assert_int_equal(t.tick[i].status, 0);
    }
    /* nothing left: the fd was reset */
    struct pollfd p = {.fd = gbx_store_writer_fd(w), .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);

    assert_chain(1000);
    /* audit records are in queueing order */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(
        sqlite3_prepare_v2(db, "SELECT seq, detail FROM audit ORDER BY seq", -1, &st, NULL),
        SQLITE_OK);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        char want[64];
        snprintf(want, sizeof(want), "{\"i\":%d}", i);
        assert_string_equal((const char *)sqlite3_column_text(st, 1), want);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    /* the loop's own connection sees the sandboxes (50 of 100 deleted) and the expiry */
    struct expiry_seen x = {0};
    assert_int_equal(gbx_store_sandbox_each(s, count_rows, &x, NULL), 0);
    assert_int_equal(x.rows, 50);
    assert_int_equal(x.expires_ns, 777);

    /* flush: once it returns, completions are waiting and the fd says so */
    audit(w, &t, 1000);
    gbx_store_writer_flush(w);
    assert_int_equal(poll(&p, 1, 0), 1);
    gbx_store_writer_complete(w);
    assert_int_equal(t.completed, t.queued);
    assert_int_equal(t.tick[t.queued - 1].status, 0);

    gbx_store_writer_free(w);
    gbx_store_close(s);
}

static void failed_job_alone(void **state)
{
    struct gbx_store *s = open_fresh();
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    /* an audit append whose second statement (the chain head) fails: only the job's
     * savepoint can take its first statement (the record) back out */
    raw_exec(db, "CREATE TRIGGER poison BEFORE INSERT ON meta WHEN (SELECT detail FROM audit "
                 "ORDER BY seq DESC LIMIT 1) = '{\"poison\":1}' "
                 "BEGIN SELECT RAISE(ABORT, 'poisoned'); END");
    struct gbx_store_writer *w = writer_new();
    static struct ticks t = {.order_ok = 1};

    /* hold the write lock so that the jobs pile up and go into one batch */
    raw_exec(db, "BEGIN IMMEDIATE");
    sandbox_put(w, &t, "sb-a");
    audit(w, &t, 0);
    struct gbx_audit_entry poison = {.actor = "admin", .kind = "x", .detail = "{\"poison\":1}"};
    gbx_store_writer_audit(w, &poison, on_done, tick_arg(&t));
    sandbox_put(w, &t, NULL); /* refused: no id */
    audit(w, &t, 1);
    sandbox_put(w, &t, "sb-b");
    usleep(50 * 1000);
    raw_exec(db, "COMMIT");
    run_until_done(w, &t);
    assert_true(t.order_ok);
    int want[] = {0, 0, -1, -1, 0, 0};
    for (int i = 0; i < (int)GBX_ARRAY_SIZE(want); i++)
        assert_int_equal(t.tick[i].status, want[i]);
    assert_non_null(strstr(t.tick[2].msg, "poisoned"));
    assert_non_null(strstr(t.tick[3].msg, "no id"));
    assert_int_equal(t.tick[0].msg[0], '\0');

    assert_chain(2);
    assert_int_equal(gbx_store_sandbox_count(s), 2);
    /* and the chain goes on from there */
    audit(w, &t, 2);
    run_until_done(w, &t);
    assert_int_equal(t.tick[t.queued - 1].status, 0);
    assert_chain(3);

    gbx_store_writer_free(w);
    sqlite3_close(db);
    gbx_store_close(s);
}

static void interleaved_with_sync_appends(void **state)
{
    struct gbx_store *s = open_fresh();
    struct gbx_store_writer *w = writer_new();
    static struct ticks t = {.order_ok = 1};
    for (int i = 0; i < 300; i++) {
        audit(w, &t, i);
        struct gbx_audit_entry e = {.actor = "system", .kind = "sync", .detail = "{}"};
        struct gbx_err *err = NULL;
        if (gbx_store_audit_append(s, &e, NULL, &err) < 0) {
            fprintf(stderr, "sync append: %s\n", err->msg);
            gbx_err_free(err);
            fail();
        }
        if (i % 50 == 0) /* now and then with the writer idle, too */
            run_until_done(w, &t);
    }
    run_until_done(w, &t);
    assert_true(t.order_ok);
    for (int i = 0; i < t.queued; i++)
        assert_int_equal(t.tick[i].status, 0);
    assert_chain(600);
    struct gbx_audit_report rep;
    assert_int_equal(gbx_store_audit_verify(s, &rep, NULL), 0);
    assert_int_equal(rep.bad_seq, 0);
    assert_int_equal(rep.rows, 600);
    gbx_store_writer_free(w);
    gbx_store_close(s);
}

struct requeue {
    struct gbx_store_writer *w;
    int done, failed, requeued;
};

static void on_done_requeue(void *arg, int status, const char *msg)
{
    struct requeue *r = arg;
    r->done++;
    if (status != 0)
        r->failed++;
    if (r->requeued < 3) { /* a completion that queues more writes, even during free */
        r->requeued++;
        struct gbx_audit_entry e = {.actor = "system", .kind = "again"};
        gbx_store_writer_audit(r->w, &e, on_done_requeue, r);
    }
}

static void free_finishes_the_queue(void **state)
{
    struct gbx_store *s = open_fresh();
    struct gbx_store_writer *w = writer_new();
    struct requeue r = {.w = w};
    for (int i = 0; i < 500; i++) {
        struct gbx_audit_entry e = {.actor = "admin", .kind = "k", .detail = "{}"};
        gbx_store_writer_audit(w, &e, on_done_requeue, &r);
    }
    gbx_store_writer_sandbox_delete(w, "nope", NULL, NULL); /* no completion wanted */
    gbx_store_writer_free(w);
    assert_int_equal(r.done, 503);
    assert_int_equal(r.failed, 0);
    assert_chain(503);
    gbx_store_close(s);
}

static void open_failure(void **state)
{
    struct gbx_store_writer *w = NULL;
    struct gbx_err *err = NULL;
    gbx_autofree char *bad = gbx_asprintf("%s/missing/glovebox.db", dir);
    assert_int_equal(gbx_store_writer_new(bad, &w, &err), -1);
    assert_null(w);
    assert_non_null(strstr(err->msg, "store writer"));
    gbx_err_free(err);
    gbx_store_writer_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(thousand_in_order),
        cmocka_unit_test(failed_job_alone),
        cmocka_unit_test(interleaved_with_sync_appends),
        cmocka_unit_test(free_finishes_the_queue),
        cmocka_unit_test(open_failure),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
