/* SPDX-License-Identifier: MIT */
#include "store/snapshots.h"

#include <stdio.h>

#include "store/store_int.h"

static void bind_opt(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

int gbx_store_snapshot_put(struct gbx_store *s, const struct gbx_store_snapshot *r,
                           struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO snapshots (id, name, owner, kind, sandbox, "
                           "parent, template, created_ns, size_bytes, state, attrs) VALUES "
                           "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "save snapshot");
    sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
    bind_opt(st, 2, r->name);
    sqlite3_bind_text(st, 3, r->owner ? r->owner : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, r->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, r->sandbox, -1, SQLITE_STATIC);
    bind_opt(st, 6, r->parent);
    sqlite3_bind_text(st, 7, r->template_name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, r->created_ns);
    sqlite3_bind_int64(st, 9, (sqlite3_int64)r->size_bytes);
    sqlite3_bind_text(st, 10, r->state, -1, SQLITE_STATIC);
    bind_opt(st, 11, r->attrs);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_CONSTRAINT)
        return gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "a snapshot named '%s' exists",
                           r->name ? r->name : "");
    return rc == SQLITE_DONE ? 0 : gbx_store_db_err(s, err, "save snapshot");
}

int gbx_store_snapshot_delete(struct gbx_store *s, const char *id, struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "DELETE FROM snapshots WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "delete snapshot");
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : gbx_store_db_err(s, err, "delete snapshot");
}

static const char *col(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

int gbx_store_snapshot_each(struct gbx_store *s, gbx_store_snapshot_fn fn, void *arg,
                            struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id, name, owner, kind, sandbox, parent, template, created_ns, "
                           "size_bytes, state, attrs FROM snapshots ORDER BY created_ns, id",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "list snapshots");
    int rc, stop = 0;
    while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct gbx_store_snapshot r = {
            .id = col(st, 0),
            .name = col(st, 1),
            .owner = col(st, 2),
            .kind = col(st, 3),
            .sandbox = col(st, 4),
            .parent = col(st, 5),
            .template_name = col(st, 6),
            .created_ns = sqlite3_column_int64(st, 7),
            .size_bytes = (uint64_t)sqlite3_column_int64(st, 8),
            .state = col(st, 9),
            .attrs = col(st, 10),
        };
        stop = fn(arg, &r);
    }
    sqlite3_finalize(st);
    if (stop)
        return stop;
    return rc == SQLITE_DONE ? 0 : gbx_store_db_err(s, err, "list snapshots");
}
