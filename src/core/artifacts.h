/* SPDX-License-Identifier: MIT */
/* Artifacts: a file or directory published from a sandbox into a content-addressed store
 * outside it (<state>/artifacts/<sha256>), with a row per artifact (store/artifacts.h).
 * Artifacts outlive their sandbox, session and the daemon (docs/artifacts.md). The service:
 * publish (the capture on a worker thread, core/capture.h; the blob placed, its row
 * written), the rows an actor sees, a blob to read, delete, and the sweep. Everything here is
 * called on the loop; the routes are the front end's (api/artifacts_api.c). */
#ifndef GBX_CORE_ARTIFACTS_H
#define GBX_CORE_ARTIFACTS_H

#include <stdint.h>

#include "core/actor.h"
#include "base/err.h"
#include "store/artifacts.h"

struct gbx_server;
struct gbx_live;

/* What to publish. Strings are copied. */
struct gbx_artifact_spec {
    const char *path;     /* absolute, in the sandbox */
    const char *name;     /* NULL: the path's last component (the path itself for "/") */
    const char *session;  /* NULL, or a session the actor sees */
    const char *metadata; /* a JSON object's text, NULL for {} */
    uint64_t max_bytes;   /* the largest blob (a front end bounds it by --max-upload) */
};

/* A publish that is done: its row (written and durable), the path read and how many of a
 * directory's entries were left out (special files, other file systems). Valid during the
 * callback only. */
struct gbx_artifact_result {
    const struct gbx_store_artifact *row;
    const char *path;
    int64_t skipped;
};
/* On the loop, once: r with err NULL, or err (r NULL) with what failed; a size over
 * max_bytes is LIMIT with errnum EFBIG, unlike a quota's (EDQUOT). */
typedef void (*gbx_artifact_done_fn)(void *arg, const struct gbx_artifact_result *r,
                                     const struct gbx_err *err);

/* Publish spec->path of the running sandbox l as who (copied): the session is checked, the
 * quota admits one more artifact (then its size, once known), and the capture is queued.
 * 0: done is called later (never before this returns); -1 with *err: nothing was queued and
 * done is never called. The caller records artifact.publish: the row is not audited here. */
int gbx_artifacts_publish(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                          const struct gbx_artifact_spec *spec, gbx_artifact_done_fn done,
                          void *arg, struct gbx_err **err) GBX_WUR;

/* fn with the row of artifact id if who sees it: 1, or -1 with *err (NOT_FOUND when there is
 * none that who sees). */
int gbx_artifacts_get(struct gbx_server *s, const struct gbx_actor *who, const char *id,
                      gbx_store_artifact_fn fn, void *arg, struct gbx_err **err) GBX_WUR;
/* fn with each row who sees matching f (its owner, after_ns ignored: who's, and after_id's),
 * oldest first. An after_id that names no artifact who sees is INVALID. 0 or -1 with *err. */
int gbx_artifacts_list(struct gbx_server *s, const struct gbx_actor *who,
                       const struct gbx_store_artifact_filter *f, gbx_store_artifact_fn fn,
                       void *arg, struct gbx_err **err) GBX_WUR;

/* The blob of an artifact, open for reading (the caller closes fd). */
struct gbx_artifact_blob {
    int fd;
    uint64_t size;
    char sha256[65];
    char kind[8]; /* "file" or "dir" (a tar) */
};
/* Open the blob of artifact id if who sees it: 0, or -1 with *err (NOT_FOUND; INTERNAL when
 * its blob is missing). */
int gbx_artifacts_open(struct gbx_server *s, const struct gbx_actor *who, const char *id,
                       struct gbx_artifact_blob *b, struct gbx_err **err) GBX_WUR;

/* Delete artifact id if who sees it, as gbx_artifacts_delete; fn (may be NULL) gets its row
 * first. 1 deleted, or -1 with *err (NOT_FOUND when there is none that who sees). Not
 * audited: the caller records artifact.delete. */
int gbx_artifacts_delete_as(struct gbx_server *s, const struct gbx_actor *who, const char *id,
                            gbx_store_artifact_fn fn, void *arg, struct gbx_err **err) GBX_WUR;
/* For a collector (on the loop): delete the artifact id (any owner) and, when no other row
 * names its blob, remove the blob in the background. 1 deleted, 0 no such artifact, -1 error.
 * Not audited: the caller audits what its policy removed. */
int gbx_artifacts_delete(struct gbx_server *s, const char *id, struct gbx_err **err) GBX_WUR;
/* Remove the blob sha256 in the background if no row names it and no publish is placing it
 * (on the loop; after a gbx_store_artifacts_delete said it is unreferenced). */
void gbx_artifacts_blob_release(struct gbx_server *s, const char *sha256);

/* Tidy the store in the background (on the loop): remove temporary files last written more
 * than tmp_age_ns ago (a publish cut short by a crash; a running publish writes its file
 * continuously) and blobs no row names (placed by a publish whose row was never written).
 * The daemon's first artifact request sweeps with an age of 1 s; a collector may call it
 * periodically with a larger age. */
void gbx_artifacts_sweep(struct gbx_server *s, int64_t tmp_age_ns);

#endif
