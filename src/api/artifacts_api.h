/* SPDX-License-Identifier: MIT */
/* Artifacts: a file or directory published from a sandbox into a content-addressed store
 * outside it (<state>/artifacts/<sha256>), with a row per artifact (store/artifacts.h).
 * Artifacts outlive their sandbox, session and the daemon (docs/artifacts.md). */
#ifndef GBX_API_ARTIFACTS_API_H
#define GBX_API_ARTIFACTS_API_H

#include <event2/http.h>
#include <stdint.h>

#include "core/server.h"
#include "base/err.h"

/* POST /v1/sandboxes/{id}/artifacts (id as it appears in the path, unchecked). */
void gbx_api_sandbox_artifacts(struct gbx_server *s, const struct gbx_actor *who,
                               struct evhttp_request *req, const char *id);
/* /v1/artifacts, /v1/artifacts/{id}, /v1/artifacts/{id}/content */
void gbx_api_artifacts(struct gbx_server *s, const struct gbx_actor *who,
                       struct evhttp_request *req, const char *path);

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
