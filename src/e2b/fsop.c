/* SPDX-License-Identifier: MIT */
/* The E2B file services' shared operation (see e2b/fsop.h). */
#include "e2b/fsop.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "e2b/connect.h"
#include "e2b/e2b.h"
#include "http/http.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "base/mem.h"

/* unsent bytes in a client's connection above which a download or watch stops reading */
#define FSOP_OUT_CAP (512u << 10)
#define FSOP_PATH_MAX 4096

static struct gbx_e2b_fsop *ops;

struct gbx_e2b_fsop *gbx_e2b_fsop_first(void)
{
    return ops;
}

static void op_destroy(struct gbx_e2b_fsop *op)
{
    if (op->pprev) {
        *op->pprev = op->next;
        if (op->next)
            op->next->pprev = op->pprev;
    }
    gbx_aconn_free(op->ac);
    if (op->keepalive)
        event_free(op->keepalive);
    if (op->deadline)
        event_free(op->deadline);
    json_decref(op->entries);
    json_decref(op->written);
    for (size_t i = 0; i < op->nitems; i++)
        free(op->items[i].path);
    free(op->items);
    if (op->own_body && op->body)
        evbuffer_free(op->body);
    gbx_multipart_release(&op->mp);
    free(op->path);
    free(op->path2);
    free(op);
}

void gbx_e2b_fsop_enter(struct gbx_e2b_fsop *op)
{
    op->busy++;
}

void gbx_e2b_fsop_leave(struct gbx_e2b_fsop *op)
{
    if (--op->busy == 0 && op->dead)
        op_destroy(op);
}

/* Stop the client callbacks (the reply is being finished). */
static void detach_client(struct gbx_e2b_fsop *op)
{
    if (op->req && evhttp_request_get_connection(op->req))
        evhttp_connection_set_closecb(evhttp_request_get_connection(op->req), NULL, NULL);
}

void gbx_e2b_fsop_finish(struct gbx_e2b_fsop *op)
{
    detach_client(op);
    op->req = NULL;
    gbx_aconn_free(op->ac);
    op->ac = NULL;
    if (op->keepalive)
        event_del(op->keepalive);
    if (op->deadline)
        event_del(op->deadline);
    op->dead = 1;
}

struct gbx_e2b_fsop *gbx_e2b_fsop_new(struct gbx_server *srv, const struct gbx_actor *who,
                                      struct event_base *base, struct evhttp_request *req,
                                      struct gbx_live *l, enum gbx_e2b_form form, int kind,
                                      const char *user)
{
    struct gbx_e2b_fsop *op = gbx_xcalloc(1, sizeof(*op));
    op->form = form;
    op->kind = kind;
    op->srv = srv;
    op->base = base;
    op->req = req;
    op->busy = 1; /* until the handler returns */
    snprintf(op->sandbox, sizeof(op->sandbox), "%s", l->sb->id);
    snprintf(op->actor, sizeof(op->actor), "%s", who->name);
    snprintf(op->user, sizeof(op->user), "%s", user);
    op->next = ops;
    if (ops)
        ops->pprev = &op->next;
    op->pprev = &ops;
    ops = op;
    return op;
}

char *gbx_e2b_fsop_path(const char *user, const char *raw)
{
    if (raw == NULL || strlen(raw) > FSOP_PATH_MAX)
        return NULL;
    gbx_autofree char *abs = gbx_e2b_path(user, raw);
    if (abs == NULL)
        return NULL;
    /* lexically clean, as Go's filepath.Clean: no "", "." or ".." components (".." stops at
     * the root); the agent resolves what is left inside the sandbox's root */
    size_t n = strlen(abs);
    char *out = gbx_xmalloc(n + 2);
    size_t o = 0;
    const char *p = abs;
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0 || (len == 1 && p[0] == '.')) {
            /* nothing */
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--; /* the slash */
        } else {
            out[o++] = '/';
            memcpy(out + o, p, len);
            o += len;
        }
        p += len;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return out;
}

/* ---- answers --------------------------------------------------------------------------------- */

void gbx_e2b_fsop_error(struct gbx_e2b_fsop *op, const char *code, int status, const char *fmt, ...)
{
    if (op->req == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    gbx_autofree char *raw = gbx_vasprintf(fmt, ap);
    va_end(ap);
    gbx_autofree char *msg = gbx_e2b_utf8(raw); /* paths may hold any byte */
    detach_client(op);
    switch (op->form) {
    case GBX_E2B_UNARY:
        gbx_e2b_rpc_error(op->req, code, "%s", msg);
        break;
    case GBX_E2B_STREAM:
        if (!op->started)
            gbx_e2b_stream_start(op->req);
        op->started = 1;
        gbx_e2b_stream_end(op->req, code, msg);
        break;
    case GBX_E2B_REST:
        if (op->started) {
            /* the status is out: close, so the client sees a short body */
            struct evhttp_connection *conn = evhttp_request_get_connection(op->req);
            op->req = NULL;
            if (conn)
                evhttp_connection_free(conn);
            return;
        }
        gbx_e2b_error(op->req, status, "%s", msg);
        break;
    }
    op->req = NULL;
}

int gbx_e2b_fsop_errno(const struct gbx_frame_hdr *h, const uint8_t *p, int *unknown_user)
{
    char msg[512];
    int e = gbx_aconn_error_text(h ? p : NULL, h ? h->len : 0, msg, sizeof(msg));
    if (unknown_user)
        *unknown_user = h && e == ENOENT && strncmp(msg, "unknown user '", 14) == 0;
    return h ? e : ENOTCONN;
}

static int rest_status(int e)
{
    switch (e) {
    case ENOENT:
        return 404;
    case EEXIST:
        return 409;
    case EACCES:
    case EPERM:
        return 403;
    case ENOSPC:
    case EDQUOT:
        return 507;
    case EINVAL:
    case EISDIR:
    case ENOTDIR:
    case ENAMETOOLONG:
    case ELOOP:
    case ENOTEMPTY:
    case EXDEV:
        return 400;
    case EFBIG:
        return 413;
    default:
        return 500;
    }
}

void gbx_e2b_fsop_fail(struct gbx_e2b_fsop *op, const struct gbx_frame_hdr *h, const uint8_t *p,
                       const char *path)
{
    char msg[1024];
    int e = gbx_aconn_error_text(h ? p : NULL, h ? h->len : 0, msg, sizeof(msg));
    int unknown_user = 0;
    (void)gbx_e2b_fsop_errno(h, p, &unknown_user);
    if (h == NULL)
        gbx_e2b_fsop_error(op, "unavailable", 502, "the sandbox's agent went away");
    else if (unknown_user)
        gbx_e2b_fsop_error(op, "unauthenticated", 401, "invalid username: '%s'", op->user);
    else if (e == ENOENT && path)
        gbx_e2b_fsop_error(op, "not_found", 404, "path '%s' does not exist", path);
    else
        gbx_e2b_fsop_error(op, gbx_connect_code_for_errno(e), rest_status(e), "%s", msg);
    gbx_e2b_fsop_finish(op);
}

void gbx_e2b_fsop_reply(struct gbx_e2b_fsop *op, int status, json_t *msg)
{
    if (op->req == NULL) {
        json_decref(msg);
    } else {
        detach_client(op);
        if (op->form == GBX_E2B_REST) {
            gbx_e2b_reply_json(op->req, status, msg);
        } else {
            gbx_e2b_rpc_reply(op->req, msg);
        }
        op->req = NULL;
    }
    gbx_e2b_fsop_finish(op);
}

/* ---- the two connections ----------------------------------------------------------------------
 */

static void on_client_close(struct evhttp_connection *conn, void *arg)
{
    struct gbx_e2b_fsop *op = arg;
    (void)conn;
    gbx_e2b_fsop_enter(op);
    /* When the client went away with the request unanswered (or mid-reply), evhttp has
     * detached the request from the connection and leaves it to us: ending it frees it. */
    if (op->req && evhttp_request_get_connection(op->req) == NULL)
        evhttp_send_reply_end(op->req);
    op->req = NULL;
    /* a change already sent goes on, to be audited; anything else stops now */
    if (!op->mutation)
        gbx_e2b_fsop_finish(op);
    gbx_e2b_fsop_leave(op);
}

static void on_agent_close(void *arg, const char *why)
{
    struct gbx_e2b_fsop *op = arg;
    gbx_e2b_fsop_enter(op);
    if (!op->dead)
        gbx_e2b_fsop_error(op, "unavailable", 502, "the sandbox's agent went away: %s", why);
    gbx_e2b_fsop_finish(op);
    gbx_e2b_fsop_leave(op);
}

int gbx_e2b_fsop_connect(struct gbx_e2b_fsop *op, struct gbx_live *l,
                         void (*on_event)(void *arg, const struct gbx_frame_hdr *h,
                                          const uint8_t *p))
{
    struct gbx_err *err = NULL;
    if (gbx_aconn_open(op->base, l->sb, on_event, on_agent_close, op, &op->ac, &err) < 0) {
        gbx_e2b_fsop_error(op, "unavailable", 502, "%s", err->msg);
        gbx_err_free(err);
        gbx_e2b_fsop_finish(op);
        return -1;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(op->req), on_client_close, op);
    return 0;
}

struct gbx_msg *gbx_e2b_fsop_begin(struct gbx_e2b_fsop *op, uint16_t type, const char *path)
{
    struct gbx_msg *m = gbx_aconn_begin(op->ac, type);
    gbx_msg_put_str(m, GBX_A_USER, op->user);
    if (path)
        gbx_msg_put_str(m, GBX_A_PATH, path);
    return m;
}

void gbx_e2b_fsop_send_failed(struct gbx_e2b_fsop *op, long id)
{
    if (id == -EMSGSIZE)
        gbx_e2b_fsop_error(op, "invalid_argument", 400,
                           "the request is too large for the sandbox's agent");
    else
        gbx_e2b_fsop_error(op, "unavailable", 502, "the sandbox's agent went away");
    gbx_e2b_fsop_finish(op);
}

int gbx_e2b_fsop_send(struct gbx_e2b_fsop *op, gbx_aconn_reply_fn fn)
{
    long id = gbx_aconn_send(op->ac, fn, op);
    if (id > 0)
        return 0;
    gbx_e2b_fsop_send_failed(op, id);
    return -1;
}

/* The client's connection wrote out everything we gave it: read the agent again. */
static void drained(struct evhttp_connection *conn, void *arg)
{
    struct gbx_e2b_fsop *op = arg;
    (void)conn;
    if (!op->paused || op->dead)
        return;
    gbx_e2b_fsop_enter(op);
    op->paused = 0;
    gbx_aconn_pause(op->ac, 0);
    gbx_e2b_fsop_leave(op);
}

/* evhttp keeps one "written" callback per connection, replaced by each chunk sent (and by
 * the end of the reply): it is set only on the chunk that crosses the cap, and nothing else
 * is read from the agent until it fires. */
void gbx_e2b_fsop_send_chunk(struct gbx_e2b_fsop *op, struct evbuffer *b)
{
    gbx_http_send_chunk(op->req, b, FSOP_OUT_CAP, &op->paused, op->ac, drained, op);
}

void gbx_e2b_fsop_audit(struct gbx_e2b_fsop *op, const char *kind, json_t *detail)
{
    json_object_set_new(detail, "user", json_string(op->user));
    gbx_server_audit_as(op->srv, op->actor, kind, op->sandbox, detail);
}

/* ---- EntryInfo --------------------------------------------------------------------------------
 */

char *gbx_e2b_utf8(const char *s)
{
    size_t n = strlen(s);
    char *out = gbx_xmalloc(n * 3 + 1), *o = out;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t len = *p < 0x80             ? 1
                     : (*p & 0xe0) == 0xc0 ? 2
                     : (*p & 0xf0) == 0xe0 ? 3
                     : (*p & 0xf8) == 0xf0 ? 4
                                           : 0;
        int ok = len > 0;
        for (size_t i = 1; ok && i < len; i++)
            ok = (p[i] & 0xc0) == 0x80;
        if (ok && len > 1) {
            /* no overlong forms, surrogates or values past U+10FFFF */
            uint32_t c = len == 2 ? (p[0] & 0x1fu) : len == 3 ? (p[0] & 0x0fu) : (p[0] & 0x07u);
            for (size_t i = 1; i < len; i++)
                c = (c << 6) | (p[i] & 0x3fu);
            ok = !(len == 2 && c < 0x80) && !(len == 3 && c < 0x800) &&
                 !(len == 4 && c < 0x10000) && !(c >= 0xd800 && c <= 0xdfff) && c <= 0x10ffff;
        }
        if (ok) {
            memcpy(o, p, len);
            o += len;
            p += len;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3); /* U+FFFD, as Go's JSON encoder does */
            o += 3;
            p++;
        }
    }
    *o = '\0';
    return out;
}

json_t *gbx_e2b_jstr(const char *s)
{
    char *v = gbx_e2b_utf8(s);
    json_t *j = json_string(v);
    free(v);
    GBX_BUG_ON(j == NULL);
    return j;
}

static char *attr_dup(const uint8_t *p, size_t len, uint16_t tag)
{
    char buf[FSOP_PATH_MAX + 1];
    if (gbx_attrs_get_str(p, len, tag, buf, sizeof(buf)) != 1)
        return NULL;
    return gbx_xstrdup(buf);
}

uint32_t gbx_e2b_ftype(const uint8_t *p, size_t len)
{
    uint32_t ftype = 0;
    (void)!gbx_attrs_get_u32(p, len, GBX_A_FTYPE, &ftype);
    return ftype;
}

/* "-rw-r--r--" as ls shows it (the type letter from the mode's S_IFMT bits when known). */
static void permissions(uint32_t ftype, uint32_t mode, char out[11])
{
    char t = '-';
    switch (mode & 0170000) {
    case 0040000:
        t = 'd';
        break;
    case 0120000:
        t = 'l';
        break;
    case 0010000:
        t = 'p';
        break;
    case 0140000:
        t = 's';
        break;
    case 0020000:
        t = 'c';
        break;
    case 0060000:
        t = 'b';
        break;
    default:
        t = ftype == GBX_FT_DIR ? 'd' : ftype == GBX_FT_SYMLINK ? 'l' : '-';
    }
    static const char rwx[] = "rwxrwxrwx";
    out[0] = t;
    for (int i = 0; i < 9; i++)
        out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
    if (mode & 04000)
        out[3] = (mode & 0100) ? 's' : 'S';
    if (mode & 02000)
        out[6] = (mode & 0010) ? 's' : 'S';
    if (mode & 01000)
        out[9] = (mode & 0001) ? 't' : 'T';
    out[10] = '\0';
}

/* A protobuf Timestamp: RFC 3339 in UTC, with nanoseconds when there are any. */
static void timestamp(uint64_t ns, char *out, size_t outsz)
{
    time_t t = (time_t)(ns / 1000000000u);
    struct tm tm;
    gmtime_r(&t, &tm);
    char buf[40];
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    unsigned frac = (unsigned)(ns % 1000000000u);
    if (frac)
        snprintf(out, outsz, "%s.%09uZ", buf, frac);
    else
        snprintf(out, outsz, "%sZ", buf);
}

json_t *gbx_e2b_entry_json(const uint8_t *p, size_t len, const char *path)
{
    uint32_t ftype = GBX_FT_OTHER, mode = 0, uid = 0, gid = 0;
    uint64_t size = 0, mtime = 0;
    (void)!gbx_attrs_get_u32(p, len, GBX_A_FTYPE, &ftype);
    (void)!gbx_attrs_get_u32(p, len, GBX_A_MODE, &mode);
    (void)!gbx_attrs_get_u32(p, len, GBX_A_UID, &uid);
    (void)!gbx_attrs_get_u32(p, len, GBX_A_GID, &gid);
    (void)!gbx_attrs_get_u64(p, len, GBX_A_SIZE, &size);
    (void)!gbx_attrs_get_u64(p, len, GBX_A_MTIME_NS, &mtime);
    /* FIFOs, sockets and devices are files to the SDK, which skips FILE_TYPE_UNSPECIFIED */
    const char *type = ftype == GBX_FT_DIR       ? "FILE_TYPE_DIRECTORY"
                       : ftype == GBX_FT_SYMLINK ? "FILE_TYPE_SYMLINK"
                                                 : "FILE_TYPE_FILE";
    const char *slash = strrchr(path, '/');
    const char *name = slash && slash[1] ? slash + 1 : path;
    char perms[11], when[64], sz[24], num[16];
    permissions(ftype, mode, perms);
    timestamp(mtime, when, sizeof(when));
    snprintf(sz, sizeof(sz), "%llu", (unsigned long long)size);
    json_t *j = json_pack("{s:o,s:s,s:o,s:s,s:i,s:s,s:s}", "name", gbx_e2b_jstr(name), "type", type,
                          "path", gbx_e2b_jstr(path), "size", sz, "mode", (int)(mode & 0777),
                          "permissions", perms, "modifiedTime", when);
    GBX_BUG_ON(j == NULL);
    char *owner = attr_dup(p, len, GBX_A_OWNER);
    char *group = attr_dup(p, len, GBX_A_GROUPNAME);
    snprintf(num, sizeof(num), "%u", uid);
    json_object_set_new(j, "owner", gbx_e2b_jstr(owner ? owner : num));
    snprintf(num, sizeof(num), "%u", gid);
    json_object_set_new(j, "group", gbx_e2b_jstr(group ? group : num));
    free(owner);
    free(group);
    char *link = attr_dup(p, len, GBX_A_LINK);
    if (link && ftype == GBX_FT_SYMLINK)
        json_object_set_new(j, "symlinkTarget", gbx_e2b_jstr(link));
    free(link);
    /* no extended attributes: the agent has no operation for them (docs/e2b.md) */
    json_object_set_new(j, "metadata", json_object());
    return j;
}
