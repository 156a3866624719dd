/* SPDX-License-Identifier: MIT */
/* The Claude Managed Agents self-hosted environment worker: its protocol decisions as pure
 * functions with no I/O (docs: /work/shared/protocols/managed-agents-worker.md, "the spec"
 * below). The loop that polls, heartbeats, streams and executes is src/cli/worker.c; its
 * HTTPS client is src/worker/http.c.
 *
 * Ownership: a json_t * argument is borrowed; a json_t * result is a new reference the
 * caller owns; char * results are malloc'd and the caller frees them. */
#ifndef GBX_WORKER_WORKER_H
#define GBX_WORKER_WORKER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

#define GBX_WORKER_BETA "managed-agents-2026-04-01"
#define GBX_WORKER_VERSION "2023-06-01"
/* The literal expected_last_heartbeat of the first beat (spec §4). */
#define GBX_WORKER_NO_HEARTBEAT "NO_HEARTBEAT"
/* The result text when a tool said nothing: content is never empty (spec §5.4). */
#define GBX_WORKER_NO_OUTPUT "(no output)"

/* ---- the work item secret (spec §2.1) --------------------------------------------------- */

/* Decode a work item's secret: base64url (padding optional) of a JSON object whose
 * sessions_token is a non-empty string and whose api_base_url, when present, is an http(s)
 * URL. Returns 0 with *token (and *base_url, NULL when absent) set, or -EINVAL for anything
 * else (the caller then uses the environment key); nothing is set on failure. */
int gbx_worker_secret_decode(const char *secret, char **token, char **base_url) GBX_WUR;

/* ---- the heartbeat (spec §4) ------------------------------------------------------------ */

/* The beat interval in milliseconds: clamp(ttl/2, 1 s, 30 s); 30 s for an unknown TTL (<= 0). */
long gbx_worker_beat_interval_ms(long ttl_seconds);

enum gbx_worker_beat {
    GBX_WORKER_BEAT_OK,        /* the lease is extended: keep serving */
    GBX_WORKER_BEAT_TRANSIENT, /* network, 5xx, 408, 409, 429: beat again */
    GBX_WORKER_BEAT_FINISH,    /* stopping, stopped, lease_extended:false, another 4xx: finish */
    GBX_WORKER_BEAT_LOST,      /* 412: another worker owns it; stop at once, never call stop */
};

/* What a heartbeat answer means: status is the HTTP status (<= 0: no answer), reply its
 * JSON (or NULL). On OK, *last gets last_heartbeat (to echo byte for byte; NULL if missing,
 * which is FINISH) and *ttl ttl_seconds (0 if missing). */
enum gbx_worker_beat gbx_worker_beat_verdict(int status, json_t *reply, char **last, long *ttl);

/* ---- the work queue (spec §3) ----------------------------------------------------------- */

/* A poll answer with no work: 204, an empty 200 (reply NULL) or 200 null. */
int gbx_worker_poll_empty(int status, json_t *reply);

struct gbx_worker_item {
    char *id;         /* work_... */
    char *session_id; /* sesn_..., NULL when data.type is not "session" */
    char *secret;     /* NULL when absent */
};

/* Parse a work item; -EINVAL without a usable id. An item that is not a session gets
 * session_id NULL (the caller force-stops it). _release frees the fields (twice is fine). */
int gbx_worker_item_parse(json_t *item, struct gbx_worker_item *out) GBX_WUR;
void gbx_worker_item_release(struct gbx_worker_item *it);

/* An id that may go into a URL path: letters, digits, '.', '_', '-', 1-128 of them. */
int gbx_worker_id_valid(const char *id);

/* What this worker cannot serve in a session object (GET /v1/sessions/{id}): a
 * memory_store resource (spec §7: memory stores are not supported yet, and the item must
 * fail clearly rather than run without them). Returns a static reason, or NULL when the
 * session can be served. Skills (agent.skills[]) are not installed either, but the calls
 * still run: *skills gets their count, for a warning. */
const char *gbx_worker_session_unsupported(json_t *session, size_t *skills);

/* ---- the session's events (spec §5) ----------------------------------------------------- */

/* The built-in tools this worker owns: bash, read, write, edit, glob, grep. */
int gbx_worker_tool_owned(const char *name);

enum gbx_worker_event {
    GBX_WORKER_EV_OTHER,      /* anything else: disarms the idle clock */
    GBX_WORKER_EV_IGNORE,     /* ping: changes nothing */
    GBX_WORKER_EV_CONFIRM,    /* user.tool_confirmation: releases or drops a held call */
    GBX_WORKER_EV_TOOL_USE,   /* agent.tool_use */
    GBX_WORKER_EV_RESULT,     /* user.tool_result: that call is answered */
    GBX_WORKER_EV_IDLE_END,   /* session.status_idle with stop_reason end_turn: arm the clock */
    GBX_WORKER_EV_IDLE_OTHER, /* session.status_idle for another reason: keep serving */
    GBX_WORKER_EV_TERMINATED, /* session.status_terminated, session.deleted: finish */
    GBX_WORKER_EV_ERROR,      /* an SSE `error` event: the stream ends */
};

/* Classify a session event (its JSON; sse_name the SSE event name, or NULL, used when the
 * JSON lacks a type). */
enum gbx_worker_event gbx_worker_event_kind(const char *sse_name, json_t *ev);

/* The daemon's execute request {tool_use_id, name, input} for an agent.tool_use event this
 * worker should run: an owned name, a string id, an object input (absent: {}) and an
 * evaluated_permission that is absent or "allow", or "ask" when `confirmed` (a
 * user.tool_confirmation allowed it). "deny" and anything unknown are never run (fail
 * closed). NULL otherwise. */
json_t *gbx_worker_execute_body(json_t *ev, int confirmed);

/* An owned agent.tool_use whose evaluated_permission is "ask": held until a
 * user.tool_confirmation for it arrives (spec §5.5). */
int gbx_worker_tool_held(json_t *ev);

/* The verdict of a user.tool_confirmation event: 1 allow, 0 deny (or anything else: fail
 * closed), with *tool_use_id set (borrowed); -1 when it is not a confirmation with an id. */
int gbx_worker_confirmation(json_t *ev, const char **tool_use_id);

/* Reconcile (spec §5.2): from a session's history (an array of events, oldest first), the
 * agent.tool_use events that have no user.tool_result and that this worker should run
 * (gbx_worker_execute_body is not NULL, with confirmed when the history holds an allowing
 * user.tool_confirmation for it), in order. Returns a new array. When held is not NULL it
 * gets a new object: id -> event for the unanswered "ask" calls that have no verdict yet. */
json_t *gbx_worker_reconcile(json_t *events, json_t **held);

/* The body {"events":[{"type":"user.tool_result","tool_use_id",is_error,content}]} that
 * answers tool_use_id, from the daemon's execute reply {content, is_error} (NULL, or no
 * content array: an error result whose text is errmsg, or "tool call failed"). Text blocks
 * with empty text are dropped and other blocks need a type; content is never empty ("(no
 * output)"). */
json_t *gbx_worker_result_event(const char *tool_use_id, json_t *reply, const char *errmsg);

/* ---- text/event-stream framing (spec §5.1) ---------------------------------------------- */

/* One SSE event: name ("message" when the stream gave none) and data (the data lines joined
 * with '\n'); both NUL-terminated and valid until the callback returns. */
typedef void (*gbx_worker_sse_fn)(void *arg, const char *name, const char *data, size_t len);

/* A line state machine over the bytes of a stream, fed in pieces of any size: lines end at
 * "\n", "\r\n" or "\r"; ':' lines are comments; "event:" names the event, "data:" adds a line
 * of data, a blank line dispatches an event that has data; other fields are ignored. A line
 * longer than max_line bytes (0: 16 MiB) is dropped with its event. The zero struct (with
 * on_event set) is ready. */
struct gbx_worker_sse {
    gbx_worker_sse_fn on_event;
    void *arg;
    size_t max_line;
    char *line; /* the partial line */
    size_t line_len, line_cap;
    char *data; /* the event's data so far */
    size_t data_len, data_cap;
    char name[128];
    int has_data, skipping, after_cr;
};

void gbx_worker_sse_feed(struct gbx_worker_sse *s, const char *buf, size_t len);
void gbx_worker_sse_release(struct gbx_worker_sse *s);

/* ---- webhook deliveries (spec §9.2: Standard Webhooks) ------------------------------------ */

/* How far webhook-timestamp may be from now, either way, in seconds. */
#define GBX_WORKER_HOOK_TOLERANCE 300
/* How many delivery ids are remembered against replays. */
#define GBX_WORKER_HOOK_SEEN 1000
/* The largest webhook-id, webhook-timestamp or webhook-signature value accepted. */
#define GBX_WORKER_HOOK_HEADER_MAX 4096

/* HMAC-SHA256 and a constant-time comparison, from libcrypto loaded at run time
 * (src/worker/hook.c); the verifier below only calls them. hmac returns 0 on success. */
struct gbx_worker_crypto {
    int (*hmac)(const uint8_t *key, size_t klen, const uint8_t *msg, size_t mlen, uint8_t out[32]);
    int (*memcmp)(const void *a, const void *b, size_t n);
};

/* The signing key of a "whsec_<base64>" secret (the prefix is optional): 0 with *key (malloc'd)
 * and *klen set, -EINVAL for anything that is not base64 of 1..1024 bytes. */
int gbx_worker_hook_key(const char *secret, uint8_t **key, size_t *klen) GBX_WUR;

/* The three headers of a delivery (malloc'd, NULL when absent). */
struct gbx_worker_hook {
    char *id, *timestamp, *signature;
};

/* Record one request header: the three above by name (case-insensitive), others ignored.
 * -EINVAL for one of them given twice or longer than GBX_WORKER_HOOK_HEADER_MAX. */
int gbx_worker_hook_header(struct gbx_worker_hook *h, const char *name, size_t nlen,
                           const char *value, size_t vlen) GBX_WUR;
void gbx_worker_hook_release(struct gbx_worker_hook *h);

/* The ids of the last GBX_WORKER_HOOK_SEEN accepted deliveries (the zero struct is empty). */
struct gbx_worker_hook_seen {
    char *ids[GBX_WORKER_HOOK_SEEN];
    size_t next;
};
void gbx_worker_hook_seen_release(struct gbx_worker_hook_seen *s);

enum gbx_worker_hook_verdict {
    GBX_WORKER_HOOK_OK,            /* verified and new: act on it (its id is now seen) */
    GBX_WORKER_HOOK_REPLAY,        /* verified, but its id was seen already: 200, do nothing */
    GBX_WORKER_HOOK_MISSING,       /* a header is missing (401) */
    GBX_WORKER_HOOK_MALFORMED,     /* the timestamp is not a number (401) */
    GBX_WORKER_HOOK_STALE,         /* the timestamp is more than the tolerance from now (401) */
    GBX_WORKER_HOOK_BAD_SIGNATURE, /* no v1 entry matches (401) */
};

/* Verify a delivery (Standard Webhooks): all three headers; |now - timestamp| <= tolerance;
 * some space-separated "v1,<base64>" entry of webhook-signature equals HMAC-SHA256(key,
 * "{id}.{timestamp}.{body}") (constant-time; malformed entries never match); then the id
 * against seen (when not NULL), where an accepted id is recorded. */
enum gbx_worker_hook_verdict gbx_worker_hook_verify(const struct gbx_worker_hook *h,
                                                    const char *body, size_t len,
                                                    const uint8_t *key, size_t klen, long long now,
                                                    const struct gbx_worker_crypto *c,
                                                    struct gbx_worker_hook_seen *seen);
const char *gbx_worker_hook_verdict_name(enum gbx_worker_hook_verdict v);

#endif
