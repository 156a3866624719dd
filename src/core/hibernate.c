/* SPDX-License-Identifier: MIT */
/* Hibernate and wake: a sandbox's processes, memory and files checkpointed to disk with CRIU
 * (src/sandbox/criu.c) on a worker thread, and restored later, also by another daemon.
 *
 * While hibernated a sandbox stays listed (state "hibernated"), keeps its id, token,
 * settings and network policy, and its uid range stays reserved (a stand-in sandbox with no
 * processes holds the slot: gbx_sandbox_hold). Its image is <state>/hibernate/<id>/. Waking
 * restores it under the same id and plumbs its egress again, as after a daemon restart. */
#include "core/hibernate.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/offload.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "core/snapshots.h"
#include "base/clock.h"
#include "base/fault.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "egress/egress.h"
#include "sandbox/criu.h"
#include "sandbox/template.h"

struct job {
    struct gbx_server *s;
    char *id, *dir;
    struct gbx_actor who;     /* who asked: the finish is recorded as theirs */
    struct gbx_sandbox *sb;   /* hibernate: the one dumped; wake: the restored one */
    struct gbx_sandbox *hold; /* hibernate: the stand-in reserving its slot once dumped */
    pid_t init_pid;
    uint32_t uid_slot;
    struct gbx_egress_policy *policy;
    struct gbx_err *err;
    int64_t t0, t_lib; /* t_lib: when the library's work (on the worker) ended */
    int gone;          /* hibernate: the checkpoint freed sb (dumped, or lost) */
    int was_paused;    /* hibernate: paused before (and so again if it fails) */
    int pause_instead; /* hibernate: when it cannot be done, pausing in place will do */
    gbx_hibernate_done_fn done;
    void *arg;
};

static char *image_dir(struct gbx_server *s, const char *id)
{
    return gbx_asprintf("%s/hibernate/%s", gbx_server_runtime(s)->state_dir, id);
}

static void job_free(struct job *j)
{
    gbx_egress_policy_free(j->policy);
    gbx_err_free(j->err);
    free(j->id);
    free(j->dir);
    free(j);
}

/* What the sandbox was created from, for the checkpoint's record (a sandbox adopted after a
 * restart has none yet): its template stacked on its base, its snapshot's layers on top. */
static int keep_spec(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                     struct gbx_err **err)
{
    if (l->sb->saved)
        return 0;
    char **layers = NULL;
    size_t n = 0;
    gbx_autofree char *base = NULL;
    json_t *snap = json_object_get(l->attrs, "snapshot");
    if (gbx_sandboxes_layers(s, who, l->template_name, json_string_value(snap), &layers, &n, &base,
                             err) < 0)
        return -1;
    struct gbx_sandbox_spec spec = {.id = l->sb->id,
                                    .template_name = base,
                                    .limits = l->limits,
                                    .disk_bytes = l->disk_bytes,
                                    .ctl_socket = 1,
                                    .layers = (const char *const *)layers,
                                    .nlayers = n};
    gbx_sandbox_keep_spec(l->sb, &spec);
    gbx_snapshots_layers_free(layers, n);
    return 0;
}

/* ---- hibernate ---------------------------------------------------------------------------- */

static void hib_work(void *arg)
{
    struct job *j = arg;
    (void)!gbx_mkdir_p(j->dir, 0700);
    if (gbx_sandbox_checkpoint(j->sb, j->dir, &j->gone, &j->err) < 0) {
        if (j->gone)
            j->sb = NULL; /* lost, and freed */
        return;
    }
    j->sb = NULL; /* dumped, and freed: its slot released; reserved again at once */
    (void)!gbx_sandbox_hold(gbx_server_runtime(j->s), j->id, j->uid_slot, 1, &j->hold, &j->err);
}

static void rm_work(void *arg)
{
    (void)!gbx_rm_rf(arg);
}

/* The sandbox is back as it was after a hibernate that did not happen. */
static void hib_restored(struct job *j, struct gbx_live *l)
{
    struct gbx_server *s = j->s;
    l->sb = j->sb;
    j->sb = NULL;
    struct gbx_err *e2 = NULL;
    if (gbx_egress_attach(gbx_server_egress(s), l->sb->id, l->sb->init_pid, j->policy, &l->egress,
                          &e2) < 0) {
        gbx_log_error("sandbox '%s': %s", j->id, e2->msg);
        gbx_err_free(e2);
    }
    /* paused before: paused again (or now, when pausing was what the caller wanted) */
    if ((j->was_paused || j->pause_instead) && gbx_sandboxes_pause(s, &j->who, l, 1, &e2) < 0) {
        gbx_log_error("sandbox '%s': %s", j->id, e2->msg);
        gbx_err_free(e2);
    }
    gbx_server_audit(s, &j->who, "sandbox.hibernate_failed", j->id,
                     json_pack("{s:s,s:b}", "reason", j->err->msg, "paused_instead",
                               j->pause_instead && l->paused));
    gbx_log_warn("%s", j->err->msg);
    if (j->pause_instead && l->paused) {
        gbx_err_free(j->err); /* what the caller asked for is done: paused, in memory */
        j->err = NULL;
    }
}

static void hib_done(void *arg)
{
    struct job *j = arg;
    struct gbx_server *s = j->s;
    struct gbx_live *l = gbx_sandboxes_find_any(s, j->id);
    if (l) { /* the placeholder goes; the real one, or the stand-in, takes its place */
        gbx_sandbox_forget(l->sb);
        l->sb = NULL;
    }
    if (l == NULL) {
        /* gone meanwhile (the daemon is stopping): nothing to keep */
        if (j->sb)
            (void)!gbx_sandbox_destroy(j->sb, NULL);
        (void)!gbx_sandbox_destroy(j->hold, NULL);
        rm_work(j->dir);
    } else if (j->err && j->sb) {
        hib_restored(j, l);
        rm_work(j->dir); /* the image of a dump that did not happen */
    } else if (j->err) {
        /* the sandbox was lost on the way (or dumped, but its uid range is taken) */
        (void)!gbx_sandbox_destroy(j->hold, NULL);
        gbx_log_error("hibernate sandbox '%s': %s", j->id, j->err->msg);
        j->done(j->arg, NULL, j->err);
        gbx_sandboxes_drop(s, l, j->id, "hibernate failed");
        rm_work(j->dir);
        job_free(j);
        return;
    } else {
        l->sb = j->hold;
        l->hibernated = 1;
        l->paused = 1;
        if (l->attrs == NULL)
            l->attrs = json_object();
        json_object_set_new(l->attrs, "stopped_ns", json_integer(gbx_realtime_ns()));
        json_object_set_new(l->attrs, "network", gbx_egress_policy_json(j->policy));
        gbx_sandboxes_save(s, l);
        double ms = (double)(gbx_monotonic_ns() - j->t0) / 1e6;
        gbx_server_audit(s, &j->who, "sandbox.hibernate", j->id, json_pack("{s:f}", "ms", ms));
        gbx_log_info("hibernated sandbox '%s' in %.1f ms", j->id, ms);
    }
    if (l)
        l->busy = 0; /* for the reply's view; deletes that waited run below */
    j->done(j->arg, j->err ? NULL : l, j->err);
    if (l)
        gbx_sandboxes_idle(s, l);
    job_free(j);
}

static void hibernate_start(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                            int pause_instead, gbx_hibernate_done_fn done, void *arg)
{
    struct gbx_err *err = NULL;
    const char *why = NULL;
    if (l->hibernated)
        return done(arg, l, NULL);
    if (l->busy) {
        gbx_err_set(&err, EBUSY, GBX_ERR_CONFLICT, "sandbox '%s' is busy", l->sb->id);
        goto fail;
    }
    if (gbx_criu_probe_result(&why) == 0) {
        /* known not to work here: say so at once (or pause in place, if that will do) */
        if (pause_instead) {
            if (!l->paused && gbx_sandboxes_pause(s, who, l, 1, &err) < 0)
                goto fail;
            return done(arg, l, NULL);
        }
        gbx_err_set(&err, ENOTSUP, GBX_ERR_UNAVAILABLE,
                    "hibernate is unavailable on this host: %s (pause keeps a sandbox frozen in "
                    "memory instead)",
                    why);
        goto fail;
    }
    if (keep_spec(s, who, l, &err) < 0)
        goto fail;
    int was_paused = l->paused;
    /* CRIU stops the tree itself; a frozen one it could not seize */
    if (l->paused && gbx_sandboxes_pause(s, who, l, 0, &err) < 0)
        goto fail;
    struct job *j = gbx_xcalloc(1, sizeof(*j));
    j->s = s;
    j->t0 = gbx_monotonic_ns();
    j->id = gbx_xstrdup(l->sb->id);
    j->who = *who;
    j->dir = image_dir(s, j->id);
    j->sb = l->sb;
    j->init_pid = l->sb->init_pid;
    j->uid_slot = l->sb->uid_slot;
    j->was_paused = was_paused;
    j->pause_instead = pause_instead;
    j->policy = gbx_egress_policy_dup(gbx_egress_policy_of(l->egress));
    j->done = done;
    j->arg = arg;
    /* the daemon's listeners in its network namespace are not part of the image */
    gbx_egress_detach(l->egress);
    l->egress = NULL;
    l->busy = GBX_BUSY_WORKER;
    atomic_store(&j->sb->cancel, 0);
    l->cancel = &j->sb->cancel; /* a delete stops the dump (the worker owns j->sb) */
    /* the worker owns the sandbox now; the loop sees a placeholder with its id */
    GBX_BUG_ON(gbx_sandbox_hold(gbx_server_runtime(s), j->id, j->uid_slot, 0, &l->sb, NULL) < 0);
    if (gbx_offload_submit(gbx_server_offload(s), hib_work, hib_done, j) < 0) {
        gbx_err_set(&j->err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
        hib_done(j); /* untouched: alive */
    }
    return;
fail:
    done(arg, NULL, err);
    gbx_err_free(err);
}

void gbx_hibernate(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                   gbx_hibernate_done_fn done, void *arg)
{
    hibernate_start(s, who, l, 0, done, arg);
}

void gbx_hibernate_or_pause(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                            gbx_hibernate_done_fn done, void *arg)
{
    hibernate_start(s, who, l, 1, done, arg);
}

/* ---- wake --------------------------------------------------------------------------------- */

static void wake_work(void *arg)
{
    struct job *j = arg;
    if (gbx_sandbox_restore(gbx_server_runtime(j->s), j->dir, j->id, &j->sb, &j->err) < 0) {
        j->sb = NULL;
    } else {
        gbx_fault_point("wake.restored");
        /* its agent answers on this thread, where waiting blocks nothing */
        if (gbx_sandboxes_hello(j->sb, &j->err) < 0) {
            (void)!gbx_sandbox_destroy(j->sb, NULL);
            j->sb = NULL;
        }
    }
    j->t_lib = gbx_monotonic_ns();
}

static void wake_done(void *arg)
{
    struct job *j = arg;
    struct gbx_server *s = j->s;
    struct gbx_live *l = gbx_sandboxes_find_any(s, j->id);
    if (j->err == NULL && l &&
        gbx_egress_attach(gbx_server_egress(s), j->id, j->sb->init_pid, j->policy, &l->egress,
                          &j->err) == 0) {
        /* the stand-in let go without releasing the slot the restore holds again */
        gbx_sandbox_forget(l->sb);
        l->sb = j->sb;
        j->sb = NULL;
        l->busy = 0;
        l->hibernated = 0;
        l->paused = 0;
        json_object_del(l->attrs, "stopped_ns");
        gbx_sandboxes_save(s, l);
        int64_t now = gbx_monotonic_ns();
        double ms = (double)(now - j->t0) / 1e6, lib = (double)(j->t_lib - j->t0) / 1e6;
        gbx_server_audit(s, &j->who, "sandbox.wake", j->id, json_pack("{s:f}", "ms", ms));
        gbx_log_info("woke sandbox '%s' in %.1f ms (restore and its agent %.1f ms, then its "
                     "egress %.1f ms)",
                     j->id, ms, lib, (double)(now - j->t_lib) / 1e6);
        char *d = gbx_xstrdup(j->dir);
        if (gbx_offload_submit(gbx_server_offload(s), rm_work, free, d) < 0)
            free(d);
    } else {
        if (j->sb) /* restored, but it cannot be served: not kept half-way */
            (void)!gbx_sandbox_destroy(j->sb, NULL);
        j->sb = NULL;
        if (l) {
            l->busy = 0; /* still hibernated: its image is intact, waking may be retried */
            if (gbx_sandbox_hold_renew(l->sb) < 0)
                gbx_log_error("sandbox '%s': its uid range was taken while waking failed; "
                              "it cannot be restored until that sandbox is gone",
                              j->id);
        }
        if (j->err == NULL)
            gbx_err_set(&j->err, ENOENT, GBX_ERR_NOT_FOUND, "sandbox '%s' was deleted", j->id);
    }
    j->done(j->arg, j->err ? NULL : l, j->err);
    if (l)
        gbx_sandboxes_idle(s, l); /* deletes that waited for the wake */
    job_free(j);
}

void gbx_hibernate_wake(struct gbx_server *s, const struct gbx_actor *who, struct gbx_live *l,
                        gbx_hibernate_done_fn done, void *arg)
{
    struct gbx_err *err = NULL;
    if (!l->hibernated)
        return done(arg, l, NULL);
    if (l->busy) {
        gbx_err_set(&err, EBUSY, GBX_ERR_CONFLICT, "sandbox '%s' is being hibernated or woken",
                    l->sb->id);
        done(arg, NULL, err);
        gbx_err_free(err);
        return;
    }
    struct job *j = gbx_xcalloc(1, sizeof(*j));
    j->s = s;
    j->t0 = gbx_monotonic_ns();
    j->id = gbx_xstrdup(l->sb->id);
    j->who = *who;
    j->dir = image_dir(s, j->id);
    json_t *net = json_object_get(l->attrs, "network");
    if (gbx_egress_policy_parse(net, gbx_egress_default_mode(gbx_server_egress(s)), &j->policy,
                                &err) < 0) {
        gbx_err_free(err);
        err = NULL;
        j->policy = gbx_egress_policy_new(GBX_EGRESS_NONE); /* fail closed */
    }
    j->done = done;
    j->arg = arg;
    l->busy = GBX_BUSY_WORKER;
    if (gbx_offload_submit(gbx_server_offload(s), wake_work, wake_done, j) < 0) {
        gbx_err_set(&j->err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
        wake_done(j);
    }
}

pid_t gbx_hibernate_woken_pid(struct gbx_server *s, const char *id)
{
    gbx_autofree char *d = image_dir(s, id);
    gbx_autofree char *p = gbx_asprintf("%s/restore.pid", d);
    gbx_autofree char *t = NULL;
    if (gbx_read_file(p, 64, &t, NULL) < 0)
        return 0;
    long pid = strtol(t, NULL, 10);
    return pid > 1 && pid < INT32_MAX && kill((pid_t)pid, 0) == 0 ? (pid_t)pid : 0;
}

int gbx_hibernate_remove_stale(struct gbx_server *s, const char *id)
{
    gbx_autofree char *d = image_dir(s, id);
    if (access(d, F_OK) < 0)
        return 0;
    rm_work(d); /* now, not behind: a hibernate of id may start at once and make it again */
    return 1;
}

void gbx_hibernate_discard(struct gbx_server *s, const char *id)
{
    char *d = image_dir(s, id);
    if (gbx_offload_submit(gbx_server_offload(s), rm_work, free, d) < 0) {
        rm_work(d);
        free(d);
    }
}
