/* SPDX-License-Identifier: MIT */
/* The six tools of a session, run against its sandbox over one connection to the sandbox's
 * init (aconn.h): nothing waits on the sandbox inside the loop. What the tools say and refuse
 * is src/session/toolkit.c (pure); this file moves the bytes.
 *
 *   bash   one persistent /bin/bash --noprofile --norc per session, fed commands on its stdin,
 *          each framed by a per-call random sentinel that carries the exit status
 *   read   STAT, then READ (at most the cap + 1 bytes)
 *   write  WRITE (atomic, parents created), WRITE_DATA..., WRITE_END
 *   edit   read, apply (toolkit), write
 *   glob   LIST of the root (recursive), matched here
 *   grep   grep -rnE in the sandbox, its output post-processed here
 *
 * File tools resolve a relative path against the workdir, and refuse anything outside the
 * session's tools_root ("/" unless the session narrowed it). */
#include <errno.h>
#include <event2/buffer.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "agent/frame.h"
#include "agent/proto.h"
#include "session/sessions_int.h"
#include "base/log.h"
#include "base/mem.h"

#define BASH_DEFAULT_MS 120000
#define GREP_RAW_MAX (4u << 20)
#define GLOB_WALK_MAX 50000
#define GLOB_DEPTH 32
#define WRITE_CHUNK (64u * 1024u)

static void done_text(struct gbx_call *c, const char *text, int is_error)
{
    gbx_session_call_done(c, gbx_tool_result_text(text, is_error));
}

static void done_err(struct gbx_call *c, const char *fmt, ...) GBX_PRINTF(2, 3);
static void done_err(struct gbx_call *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = gbx_vasprintf(fmt, ap);
    va_end(ap);
    done_text(c, m, 1);
    free(m);
}

/* The agent's error text of a reply (or "the sandbox went away" for a lost connection). */
static void agent_error(const struct gbx_frame_hdr *h, const uint8_t *p, char *msg, size_t n)
{
    if (h == NULL)
        snprintf(msg, n, "the sandbox's agent went away");
    else if (h->type == GBX_MSG_ERROR)
        (void)gbx_aconn_error_text(p, h->len, msg, n);
    else
        snprintf(msg, n, "unexpected reply from the agent");
}

static struct gbx_aconn *agent_or_fail(struct gbx_call *c)
{
    gbx_autoerr struct gbx_err *err = NULL;
    struct gbx_aconn *ac = gbx_session_agent(c->ses, &err);
    if (ac == NULL)
        done_err(c, "%s", err->msg);
    return ac;
}

static void realpath_done(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_call *c = arg;
    if (!final || h == NULL)
        return;
    char real[4096];
    if (h->type != GBX_MSG_OK ||
        gbx_attrs_get_str(p, h->len, GBX_A_PATH, real, sizeof(real)) != 1) {
        char msg[256];
        agent_error(h, p, msg, sizeof(msg));
        return done_err(c, "%s: cannot resolve %s: %s", c->tool_name, c->path, msg);
    }
    if (!gbx_tool_path_inside(c->ses->tools_root, real))
        return done_err(c, "%s: %s resolves to %s, outside the session's tools_root %s",
                        c->tool_name, c->path, real, c->ses->tools_root);
    free(c->path);
    c->path = gbx_xstrdup(real);
    c->resolved(c);
}

/* Resolve a file tool's path into c->path (joined with the workdir, then every symlink
 * followed inside the sandbox) and go on with next; anything outside the tools_root, before
 * or after following symlinks, is answered with an error. */
static void resolve_then(struct gbx_call *c, const char *path, const char *tool,
                         void (*next)(struct gbx_call *c))
{
    free(c->path);
    c->path = gbx_tool_path_join(c->ses->workdir, path ? path : c->ses->workdir);
    if (!gbx_tool_path_inside(c->ses->tools_root, c->path))
        return done_err(c, "%s: %s is outside the session's tools_root %s", tool, c->path,
                        c->ses->tools_root);
    struct gbx_aconn *ac = agent_or_fail(c);
    if (ac == NULL)
        return;
    c->tool_name = tool;
    c->resolved = next;
    struct gbx_msg *m = gbx_aconn_begin(ac, GBX_MSG_REALPATH);
    gbx_msg_put_str(m, GBX_A_PATH, c->path);
    if (gbx_aconn_send(ac, realpath_done, c) < 0)
        done_err(c, "%s: the sandbox's agent went away", tool);
}

/* ---- bash ------------------------------------------------------------------------------------ */

static void bash_timeout(evutil_socket_t fd, short what, void *arg);

static void kill_shell(struct gbx_session *ses)
{
    if (ses->shell && ses->ac && !gbx_aconn_lost(ses->ac)) {
        struct gbx_msg *m = gbx_aconn_begin(ses->ac, GBX_MSG_SIGNAL);
        gbx_msg_put_u32(m, GBX_A_PROC, ses->shell);
        gbx_msg_put_u32(m, GBX_A_SIGNO, SIGKILL);
        gbx_msg_put_u32(m, GBX_A_GROUP, 1);
        (void)gbx_aconn_send(ses->ac, NULL, NULL);
    }
    ses->shell = 0;
}

static void bash_send(struct gbx_call *c)
{
    struct gbx_session *ses = c->ses;
    uint8_t r[8];
    char nonce[17];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        GBX_BUG_ON(1);
    for (int i = 0; i < 8; i++)
        snprintf(nonce + 2 * i, 3, "%02x", r[i]);
    gbx_autofree char *script = gbx_tool_bash_script(c->tc.command, nonce);
    size_t len = strlen(script);
    if (len > GBX_FRAME_MAX_PAYLOAD - 1024)
        return done_err(c, "bash: the command is longer than %u bytes",
                        GBX_FRAME_MAX_PAYLOAD - 1024);
    c->bout = gbx_tool_bash_out_new(nonce);
    struct gbx_msg *m = gbx_aconn_begin(ses->ac, GBX_MSG_STDIN);
    gbx_msg_put_u32(m, GBX_A_PROC, ses->shell);
    gbx_aconn_put_data(m, (const uint8_t *)script, NULL, len);
    if (gbx_aconn_send(ses->ac, NULL, NULL) < 0)
        return done_err(c, "bash: the sandbox's agent went away");
    int64_t ms = c->tc.timeout_ms > 0 ? c->tc.timeout_ms : BASH_DEFAULT_MS;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    c->timer = evtimer_new(ses->all->base, bash_timeout, c);
    evtimer_add(c->timer, &tv);
}

static void bash_spawned(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_call *c = arg;
    if (!final)
        return;
    uint32_t proc = 0;
    if (h == NULL || h->type != GBX_MSG_OK ||
        gbx_attrs_get_u32(p, h->len, GBX_A_PROC, &proc) != 1) {
        char msg[256];
        agent_error(h, p, msg, sizeof(msg));
        if (h == NULL)
            return; /* gbx_session_tool_lost answers */
        return done_err(c, "bash: cannot start /bin/bash: %s", msg);
    }
    c->ses->shell = proc;
    bash_send(c);
}

static void bash_start(struct gbx_call *c)
{
    struct gbx_session *ses = c->ses;
    if (c->tc.restart) {
        kill_shell(ses);
        return done_text(c, "bash session restarted", 0);
    }
    struct gbx_aconn *ac = agent_or_fail(c);
    if (ac == NULL)
        return;
    if (ses->shell)
        return bash_send(c);
    struct gbx_msg *m = gbx_aconn_begin(ac, GBX_MSG_SPAWN);
    gbx_msg_put_str(m, GBX_A_ARGV, "/bin/bash");
    gbx_msg_put_str(m, GBX_A_ARGV, "--noprofile");
    gbx_msg_put_str(m, GBX_A_ARGV, "--norc");
    json_t *env = gbx_session_env(ses);
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v)
    {
        gbx_autofree char *kv = gbx_asprintf("%s=%s", k, json_string_value(v));
        gbx_msg_put_str(m, GBX_A_ENV, kv);
    }
    json_decref(env);
    gbx_msg_put_str(m, GBX_A_CWD, ses->workdir);
    gbx_msg_put_u32(m, GBX_A_STDIN, 1);
    if (gbx_aconn_send(ac, bash_spawned, c) < 0)
        done_err(c, "bash: cannot start the shell (request too large)");
}

static void bash_finish(struct gbx_call *c, int status, const char *why)
{
    if (c->timer)
        evtimer_del(c->timer);
    if (why) {
        gbx_autofree char *text = gbx_tool_bash_out_text(c->bout);
        gbx_autofree char *t = gbx_asprintf("%s%s%s", text, *text ? "\n" : "", why);
        return done_text(c, t, 1);
    }
    gbx_session_call_done(c, gbx_tool_bash_result(c->bout, status));
}

static void bash_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct gbx_call *c = arg;
    kill_shell(c->ses);
    gbx_autofree char *why = gbx_asprintf(
        "bash: the command timed out after %lld ms; the shell was killed (the next call "
        "starts a new one)",
        (long long)(c->tc.timeout_ms > 0 ? c->tc.timeout_ms : BASH_DEFAULT_MS));
    bash_finish(c, -1, why);
}

/* ---- read, edit --------------------------------------------------------------------------- */

static void write_begin(struct gbx_call *c, const uint8_t *data, size_t len);

static void read_done(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_call *c = arg;
    if (!final) {
        struct gbx_attr a;
        if (h && h->type == GBX_EV_DATA && gbx_attrs_find(p, h->len, GBX_A_DATA, &a) == 1)
            evbuffer_add(c->data, a.data, a.len);
        return;
    }
    const char *tool = c->tc.tool == GBX_TOOL_EDIT ? "edit" : "read";
    if (h == NULL)
        return;
    if (h->type != GBX_MSG_OK) {
        char msg[256];
        agent_error(h, p, msg, sizeof(msg));
        return done_err(c, "%s: cannot read %s: %s", tool, c->path, msg);
    }
    size_t len = evbuffer_get_length(c->data);
    const uint8_t *bytes = evbuffer_pullup(c->data, -1);
    gbx_autoerr struct gbx_err *err = NULL;
    if (c->tc.tool == GBX_TOOL_EDIT) {
        char *out = NULL;
        size_t outlen = 0, count = 0;
        if (gbx_tool_edit_apply(&c->tc, bytes, len, &out, &outlen, &count, &err) < 0)
            return done_text(c, err->msg, 1);
        c->step = (int)count;
        write_begin(c, (const uint8_t *)out, outlen);
        free(out);
        return;
    }
    const char *kind, *media;
    if (gbx_tool_read_kind(c->path, &kind, &media)) {
        json_t *block = gbx_tool_read_block(kind, media, bytes, len, &err);
        if (block == NULL)
            return done_text(c, err->msg, 1);
        return gbx_session_call_done(c, json_pack("{s:[o],s:b}", "content", block, "is_error", 0));
    }
    char *text = NULL;
    if (gbx_tool_read_text(&c->tc, bytes, len, &text, &err) < 0)
        return done_text(c, err->msg, 1);
    done_text(c, text, 0);
    free(text);
}

static void stat_done(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_call *c = arg;
    if (!final || h == NULL)
        return;
    const char *tool = c->tc.tool == GBX_TOOL_EDIT ? "edit" : "read";
    if (h->type != GBX_MSG_OK) {
        char msg[256];
        agent_error(h, p, msg, sizeof(msg));
        return done_err(c, "%s: %s: %s", tool, c->path, msg);
    }
    uint32_t ft = 0;
    uint64_t size = 0;
    (void)gbx_attrs_get_u32(p, h->len, GBX_A_FTYPE, &ft);
    (void)gbx_attrs_get_u64(p, h->len, GBX_A_SIZE, &size);
    if (ft == GBX_FT_DIR)
        return done_err(c, "%s: %s is a directory", tool, c->path);
    if (ft != GBX_FT_FILE)
        return done_err(c, "%s: %s is not a regular file", tool, c->path);
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_tool_size_check(&c->tc, size, &err) < 0)
        return done_text(c, err->msg, 1);
    /* (one byte more than the size stat saw: a file that grew meanwhile is caught by the cap) */
    uint64_t want = size + 1;
    c->data = evbuffer_new();
    struct gbx_msg *m = gbx_aconn_begin(c->ses->ac, GBX_MSG_READ);
    gbx_msg_put_str(m, GBX_A_PATH, c->path);
    gbx_msg_put_u64(m, GBX_A_LENGTH, want);
    if (gbx_aconn_send(c->ses->ac, read_done, c) < 0)
        done_err(c, "%s: the sandbox's agent went away", tool);
}

static void read_resolved(struct gbx_call *c)
{
    const char *tool = c->tool_name;
    struct gbx_aconn *ac = c->ses->ac;
    struct gbx_msg *m = gbx_aconn_begin(ac, GBX_MSG_STAT);
    gbx_msg_put_str(m, GBX_A_PATH, c->path);
    gbx_msg_put_u32(m, GBX_A_FOLLOW, 1);
    if (gbx_aconn_send(ac, stat_done, c) < 0)
        done_err(c, "%s: the sandbox's agent went away", tool);
}

static void read_start(struct gbx_call *c)
{
    resolve_then(c, c->tc.file_path, c->tc.tool == GBX_TOOL_EDIT ? "edit" : "read", read_resolved);
}

/* ---- write ---------------------------------------------------------------------------------- */

static void write_ckpt_done(struct gbx_call *c)
{
    json_t *r = c->result;
    c->result = NULL;
    gbx_session_call_done(c, r);
}

static void write_end_done(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_call *c = arg;
    if (!final || h == NULL)
        return;
    if (h->type != GBX_MSG_OK) {
        char msg[256];
        agent_error(h, p, msg, sizeof(msg));
        return done_err(c, "%s: cannot write %s: %s",
                        c->tc.tool == GBX_TOOL_EDIT ? "edit" : "write", c->path, msg);
    }
    size_t len = evbuffer_get_length(c->data);
    gbx_autofree char *text = c->tc.tool == GBX_TOOL_EDIT
                                  ? gbx_tool_edit_result(c->path, (size_t)c->step)
                                  : gbx_tool_write_result(c->path, len);
    c->result = gbx_tool_result_text(text, 0);
    gbx_session_ckpt_after(c, c->path, evbuffer_pullup(c->data, -1), len, write_ckpt_done);
}

static void write_opened(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_call *c = arg;
    if (!final || h == NULL)
        return;
    const char *tool = c->tc.tool == GBX_TOOL_EDIT ? "edit" : "write";
    if (h->type != GBX_MSG_OK || gbx_attrs_get_u32(p, h->len, GBX_A_HANDLE, &c->handle) != 1) {
        char msg[256];
        agent_error(h, p, msg, sizeof(msg));
        return done_err(c, "%s: cannot write %s: %s", tool, c->path, msg);
    }
    struct gbx_aconn *ac = c->ses->ac;
    size_t len = evbuffer_get_length(c->data);
    const uint8_t *bytes = evbuffer_pullup(c->data, -1);
    for (size_t off = 0; off < len; off += WRITE_CHUNK) {
        size_t n = len - off < WRITE_CHUNK ? len - off : WRITE_CHUNK;
        struct gbx_msg *m = gbx_aconn_begin(ac, GBX_MSG_WRITE_DATA);
        gbx_msg_put_u32(m, GBX_A_HANDLE, c->handle);
        gbx_aconn_put_data(m, bytes + off, NULL, n);
        (void)gbx_aconn_send(ac, NULL, NULL); /* a failure shows in WRITE_END's reply */
    }
    struct gbx_msg *m = gbx_aconn_begin(ac, GBX_MSG_WRITE_END);
    gbx_msg_put_u32(m, GBX_A_HANDLE, c->handle);
    gbx_msg_put_u32(m, GBX_A_COMMIT, 1);
    if (gbx_aconn_send(ac, write_end_done, c) < 0)
        done_err(c, "%s: the sandbox's agent went away", tool);
}

static void write_begin(struct gbx_call *c, const uint8_t *data, size_t len)
{
    if (c->data)
        evbuffer_free(c->data);
    c->data = evbuffer_new();
    evbuffer_add(c->data, data, len);
    struct gbx_msg *m = gbx_aconn_begin(c->ses->ac, GBX_MSG_WRITE);
    gbx_msg_put_str(m, GBX_A_PATH, c->path);
    gbx_msg_put_u32(m, GBX_A_MODE, 0644);
    gbx_msg_put_u32(m, GBX_A_WFLAGS, GBX_W_CREATE | GBX_W_TRUNC | GBX_W_ATOMIC | GBX_W_PARENTS);
    if (gbx_aconn_send(c->ses->ac, write_opened, c) < 0)
        done_err(c, "write: the sandbox's agent went away");
}

static void write_resolved(struct gbx_call *c)
{
    write_begin(c, (const uint8_t *)c->tc.content, c->tc.content_len);
}

static void write_start(struct gbx_call *c)
{
    resolve_then(c, c->tc.file_path, "write", write_resolved);
}

/* ---- glob ----------------------------------------------------------------------------------- */

struct glob_hits {
    struct gbx_tool_glob *pat; /* compiled once for the walk */
    struct gbx_tool_glob_hit *v;
    size_t n, cap, walked;
};

static void glob_entry(struct gbx_call *c, struct glob_hits *g, const uint8_t *p, size_t len)
{
    char name[4096];
    uint32_t ft = 0;
    uint64_t mt = 0;
    if (gbx_attrs_get_str(p, len, GBX_A_NAME, name, sizeof(name)) != 1)
        return;
    (void)gbx_attrs_get_u32(p, len, GBX_A_FTYPE, &ft);
    (void)gbx_attrs_get_u64(p, len, GBX_A_MTIME_NS, &mt);
    if (++g->walked > GLOB_WALK_MAX || ft == GBX_FT_DIR || !gbx_tool_glob_test(g->pat, name))
        return;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->v = gbx_xrealloc(g->v, g->cap * sizeof(*g->v));
    }
    g->v[g->n].path = gbx_xstrdup(name);
    g->v[g->n].mtime_ns = (int64_t)mt;
    g->n++;
}

static void glob_reply(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_call *c = arg;
    struct glob_hits *g = (struct glob_hits *)(void *)c->data; /* see glob_start */
    if (!final) {
        struct gbx_attr_iter it;
        struct gbx_attr a;
        if (h == NULL || h->type != GBX_EV_DIRENT)
            return;
        gbx_attr_iter_init(&it, p, h->len);
        while (gbx_attr_next(&it, &a) == 1)
            if (a.tag == GBX_A_ENTRY)
                glob_entry(c, g, a.data, a.len);
        return;
    }
    c->data = NULL;
    if (h != NULL) {
        if (h->type != GBX_MSG_OK) {
            char msg[256];
            agent_error(h, p, msg, sizeof(msg));
            done_err(c, "glob: cannot list %s: %s", c->path, msg);
        } else {
            gbx_autofree char *text = gbx_tool_glob_result(c->path, g->v, g->n);
            done_text(c, text, 0);
        }
    }
    for (size_t i = 0; i < g->n; i++)
        free((void *)(uintptr_t)g->v[i].path);
    free(g->v);
    gbx_tool_glob_free(g->pat);
    free(g);
}

static void glob_resolved(struct gbx_call *c)
{
    gbx_autoerr struct gbx_err *err = NULL;
    struct gbx_aconn *ac = c->ses->ac;
    /* the hits ride in c->data's slot (an opaque pointer) until the reply */
    struct glob_hits *g = gbx_xcalloc(1, sizeof(*g));
    if ((g->pat = gbx_tool_glob_new(c->tc.pattern, &err)) == NULL) {
        free(g);
        return done_text(c, err->msg, 1);
    }
    c->data = (struct evbuffer *)(void *)g;
    struct gbx_msg *m = gbx_aconn_begin(ac, GBX_MSG_LIST);
    gbx_msg_put_str(m, GBX_A_PATH, c->path);
    gbx_msg_put_u32(m, GBX_A_DEPTH, GLOB_DEPTH);
    if (gbx_aconn_send(ac, glob_reply, c) < 0) {
        c->data = NULL;
        gbx_tool_glob_free(g->pat);
        free(g);
        done_err(c, "glob: the sandbox's agent went away");
    }
}

static void glob_start(struct gbx_call *c)
{
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_tool_glob_check(c->tc.pattern, &err) < 0)
        return done_text(c, err->msg, 1);
    resolve_then(c, c->tc.path, "glob", glob_resolved);
}

/* ---- grep ----------------------------------------------------------------------------------- */

static void grep_spawned(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct gbx_call *c = arg;
    if (!final || h == NULL)
        return;
    if (h->type != GBX_MSG_OK || gbx_attrs_get_u32(p, h->len, GBX_A_PROC, &c->proc) != 1) {
        char msg[256];
        agent_error(h, p, msg, sizeof(msg));
        done_err(c, "grep: cannot run grep: %s", msg);
    }
}

static void grep_resolved(struct gbx_call *c)
{
    struct gbx_aconn *ac = c->ses->ac;
    c->data = evbuffer_new();
    struct gbx_msg *m = gbx_aconn_begin(ac, GBX_MSG_SPAWN);
    static const char *const argv[] = {"grep",
                                       "-rnEs",
                                       "--binary-files=without-match",
                                       "--exclude-dir=.git",
                                       "--exclude-dir=node_modules",
                                       "-e"};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(argv); i++)
        gbx_msg_put_str(m, GBX_A_ARGV, argv[i]);
    gbx_msg_put_str(m, GBX_A_ARGV, c->tc.pattern);
    gbx_msg_put_str(m, GBX_A_ARGV, "--");
    gbx_msg_put_str(m, GBX_A_ARGV, c->path);
    gbx_msg_put_str(m, GBX_A_CWD, c->ses->workdir);
    if (gbx_aconn_send(ac, grep_spawned, c) < 0)
        done_err(c, "grep: the pattern is too long");
}

static void grep_start(struct gbx_call *c)
{
    resolve_then(c, c->tc.path, "grep", grep_resolved);
}

static void grep_exit(struct gbx_call *c, uint32_t code)
{
    size_t len = evbuffer_get_length(c->data);
    const uint8_t *raw = evbuffer_pullup(c->data, -1);
    if (code == 2 && c->step == 0) {
        gbx_autofree char *m = gbx_asprintf("grep: %.*s", (int)(len > 2000 ? 2000 : len),
                                            raw ? (const char *)raw : "failed");
        return done_text(c, m, 1);
    }
    gbx_autofree char *text = gbx_tool_grep_result(raw, len);
    done_text(c, text, 0);
}

/* ---- events ---------------------------------------------------------------------------------- */

void gbx_session_tool_event(struct gbx_session *ses, const struct gbx_frame_hdr *h,
                            const uint8_t *p)
{
    struct gbx_call *c = ses->busy ? ses->queue : NULL;
    struct gbx_attr a;
    int out = h->type == GBX_EV_STDOUT || h->type == GBX_EV_STDERR;
    if (h->id == ses->shell && ses->shell) {
        int bash = c && c->parsed && c->tc.tool == GBX_TOOL_BASH && c->bout && ses->ckpt == NULL;
        if (out && bash && gbx_attrs_find(p, h->len, GBX_A_DATA, &a) == 1) {
            int status = 0;
            if (gbx_tool_bash_out_feed(c->bout, a.data, a.len, &status) == 1)
                bash_finish(c, status, NULL);
        } else if (h->type == GBX_EV_EXIT) {
            ses->shell = 0;
            if (bash)
                bash_finish(c, -1, "bash session terminated");
        }
        return;
    }
    if (c == NULL || !c->parsed || c->tc.tool != GBX_TOOL_GREP || h->id != c->proc || !c->proc)
        return;
    if (h->type == GBX_EV_STDOUT && gbx_attrs_find(p, h->len, GBX_A_DATA, &a) == 1) {
        if (evbuffer_get_length(c->data) + a.len <= GREP_RAW_MAX)
            evbuffer_add(c->data, a.data, a.len);
        else if (!c->step) { /* enough: the rest would be cut anyway */
            c->step = 1;
            struct gbx_msg *m = gbx_aconn_begin(ses->ac, GBX_MSG_SIGNAL);
            gbx_msg_put_u32(m, GBX_A_PROC, c->proc);
            gbx_msg_put_u32(m, GBX_A_SIGNO, SIGKILL);
            (void)gbx_aconn_send(ses->ac, NULL, NULL);
        }
    } else if (h->type == GBX_EV_STDERR && gbx_attrs_find(p, h->len, GBX_A_DATA, &a) == 1) {
        if (evbuffer_get_length(c->data) < 4096 && !c->step)
            evbuffer_add(c->data, a.data, a.len < 2048 ? a.len : 2048);
    } else if (h->type == GBX_EV_EXIT) {
        uint32_t code = 0;
        if (gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_CODE, &code) != 1)
            code = c->step ? 0 : 2;
        c->proc = 0;
        grep_exit(c, code);
    }
}

void gbx_session_tool_lost(struct gbx_call *c)
{
    if (c->timer)
        evtimer_del(c->timer);
    done_text(c,
              "the sandbox went away during the call (killed, out of memory, or its init "
              "died); the next call starts a new one with the workspace restored",
              1);
}

void gbx_session_tool_start(struct gbx_call *c)
{
    switch (c->tc.tool) {
    case GBX_TOOL_BASH:
        return bash_start(c);
    case GBX_TOOL_READ:
    case GBX_TOOL_EDIT:
        return read_start(c);
    case GBX_TOOL_WRITE:
        return write_start(c);
    case GBX_TOOL_GLOB:
        return glob_start(c);
    case GBX_TOOL_GREP:
        return grep_start(c);
    }
    done_err(c, "unknown tool");
}
