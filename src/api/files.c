/* SPDX-License-Identifier: MIT */
/* The files API (see docs/api.yaml):
 *
 *   GET    /v1/sandboxes/{id}/files?path=        download (Range: bytes=a-b, a-, -n)
 *   PUT    /v1/sandboxes/{id}/files?path=        upload the raw body, atomically
 *   POST   /v1/sandboxes/{id}/files?path=DIR     upload multipart/form-data files into DIR
 *   DELETE /v1/sandboxes/{id}/files?path=        remove (recursive=1 for a tree)
 *   GET    /v1/sandboxes/{id}/files/stat?path=
 *   GET    /v1/sandboxes/{id}/files/list?path=&depth=
 *   POST   /v1/sandboxes/{id}/files/mkdir        {"path", "parents", "mode", "user"}
 *   POST   /v1/sandboxes/{id}/files/move         {"from", "to", "overwrite", "user"}
 *                                                (mkdir, move: in the body or the query)
 *   GET    /v1/sandboxes/{id}/files/watch?path=  NDJSON or SSE (Accept: text/event-stream)
 *
 * Every request opens its own connection to the sandbox's agent (aconn.h), so a slow
 * download or a long watch never holds up anything else. The agent resolves every path
 * inside the sandbox's root (openat2 RESOLVE_IN_ROOT): "..", and symlinks to "/", stay in.
 *
 * Memory: a download never holds more than FILES_OUT_CAP of the client's unsent bytes (we
 * stop reading the agent, which stops reading the file); an upload's body is already in
 * memory (libevent 2.1 buffers request bodies whole, bounded by the server's max body size)
 * and is handed to the agent in 64 KiB chunks with at most GBX_AWRITE_WINDOW chunks
 * unacknowledged (agent/awrite.h), freeing the body as it goes. */
#include "api/files.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "agent/aconn.h"
#include "agent/awrite.h"
#include "http/http.h"
#include "http/multipart.h"
#include "core/server.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "sandbox/backend.h"

#define FILES_PATH_MAX 4096
#define FILES_USER_MAX 256
/* unsent bytes in a client's connection above which a download or watch stops reading */
#define FILES_OUT_CAP (512u << 10)
#define FILES_LIST_MAX 100000
#define FILES_LIST_MAX_DEPTH 10
#define FILES_UPLOAD_MAX_PARTS 1000
#define FILES_QUERY_MAX 16

enum op_kind {
    OP_STAT,
    OP_LIST,
    OP_MKDIR,
    OP_MOVE,
    OP_REMOVE,
    OP_DOWNLOAD,
    OP_UPLOAD,
    OP_WATCH,
};

/* One file to write: PUT has one, fed from the request's body; multipart has one per part. */
struct item {
    char *path;
    const uint8_t *data; /* NULL: read from op->body */
    size_t len;
};

struct op {
    enum op_kind kind;
    struct gbx_server *srv;
    struct evhttp_request *req; /* NULL once answered, or once the client left */
    struct gbx_aconn *ac;
    char sandbox[GBX_ID_MAX + 1];
    char actor[128];
    char *user; /* NULL: root */
    char *path;
    char *path2;
    uint32_t mode;
    int has_mode;
    int flag; /* parents, recursive, follow or overwrite */
    uint32_t depth;
    int busy; /* inside one of our callbacks: freeing waits */
    int dead;
    int existed; /* PUT, mkdir: the target existed before (1), did not (0) */

    json_t *entries; /* list */
    size_t count;

    uint64_t off, len, sent; /* download */
    int paused;
    int started; /* the reply's status and headers are sent (download, watch) */

    struct item *items; /* upload */
    size_t nitems, cur;
    struct evbuffer *body; /* PUT: the request's body, borrowed from req */
    struct gbx_multipart mp;
    struct gbx_awrite write; /* the item being written */
    uint64_t bytes;
    json_t *written;

    int sse; /* watch */
    uint32_t handle;
    struct op *next, **pprev; /* every op of the daemon (ops, below) */

    /* its audit records: a success is answered once they are durable (api/audit.c) */
    int records;       /* not yet durable (each holds the op: busy) */
    int record_failed; /* one could not be written: record_msg says why */
    enum gbx_err_kind record_kind;
    char record_msg[512];
    struct gbx_http_later *held; /* the success waiting for them, and its reply */
    int held_status;
    json_t *held_body;
};

static struct op *ops;

/* ---- lifetime ------------------------------------------------------------------------------ */

static void op_destroy(struct op *op)
{
    if (op->pprev) {
        *op->pprev = op->next;
        if (op->next)
            op->next->pprev = op->pprev;
    }
    gbx_aconn_free(op->ac);
    json_decref(op->entries);
    json_decref(op->written);
    for (size_t i = 0; i < op->nitems; i++)
        free(op->items[i].path);
    free(op->items);
    gbx_multipart_release(&op->mp);
    free(op->user);
    free(op->path);
    free(op->path2);
    free(op);
}

static void op_enter(struct op *op)
{
    op->busy++;
}

static void op_leave(struct op *op)
{
    if (--op->busy == 0 && op->dead)
        op_destroy(op);
}

/* Stop the client callbacks (the reply is being finished). */
static void detach_client(struct op *op)
{
    if (op->req && evhttp_request_get_connection(op->req))
        evhttp_connection_set_closecb(evhttp_request_get_connection(op->req), NULL, NULL);
}

/* The op is over: drop the agent connection (which aborts unfinished writes and ends a
 * watch); memory goes when the last callback returns. */
static void op_finish(struct op *op)
{
    detach_client(op);
    op->req = NULL;
    gbx_aconn_free(op->ac);
    op->ac = NULL;
    op->dead = 1;
}

/* A success, or the error that its records could not be written. */
static void reply_now(struct op *op, struct evhttp_request *req, int status, json_t *body)
{
    if (op->record_failed && status < 300) {
        json_decref(body);
        gbx_http_reply_error(req, op->record_kind,
                             "it was done, but its audit record could not be written: %s",
                             op->record_msg);
        return;
    }
    gbx_http_reply_json(req, status, body);
}

static void reply_json(struct op *op, int status, json_t *body)
{
    if (op->req == NULL) {
        json_decref(body);
        return;
    }
    detach_client(op);
    if (op->records > 0) { /* held until the records are durable */
        op->held = gbx_http_later_new(op->req);
        op->held_status = status;
        op->held_body = body;
        op->req = NULL;
        return;
    }
    reply_now(op, op->req, status, body);
    op->req = NULL;
}

static void reply_error(struct op *op, int status, enum gbx_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void reply_error(struct op *op, int status, enum gbx_err_kind kind, const char *fmt, ...)
{
    if (op->req == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    gbx_autofree char *msg = gbx_vasprintf(fmt, ap);
    va_end(ap);
    detach_client(op);
    gbx_http_reply_error_status(op->req, status ? status : gbx_http_status_for(kind), kind, "%s",
                                msg);
    op->req = NULL;
}

/* Answer with the agent's error (h NULL: the connection was lost) and end the op. */
static void fail_agent(struct op *op, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    char msg[1024];
    int e = gbx_aconn_error_text(h ? p : NULL, h ? h->len : 0, msg, sizeof(msg));
    if (h == NULL)
        reply_error(op, 0, GBX_ERR_UNAVAILABLE, "the sandbox's agent went away");
    else
        reply_error(op, 0, gbx_err_kind_from_errno(e), "%s", msg);
    op_finish(op);
}

static void on_client_close(struct evhttp_connection *conn, void *arg)
{
    struct op *op = arg;
    op_enter(op);
    /* When the client went away with the request unanswered (or mid-reply), evhttp has
     * detached the request from the connection and leaves it to us: ending it frees it. */
    if (op->req && evhttp_request_get_connection(op->req) == NULL)
        evhttp_send_reply_end(op->req);
    op->req = NULL;
    /* a mutation already sent goes on, to be audited; anything else stops now */
    if (op->kind != OP_MKDIR && op->kind != OP_MOVE && op->kind != OP_REMOVE)
        op_finish(op);
    op_leave(op);
}

static void on_agent_close(void *arg, const char *why)
{
    struct op *op = arg;
    op_enter(op);
    if (op->kind == OP_WATCH && op->started && op->req && !op->dead) {
        /* end the stream with the reason; the client sees the stream end */
        struct evbuffer *b = evbuffer_new();
        GBX_BUG_ON(b == NULL);
        json_t *ev = json_pack("{s:s,s:s}", "type", "error", "message", why);
        char *text = json_dumps(ev, JSON_COMPACT);
        json_decref(ev);
        if (op->sse)
            evbuffer_add_printf(b, "event: error\ndata: %s\n\n", text);
        else
            evbuffer_add_printf(b, "%s\n", text);
        free(text);
        evhttp_send_reply_chunk(op->req, b);
        evbuffer_free(b);
        detach_client(op);
        evhttp_send_reply_end(op->req);
        op->req = NULL;
    } else {
        reply_error(op, 0, GBX_ERR_UNAVAILABLE, "%s", why);
    }
    op_finish(op);
    op_leave(op);
}

/* ---- JSON of a file ------------------------------------------------------------------------ */

static const char *type_name(uint32_t ftype)
{
    switch (ftype) {
    case GBX_FT_FILE:
        return "file";
    case GBX_FT_DIR:
        return "dir";
    case GBX_FT_SYMLINK:
        return "symlink";
    default:
        return "other";
    }
}

static char *attr_dup(const uint8_t *p, size_t len, uint16_t tag)
{
    char buf[FILES_PATH_MAX + 1];
    if (gbx_attrs_get_str(p, len, tag, buf, sizeof(buf)) != 1)
        return NULL;
    return gbx_xstrdup(buf);
}

/* A stat object from STAT attributes; path is the absolute path to report. */
static json_t *stat_json(const uint8_t *p, size_t len, const char *name, const char *path)
{
    uint32_t ftype = GBX_FT_OTHER, mode = 0, uid = 0, gid = 0;
    uint64_t size = 0, mtime = 0;
    (void)!gbx_attrs_get_u32(p, len, GBX_A_FTYPE, &ftype);
    (void)!gbx_attrs_get_u32(p, len, GBX_A_MODE, &mode);
    (void)!gbx_attrs_get_u32(p, len, GBX_A_UID, &uid);
    (void)!gbx_attrs_get_u32(p, len, GBX_A_GID, &gid);
    (void)!gbx_attrs_get_u64(p, len, GBX_A_SIZE, &size);
    (void)!gbx_attrs_get_u64(p, len, GBX_A_MTIME_NS, &mtime);
    char octal[16];
    snprintf(octal, sizeof(octal), "%04o", mode & 07777);
    gbx_autofree char *when = gbx_rfc3339((int64_t)mtime);
    /* names come from the sandbox: any bytes (gbx_json_text) */
    json_t *j =
        json_pack("{s:o,s:o,s:s,s:I,s:s,s:s,s:I,s:I}", "name", gbx_json_text(name), "path",
                  gbx_json_text(path), "type", type_name(ftype), "size", (json_int_t)size, "mode",
                  octal, "mtime", when, "uid", (json_int_t)uid, "gid", (json_int_t)gid);
    GBX_BUG_ON(j == NULL);
    gbx_autofree char *link = attr_dup(p, len, GBX_A_LINK);
    gbx_autofree char *owner = attr_dup(p, len, GBX_A_OWNER);
    gbx_autofree char *group = attr_dup(p, len, GBX_A_GROUPNAME);
    if (link)
        json_object_set_new(j, "link", gbx_json_text(link));
    if (owner)
        json_object_set_new(j, "owner", gbx_json_text(owner));
    if (group)
        json_object_set_new(j, "group", gbx_json_text(group));
    return j;
}

/* The name STAT gives ("/" for the root), or the last component of path. */
static json_t *stat_reply_json(const uint8_t *p, size_t len, const char *path)
{
    gbx_autofree char *name = attr_dup(p, len, GBX_A_NAME);
    const char *slash = strrchr(path, '/');
    return stat_json(p, len, name ? name : slash ? slash + 1 : path, path);
}

/* ---- request parsing ---------------------------------------------------------------------- */

struct query {
    char *key[FILES_QUERY_MAX];
    char *val[FILES_QUERY_MAX];
    int n;
};

static void query_release(struct query *q)
{
    for (int i = 0; i < q->n; i++) {
        free(q->key[i]);
        free(q->val[i]);
    }
    q->n = 0;
}

/* Split and decode the query string; keys must be among allowed (a NULL-terminated list).
 * Replies 400 and returns -1 on a malformed, duplicated or unknown parameter. */
static int query_parse(struct evhttp_request *req, const char *const *allowed, struct query *q)
{
    memset(q, 0, sizeof(*q));
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *qs = uri ? evhttp_uri_get_query(uri) : NULL;
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
        int known = 0;
        for (const char *const *a = allowed; *a; a++)
            known |= strcmp(*a, k) == 0;
        const char *bad = NULL;
        if (strlen(k) != klen || strlen(v) != vlen)
            bad = "holds a NUL byte";
        else if (!known)
            bad = "is unknown";
        for (int i = 0; i < q->n && !bad; i++)
            if (strcmp(q->key[i], k) == 0)
                bad = "is given twice";
        if (!bad && q->n == FILES_QUERY_MAX)
            bad = "is one too many";
        if (bad) {
            gbx_autofree char *list = gbx_xstrdup("");
            for (const char *const *a = allowed; *a; a++) {
                char *l = gbx_asprintf("%s%s%s", list, *list ? ", " : "", *a);
                free(list);
                list = l;
            }
            gbx_http_reply_error(req, GBX_ERR_INVALID, "query parameter '%.64s' %s (expected %s)",
                                 k, bad, *list ? list : "none");
            free(k);
            free(v);
            query_release(q);
            return -1;
        }
        q->key[q->n] = k;
        q->val[q->n] = v;
        q->n++;
    }
    return 0;
}

static const char *query_get(const struct query *q, const char *key)
{
    for (int i = 0; i < q->n; i++)
        if (strcmp(q->key[i], key) == 0)
            return q->val[i];
    return NULL;
}

static int check_path(struct evhttp_request *req, const char *what, const char *path)
{
    if (path == NULL || *path == '\0') {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'%s' is required (an absolute path)", what);
        return -1;
    }
    if (path[0] != '/') {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'%s' must be an absolute path, not '%.256s'",
                             what, path);
        return -1;
    }
    if (strlen(path) > FILES_PATH_MAX) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'%s' is longer than %d bytes", what,
                             FILES_PATH_MAX);
        return -1;
    }
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (strcmp(s, "1") == 0 || strcmp(s, "true") == 0) {
        *out = 1;
        return 0;
    }
    if (strcmp(s, "0") == 0 || strcmp(s, "false") == 0) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int query_bool(struct evhttp_request *req, const struct query *q, const char *key, int *out)
{
    const char *v = query_get(q, key);
    if (v && parse_bool(v, out) < 0) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'%s' must be 1, 0, true or false", key);
        return -1;
    }
    return 0;
}

/* A permission mode as an octal string ("0644", "755"). */
static int parse_mode(const char *s, uint32_t *out)
{
    if (s == NULL || *s == '\0' || strlen(s) > 5)
        return -1;
    uint32_t v = 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '7')
            return -1;
        v = v * 8 + (uint32_t)(*c - '0');
    }
    if (v > 07777)
        return -1;
    *out = v;
    return 0;
}

static int check_user(struct evhttp_request *req, const char *user)
{
    if (user && (*user == '\0' || strlen(user) > FILES_USER_MAX)) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "'user' must be a user name, uid or uid:gid (1 to %d bytes)",
                             FILES_USER_MAX);
        return -1;
    }
    return 0;
}

/* ---- agent requests -------------------------------------------------------------------------- */

static struct gbx_msg *begin(struct op *op, uint16_t type, const char *path)
{
    struct gbx_msg *m = gbx_aconn_begin(op->ac, type);
    if (op->user)
        gbx_msg_put_str(m, GBX_A_USER, op->user);
    if (path)
        gbx_msg_put_str(m, GBX_A_PATH, path);
    return m;
}

/* A request could not be sent (gbx_aconn_send's -EMSGSIZE or -ENOTCONN): answer and end
 * the op. */
static void send_failed(struct op *op, long id)
{
    reply_error(op, 0, id == -EMSGSIZE ? GBX_ERR_INVALID : GBX_ERR_UNAVAILABLE, "%s",
                id == -EMSGSIZE ? "the request is too large for the sandbox's agent"
                                : "the sandbox's agent went away");
    op_finish(op);
}

/* Send the request being built; on failure answer 503 and end the op. 0 or -1. */
static int send_req(struct op *op, gbx_aconn_reply_fn fn)
{
    long id = gbx_aconn_send(op->ac, fn, op);
    if (id > 0)
        return 0;
    send_failed(op, id);
    return -1;
}

static void recorded(void *arg, const struct gbx_err *err)
{
    struct op *op = arg;
    if (err && !op->record_failed) {
        op->record_failed = 1;
        op->record_kind = err->kind;
        snprintf(op->record_msg, sizeof(op->record_msg), "%s", err->msg);
    }
    if (--op->records == 0 && op->held) {
        struct evhttp_request *req = gbx_http_later_take(op->held);
        op->held = NULL;
        if (req)
            reply_now(op, req, op->held_status, gbx_steal_ptr(&op->held_body));
        json_decref(op->held_body);
        op->held_body = NULL;
    }
    op_leave(op);
}

static void audit(struct op *op, const char *kind, json_t *detail)
{
    if (op->user)
        json_object_set_new(detail, "user", json_string(op->user));
    op_enter(op); /* until the record's completion */
    op->records++;
    gbx_server_audit_then(op->srv, op->actor, kind, op->sandbox, detail, recorded, op);
}

/* ---- stat, list ------------------------------------------------------------------------------ */

static void on_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct op *op = arg;
    op_enter(op);
    if (h == NULL || h->type == GBX_MSG_ERROR)
        fail_agent(op, h, p);
    else if (final && h->type == GBX_MSG_OK) {
        reply_json(op, 200, stat_reply_json(p, h->len, op->path));
        op_finish(op);
    }
    op_leave(op);
}

static int cmp_name(const void *a, const void *b)
{
    json_t *const *x = a, *const *y = b;
    return strcmp(json_string_value(json_object_get(*x, "name")),
                  json_string_value(json_object_get(*y, "name")));
}

static void on_list(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct op *op = arg;
    op_enter(op);
    if (h == NULL || h->type == GBX_MSG_ERROR) {
        fail_agent(op, h, p);
    } else if (!final && h->type == GBX_EV_DIRENT) {
        struct gbx_attr_iter it;
        struct gbx_attr a;
        gbx_attr_iter_init(&it, p, h->len);
        while (gbx_attr_next(&it, &a) > 0 && !op->dead) {
            if (a.tag != GBX_A_ENTRY || gbx_attrs_validate(a.data, a.len) < 0)
                continue;
            gbx_autofree char *name = attr_dup(a.data, a.len, GBX_A_NAME);
            if (name == NULL)
                continue;
            if (op->count == FILES_LIST_MAX) {
                reply_error(op, 0, GBX_ERR_LIMIT,
                            "'%s' holds more than %d entries at this depth; list a "
                            "subdirectory or a lower depth",
                            op->path, FILES_LIST_MAX);
                op_finish(op);
                break;
            }
            size_t plen = strlen(op->path);
            while (plen > 1 && op->path[plen - 1] == '/')
                plen--;
            gbx_autofree char *abs =
                gbx_asprintf("%.*s%s%s", (int)plen, op->path, plen == 1 ? "" : "/", name);
            json_array_append_new(op->entries, stat_json(a.data, a.len, name, abs));
            op->count++;
        }
    } else if (final && h->type == GBX_MSG_OK) {
        /* sorted by name: stable output whatever the directory order */
        size_t n = json_array_size(op->entries);
        json_t **v = gbx_xcalloc(n ? n : 1, sizeof(json_t *));
        for (size_t i = 0; i < n; i++)
            v[i] = json_incref(json_array_get(op->entries, i));
        qsort(v, n, sizeof(json_t *), cmp_name);
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, v[i]);
        free(v);
        reply_json(op, 200, json_pack("{s:o}", "entries", arr));
        op_finish(op);
    }
    op_leave(op);
}

/* ---- mkdir, move, remove ----------------------------------------------------------------------
 */

/* STAT before a change: did the target exist? (Errors are the change's to report.) */
static void on_pre_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct op *op = arg;
    if (h && final)
        op->existed = h->type == GBX_MSG_OK;
}

static void on_post_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final);

static void on_change(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct op *op = arg;
    op_enter(op);
    if (h == NULL || h->type == GBX_MSG_ERROR) {
        fail_agent(op, h, p);
    } else if (final) {
        if (op->kind == OP_MKDIR) {
            audit(op, "file.mkdir",
                  json_pack("{s:s,s:b,s:b}", "path", op->path, "parents", op->flag, "created",
                            !op->existed));
        } else if (op->kind == OP_MOVE) {
            audit(op, "file.move",
                  json_pack("{s:s,s:s,s:b}", "from", op->path, "to", op->path2, "overwrite",
                            op->flag));
        } else {
            audit(op, "file.remove",
                  json_pack("{s:s,s:b}", "path", op->path, "recursive", op->flag));
            reply_json(op, 204, NULL);
            op_finish(op);
        }
        /* mkdir and move answer with the STAT sent after them */
    }
    op_leave(op);
}

static void on_post_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct op *op = arg;
    op_enter(op);
    if (h == NULL) {
        fail_agent(op, h, p);
    } else if (final) {
        const char *path = op->kind == OP_MOVE ? op->path2 : op->path;
        int status = op->kind == OP_MKDIR && !op->existed ? 201 : 200;
        if (op->kind == OP_UPLOAD)
            status = op->existed ? 200 : 201;
        if (h->type == GBX_MSG_OK) {
            reply_json(op, status, stat_reply_json(p, h->len, path));
            op_finish(op);
        } else {
            fail_agent(op, h, p); /* changed again in between */
        }
    }
    op_leave(op);
}

/* ---- download ---------------------------------------------------------------------------------
 */

static void on_read(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final);

/* The client's connection wrote out everything we gave it: read the agent again. */
static void drained(struct evhttp_connection *conn, void *arg)
{
    struct op *op = arg;
    if (!op->paused || op->dead)
        return;
    op_enter(op);
    op->paused = 0;
    gbx_aconn_pause(op->ac, 0);
    op_leave(op);
}

/* Send b to the client, pausing the agent when the client's unsent bytes pass the cap.
 * evhttp keeps one "written" callback per connection, replaced by each chunk sent (and by
 * the end of the reply): it is set only on the chunk that crosses the cap, and nothing else
 * is sent until it fires (the agent is paused meanwhile). */
static void send_chunk(struct op *op, struct evbuffer *b)
{
    gbx_http_send_chunk(op->req, b, FILES_OUT_CAP, &op->paused, op->ac, drained, op);
}

static void on_read(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct op *op = arg;
    op_enter(op);
    if (h == NULL || h->type == GBX_MSG_ERROR) {
        if (!op->started) {
            fail_agent(op, h, p);
        } else {
            char msg[512];
            (void)gbx_aconn_error_text(h ? p : NULL, h ? h->len : 0, msg, sizeof(msg));
            gbx_log_warn("sandbox '%s': download of '%s' cut short: %s", op->sandbox, op->path,
                         msg);
            goto truncated;
        }
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
            send_chunk(op, b);
            evbuffer_free(b);
        }
    } else if (final && h->type == GBX_MSG_OK) {
        if (op->sent < op->len) {
            gbx_log_warn("sandbox '%s': '%s' shrank during its download", op->sandbox, op->path);
            goto truncated;
        }
        if (op->req) {
            detach_client(op);
            evhttp_send_reply_end(op->req);
            op->req = NULL;
        }
        op_finish(op);
    }
    op_leave(op);
    return;
truncated:
    /* Content-Length cannot be honoured: close the connection so the client sees a short
     * body rather than waiting for bytes that will never come */
    if (op->req) {
        struct evhttp_connection *conn = evhttp_request_get_connection(op->req);
        detach_client(op);
        op->req = NULL;
        if (conn)
            evhttp_connection_free(conn);
    }
    op_finish(op);
    op_leave(op);
}

/* The STAT before a download: size and type, then the READ and the reply's headers. */
static void on_download_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct op *op = arg;
    op_enter(op);
    if (h == NULL || h->type == GBX_MSG_ERROR) {
        fail_agent(op, h, p);
        op_leave(op);
        return;
    }
    if (!final) {
        op_leave(op);
        return;
    }
    uint32_t ftype = GBX_FT_OTHER;
    uint64_t size = 0;
    (void)!gbx_attrs_get_u32(p, h->len, GBX_A_FTYPE, &ftype);
    (void)!gbx_attrs_get_u64(p, h->len, GBX_A_SIZE, &size);
    if (ftype == GBX_FT_DIR) {
        reply_error(op, 0, GBX_ERR_INVALID,
                    "'%s' is a directory (list it with GET .../files/list?path=...)", op->path);
        op_finish(op);
        op_leave(op);
        return;
    }
    if (ftype != GBX_FT_FILE) {
        reply_error(op, 0, GBX_ERR_INVALID, "'%s' is not a regular file", op->path);
        op_finish(op);
        op_leave(op);
        return;
    }
    if (op->req == NULL) {
        op_finish(op);
        op_leave(op);
        return;
    }
    struct evkeyvalq *out = evhttp_request_get_output_headers(op->req);
    const char *range = evhttp_find_header(evhttp_request_get_input_headers(op->req), "Range");
    uint64_t off = 0, len = size;
    int r = gbx_http_parse_range(range, size, &off, &len);
    char buf[96];
    if (r < 0) {
        snprintf(buf, sizeof(buf), "bytes */%" PRIu64, size);
        evhttp_add_header(out, "Content-Range", buf);
        reply_error(op, 416, GBX_ERR_INVALID, "range '%.64s' is outside '%s' (%" PRIu64 " bytes)",
                    range, op->path, size);
        op_finish(op);
        op_leave(op);
        return;
    }
    op->off = off;
    op->len = len;
    evhttp_add_header(out, "Content-Type", "application/octet-stream");
    evhttp_add_header(out, "Accept-Ranges", "bytes");
    snprintf(buf, sizeof(buf), "%" PRIu64, len);
    evhttp_add_header(out, "Content-Length", buf);
    if (r == 1) {
        snprintf(buf, sizeof(buf), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1,
                 size);
        evhttp_add_header(out, "Content-Range", buf);
    }
    if (len == 0) {
        detach_client(op);
        evhttp_send_reply(op->req, 200, "OK", NULL);
        op->req = NULL;
        op_finish(op);
        op_leave(op);
        return;
    }
    struct gbx_msg *m = begin(op, GBX_MSG_READ, op->path);
    if (off)
        gbx_msg_put_u64(m, GBX_A_OFFSET, off);
    gbx_msg_put_u64(m, GBX_A_LENGTH, len);
    if (send_req(op, on_read) == 0) {
        evhttp_send_reply_start(op->req, r == 1 ? 206 : 200, r == 1 ? "Partial Content" : "OK");
        op->started = 1;
    }
    op_leave(op);
}

/* ---- upload -----------------------------------------------------------------------------------
 */

static void on_part_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final);

/* The current item's write is over (agent/awrite.h): audit it and STAT what was written. */
static void on_written(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, long err)
{
    struct op *op = arg;
    op_enter(op);
    if (err == -EBADMSG) {
        reply_error(op, 0, GBX_ERR_INTERNAL, "the sandbox's agent sent a malformed reply");
        op_finish(op);
    } else if (err < 0) {
        send_failed(op, err);
    } else if (h == NULL || h->type == GBX_MSG_ERROR) {
        fail_agent(op, h, p);
    } else {
        const struct item *it = &op->items[op->cur++];
        uint64_t size = it->len;
        (void)!gbx_attrs_get_u64(p, h->len, GBX_A_SIZE, &size);
        op->bytes += size;
        audit(op, "file.write",
              json_pack("{s:s,s:I}", "path", it->path, "bytes", (json_int_t)size));
        /* the reply is a STAT of what was written (one per file for multipart) */
        struct gbx_msg *m = begin(op, GBX_MSG_STAT, it->path);
        gbx_msg_put_u32(m, GBX_A_FOLLOW, 0);
        (void)send_req(op, op->written ? on_part_stat : on_post_stat);
    }
    op_leave(op);
}

/* Write the current item: atomically (a temporary file renamed over the target on commit). */
static void upload_next(struct op *op)
{
    const struct item *it = &op->items[op->cur];
    uint32_t fl = GBX_W_CREATE | GBX_W_TRUNC | GBX_W_ATOMIC | (op->flag ? GBX_W_PARENTS : 0);
    uint32_t mode = op->has_mode ? op->mode : 0644;
    gbx_awrite_init(&op->write, op->ac, it->data, op->body, it->len, on_written, op);
    gbx_awrite_open(&op->write, begin(op, GBX_MSG_WRITE, it->path), mode, fl);
}

/* multipart: each STAT after a write is one entry of the reply; the last one answers. */
static void on_part_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct op *op = arg;
    op_enter(op);
    if (h == NULL) {
        fail_agent(op, h, p);
    } else if (final) {
        const char *path = op->items[op->cur - 1].path;
        if (h->type == GBX_MSG_OK)
            json_array_append_new(op->written, stat_reply_json(p, h->len, path));
        if (op->cur < op->nitems) {
            upload_next(op);
        } else {
            reply_json(op, 201, json_pack("{s:O}", "files", op->written));
            op_finish(op);
        }
    }
    op_leave(op);
}

/* ---- watch ------------------------------------------------------------------------------------
 */

static void watch_send(struct op *op, const char *type, json_t *ev)
{
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (text == NULL) /* an event that could not be built (text that is not UTF-8) */
        return;
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    if (op->sse)
        evbuffer_add_printf(b, "event: %s\ndata: %s\n\n", type, text);
    else
        evbuffer_add_printf(b, "%s\n", text);
    free(text);
    send_chunk(op, b);
    evbuffer_free(b);
}

static void on_watch_event(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } kinds[] = {
        {GBX_WE_CREATE, "create"}, {GBX_WE_WRITE, "write"}, {GBX_WE_REMOVE, "remove"},
        {GBX_WE_RENAME, "rename"}, {GBX_WE_CHMOD, "chmod"}, {GBX_WE_OVERFLOW, "overflow"},
    };
    struct op *op = arg;
    if (h->type != GBX_EV_WATCH || h->id != op->handle || op->req == NULL || op->dead)
        return;
    op_enter(op);
    uint32_t bits = 0;
    (void)!gbx_attrs_get_u32(p, h->len, GBX_A_WEVENT, &bits);
    gbx_autofree char *name = attr_dup(p, h->len, GBX_A_NAME);
    for (size_t i = 0; i < GBX_ARRAY_SIZE(kinds) && op->req; i++) {
        if (!(bits & kinds[i].bit))
            continue;
        json_t *ev =
            json_pack("{s:s,s:o}", "type", kinds[i].name, "name", gbx_json_text(name ? name : ""));
        watch_send(op, kinds[i].name, ev);
    }
    op_leave(op);
}

static void on_watch(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct op *op = arg;
    op_enter(op);
    if (h == NULL || h->type == GBX_MSG_ERROR) {
        fail_agent(op, h, p);
    } else if (final && op->req) {
        if (gbx_attrs_get_u32(p, h->len, GBX_A_HANDLE, &op->handle) != 1) {
            reply_error(op, 0, GBX_ERR_INTERNAL, "the sandbox's agent sent a malformed reply");
            op_finish(op);
        } else {
            struct evkeyvalq *out = evhttp_request_get_output_headers(op->req);
            evhttp_add_header(out, "Content-Type",
                              op->sse ? "text/event-stream" : "application/x-ndjson");
            evhttp_add_header(out, "Cache-Control", "no-cache");
            evhttp_send_reply_start(op->req, 200, "OK");
            op->started = 1;
            watch_send(op, "start", json_pack("{s:s,s:s}", "type", "start", "path", op->path));
        }
    }
    op_leave(op);
}

/* ---- the request ------------------------------------------------------------------------------
 */

static const char *const q_path_user[] = {"path", "user", NULL};

static struct op *op_new(struct gbx_server *srv, const struct gbx_actor *who,
                         struct evhttp_request *req, struct gbx_sandbox *sb, enum op_kind kind)
{
    struct op *op = gbx_xcalloc(1, sizeof(*op));
    op->kind = kind;
    op->srv = srv;
    op->req = req;
    op->busy = 1; /* until the handler returns */
    snprintf(op->sandbox, sizeof(op->sandbox), "%s", sb->id);
    snprintf(op->actor, sizeof(op->actor), "%s", who->name);
    op->next = ops;
    if (ops)
        ops->pprev = &op->next;
    op->pprev = &ops;
    ops = op;
    return op;
}

size_t gbx_api_files_drain(const char *why)
{
    size_t n = 0;
    for (struct op *op = ops, *next; op; op = next) {
        next = op->next;
        if (op->kind != OP_WATCH || op->req == NULL || op->dead || !op->started)
            continue;
        op_enter(op);
        watch_send(op, "error", json_pack("{s:s,s:s}", "type", "error", "message", why));
        if (op->req) {
            detach_client(op);
            evhttp_send_reply_end(op->req);
        }
        op_finish(op);
        op_leave(op);
        n++;
    }
    return n;
}

/* Connect to the agent; replies and returns -1 on failure. */
static int op_connect(struct op *op, struct event_base *base, struct gbx_sandbox *sb)
{
    struct gbx_err *err = NULL;
    if (gbx_aconn_open(base, sb, op->kind == OP_WATCH ? on_watch_event : NULL, on_agent_close, op,
                       &op->ac, &err) < 0) {
        reply_error(op, 0, err->kind, "%s", err->msg);
        gbx_err_free(err);
        op_finish(op);
        return -1;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(op->req), on_client_close, op);
    return 0;
}

/* Parse the query of the path-taking routes into op (path, user, and the route's flag). */
static int parse_path_query(struct op *op, const char *const *allowed, const char *flag_name)
{
    struct query q;
    if (query_parse(op->req, allowed, &q) < 0)
        return -1;
    int r = -1;
    const char *path = query_get(&q, "path"), *user = query_get(&q, "user");
    if (check_path(op->req, "path", path) < 0 || check_user(op->req, user) < 0)
        goto out;
    if (flag_name && query_bool(op->req, &q, flag_name, &op->flag) < 0)
        goto out;
    const char *mode = query_get(&q, "mode");
    if (mode) {
        if (parse_mode(mode, &op->mode) < 0) {
            gbx_http_reply_error(op->req, GBX_ERR_INVALID,
                                 "'mode' must be permission bits in octal, like 0644");
            goto out;
        }
        op->has_mode = 1;
    }
    const char *depth = query_get(&q, "depth");
    op->depth = 1;
    if (depth) {
        char *end;
        unsigned long d = strtoul(depth, &end, 10);
        if (*depth < '0' || *depth > '9' || *end || d < 1 || d > FILES_LIST_MAX_DEPTH) {
            gbx_http_reply_error(op->req, GBX_ERR_INVALID,
                                 "'depth' must be an integer from 1 to %d", FILES_LIST_MAX_DEPTH);
            goto out;
        }
        op->depth = (uint32_t)d;
    }
    op->path = gbx_xstrdup(path);
    op->user = user ? gbx_xstrdup(user) : NULL;
    r = 0;
out:
    query_release(&q);
    return r;
}

/* Fields of a JSON body for mkdir and move; replies 400 on anything unexpected. */
static int parse_body(struct op *op)
{
    static const char *const mkdir_keys[] = {"path", "parents", "mode", "user", NULL};
    static const char *const move_keys[] = {"from", "to", "overwrite", "user", NULL};
    struct query q;
    if (query_parse(op->req, op->kind == OP_MKDIR ? mkdir_keys : move_keys, &q) < 0)
        return -1;
    json_t *body = gbx_http_body_object(op->req);
    if (body == NULL) {
        query_release(&q);
        return -1;
    }
    const char *key;
    json_t *v;
    int r = -1;
    const char *expect =
        op->kind == OP_MKDIR ? "path, parents, mode, user" : "from, to, overwrite, user";
    /* the query's fields (as on every other files route) join the body's, checked alike */
    for (int i = 0; i < q.n; i++) {
        int flag = strcmp(q.key[i], "parents") == 0 || strcmp(q.key[i], "overwrite") == 0, b;
        if (json_object_get(body, q.key[i])) {
            gbx_http_reply_error(op->req, GBX_ERR_INVALID,
                                 "'%s' is given twice (in the query and in the body)", q.key[i]);
            goto out;
        }
        if (flag && parse_bool(q.val[i], &b) < 0) {
            gbx_http_reply_error(op->req, GBX_ERR_INVALID, "'%s' must be 1, 0, true or false",
                                 q.key[i]);
            goto out;
        }
        json_object_set_new(body, q.key[i], flag ? json_boolean(b) : json_string(q.val[i]));
    }
    json_object_foreach(body, key, v)
    {
        int is_str = json_is_string(v);
        const char *s = json_string_value(v);
        if (op->kind == OP_MKDIR && strcmp(key, "path") == 0 && is_str) {
            if (check_path(op->req, "path", s) < 0)
                goto out;
            op->path = gbx_xstrdup(s);
        } else if (op->kind == OP_MOVE && (strcmp(key, "from") == 0 || strcmp(key, "to") == 0) &&
                   is_str) {
            if (check_path(op->req, key, s) < 0)
                goto out;
            *(key[0] == 'f' ? &op->path : &op->path2) = gbx_xstrdup(s);
        } else if (strcmp(key, "user") == 0 && is_str) {
            if (check_user(op->req, s) < 0)
                goto out;
            op->user = gbx_xstrdup(s);
        } else if (op->kind == OP_MKDIR && strcmp(key, "mode") == 0 && is_str) {
            if (parse_mode(s, &op->mode) < 0) {
                gbx_http_reply_error(op->req, GBX_ERR_INVALID,
                                     "'mode' must be permission bits in octal, like \"0755\"");
                goto out;
            }
            op->has_mode = 1;
        } else if ((op->kind == OP_MKDIR && strcmp(key, "parents") == 0) ||
                   (op->kind == OP_MOVE && strcmp(key, "overwrite") == 0)) {
            if (!json_is_boolean(v)) {
                gbx_http_reply_error(op->req, GBX_ERR_INVALID, "'%s' must be true or false", key);
                goto out;
            }
            op->flag = json_is_true(v);
        } else if (strcmp(key, "path") == 0 || strcmp(key, "from") == 0 || strcmp(key, "to") == 0 ||
                   strcmp(key, "user") == 0 || strcmp(key, "mode") == 0) {
            gbx_http_reply_error(op->req, GBX_ERR_INVALID, "'%s' must be a string", key);
            goto out;
        } else {
            gbx_http_reply_error(op->req, GBX_ERR_INVALID, "unknown field '%s' (expected %s)", key,
                                 expect);
            goto out;
        }
    }
    if (op->kind == OP_MKDIR && op->path == NULL) {
        (void)check_path(op->req, "path", NULL);
        goto out;
    }
    if (op->kind == OP_MOVE && (op->path == NULL || op->path2 == NULL)) {
        (void)check_path(op->req, op->path ? "to" : "from", NULL);
        goto out;
    }
    r = 0;
out:
    json_decref(body);
    query_release(&q);
    return r;
}

/* A plain file name for a multipart part: no '/', not "." or "..", no control bytes. */
static int plain_name(const char *s)
{
    if (s == NULL || *s == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 || strlen(s) > 255)
        return 0;
    for (const char *c = s; *c; c++)
        if (*c == '/' || (unsigned char)*c < 0x20 || *c == 0x7f)
            return 0;
    return 1;
}

/* POST multipart/form-data: the items to write into op->path. Replies 400 when malformed. */
static int parse_multipart(struct op *op)
{
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(op->req), "Content-Type");
    char boundary[GBX_MULTIPART_BOUNDARY_MAX + 1];
    if (gbx_multipart_boundary(ct, boundary, sizeof(boundary)) < 0) {
        gbx_http_reply_error(op->req, GBX_ERR_INVALID,
                             "POST .../files needs a multipart/form-data body with a boundary "
                             "(PUT uploads one file's raw bytes)");
        return -1;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(op->req);
    size_t len = evbuffer_get_length(in);
    const uint8_t *body = len ? evbuffer_pullup(in, -1) : (const uint8_t *)"";
    const char *why = NULL;
    int r = gbx_multipart_parse(boundary, body, len, FILES_UPLOAD_MAX_PARTS, &op->mp, &why);
    if (r < 0) {
        gbx_http_reply_error(op->req, GBX_ERR_INVALID, "malformed multipart body: %s", why);
        return -1;
    }
    if (op->mp.n == 0) {
        gbx_http_reply_error(op->req, GBX_ERR_INVALID, "the multipart body holds no file");
        return -1;
    }
    op->items = gbx_xcalloc(op->mp.n, sizeof(*op->items));
    size_t plen = strlen(op->path);
    while (plen > 1 && op->path[plen - 1] == '/')
        plen--;
    for (size_t i = 0; i < op->mp.n; i++) {
        const struct gbx_multipart_part *part = &op->mp.parts[i];
        if (part->filename == NULL) {
            gbx_http_reply_error(op->req, GBX_ERR_INVALID,
                                 "part '%.128s' is not a file (no filename); only files can be "
                                 "uploaded",
                                 part->name ? part->name : "");
            return -1;
        }
        if (!plain_name(part->filename)) {
            gbx_http_reply_error(op->req, GBX_ERR_INVALID,
                                 "file name '%.128s' is not a plain name (no '/', not '.' or "
                                 "'..', at most 255 bytes)",
                                 part->filename);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(op->mp.parts[j].filename, part->filename) == 0) {
                gbx_http_reply_error(op->req, GBX_ERR_INVALID, "file '%.128s' is given twice",
                                     part->filename);
                return -1;
            }
        }
        struct item *it = &op->items[op->nitems++];
        it->path =
            gbx_asprintf("%.*s%s%s", (int)plen, op->path, plen == 1 ? "" : "/", part->filename);
        it->data = part->data;
        it->len = part->len;
        if (strlen(it->path) > FILES_PATH_MAX) {
            gbx_http_reply_error(op->req, GBX_ERR_INVALID, "path '%.128s...' is too long",
                                 it->path);
            return -1;
        }
    }
    return 0;
}

static void method_not_allowed(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed (allowed: %s)",
                                allow);
}

static int wants_sse(struct evhttp_request *req)
{
    const char *a = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
    return a && strstr(a, "text/event-stream") != NULL;
}

void gbx_api_files(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                   struct evhttp_request *req, struct gbx_sandbox *sb, const char *sub)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    enum op_kind kind;
    const char *allow;
    if (strcmp(sub, "") == 0 || strcmp(sub, "/") == 0) {
        allow = "GET, PUT, POST, DELETE";
        kind = m == EVHTTP_REQ_GET      ? OP_DOWNLOAD
               : m == EVHTTP_REQ_PUT    ? OP_UPLOAD
               : m == EVHTTP_REQ_POST   ? OP_UPLOAD
               : m == EVHTTP_REQ_DELETE ? OP_REMOVE
                                        : (enum op_kind) - 1;
    } else if (strcmp(sub, "/stat") == 0 || strcmp(sub, "/list") == 0 ||
               strcmp(sub, "/watch") == 0) {
        allow = "GET";
        kind = m != EVHTTP_REQ_GET ? (enum op_kind) - 1
               : sub[1] == 's'     ? OP_STAT
               : sub[1] == 'l'     ? OP_LIST
                                   : OP_WATCH;
    } else if (strcmp(sub, "/mkdir") == 0 || strcmp(sub, "/move") == 0) {
        allow = "POST";
        kind = m != EVHTTP_REQ_POST ? (enum op_kind) - 1 : sub[2] == 'k' ? OP_MKDIR : OP_MOVE;
    } else {
        gbx_http_reply_error(req, GBX_ERR_NOT_FOUND,
                             "no files route '%s' (files, files/stat, files/list, files/mkdir, "
                             "files/move, files/watch)",
                             sub);
        return;
    }
    if ((int)kind < 0)
        return method_not_allowed(req, allow);

    struct op *op = op_new(srv, who, req, sb, kind);
    int multipart = kind == OP_UPLOAD && m == EVHTTP_REQ_POST;
    int r;
    switch (kind) {
    case OP_STAT: {
        op->flag = 1;
        r = parse_path_query(op, (const char *const[]){"path", "user", "follow", NULL}, "follow");
        break;
    }
    case OP_LIST:
        r = parse_path_query(op, (const char *const[]){"path", "user", "depth", NULL}, NULL);
        break;
    case OP_WATCH:
        r = parse_path_query(op, (const char *const[]){"path", "user", "recursive", NULL},
                             "recursive");
        op->sse = wants_sse(req);
        break;
    case OP_REMOVE:
        r = parse_path_query(op, (const char *const[]){"path", "user", "recursive", NULL},
                             "recursive");
        break;
    case OP_DOWNLOAD:
        r = parse_path_query(op, q_path_user, NULL);
        break;
    case OP_UPLOAD:
        r = parse_path_query(op, (const char *const[]){"path", "user", "mode", "parents", NULL},
                             "parents");
        if (r == 0 && multipart) {
            r = parse_multipart(op);
        } else if (r == 0) {
            op->items = gbx_xcalloc(1, sizeof(*op->items));
            op->nitems = 1;
            op->items[0].path = gbx_xstrdup(op->path);
            op->body = evhttp_request_get_input_buffer(req);
            op->items[0].len = evbuffer_get_length(op->body);
        }
        break;
    case OP_MKDIR:
    case OP_MOVE:
    default:
        r = parse_body(op);
        break;
    }
    if (r < 0) {
        op->req = NULL; /* answered */
        op_finish(op);
        op_leave(op);
        return;
    }
    if (op_connect(op, base, sb) < 0) {
        op_leave(op);
        return;
    }

    struct gbx_msg *msg;
    switch (kind) {
    case OP_STAT:
        msg = begin(op, GBX_MSG_STAT, op->path);
        if (!op->flag)
            gbx_msg_put_u32(msg, GBX_A_FOLLOW, 0);
        (void)send_req(op, on_stat);
        break;
    case OP_LIST:
        op->entries = json_array();
        msg = begin(op, GBX_MSG_LIST, op->path);
        gbx_msg_put_u32(msg, GBX_A_DEPTH, op->depth);
        (void)send_req(op, on_list);
        break;
    case OP_WATCH:
        msg = begin(op, GBX_MSG_WATCH, op->path);
        if (op->flag)
            gbx_msg_put_u32(msg, GBX_A_RECURSIVE, 1);
        (void)send_req(op, on_watch);
        break;
    case OP_REMOVE:
        msg = begin(op, GBX_MSG_REMOVE, op->path);
        if (op->flag)
            gbx_msg_put_u32(msg, GBX_A_RECURSIVE, 1);
        (void)send_req(op, on_change);
        break;
    case OP_DOWNLOAD:
        (void)begin(op, GBX_MSG_STAT, op->path);
        (void)send_req(op, on_download_stat);
        break;
    case OP_MKDIR:
        msg = begin(op, GBX_MSG_STAT, op->path);
        gbx_msg_put_u32(msg, GBX_A_FOLLOW, 0);
        if (send_req(op, on_pre_stat) < 0)
            break;
        msg = begin(op, GBX_MSG_MKDIR, op->path);
        gbx_msg_put_u32(msg, GBX_A_MODE, op->has_mode ? op->mode : 0755);
        if (op->flag)
            gbx_msg_put_u32(msg, GBX_A_PARENTS, 1);
        if (send_req(op, on_change) < 0)
            break;
        (void)begin(op, GBX_MSG_STAT, op->path);
        (void)send_req(op, on_post_stat);
        break;
    case OP_MOVE:
        msg = begin(op, GBX_MSG_RENAME, op->path);
        gbx_msg_put_str(msg, GBX_A_PATH2, op->path2);
        if (!op->flag)
            gbx_msg_put_u32(msg, GBX_A_NOREPLACE, 1);
        if (send_req(op, on_change) < 0)
            break;
        msg = begin(op, GBX_MSG_STAT, op->path2);
        gbx_msg_put_u32(msg, GBX_A_FOLLOW, 0);
        (void)send_req(op, on_post_stat);
        break;
    case OP_UPLOAD:
        if (multipart) {
            op->written = json_array();
            upload_next(op);
            break;
        }
        msg = begin(op, GBX_MSG_STAT, op->path);
        gbx_msg_put_u32(msg, GBX_A_FOLLOW, 0);
        if (send_req(op, on_pre_stat) == 0)
            upload_next(op);
        break;
    }
    op_leave(op);
}
