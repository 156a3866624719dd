/* SPDX-License-Identifier: MIT */
/* The snapshot routes (snapshots_api.c) over the snapshot service (core/snapshots.h). */
#ifndef GBX_API_SNAPSHOTS_API_H
#define GBX_API_SNAPSHOTS_API_H

struct evhttp_request;
struct gbx_actor;
struct gbx_live;
struct gbx_server;

/* /v1/snapshots... */
void gbx_api_snapshots(struct gbx_server *s, const struct gbx_actor *who,
                       struct evhttp_request *req, const char *path);
/* /v1/sandboxes/{id}/snapshots|fork|rollback (sub: "/snapshots", ...). Returns 0 when sub is
 * not one of them (nothing answered). */
int gbx_api_snapshots_sandbox(struct gbx_server *s, const struct gbx_actor *who,
                              struct evhttp_request *req, struct gbx_live *l, const char *sub);

#endif
