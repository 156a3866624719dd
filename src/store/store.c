/* SPDX-License-Identifier: MIT */
#include "base/clock.h"
#include "store/store.h"
#include "store/store_int.h"

#include <openssl/evp.h>
#include <sys/random.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"

/* Schema history. Each entry takes the database from version i to i + 1; never edit one
 * that has shipped, append a new one. */
static const char *const migrations[] = {
    /* 1: the first schema */
    "CREATE TABLE sandboxes ("
    "  id TEXT PRIMARY KEY,"
    "  owner TEXT NOT NULL DEFAULT '',"
    "  template TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  created_ns INTEGER NOT NULL,"
    "  updated_ns INTEGER NOT NULL,"
    "  spec TEXT NOT NULL DEFAULT '{}',"
    "  host_uid INTEGER,"
    "  uid_slot INTEGER,"
    "  init_pid INTEGER,"
    "  expires_ns INTEGER"
    ");"
    "CREATE INDEX sandboxes_owner ON sandboxes(owner, created_ns);"
    "CREATE TABLE templates ("
    "  name TEXT PRIMARY KEY,"
    "  created_ns INTEGER NOT NULL,"
    "  description TEXT NOT NULL DEFAULT ''"
    ");"
    "CREATE TABLE api_keys ("
    "  id TEXT PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  hash TEXT NOT NULL,"
    "  created_ns INTEGER NOT NULL,"
    "  revoked_ns INTEGER"
    ");"
    "CREATE TABLE audit ("
    "  seq INTEGER PRIMARY KEY,"
    "  ts_ns INTEGER NOT NULL,"
    "  actor TEXT NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  sandbox TEXT NOT NULL,"
    "  detail TEXT NOT NULL,"
    "  prev_hash TEXT NOT NULL,"
    "  hash TEXT NOT NULL"
    ");"
    "CREATE INDEX audit_sandbox ON audit(sandbox, seq);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    /* 2: a per-sandbox secret (E2B's envd access token) */
    "ALTER TABLE sandboxes ADD COLUMN token TEXT;",
    /* 3: what a front end remembers about a sandbox (JSON; e.g. the E2B template name) */
    "ALTER TABLE sandboxes ADD COLUMN attrs TEXT;",
    /* 4: credentials for egress injection, sealed (AES-256-GCM under a key file); the
     * audit log is read by sandbox and kind (egress rows) */
    "CREATE TABLE secrets ("
    "  name TEXT PRIMARY KEY,"
    "  hosts TEXT NOT NULL,"
    "  header TEXT NOT NULL,"
    "  sealed BLOB NOT NULL,"
    "  created_ns INTEGER NOT NULL"
    ");"
    "CREATE INDEX audit_sandbox_kind ON audit(sandbox, kind, seq);",
    /* 5: sessions and their append-only, hash-chained event logs */
    "CREATE TABLE sessions ("
    "  id TEXT PRIMARY KEY,"
    "  owner TEXT NOT NULL,"
    "  created_ns INTEGER NOT NULL,"
    "  spec TEXT NOT NULL,"
    "  workdir TEXT NOT NULL,"
    "  sandbox TEXT,"
    "  state TEXT NOT NULL,"
    "  head_seq INTEGER NOT NULL DEFAULT 0,"
    "  head_hash TEXT NOT NULL"
    ");"
    "CREATE TABLE session_events ("
    "  session TEXT NOT NULL,"
    "  seq INTEGER NOT NULL,"
    "  ts_ns INTEGER NOT NULL,"
    "  type TEXT NOT NULL,"
    "  tool_use_id TEXT,"
    "  data TEXT NOT NULL,"
    "  prev_hash TEXT NOT NULL,"
    "  hash TEXT NOT NULL,"
    "  PRIMARY KEY (session, seq)"
    ");"
    "CREATE UNIQUE INDEX session_results ON session_events(session, tool_use_id) "
    "  WHERE type = 'tool.result';",
    /* 6: filesystem snapshots (frozen writable layers, stacked on their parent) and
     * hibernation images; state: ready | deleting */
    "CREATE TABLE snapshots ("
    "  id TEXT PRIMARY KEY,"
    "  name TEXT,"
    "  owner TEXT NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  sandbox TEXT NOT NULL,"
    "  parent TEXT,"
    "  template TEXT NOT NULL,"
    "  created_ns INTEGER NOT NULL,"
    "  size_bytes INTEGER NOT NULL DEFAULT 0,"
    "  state TEXT NOT NULL,"
    "  attrs TEXT"
    ");"
    "CREATE UNIQUE INDEX snapshots_name ON snapshots(owner, name) WHERE name IS NOT NULL;"
    "CREATE INDEX snapshots_parent ON snapshots(parent);",
    /* 7: artifacts: content-addressed blobs under <state>/artifacts/<sha256>, many rows may
     * share one blob */
    "CREATE TABLE artifacts ("
    "  id TEXT PRIMARY KEY,"
    "  sha256 TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  size_bytes INTEGER NOT NULL,"
    "  owner TEXT NOT NULL,"
    "  session TEXT,"
    "  sandbox TEXT,"
    "  metadata TEXT,"
    "  created_ns INTEGER NOT NULL"
    ");"
    "CREATE INDEX artifacts_sha ON artifacts(sha256);"
    "CREATE INDEX artifacts_session ON artifacts(session, created_ns);",
    /* 8: an API key's own quotas ("sandboxes=10,memory=4G"; NULL: the daemon's) */
    "ALTER TABLE api_keys ADD COLUMN quota TEXT;",
};

#define GENESIS_HASH GBX_STORE_GENESIS_HASH

int gbx_store_schema_latest(void)
{
    return (int)GBX_ARRAY_SIZE(migrations);
}

int gbx_store_db_err(struct gbx_store *s, struct gbx_err **err, const char *what)
{
    int code = sqlite3_errcode(s->db) & 0xff;
    if (code == SQLITE_FULL) /* the state dir's file system: nothing was written */
        return gbx_err_set(err, ENOSPC, GBX_ERR_STORAGE, "%s: %s (the state directory is full)",
                           what, sqlite3_errmsg(s->db));
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
        return gbx_err_set(err, EBUSY, GBX_ERR_UNAVAILABLE,
                           "%s: %s (another connection holds the database; try again)", what,
                           sqlite3_errmsg(s->db));
    return gbx_err_set(err, 0, GBX_ERR_INTERNAL, "%s: %s", what, sqlite3_errmsg(s->db));
}

static int exec_sql(struct gbx_store *s, const char *sql, struct gbx_err **err)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        gbx_err_set(err, 0, GBX_ERR_INTERNAL, "database '%s': %s", s->path, msg ? msg : "error");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int gbx_store_schema_version(struct gbx_store *s)
{
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

static int migrate(struct gbx_store *s, struct gbx_err **err)
{
    int have = gbx_store_schema_version(s);
    int want = gbx_store_schema_latest();
    if (have < 0)
        return gbx_store_db_err(s, err, "read schema version");
    if (have > want)
        return gbx_err_set(err, 0, GBX_ERR_CONFLICT,
                           "database '%s' has schema %d, newer than this glovebox (%d): "
                           "upgrade glovebox or use another state dir",
                           s->path, have, want);
    for (int v = have; v < want; v++) {
        char bump[64];
        snprintf(bump, sizeof(bump), "PRAGMA user_version = %d;", v + 1);
        if (exec_sql(s, "BEGIN IMMEDIATE", err) < 0)
            return -1;
        if (exec_sql(s, migrations[v], err) < 0 || exec_sql(s, bump, err) < 0) {
            char *msg = NULL;
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, &msg);
            sqlite3_free(msg);
            return gbx_err_wrap(err, "migrate to schema %d", v + 1);
        }
        if (exec_sql(s, "COMMIT", err) < 0)
            return -1;
    }
    return 0;
}

int gbx_store_open(const char *path, struct gbx_store **out, struct gbx_err **err)
{
    struct gbx_store *s = gbx_xcalloc(1, sizeof(*s));
    s->path = gbx_xstrdup(path);
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        gbx_err_set(err, 0, GBX_ERR_UNAVAILABLE, "cannot open database '%s': %s", path,
                    s->db ? sqlite3_errmsg(s->db) : "out of memory");
        gbx_store_close(s);
        return -1;
    }
    sqlite3_busy_timeout(s->db, 5000);
    /* WAL: readers never block the writer; synchronous=FULL: an acknowledged record
     * survives a crash (the audit log promises that) */
    if (exec_sql(s,
                 "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                 "PRAGMA foreign_keys = ON;",
                 err) < 0 ||
        migrate(s, err) < 0) {
        gbx_store_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

int gbx_store_exec(struct gbx_store *s, const char *sql, struct gbx_err **err)
{
    return exec_sql(s, sql, err);
}

bool gbx_store_in_transaction(struct gbx_store *s)
{
    return sqlite3_get_autocommit(s->db) == 0;
}

void gbx_store_close(struct gbx_store *s)
{
    if (s == NULL)
        return;
    if (s->db)
        sqlite3_close_v2(s->db);
    free(s->path);
    free(s);
}

/* sha256(prev_hash || len:field ...) as lowercase hex. Length prefixes make the encoding
 * unambiguous: no two different records hash the same bytes. */
void gbx_store_chain_hash(const char *prev, int64_t seq, int64_t ts, const char *actor,
                          const char *kind, const char *sandbox, const char *detail, char out[65])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    GBX_BUG_ON(md == NULL);
    GBX_BUG_ON(EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1);
    char num[64];
    const char *fields[] = {prev, NULL, NULL, actor, kind, sandbox, detail};
    char seqs[32], tss[32];
    snprintf(seqs, sizeof(seqs), "%lld", (long long)seq);
    snprintf(tss, sizeof(tss), "%lld", (long long)ts);
    fields[1] = seqs;
    fields[2] = tss;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(fields); i++) {
        size_t n = strlen(fields[i]);
        int m = snprintf(num, sizeof(num), "%zu:", n);
        EVP_DigestUpdate(md, num, (size_t)m);
        EVP_DigestUpdate(md, fields[i], n);
    }
    unsigned char digest[32];
    unsigned int dlen = 0;
    GBX_BUG_ON(EVP_DigestFinal_ex(md, digest, &dlen) != 1 || dlen != 32);
    EVP_MD_CTX_free(md);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

/* The chain head (last seq and hash) kept in meta, so deleting the newest records is
 * detected too. */
static int head_get(struct gbx_store *s, int64_t *seq, char hash[65])
{
    sqlite3_stmt *st;
    *seq = 0;
    snprintf(hash, 65, "%s", GENESIS_HASH);
    if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'audit_head'", -1, &st,
                           NULL) != SQLITE_OK)
        return -1;
    int r = 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        long long q = 0;
        char h[65] = "";
        if (v == NULL || sscanf(v, "%lld %64s", &q, h) != 2 || strlen(h) != 64)
            r = -1;
        *seq = q;
        snprintf(hash, 65, "%s", h);
    }
    sqlite3_finalize(st);
    return r;
}

int gbx_store_audit_append(struct gbx_store *s, const struct gbx_audit_entry *e, int64_t *seq,
                           struct gbx_err **err)
{
    /* inside the caller's transaction (the store writer's batch): it commits or rolls back */
    bool own_txn = sqlite3_get_autocommit(s->db) != 0;
    if (own_txn && exec_sql(s, "BEGIN IMMEDIATE", err) < 0)
        return gbx_err_wrap(err, "append audit record");
    int64_t last;
    char prev[65], hash[65];
    if (head_get(s, &last, prev) < 0) {
        gbx_err_set(err, 0, GBX_ERR_INTERNAL,
                    "append audit record: the chain head is damaged "
                    "(run 'glovebox audit verify')");
        goto rollback;
    }
    int64_t n = last + 1, ts = gbx_realtime_ns();
    const char *actor = str_or_empty(e->actor), *kind = str_or_empty(e->kind);
    const char *sb = str_or_empty(e->sandbox), *detail = e->detail ? e->detail : "{}";
    gbx_store_chain_hash(prev, n, ts, actor, kind, sb, detail, hash);

    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO audit (seq, ts_ns, actor, kind, sandbox, detail, "
                           "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK) {
        gbx_store_db_err(s, err, "append audit record");
        goto rollback;
    }
    sqlite3_bind_int64(st, 1, n);
    sqlite3_bind_int64(st, 2, ts);
    sqlite3_bind_text(st, 3, actor, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, sb, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, detail, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, prev, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, hash, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        gbx_store_db_err(s, err, "append audit record");
        goto rollback;
    }
    char head[96];
    snprintf(head, sizeof(head), "%lld %s", (long long)n, hash);
    if (sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO meta (key, value) VALUES "
                           "('audit_head', ?)",
                           -1, &st, NULL) != SQLITE_OK) {
        gbx_store_db_err(s, err, "append audit record");
        goto rollback;
    }
    sqlite3_bind_text(st, 1, head, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        gbx_store_db_err(s, err, "append audit record");
        goto rollback;
    }
    if (own_txn && exec_sql(s, "COMMIT", err) < 0)
        goto rollback;
    if (seq)
        *seq = n;
    return 0;

rollback:
    if (own_txn) {
        char *msg = NULL;
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, &msg);
        sqlite3_free(msg);
    }
    return -1;
}

int gbx_store_audit_verify(struct gbx_store *s, struct gbx_audit_report *rep, struct gbx_err **err)
{
    memset(rep, 0, sizeof(*rep));
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT seq, ts_ns, actor, kind, sandbox, detail, prev_hash, hash "
                           "FROM audit ORDER BY seq",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "verify audit log");
    char prev[65] = GENESIS_HASH, want[65];
    int64_t expect = 1;
    int rc;
#define BAD(seq_, ...)                                                                             \
    do {                                                                                           \
        rep->bad_seq = (seq_);                                                                     \
        snprintf(rep->reason, sizeof(rep->reason), __VA_ARGS__);                                   \
        goto done;                                                                                 \
    } while (0)
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(st, 0);
        const char *cols[6];
        for (int i = 0; i < 6; i++) {
            cols[i] = (const char *)sqlite3_column_text(st, 2 + i);
            if (cols[i] == NULL)
                cols[i] = "";
        }
        rep->rows++;
        if (seq != expect)
            BAD(expect, "record %lld is missing (the next one is %lld)", (long long)expect,
                (long long)seq);
        if (strcmp(cols[4], prev) != 0)
            BAD(seq, "record %lld does not follow record %lld", (long long)seq, (long long)seq - 1);
        gbx_store_chain_hash(prev, seq, sqlite3_column_int64(st, 1), cols[0], cols[1], cols[2],
                             cols[3], want);
        if (strcmp(want, cols[5]) != 0)
            BAD(seq, "record %lld was changed after it was written", (long long)seq);
        snprintf(prev, sizeof(prev), "%s", want);
        expect++;
    }
    if (rc != SQLITE_DONE) {
        sqlite3_finalize(st);
        return gbx_store_db_err(s, err, "verify audit log");
    }
    int64_t head_seq;
    char head_hash[65];
    if (head_get(s, &head_seq, head_hash) < 0)
        BAD(expect, "the chain head is damaged");
    if (head_seq != expect - 1 || strcmp(head_hash, prev) != 0)
        BAD(expect - 1 < head_seq ? expect : head_seq,
            "the log ends at record %lld but its head says %lld: records were removed or "
            "added",
            (long long)(expect - 1), (long long)head_seq);
done:
#undef BAD
    sqlite3_finalize(st);
    return 0;
}

int gbx_store_sandbox_put(struct gbx_store *s, const struct gbx_store_sandbox *sb,
                          struct gbx_err **err)
{
    if (sb->id == NULL || sb->id[0] == '\0')
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "save sandbox: the row has no id");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            s->db,
            "INSERT OR REPLACE INTO sandboxes (id, owner, template, state, "
            "created_ns, updated_ns, spec, host_uid, uid_slot, init_pid, "
            "expires_ns, token, attrs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "save sandbox");
    sqlite3_bind_text(st, 1, sb->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, str_or_empty(sb->owner), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, str_or_empty(sb->template_name), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, str_or_empty(sb->state), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, sb->created_ns);
    sqlite3_bind_int64(st, 6, gbx_realtime_ns());
    sqlite3_bind_text(st, 7, sb->spec ? sb->spec : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, sb->host_uid);
    sqlite3_bind_int64(st, 9, sb->uid_slot);
    sqlite3_bind_int64(st, 10, sb->init_pid);
    if (sb->expires_ns)
        sqlite3_bind_int64(st, 11, sb->expires_ns);
    else
        sqlite3_bind_null(st, 11);
    if (sb->token)
        sqlite3_bind_text(st, 12, sb->token, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 12);
    if (sb->attrs)
        sqlite3_bind_text(st, 13, sb->attrs, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 13);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return gbx_store_db_err(s, err, "save sandbox");
    return 0;
}

int gbx_store_sandbox_delete(struct gbx_store *s, const char *id, struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "DELETE FROM sandboxes WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "delete sandbox");
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return gbx_store_db_err(s, err, "delete sandbox");
    return 0;
}

int64_t gbx_store_sandbox_count(struct gbx_store *s)
{
    sqlite3_stmt *st;
    int64_t n = -1;
    if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM sandboxes", -1, &st, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

int gbx_store_sandbox_each(struct gbx_store *s, gbx_store_sandbox_fn fn, void *arg,
                           struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            s->db,
            "SELECT id, owner, template, state, spec, created_ns, host_uid, "
            "uid_slot, init_pid, coalesce(expires_ns, 0), token, attrs, updated_ns FROM sandboxes "
            "ORDER BY created_ns",
            -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "list sandboxes");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct gbx_store_sandbox row = {
            .id = (const char *)sqlite3_column_text(st, 0),
            .owner = (const char *)sqlite3_column_text(st, 1),
            .template_name = (const char *)sqlite3_column_text(st, 2),
            .state = (const char *)sqlite3_column_text(st, 3),
            .spec = (const char *)sqlite3_column_text(st, 4),
            .created_ns = sqlite3_column_int64(st, 5),
            .host_uid = sqlite3_column_int64(st, 6),
            .uid_slot = sqlite3_column_int64(st, 7),
            .init_pid = sqlite3_column_int64(st, 8),
            .expires_ns = sqlite3_column_int64(st, 9),
            .token = (const char *)sqlite3_column_text(st, 10),
            .attrs = (const char *)sqlite3_column_text(st, 11),
            .updated_ns = sqlite3_column_int64(st, 12),
        };
        if (row.id == NULL)
            continue;
        if (fn(arg, &row) != 0)
            break;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return gbx_store_db_err(s, err, "list sandboxes");
    return 0;
}

int gbx_store_sandbox_set_expiry(struct gbx_store *s, const char *id, int64_t expires_ns,
                                 struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "UPDATE sandboxes SET expires_ns = ?, updated_ns = ? WHERE id = ?", -1,
                           &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "set sandbox timeout");
    if (expires_ns)
        sqlite3_bind_int64(st, 1, expires_ns);
    else
        sqlite3_bind_null(st, 1);
    sqlite3_bind_int64(st, 2, gbx_realtime_ns());
    sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return gbx_store_db_err(s, err, "set sandbox timeout");
    return 0;
}

int gbx_store_sandbox_set_state(struct gbx_store *s, const char *id, const char *state,
                                struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "UPDATE sandboxes SET state = ?, updated_ns = ? WHERE id = ?", -1,
                           &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "set sandbox state");
    sqlite3_bind_text(st, 1, state, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, gbx_realtime_ns());
    sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return gbx_store_db_err(s, err, "set sandbox state");
    return 0;
}

static void sha256_hex(const char *text, char out[65])
{
    unsigned char d[32];
    unsigned int n = 0;
    GBX_BUG_ON(EVP_Digest(text, strlen(text), d, &n, EVP_sha256(), NULL) != 1 || n != 32);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static int apikey_create(struct gbx_store *s, const char *name, char key[GBX_APIKEY_LEN + 1],
                         struct gbx_err **err);

static int loop_busy(void *arg, int tries)
{
    struct gbx_store *s = arg;
    int64_t now = gbx_monotonic_ns();
    /* about a second (20000 x 50 us); once a wait that long was not enough, someone else
     * holds the database: for the next 5 s each write waits about 50 ms, not a second, so that
     * a held database costs the loop one stall, not one per request */
    if (tries >= (now < s->held_until_ns ? 1000 : 20000)) {
        s->held_until_ns = now + 5 * 1000000000ll;
        return 0;
    }
    struct timespec ts = {0, tries < 100 ? 20000 : 50000};
    nanosleep(&ts, NULL);
    return 1;
}

void gbx_store_relax(struct gbx_store *s)
{
    if (exec_sql(s, "PRAGMA synchronous = NORMAL", NULL) == 0)
        s->relaxed = 1;
    /* the event loop's connection: a database held by someone else (a backup, an operator's
     * sqlite3 holding a transaction) stalls the loop for at most a second per write, which
     * then fails with a clear error. The writer thread's batches hold the lock for well under
     * a millisecond: SQLite's own handler would sleep 1, 2, 5, 10 ms... between tries; this
     * one looks again every 50 us */
    sqlite3_busy_handler(s->db, loop_busy, s);
    /* checkpoints (an fsync of the database) are the writer thread's, never the loop's */
    (void)exec_sql(s, "PRAGMA wal_autocheckpoint = 0", NULL);
}

/* API keys stay durable through a power loss even on a relaxed connection: a revoked key
 * must not come back. */
static void strict_begin(struct gbx_store *s)
{
    if (s->relaxed)
        (void)exec_sql(s, "PRAGMA synchronous = FULL", NULL);
}

static void strict_end(struct gbx_store *s)
{
    if (s->relaxed)
        (void)exec_sql(s, "PRAGMA synchronous = NORMAL", NULL);
}

int gbx_store_apikey_create(struct gbx_store *s, const char *name, char key[GBX_APIKEY_LEN + 1],
                            struct gbx_err **err)
{
    strict_begin(s);
    int r = apikey_create(s, name, key, err);
    strict_end(s);
    return r;
}

static int apikey_create(struct gbx_store *s, const char *name, char key[GBX_APIKEY_LEN + 1],
                         struct gbx_err **err)
{
    unsigned char rnd[32];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return gbx_err_sys(err, errno, "create API key: no randomness");
    strcpy(key, "gbx_");
    for (int i = 0; i < 32; i++)
        snprintf(key + 4 + 2 * i, 3, "%02x", rnd[i]);
    char hash[65];
    sha256_hex(key, hash);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO api_keys (id, name, hash, created_ns) VALUES (?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "create API key");
    char id[13];
    snprintf(id, sizeof(id), "%.12s", hash);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, gbx_realtime_ns());
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_CONSTRAINT)
        return gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "an API key named '%s' exists", name);
    if (rc != SQLITE_DONE)
        return gbx_store_db_err(s, err, "create API key");
    return 0;
}

int gbx_store_apikey_check(struct gbx_store *s, const char *key, char *name, size_t namesz)
{
    char hash[65];
    sha256_hex(key, hash);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "SELECT name FROM api_keys WHERE hash = ? AND revoked_ns IS NULL",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    int found = 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        snprintf(name, namesz, "%s", (const char *)sqlite3_column_text(st, 0));
        found = 1;
    }
    sqlite3_finalize(st);
    return found;
}

static int apikey_revoke(struct gbx_store *s, const char *name, struct gbx_err **err);

int gbx_store_apikey_revoke(struct gbx_store *s, const char *name, struct gbx_err **err)
{
    strict_begin(s);
    int r = apikey_revoke(s, name, err);
    strict_end(s);
    return r;
}

static int apikey_revoke(struct gbx_store *s, const char *name, struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "UPDATE api_keys SET revoked_ns = ? WHERE name = ? AND revoked_ns IS "
                           "NULL",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "revoke API key");
    sqlite3_bind_int64(st, 1, gbx_realtime_ns());
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return gbx_store_db_err(s, err, "revoke API key");
    if (sqlite3_changes(s->db) == 0)
        return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "no live API key named '%s'", name);
    return 0;
}

int gbx_store_apikey_each(struct gbx_store *s, gbx_store_apikey_fn fn, void *arg,
                          struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT name, created_ns, coalesce(revoked_ns, 0) FROM api_keys "
                           "ORDER BY created_ns",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "list API keys");
    while (sqlite3_step(st) == SQLITE_ROW) {
        struct gbx_apikey_info k = {(const char *)sqlite3_column_text(st, 0),
                                    sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2)};
        if (k.name && fn(arg, &k) != 0)
            break;
    }
    sqlite3_finalize(st);
    return 0;
}

int gbx_store_apikey_quota_set(struct gbx_store *s, const char *name, const char *quota,
                               struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "UPDATE api_keys SET quota = ? WHERE name = ? AND revoked_ns IS NULL",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "set the quota of API key");
    if (quota && quota[0])
        sqlite3_bind_text(st, 1, quota, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 1);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    strict_begin(s);
    int rc = sqlite3_step(st);
    strict_end(s);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return gbx_store_db_err(s, err, "set the quota of API key");
    if (sqlite3_changes(s->db) == 0)
        return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "no live API key named '%s'", name);
    return 0;
}

int gbx_store_apikey_quota_get(struct gbx_store *s, const char *name, char **quota)
{
    *quota = NULL;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT quota FROM api_keys WHERE name = ? AND revoked_ns IS NULL", -1,
                           &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int found = 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        found = 1;
        const unsigned char *q = sqlite3_column_text(st, 0);
        if (q)
            *quota = gbx_xstrdup((const char *)q);
    }
    sqlite3_finalize(st);
    return found;
}

/* ---- secrets -------------------------------------------------------------------------------- */

int gbx_store_secret_put(struct gbx_store *s, const struct gbx_store_secret *sec, int replace,
                         struct gbx_err **err)
{
    sqlite3_stmt *st;
    const char *sql = replace ? "INSERT OR REPLACE INTO secrets (name, hosts, header, sealed, "
                                "created_ns) VALUES (?, ?, ?, ?, ?)"
                              : "INSERT INTO secrets (name, hosts, header, sealed, created_ns) "
                                "VALUES (?, ?, ?, ?, ?)";
    strict_begin(s);
    int r = 0;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        r = gbx_store_db_err(s, err, "save secret");
        goto out;
    }
    sqlite3_bind_text(st, 1, sec->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, sec->hosts, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, sec->header, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 4, sec->sealed, (int)sec->sealed_len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, sec->created_ns);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_CONSTRAINT)
        r = gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "a secret named '%s' exists", sec->name);
    else if (rc != SQLITE_DONE)
        r = gbx_store_db_err(s, err, "save secret");
out:
    strict_end(s);
    return r;
}

int gbx_store_secret_delete(struct gbx_store *s, const char *name, struct gbx_err **err)
{
    sqlite3_stmt *st;
    strict_begin(s);
    int r = 0;
    if (sqlite3_prepare_v2(s->db, "DELETE FROM secrets WHERE name = ?", -1, &st, NULL) !=
        SQLITE_OK) {
        r = gbx_store_db_err(s, err, "delete secret");
        goto out;
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        r = gbx_store_db_err(s, err, "delete secret");
    else if (sqlite3_changes(s->db) == 0)
        r = gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "no secret named '%s'", name);
out:
    strict_end(s);
    return r;
}

int gbx_store_secret_each(struct gbx_store *s, gbx_store_secret_fn fn, void *arg,
                          struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT name, hosts, header, sealed, created_ns FROM secrets "
                           "ORDER BY name",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "list secrets");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct gbx_store_secret sec = {
            .name = (const char *)sqlite3_column_text(st, 0),
            .hosts = (const char *)sqlite3_column_text(st, 1),
            .header = (const char *)sqlite3_column_text(st, 2),
            .sealed = sqlite3_column_blob(st, 3),
            .sealed_len = (size_t)sqlite3_column_bytes(st, 3),
            .created_ns = sqlite3_column_int64(st, 4),
        };
        if (sec.name && sec.hosts && sec.header && fn(arg, &sec) != 0)
            break;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return gbx_store_db_err(s, err, "list secrets");
    return 0;
}

/* ---- meta values ---------------------------------------------------------------------------- */

char *gbx_store_meta_get(struct gbx_store *s, const char *key)
{
    sqlite3_stmt *st;
    char *v = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL) !=
        SQLITE_OK)
        return NULL;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        v = gbx_xstrdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

int gbx_store_meta_set(struct gbx_store *s, const char *key, const char *value,
                       struct gbx_err **err)
{
    sqlite3_stmt *st;
    strict_begin(s);
    int r = 0;
    const char *sql = value ? "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"
                            : "DELETE FROM meta WHERE key = ?";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        r = gbx_store_db_err(s, err, "save setting");
        goto out;
    }
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (value)
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
        r = gbx_store_db_err(s, err, "save setting");
    sqlite3_finalize(st);
out:
    strict_end(s);
    return r;
}

/* ---- audit queries -------------------------------------------------------------------------- */

int gbx_store_audit_find(struct gbx_store *s, const struct gbx_audit_filter *f,
                         gbx_store_audit_fn fn, void *arg, struct gbx_err **err)
{
    if (f->limit <= 0)
        return 0;
        /* One statement for every filter: a NULL parameter does not narrow. The session is a
         * member of the detail (session.create and session.delete carry it); a detail that is
         * not JSON has none (CASE: json_extract is not reached for it, and would fail). */
#define AUDIT_FIND_REST                                                                            \
    "AND seq > ?1 AND (?3 IS NULL OR actor = ?3) "                                                 \
    "AND (?4 IS NULL OR (?5 = 0 AND kind = ?4) "                                                   \
    "     OR (?5 <> 0 AND substr(kind, 1, length(?4)) = ?4)) "                                     \
    "AND (?6 = 0 OR ts_ns >= ?6) AND (?7 = 0 OR ts_ns < ?7) "                                      \
    "AND (?8 IS NULL OR "                                                                          \
    "     (CASE WHEN json_valid(detail) THEN json_extract(detail, '$.session') END) = ?8) "        \
    "AND (?9 IS NULL OR actor = ?9 OR EXISTS (SELECT 1 FROM sandboxes sb "                         \
    "     WHERE sb.id = audit.sandbox AND sb.owner = ?9 AND audit.ts_ns >= sb.created_ns)) "       \
    "ORDER BY seq LIMIT ?10"
    /* two fixed texts, so that a sandbox's records are read through its index
     * (audit_sandbox) rather than by a walk of the whole log */
    static const char by_sandbox[] = "SELECT seq, ts_ns, actor, kind, sandbox, detail, hash "
                                     "FROM audit WHERE sandbox = ?2 " AUDIT_FIND_REST;
    static const char by_seq[] = "SELECT seq, ts_ns, actor, kind, sandbox, detail, hash "
                                 "FROM audit WHERE ?2 IS NULL " AUDIT_FIND_REST;
#undef AUDIT_FIND_REST
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, f->sandbox ? by_sandbox : by_seq, -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "read audit log");
    sqlite3_bind_int64(st, 1, f->after_seq);
    sqlite3_bind_text(st, 2, f->sandbox, -1, SQLITE_STATIC); /* NULL binds NULL */
    sqlite3_bind_text(st, 3, f->actor, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, f->kind, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, f->kind_prefix != 0);
    sqlite3_bind_int64(st, 6, f->since_ns);
    sqlite3_bind_int64(st, 7, f->until_ns);
    sqlite3_bind_text(st, 8, f->session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 9, f->visible_to, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 10, f->limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct gbx_audit_row row = {
            .seq = sqlite3_column_int64(st, 0),
            .ts_ns = sqlite3_column_int64(st, 1),
            .actor = (const char *)sqlite3_column_text(st, 2),
            .kind = (const char *)sqlite3_column_text(st, 3),
            .sandbox = (const char *)sqlite3_column_text(st, 4),
            .detail = (const char *)sqlite3_column_text(st, 5),
            .hash = (const char *)sqlite3_column_text(st, 6),
        };
        if (fn(arg, &row) != 0)
            break;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return gbx_store_db_err(s, err, "read audit log");
    return 0;
}

int gbx_store_audit_query(struct gbx_store *s, const char *sandbox, const char *kind_prefix,
                          int64_t after_seq, int limit, gbx_store_audit_fn fn, void *arg,
                          struct gbx_err **err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT seq, ts_ns, actor, kind, sandbox, detail FROM audit "
                           "WHERE sandbox = ?1 AND kind >= ?2 AND kind < ?2 || x'ff' "
                           "AND seq > ?3 ORDER BY seq LIMIT ?4",
                           -1, &st, NULL) != SQLITE_OK)
        return gbx_store_db_err(s, err, "read audit log");
    sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, kind_prefix ? kind_prefix : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, after_seq);
    sqlite3_bind_int(st, 4, limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct gbx_audit_row row = {
            .seq = sqlite3_column_int64(st, 0),
            .ts_ns = sqlite3_column_int64(st, 1),
            .actor = (const char *)sqlite3_column_text(st, 2),
            .kind = (const char *)sqlite3_column_text(st, 3),
            .sandbox = (const char *)sqlite3_column_text(st, 4),
            .detail = (const char *)sqlite3_column_text(st, 5),
        };
        if (fn(arg, &row) != 0)
            break;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return gbx_store_db_err(s, err, "read audit log");
    return 0;
}
