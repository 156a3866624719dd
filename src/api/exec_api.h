/* SPDX-License-Identifier: MIT */
/* The native exec route (exec_api.c). */
#ifndef GBX_API_EXEC_API_H
#define GBX_API_EXEC_API_H

#include <jansson.h>

struct event_base;
struct evhttp_request;
struct gbx_actor;
struct gbx_sandbox;
struct gbx_server;

/* Handle the request for sandbox sb, whose processes start with sandbox_env ({"K": "V"} set
 * at create, or NULL; the request's env goes on top; borrowed); exec.start and exec.end (or
 * exec.detach, when the client leaves first; exec.kill then exec.end with
 * "kill_on_disconnect") are audited through srv. Each stream has its own
 * connection to the sandbox's agent, so a slow client holds back only its own process (see
 * http/exec.c). */
void gbx_api_exec(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                  struct evhttp_request *req, struct gbx_sandbox *sb, json_t *sandbox_env);

#endif
