/* SPDX-License-Identifier: MIT */
/* Internals shared by the store's files (store.c: schema, sandboxes, keys, audit, secrets;
 * sessions.c: session logs). */
#ifndef GBX_STORE_INT_H
#define GBX_STORE_INT_H

#include <sqlite3.h>
#include <stdint.h>

#include "store/store.h"

#define GBX_STORE_GENESIS_HASH "0000000000000000000000000000000000000000000000000000000000000000"

struct gbx_store {
    sqlite3 *db;
    char *path;
    int relaxed;           /* synchronous = NORMAL (see gbx_store_relax) */
    int64_t held_until_ns; /* the loop's: someone else held the database lately (loop_busy) */
};

/* Fill *err from the connection's last error ("what: message"); returns -1. */
int gbx_store_db_err(struct gbx_store *s, struct gbx_err **err, const char *what);
/* sha256(prev || len:field ...) as lowercase hex: the chain of the audit log and of every
 * session log. */
void gbx_store_chain_hash(const char *prev, int64_t seq, int64_t ts, const char *actor,
                          const char *kind, const char *sandbox, const char *detail, char out[65]);

#endif
