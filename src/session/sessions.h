/* SPDX-License-Identifier: MIT */
/* Sessions: the durable record of an agent's work (an append-only, hash-chained log of every
 * tool call, its result and the lifecycle of its sandbox) and the one call a harness makes,
 * execute(tool_use_id, name, input), idempotent per tool_use_id. A session owns at most one
 * live sandbox; when it dies, the next call gets a new one with the workspace restored.
 *
 * The engine knows no HTTP: api/sessions_api.c is its front end (/v1/sessions). What ends later
 * ends through a callback the front end gave; a request is never held here. Runs on the loop.
 */
#ifndef GBX_SESSION_SESSIONS_H
#define GBX_SESSION_SESSIONS_H

#include <jansson.h>
#include <stdint.h>

#include "core/server.h"

struct gbx_sessions;
struct gbx_session;
struct gbx_session_follower;

int gbx_sessions_new(struct gbx_server *srv, struct event_base *base, const char *state_dir,
                     struct gbx_sessions **out, struct gbx_err **err) GBX_WUR;
void gbx_sessions_free(struct gbx_sessions *all);

/* How a call that ends later ends: body (a new reference for the callee; NULL for none, and
 * always with err) or err. */
typedef void (*gbx_session_done_fn)(void *arg, json_t *body, const struct gbx_err *err);

/* A new session for who from spec (the create request: a sandbox's create body plus
 * 'workdir'; stolen): checked, admitted by the quota and recorded now (-1 and *err: nothing
 * was made, done is not called); its sandbox is made off the loop and the workdir in it, then
 * done gets the session's JSON once its session.create record is durable, or err. */
int gbx_sessions_create(struct gbx_sessions *all, const struct gbx_actor *who, json_t *spec,
                        gbx_session_done_fn done, void *arg, struct gbx_err **err) GBX_WUR;
/* A session who may see, by its id (NULL: none, or not theirs). */
struct gbx_session *gbx_sessions_find(struct gbx_sessions *all, const struct gbx_actor *who,
                                      const char *id);
/* The sessions who sees, as a JSON array (new reference). */
json_t *gbx_sessions_list(struct gbx_sessions *all, const struct gbx_actor *who);
/* {id, created_at, workdir, state, sandbox_id, spec, queued} (new reference). */
json_t *gbx_session_json(struct gbx_session *ses);
/* Delete ses as who: its row first (-1 and *err when it cannot be: the session stays, whole),
 * then its sandbox, workspace copy and log; done(arg, NULL, err) once the session.delete
 * record is durable (err: it was done, but its record could not be written). */
int gbx_session_delete(struct gbx_session *ses, const struct gbx_actor *who,
                       gbx_session_done_fn done, void *arg, struct gbx_err **err) GBX_WUR;

/* The stored events after seq after, at most limit, as a JSON array (new reference); *last:
 * the seq of the last (after when none). NULL and *err when the log cannot be read. */
json_t *gbx_session_events(struct gbx_session *ses, int64_t after, int limit, int64_t *last,
                           struct gbx_err **err);
/* Each event appended from now on: event(arg, ev) (ev borrowed); end(arg) once when the
 * session is deleted or the engine drains (f is gone then). */
struct gbx_session_follow_ops {
    void (*event)(void *arg, const json_t *ev);
    void (*end)(void *arg);
};
struct gbx_session_follower *
gbx_session_follow(struct gbx_session *ses, const struct gbx_session_follow_ops *ops, void *arg);
/* The follower stops (its client left); end is not called. */
void gbx_session_unfollow(struct gbx_session_follower *f);
/* {ok, events, bad_seq?, reason?}: the log's hash chain checked (new reference), or NULL. */
json_t *gbx_session_verify(struct gbx_session *ses, struct gbx_err **err);

/* The answer to an execute: result (borrowed; replayed: the stored result of an earlier call
 * with the tool_use_id) or err (the call was not run, or its result not recorded). */
typedef void (*gbx_session_result_fn)(void *arg, const json_t *result, int replayed,
                                      const struct gbx_err *err);
/* Run tool name with input (borrowed, a reference is taken; NULL: {}) as call tool_use_id, after
 * the calls queued before it; a retry of a finished call gets its stored result, one of a running
 * or queued call waits for it. -1 and *err (done not called): a bad tool_use_id, or one in use by a
 * different call. */
int gbx_session_execute(struct gbx_session *ses, const char *tool_use_id, const char *name,
                        json_t *input, gbx_session_result_fn done, void *arg,
                        struct gbx_err **err) GBX_WUR;

/* The daemon is stopping: every follower's stream ends, every request waiting on a call hears
 * so, and no queued call starts. Returns how many were ended. */
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
