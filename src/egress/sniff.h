/* SPDX-License-Identifier: MIT */
/* Parsers the egress proxy runs on untrusted bytes from inside a sandbox: the server name of
 * a TLS ClientHello (parsed by OpenSSL), the head of an HTTP/1.x request and a relay for the
 * client side of an intercepted HTTP/1.1 connection (both parsed by http-parser). Pure: no
 * I/O, no logging; the relay writes only to the evbuffer it is given.
 *
 * http-parser as Debian builds it is lenient (HTTP_PARSER_STRICT=0: bare LF, a CR followed by
 * anything, any two bytes after chunk data, spaces in header names, tabs in targets). Heads
 * are therefore checked here before anything is believed, and the relay never forwards a head
 * as received: it rebuilds it from the parsed pieces; the only raw bytes it forwards are
 * bodies, whose chunked framing it checks strictly. */
#ifndef GBX_EGRESS_SNIFF_H
#define GBX_EGRESS_SNIFF_H

#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

#include "base/util.h"

enum { GBX_SNIFF_OK = 0, GBX_SNIFF_MORE = 1, GBX_SNIFF_BAD = -1 };

/* Most bytes a ClientHello or a request head may take: past this, BAD. */
#define GBX_SNIFF_TLS_MAX 16384
#define GBX_SNIFF_HEAD_MAX 16384

/* First bytes look like a TLS handshake record (0x16 0x03 0x0[0-4])? Needs len >= 3; 1/0. */
int gbx_sniff_is_tls(const uint8_t *buf, size_t len);

/* The server_name of the TLS ClientHello at the start of buf (which the caller keeps), copied
 * lowercased into sni[snisz]. OK with sni filled ("" when there is no server_name extension),
 * MORE when buf is only a prefix of a ClientHello (a prefix of fewer than 3 bytes that could
 * still start one included), BAD otherwise: not a TLS handshake record, malformed (as OpenSSL
 * judges it, and a server_name extension that is not exactly one host_name entry), a name
 * outside [a-z0-9.-] after lowercasing or empty, longer than snisz - 1, or a ClientHello that
 * needs more than GBX_SNIFF_TLS_MAX bytes. OpenSSL runs a throwaway server-side SSL on a copy
 * of the bytes up to its client-hello callback; nothing is written anywhere and nothing
 * allocated outlives the call (but the process-wide SSL_CTX, created once). Thread-safe. */
int gbx_sniff_tls_sni(const uint8_t *buf, size_t len, char *sni, size_t snisz) GBX_WUR;

struct gbx_http_head {
    char method[16];    /* "GET" */
    char path[2048];    /* request target as sent ("/x?y" or absolute-form "http://h/x") */
    char host[256];     /* Host header value without port, lowercased ("" when absent); for
                           absolute-form targets the URL's host; an IPv6 literal without its
                           brackets */
    uint16_t host_port; /* port from Host (for absolute-form targets, from the URL), 0 if none */
    size_t head_len;    /* bytes of the request line + headers + blank line (and any empty
                           lines before the request line) */
};

/* Parse the request head at the start of buf with http-parser. OK with *out filled, MORE until
 * the blank line has arrived, BAD on anything the relay below refuses in a head (see there),
 * a head over GBX_SNIFF_HEAD_MAX bytes, a method, path or host that does not fit *out, or a
 * CONNECT method. */
int gbx_sniff_http_head(const uint8_t *buf, size_t len, struct gbx_http_head *out) GBX_WUR;

/* A relay for the client side of an intercepted HTTP/1.1 connection (keep-alive: many
 * requests on one connection). Feed it the bytes the client sends; for every request head it
 * calls on_head, then writes to `out` the head rebuilt from the parsed request line and
 * headers: `METHOD SP target SP HTTP/1.x CRLF`, then `Name: value CRLF` for every header in
 * the original order and spelling (value without surrounding whitespace), minus
 * Proxy-Connection and Proxy-Authorization, minus any header whose name (case-insensitively)
 * the callback sets, plus the callback's headers, then CRLF. Then the request body bytes
 * exactly as received (a chunked body stays chunked). After the head of an Upgrade request
 * (`Upgrade` plus `Connection: upgrade`) or of a CONNECT, everything is passed through raw
 * and nothing more is parsed (or, with gbx_http_relay_hold_upgrades, held until the caller
 * says whether the upstream switched).
 *
 * Refused as malformed (GBX_SNIFF_BAD), before anything of that request is written:
 *   - whatever http-parser rejects (duplicate Content-Length, Content-Length together with
 *     Transfer-Encoding, a bad Content-Length, a control character in a header value, ...);
 *   - a bare LF, a CR not followed by LF, a line starting with SP or HT (obs-fold);
 *   - a header name that is not an RFC 9110 token;
 *   - a request target with a byte outside 0x21-0x7e, or not origin-form ('/...'),
 *     absolute-form (http or https URL with a host), '*' (OPTIONS only) or, for CONNECT,
 *     authority-form;
 *   - a version other than HTTP/1.0 or HTTP/1.1;
 *   - two Host headers, a Host that is not a host name ([a-z0-9._-], any case) or a bracketed
 *     IPv6 literal with an optional port 1-65535, an absolute-form or CONNECT target whose
 *     host differs from the Host header's;
 *   - a Transfer-Encoding other than exactly one header saying "chunked", or a header
 *     http-parser takes for a framing header without being one ("Transfer-EncodingX");
 *   - a head over GBX_SNIFF_HEAD_MAX bytes;
 *   - a callback header whose name is not a token, is Content-Length or Transfer-Encoding, or
 *     whose value has a control character other than HT.
 * and while a body is passed on: chunked framing other than `HEX [SP/HT*] [; ext] CRLF`
 * lines and CRLF after each chunk's data (so no trailers, no bare LF, no quotes or control
 * characters in extensions). The body bytes before the offending byte have been written
 * by then; the caller drops the connection. */
struct gbx_http_header {
    const char *name;
    const char *value;
};
struct gbx_http_req_info {
    const char *method;
    const char *path; /* the request target as sent */
    const char *host; /* lowercased, no port ("" when there is none) */
    uint16_t port;    /* port from Host (or from an absolute-form or CONNECT target), 0 if none */
    const struct gbx_http_header *headers; /* every header as received (value trimmed) */
    size_t nheaders;
    int has_body; /* chunked, or a Content-Length above 0 */
};
/* Return 0 to forward (set *hdrs and *nhdrs to headers to add/replace, which the caller owns and
 * keeps valid until gbx_http_relay_feed returns), or -1 to refuse this request (the relay
 * stops: feed returns GBX_HTTP_RELAY_DENIED and nothing of this request is written), or 1 to
 * forward the head alone: it is written without its framing headers (Content-Length,
 * Transfer-Encoding, Expect) and with "Content-Length: 0" (plus the callback's headers), and
 * the relay stops there: feed returns GBX_HTTP_RELAY_HEAD_ONLY and writes nothing after that
 * head, not a byte of its body (the daemon's HTTP gate, api/gate.c). The pointers in *req are
 * valid during the call only. */
typedef int (*gbx_http_relay_head_fn)(void *arg, const struct gbx_http_req_info *req,
                                      const struct gbx_http_header **hdrs, size_t *nhdrs);

struct gbx_http_relay;

/* A new relay (owned by the caller, freed with gbx_http_relay_free); arg is passed to on_head. */
struct gbx_http_relay *gbx_http_relay_new(gbx_http_relay_head_fn on_head, void *arg);
void gbx_http_relay_free(struct gbx_http_relay *r); /* NULL-safe */

enum { GBX_HTTP_RELAY_DENIED = -2, GBX_HTTP_RELAY_HEAD_ONLY = -3 };

/* Consume all len bytes (a partial head is kept inside, at most GBX_SNIFF_HEAD_MAX bytes).
 * Returns 0, GBX_SNIFF_BAD on malformed input or GBX_HTTP_RELAY_DENIED; after either of those
 * the relay has stopped and every later call returns the same. Output depends only on the
 * byte stream, not on how it is split across calls. */
int gbx_http_relay_feed(struct gbx_http_relay *r, const uint8_t *data, size_t len,
                        struct evbuffer *out) GBX_WUR;

/* Requests seen so far (heads passed to on_head). */
uint64_t gbx_http_relay_requests(const struct gbx_http_relay *r);

/* Where the relay is in the byte stream: between requests (nothing of the next head yet), in
 * a head, in a body, or stopped (raw, held, refused, malformed). */
enum gbx_http_relay_phase {
    GBX_HTTP_RELAY_IDLE,
    GBX_HTTP_RELAY_IN_HEAD,
    GBX_HTTP_RELAY_IN_BODY,
    GBX_HTTP_RELAY_STOPPED
};
enum gbx_http_relay_phase gbx_http_relay_phase(const struct gbx_http_relay *r);

/* 1 once the relay passes everything through raw (after an Upgrade or CONNECT head). */
int gbx_http_relay_is_raw(const struct gbx_http_relay *r);

/* Going raw right after an Upgrade or CONNECT head trusts the upstream to switch: if it answers
 * anything but 101 (or a 2xx to CONNECT) and keeps reading HTTP, the client's next requests
 * reach it unparsed, without the callback's verdict or headers. Opting in here makes the
 * relay hold what the client sends after such a head (at most GBX_SNIFF_HEAD_MAX bytes, else
 * feed returns BAD) until the caller, having read the upstream's status line, calls
 * gbx_http_relay_upgrade_done: switched 1 writes the held bytes to out and goes raw, switched
 * 0 goes on parsing them as HTTP (return values as for feed). Call before the first feed. */
void gbx_http_relay_hold_upgrades(struct gbx_http_relay *r);
/* 1 while an Upgrade or CONNECT head has been forwarded and its answer is awaited. */
int gbx_http_relay_upgrade_pending(const struct gbx_http_relay *r);
int gbx_http_relay_upgrade_done(struct gbx_http_relay *r, int switched,
                                struct evbuffer *out) GBX_WUR;

#endif
