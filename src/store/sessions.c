/* SPDX-License-Identifier: MIT */
/* Sessions and their logs. A session's log is append-only and hash-chained like the audit
 * log: each event carries sha256(previous hash || its fields), and the session row keeps the
 * head (seq, hash), updated in the same transaction. A tool result is unique per
 * (session, tool_use_id): the index makes a second result for one call impossible. */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "store/store_int.h"

int gbx_store_session_put(struct gbx_store *s, const struct gbx_store_session *ses,
                          struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO sessions (id, owner, created_ns, spec, workdir, sandbox, "
                           "state, head_seq, head_hash) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?) "
                           "ON CONFLICT(id) DO UPDATE SET sandbox = excluded.sandbox, "
                           "state = excluded.state",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "save session");
    sqlite3_bind_text(st, 1, ses->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, ses->owner ? ses->owner : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ses->created_ns);
    sqlite3_bind_text(st, 4, ses->spec ? ses->spec : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, ses->workdir, -1, SQLITE_STATIC);
    if (ses->sandbox)
        sqlite3_bind_text(st, 6, ses->sandbox, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 6);
    sqlite3_bind_text(st, 7, ses->state ? ses->state : "active", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, GBX_STORE_GENESIS_HASH, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : gbx_store_db_err(s, err, "save session");
}

int gbx_store_session_delete(struct gbx_store *s, const char *id, struct gbx_err **err)
{
    static const char *const sql[] = {"DELETE FROM session_events WHERE session = ?",
                                      "DELETE FROM sessions WHERE id = ?"};
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "delete session");
    for (size_t i = 0; i < GBX_ARRAY_SIZE(sql); i++) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, sql[i], -1, &st, NULL) != SQLITE_OK) {
            gbx_store_db_err(s, err, "delete session");
            (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) {
            gbx_store_db_err(s, err, "delete session");
            (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        gbx_store_db_err(s, err, "delete session");
        (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

int gbx_store_session_each(struct gbx_store *s, gbx_store_session_fn fn, void *arg,
                           struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id, owner, created_ns, spec, workdir, sandbox, state, head_seq "
                           "FROM sessions ORDER BY created_ns",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "list sessions");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct gbx_store_session ses = {
            .id = (const char *)sqlite3_column_text(st, 0),
            .owner = (const char *)sqlite3_column_text(st, 1),
            .created_ns = sqlite3_column_int64(st, 2),
            .spec = (const char *)sqlite3_column_text(st, 3),
            .workdir = (const char *)sqlite3_column_text(st, 4),
            .sandbox = (const char *)sqlite3_column_text(st, 5),
            .state = (const char *)sqlite3_column_text(st, 6),
            .head_seq = sqlite3_column_int64(st, 7),
        };
        if (ses.id && ses.workdir && fn(arg, &ses) != 0)
            break;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return gbx_store_db_err(s, err, "list sessions");
    return 0;
}

static int head_get(struct gbx_store *s, const char *session, int64_t *seq, char hash[65])
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "SELECT head_seq, head_hash FROM sessions WHERE id = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    int r = -1;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 1)) {
        *seq = sqlite3_column_int64(st, 0);
        snprintf(hash, 65, "%s", (const char *)sqlite3_column_text(st, 1));
        r = strlen(hash) == 64 ? 0 : -1;
    }
    sqlite3_finalize(st);
    return r;
}

static int step_done(struct gbx_store *s, sqlite3_stmt *st, struct gbx_err **err, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_CONSTRAINT)
        return gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "%s: already recorded", what);
    return rc == SQLITE_DONE ? 0 : gbx_store_db_err(s, err, what);
}

int gbx_store_session_append(struct gbx_store *s, const char *session, const char *type,
                             const char *tool_use_id, const char *data, int64_t *seq_out,
                             struct gbx_err **err)
{
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "append session event");
    int64_t last;
    char prev[65], hash[65];
    if (head_get(s, session, &last, prev) < 0) {
        (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "no session '%s'", session);
    }
    int64_t seq = last + 1, ts = gbx_realtime_ns();
    const char *d = data ? data : "{}";
    gbx_store_chain_hash(prev, seq, ts, session, type, tool_use_id ? tool_use_id : "", d, hash);
    sqlite3_stmt *st;
    int r = -1;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO session_events (session, seq, ts_ns, type, tool_use_id, "
                           "data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK) {
        gbx_store_db_err(s, err, "append session event");
        goto out;
    }
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, seq);
    sqlite3_bind_int64(st, 3, ts);
    sqlite3_bind_text(st, 4, type, -1, SQLITE_STATIC);
    if (tool_use_id)
        sqlite3_bind_text(st, 5, tool_use_id, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 5);
    sqlite3_bind_text(st, 6, d, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, prev, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, hash, -1, SQLITE_STATIC);
    if (step_done(s, st, err, "append session event") < 0)
        goto out;
    if (sqlite3_prepare_v2(s->db, "UPDATE sessions SET head_seq = ?, head_hash = ? WHERE id = ?",
                           -1, &st, NULL) != SQLITE_OK) {
        gbx_store_db_err(s, err, "append session event");
        goto out;
    }
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_text(st, 2, hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, session, -1, SQLITE_STATIC);
    if (step_done(s, st, err, "append session event") < 0)
        goto out;
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        gbx_store_db_err(s, err, "append session event");
        goto out;
    }
    if (seq_out)
        *seq_out = seq;
    return 0;
out:
    (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return r;
}

int gbx_store_session_events(struct gbx_store *s, const char *session, int64_t after, int limit,
                             gbx_store_event_fn fn, void *arg, struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT seq, ts_ns, type, tool_use_id, data, hash FROM session_events "
                           "WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "read session events");
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, after);
    sqlite3_bind_int(st, 3, limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct gbx_store_event ev = {
            .seq = sqlite3_column_int64(st, 0),
            .ts_ns = sqlite3_column_int64(st, 1),
            .type = (const char *)sqlite3_column_text(st, 2),
            .tool_use_id = (const char *)sqlite3_column_text(st, 3),
            .data = (const char *)sqlite3_column_text(st, 4),
            .hash = (const char *)sqlite3_column_text(st, 5),
        };
        if (ev.type && ev.data && fn(arg, &ev) != 0)
            break;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return gbx_store_db_err(s, err, "read session events");
    return 0;
}

/* The data of a call's first event of type (malloc'd), or NULL. */
static char *call_event(struct gbx_store *s, const char *session, const char *tool_use_id,
                        const char *type)
{
    sqlite3_stmt *st;
    char *v = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT data FROM session_events WHERE session = ? AND tool_use_id = ? "
                           "AND type = ? ORDER BY seq LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, tool_use_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, type, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        v = gbx_xstrdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

char *gbx_store_session_result(struct gbx_store *s, const char *session, const char *tool_use_id)
{
    return call_event(s, session, tool_use_id, "tool.result");
}

char *gbx_store_session_call(struct gbx_store *s, const char *session, const char *tool_use_id)
{
    return call_event(s, session, tool_use_id, "tool.call");
}

int gbx_store_session_verify(struct gbx_store *s, const char *session, struct gbx_audit_report *rep,
                             struct gbx_err **err)
{
    memset(rep, 0, sizeof(*rep));
    int64_t head_seq = 0;
    char head_hash[65];
    if (head_get(s, session, &head_seq, head_hash) < 0)
        return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "no session '%s'", session);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT seq, ts_ns, type, coalesce(tool_use_id, ''), data, prev_hash, "
                           "hash FROM session_events WHERE session = ? ORDER BY seq",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "verify session log");
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    char prev[65] = GBX_STORE_GENESIS_HASH, want[65];
    int64_t expect = 1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(st, 0);
        const char *type = (const char *)sqlite3_column_text(st, 2);
        const char *tuid = (const char *)sqlite3_column_text(st, 3);
        const char *data = (const char *)sqlite3_column_text(st, 4);
        const char *ph = (const char *)sqlite3_column_text(st, 5);
        const char *h = (const char *)sqlite3_column_text(st, 6);
        rep->rows++;
        const char *why = NULL;
        if (seq != expect)
            why = "sequence gap";
        else if (!type || !tuid || !data || !ph || !h || strcmp(ph, prev) != 0)
            why = "does not chain to its predecessor";
        else {
            gbx_store_chain_hash(prev, seq, sqlite3_column_int64(st, 1), session, type, tuid, data,
                                 want);
            if (strcmp(want, h) != 0)
                why = "content does not match its hash";
        }
        if (why) {
            rep->bad_seq = seq;
            snprintf(rep->reason, sizeof(rep->reason), "%s", why);
            break;
        }
        snprintf(prev, sizeof(prev), "%s", h ? h : "");
        expect++;
    }
    sqlite3_finalize(st);
    if (rep->bad_seq == 0 && (expect - 1 != head_seq || strcmp(prev, head_hash) != 0)) {
        rep->bad_seq = expect;
        snprintf(rep->reason, sizeof(rep->reason), "the head does not match the last event");
    }
    return 0;
}
