/* SPDX-License-Identifier: MIT */
/* The durable store: one SQLite database in WAL mode under the state dir, its schema and
 * migrations, and the hash-chained audit log. (Typed queries for sandboxes, templates and
 * API keys join as the daemon uses them.) */
#ifndef GBX_STORE_STORE_H
#define GBX_STORE_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct gbx_store;

/* Open (creating if needed) the database at path, switch it to WAL and bring the schema to
 * the current version. A database from a newer Glovebox is refused rather than damaged. */
int gbx_store_open(const char *path, struct gbx_store **out, struct gbx_err **err) GBX_WUR;
void gbx_store_close(struct gbx_store *s);
/* Run one or more SQL statements with no results on the store's connection (transaction
 * control for callers that group writes: "BEGIN IMMEDIATE", "SAVEPOINT x", "COMMIT" ...).
 * sql is trusted text, never built from input. */
int gbx_store_exec(struct gbx_store *s, const char *sql, struct gbx_err **err) GBX_WUR;
/* Whether the connection is inside a transaction. It is not any more once SQLite has rolled
 * one back on its own (after an I/O error or a full disk, for instance). */
bool gbx_store_in_transaction(struct gbx_store *s);
/* The schema version the database is at (PRAGMA user_version). */
int gbx_store_schema_version(struct gbx_store *s);
/* Commit with synchronous = NORMAL on this connection (WAL): a commit survives the process
 * being killed, not a power loss of the host. For the daemon's sandbox rows: a host that
 * loses power loses its sandboxes too, and the next daemon cleans up whatever a row says.
 * API key changes stay fully durable. And wait at most 1 s (not 5) for a database another
 * connection holds: this is the event loop's connection. */
void gbx_store_relax(struct gbx_store *s);
/* The newest schema version this build knows. */
int gbx_store_schema_latest(void);

/* A sandbox row: what the daemon needs to find a sandbox again after a restart. */
struct gbx_store_sandbox {
    const char *id;
    const char *owner; /* API key name, or "" for the admin socket */
    const char *template_name;
    const char *state; /* "running", ... */
    const char *spec;  /* JSON of the create request, as normalised */
    int64_t created_ns;
    int64_t host_uid, uid_slot, init_pid;
    int64_t expires_ns; /* 0: no timeout */
    const char *token;  /* the sandbox's secret, or NULL */
    const char *attrs;  /* JSON object of front-end attributes, or NULL */
    int64_t updated_ns; /* read only: when the row last changed */
};
int gbx_store_sandbox_put(struct gbx_store *s, const struct gbx_store_sandbox *sb,
                          struct gbx_err **err) GBX_WUR;
int gbx_store_sandbox_delete(struct gbx_store *s, const char *id, struct gbx_err **err) GBX_WUR;
int gbx_store_sandbox_set_expiry(struct gbx_store *s, const char *id, int64_t expires_ns,
                                 struct gbx_err **err) GBX_WUR;
/* The state column only ("running", "paused", ...): nothing else of the row is touched. */
int gbx_store_sandbox_set_state(struct gbx_store *s, const char *id, const char *state,
                                struct gbx_err **err) GBX_WUR;
/* Call fn for every sandbox row, oldest first; the row's strings live until fn returns.
 * A non-zero return from fn stops the walk. */
typedef int (*gbx_store_sandbox_fn)(void *arg, const struct gbx_store_sandbox *row);
int gbx_store_sandbox_each(struct gbx_store *s, gbx_store_sandbox_fn fn, void *arg,
                           struct gbx_err **err) GBX_WUR;
/* Number of sandbox rows (all owners). */
int64_t gbx_store_sandbox_count(struct gbx_store *s);

/* API keys. Only a key's sha256 is stored; the key itself is returned once, at creation. */
#define GBX_APIKEY_LEN 68 /* "gbx_" + 64 hex digits */
int gbx_store_apikey_create(struct gbx_store *s, const char *name, char key[GBX_APIKEY_LEN + 1],
                            struct gbx_err **err) GBX_WUR;
/* The name of the live (not revoked) key, copied into name; 1 found, 0 not, -1 error. */
int gbx_store_apikey_check(struct gbx_store *s, const char *key, char *name, size_t namesz);
int gbx_store_apikey_revoke(struct gbx_store *s, const char *name, struct gbx_err **err) GBX_WUR;
/* A key's own quotas, as text ("sandboxes=10,memory=4G"; parsed by api/limits.h); NULL or ""
 * clears them (the daemon's apply). -1 with *err NOT_FOUND for no live key of that name. */
int gbx_store_apikey_quota_set(struct gbx_store *s, const char *name, const char *quota,
                               struct gbx_err **err) GBX_WUR;
/* 1 with *quota (malloc'd, NULL when the key has none of its own), 0 no live key, -1 error. */
int gbx_store_apikey_quota_get(struct gbx_store *s, const char *name, char **quota);
struct gbx_apikey_info {
    const char *name;
    int64_t created_ns, revoked_ns; /* revoked_ns 0: live */
};
typedef int (*gbx_store_apikey_fn)(void *arg, const struct gbx_apikey_info *k);
int gbx_store_apikey_each(struct gbx_store *s, gbx_store_apikey_fn fn, void *arg,
                          struct gbx_err **err) GBX_WUR;

/* One audit record. Strings may be NULL (stored as empty). detail is a JSON text. */
struct gbx_audit_entry {
    const char *actor;   /* who asked: an API key's name, "admin", "system" */
    const char *kind;    /* "sandbox.create", "exec.start", "exec.end", ... */
    const char *sandbox; /* the sandbox concerned, or NULL */
    const char *detail;  /* JSON object with the specifics */
};

/* Append a record, chained to the previous one: hash = sha256(previous hash || the
 * record's fields, each length-prefixed). Returns its sequence number in *seq (may be
 * NULL). Durable when it returns, unless the connection is already inside a transaction
 * (gbx_store_in_transaction): then it joins that one and the caller commits or, on
 * failure, rolls back (the chain head is read inside the transaction either way). The
 * sandbox writes below are single statements and join an open transaction the same way. */
int gbx_store_audit_append(struct gbx_store *s, const struct gbx_audit_entry *e, int64_t *seq,
                           struct gbx_err **err) GBX_WUR;

struct gbx_audit_report {
    int64_t rows;     /* records checked */
    int64_t bad_seq;  /* first record that fails, or 0 when the chain is intact */
    char reason[160]; /* what is wrong with it */
};

/* Walk the whole chain: every record's hash must match its content and its predecessor,
 * sequence numbers must be contiguous from 1, and the last record must be the chain head
 * recorded alongside it. An edited, inserted or deleted record (tail included) is
 * reported; returns 0 when the walk itself worked (look at report->bad_seq). */
int gbx_store_audit_verify(struct gbx_store *s, struct gbx_audit_report *report,
                           struct gbx_err **err) GBX_WUR;

/* An audit record as read back. Strings valid during the callback only. */
struct gbx_audit_row {
    int64_t seq, ts_ns;
    const char *actor, *kind, *sandbox, *detail;
    const char *hash; /* the record's link in the chain (hex sha256) */
};
typedef int (*gbx_store_audit_fn)(void *arg, const struct gbx_audit_row *r);

/* What gbx_store_audit_find reads: every member narrows, and its zero value does not (an
 * all-zero filter is every record, oldest first, up to limit). Values are bound to one fixed
 * statement, never pasted into SQL. */
struct gbx_audit_filter {
    const char *sandbox; /* the record's sandbox, exactly */
    const char *session; /* the "session" member of the record's detail, exactly */
    const char *actor;   /* who asked ("admin", "system", an API key's name), exactly */
    const char *kind;    /* the kind, exactly; or its start when kind_prefix is set */
    int kind_prefix;
    int64_t since_ns; /* ts_ns >= since_ns (0: no bound) */
    int64_t until_ns; /* ts_ns < until_ns (0: no bound) */
    int64_t after_seq;
    int limit; /* at most this many (<= 0: none) */
    /* Non-NULL: only what that API key may read: the records it is the actor of, and those
     * about a sandbox it owns now (a row of the sandboxes table with that owner), from that
     * sandbox's creation on, so a record about an earlier sandbox of the same id, another
     * key's, is not one of them. Records by others about its sandboxes that are gone (the
     * reaper's, the admin's) are not either: the store no longer knows who owned them. */
    const char *visible_to;
};
/* Records matching f, oldest first. fn returns non-zero to stop. */
int gbx_store_audit_find(struct gbx_store *s, const struct gbx_audit_filter *f,
                         gbx_store_audit_fn fn, void *arg, struct gbx_err **err) GBX_WUR;
/* Records of one sandbox whose kind starts with kind_prefix ("" for all), seq > after_seq,
 * oldest first, at most limit. fn returns non-zero to stop. */
int gbx_store_audit_query(struct gbx_store *s, const char *sandbox, const char *kind_prefix,
                          int64_t after_seq, int limit, gbx_store_audit_fn fn, void *arg,
                          struct gbx_err **err) GBX_WUR;

/* Egress credentials, sealed by the caller (the store never sees a value). */
struct gbx_store_secret {
    const char *name;
    const char *hosts;  /* JSON array of host patterns */
    const char *header; /* "Authorization: Bearer ${secret}" */
    const void *sealed;
    size_t sealed_len;
    int64_t created_ns;
};
/* Durable when it returns (synchronous=FULL). CONFLICT when the name exists and !replace. */
int gbx_store_secret_put(struct gbx_store *s, const struct gbx_store_secret *sec, int replace,
                         struct gbx_err **err) GBX_WUR;
int gbx_store_secret_delete(struct gbx_store *s, const char *name, struct gbx_err **err) GBX_WUR;
typedef int (*gbx_store_secret_fn)(void *arg, const struct gbx_store_secret *sec);
int gbx_store_secret_each(struct gbx_store *s, gbx_store_secret_fn fn, void *arg,
                          struct gbx_err **err) GBX_WUR;

/* Sessions (sessions.c). Strings valid during a callback only. */
struct gbx_store_session {
    const char *id, *owner, *spec, *workdir;
    const char *sandbox; /* its live sandbox, or NULL */
    const char *state;   /* "active" */
    int64_t created_ns, head_seq;
};
/* Insert a session, or update its sandbox and state (the rest is fixed at creation). */
int gbx_store_session_put(struct gbx_store *s, const struct gbx_store_session *ses,
                          struct gbx_err **err) GBX_WUR;
/* The session and its whole log. */
int gbx_store_session_delete(struct gbx_store *s, const char *id, struct gbx_err **err) GBX_WUR;
typedef int (*gbx_store_session_fn)(void *arg, const struct gbx_store_session *ses);
int gbx_store_session_each(struct gbx_store *s, gbx_store_session_fn fn, void *arg,
                           struct gbx_err **err) GBX_WUR;
/* Append an event to a session's chained log (its own transaction): type ("tool.call",
 * "tool.result", "sandbox.started", ...), the tool call's id or NULL, data a JSON text.
 * CONFLICT for a second tool.result of one tool_use_id. */
int gbx_store_session_append(struct gbx_store *s, const char *session, const char *type,
                             const char *tool_use_id, const char *data, int64_t *seq,
                             struct gbx_err **err) GBX_WUR;
struct gbx_store_event {
    int64_t seq, ts_ns;
    const char *type, *tool_use_id /* or NULL */, *data, *hash;
};
typedef int (*gbx_store_event_fn)(void *arg, const struct gbx_store_event *ev);
/* Events with seq > after, oldest first, at most limit. */
int gbx_store_session_events(struct gbx_store *s, const char *session, int64_t after, int limit,
                             gbx_store_event_fn fn, void *arg, struct gbx_err **err) GBX_WUR;
/* The stored tool.result data of a call (malloc'd), or NULL. */
char *gbx_store_session_result(struct gbx_store *s, const char *session, const char *tool_use_id);
/* The stored tool.call data of a call (malloc'd: {"name": ..., "input": ...}), or NULL. */
char *gbx_store_session_call(struct gbx_store *s, const char *session, const char *tool_use_id);
/* Walk a session's chain like gbx_store_audit_verify. */
int gbx_store_session_verify(struct gbx_store *s, const char *session,
                             struct gbx_audit_report *report, struct gbx_err **err) GBX_WUR;

/* Small durable settings (the meta table). get: malloc'd value or NULL; set NULL deletes. */
char *gbx_store_meta_get(struct gbx_store *s, const char *key);
int gbx_store_meta_set(struct gbx_store *s, const char *key, const char *value,
                       struct gbx_err **err) GBX_WUR;

#endif
