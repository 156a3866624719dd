/* SPDX-License-Identifier: MIT */
/* glovebox worker --environment-id ID [--key-file F] [--once] [--max-idle-ms N]
 * The Claude Managed Agents self-hosted environment worker (cma-poll mode, one work item at
 * a time): poll the environment's work queue, ack an item, heartbeat its lease from a
 * background thread, create a Glovebox session for the CMA session, read the session's
 * events (an SSE reader thread plus a reconcile of the history), run each unanswered call of
 * a built-in tool once, in order, through the daemon's POST /v1/sessions/{id}/execute, post
 * each result as a user.tool_result, and finish on termination, an end_turn idle of
 * max-idle, or the heartbeat's say-so; then force-stop the item (unless its lease was lost)
 * and delete the Glovebox session. The protocol decisions are src/worker/worker.c (pure,
 * unit-tested); the spec is docs in /work/shared/protocols/managed-agents-worker.md.
 *
 * Permission gating: an "ask" call waits for a user.tool_confirmation allow; denied and
 * unknown verdicts never run.
 *
 * Webhook mode (--webhook ADDR:PORT): instead of polling all the time, an HTTP listener (one
 * connection at a time, parsed by http-parser) verifies Standard Webhooks deliveries and wakes
 * a drain thread that polls without block_ms until the queue is empty, serving each item as
 * above, serially. Not yet: several items at once, skills (a warning), memory stores (such
 * items are refused, clearly). docs/worker.md. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "cli/api.h"
#include "cli/cli.h"
#include "worker/hook.h"
#include "worker/http.h"
#include "worker/worker.h"

/* the workdir of the sessions the worker makes (the daemon's default for a session) */
#define GBX_WORKER_WORKDIR "/workspace"

static const char worker_usage[] =
    "usage: glovebox worker --environment-id ID [--key-file FILE] [--once] [--max-idle-ms N]\n"
    "                       [--webhook ADDR:PORT [--webhook-secret-file FILE]]\n"
    "\n"
    "Serve a Claude Managed Agents self-hosted environment: claim its work items and run the\n"
    "agent's built-in tool calls (bash, read, write, edit, glob, grep) in Glovebox sessions\n"
    "of the local gloveboxd.\n"
    "\n"
    "  -e, --environment-id ID   the environment (env_...)\n"
    "  -k, --key-file FILE       the environment key (default: $ANTHROPIC_ENVIRONMENT_KEY)\n"
    "      --once                handle one work item, then exit\n"
    "      --max-idle-ms N       finish an item idle after end_turn this long (default 60000)\n"
    "      --webhook ADDR:PORT   do not poll all the time: listen for signed webhook deliveries\n"
    "                            (plain HTTP; put TLS in front) and drain the queue after each\n"
    "      --webhook-secret-file FILE  the whsec_... signing secret (default:\n"
    "                            $ANTHROPIC_WEBHOOK_SECRET)\n"
    "\n"
    "Environment: ANTHROPIC_BASE_URL (default https://api.anthropic.com), ANTHROPIC_VERSION\n"
    "(default " GBX_WORKER_VERSION "), GLOVEBOX_RUNTIME_DIR (the daemon's admin socket).\n";

struct worker {
    char *env_id, *key, *base, *version, *worker_id;
    long max_idle_ms;
    int once;
    /* webhook mode */
    uint8_t *hook_key;
    size_t hook_klen;
    struct gbx_worker_crypto crypto;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = 1;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void wlog(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gbx_autofree char *msg = gbx_vasprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, "glovebox: worker: %s\n", msg);
}

/* Sleep ms, or less when interrupted. */
static void nap(long ms)
{
    while (ms > 0 && !interrupted) {
        long step = ms < 100 ? ms : 100;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

/* ---- one work item ---------------------------------------------------------------------- */

struct item {
    struct worker *w;
    struct gbx_worker_item it;
    char *token, *base; /* the item's bearer and base URL (the secret's, or the worker's) */
    char *gid;          /* the Glovebox session */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    int done;        /* teardown: the threads end */
    int finish;      /* serving ends (heartbeat said so, terminated, idle, stream gone) */
    int lost;        /* the lease is lost (412, or no beat for a TTL): no stop call */
    int reconcile;   /* the stream (re)connected: reconcile */
    json_t *queue;   /* live events not yet handled */
    const char *why; /* why serving ended (static text) */
    int have_hb, have_sse;
    pthread_t hb, sse;
};

static void item_end(struct item *x, int lost, const char *why)
{
    pthread_mutex_lock(&x->mu);
    if (!x->finish) {
        x->why = why;
        x->finish = 1;
    }
    if (lost)
        x->lost = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

static int item_done(void *arg)
{
    struct item *x = arg;
    pthread_mutex_lock(&x->mu);
    int d = x->done;
    pthread_mutex_unlock(&x->mu);
    return d;
}

/* A request with the item's bearer. */
static int item_call(struct item *x, const char *method, const char *path, json_t *body,
                     long timeout_ms, json_t **reply, struct gbx_err **err)
{
    gbx_autofree char *url = gbx_asprintf("%s%s", x->base, path);
    struct gbx_worker_http_req r = {.method = method,
                                    .url = url,
                                    .token = x->token,
                                    .version = x->w->version,
                                    .body = body,
                                    .timeout_ms = timeout_ms};
    return gbx_worker_http(&r, reply, err);
}

/* The heartbeat thread: at once with NO_HEARTBEAT, then every clamp(ttl/2, 1 s, 30 s) with
 * the last answer's last_heartbeat. */
static void *heartbeat_main(void *arg)
{
    struct item *x = arg;
    gbx_autofree char *last = NULL;
    long ttl = 90, interval = gbx_worker_beat_interval_ms(0);
    long long last_ok = now_ms();
    for (;;) {
        gbx_autofree char *exp = gbx_worker_http_escape(last ? last : GBX_WORKER_NO_HEARTBEAT);
        gbx_autofree char *path =
            gbx_asprintf("/v1/environments/%s/work/%s/heartbeat?expected_last_heartbeat=%s",
                         x->w->env_id, x->it.id, exp);
        gbx_autofree char *url = gbx_asprintf("%s%s", x->base, path);
        struct gbx_worker_http_req r = {.method = "POST",
                                        .url = url,
                                        .token = x->token,
                                        .version = x->w->version,
                                        .timeout_ms = interval,
                                        .abort = item_done, /* teardown does not wait for it */
                                        .arg = x};
        json_t *reply = NULL;
        gbx_autoerr struct gbx_err *err = NULL;
        int status = gbx_worker_http(&r, &reply, &err);
        if (item_done(x)) {
            json_decref(reply);
            return NULL;
        }
        char *nlast = NULL;
        long nttl = 0;
        enum gbx_worker_beat v = gbx_worker_beat_verdict(status, reply, &nlast, &nttl);
        json_decref(reply);
        if (v == GBX_WORKER_BEAT_OK) {
            free(last);
            last = nlast;
            if (nttl > 0)
                ttl = nttl;
            interval = gbx_worker_beat_interval_ms(ttl);
            last_ok = now_ms();
        } else if (v == GBX_WORKER_BEAT_LOST) {
            wlog("work '%s': heartbeat 412: lease lost; released without stopping it", x->it.id);
            item_end(x, 1, "lease lost");
            return NULL;
        } else if (v == GBX_WORKER_BEAT_FINISH) {
            wlog("work '%s': heartbeat says stop (status %d)", x->it.id, status);
            item_end(x, 0, "the heartbeat said stop");
            return NULL;
        } else {
            wlog("work '%s': heartbeat failed: %s", x->it.id,
                 err          ? err->msg
                 : status > 0 ? "transient status"
                              : "no answer");
            if (now_ms() - last_ok > ttl * 1000L) {
                wlog("work '%s': no heartbeat for the lease's %ld s: lease lost", x->it.id, ttl);
                item_end(x, 1, "no heartbeat for a TTL");
                return NULL;
            }
        }
        /* wait the interval, or less when teardown comes */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        /* after a failure, again soon: within the TTL, whatever the retries cost */
        long retry = interval / 4 < 250 ? 250 : interval / 4 > 1000 ? 1000 : interval / 4;
        long wait = v == GBX_WORKER_BEAT_OK ? interval : retry;
        until.tv_sec += wait / 1000;
        until.tv_nsec += (wait % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&x->mu);
        while (!x->done && !x->lost)
            if (pthread_cond_timedwait(&x->cv, &x->mu, &until) == ETIMEDOUT)
                break;
        int stop = x->done || x->lost;
        pthread_mutex_unlock(&x->mu);
        if (stop)
            return NULL;
    }
}

/* ---- the SSE reader thread ---- */

static void sse_event(void *arg, const char *name, const char *data, size_t len)
{
    struct item *x = arg;
    if (strcmp(name, "ping") == 0)
        return;
    json_t *ev = json_loadb(data, len, 0, NULL);
    if (!json_is_object(ev)) {
        json_decref(ev);
        return;
    }
    if (json_object_get(ev, "type") == NULL && strcmp(name, "message") != 0)
        json_object_set_new(ev, "type", json_string(name));
    pthread_mutex_lock(&x->mu);
    json_array_append_new(x->queue, ev);
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

struct stream {
    struct item *x;
    struct gbx_worker_sse sse;
};

static void sse_open(void *arg, long status)
{
    struct stream *s = arg;
    if (status != 200)
        return;
    pthread_mutex_lock(&s->x->mu);
    s->x->reconcile = 1;
    pthread_cond_broadcast(&s->x->cv);
    pthread_mutex_unlock(&s->x->mu);
}

static void sse_data(void *arg, const char *buf, size_t len)
{
    struct stream *s = arg;
    gbx_worker_sse_feed(&s->sse, buf, len);
}

static int sse_abort(void *arg)
{
    struct stream *s = arg;
    return item_done(s->x);
}

static void *stream_main(void *arg)
{
    struct item *x = arg;
    gbx_autofree char *url =
        gbx_asprintf("%s/v1/sessions/%s/events/stream", x->base, x->it.session_id);
    long backoff = 500;
    while (!item_done(x)) {
        struct stream s = {.x = x, .sse = {.on_event = sse_event, .arg = x}};
        struct gbx_worker_http_req r = {.method = "GET",
                                        .url = url,
                                        .token = x->token,
                                        .version = x->w->version,
                                        .on_open = sse_open,
                                        .on_data = sse_data,
                                        .abort = sse_abort,
                                        .arg = &s};
        json_t *reply = NULL;
        gbx_autoerr struct gbx_err *err = NULL;
        long long t0 = now_ms();
        int status = gbx_worker_http(&r, &reply, &err);
        json_decref(reply);
        gbx_worker_sse_release(&s.sse);
        if (item_done(x))
            break;
        if (status == 401 || status == 403 || status == 404) {
            wlog("session '%s': event stream refused (%d)", x->it.session_id, status);
            item_end(x, 0, "the event stream was refused");
            break;
        }
        if (now_ms() - t0 > 10000)
            backoff = 500; /* it was up for a while: start again from the shortest wait */
        wlog("session '%s': event stream ended (%s); reconnecting in %ld ms", x->it.session_id,
             err ? err->msg : "closed", backoff);
        for (long waited = 0; waited < backoff && !item_done(x); waited += 50) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
        backoff = backoff * 2 > 10000 ? 10000 : backoff * 2;
    }
    return NULL;
}

/* ---- the executor (main thread) ---- */

struct exec_state {
    json_t *seen;     /* tool_use ids dispatched */
    json_t *answered; /* tool_use ids with a result (posted or seen) */
    json_t *held;     /* id -> agent.tool_use event waiting for a user.tool_confirmation */
    long long idle_since;
    int ran;
};

static int item_serving(struct item *x)
{
    pthread_mutex_lock(&x->mu);
    int ok = !x->finish && !x->lost && !interrupted;
    pthread_mutex_unlock(&x->mu);
    return ok;
}

/* A call to the daemon's execute, on a thread of its own so that the item can end while it
 * runs (a lost lease, a stop): then the call is abandoned and the thread finishes alone. Two
 * references (the thread's and the caller's); the last one out frees it. */
struct exec_job {
    pthread_mutex_t mu;
    pthread_cond_t *cv; /* the item's, signalled when done; NULL once the caller left */
    int refs, done, status;
    char *path;
    json_t *body, *reply;
};

static void job_unref(struct exec_job *j)
{
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last)
        return;
    pthread_mutex_destroy(&j->mu);
    free(j->path);
    json_decref(j->body);
    json_decref(j->reply);
    free(j);
}

static void *job_main(void *arg)
{
    struct exec_job *j = arg;
    json_t *reply = NULL;
    int status = gbx_cli_call("POST", j->path, j->body, &reply);
    pthread_mutex_lock(&j->mu);
    j->status = status;
    j->reply = reply;
    j->done = 1;
    if (j->cv) /* without the item's mutex: the caller's wait is timed */
        pthread_cond_broadcast(j->cv);
    pthread_mutex_unlock(&j->mu);
    job_unref(j);
    return NULL;
}

#define EXEC_ABANDONED (-1000)

/* POST /v1/sessions/{gid}/execute: the status and *reply, or EXEC_ABANDONED when serving
 * ended first (a SIGTERM drains the call instead). */
static int execute(struct item *x, json_t *body, json_t **reply)
{
    struct exec_job *j = gbx_xcalloc(1, sizeof(*j));
    pthread_mutex_init(&j->mu, NULL);
    j->cv = &x->cv;
    j->refs = 2;
    j->path = gbx_asprintf("/v1/sessions/%s/execute", x->gid);
    j->body = json_incref(body);
    pthread_t t;
    if (pthread_create(&t, NULL, job_main, j) != 0) { /* no thread: run it here */
        int status = gbx_cli_call("POST", j->path, body, reply);
        j->refs = 1;
        job_unref(j);
        return status;
    }
    pthread_detach(t);
    pthread_mutex_lock(&x->mu);
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int done = j->done;
        pthread_mutex_unlock(&j->mu);
        if (done || x->finish || x->lost)
            break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&x->cv, &x->mu, &until);
    }
    pthread_mutex_unlock(&x->mu);
    pthread_mutex_lock(&j->mu);
    int status = j->done ? j->status : EXEC_ABANDONED;
    if (j->done)
        *reply = gbx_steal_ptr(&j->reply);
    j->cv = NULL;
    pthread_mutex_unlock(&j->mu);
    job_unref(j);
    return status;
}

/* Run one call through the daemon and post its result. */
static void run_call(struct item *x, struct exec_state *st, json_t *ev, int confirmed)
{
    json_t *body = gbx_worker_execute_body(ev, confirmed);
    if (body == NULL)
        return;
    const char *id = json_string_value(json_object_get(body, "tool_use_id"));
    const char *name = json_string_value(json_object_get(body, "name"));
    if (json_object_get(st->seen, id) || json_object_get(st->answered, id)) {
        json_decref(body);
        return;
    }
    json_object_set_new(st->seen, id, json_true());
    st->ran++;
    json_t *reply = NULL;
    int status = execute(x, body, &reply);
    if (status == EXEC_ABANDONED) {
        wlog("session '%s': %s '%s' abandoned: serving ended while it ran", x->it.session_id, name,
             id);
        json_decref(body);
        return;
    }
    gbx_autofree char *errmsg = NULL;
    if (status != 200) {
        const char *m =
            json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
        errmsg = m ? gbx_asprintf("glovebox: %s", m)
                   : gbx_asprintf("glovebox: the tool call failed (status %d)", status);
        json_decref(reply);
        reply = NULL;
    }
    json_t *result = gbx_worker_result_event(id, reply, errmsg);
    json_decref(reply);
    int is_error = json_is_true(
        json_object_get(json_array_get(json_object_get(result, "events"), 0), "is_error"));
    gbx_autofree char *epath = gbx_asprintf("/v1/sessions/%s/events", x->it.session_id);
    int posted = 0;
    for (int attempt = 0; attempt < 3 && !posted; attempt++) {
        pthread_mutex_lock(&x->mu);
        int lost = x->lost;
        pthread_mutex_unlock(&x->mu);
        if (lost)
            break; /* another worker owns the session now */
        if (attempt > 0)
            nap(1000L * attempt);
        json_t *r = NULL;
        gbx_autoerr struct gbx_err *err = NULL;
        int s = item_call(x, "POST", epath, result, 30000, &r, &err);
        json_decref(r);
        if (s / 100 == 2) {
            posted = 1;
        } else {
            wlog("session '%s': cannot post the result of '%s': %s", x->it.session_id, id,
                 err ? err->msg : "refused");
            if (s >= 400 && s < 500 && s != 408 && s != 409 && s != 429)
                break; /* left unanswered for the next reconcile */
        }
    }
    if (posted)
        json_object_set_new(st->answered, id, json_true());
    else
        json_object_del(st->seen, id); /* a later reconcile may try again */
    wlog("session '%s': %s '%s' (%s)%s", x->it.session_id, name, id, is_error ? "error" : "ok",
         posted ? "" : ": result not posted");
    json_decref(result);
    json_decref(body);
}

/* Page through the session's history and run what is unanswered; -1 when listing failed
 * (then nothing ran). */
static int reconcile(struct item *x, struct exec_state *st)
{
    json_t *all = json_array();
    gbx_autofree char *page = NULL;
    for (int pages = 0; pages < 10000; pages++) {
        gbx_autofree char *cur = page ? gbx_worker_http_escape(page) : NULL;
        gbx_autofree char *path =
            gbx_asprintf("/v1/sessions/%s/events?limit=1000%s%s", x->it.session_id,
                         cur ? "&page=" : "", cur ? cur : "");
        json_t *r = NULL;
        gbx_autoerr struct gbx_err *err = NULL;
        int s = item_call(x, "GET", path, NULL, 60000, &r, &err);
        json_t *data = json_object_get(r, "data");
        if (s != 200 || !json_is_array(data)) {
            wlog("session '%s': cannot list its events: %s", x->it.session_id,
                 err ? err->msg : "bad answer");
            json_decref(r);
            json_decref(all);
            if (s == 401 || s == 403 || s == 404)
                item_end(x, 0, "the session's events were refused");
            return -1;
        }
        json_array_extend(all, data);
        const char *next = json_string_value(json_object_get(r, "next_page"));
        free(page);
        page = next && *next ? gbx_xstrdup(next) : NULL;
        json_decref(r);
        if (page == NULL)
            break;
    }
    size_t i;
    json_t *ev;
    json_array_foreach(all, i, ev)
    {
        const char *tid = json_string_value(json_object_get(ev, "tool_use_id"));
        if (gbx_worker_event_kind(NULL, ev) == GBX_WORKER_EV_RESULT && tid) {
            json_object_set_new(st->answered, tid, json_true());
            json_object_del(st->held, tid);
        }
    }
    json_t *held = NULL;
    json_t *todo = gbx_worker_reconcile(all, &held);
    const char *hid;
    json_object_foreach(held, hid, ev)
    {
        if (!json_object_get(st->held, hid))
            wlog("session '%s': '%s' waits for a confirmation", x->it.session_id, hid);
        json_object_set(st->held, hid, ev);
    }
    json_decref(held);
    json_array_foreach(todo, i, ev)
    {
        if (!item_serving(x))
            break;
        json_object_del(st->held, json_string_value(json_object_get(ev, "id")));
        run_call(x, st, ev, 1); /* reconcile let it through: confirmed if it had to be */
    }
    /* a history that ends idle after end_turn with nothing left to run arms the idle clock */
    size_t n = json_array_size(all);
    if (json_array_size(todo) == 0 && n > 0 &&
        gbx_worker_event_kind(NULL, json_array_get(all, n - 1)) == GBX_WORKER_EV_IDLE_END &&
        st->idle_since == 0)
        st->idle_since = now_ms();
    json_decref(todo);
    json_decref(all);
    return 0;
}

static void handle_event(struct item *x, struct exec_state *st, json_t *ev)
{
    switch (gbx_worker_event_kind(NULL, ev)) {
    case GBX_WORKER_EV_TOOL_USE: {
        st->idle_since = 0;
        const char *hid = json_string_value(json_object_get(ev, "id"));
        if (gbx_worker_tool_held(ev) && hid && !json_object_get(st->answered, hid)) {
            wlog("session '%s': '%s' waits for a confirmation", x->it.session_id, hid);
            json_object_set(st->held, hid, ev);
            break;
        }
        json_t *body = gbx_worker_execute_body(ev, 0);
        if (body == NULL) {
            const char *id = json_string_value(json_object_get(ev, "id"));
            const char *name = json_string_value(json_object_get(ev, "name"));
            wlog("session '%s': leaving '%s' (%s) to its owner", x->it.session_id, id ? id : "?",
                 name ? name : "?");
            break;
        }
        json_decref(body);
        run_call(x, st, ev, 0);
        break;
    }
    case GBX_WORKER_EV_CONFIRM: { /* does not touch the idle clock */
        const char *tid = NULL;
        int allow = gbx_worker_confirmation(ev, &tid);
        json_t *call = tid ? json_incref(json_object_get(st->held, tid)) : NULL;
        if (call == NULL)
            break;
        json_object_del(st->held, tid);
        if (allow == 1)
            run_call(x, st, call, 1);
        else
            wlog("session '%s': '%s' denied: not run", x->it.session_id,
                 json_string_value(json_object_get(call, "id")));
        json_decref(call);
        if (json_object_size(st->held) == 0 && st->idle_since)
            st->idle_since = now_ms(); /* the countdown starts fresh when the last resolves */
        break;
    }
    case GBX_WORKER_EV_RESULT: {
        const char *tid = json_string_value(json_object_get(ev, "tool_use_id"));
        if (tid) {
            json_object_set_new(st->answered, tid, json_true());
            json_object_del(st->held, tid);
        }
        break;
    }
    case GBX_WORKER_EV_IDLE_END:
        st->idle_since = now_ms();
        break;
    case GBX_WORKER_EV_TERMINATED:
        item_end(x, 0, "the session ended");
        break;
    case GBX_WORKER_EV_IGNORE:
    case GBX_WORKER_EV_ERROR:
        break;
    case GBX_WORKER_EV_OTHER:
    case GBX_WORKER_EV_IDLE_OTHER:
        st->idle_since = 0;
        break;
    }
}

/* Serve the session until something ends it. */
static void serve(struct item *x)
{
    struct exec_state st = {
        .seen = json_object(), .answered = json_object(), .held = json_object()};
    pthread_mutex_lock(&x->mu);
    for (;;) {
        if (x->finish || x->lost || interrupted)
            break;
        if (x->reconcile) {
            x->reconcile = 0;
            pthread_mutex_unlock(&x->mu);
            if (reconcile(x, &st) < 0) {
                nap(1000);
                pthread_mutex_lock(&x->mu);
                x->reconcile = 1; /* again */
            } else {
                pthread_mutex_lock(&x->mu);
            }
            continue;
        }
        if (json_array_size(x->queue) > 0) {
            json_t *ev = json_incref(json_array_get(x->queue, 0));
            json_array_remove(x->queue, 0);
            pthread_mutex_unlock(&x->mu);
            handle_event(x, &st, ev);
            json_decref(ev);
            pthread_mutex_lock(&x->mu);
            continue;
        }
        if (st.idle_since && json_object_size(st.held) == 0 &&
            now_ms() - st.idle_since >= x->w->max_idle_ms) {
            x->finish = 1;
            x->why = "idle after end_turn";
            break;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&x->cv, &x->mu, &until);
    }
    pthread_mutex_unlock(&x->mu);
    wlog("session '%s': %d tool call(s) run", x->it.session_id, st.ran);
    json_decref(st.seen);
    json_decref(st.answered);
    json_decref(st.held);
}

/* Read the CMA session object: 0 when it can be served (a failure to read it is only a
 * warning: the event plane decides), -1 when it cannot (memory stores). */
static int session_check(struct item *x)
{
    gbx_autofree char *path = gbx_asprintf("/v1/sessions/%s", x->it.session_id);
    json_t *r = NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    int s = item_call(x, "GET", path, NULL, 30000, &r, &err);
    if (s != 200) {
        wlog("session '%s': cannot read it (%s); going on", x->it.session_id,
             err ? err->msg : "refused");
        json_decref(r);
        return 0;
    }
    size_t skills = 0;
    const char *why = gbx_worker_session_unsupported(r, &skills);
    json_decref(r);
    if (skills > 0)
        wlog("session '%s': %zu skill(s) not installed (not supported yet)", x->it.session_id,
             skills);
    if (why) {
        gbx_cli_error("worker: session '%s': %s", x->it.session_id, why);
        return -1;
    }
    return 0;
}

/* Create the Glovebox session the calls run in; -1 after printing why. Its file tools are
 * confined to its workdir, as the worker protocol's built-in tools are (§6: "reject anything
 * outside workdir"); a session's default is the whole sandbox. */
static int glovebox_session(struct item *x)
{
    json_t *body = json_pack("{s:s,s:s}", "workdir", GBX_WORKER_WORKDIR, "tools_root",
                             GBX_WORKER_WORKDIR),
           *reply = NULL;
    int status = gbx_cli_call("POST", "/v1/sessions", body, &reply);
    json_decref(body);
    const char *id = json_string_value(json_object_get(reply, "id"));
    if (status != 201 || !gbx_worker_id_valid(id)) {
        if (status >= 0)
            gbx_cli_print_error(status, reply);
        json_decref(reply);
        return -1;
    }
    x->gid = gbx_xstrdup(id);
    json_decref(reply);
    return 0;
}

/* Handle one polled (not yet acked) item. Returns 0 when it was served, 1 when the ack
 * failed (it was never ours), -1 for a failure that should end the worker (the daemon
 * unreachable). */
static int handle_item(struct worker *w, struct gbx_worker_item *it)
{
    gbx_autofree char *ack =
        gbx_asprintf("%s/v1/environments/%s/work/%s/ack", w->base, w->env_id, it->id);
    struct gbx_worker_http_req ar = {
        .method = "POST", .url = ack, .token = w->key, .version = w->version, .timeout_ms = 30000};
    json_t *reply = NULL;
    gbx_autoerr struct gbx_err *aerr = NULL;
    int status = gbx_worker_http(&ar, &reply, &aerr);
    json_decref(reply);

    struct item x = {.w = w, .it = *it, .queue = json_array()};
    memset(it, 0, sizeof(*it)); /* x owns it now */
    pthread_mutex_init(&x.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&x.cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = 0, stop = 1;
    char *tok = NULL, *url = NULL;
    if (x.it.secret && gbx_worker_secret_decode(x.it.secret, &tok, &url) == 0) {
        x.token = tok;
        x.base = url ? url : gbx_xstrdup(w->base);
        size_t n = strlen(x.base);
        while (n > 0 && x.base[n - 1] == '/')
            x.base[--n] = '\0';
    } else {
        if (x.it.secret)
            wlog("work '%s': its secret is not usable: using the environment key", x.it.id);
        x.token = gbx_xstrdup(w->key);
        x.base = gbx_xstrdup(w->base);
    }

    if (status / 100 != 2) {
        /* not ours: no stop (as the TS worker; the item comes back after the reclaim window) */
        wlog("work '%s': ack failed: %s", x.it.id,
             aerr            ? aerr->msg
             : status == 409 ? "not queued any more"
                             : "refused");
        stop = 0;
        rc = 1;
        goto out;
    }
    wlog("work '%s': acked (session '%s')", x.it.id, x.it.session_id ? x.it.session_id : "-");
    x.have_hb = pthread_create(&x.hb, NULL, heartbeat_main, &x) == 0;
    if (!x.have_hb) {
        wlog("work '%s': cannot start the heartbeat thread", x.it.id);
        goto out;
    }
    if (x.it.session_id == NULL) {
        wlog("work '%s': not a session: stopping it", x.it.id);
        goto out;
    }
    if (session_check(&x) < 0) {
        item_end(&x, 0, "not supported");
        goto out;
    }
    if (glovebox_session(&x) < 0) {
        gbx_cli_error("worker: cannot create a Glovebox session for '%s'", x.it.session_id);
        rc = -1;
        goto out;
    }
    wlog("session '%s': Glovebox session '%s'", x.it.session_id, x.gid);
    x.have_sse = pthread_create(&x.sse, NULL, stream_main, &x) == 0;
    if (!x.have_sse) {
        wlog("work '%s': cannot start the event stream thread", x.it.id);
        goto out;
    }
    serve(&x);

out:
    pthread_mutex_lock(&x.mu);
    x.done = 1;
    pthread_cond_broadcast(&x.cv);
    pthread_mutex_unlock(&x.mu);
    if (x.have_hb) /* the beats end first, then the stop (spec §4) */
        pthread_join(x.hb, NULL);
    pthread_mutex_lock(&x.mu);
    const char *why = x.why;
    pthread_mutex_unlock(&x.mu);
    if (why)
        wlog("work '%s': finished: %s", x.it.id, why);
    if (stop && !x.lost) {
        gbx_autofree char *path =
            gbx_asprintf("/v1/environments/%s/work/%s/stop", w->env_id, x.it.id);
        json_t *body = json_pack("{s:b}", "force", 1), *r = NULL;
        gbx_autoerr struct gbx_err *err = NULL;
        int s = item_call(&x, "POST", path, body, 30000, &r, &err);
        json_decref(body);
        json_decref(r);
        if (s / 100 == 2 || s == 409)
            wlog("work '%s': stopped", x.it.id);
        else
            wlog("work '%s': stop failed: %s", x.it.id, err ? err->msg : "refused");
    }
    if (x.have_sse)
        pthread_join(x.sse, NULL);
    if (x.gid) { /* a call still running (abandoned) ends with its sandbox */
        gbx_autofree char *path = gbx_asprintf("/v1/sessions/%s", x.gid);
        json_t *r = NULL;
        int s = gbx_cli_call("DELETE", path, NULL, &r);
        if (s / 100 != 2 && s >= 0)
            gbx_cli_print_error(s, r);
        json_decref(r);
    }
    json_decref(x.queue);
    pthread_cond_destroy(&x.cv);
    pthread_mutex_destroy(&x.mu);
    free(x.token);
    free(x.base);
    free(x.gid);
    gbx_worker_item_release(&x.it);
    return rc;
}

/* ---- the poll loop ---------------------------------------------------------------------- */

enum poll_result { POLL_ITEM, POLL_EMPTY, POLL_TRANSIENT, POLL_FATAL };

/* One poll: POLL_ITEM with *it set, or why not (POLL_FATAL after printing why). */
static enum poll_result poll_once(struct worker *w, const char *url, int *failures,
                                  struct gbx_worker_item *it)
{
    struct gbx_worker_http_req r = {.method = "GET",
                                    .url = url,
                                    .token = w->key,
                                    .version = w->version,
                                    .worker_id = w->worker_id,
                                    .timeout_ms = 10000};
    json_t *reply = NULL;
    gbx_autoerr struct gbx_err *err = NULL;
    int status = gbx_worker_http(&r, &reply, &err);
    if (status == 401 || status == 403) {
        gbx_cli_error("worker: the control plane refused the environment key (%d)", status);
        json_decref(reply);
        return POLL_FATAL;
    }
    if (status < 0 || status >= 500 || status == 408 || status == 409 || status == 429) {
        json_decref(reply);
        long secs = *failures < 6 ? 1L << *failures : 60;
        (*failures)++;
        wlog("poll failed (%s); again in %ld s", err ? err->msg : "transient status", secs);
        nap(secs * 1000 + rand() % 1000);
        return POLL_TRANSIENT;
    }
    *failures = 0;
    if (status / 100 != 2) {
        const char *m =
            json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
        gbx_cli_error("worker: poll refused (%d)%s%s", status, m ? ": " : "", m ? m : "");
        json_decref(reply);
        return POLL_FATAL;
    }
    if (gbx_worker_poll_empty(status, reply)) {
        json_decref(reply);
        return POLL_EMPTY;
    }
    int pr = gbx_worker_item_parse(reply, it);
    json_decref(reply);
    if (pr < 0) {
        wlog("poll answered something that is not a work item; ignoring it");
        return POLL_EMPTY;
    }
    return POLL_ITEM;
}

static int poll_loop(struct worker *w)
{
    gbx_autofree char *url =
        gbx_asprintf("%s/v1/environments/%s/work/poll?block_ms=999", w->base, w->env_id);
    int failures = 0;
    while (!interrupted) {
        struct gbx_worker_item it;
        enum poll_result pr = poll_once(w, url, &failures, &it);
        if (pr == POLL_FATAL)
            return 1;
        if (pr == POLL_TRANSIENT)
            continue;
        if (pr == POLL_EMPTY) {
            nap(1000 + rand() % 2000);
            continue;
        }
        int hr = handle_item(w, &it);
        gbx_worker_item_release(&it);
        if (hr < 0)
            return 1;
        if (hr == 0 && w->once)
            return 0;
    }
    return 130;
}

/* ---- webhook mode ----------------------------------------------------------------------- */

struct hook {
    struct worker *w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending; /* under mu: a drain pass is due */
    int fatal;   /* under mu: the drain thread ended the worker */
};

/* Drain the queue once (spec §9.2): poll without block_ms, with a short reclaim, until no
 * work, serving each item in turn. Returns -1 for a failure that ends the worker. */
static int drain(struct worker *w)
{
    gbx_autofree char *url = gbx_asprintf(
        "%s/v1/environments/%s/work/poll?reclaim_older_than_ms=2000", w->base, w->env_id);
    int failures = 0, served = 0;
    while (!interrupted) {
        struct gbx_worker_item it;
        enum poll_result pr = poll_once(w, url, &failures, &it);
        if (pr == POLL_FATAL)
            return -1;
        if (pr == POLL_TRANSIENT) {
            if (failures >= 4) {
                wlog("drain: the queue cannot be read; waiting for the next delivery");
                break;
            }
            continue;
        }
        if (pr == POLL_EMPTY)
            break;
        int hr = handle_item(w, &it);
        gbx_worker_item_release(&it);
        if (hr < 0)
            return -1;
        served += hr == 0;
    }
    wlog("drain: queue empty (%d item(s) served)", served);
    return 0;
}

static void *drain_main(void *arg)
{
    struct hook *hk = arg;
    pthread_mutex_lock(&hk->mu);
    while (!interrupted) {
        if (!hk->pending) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 200 * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&hk->cv, &hk->mu, &until);
            continue;
        }
        hk->pending = 0; /* a delivery during the pass schedules one more */
        pthread_mutex_unlock(&hk->mu);
        int rc = drain(hk->w);
        pthread_mutex_lock(&hk->mu);
        if (rc < 0) {
            hk->fatal = 1;
            interrupted = 1;
        }
    }
    pthread_mutex_unlock(&hk->mu);
    return NULL;
}

/* Parse ADDR:PORT (an IPv4 address) into sa. */
static int parse_listen(const char *spec, struct sockaddr_in *sa)
{
    const char *colon = strrchr(spec, ':');
    if (colon == NULL || colon == spec || colon - spec > 63)
        return -1;
    char addr[64];
    memcpy(addr, spec, (size_t)(colon - spec));
    addr[colon - spec] = '\0';
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || port < 0 || port > 65535)
        return -1;
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, addr, &sa->sin_addr) == 1 ? 0 : -1;
}

/* Answer one connection. */
static void hook_conn(struct hook *hk, struct gbx_worker_hook_seen *seen, int fd)
{
    struct gbx_worker_hook_req r;
    int status = gbx_worker_hook_read(fd, 10000, &r);
    if (status) {
        wlog("webhook: request refused (%d)", status);
        gbx_worker_hook_answer(fd, status, "bad request\n");
        gbx_worker_hook_req_release(&r);
        return;
    }
    if (!r.post) {
        gbx_worker_hook_answer(fd, 405, "POST only\n");
        gbx_worker_hook_req_release(&r);
        return;
    }
    enum gbx_worker_hook_verdict v =
        gbx_worker_hook_verify(&r.h, r.body, r.len, hk->w->hook_key, hk->w->hook_klen,
                               (long long)time(NULL), &hk->w->crypto, seen);
    const char *id = v == GBX_WORKER_HOOK_OK || v == GBX_WORKER_HOOK_REPLAY ? r.h.id : "-";
    if (v == GBX_WORKER_HOOK_OK) {
        gbx_worker_hook_answer(fd, 204, NULL);
        /* the payload is only a wake-up (spec §9.2): every verified delivery drains */
        pthread_mutex_lock(&hk->mu);
        hk->pending = 1;
        pthread_cond_broadcast(&hk->cv);
        pthread_mutex_unlock(&hk->mu);
        wlog("webhook: delivery '%s' verified: draining the queue", id);
    } else if (v == GBX_WORKER_HOOK_REPLAY) {
        gbx_worker_hook_answer(fd, 200, "already seen\n");
        wlog("webhook: delivery '%s' already seen: nothing to do", id);
    } else {
        gbx_worker_hook_answer(fd, 401, "unauthorized\n");
        wlog("webhook: delivery refused (401): %s", gbx_worker_hook_verdict_name(v));
    }
    gbx_worker_hook_req_release(&r);
}

static int hook_loop(struct worker *w, const char *spec)
{
    struct sockaddr_in sa;
    if (parse_listen(spec, &sa) < 0) {
        gbx_cli_error("worker: invalid --webhook '%s' (ADDR:PORT, an IPv4 address)", spec);
        return GBX_EXIT_USAGE;
    }
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0) {
        gbx_cli_error("worker: cannot listen on '%s': %s", spec, strerror(errno));
        if (lfd >= 0)
            close(lfd);
        return 1;
    }
    socklen_t sl = sizeof(sa);
    if (getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0) {
        char addr[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof(addr));
        wlog("webhook: listening on %s:%u", addr, (unsigned)ntohs(sa.sin_port));
    }
    struct hook hk = {.w = w};
    pthread_mutex_init(&hk.mu, NULL);
    pthread_cond_init(&hk.cv, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, drain_main, &hk) != 0) {
        gbx_cli_error("worker: cannot start the drain thread");
        close(lfd);
        return 1;
    }
    struct gbx_worker_hook_seen *seen = gbx_xcalloc(1, sizeof(*seen));
    while (!interrupted) {
        struct pollfd pfd = {.fd = lfd, .events = POLLIN};
        if (poll(&pfd, 1, 200) <= 0)
            continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        hook_conn(&hk, seen, fd);
        close(fd);
    }
    close(lfd);
    pthread_join(t, NULL);
    gbx_worker_hook_seen_release(seen);
    free(seen);
    pthread_cond_destroy(&hk.cv);
    pthread_mutex_destroy(&hk.mu);
    return hk.fatal ? 1 : 130;
}

static char *worker_id(void)
{
    char host[256] = "glovebox";
    if (gethostname(host, sizeof(host) - 1) < 0)
        snprintf(host, sizeof(host), "glovebox");
    char uuid[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/uuid", "re");
    if (f) {
        if (fgets(uuid, sizeof(uuid), f) == NULL)
            uuid[0] = '\0';
        fclose(f);
    }
    uuid[strcspn(uuid, "\n")] = '\0';
    if (uuid[0] == '\0')
        snprintf(uuid, sizeof(uuid), "%ld-%ld", (long)getpid(), (long)time(NULL));
    return gbx_asprintf("%s-%s", host, uuid);
}

static char *read_key(const char *file)
{
    if (file == NULL) {
        const char *k = getenv("ANTHROPIC_ENVIRONMENT_KEY");
        return k && *k ? gbx_xstrdup(k) : NULL;
    }
    FILE *f = fopen(file, "re");
    if (f == NULL) {
        gbx_cli_error("worker: cannot open '%s': %s", file, strerror(errno));
        return NULL;
    }
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf[0] ? gbx_xstrdup(buf) : NULL;
}

int gbx_cmd_worker(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"environment-id", required_argument, NULL, 'e'},
        {"key-file", required_argument, NULL, 'k'},
        {"once", no_argument, NULL, 'o'},
        {"max-idle-ms", required_argument, NULL, 'i'},
        {"webhook", required_argument, NULL, 'W'},
        {"webhook-secret-file", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *env = NULL, *key_file = NULL, *hook = NULL, *hook_file = NULL;
    struct worker w = {.max_idle_ms = 60000};
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "e:k:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'e':
            env = optarg;
            break;
        case 'k':
            key_file = optarg;
            break;
        case 'o':
            w.once = 1;
            break;
        case 'i': {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || *end || v < 0 || v > 86400000L) {
                gbx_cli_error("invalid --max-idle-ms '%s'", optarg);
                return GBX_EXIT_USAGE;
            }
            w.max_idle_ms = v;
            break;
        }
        case 'W':
            hook = optarg;
            break;
        case 'S':
            hook_file = optarg;
            break;
        case 'h':
            fputs(worker_usage, stdout);
            return 0;
        default:
            fputs(worker_usage, stderr);
            return GBX_EXIT_USAGE;
        }
    }
    if (optind < argc || env == NULL) {
        fputs(worker_usage, stderr);
        return GBX_EXIT_USAGE;
    }
    if (!gbx_worker_id_valid(env)) {
        gbx_cli_error("invalid environment id '%s'", env);
        return GBX_EXIT_USAGE;
    }
    gbx_autofree char *key = read_key(key_file);
    if (key == NULL) {
        gbx_cli_error("worker: no environment key (set ANTHROPIC_ENVIRONMENT_KEY or use "
                      "--key-file)");
        return GBX_EXIT_USAGE;
    }
    if (strpbrk(key, " \t\r\n")) {
        gbx_cli_error("worker: the environment key has white space in it");
        return GBX_EXIT_USAGE;
    }
    if (hook_file && !hook) {
        gbx_cli_error("worker: --webhook-secret-file needs --webhook");
        return GBX_EXIT_USAGE;
    }
    if (hook && w.once) {
        gbx_cli_error("worker: --once and --webhook do not go together");
        return GBX_EXIT_USAGE;
    }
    if (hook) {
        gbx_autofree char *secret = NULL;
        if (hook_file) {
            secret = read_key(hook_file);
        } else {
            const char *e = getenv("ANTHROPIC_WEBHOOK_SECRET");
            secret = e && *e ? gbx_xstrdup(e) : NULL;
        }
        if (secret == NULL) {
            gbx_cli_error("worker: no webhook signing secret (set ANTHROPIC_WEBHOOK_SECRET or "
                          "use --webhook-secret-file)");
            return GBX_EXIT_USAGE;
        }
        if (gbx_worker_hook_key(secret, &w.hook_key, &w.hook_klen) < 0) {
            gbx_cli_error("worker: the webhook signing secret is not whsec_<base64>");
            return GBX_EXIT_USAGE;
        }
        gbx_autoerr struct gbx_err *cerr = NULL;
        if (gbx_worker_crypto_load(&w.crypto, &cerr) < 0) {
            gbx_cli_error("worker: %s", cerr->msg);
            free(w.hook_key);
            return 1;
        }
    }
    const char *base = getenv("ANTHROPIC_BASE_URL");
    if (base == NULL || *base == '\0')
        base = "https://api.anthropic.com";
    if (strncmp(base, "https://", 8) != 0 && strncmp(base, "http://", 7) != 0) {
        gbx_cli_error("worker: ANTHROPIC_BASE_URL must be an http(s) URL");
        return GBX_EXIT_USAGE;
    }
    const char *ver = getenv("ANTHROPIC_VERSION");
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_worker_http_load(&err) < 0) {
        gbx_cli_error("worker: %s", err->msg);
        return 1;
    }
    /* no claim without a daemon to run the calls in */
    json_t *health = NULL;
    int hs = gbx_cli_call("GET", "/healthz", NULL, &health);
    json_decref(health);
    if (hs != 200) {
        if (hs >= 0)
            gbx_cli_error("worker: gloveboxd is not healthy (%d)", hs);
        return 1;
    }
    w.env_id = gbx_xstrdup(env);
    w.key = gbx_steal_ptr(&key);
    w.base = gbx_xstrdup(base);
    size_t n = strlen(w.base);
    while (n > 0 && w.base[n - 1] == '/')
        w.base[--n] = '\0';
    w.version = gbx_xstrdup(ver && *ver ? ver : GBX_WORKER_VERSION);
    w.worker_id = worker_id();
    srand((unsigned)(time(NULL) ^ getpid()));

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    wlog("environment '%s' at %s as '%s'%s", w.env_id, w.base, w.worker_id,
         w.once ? " (one item)" : "");

    int rc = hook ? hook_loop(&w, hook) : poll_loop(&w);
    free(w.hook_key);
    free(w.env_id);
    free(w.key);
    free(w.base);
    free(w.version);
    free(w.worker_id);
    return rc;
}
const char *const gbx_usage_worker = worker_usage;
