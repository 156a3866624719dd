/* SPDX-License-Identifier: MIT */
/* /v1/sandboxes/{id}/files[/...]: download (with Range), upload (raw and multipart), stat,
 * list, mkdir, move, remove, watch. Each request has its own connection to the sandbox's
 * agent (aconn.h). */
#ifndef GBX_API_FILES_H
#define GBX_API_FILES_H

#include <stddef.h>

#include "core/actor.h"

struct event_base;
struct evhttp_request;
struct gbx_sandbox;
struct gbx_server;

/* sub: what follows "/files" in the path ("" or "/stat", "/list", ...). */
void gbx_api_files(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                   struct evhttp_request *req, struct gbx_sandbox *sb, const char *sub);

/* The daemon is stopping: end every watch stream with an error event saying why. Other
 * transfers end when the server closes their connections. */
size_t gbx_api_files_drain(const char *why);

#endif
