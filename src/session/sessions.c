/* SPDX-License-Identifier: MIT */
/* Sessions: the registry, the execute queue and the event log (see sessions.h).
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
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/clock.h"
#include "base/fault.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/hibernate.h"
#include "core/offload.h"
#include "core/sandboxes.h"
#include "session/sessions_int.h"
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

static struct gbx_store *store_of(const struct gbx_session *ses)
{
    return gbx_server_store(ses->all->srv);
}

/* by id alone: the request was checked when it came, and the actor now may be anyone */
static struct gbx_session *find_by_id(struct gbx_sessions *all, const char *id)
{
    for (struct gbx_session *x = all->list; x; x = x->next)
        if (strcmp(x->id, id) == 0)
            return x;
    return NULL;
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

struct gbx_session_follower {
    struct gbx_session_follower *next;
    struct gbx_session *ses;
    const struct gbx_session_follow_ops *ops;
    void *arg;
};

static int push_one(void *arg, const struct gbx_store_event *ev)
{
    struct gbx_session *ses = arg;
    json_t *j = event_json(ev);
    for (struct gbx_session_follower *f = ses->followers, *next; f; f = next) {
        next = f->next;
        f->ops->event(f->arg, j);
    }
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
    if (ses->followers) {
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

/* Answer every request waiting for c (its result, or err), and run the next call. */
static void answer(struct gbx_call *c, const struct gbx_err *err)
{
    struct gbx_session *ses = c->ses;
    while (c->waiters) {
        struct gbx_waiter *w = c->waiters;
        c->waiters = w->next;
        w->done(w->arg, err ? NULL : c->result, 0, err);
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

/* What a call's job that ends later (a replacement sandbox, a wake) finds it by: the session
 * may be deleted meanwhile, and its calls with it. */
struct call_ticket {
    struct gbx_sessions *all;
    char *sid;
    uint64_t seq;
    struct gbx_actor as; /* the session's owner */
};

static struct call_ticket *ticket_new(struct gbx_call *c)
{
    struct call_ticket *t = gbx_xcalloc(1, sizeof(*t));
    t->all = c->ses->all;
    t->sid = gbx_xstrdup(c->ses->id);
    t->seq = c->seq;
    t->as = c->ses->as;
    return t;
}

/* The call t is for, if its session still runs it (NULL: gone); t is freed. */
static struct gbx_call *ticket_take(struct call_ticket *t)
{
    struct gbx_session *ses = find_by_id(t->all, t->sid);
    struct gbx_call *c =
        ses && ses->busy && ses->queue && ses->queue->seq == t->seq ? ses->queue : NULL;
    free(t->sid);
    free(t);
    return c;
}

static json_t *sandbox_body(const struct gbx_session *ses);
static int sandbox_taken(struct gbx_session *ses, struct gbx_live *l, struct gbx_err **err);

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
    struct gbx_call *c = ticket_take(arg);
    if (c == NULL)
        return; /* its session was deleted: the wake's sandbox went with it */
    if (err) {
        gbx_autofree char *m = gbx_asprintf("cannot wake the session's sandbox: %s", err->msg);
        return call_fail(c, m);
    }
    gbx_session_drop_agent(c->ses); /* a new init: connect again */
    gbx_session_tool_start(c);
}

/* The replacement for a session's sandbox that was gone is made (or not). */
static void replaced(void *arg, struct gbx_live *l, int existed, const struct gbx_err *cerr)
{
    (void)existed;
    struct call_ticket *t = arg;
    struct gbx_server *srv = t->all->srv;
    struct gbx_actor as = t->as;
    struct gbx_call *c = ticket_take(t);
    if (c == NULL) { /* its session was deleted meanwhile: the new sandbox goes too */
        if (l)
            (void)gbx_sandboxes_destroy(srv, &as, l, "sandbox.delete", NULL, NULL);
        return;
    }
    struct gbx_session *ses = c->ses;
    gbx_autofree char *old = ses->sandbox_id ? gbx_xstrdup(ses->sandbox_id) : NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    if (l == NULL || sandbox_taken(ses, l, &err) < 0) {
        gbx_autofree char *m = gbx_asprintf("the session's sandbox is gone and a new one could "
                                            "not be started: %s",
                                            err ? err->msg : cerr->msg);
        return call_fail(c, m);
    }
    if (gbx_session_log(ses, "sandbox.replaced", NULL,
                        json_pack("{s:s?,s:s}", "old", old, "new", ses->sandbox_id), &err) < 0) {
        /* the log says what the call ran in: a call whose sandbox is not in it is not run */
        gbx_err_wrap(&err,
                     "call '%s' was not run: the replacement of the session's sandbox could not "
                     "be recorded",
                     c->tool_use_id);
        return answer(c, err);
    }
    gbx_log_info("session '%s': sandbox '%s' replaced by '%s'", ses->id, old ? old : "-",
                 ses->sandbox_id);
    ses->replaced_note = 1;
    gbx_session_ckpt_restore(c, after_restore);
}

static void run_next(struct gbx_session *ses)
{
    struct gbx_call *c = ses->queue;
    if (c == NULL || ses->busy || ses->deleting || ses->all->stopping)
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
        /* made off the loop for the session's owner: a queued call that finds its sandbox
         * gone runs long after the request that queued it */
        gbx_session_drop_agent(ses);
        json_t *body = sandbox_body(ses);
        gbx_sandboxes_create_async(ses->all->srv, &ses->as, body, replaced, ticket_new(c));
        json_decref(body);
        return;
    }
    struct gbx_live *l = live_of(ses);
    if (l->hibernated) /* a call wakes its sandbox: its processes and memory come back */
        return gbx_hibernate_wake(ses->all->srv, &ses->as, l, woken, ticket_new(c));
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

struct gbx_session *gbx_sessions_find(struct gbx_sessions *all, const struct gbx_actor *who,
                                      const char *id)
{
    struct gbx_session *s = find_by_id(all, id);
    return s && gbx_actor_sees(who, s->owner) ? s : NULL;
}

json_t *gbx_session_json(struct gbx_session *ses)
{
    gbx_autofree char *created = gbx_rfc3339(ses->created_ns);
    struct gbx_live *l = live_of(ses);
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "id", ses->id, "created_at", created,
                          "workdir", ses->workdir, "tools_root", ses->tools_root, "state", "active",
                          "sandbox_id", l ? json_string(ses->sandbox_id) : json_null());
    json_object_set_new(j, "spec", json_incref(ses->spec));
    size_t n = 0;
    for (struct gbx_call *c = ses->queue; c; c = c->next)
        n++;
    json_object_set_new(j, "queued", json_integer((json_int_t)n));
    return j;
}

json_t *gbx_sessions_list(struct gbx_sessions *all, const struct gbx_actor *who)
{
    json_t *a = json_array();
    for (struct gbx_session *s = all->list; s; s = s->next)
        if (gbx_actor_sees(who, s->owner))
            json_array_append_new(a, gbx_session_json(s));
    return a;
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

/* The create body of a session's sandbox: its spec, labelled with the session. */
static json_t *sandbox_body(const struct gbx_session *ses)
{
    json_t *body = json_deep_copy(ses->spec);
    json_object_del(body, "workdir");
    json_object_del(body, "tools_root");
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

static void session_unlink(struct gbx_session *ses)
{
    struct gbx_session **pp = &ses->all->list;
    while (*pp && *pp != ses)
        pp = &(*pp)->next;
    if (*pp)
        *pp = ses->next;
}

/* Its followers' streams end. How many there were. */
static size_t end_followers(struct gbx_session *ses)
{
    size_t n = 0;
    while (ses->followers) {
        struct gbx_session_follower *f = ses->followers;
        ses->followers = f->next;
        f->ops->end(f->arg);
        free(f);
        n++;
    }
    return n;
}

/* What waits on a session that goes is told so. */
static char deleted_msg[] = "the session was deleted";
static const struct gbx_err session_deleted = {
    .errnum = ENOENT, .kind = GBX_ERR_UNAVAILABLE, .msg = deleted_msg};

static void session_free(struct gbx_session *ses)
{
    end_followers(ses);
    while (ses->queue) {
        struct gbx_call *c = ses->queue;
        ses->queue = c->next;
        while (c->waiters) {
            struct gbx_waiter *w = c->waiters;
            c->waiters = w->next;
            w->done(w->arg, NULL, 0, &session_deleted);
            free(w);
        }
        call_free(c);
    }
    gbx_session_drop_agent(ses);
    gbx_session_ckpt_free(ses);
    free(ses->id);
    free(ses->owner);
    free(ses->workdir);
    free(ses->tools_root);
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
    /* checked at create (gbx_sessions_create); a stored spec is one that was */
    const char *root = json_string_value(json_object_get(spec, "tools_root"));
    ses->tools_root = gbx_xstrdup(root ? root : "/");
    ses->spec = spec;
    ses->created_ns = created_ns;
    ses->ckpt_dir = gbx_asprintf("%s/sessions/%s/workspace", all->state_dir, id);
    ses->next = all->list;
    all->list = ses;
    return ses;
}

/* A call's answer once its audit record is durable: body, or an error saying what was done
 * and that its record could not be written. */
struct recorded {
    gbx_session_done_fn done;
    void *arg;
    json_t *body;
    const char *kind;
};

static void recorded_done(void *arg, const struct gbx_err *aerr)
{
    struct recorded *r = arg;
    if (aerr) {
        gbx_autoerr struct gbx_err *err = NULL;
        gbx_server_unrecorded(&err, r->kind, aerr);
        r->done(r->arg, NULL, err);
        json_decref(r->body);
    } else {
        r->done(r->arg, r->body, NULL);
    }
    free(r);
}

/* Record kind as who, then done(arg, body (stolen), ...). */
static void done_recorded(struct gbx_sessions *all, const struct gbx_actor *who, const char *kind,
                          const char *sandbox, json_t *detail, json_t *body,
                          gbx_session_done_fn done, void *arg)
{
    struct recorded *r = gbx_xcalloc(1, sizeof(*r));
    *r = (struct recorded){.done = done, .arg = arg, .body = body, .kind = kind};
    gbx_server_audit_then(all->srv, who->name, kind, sandbox, detail, recorded_done, r);
}

/* A session create on its way: its sandbox is made off the loop, then its workdir. */
struct create_ctx {
    struct gbx_sessions *all;
    gbx_session_done_fn done;
    void *arg;
    char *id;
    struct gbx_actor as; /* the session's owner */
};

static void create_ctx_free(struct create_ctx *m)
{
    free(m->id);
    free(m);
}

static void created_reply(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    (void)p;
    struct create_ctx *m = arg;
    if (!final)
        return;
    struct gbx_session *ses = find_by_id(m->all, m->id);
    json_t *detail = ses ? json_pack("{s:s}", "session", ses->id) : NULL;
    if (ses && h && h->type == GBX_MSG_OK) { /* answered once the record is durable */
        done_recorded(m->all, &ses->as, "session.create", ses->sandbox_id, detail,
                      gbx_session_json(ses), m->done, m->arg);
        return create_ctx_free(m);
    }
    if (ses == NULL) {
        m->done(m->arg, NULL, &session_deleted);
        return create_ctx_free(m);
    }
    /* the session is there (for a list to find); its workdir is not */
    gbx_server_audit(m->all->srv, &ses->as, "session.create", ses->sandbox_id, detail);
    gbx_autoerr struct gbx_err *err = NULL;
    gbx_err_set(&err, EIO, GBX_ERR_INTERNAL, "cannot create the workdir '%s'", ses->workdir);
    m->done(m->arg, NULL, err);
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
    gbx_autoerr struct gbx_err *err = NULL;
    if (ses == NULL) { /* deleted while its sandbox was made: that goes too */
        if (l)
            (void)gbx_sandboxes_destroy(all->srv, &m->as, l, "sandbox.delete", NULL, NULL);
        m->done(m->arg, NULL, &session_deleted);
        return create_ctx_free(m);
    }
    if (l == NULL || sandbox_taken(ses, l, &err) < 0) {
        if (l && ses->sandbox_id == NULL)
            (void)gbx_sandboxes_destroy(all->srv, &ses->as, l, "sandbox.delete", NULL, NULL);
        m->done(m->arg, NULL, err ? err : cerr);
        create_undo(ses);
        return create_ctx_free(m);
    }
    /* the workdir exists before the first call */
    struct gbx_aconn *ac = gbx_session_agent(ses, &err);
    if (ac == NULL) {
        gbx_server_audit(all->srv, &ses->as, "session.create", ses->sandbox_id,
                         json_pack("{s:s}", "session", ses->id));
        m->done(m->arg, NULL, err);
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

int gbx_sessions_create(struct gbx_sessions *all, const struct gbx_actor *who, json_t *spec,
                        gbx_session_done_fn done, void *arg, struct gbx_err **err)
{
    const char *workdir = DEFAULT_WORKDIR;
    json_t *w = json_object_get(spec, "workdir");
    if (w && (!json_is_string(w) || !workdir_valid(json_string_value(w)))) {
        json_decref(spec);
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "'workdir' must be an absolute path without '..'");
    }
    if (w)
        workdir = json_string_value(w);
    json_t *root = json_object_get(spec, "tools_root");
    if (root && (!json_is_string(root) || !workdir_valid(json_string_value(root)))) {
        json_decref(spec);
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "'tools_root' must be an absolute path without '..'");
    }
    if (root && !gbx_tool_path_inside(json_string_value(root), workdir)) {
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                    "'workdir' (%s) must be inside 'tools_root' (%s): the file tools resolve "
                    "relative paths against it",
                    workdir, json_string_value(root));
        json_decref(spec);
        return -1;
    }
    if (gbx_sandboxes_quota_admit(all->srv, who, &(struct gbx_quota_use){.sessions = 1}, err) < 0) {
        json_decref(spec);
        return -1;
    }
    gbx_autofree char *id = new_id();
    struct gbx_session *ses = session_new(all, id, who->owner, workdir, spec, gbx_realtime_ns());
    if (store_session(ses, err) < 0 ||
        gbx_session_log(ses, "session.created", NULL, json_pack("{s:O}", "spec", spec), err) < 0) {
        create_undo(ses);
        return -1;
    }
    /* its sandbox is made off the loop (as the session's owner: the caller); done runs once it
     * and the workdir are there */
    struct create_ctx *m = gbx_xcalloc(1, sizeof(*m));
    *m = (struct create_ctx){
        .all = all, .done = done, .arg = arg, .id = gbx_xstrdup(ses->id), .as = ses->as};
    json_t *sbody = sandbox_body(ses);
    gbx_sandboxes_create_async(all->srv, &ses->as, sbody, sandbox_made, m);
    json_decref(sbody);
    return 0;
}

static void rm_tree(void *arg)
{
    (void)!gbx_rm_rf(arg);
}

/* Delete ses: its row first (a session whose row could not be deleted stays, whole: it
 * would come back at the next start), then its sandbox and workspace. done: called once the
 * session.delete record is durable (NULL: the collector's, why says why). */
static int delete_session(struct gbx_session *ses, const struct gbx_actor *who, const char *why,
                          gbx_session_done_fn done, void *arg, struct gbx_err **err)
{
    struct gbx_sessions *all = ses->all;
    if (gbx_store_session_delete(store_of(ses), ses->id, err) < 0) {
        gbx_log_error("session '%s': %s", ses->id, (*err)->msg);
        return gbx_err_wrap(err, "delete session '%s'", ses->id);
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
    if (done)
        done_recorded(all, who, "session.delete", NULL, detail, NULL, done, arg);
    else
        gbx_server_audit(all->srv, who, "session.delete", NULL, detail);
    session_unlink(ses);
    session_free(ses);
    return 0;
}

int gbx_session_delete(struct gbx_session *ses, const struct gbx_actor *who,
                       gbx_session_done_fn done, void *arg, struct gbx_err **err)
{
    return delete_session(ses, who, NULL, done, arg, err);
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
    struct gbx_session *s = find_by_id(all, id);
    if (s == NULL || s->busy || s->queue || s->ckpt)
        return 0;
    gbx_autoerr struct gbx_err *err = NULL;
    return delete_session(s, &gbx_actor_system, why, NULL, NULL, &err) == 0;
}

/* ---- the log, read ---------------------------------------------------------------------- */

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

json_t *gbx_session_events(struct gbx_session *ses, int64_t after, int limit, int64_t *last,
                           struct gbx_err **err)
{
    struct events_ctx c = {.events = json_array(), .last = after};
    if (gbx_store_session_events(store_of(ses), ses->id, after, limit, event_row, &c, err) < 0) {
        json_decref(c.events);
        return NULL;
    }
    *last = c.last;
    return c.events;
}

struct gbx_session_follower *gbx_session_follow(struct gbx_session *ses,
                                                const struct gbx_session_follow_ops *ops, void *arg)
{
    struct gbx_session_follower *f = gbx_xcalloc(1, sizeof(*f));
    *f = (struct gbx_session_follower){.next = ses->followers, .ses = ses, .ops = ops, .arg = arg};
    ses->followers = f;
    return f;
}

void gbx_session_unfollow(struct gbx_session_follower *f)
{
    for (struct gbx_session_follower **pp = &f->ses->followers; *pp; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    free(f);
}

json_t *gbx_session_verify(struct gbx_session *ses, struct gbx_err **err)
{
    struct gbx_audit_report rep;
    if (gbx_store_session_verify(store_of(ses), ses->id, &rep, err) < 0)
        return NULL;
    json_t *j = json_pack("{s:b,s:I}", "ok", rep.bad_seq == 0, "events", (json_int_t)rep.rows);
    if (rep.bad_seq) {
        json_object_set_new(j, "bad_seq", json_integer(rep.bad_seq));
        json_object_set_new(j, "reason", json_string(rep.reason));
    }
    return j;
}

/* ---- execute ------------------------------------------------------------------------------ */

static struct gbx_call *find_call(struct gbx_session *ses, const char *tuid)
{
    for (struct gbx_call *c = ses->queue; c; c = c->next)
        if (strcmp(c->tool_use_id, tuid) == 0)
            return c;
    return NULL;
}

/* sha256 of a call as canonical JSON ({"input": ..., "name": ...}, keys sorted, compact) */
static void call_hash(const char *name, json_t *input, char out[65])
{
    json_t *j = json_pack("{s:s,s:O}", "name", name, "input", input ? input : json_null());
    gbx_autofree char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(j);
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)text, strlen(text), d);
    for (size_t i = 0; i < sizeof(d); i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* 0 when (name, input) is the call tuid was first used for; else -1 with a CONFLICT saying
 * both calls' hashes (a retry must be the same call: another one would get the first one's
 * result, or wait for it, without a word) */
static int other_call(const char *tuid, const char *was_name, json_t *was_input, const char *name,
                      json_t *input, struct gbx_err **err)
{
    if (strcmp(was_name, name) == 0 && was_input && json_equal(was_input, input))
        return 0;
    char was[65], now[65];
    call_hash(was_name, was_input, was);
    call_hash(name, input, now);
    return gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT,
                       "tool_use_id '%s' was used for another call (sha256 of its name and input: "
                       "%s; of this one's: %s): a retry must send the same name and input, and "
                       "another call a new tool_use_id",
                       tuid, was, now);
}

static void wait_for(struct gbx_call *c, gbx_session_result_fn done, void *arg)
{
    struct gbx_waiter *w = gbx_xcalloc(1, sizeof(*w));
    *w = (struct gbx_waiter){.next = c->waiters, .done = done, .arg = arg};
    c->waiters = w;
}

int gbx_session_execute(struct gbx_session *ses, const char *tuid, const char *name, json_t *input,
                        gbx_session_result_fn done, void *arg, struct gbx_err **err)
{
    if (tuid == NULL || tuid[0] == '\0' || strlen(tuid) > TOOL_USE_ID_MAX || name == NULL ||
        (input && !json_is_object(input)))
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "execute needs 'tool_use_id' (1-256 characters), 'name' and "
                           "'input' (an object)");
    json_t *in = input ? json_incref(input) : json_object();
    /* a retry: the stored result, nothing runs again; but only of the same call */
    gbx_autofree char *stored = gbx_store_session_result(store_of(ses), ses->id, tuid);
    if (stored) {
        gbx_autofree char *was = gbx_store_session_call(store_of(ses), ses->id, tuid);
        json_t *call = was ? json_loads(was, 0, NULL) : NULL;
        const char *was_name = json_string_value(json_object_get(call, "name"));
        int r = call == NULL ? 0
                             : other_call(tuid, was_name ? was_name : "",
                                          json_object_get(call, "input"), name, in, err);
        json_decref(call);
        json_decref(in);
        if (r < 0)
            return -1;
        json_t *res = json_loads(stored, 0, NULL);
        json_object_del(res, "duration_ms");
        done(arg, res, 1, NULL);
        json_decref(res);
        return 0;
    }
    /* a duplicate of a call that is running or queued: wait for it */
    struct gbx_call *c = find_call(ses, tuid);
    if (c) {
        int r = other_call(tuid, c->name, c->input, name, in, err);
        json_decref(in);
        if (r < 0)
            return -1;
        wait_for(c, done, arg);
        return 0;
    }
    c = gbx_xcalloc(1, sizeof(*c));
    c->ses = ses;
    c->seq = ++ses->all->call_seq;
    c->tool_use_id = gbx_xstrdup(tuid);
    c->name = gbx_xstrdup(name);
    c->input = in;
    gbx_autoerr struct gbx_err *perr = NULL;
    if (gbx_tool_parse(c->name, c->input, &c->tc, &perr) == 0)
        c->parsed = 1;
    else
        c->parse_error = gbx_xstrdup(perr->msg);
    wait_for(c, done, arg);
    if (ses->queue_tail)
        ses->queue_tail->next = c;
    else
        ses->queue = c;
    ses->queue_tail = c;
    run_next(ses);
    return 0;
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
    static char msg[] = "the daemon is stopping before the call finished (a retry gets its result "
                        "if it was recorded, or runs it again)";
    static const struct gbx_err stopping = {
        .errnum = ESHUTDOWN, .kind = GBX_ERR_UNAVAILABLE, .msg = msg};
    size_t n = 0;
    if (all == NULL)
        return 0;
    all->stopping = 1; /* no queued call starts now */
    for (struct gbx_session *s = all->list; s; s = s->next) {
        n += end_followers(s);
        for (struct gbx_call *c = s->queue; c; c = c->next)
            while (c->waiters) { /* answered while replies can still go out */
                struct gbx_waiter *w = c->waiters;
                c->waiters = w->next;
                w->done(w->arg, NULL, 0, &stopping);
                free(w);
                n++;
            }
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
