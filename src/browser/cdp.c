/* SPDX-License-Identifier: MIT */
/* The DevTools client (cdp.h): connect with a deadline, one HTTP GET, the WebSocket handshake
 * (RFC 6455 section 4.1: the key, the 101, Sec-WebSocket-Accept checked), then wslay's event
 * API over the non-blocking socket, driven by poll(2) until the answer with our id arrives. */
#include "browser/cdp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "base/b64.h"
#include "base/clock.h"
#include "base/mem.h"

struct gbx_cdp {
    int fd;
    int64_t deadline_ns;
    wslay_event_context_ptr ws;
    uint8_t *early; /* bytes that came with the 101, before any read */
    size_t early_len, early_off;
    long next_id, want_id;
    json_t *answer; /* the message with want_id */
    int closed;     /* the browser closed the WebSocket */
};

/* Milliseconds left before deadline_ns (0 when it has passed). */
static int left_ms(int64_t deadline_ns)
{
    int64_t ms = (deadline_ns - gbx_monotonic_ns()) / 1000000;
    return ms <= 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

/* Wait for events on fd until the deadline: 1 ready, 0 timed out, -errno. */
static int wait_fd(int fd, short events, int64_t deadline_ns)
{
    for (;;) {
        int ms = left_ms(deadline_ns);
        if (ms == 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

static int connect_to(int fd, unsigned port, int64_t deadline_ns, struct gbx_err **err)
{
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return gbx_err_sys(err, errno, "the browser's DevTools port %u", port);
    int r = wait_fd(fd, POLLOUT, deadline_ns);
    int e = 0;
    socklen_t el = sizeof(e);
    if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0)
        return 0;
    if (r == 1 && e)
        return gbx_err_set(err, e, GBX_ERR_UNAVAILABLE,
                           "nobody listens on the browser's DevTools port %u (%s): is it running?",
                           port, strerror(e));
    return gbx_err_set(err, ETIMEDOUT, GBX_ERR_UNAVAILABLE,
                       "the browser's DevTools port %u did not answer in time", port);
}

static int send_all(int fd, const char *p, size_t n, int64_t deadline_ns, struct gbx_err **err)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN && wait_fd(fd, POLLOUT, deadline_ns) == 1)
            continue;
        return gbx_err_set(err, w < 0 ? errno : EPIPE, GBX_ERR_UNAVAILABLE,
                           "the browser's DevTools server stopped taking the request");
    }
    return 0;
}

/* ---- one HTTP response, by http_parser ------------------------------------------------- */

struct resp {
    char *body;
    size_t len;
    char field[64];
    int in_accept;   /* the header being read is Sec-WebSocket-Accept */
    char accept[64]; /* its value */
    int headers_done, complete, too_big;
};

static int on_field(http_parser *p, const char *at, size_t len)
{
    struct resp *r = p->data;
    snprintf(r->field, sizeof(r->field), "%.*s", (int)len, at);
    r->in_accept = strcasecmp(r->field, "Sec-WebSocket-Accept") == 0;
    return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
    struct resp *r = p->data;
    if (r->in_accept)
        snprintf(r->accept, sizeof(r->accept), "%.*s", (int)len, at);
    return 0;
}

static int on_headers(http_parser *p)
{
    ((struct resp *)p->data)->headers_done = 1;
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct resp *r = p->data;
    if (r->len + len > GBX_CDP_MAX_MSG) {
        r->too_big = 1;
        return -1;
    }
    r->body = gbx_xrealloc(r->body, r->len + len + 1);
    memcpy(r->body + r->len, at, len);
    r->len += len;
    r->body[r->len] = '\0';
    return 0;
}

static int on_complete(http_parser *p)
{
    ((struct resp *)p->data)->complete = 1;
    return 0;
}

/* Read a response from fd: to its end, or (upgrade) to its head's end, the bytes after it
 * into *rest. 0 with r filled and *status, or -1 with *err. */
static int read_response(int fd, int upgrade, int64_t deadline_ns, struct resp *r, int *status,
                         uint8_t **rest, size_t *restlen, struct gbx_err **err)
{
    http_parser_settings s;
    http_parser_settings_init(&s);
    s.on_header_field = on_field;
    s.on_header_value = on_value;
    s.on_headers_complete = on_headers;
    s.on_body = on_body;
    s.on_message_complete = on_complete;
    http_parser p;
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = r;
    char buf[16384];
    size_t total = 0;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            if (wait_fd(fd, POLLIN, deadline_ns) == 1)
                continue;
            return gbx_err_set(err, ETIMEDOUT, GBX_ERR_UNAVAILABLE,
                               "the browser's DevTools server did not answer in time");
        }
        if (n < 0)
            return gbx_err_sys(err, errno, "reading from the browser's DevTools server");
        total += (size_t)n;
        size_t used = http_parser_execute(&p, &s, buf, (size_t)n);
        if (r->too_big || total > GBX_CDP_MAX_MSG)
            return gbx_err_set(err, EFBIG, GBX_ERR_LIMIT,
                               "the browser's DevTools answer is larger than %u bytes",
                               GBX_CDP_MAX_MSG);
        if (upgrade && p.upgrade && r->headers_done) {
            *status = (int)p.status_code;
            *restlen = (size_t)n - used;
            *rest = *restlen ? gbx_xmalloc(*restlen) : NULL;
            if (*restlen)
                memcpy(*rest, buf + used, *restlen);
            return 0;
        }
        if (HTTP_PARSER_ERRNO(&p) != HPE_OK)
            return gbx_err_set(err, EPROTO, GBX_ERR_UNAVAILABLE,
                               "the browser's DevTools server sent a malformed answer (%s)",
                               http_errno_description(HTTP_PARSER_ERRNO(&p)));
        if (r->complete || n == 0) {
            if (n == 0)
                (void)http_parser_execute(&p, &s, buf, 0); /* the end of a body read to EOF */
            if (!r->headers_done)
                return gbx_err_set(err, EPROTO, GBX_ERR_UNAVAILABLE,
                                   "the browser's DevTools server closed without an answer");
            *status = (int)p.status_code;
            return 0;
        }
    }
}

/* ---- the WebSocket, by wslay ------------------------------------------------------------- */

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
    (void)flags;
    struct gbx_cdp *c = user;
    if (c->early_off < c->early_len) {
        size_t n = c->early_len - c->early_off;
        n = n < len ? n : len;
        memcpy(buf, c->early + c->early_off, n);
        c->early_off += n;
        return (ssize_t)n;
    }
    ssize_t n;
    while ((n = recv(c->fd, buf, len, 0)) < 0 && errno == EINTR)
        ;
    if (n < 0 && errno == EAGAIN) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (n <= 0) {
        c->closed = 1;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return n;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
    (void)flags;
    struct gbx_cdp *c = user;
    ssize_t n;
    while ((n = send(c->fd, data, len, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n < 0) {
        wslay_event_set_error(ctx,
                              errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return n;
}

static int ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
    (void)ctx;
    (void)user;
    return getrandom(buf, len, 0) == (ssize_t)len ? 0 : -1;
}

static void ws_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a,
                   void *user)
{
    (void)ctx;
    struct gbx_cdp *c = user;
    if (a->opcode == WSLAY_CONNECTION_CLOSE) {
        c->closed = 1;
        return;
    }
    if (a->opcode != WSLAY_TEXT_FRAME || c->answer)
        return;
    json_t *m = json_loadb((const char *)a->msg, a->msg_length, 0, NULL);
    json_t *id = json_object_get(m, "id");
    if (json_is_integer(id) && json_integer_value(id) == c->want_id)
        c->answer = m; /* events (no id) and other answers are not ours */
    else
        json_decref(m);
}

static const struct wslay_event_callbacks ws_callbacks = {
    .recv_callback = ws_recv,
    .send_callback = ws_send,
    .genmask_callback = ws_genmask,
    .on_msg_recv_callback = ws_msg,
};

static char *b64_encode(const uint8_t *p, size_t n)
{
    char *out = gbx_xmalloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    return out;
}

/* GET path on fd: the 101 and the WebSocket on it. */
static int ws_open(struct gbx_cdp *c, unsigned port, const char *path, struct gbx_err **err)
{
    uint8_t nonce[16];
    if (getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        return gbx_err_sys(err, errno, "getrandom");
    gbx_autofree char *key = b64_encode(nonce, sizeof(nonce));
    gbx_autofree char *req = gbx_asprintf("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                                          "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                          "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                                          "\r\n",
                                          path, port, key);
    if (send_all(c->fd, req, strlen(req), c->deadline_ns, err) < 0)
        return -1;
    struct resp r = {0};
    int status = 0;
    int rc = read_response(c->fd, 1, c->deadline_ns, &r, &status, &c->early, &c->early_len, err);
    free(r.body);
    if (rc < 0)
        return -1;
    gbx_autofree char *cat = gbx_asprintf("%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
    uint8_t sha[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)cat, strlen(cat), sha);
    gbx_autofree char *want = b64_encode(sha, sizeof(sha));
    if (status != 101 || strcmp(r.accept, want) != 0)
        return gbx_err_set(err, EPROTO, GBX_ERR_UNAVAILABLE,
                           "the browser refused its DevTools WebSocket (HTTP %d)", status);
    if (wslay_event_context_client_init(&c->ws, &ws_callbacks, c) != 0)
        return gbx_err_set(err, ENOMEM, GBX_ERR_INTERNAL, "out of memory");
    wslay_event_config_set_max_recv_msg_length(c->ws, GBX_CDP_MAX_MSG);
    return 0;
}

/* The path of webSocketDebuggerUrl in /json/version's answer. */
static int browser_path(int fd, unsigned port, int64_t deadline_ns, char *path, size_t pathsz,
                        struct gbx_err **err)
{
    gbx_autofree char *req = gbx_asprintf(
        "GET /json/version HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n\r\n", port);
    if (send_all(fd, req, strlen(req), deadline_ns, err) < 0)
        return -1;
    struct resp r = {0};
    int status = 0;
    uint8_t *rest = NULL;
    size_t restlen = 0;
    int rc = read_response(fd, 0, deadline_ns, &r, &status, &rest, &restlen, err);
    json_t *v = rc == 0 && status == 200 ? json_loadb(r.body ? r.body : "", r.len, 0, NULL) : NULL;
    free(r.body);
    if (rc < 0)
        return -1;
    const char *url = json_string_value(json_object_get(v, "webSocketDebuggerUrl"));
    const char *p = url && strncmp(url, "ws://", 5) == 0 ? strchr(url + 5, '/') : NULL;
    if (p)
        snprintf(path, pathsz, "%s", p);
    json_decref(v);
    if (p == NULL)
        return gbx_err_set(err, EPROTO, GBX_ERR_UNAVAILABLE,
                           "port %u does not answer like a browser's DevTools server (HTTP %d)",
                           port, status);
    return 0;
}

int gbx_cdp_connect(int fd_http, int fd_ws, unsigned port, int64_t deadline_ns,
                    struct gbx_cdp **out, struct gbx_err **err)
{
    *out = NULL;
    char path[512];
    int rc = connect_to(fd_http, port, deadline_ns, err);
    if (rc == 0)
        rc = browser_path(fd_http, port, deadline_ns, path, sizeof(path), err);
    close(fd_http);
    if (rc == 0)
        rc = connect_to(fd_ws, port, deadline_ns, err);
    struct gbx_cdp *c = gbx_xcalloc(1, sizeof(*c));
    c->fd = fd_ws;
    c->deadline_ns = deadline_ns;
    if (rc == 0)
        rc = ws_open(c, port, path, err);
    if (rc < 0) {
        gbx_cdp_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

void gbx_cdp_free(struct gbx_cdp *c)
{
    if (c == NULL)
        return;
    if (c->ws)
        wslay_event_context_free(c->ws);
    if (c->fd >= 0)
        close(c->fd);
    json_decref(c->answer);
    free(c->early);
    free(c);
}

json_t *gbx_cdp_call(struct gbx_cdp *c, const char *session, const char *method, json_t *params,
                     struct gbx_err **err)
{
    json_t *m = json_pack("{s:I,s:s,s:o}", "id", (json_int_t)++c->next_id, "method", method,
                          "params", params ? params : json_object());
    if (session)
        json_object_set_new(m, "sessionId", json_string(session));
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    struct wslay_event_msg msg = {WSLAY_TEXT_FRAME, (const uint8_t *)text, strlen(text)};
    int q = wslay_event_queue_msg(c->ws, &msg); /* copies the message */
    free(text);
    if (q != 0) {
        gbx_err_set(err, EIO, GBX_ERR_UNAVAILABLE, "the browser's DevTools WebSocket is closed");
        return NULL;
    }
    c->want_id = c->next_id;
    json_decref(c->answer);
    c->answer = NULL;
    while (c->answer == NULL && !c->closed) {
        short ev = (short)((wslay_event_want_read(c->ws) ? POLLIN : 0) |
                           (wslay_event_want_write(c->ws) ? POLLOUT : 0));
        if (ev == 0)
            break;
        struct pollfd p = {.fd = c->fd, .events = ev};
        int ms = left_ms(c->deadline_ns);
        int r = ms ? poll(&p, 1, ms) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && wslay_event_recv(c->ws) != 0)
            break;
        if ((p.revents & POLLOUT) && wslay_event_send(c->ws) != 0)
            break;
    }
    json_t *a = c->answer;
    c->answer = NULL;
    if (a == NULL) {
        gbx_err_set(err, ETIMEDOUT, GBX_ERR_UNAVAILABLE, "the browser did not answer %s%s", method,
                    c->closed ? " (it closed the connection)" : " in time");
        return NULL;
    }
    json_t *e = json_object_get(a, "error");
    if (e) {
        gbx_err_set(err, EIO, GBX_ERR_UNAVAILABLE, "the browser refused %s: %s", method,
                    json_string_value(json_object_get(e, "message"))
                        ? json_string_value(json_object_get(e, "message"))
                        : "(no message)");
        json_decref(a);
        return NULL;
    }
    json_t *res = json_incref(json_object_get(a, "result"));
    json_decref(a);
    if (res == NULL)
        res = json_object();
    return res;
}

int gbx_cdp_screenshot(struct gbx_cdp *c, uint8_t **png, size_t *len, struct gbx_err **err)
{
    *png = NULL;
    *len = 0;
    json_t *targets = gbx_cdp_call(c, NULL, "Target.getTargets", NULL, err);
    if (targets == NULL)
        return -1;
    const char *page = NULL;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(targets, "targetInfos"), i, t)
    {
        const char *type = json_string_value(json_object_get(t, "type"));
        if (page == NULL && type && strcmp(type, "page") == 0)
            page = json_string_value(json_object_get(t, "targetId"));
    }
    json_t *made = NULL;
    if (page == NULL) { /* no page open: a blank one */
        made = gbx_cdp_call(c, NULL, "Target.createTarget",
                            json_pack("{s:s}", "url", "about:blank"), err);
        page = json_string_value(json_object_get(made, "targetId"));
    }
    json_t *att = page ? gbx_cdp_call(c, NULL, "Target.attachToTarget",
                                      json_pack("{s:s,s:b}", "targetId", page, "flatten", 1), err)
                       : NULL;
    const char *sid = json_string_value(json_object_get(att, "sessionId"));
    json_t *shot = sid ? gbx_cdp_call(c, sid, "Page.captureScreenshot",
                                      json_pack("{s:s}", "format", "png"), err)
                       : NULL;
    const char *data = json_string_value(json_object_get(shot, "data"));
    int rc = -1;
    if (data) {
        size_t n = strlen(data);
        *png = gbx_xmalloc(n / 4 * 3 + 2);
        if (gbx_b64_decode(data, n, *png, len) == 0) {
            rc = 0;
        } else {
            free(*png);
            *png = NULL;
            gbx_err_set(err, EPROTO, GBX_ERR_UNAVAILABLE, "the browser's screenshot is not base64");
        }
    } else if (shot) {
        gbx_err_set(err, EPROTO, GBX_ERR_UNAVAILABLE, "the browser's answer holds no screenshot");
    } else if (page == NULL && made) {
        gbx_err_set(err, EPROTO, GBX_ERR_UNAVAILABLE, "the browser opened no page");
    }
    if (sid)
        json_decref(gbx_cdp_call(c, NULL, "Target.detachFromTarget",
                                 json_pack("{s:s}", "sessionId", sid), NULL));
    json_decref(shot);
    json_decref(att);
    json_decref(made);
    json_decref(targets);
    return rc;
}
