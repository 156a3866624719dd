/* SPDX-License-Identifier: MIT */
/* envd's filesystem.Filesystem over Connect JSON (shared/protocols/e2b.md §4.3):
 *
 *   Stat {path}                          -> {"entry": EntryInfo}          (lstat)
 *   ListDir {path, depth}                -> {"entries": [EntryInfo...]}   (depth levels below)
 *   MakeDir {path}                       -> {"entry"}; parents made; already_exists if a dir
 *   Move {source, destination}           -> {"entry"} of the destination; its parents made
 *   Remove {path}                        -> {}; recursive, a missing path is fine (rm -rf)
 *   WatchDir {path, recursive, includeEntry}  server stream: {"start":{}}, then
 *        {"filesystem":{"name","type","entry"?}} per operation, {"keepalive":{}} when idle
 *
 * Each call has its own connection to the sandbox's agent, as the envd user (Authorization
 * Basic, default "user"), so the sandbox's own permissions apply; every path is resolved
 * inside the sandbox's root by the agent. Changes are audited as the sandbox's owner. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/connect.h"
#include "e2b/e2b.h"
#include "e2b/fsop.h"
#include "base/mem.h"

#define FS_LIST_MAX 100000
#define FS_LIST_MAX_DEPTH 32 /* the agent's */
#define FS_WATCH_QUEUE_MAX 10000
#define FS_NAME_LOOKUPS 64      /* distinct uids and gids of a listing named */
#define FS_KEEPALIVE_DEFAULT 90 /* seconds, as envd without Keepalive-Ping-Interval */

enum fs_kind { FS_STAT, FS_LIST, FS_MKDIR, FS_MOVE, FS_REMOVE, FS_WATCH };

/* ---- stat, list -------------------------------------------------------------------------------
 */

/* A STAT whose reply is the answer: {"entry": ...} of op->path (move: op->path2). */
static void on_entry(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    const char *path = op->kind == FS_MOVE ? op->path2 : op->path;
    if (h == NULL || h->type != GBX_MSG_OK)
        gbx_e2b_fsop_fail(op, h, p, path);
    else
        gbx_e2b_fsop_reply(op, 200,
                           json_pack("{s:o}", "entry", gbx_e2b_entry_json(p, h->len, path)));
    gbx_e2b_fsop_leave(op);
}

/* Reply with the entry of path, as Stat, MakeDir and Move do (a symlink itself, not what it
 * points to). */
static void reply_entry(struct gbx_e2b_fsop *op, const char *path)
{
    struct gbx_msg *m = gbx_e2b_fsop_begin(op, GBX_MSG_STAT, path);
    gbx_msg_put_u32(m, GBX_A_FOLLOW, 0);
    (void)gbx_e2b_fsop_send(op, on_entry);
}

/* LIST and WATCH want a directory. */
static void fail_dir(struct gbx_e2b_fsop *op, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    if (h && gbx_e2b_fsop_errno(h, p, NULL) == ENOTDIR) {
        gbx_e2b_fsop_error(op, "invalid_argument", 400, "path '%s' is not a directory", op->path);
        gbx_e2b_fsop_finish(op);
        return;
    }
    gbx_e2b_fsop_fail(op, h, p, op->path);
}

static int cmp_path(const void *a, const void *b)
{
    json_t *const *x = a, *const *y = b;
    return strcmp(json_string_value(json_object_get(*x, "path")),
                  json_string_value(json_object_get(*y, "path")));
}

static void list_names(struct gbx_e2b_fsop *op);

static void on_list(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    gbx_e2b_fsop_enter(op);
    if (h == NULL || h->type == GBX_MSG_ERROR) {
        fail_dir(op, h, p);
    } else if (!final && h->type == GBX_EV_DIRENT) {
        struct gbx_attr_iter it;
        struct gbx_attr a;
        gbx_attr_iter_init(&it, p, h->len);
        while (gbx_attr_next(&it, &a) > 0 && !op->dead) {
            char name[4097];
            if (a.tag != GBX_A_ENTRY || gbx_attrs_validate(a.data, a.len) < 0 ||
                gbx_attrs_get_str(a.data, a.len, GBX_A_NAME, name, sizeof(name)) != 1)
                continue;
            if (op->count == FS_LIST_MAX) {
                gbx_e2b_fsop_error(op, "resource_exhausted", 507,
                                   "'%s' holds more than %d entries at this depth; list a "
                                   "subdirectory or a lower depth",
                                   op->path, FS_LIST_MAX);
                gbx_e2b_fsop_finish(op);
                break;
            }
            gbx_autofree char *abs =
                gbx_asprintf("%s%s%s", op->path, strcmp(op->path, "/") == 0 ? "" : "/", name);
            json_array_append_new(op->entries, gbx_e2b_entry_json(a.data, a.len, abs));
            op->count++;
        }
    } else if (final && h->type == GBX_MSG_OK) {
        list_names(op);
    }
    gbx_e2b_fsop_leave(op);
}

/* ListDir's answer, once the owner and group names are known. */
static void list_reply(struct gbx_e2b_fsop *op)
{
    {
        size_t i;
        json_t *e;
        json_array_foreach(op->entries, i, e)
        {
            char key[32];
            json_t *name;
            snprintf(key, sizeof(key), "u%s", json_string_value(json_object_get(e, "owner")));
            if ((name = json_object_get(op->written, key)))
                json_object_set(e, "owner", name);
            snprintf(key, sizeof(key), "g%s", json_string_value(json_object_get(e, "group")));
            if ((name = json_object_get(op->written, key)))
                json_object_set(e, "group", name);
        }
    }
    {
        /* sorted by path: stable whatever the directory order */
        size_t n = json_array_size(op->entries);
        json_t **v = gbx_xcalloc(n ? n : 1, sizeof(json_t *));
        for (size_t i = 0; i < n; i++)
            v[i] = json_incref(json_array_get(op->entries, i));
        qsort(v, n, sizeof(json_t *), cmp_path);
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, v[i]);
        free(v);
        gbx_e2b_fsop_reply(op, 200, json_pack("{s:o}", "entries", arr));
    }
}

static int all_digits(const char *s)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* The STAT of an entry that stands for its uid and gid: their names. */
static void on_name_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    if (h == NULL) {
        gbx_e2b_fsop_fail(op, h, p, op->path);
    } else {
        uint32_t uid, gid;
        char name[256], key[32];
        if (h->type == GBX_MSG_OK && gbx_attrs_get_u32(p, h->len, GBX_A_UID, &uid) == 1 &&
            gbx_attrs_get_str(p, h->len, GBX_A_OWNER, name, sizeof(name)) == 1) {
            snprintf(key, sizeof(key), "u%u", uid);
            json_object_set_new(op->written, key, gbx_e2b_jstr(name));
        }
        if (h->type == GBX_MSG_OK && gbx_attrs_get_u32(p, h->len, GBX_A_GID, &gid) == 1 &&
            gbx_attrs_get_str(p, h->len, GBX_A_GROUPNAME, name, sizeof(name)) == 1) {
            snprintf(key, sizeof(key), "g%u", gid);
            json_object_set_new(op->written, key, gbx_e2b_jstr(name));
        }
        if (--op->inflight == 0)
            list_reply(op);
    }
    gbx_e2b_fsop_leave(op);
}

/* LIST's entries carry ids, not names: one STAT per distinct id (at most FS_NAME_LOOKUPS)
 * of an entry that has it gives the names (the agent knows the sandbox's passwd). */
static void list_names(struct gbx_e2b_fsop *op)
{
    op->written = json_object();
    json_t *asked = json_object();
    size_t i;
    json_t *e;
    json_array_foreach(op->entries, i, e)
    {
        const char *ids[2] = {json_string_value(json_object_get(e, "owner")),
                              json_string_value(json_object_get(e, "group"))};
        int need = 0;
        for (int k = 0; k < 2; k++) {
            char key[32];
            snprintf(key, sizeof(key), "%c%s", k ? 'g' : 'u', ids[k] ? ids[k] : "");
            if (all_digits(ids[k]) && !json_object_get(asked, key) &&
                json_object_size(asked) < FS_NAME_LOOKUPS) {
                json_object_set_new(asked, key, json_true());
                need = 1;
            }
        }
        if (!need)
            continue;
        struct gbx_msg *m =
            gbx_e2b_fsop_begin(op, GBX_MSG_STAT, json_string_value(json_object_get(e, "path")));
        gbx_msg_put_u32(m, GBX_A_FOLLOW, 0);
        if (gbx_e2b_fsop_send(op, on_name_stat) < 0)
            break;
        op->inflight++;
    }
    json_decref(asked);
    if (!op->dead && op->inflight == 0)
        list_reply(op);
}

/* ---- make dir, move, remove ------------------------------------------------------------------ */

static void on_mkdir(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    if (h == NULL || h->type != GBX_MSG_OK) {
        gbx_e2b_fsop_fail(op, h, p, op->path);
    } else {
        gbx_e2b_fsop_audit(
            op, "file.mkdir",
            json_pack("{s:s,s:b,s:b}", "path", op->path, "parents", 1, "created", 1));
        reply_entry(op, op->path);
    }
    gbx_e2b_fsop_leave(op);
}

/* MakeDir's first step: what is there already? */
static void on_mkdir_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    int unknown_user = 0;
    if (h && h->type == GBX_MSG_OK) {
        if (gbx_e2b_ftype(p, h->len) == GBX_FT_DIR)
            gbx_e2b_fsop_error(op, "already_exists", 409, "directory '%s' already exists",
                               op->path);
        else
            gbx_e2b_fsop_error(op, "invalid_argument", 400,
                               "path '%s' already exists and is not a directory", op->path);
        gbx_e2b_fsop_finish(op);
    } else if (h && gbx_e2b_fsop_errno(h, p, &unknown_user) == ENOENT && !unknown_user) {
        op->mutation = 1;
        struct gbx_msg *m = gbx_e2b_fsop_begin(op, GBX_MSG_MKDIR, op->path);
        gbx_msg_put_u32(m, GBX_A_MODE, 0755);
        gbx_msg_put_u32(m, GBX_A_PARENTS, 1);
        (void)gbx_e2b_fsop_send(op, on_mkdir);
    } else {
        gbx_e2b_fsop_fail(op, h, p, op->path);
    }
    gbx_e2b_fsop_leave(op);
}

static void on_rename(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    if (h == NULL || h->type != GBX_MSG_OK) {
        gbx_e2b_fsop_fail(op, h, p, op->path);
    } else {
        gbx_e2b_fsop_audit(
            op, "file.move",
            json_pack("{s:s,s:s,s:b}", "from", op->path, "to", op->path2, "overwrite", 1));
        reply_entry(op, op->path2);
    }
    gbx_e2b_fsop_leave(op);
}

static void send_rename(struct gbx_e2b_fsop *op)
{
    struct gbx_msg *m = gbx_e2b_fsop_begin(op, GBX_MSG_RENAME, op->path);
    gbx_msg_put_str(m, GBX_A_PATH2, op->path2);
    (void)gbx_e2b_fsop_send(op, on_rename);
}

/* Move's first step, as envd: the destination's parent directories. */
static void on_move_parents(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    if (h == NULL || h->type != GBX_MSG_OK) {
        int e = h ? gbx_e2b_fsop_errno(h, p, NULL) : 0;
        if (e == EEXIST || e == ENOTDIR) {
            gbx_e2b_fsop_error(op, "invalid_argument", 400,
                               "the destination's directory is not a directory ('%s')", op->path2);
            gbx_e2b_fsop_finish(op);
        } else {
            gbx_e2b_fsop_fail(op, h, p, NULL);
        }
    } else {
        send_rename(op);
    }
    gbx_e2b_fsop_leave(op);
}

static void on_remove(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    int unknown_user = 0;
    if (h && h->type == GBX_MSG_OK) {
        gbx_e2b_fsop_audit(op, "file.remove",
                           json_pack("{s:s,s:b}", "path", op->path, "recursive", 1));
        gbx_e2b_fsop_reply(op, 200, json_object());
    } else if (h && gbx_e2b_fsop_errno(h, p, &unknown_user) == ENOENT && !unknown_user) {
        gbx_e2b_fsop_reply(op, 200, json_object()); /* rm -rf: nothing to remove is fine */
    } else {
        gbx_e2b_fsop_fail(op, h, p, op->path);
    }
    gbx_e2b_fsop_leave(op);
}

/* ---- watch ------------------------------------------------------------------------------------
 */

/* One message of the stream, with backpressure; the keepalive timer starts over. */
static void watch_send(struct gbx_e2b_fsop *op, json_t *msg)
{
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    gbx_e2b_put_envelope(b, 0, msg);
    gbx_e2b_fsop_send_chunk(op, b);
    evbuffer_free(b);
    if (op->keepalive) {
        struct timeval tv = {(time_t)op->depth, 0}; /* depth holds the interval for a watch */
        event_add(op->keepalive, &tv);
    }
}

static void on_keepalive(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_e2b_fsop *op = arg;
    (void)fd;
    (void)what;
    if (op->dead || op->req == NULL)
        return;
    gbx_e2b_fsop_enter(op);
    watch_send(op, json_pack("{s:{}}", "keepalive"));
    gbx_e2b_fsop_leave(op);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_e2b_fsop *op = arg;
    (void)fd;
    (void)what;
    if (op->dead)
        return;
    gbx_e2b_fsop_enter(op);
    gbx_e2b_fsop_error(op, "deadline_exceeded", 504,
                       "the watch of '%s' reached its deadline (Connect-Timeout-Ms)", op->path);
    gbx_e2b_fsop_finish(op);
    gbx_e2b_fsop_leave(op);
}

static const struct {
    uint32_t bit;
    const char *name;
} watch_kinds[] = {
    {GBX_WE_CREATE, "EVENT_TYPE_CREATE"}, {GBX_WE_WRITE, "EVENT_TYPE_WRITE"},
    {GBX_WE_REMOVE, "EVENT_TYPE_REMOVE"}, {GBX_WE_RENAME, "EVENT_TYPE_RENAME"},
    {GBX_WE_CHMOD, "EVENT_TYPE_CHMOD"},
};

/* One message per operation in bits (entry borrowed, may be NULL). */
static void watch_emit(struct gbx_e2b_fsop *op, const char *name, uint32_t bits, json_t *entry)
{
    for (size_t i = 0; i < GBX_ARRAY_SIZE(watch_kinds) && op->req && !op->dead; i++) {
        if (!(bits & watch_kinds[i].bit))
            continue;
        json_t *ev =
            json_pack("{s:o,s:s}", "name", gbx_e2b_jstr(name), "type", watch_kinds[i].name);
        if (entry)
            json_object_set(ev, "entry", entry);
        watch_send(op, json_pack("{s:o}", "filesystem", ev));
    }
}

/* includeEntry: the STAT of the oldest waiting event (replies come in request order). */
static void on_event_stat(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final || h == NULL) /* a lost agent ends the stream through the close callback */
        return;
    gbx_e2b_fsop_enter(op);
    json_t *ev = json_incref(json_array_get(op->entries, 0));
    if (ev) {
        json_array_remove(op->entries, 0);
        const char *name = json_string_value(json_object_get(ev, "name"));
        const char *abs = json_string_value(json_object_get(ev, "path"));
        uint32_t bits = (uint32_t)json_integer_value(json_object_get(ev, "bits"));
        json_t *entry = h->type == GBX_MSG_OK ? gbx_e2b_entry_json(p, h->len, abs) : NULL;
        watch_emit(op, name, bits, entry);
        json_decref(entry);
        json_decref(ev);
    }
    gbx_e2b_fsop_leave(op);
}

static void on_watch_event(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    struct gbx_e2b_fsop *op = arg;
    if (h->type != GBX_EV_WATCH || h->id != op->handle || op->req == NULL || op->dead ||
        !op->started)
        return;
    gbx_e2b_fsop_enter(op);
    uint32_t bits = 0;
    char name[4097];
    (void)!gbx_attrs_get_u32(p, h->len, GBX_A_WEVENT, &bits);
    if (gbx_attrs_get_str(p, h->len, GBX_A_NAME, name, sizeof(name)) != 1)
        name[0] = '\0';
    /* OVERFLOW (events were lost) has no envd counterpart: it is dropped */
    bits &= GBX_WE_CREATE | GBX_WE_WRITE | GBX_WE_REMOVE | GBX_WE_RENAME | GBX_WE_CHMOD;
    if (bits == 0) {
        /* nothing to say */
    } else if (!op->flag) {
        watch_emit(op, name, bits, NULL);
    } else if (json_array_size(op->entries) >= FS_WATCH_QUEUE_MAX) {
        gbx_e2b_fsop_error(op, "resource_exhausted", 507,
                           "more than %d events of '%s' wait for their entry", FS_WATCH_QUEUE_MAX,
                           op->path);
        gbx_e2b_fsop_finish(op);
    } else {
        gbx_autofree char *abs = gbx_asprintf(
            "%s%s%s", op->path, strcmp(op->path, "/") == 0 || !name[0] ? "" : "/", name);
        json_array_append_new(op->entries,
                              json_pack("{s:o,s:o,s:I}", "name", gbx_e2b_jstr(name), "path",
                                        gbx_e2b_jstr(abs), "bits", (json_int_t)bits));
        struct gbx_msg *m = gbx_e2b_fsop_begin(op, GBX_MSG_STAT, abs);
        gbx_msg_put_u32(m, GBX_A_FOLLOW, 0);
        (void)gbx_e2b_fsop_send(op, on_event_stat);
    }
    gbx_e2b_fsop_leave(op);
}

static void on_watch(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_e2b_fsop *op = arg;
    if (!final)
        return;
    gbx_e2b_fsop_enter(op);
    if (h == NULL || h->type != GBX_MSG_OK) {
        fail_dir(op, h, p);
    } else if (op->req) {
        if (gbx_attrs_get_u32(p, h->len, GBX_A_HANDLE, &op->handle) != 1) {
            gbx_e2b_fsop_error(op, "internal", 500, "the sandbox's agent sent a malformed reply");
            gbx_e2b_fsop_finish(op);
        } else {
            gbx_e2b_stream_start(op->req);
            op->started = 1;
            op->keepalive = event_new(op->base, -1, 0, on_keepalive, op);
            GBX_BUG_ON(op->keepalive == NULL);
            watch_send(op, json_pack("{s:{}}", "start"));
        }
    }
    gbx_e2b_fsop_leave(op);
}

/* The keepalive interval a stream asks for (Keepalive-Ping-Interval, seconds). */
static uint32_t keepalive_secs(struct evhttp_request *req)
{
    const char *v =
        evhttp_find_header(evhttp_request_get_input_headers(req), "Keepalive-Ping-Interval");
    char *end = NULL;
    unsigned long s = v ? strtoul(v, &end, 10) : 0;
    if (v == NULL || end == v || *end != '\0' || s < 1 || s > 3600)
        return FS_KEEPALIVE_DEFAULT;
    return (uint32_t)s;
}

size_t gbx_e2b_fs_drain(const char *why)
{
    size_t n = 0;
    for (struct gbx_e2b_fsop *op = gbx_e2b_fsop_first(), *next; op; op = next) {
        next = op->next;
        if (op->form != GBX_E2B_STREAM || op->req == NULL || op->dead || !op->started)
            continue;
        gbx_e2b_fsop_enter(op);
        gbx_e2b_fsop_error(op, "unavailable", 503, "%s", why);
        gbx_e2b_fsop_finish(op);
        gbx_e2b_fsop_leave(op);
        n++;
    }
    return n;
}

/* ---- the request ----------------------------------------------------------------------------- */

/* A string field that is a path: resolved for the user into *out. Replies and returns -1
 * when it is missing or malformed. */
static int path_field(struct evhttp_request *req, json_t *body, const char *key, const char *user,
                      char **out)
{
    json_t *v = json_object_get(body, key);
    if (v && !json_is_string(v) && !json_is_null(v)) { /* null: the default, "" */
        gbx_e2b_rpc_error(req, "invalid_argument", "'%s' must be a string", key);
        return -1;
    }
    const char *s = json_string_value(v);
    if (s == NULL || *s == '\0') {
        gbx_e2b_rpc_error(req, "invalid_argument", "'%s' is required", key);
        return -1;
    }
    *out = gbx_e2b_fsop_path(user, s);
    if (*out == NULL) {
        gbx_e2b_rpc_error(req, "invalid_argument", "'%s' is not a valid path (at most 4096 bytes)",
                          key);
        return -1;
    }
    return 0;
}

/* A field of the request; an explicit null is the field's default, as absent (proto3 JSON). */
static json_t *field(json_t *body, const char *key)
{
    json_t *v = json_object_get(body, key);
    return json_is_null(v) ? NULL : v;
}

static int bool_field(struct evhttp_request *req, json_t *body, const char *key, int *out)
{
    if (gbx_connect_bool(field(body, key), out) < 0) {
        gbx_e2b_rpc_error(req, "invalid_argument", "'%s' must be true or false", key);
        return -1;
    }
    return 0;
}

void gbx_e2b_filesystem(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                        struct evhttp_request *req, struct gbx_live *l, const char *method)
{
    static const struct {
        const char *name;
        enum fs_kind kind;
    } methods[] = {
        {"Stat", FS_STAT}, {"ListDir", FS_LIST},  {"MakeDir", FS_MKDIR},
        {"Move", FS_MOVE}, {"Remove", FS_REMOVE}, {"WatchDir", FS_WATCH},
    };
    int kind = -1;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(methods); i++)
        if (strcmp(method, methods[i].name) == 0)
            kind = (int)methods[i].kind;
    if (kind < 0)
        return gbx_e2b_rpc_error(req, "unimplemented",
                                 "filesystem.Filesystem/%.64s is not supported (see docs/e2b.md)",
                                 method);
    int stream = gbx_e2b_is_stream(req);
    if (stream != (kind == FS_WATCH))
        return gbx_e2b_rpc_error(req, "invalid_argument",
                                 "filesystem.Filesystem/%s is a %s call (Content-Type %s)", method,
                                 stream ? "unary" : "server-streaming",
                                 stream ? "application/json" : "application/connect+json");
    char user[64];
    if (gbx_e2b_user(req, NULL, 1, user, sizeof(user)) < 0)
        return;
    json_t *body = gbx_e2b_rpc_request(req);
    if (body == NULL)
        return;

    char *path = NULL, *path2 = NULL;
    int flag = 0;
    int64_t depth = 1;
    int r = 0;
    switch (kind) {
    case FS_MOVE:
        r = path_field(req, body, "source", user, &path);
        if (r == 0)
            r = path_field(req, body, "destination", user, &path2);
        break;
    case FS_LIST:
        r = path_field(req, body, "path", user, &path);
        if (r == 0 && gbx_connect_int(field(body, "depth"), 0, UINT32_MAX, &depth) < 0) {
            gbx_e2b_rpc_error(req, "invalid_argument", "'depth' must be a non-negative integer");
            r = -1;
        }
        if (depth == 0)
            depth = 1; /* as envd */
        if (r == 0 && depth > FS_LIST_MAX_DEPTH) {
            gbx_e2b_rpc_error(req, "invalid_argument", "'depth' must be at most %d",
                              FS_LIST_MAX_DEPTH);
            r = -1;
        }
        break;
    case FS_WATCH: {
        int recursive = 0;
        r = path_field(req, body, "path", user, &path);
        if (r == 0)
            r = bool_field(req, body, "recursive", &recursive);
        if (r == 0)
            r = bool_field(req, body, "includeEntry", &flag);
        depth = recursive;
        break;
    }
    default:
        r = path_field(req, body, "path", user, &path);
        break;
    }
    json_decref(body);
    if (r < 0) {
        free(path);
        free(path2);
        return;
    }

    enum gbx_e2b_form form = kind == FS_WATCH ? GBX_E2B_STREAM : GBX_E2B_UNARY;
    struct gbx_e2b_fsop *op = gbx_e2b_fsop_new(s, who, base, req, l, form, kind, user);
    op->path = path;
    op->path2 = path2;
    op->flag = flag;
    if (kind == FS_WATCH) {
        unsigned long ms = gbx_e2b_timeout_ms(req);
        if (ms) {
            op->deadline = event_new(base, -1, 0, on_deadline, op);
            GBX_BUG_ON(op->deadline == NULL);
            struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
            event_add(op->deadline, &tv);
        }
        op->entries = json_array();
    }
    if (gbx_e2b_fsop_connect(op, l, kind == FS_WATCH ? on_watch_event : NULL) < 0) {
        gbx_e2b_fsop_leave(op);
        return;
    }

    struct gbx_msg *m;
    switch (kind) {
    case FS_STAT:
        reply_entry(op, op->path);
        break;
    case FS_LIST:
        op->entries = json_array();
        m = gbx_e2b_fsop_begin(op, GBX_MSG_LIST, op->path);
        gbx_msg_put_u32(m, GBX_A_DEPTH, (uint32_t)depth);
        (void)gbx_e2b_fsop_send(op, on_list);
        break;
    case FS_MKDIR:
        (void)gbx_e2b_fsop_begin(op, GBX_MSG_STAT, op->path);
        (void)gbx_e2b_fsop_send(op, on_mkdir_stat);
        break;
    case FS_MOVE: {
        op->mutation = 1;
        gbx_autofree char *dir = gbx_xstrdup(op->path2);
        char *slash = strrchr(dir, '/');
        if (slash == NULL || slash == dir) {
            send_rename(op);
            break;
        }
        *slash = '\0';
        m = gbx_e2b_fsop_begin(op, GBX_MSG_MKDIR, dir);
        gbx_msg_put_u32(m, GBX_A_MODE, 0755);
        gbx_msg_put_u32(m, GBX_A_PARENTS, 1);
        (void)gbx_e2b_fsop_send(op, on_move_parents);
        break;
    }
    case FS_REMOVE:
        op->mutation = 1;
        m = gbx_e2b_fsop_begin(op, GBX_MSG_REMOVE, op->path);
        gbx_msg_put_u32(m, GBX_A_RECURSIVE, 1);
        (void)gbx_e2b_fsop_send(op, on_remove);
        break;
    case FS_WATCH:
        op->depth = keepalive_secs(req);
        m = gbx_e2b_fsop_begin(op, GBX_MSG_WATCH, op->path);
        if (depth)
            gbx_msg_put_u32(m, GBX_A_RECURSIVE, 1);
        (void)gbx_e2b_fsop_send(op, on_watch);
        break;
    }
    gbx_e2b_fsop_leave(op);
}
