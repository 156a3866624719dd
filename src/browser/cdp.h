/* SPDX-License-Identifier: MIT */
/* A Chrome DevTools Protocol client for the daemon's own calls into a sandbox's browser (a
 * screenshot, closing it): blocking, every step bounded by one deadline, for a worker thread.
 * HTTP responses are parsed by http_parser, WebSocket frames by wslay; the JSON by jansson.
 * Nothing here knows sandboxes: the caller hands in sockets already made in the sandbox's
 * network namespace (sandbox/ns.h). */
#ifndef GBX_BROWSER_CDP_H
#define GBX_BROWSER_CDP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The largest HTTP response or WebSocket message read (a screenshot's PNG, base64). */
#define GBX_CDP_MAX_MSG (64u << 20)

struct gbx_cdp;

/* The browser's WebSocket: connect fd_http and fd_ws (stream sockets, not yet connected: both
 * are taken) to 127.0.0.1:port, ask /json/version on the first for webSocketDebuggerUrl, and
 * open that on the second. 0 with *out, or -1 with *err (UNAVAILABLE: nobody listens, not
 * a DevTools server, the deadline passed). */
int gbx_cdp_connect(int fd_http, int fd_ws, unsigned port, int64_t deadline_ns,
                    struct gbx_cdp **out, struct gbx_err **err) GBX_WUR;
/* One command (params stolen, NULL for {}), on a target's session or the browser's (session
 * NULL): its "result" (owned), or NULL with *err (the browser's "error" message, or why no
 * answer came before the deadline). */
json_t *gbx_cdp_call(struct gbx_cdp *c, const char *session, const char *method, json_t *params,
                     struct gbx_err **err);
void gbx_cdp_free(struct gbx_cdp *c);

/* A PNG of the browser's first page (a new blank one when it has none): malloc'd. */
int gbx_cdp_screenshot(struct gbx_cdp *c, uint8_t **png, size_t *len, struct gbx_err **err) GBX_WUR;

#endif
