/* SPDX-License-Identifier: MIT */
/* HTTP to the daemon's admin socket with libcurl (libevent 2.1's HTTP client cannot use a
 * unix socket). libcurl is loaded on first use: linked in, its ~30 dependent libraries would
 * cost every glovebox process several milliseconds at start, `glovebox run` included. */
#include "cli/api.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/curl_dl.h"
#include "base/fileutil.h"
#include "base/mem.h"
#include "cli/cli.h"
#include "sandbox/backend.h"

const char *gbx_cli_socket(void)
{
    static char path[4096];
    const char *rt = getenv("GLOVEBOX_RUNTIME_DIR");
    snprintf(path, sizeof(path), "%s/api.sock", rt && *rt ? rt : GBX_DEFAULT_RUNTIME_DIR);
    return path;
}

static const struct gbx_curl *C;

static int curl_load(void)
{
    char why[256];
    if (C == NULL && (C = gbx_curl_load(why, sizeof(why))) == NULL) {
        gbx_cli_error("cannot load libcurl (install the libcurl4 package): %s", why);
        return -1;
    }
    return 0;
}

struct call {
    char *buf; /* the reply, or the unconsumed tail of a stream */
    size_t len, cap;
    gbx_line_fn on_line;
    void *arg;
    long status;
    CURL *curl;
    int stop; /* gbx_cli_stream_stop: end the stream after this line */
};

/* the stream whose lines are being delivered on this thread */
static __thread struct call *delivering;

void gbx_cli_stream_stop(void)
{
    if (delivering)
        delivering->stop = 1;
}

static void deliver_lines(struct call *c)
{
    size_t start = 0;
    delivering = c;
    for (size_t i = 0; i < c->len && !c->stop; i++) {
        if (c->buf[i] != '\n')
            continue;
        c->on_line(c->arg, c->buf + start, i - start);
        start = i + 1;
    }
    delivering = NULL;
    memmove(c->buf, c->buf + start, c->len - start);
    c->len -= start;
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    struct call *c = arg;
    size_t len = size * n;
    if (c->len + len + 1 > c->cap) {
        c->cap = (c->len + len + 1) * 2;
        c->buf = gbx_xrealloc(c->buf, c->cap);
    }
    memcpy(c->buf + c->len, p, len);
    c->len += len;
    c->buf[c->len] = '\0';
    if (c->on_line) {
        if (c->status == 0)
            C->easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->status);
        if (c->status / 100 == 2)
            deliver_lines(c);
    }
    return c->stop ? 0 : len; /* 0 aborts the transfer */
}

static int do_call(const char *method, const char *path, json_t *body, gbx_line_fn on_line,
                   void *arg, json_t **reply, const void *raw, size_t rawlen)
{
    if (reply)
        *reply = NULL;
    const char *sock = gbx_cli_socket();
    if (curl_load() < 0)
        return GBX_CLI_LOCAL_FAILURE;
    CURL *curl = C->easy_init();
    GBX_BUG_ON(curl == NULL);
    struct call c = {.on_line = on_line, .arg = arg, .curl = curl};
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    gbx_autofree char *url = gbx_asprintf("http://glovebox%s", path);
    struct curl_slist *hdrs = NULL;
    C->easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, sock);
    C->easy_setopt(curl, CURLOPT_URL, url);
    C->easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    C->easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    C->easy_setopt(curl, CURLOPT_WRITEDATA, &c);
    C->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (text) {
        hdrs = C->slist_append(hdrs, "Content-Type: application/json");
        C->easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
        C->easy_setopt(curl, CURLOPT_POSTFIELDS, text);
    } else if (raw) {
        hdrs = C->slist_append(hdrs, "Content-Type: application/octet-stream");
        hdrs = C->slist_append(hdrs, "Expect:");
        C->easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
        C->easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)rawlen);
        C->easy_setopt(curl, CURLOPT_POSTFIELDS, raw);
    }
    CURLcode rc = C->easy_perform(curl);
    long status = GBX_CLI_NO_DAEMON;
    if (rc == CURLE_WRITE_ERROR && c.stop) {
        status = c.status; /* stopped by the line callback */
    } else if (rc != CURLE_OK) {
        gbx_cli_error("cannot reach gloveboxd at '%s': %s (is it running? start it with "
                      "'gloveboxd', or set GLOVEBOX_RUNTIME_DIR)",
                      sock, C->easy_strerror(rc));
    } else {
        C->easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        if (on_line && status / 100 == 2 && c.len)
            c.on_line(c.arg, c.buf, c.len); /* a last line without a newline */
        else if (reply && c.len && (!on_line || status / 100 != 2))
            *reply = json_loadb(c.buf, c.len, 0, NULL);
    }
    C->slist_free_all(hdrs);
    C->easy_cleanup(curl);
    free(text);
    free(c.buf);
    return (int)status;
}

int gbx_cli_call(const char *method, const char *path, json_t *body, json_t **reply)
{
    return do_call(method, path, body, NULL, NULL, reply, NULL, 0);
}

int gbx_cli_call_raw(const char *method, const char *path, const void *data, size_t len,
                     json_t **reply)
{
    return do_call(method, path, NULL, NULL, NULL, reply, data ? data : "", len);
}

int gbx_cli_stream(const char *method, const char *path, json_t *body, gbx_line_fn on_line,
                   void *arg, json_t **reply)
{
    return do_call(method, path, body, on_line, arg, reply, NULL, 0);
}

void gbx_cli_print_error(int status, json_t *reply)
{
    const char *msg =
        json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
    if (msg)
        gbx_cli_error("%s", msg);
    else if (status > 0)
        gbx_cli_error("gloveboxd answered %d", status);
}

int gbx_cli_result(int status, json_t *reply, int ok)
{
    if (status == ok)
        return GBX_EXIT_OK;
    if (status >= 0)
        gbx_cli_print_error(status, reply);
    return status == 404                 ? GBX_EXIT_NOT_FOUND
           : status == GBX_CLI_NO_DAEMON ? GBX_EXIT_NO_DAEMON
                                         : GBX_EXIT_FAILED;
}

int gbx_cli_call_ok(const char *method, const char *path, json_t *body, json_t **reply)
{
    return gbx_cli_call_want(method, path, body, 200, reply);
}

int gbx_cli_call_want(const char *method, const char *path, json_t *body, int want, json_t **reply)
{
    *reply = NULL;
    int status = gbx_cli_call(method, path, body, reply);
    int r = gbx_cli_result(status, *reply, want);
    if (r != GBX_EXIT_OK) {
        json_decref(*reply);
        *reply = NULL;
    }
    return r;
}

/* ---- bodies streamed from and to file descriptors (glovebox cp) -------------------------- */

struct xfer {
    struct call c; /* an error reply, or the JSON reply when out_fd is -1 */
    int in_fd, out_fd;
    int write_failed;
};

static size_t xfer_read(char *p, size_t size, size_t n, void *arg)
{
    struct xfer *x = arg;
    ssize_t r;
    do
        r = read(x->in_fd, p, size * n);
    while (r < 0 && errno == EINTR);
    return r < 0 ? CURL_READFUNC_ABORT : (size_t)r;
}

static size_t xfer_write(char *p, size_t size, size_t n, void *arg)
{
    struct xfer *x = arg;
    if (x->c.status == 0)
        C->easy_getinfo(x->c.curl, CURLINFO_RESPONSE_CODE, &x->c.status);
    if (x->out_fd < 0 || x->c.status / 100 != 2)
        return on_data(p, size, n, &x->c);
    if (gbx_write_all(x->out_fd, p, size * n) < 0) {
        x->write_failed = 1;
        return 0; /* aborts the transfer */
    }
    return size * n;
}

int gbx_cli_transfer(const char *method, const char *path, int in_fd, long long in_len, int out_fd,
                     json_t **reply)
{
    if (reply)
        *reply = NULL;
    const char *sock = gbx_cli_socket();
    if (curl_load() < 0)
        return GBX_CLI_LOCAL_FAILURE;
    CURL *curl = C->easy_init();
    GBX_BUG_ON(curl == NULL);
    struct xfer x = {.c = {.curl = curl}, .in_fd = in_fd, .out_fd = out_fd};
    gbx_autofree char *url = gbx_asprintf("http://glovebox%s", path);
    struct curl_slist *hdrs = NULL;
    C->easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, sock);
    C->easy_setopt(curl, CURLOPT_URL, url);
    C->easy_setopt(curl, CURLOPT_WRITEFUNCTION, xfer_write);
    C->easy_setopt(curl, CURLOPT_WRITEDATA, &x);
    C->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (in_fd >= 0) {
        hdrs = C->slist_append(hdrs, "Content-Type: application/octet-stream");
        C->easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
        C->easy_setopt(curl, CURLOPT_UPLOAD, 1L);
        C->easy_setopt(curl, CURLOPT_READFUNCTION, xfer_read);
        C->easy_setopt(curl, CURLOPT_READDATA, &x);
        C->easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)in_len);
    }
    C->easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    CURLcode rc = C->easy_perform(curl);
    long status = GBX_CLI_NO_DAEMON;
    if (x.write_failed) {
        gbx_cli_error("cannot write the download: %s", strerror(errno));
        status = GBX_CLI_LOCAL_FAILURE;
    } else if (rc != CURLE_OK) {
        gbx_cli_error("cannot reach gloveboxd at '%s': %s (is it running? start it with "
                      "'gloveboxd', or set GLOVEBOX_RUNTIME_DIR)",
                      sock, C->easy_strerror(rc));
    } else {
        C->easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        if (reply && x.c.len)
            *reply = json_loadb(x.c.buf, x.c.len, 0, NULL);
    }
    C->slist_free_all(hdrs);
    C->easy_cleanup(curl);
    free(x.c.buf);
    return (int)status;
}

int gbx_cli_download(const char *path, const char *target, json_t **reply)
{
    if (strcmp(target, "-") == 0)
        return gbx_cli_transfer("GET", path, -1, -1, STDOUT_FILENO, reply);
    /* into a temporary file next to the target, renamed over it once complete */
    gbx_autofree char *tmp = gbx_asprintf("%s.gbx-XXXXXX", target);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        gbx_cli_error("cannot create '%s': %s", tmp, strerror(errno));
        return GBX_CLI_LOCAL_FAILURE;
    }
    int status = gbx_cli_transfer("GET", path, -1, -1, fd, reply);
    mode_t um = umask(0);
    umask(um);
    int ok = status == 200 && fchmod(fd, 0666 & ~um) == 0;
    if (close(fd) < 0 && ok) {
        gbx_cli_error("cannot write '%s': %s", tmp, strerror(errno));
        ok = 0;
        status = GBX_CLI_LOCAL_FAILURE;
    }
    if (ok && rename(tmp, target) < 0) {
        gbx_cli_error("cannot rename '%s' to '%s': %s", tmp, target, strerror(errno));
        ok = 0;
        status = GBX_CLI_LOCAL_FAILURE;
    }
    if (!ok)
        (void)unlink(tmp);
    return ok ? 200 : status == 200 ? GBX_CLI_LOCAL_FAILURE : status;
}
