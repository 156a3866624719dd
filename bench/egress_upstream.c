/* SPDX-License-Identifier: MIT */
/* The upstream of the egress benchmark (bench/run.sh): a libevent evhttp server on 127.0.0.1,
 * HTTP on one port and HTTPS (bufferevent_openssl) on another, keep-alive.
 *
 *   GET /                 200, a 16-byte body
 *   GET /bulk?bytes=N     200, N bytes (Content-Length, streamed from one static buffer by
 *                         reference, a few MiB at a time as the connection drains)
 *
 * Every reply carries "X-Saw-Auth: yes|no": whether the request had an Authorization header
 * (the egress proxy injects one in intercepted sandboxes).
 *
 * Usage: egress_upstream HTTP_PORT [HTTPS_PORT CERT_PEM KEY_PEM]
 * Runs until killed; prints "ready" on stdout once listening. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define BLOCK (256u << 10) /* the static buffer bulk replies are made of */
#define STEP (4u << 20)    /* bytes queued per write-completion callback */

static char block[BLOCK];
static unsigned char nodelay_done[65536]; /* per fd: TCP_NODELAY set on this connection */

struct bulk {
    struct evhttp_request *req;
    unsigned long long left;
};

static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
    int fd = (int)(long)arg;
    if (fd >= 0 && fd < (int)sizeof(nodelay_done))
        nodelay_done[fd] = 0;
}

/* evhttp offers no hook on accept: tune the socket at the first request of a connection */
static void nodelay(struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    int fd = bev ? (int)bufferevent_getfd(bev) : -1;
    if (fd < 0 || fd >= (int)sizeof(nodelay_done) || nodelay_done[fd])
        return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    bufferevent_set_max_single_write(bev, STEP); /* the default, 16 KiB, caps bulk speed */
    nodelay_done[fd] = 1;
    evhttp_connection_set_closecb(evcon, conn_closed, (void *)(long)fd);
}

static void add_refs(struct evbuffer *b, unsigned long long n)
{
    while (n > 0) {
        size_t k = n < BLOCK ? (size_t)n : BLOCK;
        evbuffer_add_reference(b, block, k, NULL, NULL);
        n -= k;
    }
}

static void bulk_more(struct evhttp_connection *evcon, void *arg)
{
    struct bulk *bk = arg;
    if (bk->left == 0) {
        evhttp_send_reply_end(bk->req);
        free(bk);
        return;
    }
    unsigned long long k = bk->left < STEP ? bk->left : STEP;
    struct evbuffer *b = evbuffer_new();
    add_refs(b, k);
    bk->left -= k;
    evhttp_send_reply_chunk_with_cb(bk->req, b, bulk_more, bk);
    evbuffer_free(b);
}

static void handle(struct evhttp_request *req, void *arg)
{
    nodelay(req);
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "X-Saw-Auth", evhttp_find_header(in, "Authorization") ? "yes" : "no");
    evhttp_add_header(out, "Content-Type", "application/octet-stream");
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        evhttp_send_error(req, 405, NULL);
        return;
    }
    const char *uri = evhttp_request_get_uri(req);
    if (strcmp(uri, "/") == 0) {
        struct evbuffer *b = evbuffer_new();
        evbuffer_add(b, "0123456789abcdef", 16);
        evhttp_send_reply(req, 200, "OK", b);
        evbuffer_free(b);
        return;
    }
    const char *q = "/bulk?bytes=";
    if (strncmp(uri, q, strlen(q)) == 0) {
        char *end;
        unsigned long long n = strtoull(uri + strlen(q), &end, 10);
        if (*end != '\0') {
            evhttp_send_error(req, 400, NULL);
            return;
        }
        char len[32];
        snprintf(len, sizeof(len), "%llu", n);
        evhttp_add_header(out, "Content-Length", len);
        struct bulk *bk = calloc(1, sizeof(*bk));
        if (!bk) {
            evhttp_send_error(req, 500, NULL);
            return;
        }
        bk->req = req;
        bk->left = n;
        evhttp_send_reply_start(req, 200, "OK");
        bulk_more(NULL, bk);
        return;
    }
    evhttp_send_error(req, 404, NULL);
}

static struct bufferevent *tls_bev(struct event_base *base, void *arg)
{
    SSL *ssl = SSL_new(arg);
    if (!ssl)
        return NULL;
    return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                          BEV_OPT_CLOSE_ON_FREE);
}

static struct evhttp *server(struct event_base *base, int port)
{
    struct evhttp *h = evhttp_new(base);
    if (!h || evhttp_bind_socket(h, "127.0.0.1", (unsigned short)port) < 0) {
        fprintf(stderr, "egress_upstream: cannot listen on 127.0.0.1:%d\n", port);
        exit(1);
    }
    evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_timeout(h, 600);
    evhttp_set_gencb(h, handle, NULL);
    return h;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 5) {
        fprintf(stderr, "usage: egress_upstream HTTP_PORT [HTTPS_PORT CERT_PEM KEY_PEM]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    memset(block, 'x', sizeof(block));
    struct event_base *base = event_base_new();
    struct evhttp *plain = server(base, atoi(argv[1]));
    struct evhttp *tls = NULL;
    SSL_CTX *ctx = NULL;
    if (argc == 5) {
        ctx = SSL_CTX_new(TLS_server_method());
        if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, argv[3]) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, argv[4], SSL_FILETYPE_PEM) != 1) {
            fprintf(stderr, "egress_upstream: cannot load %s / %s\n", argv[3], argv[4]);
            ERR_print_errors_fp(stderr);
            return 1;
        }
        tls = server(base, atoi(argv[2]));
        evhttp_set_bevcb(tls, tls_bev, ctx);
    }
    printf("ready\n");
    fflush(stdout);
    event_base_dispatch(base);
    if (tls)
        evhttp_free(tls);
    evhttp_free(plain);
    SSL_CTX_free(ctx);
    event_base_free(base);
    return 0;
}
