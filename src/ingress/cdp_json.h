/* SPDX-License-Identifier: MIT */
/* A browser's DevTools server, reached through ingress: what it says about its own address.
 * Chromium answers /json/version and /json/list with URLs built from the Host it was sent
 * (ingress sends 127.0.0.1:PORT, the only Host it accepts besides localhost names), so its
 * webSocketDebuggerUrl and devtoolsFrontendUrl name the sandbox's loopback; rewritten here to
 * name the address the client used, so that a CDP client (Playwright's connectOverCDP) comes
 * back through the daemon. A pure function over bytes: unit-tested (test_ingress_cdp) and
 * fuzzed (fuzz_ingress). */
#ifndef GBX_INGRESS_CDP_JSON_H
#define GBX_INGRESS_CDP_JSON_H

#include <stddef.h>

/* The largest answer of the DevTools server that ingress rewrites (a longer one: 502). */
#define GBX_INGRESS_CDP_MAX (1u << 20)

/* resp[0..len): what the server sent so far (eof: and then closed). ext: the Host the client sent;
 * prefix: the path form's "/v1/sandboxes/ID/ports/PORT", or "" for the host form. Every
 * "127.0.0.1:<port>" in a string of the JSON body becomes ext + prefix (and a relative
 * devtoolsFrontendUrl gets the prefix); a body that is not JSON is kept. The new response
 * (status kept, Content-Type, Content-Length, "Connection: close") malloc'd into *out: 0; 1
 * when the response is not complete yet (read more); -1 when it is not an HTTP/1.x response
 * (or ends before it is complete). */
int gbx_ingress_cdp_answer(const char *resp, size_t len, int eof, unsigned port, const char *ext,
                           const char *prefix, char **out, size_t *outlen);

#endif
