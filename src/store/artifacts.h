/* SPDX-License-Identifier: MIT */
/* Artifact rows (schema 7). The bytes live outside the database, in content-addressed blobs
 * under <state>/artifacts/<sha256>; many rows may name one blob. These functions touch the
 * rows only: whoever deletes a row removes the blob when no row names it any more. Strings in
 * a callback's row are valid during the callback only. */
#ifndef GBX_STORE_ARTIFACTS_H
#define GBX_STORE_ARTIFACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct gbx_store;

struct gbx_store_artifact {
    const char *id;       /* "art-" + 16 hex digits */
    const char *sha256;   /* 64 lowercase hex digits: the blob's name */
    const char *name;     /* the caller's name for it */
    const char *kind;     /* "file" or "dir" (a tar of the directory) */
    int64_t size_bytes;   /* of the blob */
    const char *owner;    /* API key name, "" for the admin */
    const char *session;  /* or NULL */
    const char *sandbox;  /* the sandbox it came from, or NULL */
    const char *metadata; /* JSON object text, or NULL */
    int64_t created_ns;
};

typedef int (*gbx_store_artifact_fn)(void *arg, const struct gbx_store_artifact *a);

/* Insert a row (durable when it returns). CONFLICT when the id exists. */
int gbx_store_artifacts_insert(struct gbx_store *s, const struct gbx_store_artifact *a,
                               struct gbx_err **err) GBX_WUR;

/* Call fn with the row of id: 1 found, 0 not, -1 error. */
int gbx_store_artifacts_get(struct gbx_store *s, const char *id, gbx_store_artifact_fn fn,
                            void *arg, struct gbx_err **err) GBX_WUR;

/* A listing's filters; NULL fields do not filter. Rows come oldest first (created_ns, then
 * id), or newest first; after_id (with its created_ns in after_ns) starts past that row in
 * that order: the cursor. */
struct gbx_store_artifact_filter {
    const char *owner; /* NULL: every owner (the admin) */
    const char *session, *sandbox, *name;
    const char *after_id;
    int64_t after_ns;
    int limit;        /* <= 0: 100 */
    int newest_first; /* 1: newest first (created_ns, then id, descending) */
};
int gbx_store_artifacts_list(struct gbx_store *s, const struct gbx_store_artifact_filter *f,
                             gbx_store_artifact_fn fn, void *arg, struct gbx_err **err) GBX_WUR;

/* Delete the row of id. 1 deleted, 0 no such row, -1 error. When it deleted one: its blob's
 * sha256 in sha (may be NULL) and whether another row still names that blob in *referenced
 * (may be NULL); both read in the same transaction as the delete. */
int gbx_store_artifacts_delete(struct gbx_store *s, const char *id, char sha[65], bool *referenced,
                               struct gbx_err **err) GBX_WUR;

/* How many rows name the blob sha256 (0: it may be removed). -1 on error. */
int64_t gbx_store_artifacts_refs(struct gbx_store *s, const char *sha256);

/* Retention: every row (all owners) oldest first, from created_ns >= since_ns, at most limit
 * (<= 0: no limit). A collector walks this with the totals below to apply age (stop at the
 * first row younger than the cut-off), count (drop the first count - keep rows) and size
 * (drop until the sum of size_bytes fits) policies, deleting with gbx_store_artifacts_delete. */
int gbx_store_artifacts_by_age(struct gbx_store *s, int64_t since_ns, int limit,
                               gbx_store_artifact_fn fn, void *arg, struct gbx_err **err) GBX_WUR;
/* Number of rows and the sum of their size_bytes (rows, not distinct blobs); owner NULL for
 * all. */
int gbx_store_artifacts_totals(struct gbx_store *s, const char *owner, int64_t *count,
                               int64_t *bytes, struct gbx_err **err) GBX_WUR;

/* The owner of session id, copied into owner: 1 found, 0 no such session, -1 error (for
 * checking the session an artifact names). */
int gbx_store_artifacts_session_owner(struct gbx_store *s, const char *id, char *owner,
                                      size_t ownersz);

#endif
