/* SPDX-License-Identifier: MIT */
/* The client of the egress benchmark (bench/run.sh), run on the host and inside sandboxes:
 * ONE keep-alive connection, N sequential GET requests, per-request latency.
 *
 *   egress_client [--tls] [--sni NAME] [--proxy HOST:PORT] [--header 'Name: value']
 *                 [--expect-auth yes|no] [--warmup W] [--bulk BYTES] HOST PORT PATH N
 *
 * HOST is resolved with getaddrinfo (inside a sandbox: the daemon's DNS). --tls: OpenSSL,
 * verified against SSL_CERT_FILE / the default paths, SNI and name check on HOST (or --sni
 * NAME when HOST is an address). --proxy: absolute-form requests to an HTTP proxy
 * (http://HOST:PORT/PATH) over a connection to the proxy. W requests (default 20) are sent
 * before the N timed ones. A connection the server closed, or asked to close (tinyproxy closes
 * after every response, without a "Connection: close"), is opened again by the next request,
 * inside its timed interval; the count is printed as "reconnects". --expect-auth: exit 3 unless
 * every response's X-Saw-Auth header has that value. --bulk BYTES: one GET of PATH?bytes=BYTES
 * (PATH "/bulk"), its throughput.
 *
 * Output, one line of key=value (times in µs):
 *   resolve_us connect_us tls_us setup_us (connect + TLS) first_us (setup + first request)
 *   n p50_us p99_us mean_us min_us reconnects saw_auth     or     bytes secs mb_s
 * The response reader is minimal: status line, headers up to CRLFCRLF, Content-Length,
 * chunked or read-to-close bodies. */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUFSZ (256u << 10)

static struct {
    int tls;
    const char *sni, *proxy, *header, *expect_auth;
    const char *host, *port, *path;
    long long bulk;
} o;

static struct {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    char *buf; /* received, not yet consumed: buf[off..len) */
    size_t off, len;
    double resolve_us, connect_us, tls_us;
} c = {.fd = -1};

static int auth_mismatch;
static char last_auth[8] = "none";

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "egress_client: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void conn_close(void)
{
    if (c.ssl) {
        SSL_shutdown(c.ssl); /* close_notify, so the server sees a clean end */
        SSL_free(c.ssl);
    }
    c.ssl = NULL;
    if (c.fd >= 0)
        close(c.fd);
    c.fd = -1;
    c.off = c.len = 0;
}

static void conn_open(void)
{
    const char *h = o.host, *p = o.port;
    char ph[256], *pp = NULL;
    if (o.proxy) {
        snprintf(ph, sizeof(ph), "%s", o.proxy);
        pp = strrchr(ph, ':');
        if (!pp)
            die("--proxy HOST:PORT");
        *pp++ = '\0';
        h = ph;
        p = pp;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    double t0 = now_us();
    int rc = getaddrinfo(h, p, &hints, &ai);
    if (rc != 0)
        die("getaddrinfo %s: %s", h, gai_strerror(rc));
    double t1 = now_us();
    c.fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c.fd < 0 || connect(c.fd, ai->ai_addr, ai->ai_addrlen) < 0)
        die("connect %s:%s: %s", h, p, strerror(errno));
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    double t2 = now_us();
    if (o.tls) {
        const char *name = o.sni ? o.sni : o.host;
        c.ssl = SSL_new(c.ctx);
        if (!c.ssl || !SSL_set_tlsext_host_name(c.ssl, name) || !SSL_set1_host(c.ssl, name) ||
            !SSL_set_fd(c.ssl, c.fd))
            die("SSL setup");
        if (SSL_connect(c.ssl) != 1)
            die("TLS handshake with %s: %s", name,
                X509_verify_cert_error_string(SSL_get_verify_result(c.ssl)));
    }
    double t3 = now_us();
    c.resolve_us = t1 - t0;
    c.connect_us = t2 - t1;
    c.tls_us = t3 - t2;
}

static void send_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = c.ssl ? SSL_write(c.ssl, p, (int)n) : write(c.fd, p, n);
        if (k <= 0)
            die("write: %s", k < 0 ? strerror(errno) : "closed");
        p += k;
        n -= (size_t)k;
    }
}

/* more bytes at buf[len..]; 0 at end of stream */
static size_t fill(void)
{
    if (c.off == c.len)
        c.off = c.len = 0;
    if (c.len == BUFSZ) { /* compact */
        memmove(c.buf, c.buf + c.off, c.len - c.off);
        c.len -= c.off;
        c.off = 0;
        if (c.len == BUFSZ)
            die("response head too large");
    }
    for (;;) {
        ssize_t k;
        if (c.ssl) {
            int r = SSL_read(c.ssl, c.buf + c.len, (int)(BUFSZ - c.len));
            if (r <= 0) {
                int e = SSL_get_error(c.ssl, r);
                if (e == SSL_ERROR_ZERO_RETURN)
                    return 0;
                if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
                    return 0; /* closed without close_notify */
                die("SSL_read: %d", e);
            }
            k = r;
        } else {
            k = read(c.fd, c.buf + c.len, BUFSZ - c.len);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                die("read: %s", strerror(errno));
        }
        c.len += (size_t)k;
        return (size_t)k;
    }
}

/* discard n body bytes (n < 0: until the end of stream) */
static void skip(long long n)
{
    for (;;) {
        size_t have = c.len - c.off;
        if (n >= 0 && (long long)have >= n) {
            c.off += (size_t)n;
            return;
        }
        if (n >= 0)
            n -= (long long)have;
        c.off = c.len = 0;
        if (fill() == 0) {
            if (n < 0)
                return;
            die("connection closed in a body");
        }
    }
}

/* a line (without CRLF) at buf[off..], NUL-terminated in place */
static char *line(void)
{
    for (;;) {
        char *s = c.buf + c.off, *e = memmem(s, c.len - c.off, "\r\n", 2);
        if (e) {
            *e = '\0';
            c.off = (size_t)(e + 2 - c.buf);
            return s;
        }
        if (fill() == 0)
            die("connection closed in a response head");
    }
}

/* whether the connection is still open: a peer that closes after each response without
 * saying so (tinyproxy) has sent its FIN by now, most of the time */
static int alive(void)
{
    struct pollfd p = {.fd = c.fd, .events = POLLIN};
    char b;
    if (c.off < c.len || poll(&p, 1, 0) != 1)
        return 1;
    return recv(c.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
}

/* read one response; returns whether the connection stays open, -1 when it was closed
 * before any byte of the response */
static int response(void)
{
    if (c.off == c.len && fill() == 0)
        return -1;
    char *s = line();
    int minor, status;
    if (sscanf(s, "HTTP/1.%d %d", &minor, &status) != 2)
        die("bad status line '%.60s'", s);
    if (status != 200)
        die("status %d", status);
    long long clen = -1;
    int chunked = 0, keep = minor >= 1;
    char auth[8] = "none";
    while (*(s = line()) != '\0') {
        char *v = strchr(s, ':');
        if (!v)
            continue;
        *v++ = '\0';
        v += strspn(v, " \t");
        if (strcasecmp(s, "Content-Length") == 0)
            clen = strtoll(v, NULL, 10);
        else if (strcasecmp(s, "Transfer-Encoding") == 0)
            chunked = strcasestr(v, "chunked") != NULL;
        else if (strcasecmp(s, "Connection") == 0 || strcasecmp(s, "Proxy-Connection") == 0)
            keep = strcasecmp(v, "close") == 0 ? 0 : strcasecmp(v, "keep-alive") == 0 ? 1 : keep;
        else if (strcasecmp(s, "X-Saw-Auth") == 0)
            snprintf(auth, sizeof(auth), "%s", v);
    }
    snprintf(last_auth, sizeof(last_auth), "%s", auth);
    if (o.expect_auth && strcmp(auth, o.expect_auth) != 0)
        auth_mismatch++;
    if (chunked) {
        for (;;) {
            long long n = strtoll(line(), NULL, 16);
            if (n == 0)
                break;
            skip(n);
            line();
        }
        while (*line() != '\0') /* trailers */
            ;
    } else if (clen >= 0) {
        skip(clen);
    } else {
        skip(-1);
        keep = 0;
    }
    return keep;
}

static void request(const char *path)
{
    char req[2048];
    const char *name = o.sni ? o.sni : o.host;
    int n;
    if (o.proxy)
        n = snprintf(req, sizeof(req), "GET http://%s:%s%s HTTP/1.1\r\nHost: %s:%s\r\n", o.host,
                     o.port, path, name, o.port);
    else
        n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n", path, name);
    n += snprintf(req + n, sizeof(req) - (size_t)n, "User-Agent: egress_client\r\n%s%s\r\n",
                  o.header ? o.header : "", o.header ? "\r\n" : "");
    if (n >= (int)sizeof(req))
        die("request too long");
    send_all(req, (size_t)n);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int warmup = 20;
    static const struct option opts[] = {
        {"tls", no_argument, NULL, 't'},          {"sni", required_argument, NULL, 's'},
        {"proxy", required_argument, NULL, 'p'},  {"header", required_argument, NULL, 'H'},
        {"bulk", required_argument, NULL, 'b'},   {"expect-auth", required_argument, NULL, 'a'},
        {"warmup", required_argument, NULL, 'w'}, {NULL, 0, NULL, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (ch) {
        case 't':
            o.tls = 1;
            break;
        case 's':
            o.sni = optarg;
            break;
        case 'p':
            o.proxy = optarg;
            break;
        case 'H':
            o.header = optarg;
            break;
        case 'b':
            o.bulk = strtoll(optarg, NULL, 10);
            break;
        case 'a':
            o.expect_auth = optarg;
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        default:
            return 2;
        }
    }
    if (argc - optind != 4) {
        fprintf(stderr, "usage: egress_client [--tls] [--sni NAME] [--proxy HOST:PORT] "
                        "[--header 'Name: value'] [--expect-auth yes|no] [--warmup W] "
                        "[--bulk BYTES] HOST PORT PATH N\n");
        return 2;
    }
    o.host = argv[optind];
    o.port = argv[optind + 1];
    o.path = argv[optind + 2];
    int n = atoi(argv[optind + 3]);
    if (n < 1)
        n = 1;
    if (!(c.buf = malloc(BUFSZ)))
        die("out of memory");
    if (o.tls) {
        c.ctx = SSL_CTX_new(TLS_client_method());
        if (!c.ctx || SSL_CTX_set_default_verify_paths(c.ctx) != 1)
            die("SSL_CTX");
        SSL_CTX_set_verify(c.ctx, SSL_VERIFY_PEER, NULL);
    }

    double t0 = now_us();
    conn_open();
    double setup_us = c.connect_us + c.tls_us;
    double resolve_us = c.resolve_us, connect_us = c.connect_us, tls_us = c.tls_us;

    if (o.bulk > 0) {
        char path[1024];
        snprintf(path, sizeof(path), "%s?bytes=%lld", o.path, o.bulk);
        double b0 = now_us();
        request(path);
        char *s = line(); /* the head, then count the body bytes as they come */
        if (strncmp(s, "HTTP/1.", 7) != 0 || atoi(s + 9) != 200)
            die("bad status line '%.60s'", s);
        long long clen = -1;
        while (*(s = line()) != '\0')
            if (strncasecmp(s, "Content-Length:", 15) == 0)
                clen = strtoll(s + 15, NULL, 10);
        if (clen != o.bulk)
            die("Content-Length %lld, asked for %lld", clen, o.bulk);
        skip(clen);
        double secs = (now_us() - b0) / 1e6;
        printf("resolve_us=%.1f connect_us=%.1f tls_us=%.1f setup_us=%.1f bytes=%lld "
               "secs=%.3f mb_s=%.1f\n",
               resolve_us, connect_us, tls_us, setup_us, clen, secs, (double)clen / secs / 1e6);
        return 0;
    }

    double *lat = calloc((size_t)n, sizeof(double)), first_us = 0, sum = 0;
    int reconnects = 0, open = 1;
    if (!lat)
        die("out of memory");
    for (int i = -warmup; i < n; i++) {
        double a = now_us();
        for (int try = 0;; try++) {
            if (!open || !alive()) {
                conn_close();
                conn_open();
                reconnects += i >= 0;
            }
            request(o.path);
            open = response();
            if (open >= 0)
                break;
            if (try > 0)
                die("connection closed before a response");
        }
        double b = now_us();
        if (i == -warmup)
            first_us = b - t0 - resolve_us;
        if (i >= 0) {
            lat[i] = b - a;
            sum += b - a;
        }
    }
    qsort(lat, (size_t)n, sizeof(double), cmp);
    printf("resolve_us=%.1f connect_us=%.1f tls_us=%.1f setup_us=%.1f first_us=%.1f n=%d "
           "p50_us=%.1f p99_us=%.1f mean_us=%.1f min_us=%.1f reconnects=%d saw_auth=%s\n",
           resolve_us, connect_us, tls_us, setup_us, first_us, n, lat[(n - 1) / 2],
           lat[(int)(0.99 * (n - 1) + 0.5)], sum / n, lat[0], reconnects, last_auth);
    if (auth_mismatch) {
        fprintf(stderr, "egress_client: %d responses without X-Saw-Auth: %s\n", auth_mismatch,
                o.expect_auth);
        return 3;
    }
    conn_close();
    return 0;
}
