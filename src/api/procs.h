/* SPDX-License-Identifier: MIT */
/* /v1/sandboxes/{id}/processes[/...]: list processes, attach to one (a stream of its events),
 * send and close stdin, signal, resize. */
#ifndef GBX_API_PROCS_H
#define GBX_API_PROCS_H

#include "core/actor.h"

struct event_base;
struct evhttp_request;
struct gbx_sandbox;
struct gbx_server;

/* sub: what follows "/processes" in the path ("" or "/{proc}", "/{proc}/stdin", ...). */
void gbx_api_procs(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                   struct evhttp_request *req, struct gbx_sandbox *sb, const char *sub);

#endif
