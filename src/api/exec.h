/* SPDX-License-Identifier: MIT */
/* POST /v1/sandboxes/{id}/exec: start a process and stream its events (NDJSON or SSE), or
 * run it and reply with its output once it exited ("wait"). Also the attach stream of
 * GET /v1/sandboxes/{id}/processes/{proc}/stream. */
#ifndef GBX_API_EXEC_H
#define GBX_API_EXEC_H

#include <stdint.h>

#include <stddef.h>

struct event_base;
struct evhttp_request;
struct gbx_sandbox;
struct gbx_server;

/* Handle the request for sandbox sb; exec.start and exec.end (or exec.detach, when the
 * client leaves first) are audited through srv. Each stream has its own connection to the
 * sandbox's agent, so a slow client holds back only its own process (see exec.c). */
void gbx_api_exec(struct gbx_server *srv, struct event_base *base, struct evhttp_request *req,
                  struct gbx_sandbox *sb);

/* Attach to the running process proc of sb and stream its events from here on. This is a
 * takeover: the stream that had the process's output ends with a "detached" event.
 * An unknown or finished process is a 404. Audited as process.attach. */
void gbx_api_exec_attach(struct gbx_server *srv, struct event_base *base,
                         struct evhttp_request *req, struct gbx_sandbox *sb, uint32_t proc);

/* Let go of every stream still open, those kept only to enforce a timeout after their
 * client left included (those timeouts are then not enforced). For the daemon's shutdown,
 * after its HTTP servers were freed, before the event base is. */
void gbx_api_exec_shutdown(void);
/* The daemon is stopping: end every stream cleanly with an error event saying why (and the
 * process handle to attach to later); requests still waiting get a 503. */
size_t gbx_api_exec_drain(const char *why);

#endif
