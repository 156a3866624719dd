/* SPDX-License-Identifier: MIT */
/* Sessions: the durable record of an agent's work (an append-only, hash-chained log of every
 * tool call, its result and the lifecycle of its sandbox) and the one call a harness makes,
 * execute(tool_use_id, name, input), idempotent per tool_use_id. A session owns at most one
 * live sandbox; when it dies, the next call gets a new one with the workspace restored.
 *
 *   POST   /v1/sessions                     {template?, memory?, ..., network?, workdir?} -> 201
 *   GET    /v1/sessions                     the caller's sessions
 *   GET    /v1/sessions/{id}                {id, sandbox_id, workdir, ...}
 *   DELETE /v1/sessions/{id}                its sandbox and its log
 *   GET    /v1/sessions/{id}/events         ?after=SEQ&limit=N; ?follow=1 (or SSE): live
 *   POST   /v1/sessions/{id}/execute        {tool_use_id, name, input} -> {content, is_error}
 */
#ifndef GBX_SESSION_SESSIONS_H
#define GBX_SESSION_SESSIONS_H

#include <event2/http.h>
#include <stdint.h>

#include "core/server.h"

struct gbx_sessions;

int gbx_sessions_new(struct gbx_server *srv, struct event_base *base, const char *state_dir,
                     struct gbx_sessions **out, struct gbx_err **err) GBX_WUR;
void gbx_sessions_free(struct gbx_sessions *all);
/* /v1/sessions and below */
void gbx_sessions_route(struct gbx_sessions *all, const struct gbx_actor *who,
                        struct evhttp_request *req, const char *path);
/* End live event streams (the daemon is stopping). Returns how many. */
size_t gbx_sessions_drain(struct gbx_sessions *all);

/* For retention (core/gc.c, through gbx_session_ops; struct gbx_session_info is the core's). */
void gbx_sessions_each_info(struct gbx_sessions *all,
                            void (*fn)(void *arg, const struct gbx_session_info *i), void *arg);
/* Delete a session as DELETE does (its sandbox, workspace copy and log), unless a call is
 * running. 1 deleted, 0 not (no such session, or busy). */
int gbx_sessions_delete(struct gbx_sessions *all, const char *id, const char *why);
/* The sessions owner keeps (its quota counts them). */
uint64_t gbx_sessions_count(const struct gbx_sessions *all, const char *owner);

/* What the core may ask of the engine (core/server.h): pass to gbx_server_set_sessions. */
extern const struct gbx_session_ops gbx_sessions_ops;

#endif
