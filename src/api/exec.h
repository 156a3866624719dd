/* SPDX-License-Identifier: MIT */
/* POST /v1/sandboxes/{id}/exec: start a process and stream its events as NDJSON. */
#ifndef GBX_API_EXEC_H
#define GBX_API_EXEC_H

struct event_base;
struct evhttp_request;
struct gbx_sandbox;
struct gbx_server;

/* Handle the request for sandbox sb; exec.start and exec.end (or exec.detach, when the
 * client leaves first) are audited through srv. Each stream has its own connection to the sandbox's
 * agent, so a slow client holds back only its own process (see exec.c). */
void gbx_api_exec(struct gbx_server *srv, struct event_base *base, struct evhttp_request *req,
                  struct gbx_sandbox *sb);

#endif
