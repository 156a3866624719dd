/* SPDX-License-Identifier: MIT */
/* Snapshot rows (schema 6): immutable filesystem layers and hibernation images, under
 * <state>/snapshots/<id>/. The daemon keeps them in memory and writes through. */
#ifndef GBX_STORE_SNAPSHOTS_H
#define GBX_STORE_SNAPSHOTS_H

#include <stdint.h>

#include "base/err.h"

struct gbx_store;

/* Strings valid during a callback only; name, parent and attrs may be NULL. */
struct gbx_store_snapshot {
    const char *id, *name, *owner;
    const char *kind;    /* "snapshot", "fork" or "hibernate" */
    const char *sandbox; /* the sandbox it was taken from */
    const char *parent;  /* the snapshot below it, or NULL */
    const char *template_name;
    const char *state; /* "ready" or "deleting" */
    const char *attrs; /* JSON object, or NULL */
    int64_t created_ns;
    uint64_t size_bytes;
};

/* Insert or replace. */
int gbx_store_snapshot_put(struct gbx_store *s, const struct gbx_store_snapshot *r,
                           struct gbx_err **err) GBX_WUR;
int gbx_store_snapshot_delete(struct gbx_store *s, const char *id, struct gbx_err **err) GBX_WUR;
typedef int (*gbx_store_snapshot_fn)(void *arg, const struct gbx_store_snapshot *r);
/* Every row, oldest first; a non-zero return from fn stops (and is returned). */
int gbx_store_snapshot_each(struct gbx_store *s, gbx_store_snapshot_fn fn, void *arg,
                            struct gbx_err **err);

#endif
