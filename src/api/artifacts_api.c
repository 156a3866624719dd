/* SPDX-License-Identifier: MIT */
/* The artifact routes (the service: core/artifacts.c):
 *
 *   POST   /v1/sandboxes/{id}/artifacts   {path, name?, session?, metadata?, max_bytes?} -> 201
 *   GET    /v1/artifacts                  ?session=&sandbox=&name=&order=&after=&limit=
 *   GET    /v1/artifacts/{id}
 *   GET    /v1/artifacts/{id}/content     the blob (Range, ETag = sha256)
 *   DELETE /v1/artifacts/{id}             -> 204
 *
 * A publish is answered once the capture is stored, its row written and its audit record
 * durable; a download streams the blob the service opens. */
#include "api/artifacts_api.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include "http/http.h"
#include "http/recorded.h"
#include "core/artifacts.h"
#include "core/sandboxes.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/query.h"
#include "sandbox/backend.h"
#include "store/artifacts.h"

#define ART_OUT_CAP (1u << 20) /* client bytes queued before a download waits */
#define ART_CHUNK (64u << 10)
#define ART_LIST_DEFAULT 100
#define ART_LIST_MAX 1000
#define ART_NAME_MAX 256

/* The first artifact request of this daemon sweeps: every temporary file then is a leftover
 * (1 s of slack for the file system's coarse clock). */
static void sweep_once(struct gbx_server *s)
{
    static int swept;
    if (!swept) {
        swept = 1;
        gbx_artifacts_sweep(s, 1000000000);
    }
}

/* An error of the service: a capture over its size limit is 413 (a quota's LIMIT is 429). */
static void reply_err(struct evhttp_request *req, const struct gbx_err *err)
{
    if (err->kind == GBX_ERR_LIMIT && err->errnum == EFBIG)
        gbx_http_reply_error_status(req, 413, err->kind, "%s", err->msg);
    else
        gbx_http_reply_err(req, err);
}

static void not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed (use %s)", allow);
}

/* ---- JSON -------------------------------------------------------------------------------- */

static json_t *artifact_json(const struct gbx_store_artifact *a)
{
    char *at = gbx_rfc3339(a->created_ns);
    json_t *meta = a->metadata ? json_loads(a->metadata, 0, NULL) : NULL;
    json_t *j = json_pack(
        "{s:s,s:s,s:s,s:s,s:I,s:s,s:o,s:o,s:s,s:o}", "id", a->id, "sha256", a->sha256, "name",
        a->name, "kind", a->kind, "size", (json_int_t)a->size_bytes, "content_type",
        strcmp(a->kind, "dir") == 0 ? "application/x-tar" : "application/octet-stream", "session",
        a->session ? json_string(a->session) : json_null(), "sandbox",
        a->sandbox ? json_string(a->sandbox) : json_null(), "created_at", at ? at : "", "metadata",
        meta ? meta : json_object());
    free(at);
    return j;
}

/* ---- the publish route ------------------------------------------------------------------- */

/* A publish's request while the service works on it. */
struct pub {
    struct gbx_server *s;
    struct gbx_actor who;       /* its copy: the publish outlives the handler */
    struct evhttp_request *req; /* NULL once the client left */
};

static void pub_client_gone(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    struct pub *p = arg;
    p->req = NULL;
}

static void publish_done(void *arg, const struct gbx_artifact_result *r, const struct gbx_err *err)
{
    struct pub *p = arg;
    if (p->req && evhttp_request_get_connection(p->req))
        evhttp_connection_set_closecb(evhttp_request_get_connection(p->req), NULL, NULL);
    if (err) {
        if (p->req)
            reply_err(p->req, err);
        free(p);
        return;
    }
    const struct gbx_store_artifact *a = r->row;
    json_t *detail = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:I}", "id", a->id, "sha256", a->sha256,
                               "name", a->name, "kind", a->kind, "size", (json_int_t)a->size_bytes,
                               "path", r->path, "skipped", (json_int_t)r->skipped);
    if (p->req) /* answered once the record is durable (http/recorded.h) */
        gbx_http_reply_recorded(p->s, p->who.name, "artifact.publish", a->sandbox, detail, p->req,
                                201, artifact_json(a));
    else
        gbx_server_audit_as(p->s, p->who.name, "artifact.publish", a->sandbox, detail);
    free(p);
}

void gbx_api_sandbox_artifacts(struct gbx_server *s, const struct gbx_actor *who,
                               struct evhttp_request *req, const char *id)
{
    sweep_once(s);
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
        return not_allowed(req, "POST");
    struct gbx_live *l = gbx_sandbox_id_valid(id) == 0 ? gbx_sandboxes_find(s, who, id) : NULL;
    if (l == NULL)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "sandbox '%s' not found", id);
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    const char *path = json_string_value(json_object_get(body, "path"));
    json_t *jname = json_object_get(body, "name"), *jses = json_object_get(body, "session");
    json_t *jmeta = json_object_get(body, "metadata"), *jmax = json_object_get(body, "max_bytes");
    uint64_t limit = gbx_server_max_upload(s), max_bytes = limit;
    char *metadata = NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    static const char *const fields[] = {"path", "name", "session", "metadata", "max_bytes", NULL};
    if (gbx_http_only_fields(req, body, fields, "path, name, session, metadata, max_bytes") < 0)
        goto out;
    if (path == NULL || path[0] != '/' || strlen(path) >= 4096 ||
        strlen(path) != json_string_length(json_object_get(body, "path"))) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "'path' must be an absolute path in the sandbox (a string)");
        goto out;
    }
    if (jname && (!json_is_string(jname) || json_string_length(jname) == 0 ||
                  json_string_length(jname) > ART_NAME_MAX ||
                  strlen(json_string_value(jname)) != json_string_length(jname))) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'name' must be a string of 1 to %d bytes",
                             ART_NAME_MAX);
        goto out;
    }
    if (jses && !json_is_null(jses) && !json_is_string(jses)) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'session' must be a session id");
        goto out;
    }
    if (jmeta && !json_is_null(jmeta) && !json_is_object(jmeta)) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'metadata' must be an object");
        goto out;
    }
    if (jmax) {
        if (!json_is_integer(jmax) || json_integer_value(jmax) < 1 ||
            (uint64_t)json_integer_value(jmax) > limit) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'max_bytes' must be from 1 to %" PRIu64 " (gloveboxd "
                                 "--max-upload)",
                                 limit);
            goto out;
        }
        max_bytes = (uint64_t)json_integer_value(jmax);
    }
    if (json_is_object(jmeta))
        metadata = json_dumps(jmeta, JSON_COMPACT | JSON_SORT_KEYS);
    const struct gbx_artifact_spec spec = {
        .path = path,
        .name = json_string_value(jname),
        .session = json_string_value(jses),
        .metadata = metadata,
        .max_bytes = max_bytes,
    };
    struct pub *p = gbx_xcalloc(1, sizeof(*p));
    p->s = s;
    p->who = *who;
    p->req = req;
    if (gbx_artifacts_publish(s, who, l, &spec, publish_done, p, &err) < 0) {
        free(p);
        gbx_http_reply_err(req, err);
        goto out;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), pub_client_gone, p);
out:
    free(metadata);
    json_decref(body);
}

/* ---- list, get, delete ------------------------------------------------------------------- */

struct list_ctx {
    json_t *arr;
    int n;
};

static int list_one(void *arg, const struct gbx_store_artifact *a)
{
    struct list_ctx *c = arg;
    json_array_append_new(c->arr, artifact_json(a));
    c->n++;
    return 0;
}

/* order=asc (oldest first, the default) or desc (newest first). */
static const char *order_param(void *out, const char *v)
{
    int *newest_first = out;
    if (strcmp(v, "asc") != 0 && strcmp(v, "desc") != 0)
        return "asc or desc";
    *newest_first = strcmp(v, "desc") == 0;
    return NULL;
}

static void handle_list(struct gbx_server *s, const struct gbx_actor *who,
                        struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct gbx_store_artifact_filter f = {.limit = ART_LIST_DEFAULT};
    uint64_t limit = ART_LIST_DEFAULT;
    const struct gbx_query_param params[] = {
        {.name = "session", .kind = GBX_QUERY_STR, .out = &f.session},
        {.name = "sandbox", .kind = GBX_QUERY_STR, .out = &f.sandbox},
        {.name = "name", .kind = GBX_QUERY_STR, .out = &f.name},
        {.name = "after", .kind = GBX_QUERY_STR, .out = &f.after_id},
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = ART_LIST_MAX},
        {.name = "order", .kind = GBX_QUERY_FN, .out = &f.newest_first, .fn = order_param},
    };
    struct gbx_query q = {0};
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), 0, &err) < 0) {
        gbx_http_reply_err(req, err);
        goto out;
    }
    f.limit = (int)limit + 1; /* one more says whether there is a next page */
    struct list_ctx c = {.arr = json_array()};
    if (gbx_artifacts_list(s, who, &f, list_one, &c, &err) < 0) {
        json_decref(c.arr);
        gbx_http_reply_err(req, err);
        goto out;
    }
    json_t *next = json_null();
    if ((uint64_t)c.n > limit) {
        json_array_remove(c.arr, limit);
        json_t *lastj = json_array_get(c.arr, limit - 1);
        next = json_string(json_string_value(json_object_get(lastj, "id")));
    }
    gbx_http_reply_json(req, 200, json_pack("{s:o,s:o}", "artifacts", c.arr, "next_after", next));
out:
    gbx_query_release(&q);
}

/* What the delete's audit record says of the row. */
struct gone {
    char sha[65];
    int64_t size;
};

static int gone_row(void *arg, const struct gbx_store_artifact *a)
{
    struct gone *g = arg;
    snprintf(g->sha, sizeof(g->sha), "%s", a->sha256);
    g->size = a->size_bytes;
    return 1;
}

static void handle_delete(struct gbx_server *s, const struct gbx_actor *who,
                          struct evhttp_request *req, const char *id)
{
    struct gone g = {.size = 0};
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_artifacts_delete_as(s, who, id, gone_row, &g, &err) < 0)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_recorded(
        s, who->name, "artifact.delete", NULL,
        json_pack("{s:s,s:s,s:I}", "id", id, "sha256", g.sha, "size", (json_int_t)g.size), req, 204,
        NULL);
}

static int row_json(void *arg, const struct gbx_store_artifact *a)
{
    *(json_t **)arg = artifact_json(a);
    return 1;
}

static void handle_get(struct gbx_server *s, const struct gbx_actor *who,
                       struct evhttp_request *req, const char *id)
{
    json_t *j = NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_artifacts_get(s, who, id, row_json, &j, &err) < 0)
        return gbx_http_reply_err(req, err);
    gbx_http_reply_json(req, 200, j);
}

/* ---- download ---------------------------------------------------------------------------- */

struct dl {
    struct evhttp_request *req;
    int fd;
    uint64_t off, left;
    int paused, pumping;
};

static void dl_free(struct dl *d)
{
    if (d->fd >= 0)
        close(d->fd);
    free(d);
}

static void dl_gone(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    struct dl *d = arg;
    d->req = NULL;
    if (!d->pumping)
        dl_free(d);
}

static void dl_pump(struct dl *d);

static void dl_drained(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    struct dl *d = arg;
    if (!d->paused)
        return;
    d->paused = 0;
    dl_pump(d);
}

/* Send blob chunks until the client's connection holds more than ART_OUT_CAP unsent bytes
 * (then dl_drained resumes) or the range is out. Blob reads are page-sized preads of a local
 * file on the loop; the bytes in memory are bounded by the cap. */
static void dl_pump(struct dl *d)
{
    d->pumping = 1;
    while (d->req && !d->paused && d->left > 0) {
        size_t want = d->left < ART_CHUNK ? (size_t)d->left : ART_CHUNK;
        struct evbuffer *b = evbuffer_new();
        GBX_BUG_ON(b == NULL);
        struct evbuffer_iovec iov;
        ssize_t n = -1;
        if (evbuffer_reserve_space(b, want, &iov, 1) >= 1) {
            do
                n = pread(d->fd, iov.iov_base, want, (off_t)d->off);
            while (n < 0 && errno == EINTR);
        }
        if (n <= 0) { /* the blob shrank or failed: Content-Length cannot hold; cut it short */
            evbuffer_free(b);
            gbx_log_warn("artifacts: blob read failed at %" PRIu64 ": %s", d->off,
                         n < 0 ? strerror(errno) : "short");
            struct evhttp_connection *conn = evhttp_request_get_connection(d->req);
            evhttp_connection_set_closecb(conn, NULL, NULL);
            d->req = NULL;
            evhttp_connection_free(conn);
            break;
        }
        iov.iov_len = (size_t)n;
        evbuffer_commit_space(b, &iov, 1);
        d->off += (uint64_t)n;
        d->left -= (uint64_t)n;
        gbx_http_send_chunk(d->req, b, ART_OUT_CAP, &d->paused, NULL, dl_drained, d);
        evbuffer_free(b);
    }
    d->pumping = 0;
    if (d->req && d->left == 0) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(d->req), NULL, NULL);
        evhttp_send_reply_end(d->req);
        d->req = NULL;
    }
    if (d->req == NULL)
        dl_free(d);
}

static void handle_content(struct gbx_server *s, const struct gbx_actor *who,
                           struct evhttp_request *req, const char *id)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD)
        return not_allowed(req, "GET, HEAD");
    struct gbx_artifact_blob blob;
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_artifacts_open(s, who, id, &blob, &err) < 0)
        return gbx_http_reply_err(req, err);
    int fd = blob.fd;
    uint64_t size = blob.size, off = 0, len = size;
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    char etag[70], buf[96];
    snprintf(etag, sizeof(etag), "\"%s\"", blob.sha256);
    evhttp_add_header(out, "ETag", etag);
    evhttp_add_header(out, "Cache-Control", "private, immutable");
    const char *inm = evhttp_find_header(in, "If-None-Match");
    if (inm && (strcmp(inm, etag) == 0 || strcmp(inm, "*") == 0)) {
        close(fd);
        evhttp_send_reply(req, 304, "Not Modified", NULL);
        return;
    }
    const char *range = evhttp_find_header(in, "Range");
    const char *ifr = evhttp_find_header(in, "If-Range");
    int r = ifr && strcmp(ifr, etag) != 0 ? 0 : gbx_http_parse_range(range, size, &off, &len);
    if (r < 0) {
        close(fd);
        snprintf(buf, sizeof(buf), "bytes */%" PRIu64, size);
        evhttp_add_header(out, "Content-Range", buf);
        return gbx_http_reply_error_status(
            req, 416, GBX_ERR_INVALID, "range '%.64s' is outside artifact '%s' (%" PRIu64 " bytes)",
            range, id, size);
    }
    evhttp_add_header(out, "Content-Type",
                      strcmp(blob.kind, "dir") == 0 ? "application/x-tar"
                                                    : "application/octet-stream");
    evhttp_add_header(out, "Accept-Ranges", "bytes");
    snprintf(buf, sizeof(buf), "%" PRIu64, len);
    evhttp_add_header(out, "Content-Length", buf);
    if (r == 1) {
        snprintf(buf, sizeof(buf), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1,
                 size);
        evhttp_add_header(out, "Content-Range", buf);
    }
    if (len == 0 || m == EVHTTP_REQ_HEAD) {
        close(fd);
        evhttp_send_reply(req, r == 1 ? 206 : 200, r == 1 ? "Partial Content" : "OK", NULL);
        return;
    }
    struct dl *d = gbx_xcalloc(1, sizeof(*d));
    d->req = req;
    d->fd = fd;
    d->off = off;
    d->left = len;
    evhttp_send_reply_start(req, r == 1 ? 206 : 200, r == 1 ? "Partial Content" : "OK");
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), dl_gone, d);
    dl_pump(d);
}

void gbx_api_artifacts(struct gbx_server *s, const struct gbx_actor *who,
                       struct evhttp_request *req, const char *path)
{
    sweep_once(s);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(path, "/v1/artifacts") == 0) {
        if (m != EVHTTP_REQ_GET)
            return not_allowed(req, "GET");
        return handle_list(s, who, req);
    }
    const char *rest = path + strlen("/v1/artifacts/");
    const char *slash = strchr(rest, '/');
    char id[32];
    size_t idlen = slash ? (size_t)(slash - rest) : strlen(rest);
    if (idlen == 0 || idlen >= sizeof(id))
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such artifact");
    memcpy(id, rest, idlen);
    id[idlen] = '\0';
    if (slash) {
        if (strcmp(slash, "/content") != 0)
            return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
        return handle_content(s, who, req, id);
    }
    if (m == EVHTTP_REQ_DELETE)
        return handle_delete(s, who, req, id);
    if (m != EVHTTP_REQ_GET)
        return not_allowed(req, "GET, DELETE");
    handle_get(s, who, req, id);
}
