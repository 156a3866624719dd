/* SPDX-License-Identifier: MIT */
/* Sessions: registry, routes, the execute queue and the event log (see sessions.h).
 *
 * Execute, for one session, runs one call at a time in arrival order (the persistent shell
 * can run one command at once, and a harness expects its calls in order). A call is
 * recorded (tool.call) before it runs and its result (tool.result) before anyone is answered,
 * each durable against a daemon crash; a retry with the same tool_use_id gets the stored
 * result without running anything, and a duplicate that arrives while the call runs waits for
 * it. A tool's failure is a result with is_error, never an HTTP error.
 *
 * The session's sandbox is looked up by id at every call; when it is gone (killed, OOM, a
 * crashed init, a host reboot), the call first creates a new one from the session's create
 * request, restores the workspace from the checkpoint taken after the last mutating call
 * (session/ckpt.c), records sandbox.replaced and says so in the result. */
#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <time.h>

#include "core/hibernate.h"
#include "http/http.h"
#include "http/recorded.h"
#include "core/offload.h"
#include "core/sandboxes.h"
#include "session/sessions_int.h"
#include "base/fault.h"
#include "base/clock.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/query.h"
#include "store/store.h"

#define DEFAULT_WORKDIR "/workspace"
#define TOOL_USE_ID_MAX 256

static void run_next(struct gbx_session *ses);

static char *new_id(void)
{
    uint8_t r[6];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        GBX_BUG_ON(1);
    return gbx_asprintf("ses-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
}

static int id_valid(const char *id)
{
    if (strncmp(id, "ses-", 4) != 0 || strlen(id) != 16)
        return 0;
    for (const char *p = id + 4; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

static struct gbx_store *store_of(const struct gbx_session *ses)
{
    return gbx_server_store(ses->all->srv);
}

/* ---- the log --------------------------------------------------------------------------------- */

static json_t *event_json(const struct gbx_store_event *ev)
{
    json_t *data = json_loads(ev->data, 0, NULL);
    gbx_autofree char *ts = gbx_rfc3339(ev->ts_ns);
    json_t *j = json_pack("{s:I,s:s,s:s,s:o,s:s}", "seq", (json_int_t)ev->seq, "time", ts, "type",
                          ev->type, "data", data ? data : json_object(), "hash", ev->hash);
    if (ev->tool_use_id)
        json_object_set_new(j, "tool_use_id", json_string(ev->tool_use_id));
    return j;
}

static void stream_send(struct gbx_stream *st, json_t *ev)
{
    if (st->req == NULL)
        return; /* its client left */
    char *t = json_dumps(ev, JSON_COMPACT);
    if (t == NULL)
        return;
    struct evbuffer *b = evbuffer_new();
    GBX_BUG_ON(b == NULL);
    if (st->sse)
        evbuffer_add_printf(b, "id: %lld\ndata: %s\n\n",
                            (long long)json_integer_value(json_object_get(ev, "seq")), t);
    else
        evbuffer_add_printf(b, "%s\n", t);
    free(t);
    evhttp_send_reply_chunk(st->req, b);
    evbuffer_free(b);
}

static int push_one(void *arg, const struct gbx_store_event *ev)
{
    struct gbx_session *ses = arg;
    json_t *j = event_json(ev);
    for (struct gbx_stream *st = ses->streams; st; st = st->next)
        stream_send(st, j);
    json_decref(j);
    return 0;
}

int gbx_session_log(struct gbx_session *ses, const char *type, const char *tool_use_id,
                    json_t *data, struct gbx_err **err)
{
    char *text = json_dumps(data ? data : json_object(), JSON_COMPACT);
    json_decref(data);
    if (text == NULL)
        return gbx_err_set(err, EINVAL, GBX_ERR_INTERNAL, "event is not JSON");
    int64_t seq = 0;
    int r = gbx_store_session_append(store_of(ses), ses->id, type, tool_use_id, text, &seq, err);
    free(text);
    if (r < 0)
        return -1;
    ses->last_ns = gbx_realtime_ns();
    if (ses->streams) {
        gbx_autoerr struct gbx_err *e2 = NULL;
        (void)!gbx_store_session_events(store_of(ses), ses->id, seq - 1, 1, push_one, ses, &e2);
    }
    return 0;
}

/* ---- the agent ----------------------------------------------------------------------------- */

/* The session's sandbox: found by its id and its owner, the session's (a queued call or a
 * reply runs long after the request that asked for it). */
static struct gbx_live *live_of(struct gbx_session *ses)
{
    struct gbx_live *l =
        ses->sandbox_id ? gbx_sandboxes_find_any(ses->all->srv, ses->sandbox_id) : NULL;
    return l && strcmp(l->owner, ses->owner) == 0 ? l : NULL;
}

static void on_agent_event(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    gbx_session_tool_event(arg, h, p);
}

static void on_agent_close(void *arg, const char *why)
{
    struct gbx_session *ses = arg;
    gbx_log_info("session '%s': agent connection lost: %s", ses->id, why);
    struct gbx_aconn *ac = ses->ac;
    ses->ac = NULL;
    ses->shell = 0;
    if (ses->busy && ses->queue && ses->ckpt == NULL)
        gbx_session_tool_lost(ses->queue);
    gbx_aconn_free(ac);
}

struct gbx_aconn *gbx_session_agent(struct gbx_session *ses, struct gbx_err **err)
{
    if (ses->ac && !gbx_aconn_lost(ses->ac))
        return ses->ac;
    gbx_session_drop_agent(ses);
    struct gbx_live *l = live_of(ses);
    if (l == NULL) {
        gbx_err_set(err, ENOENT, GBX_ERR_UNAVAILABLE, "the session's sandbox is gone");
        return NULL;
    }
    if (gbx_aconn_open(ses->all->base, l->sb, on_agent_event, on_agent_close, ses, &ses->ac, err) <
        0)
        return NULL;
    return ses->ac;
}

void gbx_session_drop_agent(struct gbx_session *ses)
{
    if (ses->ac)
        gbx_aconn_free(ses->ac);
    ses->ac = NULL;
    ses->shell = 0;
}

/* The environment every tool process starts with: the sandbox's (the egress CA bundle's
 * variables among them), minus ANTHROPIC_*, plus a plain prompt and terminal. */
json_t *gbx_session_env(struct gbx_session *ses)
{
    json_t *env = json_object();
    struct gbx_live *l = live_of(ses);
    const char *k;
    json_t *v;
    if (l && l->env)
        json_object_foreach(l->env, k, v)
        {
            if (strncmp(k, "ANTHROPIC_", 10) != 0)
                json_object_set(env, k, v);
        }
    json_object_set_new(env, "PS1", json_string(""));
    json_object_set_new(env, "PS2", json_string(""));
    json_object_set_new(env, "TERM", json_string("dumb"));
    return env;
}

/* ---- calls ----------------------------------------------------------------------------------- */

static void call_free(struct gbx_call *c)
{
    free(c->tool_use_id);
    free(c->name);
    json_decref(c->input);
    free(c->parse_error);
    free(c->path);
    if (c->data)
        evbuffer_free(c->data);
    gbx_tool_bash_out_free(c->bout);
    if (c->timer)
        event_free(c->timer);
    free(c->note);
    json_decref(c->result);
    while (c->waiters) {
        struct gbx_waiter *w = c->waiters;
        c->waiters = w->next;
        free(w);
    }
    free(c);
}

static void reply_result(struct evhttp_request *req, json_t *result, int replayed)
{
    if (replayed)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Glovebox-Replayed", "true");
    gbx_http_reply_json(req, 200, json_incref(result));
}

/* Answer every request waiting for c (its result, or err), and run the next call. */
static void answer(struct gbx_call *c, const struct gbx_err *err)
{
    struct gbx_session *ses = c->ses;
    while (c->waiters) {
        struct gbx_waiter *w = c->waiters;
        c->waiters = w->next;
        if (err)
            gbx_http_reply_err(w->req, err);
        else
            reply_result(w->req, c->result, 0);
        free(w);
    }
    ses->queue = c->next;
    if (ses->queue == NULL)
        ses->queue_tail = NULL;
    ses->busy = 0;
    call_free(c);
    run_next(ses);
}

/* A result is recorded before anyone is answered: one that cannot be is not answered as if
 * it were (a retry would run the call again) */
static void finish(struct gbx_call *c)
{
    struct gbx_session *ses = c->ses;
    int64_t ms = (gbx_monotonic_ns() - c->t0) / 1000000;
    json_t *data = json_deep_copy(c->result);
    json_object_set_new(data, "duration_ms", json_integer(ms));
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_session_log(ses, "tool.result", c->tool_use_id, data, &err) < 0) {
        gbx_log_error("session '%s': cannot record the result of '%s': %s", ses->id, c->tool_use_id,
                      err->msg);
        gbx_err_wrap(&err,
                     "call '%s' ran, but its result could not be recorded (a retry runs it "
                     "again)",
                     c->tool_use_id);
    }
    gbx_fault_point("session.result_recorded");
    answer(c, err);
}

static void after_ckpt(struct gbx_call *c)
{
    finish(c);
}

void gbx_session_call_done(struct gbx_call *c, json_t *result)
{
    struct gbx_session *ses = c->ses;
    if (c->note || ses->replaced_note) {
        json_t *content = json_object_get(result, "content");
        const char *why = c->note ? c->note
                                  : "The session's sandbox was gone: a new one was started, "
                                    "the workspace was restored from the last checkpoint, and "
                                    "the shell restarted (its variables and directory are "
                                    "reset).";
        json_array_insert_new(content, 0, json_pack("{s:s,s:s}", "type", "text", "text", why));
        ses->replaced_note = 0;
    }
    c->result = result;
    if (c->parsed && gbx_tool_mutates(c->tc.tool) && c->tc.tool == GBX_TOOL_BASH &&
        !c->tc.restart && live_of(ses))
        gbx_session_ckpt_after(c, NULL, NULL, 0, after_ckpt);
    else
        finish(c);
}

/* Answer the call now (nothing to run): a bad input, or a sandbox that cannot be had. */
static void call_fail(struct gbx_call *c, const char *msg)
{
    gbx_session_call_done(c, gbx_tool_result_text(msg, 1));
}

static int create_sandbox(struct gbx_session *ses, struct gbx_err **err);

static void after_restore(struct gbx_call *c, int ok)
{
    if (!ok)
        return call_fail(c, "the session's sandbox was replaced, but its workspace could not "
                            "be restored");
    gbx_session_tool_start(c);
}

static void woken(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    (void)l;
    struct gbx_call *c = arg;
    if (err) {
        gbx_autofree char *m = gbx_asprintf("cannot wake the session's sandbox: %s", err->msg);
        return call_fail(c, m);
    }
    gbx_session_drop_agent(c->ses); /* a new init: connect again */
    gbx_session_tool_start(c);
}

static void run_next(struct gbx_session *ses)
{
    struct gbx_call *c = ses->queue;
    if (c == NULL || ses->busy || ses->deleting)
        return;
    ses->busy = 1;
    c->t0 = gbx_monotonic_ns();
    gbx_autoerr struct gbx_err *err = NULL;
    json_t *call = json_pack("{s:s,s:O}", "name", c->name, "input", c->input);
    if (gbx_session_log(ses, "tool.call", c->tool_use_id, call, &err) < 0) {
        /* a call is recorded before it runs: one that cannot be does not run */
        gbx_log_error("session '%s': cannot record call '%s': %s", ses->id, c->tool_use_id,
                      err->msg);
        gbx_err_wrap(&err, "call '%s' was not run: it could not be recorded", c->tool_use_id);
        return answer(c, err);
    }
    gbx_fault_point("session.call_recorded");
    if (!c->parsed)
        return call_fail(c, c->parse_error);
    if (live_of(ses) == NULL) {
        char *old = ses->sandbox_id ? gbx_xstrdup(ses->sandbox_id) : NULL;
        gbx_session_drop_agent(ses);
        gbx_autoerr struct gbx_err *e2 = NULL;
        if (create_sandbox(ses, &e2) < 0) {
            free(old);
            gbx_autofree char *m = gbx_asprintf("the session's sandbox is gone and a new one "
                                                "could not be started: %s",
                                                e2->msg);
            return call_fail(c, m);
        }
        if (gbx_session_log(ses, "sandbox.replaced", NULL,
                            json_pack("{s:s?,s:s}", "old", old, "new", ses->sandbox_id),
                            &err) < 0) {
            /* the log says what the call ran in: a call whose sandbox is not in it is not run */
            free(old);
            gbx_err_wrap(&err,
                         "call '%s' was not run: the replacement of the session's sandbox "
                         "could not be recorded",
                         c->tool_use_id);
            return answer(c, err);
        }
        gbx_log_info("session '%s': sandbox '%s' replaced by '%s'", ses->id, old ? old : "-",
                     ses->sandbox_id);
        free(old);
        ses->replaced_note = 1;
        return gbx_session_ckpt_restore(c, after_restore);
    }
    struct gbx_live *l = live_of(ses);
    if (l->hibernated) /* a call wakes its sandbox: its processes and memory come back */
        return gbx_hibernate_wake(ses->all->srv, &ses->as, l, woken, c);
    if (l->paused) { /* and thaws a paused one: a tool on a frozen sandbox would hang */
        gbx_autoerr struct gbx_err *e3 = NULL;
        if (gbx_sandboxes_pause(ses->all->srv, &ses->as, l, 0, &e3) < 0) {
            gbx_autofree char *m = gbx_asprintf("cannot resume the session's sandbox: %s", e3->msg);
            return call_fail(c, m);
        }
    }
    gbx_session_tool_start(c);
}

/* ---- sessions ------------------------------------------------------------------------------- */

static int visible(struct gbx_sessions *all, const struct gbx_actor *who,
                   const struct gbx_session *ses)
{
    return gbx_actor_sees(who, ses->owner);
}

static struct gbx_session *find(struct gbx_sessions *all, const struct gbx_actor *who,
                                const char *id)
{
    for (struct gbx_session *s = all->list; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return visible(all, who, s) ? s : NULL;
    return NULL;
}

static json_t *session_json(struct gbx_session *ses)
{
    gbx_autofree char *created = gbx_rfc3339(ses->created_ns);
    struct gbx_live *l = live_of(ses);
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:o}", "id", ses->id, "created_at", created, "workdir",
                          ses->workdir, "state", "active", "sandbox_id",
                          l ? json_string(ses->sandbox_id) : json_null());
    json_object_set_new(j, "spec", json_incref(ses->spec));
    size_t n = 0;
    for (struct gbx_call *c = ses->queue; c; c = c->next)
        n++;
    json_object_set_new(j, "queued", json_integer((json_int_t)n));
    return j;
}

static int store_session(struct gbx_session *ses, struct gbx_err **err)
{
    gbx_autofree char *spec = json_dumps(ses->spec, JSON_COMPACT | JSON_SORT_KEYS);
    struct gbx_store_session row = {.id = ses->id,
                                    .owner = ses->owner,
                                    .spec = spec,
                                    .workdir = ses->workdir,
                                    .sandbox = ses->sandbox_id,
                                    .state = "active",
                                    .created_ns = ses->created_ns};
    return gbx_store_session_put(store_of(ses), &row, err);
}

/* A new sandbox for the session, from its create request; recorded. */
/* The create body of a session's sandbox: its spec, labelled with the session. */
static json_t *sandbox_body(const struct gbx_session *ses)
{
    json_t *body = json_deep_copy(ses->spec);
    json_object_del(body, "workdir");
    json_t *labels = json_object_get(body, "labels");
    if (!json_is_object(labels)) {
        labels = json_object();
        json_object_set_new(body, "labels", labels);
    }
    json_object_set_new(labels, "glovebox-session", json_string(ses->id + 4)); /* hex part */
    return body;
}

/* The session has its sandbox l: recorded in its row and its log. */
static int sandbox_taken(struct gbx_session *ses, struct gbx_live *l, struct gbx_err **err)
{
    free(ses->sandbox_id);
    ses->sandbox_id = gbx_xstrdup(l->sb->id);
    if (store_session(ses, err) < 0)
        return -1;
    return gbx_session_log(ses, "sandbox.started", NULL,
                           json_pack("{s:s}", "sandbox", ses->sandbox_id), err);
}

static int create_sandbox(struct gbx_session *ses, struct gbx_err **err)
{
    json_t *body = sandbox_body(ses);
    struct gbx_live *l = NULL;
    /* made for the session's owner: a queued call that finds its sandbox gone runs long
     * after the request that queued it */
    int r = gbx_sandboxes_create(ses->all->srv, &ses->as, body, &l, err);
    json_decref(body);
    if (r < 0)
        return -1;
    return sandbox_taken(ses, l, err);
}

static void session_unlink(struct gbx_session *ses)
{
    struct gbx_session **pp = &ses->all->list;
    while (*pp && *pp != ses)
        pp = &(*pp)->next;
    if (*pp)
        *pp = ses->next;
}

static void session_free(struct gbx_session *ses)
{
    while (ses->streams) {
        struct gbx_stream *st = ses->streams;
        ses->streams = st->next;
        if (st->req) {
            evhttp_connection_set_closecb(evhttp_request_get_connection(st->req), NULL, NULL);
            evhttp_send_reply_end(st->req);
        }
        free(st);
    }
    while (ses->queue) {
        struct gbx_call *c = ses->queue;
        ses->queue = c->next;
        while (c->waiters) {
            struct gbx_waiter *w = c->waiters;
            c->waiters = w->next;
            gbx_http_reply_error(w->req, GBX_ERR_UNAVAILABLE, "the session was deleted");
            free(w);
        }
        call_free(c);
    }
    gbx_session_drop_agent(ses);
    gbx_session_ckpt_free(ses);
    free(ses->id);
    free(ses->owner);
    free(ses->workdir);
    free(ses->sandbox_id);
    json_decref(ses->spec);
    free(ses);
}

static struct gbx_session *session_new(struct gbx_sessions *all, const char *id, const char *owner,
                                       const char *workdir, json_t *spec, int64_t created_ns)
{
    struct gbx_session *ses = gbx_xcalloc(1, sizeof(*ses));
    ses->all = all;
    ses->id = gbx_xstrdup(id);
    ses->owner = gbx_xstrdup(owner);
    gbx_actor_for(&ses->as, owner);
    ses->workdir = gbx_xstrdup(workdir);
    ses->spec = spec;
    ses->created_ns = created_ns;
    ses->ckpt_dir = gbx_asprintf("%s/sessions/%s/workspace", all->state_dir, id);
    ses->next = all->list;
    all->list = ses;
    return ses;
}

/* A session create on its way: its sandbox is made off the loop, then its workdir. */
struct create_ctx {
    struct gbx_sessions *all;
    struct gbx_http_later *later;
    char *id;
    struct gbx_actor as; /* the session's owner */
};

/* by id alone: the request was checked when it came, and the actor now may be anyone */
static struct gbx_session *find_by_id(struct gbx_sessions *all, const char *id)
{
    for (struct gbx_session *x = all->list; x; x = x->next)
        if (strcmp(x->id, id) == 0)
            return x;
    return NULL;
}

static void create_ctx_free(struct create_ctx *m)
{
    free(m->id);
    free(m);
}

static void created_reply(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct create_ctx *m = arg;
    if (!final)
        return;
    struct gbx_session *ses = find_by_id(m->all, m->id);
    struct evhttp_request *req = gbx_http_later_take(m->later);
    int ok = ses && h && h->type == GBX_MSG_OK;
    if (ses && ok && req) { /* answered once the record is durable (api/audit.c) */
        gbx_http_reply_recorded(m->all->srv, ses->as.name, "session.create", ses->sandbox_id,
                                json_pack("{s:s}", "session", ses->id), req, 201,
                                session_json(ses));
        return create_ctx_free(m);
    }
    if (ses)
        gbx_server_audit(m->all->srv, &ses->as, "session.create", ses->sandbox_id,
                         json_pack("{s:s}", "session", ses->id));
    if (req == NULL)
        ; /* the client left: the session is there for a list to find */
    else if (ses == NULL)
        gbx_http_reply_error(req, GBX_ERR_UNAVAILABLE, "the session was deleted");
    else if (h == NULL || h->type != GBX_MSG_OK)
        gbx_http_reply_error(req, GBX_ERR_INTERNAL, "cannot create the workdir '%s'", ses->workdir);
    else
        gbx_http_reply_json(req, 201, session_json(ses));
    create_ctx_free(m);
}

/* A session that could not be set up goes again (its sandbox too, if it got one). */
static void create_undo(struct gbx_session *ses)
{
    if (ses->sandbox_id) {
        struct gbx_live *l = live_of(ses);
        if (l)
            (void)gbx_sandboxes_destroy(ses->all->srv, &ses->as, l, "sandbox.delete", NULL, NULL);
    }
    (void)!gbx_store_session_delete(store_of(ses), ses->id, NULL);
    session_unlink(ses);
    session_free(ses);
}

static void sandbox_made(void *arg, struct gbx_live *l, int existed, const struct gbx_err *cerr)
{
    (void)existed;
    struct create_ctx *m = arg;
    struct gbx_sessions *all = m->all;
    struct gbx_session *ses = find_by_id(all, m->id);
    struct gbx_err *err = NULL;
    if (ses == NULL) { /* deleted while its sandbox was made: that goes too */
        if (l)
            (void)gbx_sandboxes_destroy(all->srv, &m->as, l, "sandbox.delete", NULL, NULL);
        struct evhttp_request *req = gbx_http_later_take(m->later);
        if (req)
            gbx_http_reply_error(req, GBX_ERR_UNAVAILABLE, "the session was deleted");
        return create_ctx_free(m);
    }
    if (l == NULL || sandbox_taken(ses, l, &err) < 0) {
        if (l && ses->sandbox_id == NULL)
            (void)gbx_sandboxes_destroy(all->srv, &ses->as, l, "sandbox.delete", NULL, NULL);
        struct evhttp_request *req = gbx_http_later_take(m->later);
        if (req)
            gbx_http_reply_err(req, err ? err : cerr);
        gbx_err_free(err);
        create_undo(ses);
        return create_ctx_free(m);
    }
    /* the workdir exists before the first call */
    struct gbx_aconn *ac = gbx_session_agent(ses, &err);
    if (ac == NULL) {
        gbx_server_audit(all->srv, &ses->as, "session.create", ses->sandbox_id,
                         json_pack("{s:s}", "session", ses->id));
        struct evhttp_request *req = gbx_http_later_take(m->later);
        if (req)
            gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return create_ctx_free(m);
    }
    struct gbx_msg *msg = gbx_aconn_begin(ac, GBX_MSG_MKDIR);
    gbx_msg_put_str(msg, GBX_A_PATH, ses->workdir);
    gbx_msg_put_u32(msg, GBX_A_PARENTS, 1);
    if (gbx_aconn_send(ac, created_reply, m) < 0)
        created_reply(m, NULL, NULL, 1);
}

static int workdir_valid(const char *w)
{
    return w[0] == '/' && strlen(w) < 1024 && strstr(w, "/../") == NULL &&
           strcmp(w + strlen(w) - (strlen(w) >= 3 ? 3 : 0), "/..") != 0;
}

static void handle_create(struct gbx_sessions *all, const struct gbx_actor *who,
                          struct evhttp_request *req)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    const char *workdir = DEFAULT_WORKDIR;
    json_t *w = json_object_get(body, "workdir");
    if (w && (!json_is_string(w) || !workdir_valid(json_string_value(w)))) {
        json_decref(body);
        return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                    "'workdir' must be an absolute path without '..'");
    }
    if (w)
        workdir = json_string_value(w);
    {
        gbx_autoerr struct gbx_err *qerr = NULL;
        if (gbx_sandboxes_quota_admit(all->srv, who, &(struct gbx_quota_use){.sessions = 1},
                                      &qerr) < 0) {
            json_decref(body);
            return gbx_http_reply_err(req, qerr);
        }
    }
    gbx_autofree char *id = new_id();
    struct gbx_session *ses = session_new(all, id, who->owner, workdir, body, gbx_realtime_ns());
    struct gbx_err *err = NULL;
    if (store_session(ses, &err) < 0 ||
        gbx_session_log(ses, "session.created", NULL, json_pack("{s:O}", "spec", body), &err) < 0) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        create_undo(ses);
        return;
    }
    /* its sandbox is made off the loop (as the session's owner: the caller); the reply
     * comes once it and the workdir are there */
    struct create_ctx *m = gbx_xcalloc(1, sizeof(*m));
    m->all = all;
    m->later = gbx_http_later_new(req);
    m->id = gbx_xstrdup(ses->id);
    m->as = ses->as;
    json_t *sbody = sandbox_body(ses);
    gbx_sandboxes_create_async(all->srv, &ses->as, sbody, sandbox_made, m);
    json_decref(sbody);
}

static void handle_list(struct gbx_sessions *all, const struct gbx_actor *who,
                        struct evhttp_request *req)
{
    json_t *a = json_array();
    for (struct gbx_session *s = all->list; s; s = s->next)
        if (visible(all, who, s))
            json_array_append_new(a, session_json(s));
    gbx_http_reply_json(req, 200, json_pack("{s:o}", "sessions", a));
}

static void rm_tree(void *arg)
{
    (void)!gbx_rm_rf(arg);
}

/* Delete ses: its row first (a session whose row could not be deleted stays, whole: it
 * would come back at the next start), then its sandbox and workspace. req: the client to
 * answer, once the session.delete record is durable (NULL: the collector's, why says why). */
static int delete_session(struct gbx_sessions *all, const struct gbx_actor *who,
                          struct gbx_session *ses, const char *why, struct evhttp_request *req)
{
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_store_session_delete(store_of(ses), ses->id, &err) < 0) {
        gbx_log_error("session '%s': %s", ses->id, err->msg);
        if (req)
            gbx_http_reply_error(req, err->kind, "delete session '%s': %s", ses->id, err->msg);
        return -1;
    }
    struct gbx_live *l = live_of(ses);
    ses->deleting = 1;
    gbx_session_drop_agent(ses);
    if (l) /* torn down off the loop */
        gbx_sandboxes_destroy_bg(all->srv, who, l, "sandbox.delete",
                                 json_pack("{s:s}", "session", ses->id));
    /* the workspace copy may be large: renamed away at once, removed off the loop */
    gbx_autofree char *dir = gbx_asprintf("%s/sessions/%s", all->state_dir, ses->id);
    char *trash = gbx_asprintf("%s/sessions/.trash-%s", all->state_dir, ses->id);
    if (rename(dir, trash) == 0 &&
        gbx_offload_submit(gbx_server_offload(all->srv), rm_tree, free, trash) == 0)
        trash = NULL;
    else
        (void)!gbx_rm_rf(dir);
    free(trash);
    json_t *detail = why ? json_pack("{s:s,s:s}", "session", ses->id, "reason", why)
                         : json_pack("{s:s}", "session", ses->id);
    if (req)
        gbx_http_reply_recorded(all->srv, who->name, "session.delete", NULL, detail, req, 204,
                                NULL);
    else
        gbx_server_audit(all->srv, who, "session.delete", NULL, detail);
    session_unlink(ses);
    session_free(ses);
    return 0;
}

static void handle_delete(struct gbx_sessions *all, const struct gbx_actor *who,
                          struct evhttp_request *req, struct gbx_session *ses)
{
    (void)delete_session(all, who, ses, NULL, req);
}

void gbx_sessions_each_info(struct gbx_sessions *all,
                            void (*fn)(void *arg, const struct gbx_session_info *i), void *arg)
{
    for (struct gbx_session *s = all->list; s; s = s->next) {
        struct gbx_session_info i = {.id = s->id,
                                     .created_ns = s->created_ns,
                                     .last_ns =
                                         s->last_ns > s->created_ns ? s->last_ns : s->created_ns,
                                     .busy = s->busy || s->queue != NULL || s->ckpt != NULL};
        fn(arg, &i);
    }
}

uint64_t gbx_sessions_count(const struct gbx_sessions *all, const char *owner)
{
    uint64_t n = 0;
    for (const struct gbx_session *s = all->list; s; s = s->next)
        n += !s->deleting && strcmp(s->owner, owner) == 0;
    return n;
}

int gbx_sessions_delete(struct gbx_sessions *all, const char *id, const char *why)
{
    for (struct gbx_session *s = all->list; s; s = s->next)
        if (strcmp(s->id, id) == 0) {
            if (s->busy || s->queue || s->ckpt)
                return 0;
            return delete_session(all, &gbx_actor_system, s, why, NULL) == 0;
        }
    return 0;
}

struct events_ctx {
    json_t *events;
    int64_t last;
};

static int event_row(void *arg, const struct gbx_store_event *ev)
{
    struct events_ctx *c = arg;
    json_array_append_new(c->events, event_json(ev));
    c->last = ev->seq;
    return 0;
}

static void stream_closed(struct evhttp_connection *conn, void *arg)
{
    struct gbx_stream *st = arg;
    (void)conn;
    st->req = NULL; /* the session drops it at its next event or end */
}

static void handle_events(struct gbx_sessions *all, struct evhttp_request *req,
                          struct gbx_session *ses)
{
    uint64_t after = 0, limit = 1000;
    int follow = 0;
    const struct gbx_query_param params[] = {
        {.name = "after", .kind = GBX_QUERY_U64, .out = &after, .max = INT64_MAX},
        {.name = "limit", .kind = GBX_QUERY_U64, .out = &limit, .min = 1, .max = 1000},
        {.name = "follow", .kind = GBX_QUERY_BOOL, .out = &follow},
    };
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct gbx_query q = {0};
    gbx_autoerr struct gbx_err *qerr = NULL;
    int bad = gbx_query_parse(&q, query, params, GBX_ARRAY_SIZE(params), 0, &qerr) < 0;
    gbx_query_release(&q);
    if (bad)
        return gbx_http_reply_err(req, qerr);
    const char *accept = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
    int sse = accept && strstr(accept, "text/event-stream");
    if (sse)
        follow = 1;
    struct events_ctx c = {.events = json_array(), .last = (int64_t)after};
    struct gbx_err *err = NULL;
    if (gbx_store_session_events(store_of(ses), ses->id, (int64_t)after,
                                 follow ? 1000000 : (int)limit, event_row, &c, &err) < 0) {
        json_decref(c.events);
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    if (!follow)
        return gbx_http_reply_json(
            req, 200, json_pack("{s:o,s:I}", "events", c.events, "next_after", (json_int_t)c.last));
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    evhttp_add_header(oh, "Content-Type", sse ? "text/event-stream" : "application/x-ndjson");
    evhttp_add_header(oh, "Cache-Control", "no-store");
    evhttp_send_reply_start(req, 200, "OK");
    struct gbx_stream *st = gbx_xcalloc(1, sizeof(*st));
    st->req = req;
    st->sse = sse;
    size_t i;
    json_t *ev;
    json_array_foreach(c.events, i, ev)
    {
        stream_send(st, ev);
    }
    json_decref(c.events);
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, st);
    st->next = ses->streams;
    ses->streams = st;
}

static void handle_verify(struct evhttp_request *req, struct gbx_session *ses)
{
    struct gbx_audit_report rep;
    struct gbx_err *err = NULL;
    if (gbx_store_session_verify(store_of(ses), ses->id, &rep, &err) < 0) {
        gbx_http_reply_err(req, err);
        gbx_err_free(err);
        return;
    }
    json_t *j = json_pack("{s:b,s:I}", "ok", rep.bad_seq == 0, "events", (json_int_t)rep.rows);
    if (rep.bad_seq) {
        json_object_set_new(j, "bad_seq", json_integer(rep.bad_seq));
        json_object_set_new(j, "reason", json_string(rep.reason));
    }
    gbx_http_reply_json(req, 200, j);
}

static struct gbx_call *find_call(struct gbx_session *ses, const char *tuid)
{
    for (struct gbx_call *c = ses->queue; c; c = c->next)
        if (strcmp(c->tool_use_id, tuid) == 0)
            return c;
    return NULL;
}

static void handle_execute(struct gbx_sessions *all, struct evhttp_request *req,
                           struct gbx_session *ses)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"tool_use_id", "name", "input", NULL};
    if (gbx_http_only_fields(req, body, fields, "tool_use_id, name, input") < 0) {
        json_decref(body);
        return;
    }
    const char *tuid = json_string_value(json_object_get(body, "tool_use_id"));
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *input = json_object_get(body, "input");
    if (tuid == NULL || tuid[0] == '\0' || strlen(tuid) > TOOL_USE_ID_MAX || name == NULL ||
        (input && !json_is_object(input))) {
        json_decref(body);
        return gbx_http_reply_error(req, GBX_ERR_INVALID,
                                    "execute needs 'tool_use_id' (1-256 characters), 'name' and "
                                    "'input' (an object)");
    }
    /* a retry: the stored result, nothing runs again */
    gbx_autofree char *stored = gbx_store_session_result(store_of(ses), ses->id, tuid);
    if (stored) {
        json_t *r = json_loads(stored, 0, NULL);
        json_object_del(r, "duration_ms");
        reply_result(req, r, 1);
        json_decref(r);
        json_decref(body);
        return;
    }
    /* a duplicate of a call that is running or queued: wait for it */
    struct gbx_call *c = find_call(ses, tuid);
    if (c) {
        json_t *in = input ? input : json_object();
        if (strcmp(c->name, name) != 0 || !json_equal(c->input, in)) {
            if (!input)
                json_decref(in);
            json_decref(body);
            return gbx_http_reply_error(req, GBX_ERR_CONFLICT,
                                        "tool_use_id '%s' is in use by a different call", tuid);
        }
        if (!input)
            json_decref(in);
        struct gbx_waiter *w = gbx_xcalloc(1, sizeof(*w));
        w->req = req;
        w->next = c->waiters;
        c->waiters = w;
        json_decref(body);
        return;
    }
    c = gbx_xcalloc(1, sizeof(*c));
    c->ses = ses;
    c->tool_use_id = gbx_xstrdup(tuid);
    c->name = gbx_xstrdup(name);
    c->input = input ? json_incref(input) : json_object();
    json_decref(body);
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_tool_parse(c->name, c->input, &c->tc, &err) == 0)
        c->parsed = 1;
    else
        c->parse_error = gbx_xstrdup(err->msg);
    c->waiters = gbx_xcalloc(1, sizeof(*c->waiters));
    c->waiters->req = req;
    if (ses->queue_tail)
        ses->queue_tail->next = c;
    else
        ses->queue = c;
    ses->queue_tail = c;
    run_next(ses);
    (void)all;
}

void gbx_sessions_route(struct gbx_sessions *all, const struct gbx_actor *who,
                        struct evhttp_request *req, const char *path)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (strcmp(path, "/v1/sessions") == 0) {
        if (m == EVHTTP_REQ_POST)
            return handle_create(all, who, req);
        if (m == EVHTTP_REQ_GET)
            return handle_list(all, who, req);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, POST");
        return gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID,
                                           "method not allowed (use GET, POST)");
    }
    const char *rest = path + strlen("/v1/sessions/");
    const char *slash = strchr(rest, '/');
    char id[32];
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n >= sizeof(id))
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no such session");
    memcpy(id, rest, n);
    id[n] = '\0';
    struct gbx_session *ses = id_valid(id) ? find(all, who, id) : NULL;
    if (ses == NULL)
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no session '%s'", id);
    const char *sub = slash ? slash : "";
    const char *allow = NULL;
    if (sub[0] == '\0') {
        if (m == EVHTTP_REQ_GET)
            return gbx_http_reply_json(req, 200, session_json(ses));
        if (m == EVHTTP_REQ_DELETE)
            return handle_delete(all, who, req, ses);
        allow = "GET, DELETE";
    } else if (strcmp(sub, "/events") == 0) {
        if (m == EVHTTP_REQ_GET)
            return handle_events(all, req, ses);
        allow = "GET";
    } else if (strcmp(sub, "/verify") == 0) {
        if (m == EVHTTP_REQ_GET)
            return handle_verify(req, ses);
        allow = "GET";
    } else if (strcmp(sub, "/execute") == 0) {
        if (m == EVHTTP_REQ_POST)
            return handle_execute(all, req, ses);
        allow = "POST";
    } else {
        return gbx_http_reply_error(req, GBX_ERR_NOT_FOUND, "no route for '%s'", path);
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    gbx_http_reply_error_status(req, 405, GBX_ERR_INVALID, "method not allowed (use %s)", allow);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static int last_ts(void *arg, const struct gbx_store_event *ev)
{
    *(int64_t *)arg = ev->ts_ns;
    return 0;
}

static int64_t last_event_ns(struct gbx_sessions *all, const char *id, int64_t head_seq)
{
    int64_t ts = 0;
    gbx_autoerr struct gbx_err *err = NULL;
    if (head_seq > 0)
        (void)!gbx_store_session_events(gbx_server_store(all->srv), id, head_seq - 1, 1, last_ts,
                                        &ts, &err);
    return ts;
}

static int load_one(void *arg, const struct gbx_store_session *row)
{
    struct gbx_sessions *all = arg;
    json_t *spec = json_loads(row->spec ? row->spec : "{}", 0, NULL);
    if (!json_is_object(spec)) {
        json_decref(spec);
        spec = json_object();
    }
    struct gbx_session *ses = session_new(all, row->id, row->owner ? row->owner : "", row->workdir,
                                          spec, row->created_ns);
    ses->sandbox_id = row->sandbox ? gbx_xstrdup(row->sandbox) : NULL;
    ses->last_ns = last_event_ns(all, row->id, row->head_seq);
    return 0;
}

int gbx_sessions_new(struct gbx_server *srv, struct event_base *base, const char *state_dir,
                     struct gbx_sessions **out, struct gbx_err **err)
{
    struct gbx_sessions *all = gbx_xcalloc(1, sizeof(*all));
    all->srv = srv;
    all->base = base;
    all->state_dir = gbx_xstrdup(state_dir);
    if (gbx_store_session_each(gbx_server_store(srv), load_one, all, err) < 0) {
        gbx_sessions_free(all);
        return -1;
    }
    /* workspace copies of deleted sessions a crash left behind */
    gbx_autofree char *sdir = gbx_asprintf("%s/sessions", state_dir);
    DIR *d = opendir(sdir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, ".trash-", 7) != 0)
            continue;
        char *path = gbx_asprintf("%s/%s", sdir, e->d_name);
        if (gbx_offload_submit(gbx_server_offload(srv), rm_tree, free, path) < 0)
            free(path);
    }
    if (d)
        closedir(d);
    *out = all;
    return 0;
}

size_t gbx_sessions_drain(struct gbx_sessions *all)
{
    size_t n = 0;
    for (struct gbx_session *s = all ? all->list : NULL; s; s = s->next)
        while (s->streams) {
            struct gbx_stream *st = s->streams;
            s->streams = st->next;
            if (st->req) {
                evhttp_connection_set_closecb(evhttp_request_get_connection(st->req), NULL, NULL);
                evhttp_send_reply_end(st->req);
                n++;
            }
            free(st);
        }
    return n;
}

void gbx_sessions_free(struct gbx_sessions *all)
{
    if (all == NULL)
        return;
    gbx_sessions_drain(all);
    while (all->list) {
        struct gbx_session *s = all->list;
        all->list = s->next;
        session_free(s);
    }
    free(all->state_dir);
    free(all);
}

const struct gbx_session_ops gbx_sessions_ops = {
    .free = gbx_sessions_free,
    .count = gbx_sessions_count,
    .each_info = gbx_sessions_each_info,
    .remove = gbx_sessions_delete,
};
