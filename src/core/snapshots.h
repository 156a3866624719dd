/* SPDX-License-Identifier: MIT */
/* Filesystem snapshots of sandboxes: take (the sandbox frozen while its changes are copied
 * out), list, delete (in the background, once nothing stacks on it), clone N sandboxes from
 * one, fork a live sandbox, roll a sandbox back, make a template of one. docs/snapshots.md;
 * the routes are api/snapshots_api.c.
 *
 * A snapshot is the sandbox's overlay upper, copied (uids shifted to the sandbox's view)
 * into <state>/snapshots/<id>/layer, and stacked on its parent: a sandbox created from a
 * snapshot mounts [snapshot, parent, ..., template] as its read-only lowers, so taking one
 * costs what changed since the sandbox started, and creating from one costs nothing more
 * than a create. */
#ifndef GBX_CORE_SNAPSHOTS_H
#define GBX_CORE_SNAPSHOTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/actor.h"
#include "base/err.h"

#include <jansson.h>

struct gbx_server;
struct gbx_live;
struct gbx_snapshots;

int gbx_snapshots_new(struct gbx_server *s, struct gbx_snapshots **out,
                      struct gbx_err **err) GBX_WUR;
void gbx_snapshots_free(struct gbx_snapshots *ss);

/* The layers a sandbox created from snapshot ref (id or name, visible to who)
 * stacks on its template, top first: *layers is a malloc'd array of malloc'd paths (free
 * with gbx_snapshots_layers_free), *tmpl and *id point into the registry. */
int gbx_snapshots_layers(struct gbx_snapshots *ss, const struct gbx_actor *who, const char *ref,
                         char ***layers, size_t *nlayers, const char **tmpl, const char **id,
                         struct gbx_err **err) GBX_WUR;
void gbx_snapshots_layers_free(char **layers, size_t n);

/* Snapshot sandbox l (frozen while what it changed is copied out, off the loop), then call
 * done on the loop with the new snapshot's id, or with the error (once its audit record is
 * durable: an answer that says it was made is true). */
typedef void (*gbx_snapshot_taken_fn)(void *arg, const char *id, const struct gbx_err *err);
void gbx_snapshots_take(struct gbx_snapshots *ss, const struct gbx_actor *who, struct gbx_live *l,
                        const char *name, const char *kind, gbx_snapshot_taken_fn done, void *arg);
/* A snapshot as the native API shows it, by id whoever owns it (NULL when it is gone), or by
 * id or name as who sees it. New references. */
json_t *gbx_snapshots_json(struct gbx_snapshots *ss, const char *id);
json_t *gbx_snapshots_json_of(struct gbx_snapshots *ss, const struct gbx_actor *who,
                              const char *ref);
/* The ready snapshots who sees, of sandbox and of kind (NULL: any), as a JSON array. */
json_t *gbx_snapshots_list_json(struct gbx_snapshots *ss, const struct gbx_actor *who,
                                const char *sandbox, const char *kind);
/* Does a live sandbox or another snapshot stack on snapshot id? */
int gbx_snapshots_in_use(struct gbx_snapshots *ss, const char *id);
/* A template named name of snapshot ref's files (its layers copied, on the template the
 * snapshot is of), made off the loop and audited as who; done gets what was made, or err. */
struct gbx_snapshot_template {
    char *name, *base, *source;
    size_t nlayers;
};
typedef void (*gbx_snapshot_template_fn)(void *arg, const struct gbx_snapshot_template *t,
                                         const struct gbx_err *err);
void gbx_snapshots_make_template(struct gbx_snapshots *ss, const struct gbx_actor *who,
                                 const char *ref, const char *name, gbx_snapshot_template_fn done,
                                 void *arg);
/* A snapshot visible to who by id or name (id NULL when none); valid until the
 * next call into the registry. */
struct gbx_snapshot_ref {
    const char *id, *name, *sandbox;
    int64_t created_ns;
};
struct gbx_snapshot_ref gbx_snapshots_get(struct gbx_snapshots *ss, const struct gbx_actor *who,
                                          const char *ref);
void gbx_snapshots_each_visible(struct gbx_snapshots *ss, const struct gbx_actor *who,
                                void (*fn)(void *arg, const struct gbx_snapshot_ref *r), void *arg);

/* A snapshot (any state: deleted ones may still be stacked on) taken of a sandbox of
 * template tmpl, or NULL: such a template must not go. */
const char *gbx_snapshots_of_template(struct gbx_snapshots *ss, const char *tmpl);

/* Remove deleted snapshots that nothing stacks on any more (in the background). */
void gbx_snapshots_sweep(struct gbx_snapshots *ss);
/* A sandbox being adopted that a snapshot of the last daemon left frozen (the daemon died
 * during the copy) is thawed: 1 when it was, 0 when it was not frozen for one, -1 on error
 * (logged). */
struct gbx_sandbox;
int gbx_snapshots_unfreeze_stale(struct gbx_sandbox *sb);

/* For retention (gc.c): every snapshot, oldest first. */
struct gbx_snapshot_info {
    const char *id, *name, *kind, *sandbox, *state;
    int64_t created_ns;
    uint64_t size_bytes;
    int in_use; /* a live sandbox or another snapshot stacks on it */
};
/* The snapshots and forks owner keeps, and those being taken (not hibernation images): its
 * quota counts them. */
uint64_t gbx_snapshots_count(const struct gbx_snapshots *ss, const char *owner);
void gbx_snapshots_each(struct gbx_snapshots *ss,
                        void (*fn)(void *arg, const struct gbx_snapshot_info *i), void *arg);
/* Delete one as DELETE does (as the system). 0, or -1 with *err. */
int gbx_snapshots_delete(struct gbx_snapshots *ss, const char *id, struct gbx_err **err) GBX_WUR;

#endif
