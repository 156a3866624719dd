/* SPDX-License-Identifier: MIT */
/* A template's start command and ready check (template.conf start= and ready=). When a
 * sandbox of such a template is created, the start command is started in the background
 * (its output in /tmp/glovebox-start.log inside the sandbox) and the ready check runs every
 * 50 ms until it exits 0; only then does the create answer. A check that never passes within
 * the timeout (60 s; ready_timeout= in template.conf, in seconds) fails the create, and the
 * sandbox is destroyed, with the last check's exit status in the error. */
#include "core/boot.h"

#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proto.h"
#include "agent/aconn.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/template.h"

#define READY_EVERY_MS 50
#define READY_TIMEOUT_S 60

struct boot {
    struct gbx_server *s;
    struct event_base *base;
    char *id, *start, *ready, *log, *user, *what;
    json_t *env;
    struct gbx_aconn *ac;
    struct event *timer;
    uint32_t check_proc; /* the running ready check, 0: none */
    uint32_t start_proc; /* the start command (once its SPAWN answered), 0: not yet */
    int64_t deadline_ns, t0;
    int last_status;
    int destroy_on_fail, fail_on_start_exit;
    gbx_boot_fn done;
    void *arg;
    int finished;
};

static void boot_free(struct boot *b)
{
    if (b->timer)
        event_free(b->timer);
    gbx_aconn_free(b->ac);
    json_decref(b->env);
    free(b->id);
    free(b->start);
    free(b->ready);
    free(b->log);
    free(b->user);
    free(b->what);
    free(b);
}

static void finish(struct boot *b, struct gbx_err *err)
{
    if (b->finished)
        return;
    b->finished = 1;
    struct gbx_live *l = gbx_sandboxes_find_any(b->s, b->id);
    if (err == NULL && l == NULL)
        gbx_err_set(&err, ENOENT, GBX_ERR_NOT_FOUND, "sandbox '%s' went away while starting",
                    b->id);
    if (err && l && b->destroy_on_fail) {
        struct gbx_err *e2 = NULL;
        (void)!gbx_sandboxes_destroy(
            b->s, &gbx_actor_system, l, "sandbox.delete",
            json_pack("{s:s,s:s}", "reason", "not ready", "error", err->msg), &e2);
        gbx_err_free(e2);
        l = NULL;
    }
    if (err == NULL)
        gbx_log_info("sandbox '%s': %s is ready (after %.1f ms)", b->id, b->what,
                     (double)(gbx_monotonic_ns() - b->t0) / 1e6);
    b->done(b->arg, err ? NULL : l, err);
    gbx_err_free(err);
    boot_free(b);
}

static void put_env(struct gbx_msg *m, json_t *env)
{
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v)
    {
        gbx_autofree char *kv = gbx_asprintf("%s=%s", k, json_string_value(v));
        gbx_msg_put_str(m, GBX_A_ENV, kv);
    }
}

static void check_spawned(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final);

/* "/bin/sh -c 'exec >LOG 2>&1; CMD'" as b's user with b's environment: 0, or -1 when the
 * request does not fit a frame. */
static int spawn_sh(struct boot *b, const char *log, const char *cmd, gbx_aconn_reply_fn fn)
{
    struct gbx_msg *m = gbx_aconn_begin(b->ac, GBX_MSG_SPAWN);
    gbx_msg_put_str(m, GBX_A_ARGV, "/bin/sh");
    gbx_msg_put_str(m, GBX_A_ARGV, "-c");
    gbx_autofree char *text = gbx_asprintf("exec >%s 2>&1; %s", log, cmd);
    gbx_msg_put_str(m, GBX_A_ARGV, text);
    put_env(m, b->env);
    if (b->user)
        gbx_msg_put_str(m, GBX_A_USER, b->user);
    return gbx_aconn_send(b->ac, fn, b) < 0 ? -1 : 0;
}

static void run_check(struct boot *b)
{
    if (spawn_sh(b, "/dev/null", b->ready, check_spawned) < 0) {
        struct gbx_err *err = NULL;
        gbx_err_set(&err, EMSGSIZE, GBX_ERR_INVALID, "the %s's ready check is too large", b->what);
        finish(b, err);
    }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    run_check(arg);
}

static void retry_or_fail(struct boot *b)
{
    if (gbx_monotonic_ns() >= b->deadline_ns) {
        struct gbx_err *err = NULL;
        gbx_err_set(&err, ETIMEDOUT, GBX_ERR_UNAVAILABLE,
                    "sandbox '%s': the %s was not ready in time: its ready check ('%s') "
                    "last exited with %d",
                    b->id, b->what, b->ready, b->last_status);
        return finish(b, err);
    }
    struct timeval tv = {0, READY_EVERY_MS * 1000};
    evtimer_add(b->timer, &tv);
}

static void check_spawned(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct boot *b = arg;
    if (!final || b->finished)
        return;
    if (h == NULL)
        return; /* the connection is lost: on_close says so */
    if (h->type != GBX_MSG_OK || gbx_attrs_get_u32(p, h->len, GBX_A_PROC, &b->check_proc) != 1) {
        char msg[200];
        gbx_aconn_error_text(p, h->len, msg, sizeof(msg));
        struct gbx_err *err = NULL;
        gbx_err_set(&err, EIO, GBX_ERR_UNAVAILABLE, "cannot run the %s's ready check: %s", b->what,
                    msg);
        finish(b, err);
    }
}

static void on_event(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    struct boot *b = arg;
    if (h->type != GBX_EV_EXIT || b->finished)
        return; /* output: not waited for */
    uint32_t code = 0, sig = 0;
    if (gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_CODE, &code) != 1) {
        (void)gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_SIGNAL, &sig);
        code = 128 + sig;
    }
    if (b->start_proc && h->id == b->start_proc) {
        b->start_proc = 0;
        if (!b->fail_on_start_exit || code == 0)
            return;
        struct gbx_err *err = NULL;
        char how[96];
        if (code > 128)
            snprintf(how, sizeof(how), "was killed by signal %u%s", code - 128,
                     code == 137 ? " (the sandbox's memory limit is the usual cause)" : "");
        else
            snprintf(how, sizeof(how), "exited with %u", code);
        gbx_err_set(&err, ECHILD, code == 127 ? GBX_ERR_NOT_FOUND : GBX_ERR_UNAVAILABLE,
                    "the %s %s before it was ready (its output: %s in the sandbox)", b->what, how,
                    b->log);
        return finish(b, err);
    }
    if (b->check_proc == 0 || h->id != b->check_proc)
        return;
    b->check_proc = 0;
    b->last_status = (int)code;
    if (code == 0)
        return finish(b, NULL);
    retry_or_fail(b);
}

static void on_close(void *arg, const char *why)
{
    struct boot *b = arg;
    struct gbx_err *err = NULL;
    gbx_err_set(&err, EPIPE, GBX_ERR_UNAVAILABLE,
                "sandbox '%s' stopped answering while starting: %s", b->id, why);
    finish(b, err);
}

int gbx_boot_needed(struct gbx_server *s, const struct gbx_live *l, char **start, char **ready)
{
    *start = *ready = NULL;
    if (strcmp(l->template_name, GBX_TEMPLATE_HOST) == 0)
        return 0;
    struct gbx_err *err = NULL;
    if (gbx_template_start_spec(gbx_server_runtime(s)->state_dir, l->template_name, start, ready,
                                &err) < 0) {
        gbx_err_free(err);
        return 0;
    }
    return *start || *ready;
}

static void start_spawned(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p, int final)
{
    struct boot *b = arg;
    if (!final || b->finished || h == NULL)
        return; /* a lost connection: on_close says so */
    if (h->type != GBX_MSG_OK || gbx_attrs_get_u32(p, h->len, GBX_A_PROC, &b->start_proc) != 1) {
        char msg[200];
        gbx_aconn_error_text(p, h->len, msg, sizeof(msg));
        struct gbx_err *err = NULL;
        gbx_err_set(&err, EIO, GBX_ERR_UNAVAILABLE, "cannot start the %s: %s", b->what, msg);
        finish(b, err);
    }
}

void gbx_boot_run(struct gbx_server *s, struct event_base *base, struct gbx_live *l,
                  const struct gbx_boot_spec *spec, gbx_boot_fn done, void *arg)
{
    struct boot *b = gbx_xcalloc(1, sizeof(*b));
    b->s = s;
    b->base = base;
    b->id = gbx_xstrdup(l->sb->id);
    b->start = spec->start ? gbx_xstrdup(spec->start) : NULL;
    b->ready = spec->ready ? gbx_xstrdup(spec->ready) : NULL;
    b->log = gbx_xstrdup(spec->log ? spec->log : "/dev/null");
    b->user = spec->user ? gbx_xstrdup(spec->user) : NULL;
    b->what = gbx_xstrdup(spec->what ? spec->what : "start command");
    b->destroy_on_fail = spec->destroy_on_fail;
    b->fail_on_start_exit = spec->fail_on_start_exit;
    b->env = l->env ? json_incref(l->env) : json_object();
    b->done = done;
    b->arg = arg;
    b->t0 = gbx_monotonic_ns();
    b->deadline_ns = b->t0 + spec->timeout_ms * 1000000ll;
    b->timer = evtimer_new(base, on_timer, b);
    struct gbx_err *err = NULL;
    if (gbx_aconn_open(base, l->sb, on_event, on_close, b, &b->ac, &err) < 0)
        return finish(b, err);
    if (b->start && spawn_sh(b, b->log, b->start, start_spawned) < 0) {
        gbx_err_set(&err, EMSGSIZE, GBX_ERR_INVALID, "the %s is too large", b->what);
        return finish(b, err);
    }
    if (b->ready == NULL)
        return finish(b, NULL); /* started; nothing to wait for */
    run_check(b);
}

void gbx_boot(struct gbx_server *s, struct event_base *base, struct gbx_live *l, char *start,
              char *ready, gbx_boot_fn done, void *arg)
{
    uint64_t secs = READY_TIMEOUT_S;
    gbx_autofree char *t = NULL;
    if (gbx_template_conf_get(gbx_server_runtime(s)->state_dir, l->template_name, "ready_timeout",
                              &t) == 0 &&
        t)
        (void)gbx_parse_u64(t, 1, 86400, &secs);
    struct gbx_boot_spec spec = {.start = start,
                                 .ready = ready,
                                 .log = "/tmp/glovebox-start.log",
                                 .what = "template's start command",
                                 .timeout_ms = (int64_t)secs * 1000,
                                 .destroy_on_fail = 1};
    gbx_boot_run(s, base, l, &spec, done, arg);
    free(start);
    free(ready);
}
