/* SPDX-License-Identifier: MIT */
/* The E2B-compatible surface (shared/protocols/e2b.md), served on the TCP listener beside the
 * native API. e2b.c routes and holds what every E2B handler shares; the services live in
 *
 *   e2b/control.c   the control plane: /v2/sandboxes, /sandboxes/{id}/..., /snapshots, ...
 *   e2b/process.c   envd process.Process over Connect (Start, Connect, List, SendInput, ...)
 *   e2b/fs.c        envd filesystem.Filesystem over Connect (Stat, ListDir, ..., WatchDir)
 *   e2b/files.c     envd plain HTTP: GET/POST /files (with signed URLs)
 *   e2b/interp.c    the code interpreter: /execute, /contexts (a Python kernel per context)
 *
 * Routing: a request with an E2b-Sandbox-Id header is for that sandbox's envd (or, with
 * E2b-Sandbox-Port: 49999, its code interpreter); authenticated by the sandbox's access token
 * (X-Access-Token), so it acts as the sandbox's owner. Other E2B paths are the control plane,
 * authenticated by a Glovebox API key in X-API-KEY. */
#ifndef GBX_E2B_E2B_H
#define GBX_E2B_E2B_H

#include <event2/http.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/actor.h"
#include "core/server.h"

struct event_base;
struct evbuffer;
struct evhttp_request;
struct gbx_live;
struct gbx_server;

/* The envd version reported at create and connect: every SDK feature gate is open. */
#define GBX_E2B_ENVD_VERSION "0.6.4"
/* The sandbox's default user and the timeout when create gives none (seconds). */
#define GBX_E2B_DEFAULT_USER "user"
#define GBX_E2B_DEFAULT_TIMEOUT 300

/* ---- routing (e2b.c; called by server.c) ---------------------------------------------------- */

/* Is path one of the control plane's (/v2/..., /sandboxes..., /snapshots..., /templates/...)? */
int gbx_e2b_is_control_path(const char *path);
/* Admission on the state disk (core/server.h) of an E2B request: 0, or -1 when it was
 * refused (answered here: 507 in E2B's error form). */
int gbx_e2b_admit(struct gbx_server *s, struct evhttp_request *req, const char *path,
                  enum gbx_admit_front front);
/* A request carrying E2b-Sandbox-Id: find the sandbox (502 as E2B's edge does when it is
 * unknown, killed or paused), check its access token, dispatch. */
void gbx_e2b_data(struct gbx_server *s, struct event_base *base, struct evhttp_request *req,
                  const char *sandbox_id);

/* ---- the services ---------------------------------------------------------------------------- */

/* e2b/control.c: the caller is authenticated; path is the request's path. */
void gbx_e2b_control(struct gbx_server *s, const struct gbx_actor *who, struct evhttp_request *req,
                     const char *path);
/* e2b/process.c: method is what follows "/process.Process/" ("Start", ...). */
void gbx_e2b_process(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                     struct evhttp_request *req, struct gbx_live *l, const char *method);
/* e2b/fs.c: method is what follows "/filesystem.Filesystem/". */
void gbx_e2b_filesystem(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                        struct evhttp_request *req, struct gbx_live *l, const char *method);
/* e2b/files.c: GET or POST /files; the token or a URL signature is checked there. l is NULL
 * for a request without E2b-Sandbox-Id (a signed URL): the sandbox is the one whose token
 * made the signature (the caller acts as admin until then). */
void gbx_e2b_files(struct gbx_server *s, struct event_base *base, struct evhttp_request *req,
                   struct gbx_live *l);
/* e2b/fs.c: the daemon is stopping; end every WatchDir stream with an end-of-stream error
 * (unavailable) saying why. Returns how many. */
size_t gbx_e2b_fs_drain(const char *why);

/* e2b/interp.c: the code interpreter (E2b-Sandbox-Port: 49999); path is the request's. */
void gbx_e2b_interp(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                    struct evhttp_request *req, struct gbx_live *l, const char *path);
/* Forget every interpreter context (the daemon is stopping): executions in progress end with
 * an error event. Returns how many replies were ended. The kernels stay in their sandboxes;
 * a restarted daemon starts new ones. */
size_t gbx_e2b_interp_shutdown(void);

/* ---- shared helpers (e2b.c) ------------------------------------------------------------------ */

/* A JSON reply (body stolen; NULL — a value that could not be built — becomes a generic
 * error body). */
void gbx_e2b_reply_json(struct evhttp_request *req, int status, json_t *body);
/* The data plane's answer for a sandbox id that is unknown, paused, or not the caller's to
 * reach (no valid credential): 502 {"sandboxId", "message", "code"}, the same for all three. */
void gbx_e2b_not_found(struct evhttp_request *req, const char *sandbox_id);
/* Control plane and envd REST errors: {"code": status, "message": "..."}. */
void gbx_e2b_error(struct evhttp_request *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A unary Connect error: {"code": "not_found", "message": "..."} with the code's status. */
void gbx_e2b_rpc_error(struct evhttp_request *req, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A unary Connect success: the message (stolen) as application/json. */
void gbx_e2b_rpc_reply(struct evhttp_request *req, json_t *msg);
/* The request message of a Connect call: the JSON body of a unary call, or the single
 * envelope of a server-streaming one (Content-Type application/connect+json). On failure
 * replies invalid_argument and returns NULL. Unknown fields are the handler's to ignore. */
json_t *gbx_e2b_rpc_request(struct evhttp_request *req);
/* Is the request's Content-Type application/connect+json (a streaming call)? */
int gbx_e2b_is_stream(struct evhttp_request *req);

/* Server streams: start the 200 application/connect+json reply; append one envelope (msg
 * stolen; a message that cannot be built becomes a keepalive, or {} for the end-of-stream
 * flag) to b for the caller to send with its own backpressure (gbx_http_send_chunk); end with
 * the end-of-stream envelope ({} or {"error":{code,message}} when code is non-NULL) and
 * finish the reply. */
void gbx_e2b_stream_start(struct evhttp_request *req);
void gbx_e2b_put_envelope(struct evbuffer *b, uint8_t flags, json_t *msg);
void gbx_e2b_stream_end(struct evhttp_request *req, const char *code, const char *message);
/* Connect-Timeout-Ms, in ms (0: none or invalid). */
unsigned long gbx_e2b_timeout_ms(struct evhttp_request *req);

/* The user an envd request acts as: "Authorization: Basic base64(user:)" on RPCs, or the
 * username query parameter on /files (pass it as query_user); else the default user. Writes
 * at most usersz bytes; returns 0, or -1 after replying 401/unauthenticated (rpc selects
 * the error form) for a malformed header or an unknown user. */
int gbx_e2b_user(struct evhttp_request *req, const char *query_user, int rpc, char *user,
                 size_t usersz);
/* The user's home directory ("/root" for root, else "/home/<user>"). */
void gbx_e2b_home(const char *user, char *out, size_t outsz);
/* Resolve an envd path for user: "~" and "~/x" are under the home, a relative path is
 * relative to the home, an absolute path is kept. malloc'ed; NULL for an empty path or one
 * with a NUL byte. */
char *gbx_e2b_path(const char *user, const char *path);

/* The sandbox whose credential the request's headers in (and query) carry, or NULL: with
 * E2b-Sandbox-Id, that sandbox if it is running and the request has its access token or
 * traffic token (for /files: its access token, or else a valid URL signature); without it,
 * for /files, the sandbox whose token made the URL's signature. The data plane's handlers and
 * the HTTP gate (gate.c) both decide by this. */
struct evkeyvalq;
struct gbx_live *gbx_e2b_credential(struct gbx_server *s, const struct evkeyvalq *in,
                                    enum evhttp_cmd_type m, const char *path, const char *query);
/* e2b/files.c: the /files part of it (l: the sandbox named by E2b-Sandbox-Id, or NULL). */
struct gbx_live *gbx_e2b_files_credential(struct gbx_server *s, const struct evkeyvalq *in,
                                          enum evhttp_cmd_type m, const char *query,
                                          struct gbx_live *l);
/* X-Access-Token in the headers in is the sandbox's access token. */
int gbx_e2b_headers_token_ok(const struct evkeyvalq *in, const struct gbx_live *l);
/* Does the request carry the sandbox's access token (X-Access-Token)? */
int gbx_e2b_token_ok(struct evhttp_request *req, const struct gbx_live *l);
/* The same secret as X-Access-Token or as E2B-Traffic-Access-Token (the code interpreter's
 * routes: create and connect return it as trafficAccessToken). */
int gbx_e2b_traffic_token_ok(struct evhttp_request *req, const struct gbx_live *l);

#endif
