/* SPDX-License-Identifier: MIT */
/* envd's plain-HTTP /files (shared/protocols/e2b.md §4.5, §4.6):
 *
 *   GET  /files?path=&username=[&signature=&signature_expiration=]   the file's bytes
 *   POST /files?path=&username=[&signature=...]   write files: multipart/form-data (one part
 *        named "file" per file, its filename the full destination; ?path= for one file) or an
 *        application/octet-stream body (?path= required), either possibly Content-Encoding:
 *        gzip. Answers [{"path","name","type":"file"}] for every file written.
 *
 * Authorized by the sandbox's access token (X-Access-Token) or by a URL signature made from
 * it, so links from sbx.downloadUrl()/uploadUrl() work with a plain fetch. Acts as the
 * sandbox's owner, with the envd user's permissions inside the sandbox (username, default
 * "user"): files are created with that user's ownership, parents included.
 *
 * Memory: as the native files API (files.c). A download holds at most 512 KiB of the client's
 * unsent bytes (the agent is paused beyond). An upload's body is already in memory (libevent
 * 2.1 buffers it whole, bounded by the daemon's --max-upload); a gzip body is inflated into a
 * buffer bounded by the same limit (413 beyond: a small bomb never grows memory further) and
 * handed to the agent in 64 KiB chunks, at most 4 unacknowledged, freeing it as it goes.
 * Accept-Encoding is ignored: downloads are always identity (allowed by the spec).
 * X-Metadata-* headers are accepted and not stored: the agent has no extended-attribute
 * operation, and EntryInfo.metadata is always {} (docs/e2b.md). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <zlib.h>

#include "e2b/connect.h"
#include "e2b/e2b.h"
#include "e2b/fsop.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "base/log.h"
#include "base/mem.h"

#define FILES_MAX_PARTS 1000
#define FILES_UNAUTHORIZED                                                                         \
    "unauthorized access, please provide a valid access token or method signing if supported"

enum files_kind { F_DOWNLOAD, F_UPLOAD };

/* ---- the query ------------------------------------------------------------------------------- */

struct fquery {
    char *path, *username, *signature, *expiration; /* decoded, owned; NULL when absent */
};

static void fquery_release(struct fquery *q)
{
    free(q->path);
    free(q->username);
    free(q->signature);
    free(q->expiration);
    memset(q, 0, sizeof(*q));
}

/* The parameters we know in the query string qs (others are ignored, as envd does). -1 for a
 * parameter given twice or holding a NUL byte, with its name in *key (malloc'ed) and what is
 * wrong in *bad. */
static int fquery_parse_str(const char *qs, struct fquery *q, char **key, const char **bad)
{
    memset(q, 0, sizeof(*q));
    *key = NULL;
    *bad = NULL;
    if (qs == NULL || *qs == '\0')
        return 0;
    gbx_autofree char *copy = gbx_xstrdup(qs);
    char *save = NULL;
    for (char *part = strtok_r(copy, "&", &save); part; part = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(part, '=');
        if (eq)
            *eq = '\0';
        size_t klen = 0, vlen = 0;
        char *k = evhttp_uridecode(part, 1, &klen);
        char *v = evhttp_uridecode(eq ? eq + 1 : "", 1, &vlen);
        GBX_BUG_ON(k == NULL || v == NULL);
        char **slot = strcmp(k, "path") == 0                   ? &q->path
                      : strcmp(k, "username") == 0             ? &q->username
                      : strcmp(k, "signature") == 0            ? &q->signature
                      : strcmp(k, "signature_expiration") == 0 ? &q->expiration
                                                               : NULL;
        if (slot && strlen(v) != vlen)
            *bad = "holds a NUL byte";
        else if (slot && *slot)
            *bad = "is given twice";
        if (*bad) {
            *key = k;
            free(v);
            fquery_release(q);
            return -1;
        }
        free(k);
        if (slot)
            *slot = v;
        else
            free(v);
    }
    return 0;
}

/* The same for the request's query; replies 400 on failure. */
static int fquery_parse(struct evhttp_request *req, struct fquery *q)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *bad = NULL;
    char *key = NULL;
    if (fquery_parse_str(uri ? evhttp_uri_get_query(uri) : NULL, q, &key, &bad) == 0)
        return 0;
    gbx_e2b_error(req, 400, "query parameter '%s' %s", key, bad);
    free(key);
    return -1;
}

/* ---- authorization --------------------------------------------------------------------------- */

/* envd's signature (§4.6): "v1_" + base64(sha256(path:operation:user:token[:expiration]))
 * without the padding. */
static char *signature(const char *path, const char *operation, const char *user, const char *token,
                       const char *expiration)
{
    gbx_autofree char *raw =
        expiration ? gbx_asprintf("%s:%s:%s:%s:%s", path, operation, user, token, expiration)
                   : gbx_asprintf("%s:%s:%s:%s", path, operation, user, token);
    uint8_t md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)raw, strlen(raw), md);
    OPENSSL_cleanse(raw, strlen(raw));
    gbx_autofree char *b64 = gbx_connect_b64(md, sizeof(md));
    size_t n = strlen(b64);
    while (n > 0 && b64[n - 1] == '=')
        b64[--n] = '\0';
    return gbx_asprintf("v1_%s", b64);
}

/* Is the request allowed on l: the access token in X-Access-Token (a wrong one fails, as in
 * envd, whatever the signature), or a valid signature that has not expired. */
static int authorized(const struct evkeyvalq *in, const struct gbx_live *l, const struct fquery *q,
                      const char *operation)
{
    const char *t = evhttp_find_header(in, "X-Access-Token");
    if (t && *t)
        return gbx_e2b_headers_token_ok(in, l);
    if (q->signature == NULL)
        return 0;
    if (q->expiration) {
        char *end = NULL;
        errno = 0;
        long long exp = strtoll(q->expiration, &end, 10);
        if (errno || end == q->expiration || *end != '\0' || exp < (long long)time(NULL))
            return 0;
    }
    gbx_autofree char *want = signature(q->path ? q->path : "", operation,
                                        q->username ? q->username : "", l->token, q->expiration);
    size_t n = strlen(want);
    return strlen(q->signature) == n && CRYPTO_memcmp(want, q->signature, n) == 0;
}

struct find_signed {
    const struct evkeyvalq *in;
    const struct fquery *q;
    const char *operation;
    struct gbx_live *found;
};

static int try_signed(void *arg, struct gbx_live *l)
{
    struct find_signed *f = arg;
    if ((l->paused && !l->auto_resume) || !authorized(f->in, l, f->q, f->operation))
        return 0;
    f->found = l;
    return 1;
}

struct gbx_live *gbx_e2b_files_credential(struct gbx_server *s, const struct evkeyvalq *in,
                                          enum evhttp_cmd_type m, const char *query,
                                          struct gbx_live *l)
{
    struct fquery q;
    const char *bad = NULL;
    char *key = NULL;
    if (fquery_parse_str(query, &q, &key, &bad) < 0) {
        free(key);
        return NULL;
    }
    const char *operation = m == EVHTTP_REQ_GET ? "read" : "write";
    struct gbx_live *found = NULL;
    if (l == NULL) {
        struct find_signed f = {in, &q, operation, NULL};
        if (q.signature)
            gbx_sandboxes_each_any(s, try_signed, &f);
        found = f.found;
    } else if ((!l->paused || l->auto_resume) && authorized(in, l, &q, operation)) {
        found = l;
    }
    fquery_release(&q);
    return found;
}

/* ---- download -------------------------------------------------------------------------------- */

static void on_read(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    gbx_e2b_fsop_enter(op);
    if (h == NULL || h->type == GBX_MSG_ERROR) {
        char msg[512];
        (void)gbx_aconn_error_text(h ? p : NULL, h ? h->len : 0, msg, sizeof(msg));
        gbx_log_warn("sandbox '%s': download of '%s' cut short: %s", op->sandbox, op->path, msg);
        /* the status is out: this closes the connection, a short body for the client */
        gbx_e2b_fsop_error(op, "internal", 500, "%s", msg);
        gbx_e2b_fsop_finish(op);
    } else if (!final && h->type == GBX_EV_DATA && op->req) {
        struct gbx_attr a;
        if (gbx_attrs_find(p, h->len, GBX_A_DATA, &a) == 1 && a.len > 0) {
            size_t n = a.len;
            if (n > op->len - op->sent)
                n = (size_t)(op->len - op->sent); /* the file grew: Content-Length holds */
            struct evbuffer *b = evbuffer_new();
            GBX_BUG_ON(b == NULL);
            evbuffer_add(b, a.data, n);
            op->sent += n;
            gbx_e2b_fsop_send_chunk(op, b);
            evbuffer_free(b);
        }
    } else if (final && h->type == GBX_MSG_OK) {
        if (op->sent < op->len) {
            gbx_log_warn("sandbox '%s': '%s' shrank during its download", op->sandbox, op->path);
            gbx_e2b_fsop_error(op, "internal", 500, "the file shrank");
        } else if (op->req) {
            struct evhttp_request *req = op->req;
            gbx_e2b_fsop_finish(op); /* detaches the client first */
            evhttp_send_reply_end(req);
        }
        gbx_e2b_fsop_finish(op);
    }
    gbx_e2b_fsop_leave(op);
}

static void on_download_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    uint32_t ftype = h && h->type == GBX_MSG_OK ? gbx_e2b_ftype(p, h->len) : 0;
    uint64_t size = 0;
    if (h == NULL || h->type != GBX_MSG_OK) {
        gbx_e2b_fsop_fail(op, h, p, op->path);
    } else if (ftype == GBX_FT_DIR) {
        gbx_e2b_fsop_error(op, "invalid_argument", 400, "path '%s' is a directory", op->path);
        gbx_e2b_fsop_finish(op);
    } else if (ftype != GBX_FT_FILE) {
        gbx_e2b_fsop_error(op, "invalid_argument", 400, "path '%s' is not a regular file",
                           op->path);
        gbx_e2b_fsop_finish(op);
    } else if (op->req == NULL) {
        gbx_e2b_fsop_finish(op);
    } else {
        (void)!gbx_attrs_get_u64(p, h->len, GBX_A_SIZE, &size);
        op->len = size;
        struct evkeyvalq *out = evhttp_request_get_output_headers(op->req);
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRIu64, size);
        evhttp_add_header(out, "Content-Type", "application/octet-stream");
        evhttp_add_header(out, "Content-Length", buf);
        if (size == 0) {
            struct evhttp_request *req = op->req;
            gbx_e2b_fsop_finish(op);
            evhttp_send_reply(req, 200, "OK", NULL);
        } else {
            struct gbx_msg *m = gbx_e2b_fsop_begin(op, GBX_MSG_READ, op->path);
            gbx_msg_put_u64(m, GBX_A_LENGTH, size);
            if (gbx_e2b_fsop_send(op, on_read) == 0) {
                evhttp_send_reply_start(op->req, 200, "OK");
                op->started = 1;
            }
        }
    }
    gbx_e2b_fsop_leave(op);
}

/* ---- upload ---------------------------------------------------------------------------------- */

static void upload_next(struct gbx_e2b_fsop *op);

/* The current item's write is over (agent/awrite.h): audit it, then the next item or the
 * answer. */
static void on_written(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, long err)
{
    struct gbx_e2b_fsop *op = arg;
    gbx_e2b_fsop_enter(op);
    int e = err == 0 && h && h->type != GBX_MSG_OK ? gbx_e2b_fsop_errno(h, p, NULL) : 0;
    if (err == -EBADMSG) {
        gbx_e2b_fsop_error(op, "internal", 500, "the sandbox's agent sent a malformed reply");
        gbx_e2b_fsop_finish(op);
    } else if (err < 0) {
        gbx_e2b_fsop_send_failed(op, err);
    } else if (op->write.step == GBX_AWRITE_OPEN && (e == EEXIST || e == ENOTDIR)) {
        gbx_e2b_fsop_error(op, "invalid_argument", 400,
                           "a file is where a directory of '%s' must be", op->items[op->cur].path);
        gbx_e2b_fsop_finish(op);
    } else if (h == NULL || h->type != GBX_MSG_OK) {
        gbx_e2b_fsop_fail(op, h, p, NULL);
    } else {
        const struct gbx_e2b_item *it = &op->items[op->cur++];
        uint64_t size = it->len;
        (void)!gbx_attrs_get_u64(p, h->len, GBX_A_SIZE, &size);
        gbx_e2b_fsop_audit(
            op, "file.write",
            json_pack("{s:o,s:I}", "path", gbx_e2b_jstr(it->path), "bytes", (json_int_t)size));
        const char *slash = strrchr(it->path, '/');
        json_array_append_new(
            op->written, json_pack("{s:o,s:o,s:s}", "path", gbx_e2b_jstr(it->path), "name",
                                   gbx_e2b_jstr(slash ? slash + 1 : it->path), "type", "file"));
        if (op->cur < op->nitems)
            upload_next(op);
        else
            gbx_e2b_fsop_reply(op, 200, json_incref(op->written));
    }
    gbx_e2b_fsop_leave(op);
}

/* Before writing a file: a directory there is the caller's mistake (400), as in envd. */
static void on_target_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    const char *path = op->items[op->cur].path;
    int unknown_user = 0;
    if (h == NULL) {
        gbx_e2b_fsop_fail(op, h, p, NULL);
    } else if (h->type == GBX_MSG_OK && gbx_e2b_ftype(p, h->len) == GBX_FT_DIR) {
        gbx_e2b_fsop_error(op, "invalid_argument", 400, "path '%s' is a directory", path);
        gbx_e2b_fsop_finish(op);
    } else if (h->type != GBX_MSG_OK && (gbx_e2b_fsop_errno(h, p, &unknown_user), unknown_user)) {
        gbx_e2b_fsop_fail(op, h, p, NULL);
    } else {
        /* in place, as envd: an existing file keeps its inode, mode and owner */
        const struct gbx_e2b_item *it = &op->items[op->cur];
        op->mutation = 1;
        gbx_awrite_init(&op->write, op->ac, it->data, op->body, it->len, on_written, op);
        gbx_awrite_open(&op->write, gbx_e2b_fsop_begin(op, GBX_MSG_WRITE, path), 0644,
                        GBX_W_CREATE | GBX_W_TRUNC | GBX_W_PARENTS);
    }
    gbx_e2b_fsop_leave(op);
}

static void upload_next(struct gbx_e2b_fsop *op)
{
    (void)gbx_e2b_fsop_begin(op, GBX_MSG_STAT, op->items[op->cur].path);
    (void)gbx_e2b_fsop_send(op, on_target_stat);
}

/* Inflate a gzip body (one or more members) into a new buffer of at most cap bytes.
 * 0, -EFBIG past cap, -EINVAL for a body that is not gzip or is truncated. */
static int gunzip(struct evbuffer *in, size_t cap, struct evbuffer **out)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return -ENOMEM;
    struct evbuffer *o = evbuffer_new();
    GBX_BUG_ON(o == NULL);
    int nvec = evbuffer_peek(in, -1, NULL, NULL, 0);
    struct evbuffer_iovec *vec = gbx_xcalloc(nvec > 0 ? (size_t)nvec : 1, sizeof(*vec));
    nvec = evbuffer_peek(in, -1, NULL, vec, nvec);
    int r = 0, ended = 0, any = 0;
    size_t total = 0;
    for (int i = 0; i < nvec && r == 0; i++) {
        z.next_in = vec[i].iov_base;
        z.avail_in = (uInt)vec[i].iov_len;
        while (z.avail_in > 0 && r == 0) {
            any = 1;
            if (ended) { /* another member follows */
                inflateReset(&z);
                ended = 0;
            }
            struct evbuffer_iovec v;
            if (evbuffer_reserve_space(o, 64 * 1024, &v, 1) < 1)
                GBX_BUG_ON(1);
            size_t room = v.iov_len > 64 * 1024 ? 64 * 1024 : v.iov_len;
            z.next_out = v.iov_base;
            z.avail_out = (uInt)room;
            int zr = inflate(&z, Z_NO_FLUSH);
            v.iov_len = room - z.avail_out;
            evbuffer_commit_space(o, &v, 1);
            total += v.iov_len;
            if (total > cap)
                r = -EFBIG;
            else if (zr == Z_STREAM_END)
                ended = 1;
            else if (zr != Z_OK && !(zr == Z_BUF_ERROR && z.avail_in == 0))
                r = -EINVAL;
        }
    }
    free(vec);
    inflateEnd(&z);
    if (r == 0 && (!any || !ended))
        r = -EINVAL;
    if (r < 0) {
        evbuffer_free(o);
        return r;
    }
    *out = o;
    return 0;
}

/* The media type of a Content-Type value, lower-cased, without parameters. */
static void media_type(const char *ct, char *out, size_t outsz)
{
    size_t o = 0;
    while (ct && (*ct == ' ' || *ct == '\t'))
        ct++;
    for (; ct && *ct && *ct != ';' && *ct != ' ' && o + 1 < outsz; ct++)
        out[o++] = (char)(*ct >= 'A' && *ct <= 'Z' ? *ct - 'A' + 'a' : *ct);
    out[o] = '\0';
}

/* The files of a multipart body (the op's body, or the request's). Replies 400 when there
 * is none or it is malformed. */
static int parse_multipart(struct gbx_e2b_fsop *op, const struct fquery *q, const char *ct)
{
    struct evhttp_request *req = op->req;
    char boundary[GBX_MULTIPART_BOUNDARY_MAX + 1];
    if (gbx_multipart_boundary(ct, boundary, sizeof(boundary)) < 0) {
        gbx_e2b_error(req, 400, "a multipart/form-data body needs a boundary");
        return -1;
    }
    size_t len = evbuffer_get_length(op->body);
    const uint8_t *body = len ? evbuffer_pullup(op->body, -1) : (const uint8_t *)"";
    const char *why = NULL;
    if (gbx_multipart_parse(boundary, body, len, FILES_MAX_PARTS, &op->mp, &why) < 0) {
        gbx_e2b_error(req, 400, "malformed multipart body: %s", why ? why : "?");
        return -1;
    }
    op->items = gbx_xcalloc(op->mp.n ? op->mp.n : 1, sizeof(*op->items));
    for (size_t i = 0; i < op->mp.n; i++) {
        const struct gbx_multipart_part *part = &op->mp.parts[i];
        if (part->name == NULL || strcmp(part->name, "file") != 0)
            continue; /* other fields are ignored, as envd does */
        const char *dest = q->path ? q->path : part->filename;
        if (dest == NULL || *dest == '\0') {
            gbx_e2b_error(req, 400,
                          "a 'file' part needs a filename (its destination) when there is no "
                          "path parameter");
            return -1;
        }
        char *path = gbx_e2b_fsop_path(op->user, dest);
        if (path == NULL) {
            gbx_e2b_error(req, 400, "'%.128s' is not a valid path (at most 4096 bytes)", dest);
            return -1;
        }
        for (size_t j = 0; j < op->nitems; j++) {
            if (strcmp(op->items[j].path, path) == 0) {
                gbx_autofree char *shown = gbx_e2b_utf8(path);
                free(path);
                gbx_e2b_error(req, 400,
                              "you cannot upload multiple files to the same path '%s' in one "
                              "upload request",
                              shown);
                return -1;
            }
        }
        struct gbx_e2b_item *it = &op->items[op->nitems++];
        it->path = path;
        it->data = part->data;
        it->len = part->len;
    }
    if (op->nitems == 0) {
        gbx_e2b_error(req, 400, "the multipart body holds no part named 'file'");
        return -1;
    }
    return 0;
}

/* The files of a POST into op->items. Replies and returns -1 on a bad request. */
static int parse_upload(struct gbx_e2b_fsop *op, const struct fquery *q)
{
    struct evhttp_request *req = op->req;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *enc = evhttp_find_header(in, "Content-Encoding");
    /* the body moves (no copy) into the op: the writes go on if the client leaves */
    op->body = evbuffer_new();
    GBX_BUG_ON(op->body == NULL);
    op->own_body = 1;
    evbuffer_add_buffer(op->body, evhttp_request_get_input_buffer(req));
    if (enc && *enc && strcasecmp(enc, "identity") != 0) {
        if (strcasecmp(enc, "gzip") != 0) {
            gbx_e2b_error(req, 400, "unsupported Content-Encoding '%.64s' (gzip is)", enc);
            return -1;
        }
        size_t cap = gbx_server_max_upload(op->srv);
        struct evbuffer *plain = NULL;
        int r = gunzip(op->body, cap, &plain);
        if (r == -EFBIG) {
            gbx_e2b_error(req, 413,
                          "the decompressed body is larger than the upload limit (%zu "
                          "bytes)",
                          cap);
            return -1;
        }
        if (r < 0) {
            gbx_e2b_error(req, 400, "error decompressing request body: not a complete gzip stream");
            return -1;
        }
        evbuffer_free(op->body); /* the compressed copy */
        op->body = plain;
    }
    const char *ct = evhttp_find_header(in, "Content-Type");
    char mt[64];
    media_type(ct, mt, sizeof(mt));
    if (strcmp(mt, "application/octet-stream") == 0) {
        if (q->path == NULL || *q->path == '\0') {
            gbx_e2b_error(req, 400, "path query parameter is required for raw body upload");
            return -1;
        }
        char *path = gbx_e2b_fsop_path(op->user, q->path);
        if (path == NULL) {
            gbx_e2b_error(req, 400, "'path' is not a valid path (at most 4096 bytes)");
            return -1;
        }
        op->items = gbx_xcalloc(1, sizeof(*op->items));
        op->nitems = 1;
        op->items[0].path = path;
        op->items[0].len = evbuffer_get_length(op->body);
        return 0;
    }
    if (strncmp(mt, "multipart/", 10) == 0)
        return parse_multipart(op, q, ct);
    gbx_e2b_error(req, 400,
                  "unsupported content type: %.64s, expected multipart/form-data or "
                  "application/octet-stream",
                  ct ? ct : "none");
    return -1;
}

/* ---- the request ----------------------------------------------------------------------------- */

void gbx_e2b_files(struct gbx_server *s, struct event_base *base, struct evhttp_request *req,
                   struct gbx_live *l)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, POST");
        return gbx_e2b_error(req, 405, "method not allowed (GET or POST)");
    }
    const char *operation = m == EVHTTP_REQ_GET ? "read" : "write";
    struct fquery q;
    if (fquery_parse(req, &q) < 0)
        return;
    if (l == NULL) {
        /* a signed URL without the sandbox's id (sbx.downloadUrl()/uploadUrl() with
         * E2B_SANDBOX_URL): the sandbox is the one whose token made the signature */
        struct find_signed f = {evhttp_request_get_input_headers(req), &q, operation, NULL};
        if (q.signature)
            gbx_sandboxes_each_any(s, try_signed, &f);
        l = f.found;
        if (l == NULL) {
            fquery_release(&q);
            return gbx_e2b_error(req, 401, FILES_UNAUTHORIZED);
        }
    } else if (!authorized(evhttp_request_get_input_headers(req), l, &q, operation)) {
        /* by id, without its token or a good signature: as if there were no such sandbox */
        fquery_release(&q);
        return gbx_e2b_not_found(req, l->sb->id);
    }
    struct gbx_actor who; /* the sandbox's owner */
    gbx_actor_for(&who, l->owner);
    char user[64];
    if (gbx_e2b_user(req, q.username ? q.username : "", 0, user, sizeof(user)) < 0) {
        fquery_release(&q);
        return;
    }

    struct gbx_e2b_fsop *op = gbx_e2b_fsop_new(s, &who, base, req, l, GBX_E2B_REST,
                                               m == EVHTTP_REQ_GET ? F_DOWNLOAD : F_UPLOAD, user);
    int r = 0;
    if (m == EVHTTP_REQ_GET) {
        op->path = q.path && *q.path ? gbx_e2b_fsop_path(user, q.path) : NULL;
        if (op->path == NULL) {
            gbx_e2b_error(req, 400, "'path' is required (at most 4096 bytes)");
            r = -1;
        }
    } else {
        op->written = json_array();
        r = parse_upload(op, &q);
    }
    fquery_release(&q);
    if (r < 0) {
        op->req = NULL; /* answered */
        gbx_e2b_fsop_finish(op);
        gbx_e2b_fsop_leave(op);
        return;
    }
    if (gbx_e2b_fsop_connect(op, l, NULL) < 0) {
        gbx_e2b_fsop_leave(op);
        return;
    }
    if (m == EVHTTP_REQ_GET) {
        (void)gbx_e2b_fsop_begin(op, GBX_MSG_STAT, op->path);
        (void)gbx_e2b_fsop_send(op, on_download_stat);
    } else {
        upload_next(op);
    }
    gbx_e2b_fsop_leave(op);
}
