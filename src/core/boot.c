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
    char *id, *start, *ready;
    json_t *env;
    struct gbx_aconn *ac;
    struct event *timer;
    uint32_t check_proc; /* the running ready check, 0: none */
    int64_t deadline_ns, t0;
    int last_status;
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
    if (err && l) {
        struct gbx_err *e2 = NULL;
        (void)!gbx_sandboxes_destroy(
            b->s, &gbx_actor_system, l, "sandbox.delete",
            json_pack("{s:s,s:s}", "reason", "not ready", "error", err->msg), &e2);
        gbx_err_free(e2);
        l = NULL;
    }
    if (err == NULL)
        gbx_log_info("sandbox '%s' is ready (%.1f ms after create)", b->id,
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

static void run_check(struct boot *b)
{
    struct gbx_msg *m = gbx_aconn_begin(b->ac, GBX_MSG_SPAWN);
    gbx_msg_put_str(m, GBX_A_ARGV, "/bin/sh");
    gbx_msg_put_str(m, GBX_A_ARGV, "-c");
    gbx_autofree char *cmd = gbx_asprintf("exec >/dev/null 2>&1; %s", b->ready);
    gbx_msg_put_str(m, GBX_A_ARGV, cmd);
    put_env(m, b->env);
    if (gbx_aconn_send(b->ac, check_spawned, b) < 0) {
        struct gbx_err *err = NULL;
        gbx_err_set(&err, EMSGSIZE, GBX_ERR_INVALID, "the template's ready check is too large");
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
                    "sandbox '%s' was not ready in time: its template's ready check ('%s') "
                    "last exited with %d",
                    b->id, b->ready, b->last_status);
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
        gbx_err_set(&err, EIO, GBX_ERR_UNAVAILABLE, "cannot run the template's ready check: %s",
                    msg);
        finish(b, err);
    }
}

static void on_event(void *arg, const struct gbx_frame_hdr *h, const uint8_t *p)
{
    struct boot *b = arg;
    if (h->type != GBX_EV_EXIT || b->check_proc == 0 || h->id != b->check_proc)
        return; /* the start command's exit, or output: not waited for */
    b->check_proc = 0;
    uint32_t code = 0, sig = 0;
    if (gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_CODE, &code) != 1) {
        (void)gbx_attrs_get_u32(p, h->len, GBX_A_EXIT_SIGNAL, &sig);
        code = 128 + sig;
    }
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

void gbx_boot(struct gbx_server *s, struct event_base *base, struct gbx_live *l, char *start,
              char *ready, gbx_boot_fn done, void *arg)
{
    struct boot *b = gbx_xcalloc(1, sizeof(*b));
    b->s = s;
    b->base = base;
    b->id = gbx_xstrdup(l->sb->id);
    b->start = start;
    b->ready = ready;
    b->env = l->env ? json_incref(l->env) : json_object();
    b->done = done;
    b->arg = arg;
    b->t0 = gbx_monotonic_ns();
    uint64_t secs = READY_TIMEOUT_S;
    gbx_autofree char *t = NULL;
    if (gbx_template_conf_get(gbx_server_runtime(s)->state_dir, l->template_name, "ready_timeout",
                              &t) == 0 &&
        t)
        (void)gbx_parse_u64(t, 1, 86400, &secs);
    b->deadline_ns = b->t0 + (int64_t)secs * 1000000000ll;
    b->timer = evtimer_new(base, on_timer, b);
    struct gbx_err *err = NULL;
    if (gbx_aconn_open(base, l->sb, on_event, on_close, b, &b->ac, &err) < 0)
        return finish(b, err);
    if (start) {
        struct gbx_msg *m = gbx_aconn_begin(b->ac, GBX_MSG_SPAWN);
        gbx_msg_put_str(m, GBX_A_ARGV, "/bin/sh");
        gbx_msg_put_str(m, GBX_A_ARGV, "-c");
        gbx_autofree char *cmd = gbx_asprintf("exec >/tmp/glovebox-start.log 2>&1; %s", start);
        gbx_msg_put_str(m, GBX_A_ARGV, cmd);
        put_env(m, b->env);
        if (gbx_aconn_send(b->ac, NULL, NULL) < 0) {
            gbx_err_set(&err, EMSGSIZE, GBX_ERR_INVALID,
                        "the template's start command is too large");
            return finish(b, err);
        }
    }
    if (ready == NULL)
        return finish(b, NULL); /* started; nothing to wait for */
    run_check(b);
}
