/* SPDX-License-Identifier: MIT */
/* Artifact rows (artifacts.h). Blobs are the caller's: the delete says whether another row
 * still names the deleted row's blob, read in the delete's transaction. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/artifacts.h"
#include "store/store_int.h"

#define COLS "id, sha256, name, kind, size_bytes, owner, session, sandbox, metadata, created_ns"

static void bind_opt(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

int gbx_store_artifacts_insert(struct gbx_store *s, const struct gbx_store_artifact *a,
                               struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO artifacts (" COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "save artifact");
    sqlite3_bind_text(st, 1, a->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, a->sha256, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, a->name ? a->name : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, a->kind ? a->kind : "file", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, a->size_bytes);
    sqlite3_bind_text(st, 6, a->owner ? a->owner : "", -1, SQLITE_STATIC);
    bind_opt(st, 7, a->session);
    bind_opt(st, 8, a->sandbox);
    bind_opt(st, 9, a->metadata);
    sqlite3_bind_int64(st, 10, a->created_ns);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_CONSTRAINT)
        return gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "artifact '%s' exists", a->id);
    return rc == SQLITE_DONE ? 0 : gbx_store_db_err(s, err, "save artifact");
}

/* Step through st's rows (columns COLS) calling fn; returns the number of rows seen or -1. */
static int rows(struct gbx_store *s, sqlite3_stmt *st, gbx_store_artifact_fn fn, void *arg,
                struct gbx_err **err, const char *what)
{
    int rc, n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct gbx_store_artifact a = {
            .id = (const char *)sqlite3_column_text(st, 0),
            .sha256 = (const char *)sqlite3_column_text(st, 1),
            .name = (const char *)sqlite3_column_text(st, 2),
            .kind = (const char *)sqlite3_column_text(st, 3),
            .size_bytes = sqlite3_column_int64(st, 4),
            .owner = (const char *)sqlite3_column_text(st, 5),
            .session = (const char *)sqlite3_column_text(st, 6),
            .sandbox = (const char *)sqlite3_column_text(st, 7),
            .metadata = (const char *)sqlite3_column_text(st, 8),
            .created_ns = sqlite3_column_int64(st, 9),
        };
        if (!a.id || !a.sha256 || !a.name || !a.kind || !a.owner)
            continue;
        n++;
        if (fn && fn(arg, &a) != 0)
            break;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return gbx_store_db_err(s, err, what);
    return n;
}

int gbx_store_artifacts_get(struct gbx_store *s, const char *id, gbx_store_artifact_fn fn,
                            void *arg, struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "SELECT " COLS " FROM artifacts WHERE id = ?", -1, &st, NULL) !=
        SQLITE_OK)
        return gbx_store_db_err(s, err, "read artifact");
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int n = rows(s, st, fn, arg, err, "read artifact");
    return n < 0 ? -1 : n > 0;
}

int gbx_store_artifacts_list(struct gbx_store *s, const struct gbx_store_artifact_filter *f,
                             gbx_store_artifact_fn fn, void *arg, struct gbx_err **err)
{
    sqlite3_stmt *st;
    /* a NULL parameter matches every row */
#define LIST_WHERE                                                                                 \
    "SELECT " COLS " FROM artifacts WHERE "                                                        \
    "(?1 IS NULL OR owner = ?1) AND (?2 IS NULL OR session = ?2) AND "                             \
    "(?3 IS NULL OR sandbox = ?3) AND (?4 IS NULL OR name = ?4) AND "
    static const char *const oldest_first =
        LIST_WHERE "(?5 IS NULL OR created_ns > ?6 OR (created_ns = ?6 AND id > ?5)) "
                   "ORDER BY created_ns, id LIMIT ?7";
    static const char *const newest_first =
        LIST_WHERE "(?5 IS NULL OR created_ns < ?6 OR (created_ns = ?6 AND id < ?5)) "
                   "ORDER BY created_ns DESC, id DESC LIMIT ?7";
#undef LIST_WHERE
    if (sqlite3_prepare_v2(s->db, f->newest_first ? newest_first : oldest_first, -1, &st, NULL) !=
        SQLITE_OK)
        return gbx_store_db_err(s, err, "list artifacts");
    bind_opt(st, 1, f->owner);
    bind_opt(st, 2, f->session);
    bind_opt(st, 3, f->sandbox);
    bind_opt(st, 4, f->name);
    bind_opt(st, 5, f->after_id);
    sqlite3_bind_int64(st, 6, f->after_ns);
    sqlite3_bind_int(st, 7, f->limit > 0 ? f->limit : 100);
    return rows(s, st, fn, arg, err, "list artifacts") < 0 ? -1 : 0;
}

int64_t gbx_store_artifacts_refs(struct gbx_store *s, const char *sha256)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM artifacts WHERE sha256 = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, sha256, -1, SQLITE_STATIC);
    int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return n;
}

static int sha_of(void *arg, const struct gbx_store_artifact *a)
{
    snprintf(arg, 65, "%s", a->sha256);
    return 1;
}

int gbx_store_artifacts_delete(struct gbx_store *s, const char *id, char sha_out[65],
                               bool *referenced, struct gbx_err **err)
{
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "delete artifact");
    char sha[65] = "";
    int found = gbx_store_artifacts_get(s, id, sha_of, sha, err);
    if (found <= 0) {
        (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return found;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "DELETE FROM artifacts WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
        goto fail;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        goto fail;
    int64_t refs = gbx_store_artifacts_refs(s, sha);
    if (refs < 0)
        goto fail;
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    if (sha_out)
        memcpy(sha_out, sha, 65);
    if (referenced)
        *referenced = refs > 0;
    return 1;
fail:
    gbx_store_db_err(s, err, "delete artifact");
    (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

int gbx_store_artifacts_by_age(struct gbx_store *s, int64_t since_ns, int limit,
                               gbx_store_artifact_fn fn, void *arg, struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT " COLS " FROM artifacts WHERE created_ns >= ? "
                           "ORDER BY created_ns, id LIMIT ?",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "list artifacts by age");
    sqlite3_bind_int64(st, 1, since_ns);
    sqlite3_bind_int(st, 2, limit > 0 ? limit : -1);
    return rows(s, st, fn, arg, err, "list artifacts by age") < 0 ? -1 : 0;
}

int gbx_store_artifacts_totals(struct gbx_store *s, const char *owner, int64_t *count,
                               int64_t *bytes, struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT count(*), coalesce(sum(size_bytes), 0) FROM artifacts "
                           "WHERE ?1 IS NULL OR owner = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "count artifacts");
    bind_opt(st, 1, owner);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (count)
            *count = sqlite3_column_int64(st, 0);
        if (bytes)
            *bytes = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : gbx_store_db_err(s, err, "count artifacts");
}

int gbx_store_artifacts_session_owner(struct gbx_store *s, const char *id, char *owner,
                                      size_t ownersz)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "SELECT owner FROM sessions WHERE id = ?", -1, &st, NULL) !=
        SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st), r = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
    if (r == 1)
        snprintf(owner, ownersz, "%s",
                 sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "");
    sqlite3_finalize(st);
    return r;
}
