/* SPDX-License-Identifier: MIT */
/* gloveboxd: the Glovebox daemon. One libevent loop; the admin API on a unix socket.
 *
 *   gloveboxd [--state-dir DIR] [--runtime-dir DIR] [--log-format text|json]
 *             [--log-level debug|info|warn|error] [--kill-on-exit]
 *
 * SIGTERM or SIGINT: stop accepting and exit; sandboxes keep running for the next daemon to
 * adopt (or are destroyed with --kill-on-exit). SIGHUP (or POST /v1/daemon/reload, `glovebox
 * daemon reload`): read the configuration file and the flags again and apply what a running
 * daemon can change (settings.c's table says which). */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <unistd.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "core/limits.h"
#include "core/server.h"
#include "core/actor.h"
#include "daemon/listen.h"
#include "daemon/settings.h"
#include "ingress/ingress.h"
#include "session/sessions.h"
#include "sandbox/backend.h"
#include "base/log.h"
#include "base/conf.h"
#include "base/fileutil.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/ratelimit.h"
#include "base/sched.h"

static const char usage[] =
    "usage: gloveboxd [options]\n"
    "\n"
    "  --config FILE          settings as 'key = value' lines, keys as the flags below\n"
    "                         (default " GBX_DEFAULT_CONFIG " if it exists, or\n"
    "                         $GLOVEBOX_CONFIG); flags override the file. SIGHUP or\n"
    "                         'glovebox daemon reload' reads both again and applies what\n"
    "                         a running daemon can change ('glovebox daemon config' says\n"
    "                         which, and where each value in force came from)\n"
    "  --state-dir DIR        templates and the database (default /var/lib/glovebox,\n"
    "                         or $GLOVEBOX_STATE_DIR)\n"
    "  --runtime-dir DIR      sockets and locks (default /run/glovebox, or\n"
    "                         $GLOVEBOX_RUNTIME_DIR); the admin API is DIR/api.sock\n"
    "  --log-format text|json\n"
    "  --log-level debug|info|warn|error   (default info)\n"
    "  --listen ADDR:PORT[,ADDR:PORT...]   also serve HTTP on TCP (up to 8 addresses);\n"
    "                         every request there needs an API key\n"
    "  --pool N               keep N fresh sandboxes of the default template ready\n"
    "                         (create then takes one: well under a millisecond)\n"
    "  --max-body SIZE        largest JSON request body (default 1M)\n"
    "  --max-upload SIZE      largest file upload, held in memory while written (default 64M)\n"
    "  --kill-on-exit         destroy all sandboxes when stopping\n"
    "  --rate-limit N[/BURST] requests per second per API key, over every route on TCP\n"
    "                         (default 100/200; 0 = off; alias: $GLOVEBOX_E2B_RATE)\n"
    "  --max-conns N          open TCP connections in all (default 1024; 0 = no cap)\n"
    "  --max-conns-per-ip N   open TCP connections from one address (default 256; 0 = no\n"
    "                         cap); the admin socket is exempt from both caps\n"
    "  --header-timeout DURATION   a request head must arrive within it (default 10s)\n"
    "  --body-timeout DURATION     longest pause inside a request body (default 60s)\n"
    "  --body-min-rate SIZE   slowest average body rate per second, after its first 5 s\n"
    "                         (default 16K; 0 = off)\n"
    "  --idle-timeout DURATION     an idle keep-alive connection closes (default 60s)\n"
    "  --default-memory SIZE  limits of a sandbox whose create does not say: memory\n"
    "  --default-pids N       (default 512M), processes (256), CPUs (1), writable layer\n"
    "  --default-cpus N       and /tmp size (1G); 0 for memory, pids or cpus: no limit\n"
    "  --default-disk SIZE    (with its --max-* 0 too)\n"
    "  --max-memory SIZE      the most a create may ask for: memory (default 8G, at most\n"
    "  --max-pids N           half the RAM), processes (4096), CPUs (every CPU), disk\n"
    "  --max-cpus N           (64G), timeout (default none; a create without a timeout\n"
    "  --max-disk SIZE        then gets this one); above: 400 naming the field; 0: none\n"
    "  --max-timeout DURATION\n"
    "  --quota-sandboxes N    per API key (the admin socket has none): live sandboxes\n"
    "  --quota-memory SIZE    (default 64), the sum of their memory limits (32G) and of\n"
    "  --quota-disk SIZE      their disks (64G), snapshots (256), sessions (256),\n"
    "  --quota-snapshots N    artifacts (10000) and their bytes (16G); over: 429 naming\n"
    "  --quota-sessions N     the quota; 0: none. A key's own quota (glovebox apikey\n"
    "  --quota-artifacts N    quota) overrides these; templates (32)\n"
    "  --quota-artifact-bytes SIZE\n"
    "  --quota-templates N\n"
    "  --egress-default MODE  network of sandboxes whose create does not say:\n"
    "                         policy (default: deny unless a rule allows), none, open\n"
    "  --egress-hosts LIST    'name=IPv4 ...': upstream addresses the proxy uses for\n"
    "                         these names instead of the host's resolver (tests, pinning)\n"
    "  --egress-resolver ADDR the nameserver (IPv4[:PORT]) for upstream names instead of\n"
    "                         the host's resolv.conf and hosts file\n"
    "  --egress-extra-ca FILE extra PEM trust anchors for upstream TLS (besides the host's)\n"
    "  --egress-max-conns N   open egress connections per sandbox (default 256)\n"
    "  --ingress-domain D     '<port>-<id>.D' on the TCP listener reaches that port inside\n"
    "                         the sandbox (D: sandbox.example.com, or localhost:7070);\n"
    "                         /v1/sandboxes/<id>/ports/<port>/... works without it\n"
    "  --audit-rate N[/B]     egress audit rows (DNS answers, connections, requests) per\n"
    "                         second per sandbox per kind, burst B (default 20/100); rows\n"
    "                         beyond it are counted and written as one summary row; 0: all\n"
    "  --state-reserve SIZE   free space the state dir keeps: below it new work (create,\n"
    "                         exec, session calls, snapshots, publishes, imports, uploads)\n"
    "                         is refused with 507 (default the smaller of 64M and 1% of\n"
    "                         its file system; 0: no check)\n"
    "  --retain-snapshots R   retention of snapshots: age=DURATION,count=N,size=SIZE\n"
    "                         (any of them; default none: kept until deleted)\n"
    "  --retain-artifacts R   the same for artifacts\n"
    "  --retain-sessions R    sessions (and their logs) by last activity: age=,count=\n"
    "  --retain-stopped R     paused sandboxes by time paused: age=,count=\n"
    "  --gc-interval DURATION how often the collector runs (default 60s)\n"
    "  --hibernate-timeout DURATION   longest a criu dump or restore may take before it\n"
    "                         is stopped and the hibernate or wake fails cleanly (default 2m)\n"
    "  --helper-timeout DURATION      the same for other helpers: tar of a writable layer,\n"
    "                         debootstrap (default 30m)\n"
    "  --hello-timeout DURATION       longest a new sandbox's init may take to answer its\n"
    "                         first HELLO before the sandbox is torn down (default 30s)\n"
    "  --loop-priority N      run the event loop N nice levels above everything it starts\n"
    "                         (sandboxes, workers, helpers), so that it answers while they\n"
    "                         saturate the CPUs, in a CPU group of its own weighted the\n"
    "                         same (default 10; 0 for the same priority)\n"
    "  -h, --help\n";

/* Every live sandbox holds descriptors (its agent connection, pidfd, cgroup); a thousand of
 * them need more than the usual soft limit of 1024. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            gbx_log_warn("cannot raise the open-file limit to %llu",
                         (unsigned long long)rl.rlim_max);
    }
}

struct stopping {
    struct event_base *base;
    struct gbx_listeners *net;
    int signals;
};

/* SIGTERM/SIGINT: stop accepting and end the open streams cleanly, give their last bytes a
 * moment to go out, then leave the loop. A second signal leaves at once. */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct stopping *st = arg;
    if (st->signals++ > 0) {
        event_base_loopbreak(st->base);
        return;
    }
    gbx_log_info("received signal %d, stopping", (int)sig);
    struct timeval grace = {0, 200000};
    if (gbx_listen_drain(st->net))
        event_base_loopexit(st->base, &grace);
    else
        event_base_loopbreak(st->base);
}

/* The running daemon's settings, and the ones they replaced (kept until exit: the server
 * and the listeners may still point into them). */
struct daemon {
    int argc;
    char **argv;
    struct event_base *base;
    struct gbx_server *srv;
    struct gbx_listeners *net;
    struct gbx_settings *st;
    struct gbx_ingress *ingress;
    struct old_settings {
        struct old_settings *next;
        struct gbx_settings *st;
    } * old;
    unsigned reloads;
};

static void daemon_release(struct daemon *d)
{
    gbx_settings_release(d->st);
    free(d->st);
    while (d->old) {
        struct old_settings *o = d->old;
        d->old = o->next;
        gbx_settings_release(o->st);
        free(o->st);
        free(o);
    }
}

static json_t *daemon_config(void *arg)
{
    struct daemon *d = arg;
    json_t *j = gbx_settings_describe(d->st);
    const char *addrs[GBX_LISTEN_MAX];
    size_t n = gbx_listen_tcp_addrs(d->net, addrs, GBX_LISTEN_MAX);
    json_t *tcp = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(tcp, json_string(addrs[i]));
    json_object_set_new(j, "listening", tcp);
    json_object_set_new(j, "reloads", json_integer(d->reloads));
    if (d->st->pending_error)
        json_object_set_new(j, "last_reload_error", json_string(d->st->pending_error));
    return j;
}

/* Read the file and the flags again and apply what changed: the listeners first (the one
 * step that can fail on a good file: an address in use), then the rest. A file that does
 * not parse, or an address that cannot be served, changes nothing. */
static int daemon_reload(void *arg, const struct gbx_actor *who, json_t **report,
                         struct gbx_err **err)
{
    struct daemon *d = arg;
    struct gbx_settings *nw = gbx_xcalloc(1, sizeof(*nw));
    char msg[512];
    int help = 0;
    json_t *changed = json_array(), *restart = json_array();
    if (gbx_settings_load(nw, d->argc, d->argv, &help, msg, sizeof(msg)) < 0) {
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "%s", msg);
        goto fail;
    }
    gbx_settings_diff(d->st, nw, changed, restart);
    /* the listeners first: binding a new address is the one step that can fail (the rest of
     * their settings, and the core's, are applied whether they changed or not: idempotent) */
    if (gbx_listen_reconfigure(d->net, &nw->lcfg, err) < 0)
        goto fail;
    gbx_server_reconfigure(d->srv, &nw->cfg);
    gbx_ingress_set_domain(d->ingress, nw->cfg.ingress_domain);
    gbx_ingress_set_max_per_ip(d->ingress, nw->lcfg.http.max_conns_per_ip);
    gbx_log_set_level((enum gbx_log_level)nw->log_level);
    gbx_log_set_json(nw->log_json);
    struct old_settings *o = gbx_xcalloc(1, sizeof(*o));
    o->st = d->st;
    o->next = d->old;
    d->old = o;
    d->st = nw;
    d->reloads++;
    *report = json_pack("{s:s,s:b,s:O,s:O}", "file", nw->config_path, "file_found",
                        nw->config_found, "changed", changed, "restart_needed", restart);
    gbx_server_audit(d->srv, who, "daemon.reload", NULL, json_deep_copy(*report));
    {
        char *c = json_dumps(changed, JSON_COMPACT), *r = json_dumps(restart, JSON_COMPACT);
        gbx_log_info("reloaded '%s': changed %s%s%s", nw->config_path, c,
                     json_array_size(restart) ? "; a restart is needed for " : "",
                     json_array_size(restart) ? r : "");
        free(c);
        free(r);
    }
    json_decref(changed);
    json_decref(restart);
    return 0;
fail:
    gbx_settings_release(nw);
    free(nw);
    free(d->st->pending_error);
    d->st->pending_error = gbx_xstrdup((*err)->msg);
    gbx_log_error("reload: %s; the settings in force are kept", (*err)->msg);
    gbx_server_audit(d->srv, who, "daemon.reload", NULL, json_pack("{s:s}", "error", (*err)->msg));
    json_decref(changed);
    json_decref(restart);
    return -1;
}

static void ingress_metrics(void *arg, struct evbuffer *b)
{
    gbx_ingress_metrics(arg, b);
}

static const struct gbx_daemon_ops daemon_ops = {.config = daemon_config, .reload = daemon_reload};

/* SIGHUP: reload; the log says what changed, or why nothing did. */
static void on_sighup(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    json_t *report = NULL;
    struct gbx_err *err = NULL;
    gbx_log_info("received SIGHUP: reloading the settings");
    if (daemon_reload(arg, &gbx_actor_system, &report, &err) < 0)
        gbx_err_free(err);
    json_decref(report);
}
int main(int argc, char **argv)
{
    struct daemon d = {.argc = argc, .argv = argv};
    d.st = gbx_xcalloc(1, sizeof(*d.st));
    {
        char msg[512];
        int help = 0;
        if (gbx_settings_load(d.st, argc, argv, &help, msg, sizeof(msg)) < 0) {
            fprintf(stderr, "gloveboxd: %s\n", msg);
            gbx_settings_release(d.st);
            free(d.st);
            return 2;
        }
        if (help) {
            fputs(usage, stdout);
            gbx_settings_release(d.st);
            free(d.st);
            return 0;
        }
    }
    gbx_log_set_level((enum gbx_log_level)d.st->log_level);
    gbx_log_set_json(d.st->log_json);
    struct gbx_server_config cfg = d.st->cfg;
    struct gbx_listen_config lcfg = d.st->lcfg;
    int loop_nice = d.st->loop_nice;
    signal(SIGPIPE, SIG_IGN);
    raise_nofile();
    /* Per-connection buffers are a few hundred KiB: keep them mmap'ed, so that freeing one
     * returns it to the system (glibc would otherwise raise its threshold after the first
     * free and serve them from a heap that only grows). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    struct event_base *base = event_base_new();
    /* three priorities: 0 urgent, 1 (the default) requests and streams, 2 background work
     * such as refilling the warm pool, which runs only when nothing else is ready */
    if (base == NULL || event_base_priority_init(base, 3) < 0) {
        fprintf(stderr, "gloveboxd: cannot create the event loop\n");
        return 1;
    }
    struct gbx_server *srv = NULL;
    struct gbx_err *err = NULL;
    struct gbx_listeners *net = NULL;
    d.base = base;
    struct gbx_sessions *sessions = NULL;
    /* the core, then the session engine above it (the core keeps it: gbx_session_ops), then
     * the listeners that let requests in */
    int bad = gbx_server_new(base, &cfg, &srv, &err) < 0 ||
              gbx_sessions_new(srv, base, gbx_server_runtime(srv)->state_dir, &sessions, &err) < 0;
    if (!bad) {
        gbx_server_set_sessions(srv, sessions, &gbx_sessions_ops);
        /* TCP connections to "<port>-<id>.<ingress domain>" are ingress's, not the API's */
        d.ingress = gbx_ingress_new(srv, cfg.ingress_domain);
        gbx_ingress_set_max_per_ip(d.ingress, lcfg.http.max_conns_per_ip);
        gbx_server_set_metrics_extra(srv, ingress_metrics, d.ingress);
        lcfg.takeover = &gbx_ingress_takeover;
        lcfg.takeover_arg = d.ingress;
        bad = gbx_listen_start(srv, &lcfg, &net, &err) < 0;
    }
    if (bad) {
        gbx_log_error("%s", err->msg);
        gbx_err_free(err);
        gbx_listen_free(net);
        gbx_ingress_free(d.ingress);
        gbx_server_free(srv);
        event_base_free(base);
        daemon_release(&d);
        return 1;
    }
    d.srv = srv;
    d.net = net;
    gbx_server_set_daemon(srv, &daemon_ops, &d);
    /* the loop answers first: sandboxes that saturate the CPUs must not slow its replies
     * (worker threads, helpers and sandboxes run at the process's own priority) */
    if (loop_nice > 0 && gbx_sched_boost_self(loop_nice) < 0)
        gbx_log_warn("cannot raise the event loop's priority (CAP_SYS_NICE?): it runs at the "
                     "same priority as the sandboxes");
    /* and its own CPU group, as heavy: nice orders only the threads of one group, and the
     * sandboxes (their groups), other sessions and services compete as groups */
    if (loop_nice > 0) {
        const char *scope = "";
        const char *cpu_dir = gbx_server_cpu_dir(srv, &scope);
        char name[64];
        snprintf(name, sizeof(name), "%sgloveboxd-loop", scope);
        int r = gbx_sched_boost_group(cpu_dir, name, loop_nice);
        if (r < 0 && r != -ENOTSUP)
            gbx_log_warn("cannot give the event loop its own CPU group '%s/%s': %s", cpu_dir, name,
                         strerror(-r));
        /* the store writer too: the loop's own writes wait for the write lock it holds, and
         * a writer preempted by the sandboxes mid-transaction would hold the loop up */
        int wt = gbx_server_writer_tid(srv);
        if (wt > 0 && (r = gbx_sched_boost_thread(wt)) < 0)
            gbx_log_warn("cannot raise the store writer's priority: %s", strerror(-r));
    }
    struct stopping stopping = {.base = base, .net = net};
    struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, &stopping);
    struct event *sigint = evsignal_new(base, SIGINT, on_signal, &stopping);
    struct event *sighup = evsignal_new(base, SIGHUP, on_sighup, &d);
    event_add(sigterm, NULL);
    event_add(sigint, NULL);
    event_add(sighup, NULL);
    if (d.st->config_found)
        gbx_log_info("settings from '%s' and the command line; SIGHUP re-reads them",
                     d.st->config_path);
    gbx_log_info("serving on '%s'", gbx_server_socket_path(srv));
    event_base_dispatch(base);
    gbx_listen_stop(net);
    gbx_ingress_free(d.ingress); /* its connections end with the listeners' */
    d.ingress = NULL;
    gbx_server_shutdown(srv, d.st->kill_on_exit);
    gbx_server_free(srv); /* the store writer's thread ends with it */
    gbx_listen_free(net); /* the front doors, after the servers that used them */
    gbx_sched_release();
    event_free(sigterm);
    event_free(sigint);
    event_free(sighup);
    event_base_free(base);
    gbx_log_info("stopped");
    daemon_release(&d);
    return 0;
}
