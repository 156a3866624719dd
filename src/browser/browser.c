/* SPDX-License-Identifier: MIT */
/* A sandbox's browser (browser.h): the start script run by core/boot.h's start-and-wait, and
 * the DevTools calls on a worker thread. */
#include "browser/browser.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "browser/cdp.h"
#include "core/boot.h"
#include "core/offload.h"
#include "core/sandboxes.h"
#include "core/server.h"
#include "egress/netns.h"
#include "sandbox/ns.h"

#define CALL_MS 20000 /* a DevTools call (a screenshot) must be done within */
#define CLOSE_MS 5000 /* a closed browser must have gone within; else it is killed */

int gbx_browser_opts_check(const struct gbx_browser_opts *o, struct gbx_err **err)
{
    if (o->port == GBX_EGRESS_PROXY_PORT || o->port == GBX_EGRESS_DNS_PORT || o->port > 65535)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "'port' must be 1-65535 and not %d or %d (the daemon's own)",
                           GBX_EGRESS_DNS_PORT, GBX_EGRESS_PROXY_PORT);
    const char *p = o->profile;
    if (p == NULL)
        return 0;
    size_t n = strlen(p);
    int ok = p[0] == '/' && n >= 2 && n < 200 && strstr(p, "/../") == NULL &&
             strcmp(p + n - 3, "/..") != 0 && p[n - 1] != '/';
    for (size_t i = 0; ok && i < n; i++)
        ok = (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
             (p[i] >= '0' && p[i] <= '9') || strchr("._/-", p[i]) != NULL;
    if (!ok)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "'profile' must be an absolute directory path of letters, digits and "
                           "'._/-', without '..' and shorter than 200 bytes");
    return 0;
}

static json_t *state_json(unsigned port, const char *profile, int running, const char *version)
{
    json_t *o = json_pack("{s:b,s:i,s:s,s:s}", "running", running, "port", (int)port, "profile",
                          profile, "log", GBX_BROWSER_LOG);
    if (version)
        json_object_set_new(o, "version", json_string(version));
    return o;
}

/* ---- start ------------------------------------------------------------------------------- */

struct start {
    struct gbx_server *s;
    char id[64], profile[256];
    unsigned port;
    gbx_browser_fn done;
    void *arg;
};

static void started(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct start *st = arg;
    if (l == NULL && err == NULL)
        l = gbx_sandboxes_find_any(st->s, st->id);
    if (l && err == NULL) { /* kept in its row: a restarted daemon knows it (adopt.c) */
        l->browser_port = st->port;
        snprintf(l->browser_profile, sizeof(l->browser_profile), "%s", st->profile);
        gbx_sandboxes_set_attr(
            st->s, l, "browser",
            json_pack("{s:i,s:s}", "port", (int)st->port, "profile", st->profile));
    }
    json_t *state = err ? NULL : state_json(st->port, st->profile, 1, NULL);
    st->done(st->arg, state, err);
    json_decref(state);
    free(st);
}

void gbx_browser_start(struct gbx_server *s, struct gbx_live *l, const struct gbx_browser_opts *o,
                       gbx_browser_fn done, void *arg)
{
    struct start *st = gbx_xcalloc(1, sizeof(*st));
    st->s = s;
    st->done = done;
    st->arg = arg;
    st->port = o->port ? o->port : GBX_BROWSER_PORT;
    snprintf(st->id, sizeof(st->id), "%s", l->sb->id);
    snprintf(st->profile, sizeof(st->profile), "%s", o->profile ? o->profile : GBX_BROWSER_PROFILE);
    /* Chromium runs without its own sandbox (nested user namespaces are refused inside ours:
     * docs/security.md). A profile of a browser that runs is kept; the locks of one that does
     * not (a clone's, a restored snapshot's) are removed, or Chromium would think it is in use
     * by a process with the same pid. The pid file tells the two apart. */
    gbx_autofree char *script = gbx_asprintf(
        "P='%s'; B=\n"
        "for c in /usr/lib/chromium/chromium /usr/bin/chromium /usr/bin/chromium-browser "
        "/usr/bin/google-chrome /opt/google/chrome/chrome; do\n"
        "  [ -x \"$c\" ] && B=$c && break; done\n"
        "[ -n \"$B\" ] || { echo 'glovebox: no Chromium in this sandbox' >&2; exit 127; }\n"
        "mkdir -p \"$P\" || exit 1\n"
        "pid=$(cat \"$P/glovebox.pid\" 2>/dev/null)\n"
        "if [ -n \"$pid\" ] && grep -aq -- \"--user-data-dir=$P\" /proc/$pid/cmdline "
        "2>/dev/null; then exit 0; fi\n"
        "rm -f \"$P/SingletonLock\" \"$P/SingletonSocket\" \"$P/SingletonCookie\" "
        "\"$P/DevToolsActivePort\"\n"
        "echo $$ > \"$P/glovebox.pid\"\n"
        "exec \"$B\" --headless=new --no-sandbox --disable-gpu --no-first-run "
        "--no-default-browser-check --password-store=basic --disable-background-networking "
        "--disable-component-update --disable-sync --disable-breakpad --window-size=1280,800 "
        "--remote-debugging-address=127.0.0.1 --remote-debugging-port=%u "
        "--user-data-dir=\"$P\" about:blank",
        st->profile, st->port);
    /* up once something listens on 127.0.0.1:port in the sandbox's own network namespace */
    gbx_autofree char *ready =
        gbx_asprintf("grep -q ' 0100007F:%04X 00000000:0000 0A ' /proc/net/tcp", st->port);
    struct gbx_boot_spec spec = {.start = script,
                                 .ready = ready,
                                 .log = GBX_BROWSER_LOG,
                                 .user = "user",
                                 .what = "browser",
                                 .timeout_ms = GBX_BROWSER_START_MS,
                                 .fail_on_start_exit = 1};
    gbx_boot_run(s, gbx_server_base(s), l, &spec, started, st);
}

/* ---- DevTools calls on a worker thread --------------------------------------------------- */

enum job_kind { JOB_STATUS, JOB_STOP, JOB_SHOT };

struct job {
    struct gbx_server *s;
    enum job_kind kind;
    char id[64], profile[256];
    pid_t pid; /* the sandbox's init: its network namespace */
    unsigned port;
    int fd_http, fd_ws;
    /* results */
    char *version; /* Chromium's "Browser", or NULL: not running */
    int gone;      /* JOB_STOP: the port refuses connections now */
    uint8_t *png;
    size_t len;
    struct gbx_err *err;
    gbx_browser_fn done;
    gbx_browser_shot_fn shot_done;
    void *arg;
};

static int socket_in(pid_t pid)
{
    return gbx_ns_socket_in(pid, AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

/* Does anything still listen on port? (a connect that is refused: no) */
static int port_open(pid_t pid, unsigned port)
{
    int fd = socket_in(pid);
    if (fd < 0)
        return 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int open = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        open = 1;
    } else if (errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int e = 0;
        socklen_t el = sizeof(e);
        open = poll(&p, 1, 200) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 ||
               e == 0; /* no answer in time: still there */
    }
    close(fd);
    return open;
}

static void job_work(void *arg)
{
    struct job *j = arg;
    struct gbx_cdp *c = NULL;
    int64_t deadline = gbx_monotonic_ns() + CALL_MS * 1000000ll;
    struct gbx_err *cerr = NULL;
    int rc = gbx_cdp_connect(j->fd_http, j->fd_ws, j->port, deadline, &c, &cerr);
    j->fd_http = j->fd_ws = -1;
    if (rc < 0) {
        if (j->kind == JOB_SHOT && cerr && cerr->errnum == ECONNREFUSED) {
            gbx_err_set(&j->err, ECONNREFUSED, GBX_ERR_CONFLICT,
                        "no browser runs in sandbox '%s' (start it: POST "
                        "/v1/sandboxes/%s/browser, glovebox browser start)",
                        j->id, j->id);
            gbx_err_free(cerr);
        } else if (j->kind == JOB_SHOT)
            j->err = cerr;
        else
            gbx_err_free(cerr); /* not running: the answer says so */
        j->gone = 1;
        return;
    }
    json_t *v = gbx_cdp_call(c, NULL, "Browser.getVersion", NULL, NULL);
    const char *prod = json_string_value(json_object_get(v, "product"));
    j->version = gbx_xstrdup(prod ? prod : "unknown");
    json_decref(v);
    if (j->kind == JOB_SHOT)
        (void)!gbx_cdp_screenshot(c, &j->png, &j->len, &j->err);
    if (j->kind == JOB_STOP) {
        /* the answer may not come: Chromium closes the connection as it goes */
        json_decref(gbx_cdp_call(c, NULL, "Browser.close", NULL, NULL));
        int64_t until = gbx_monotonic_ns() + CLOSE_MS * 1000000ll;
        while (!(j->gone = !port_open(j->pid, j->port)) && gbx_monotonic_ns() < until)
            usleep(50 * 1000);
    }
    gbx_cdp_free(c);
}

static void job_free(struct job *j)
{
    if (j->fd_http >= 0)
        close(j->fd_http);
    if (j->fd_ws >= 0)
        close(j->fd_ws);
    free(j->version);
    free(j->png);
    gbx_err_free(j->err);
    free(j);
}

static void forget(struct gbx_server *s, struct gbx_live *l)
{
    l->browser_port = 0;
    if (json_object_get(l->attrs, "browser"))
        gbx_sandboxes_set_attr(s, l, "browser", NULL);
}

static void stop_reply(struct job *j, int killed)
{
    json_t *st = state_json(j->port, j->profile, 0, NULL);
    json_object_set_new(st, "was_running", json_boolean(j->version != NULL));
    if (killed)
        json_object_set_new(st, "killed", json_true());
    j->done(j->arg, st, NULL);
    json_decref(st);
    job_free(j);
}

/* A shell test that passes once the process of the profile's pid file has gone. */
static char *exit_check(const struct job *j)
{
    return gbx_asprintf("pid=$(cat '%s/glovebox.pid' 2>/dev/null); [ -z \"$pid\" ] || "
                        "! kill -0 \"$pid\" 2>/dev/null",
                        j->profile);
}

static void killed(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct job *j = arg;
    if (err) {
        j->done(j->arg, NULL, err);
        return job_free(j);
    }
    if (l == NULL)
        l = gbx_sandboxes_find_any(j->s, j->id);
    if (l)
        forget(j->s, l);
    stop_reply(j, 1);
}

/* Waited for the browser's process to end (err: it did not within CLOSE_MS). */
static void exited(void *arg, struct gbx_live *l, const struct gbx_err *err)
{
    struct job *j = arg;
    if (l == NULL)
        l = gbx_sandboxes_find_any(j->s, j->id);
    if (l && err) {
        /* it did not go: the whole process group, by the pid its start script wrote */
        gbx_autofree char *kill = gbx_asprintf(
            "pid=$(cat '%s/glovebox.pid') && { kill -KILL -- -$pid || kill -KILL $pid; }",
            j->profile);
        gbx_autofree char *gone = exit_check(j);
        struct gbx_boot_spec spec = {.start = kill,
                                     .ready = gone,
                                     .log = "/dev/null",
                                     .user = "user",
                                     .what = "browser's kill",
                                     .timeout_ms = CLOSE_MS};
        return gbx_boot_run(j->s, gbx_server_base(j->s), l, &spec, killed, j);
    }
    if (l)
        forget(j->s, l);
    stop_reply(j, 0);
}

static void job_done(void *arg)
{
    struct job *j = arg;
    struct gbx_live *l = gbx_sandboxes_find_any(j->s, j->id);
    if (j->kind == JOB_SHOT) {
        j->shot_done(j->arg, j->png, j->len, j->err);
        return job_free(j);
    }
    if (j->kind == JOB_STOP && l) {
        /* Chromium closes its DevTools port early in its shutdown and writes its profile
         * (cookies) after: stopped is when its process has gone */
        gbx_autofree char *gone = exit_check(j);
        struct gbx_boot_spec spec = {
            .ready = gone, .user = "user", .what = "browser's exit", .timeout_ms = CLOSE_MS};
        return gbx_boot_run(j->s, gbx_server_base(j->s), l, &spec, exited, j);
    }
    if (j->kind == JOB_STOP)
        return stop_reply(j, 0);
    json_t *st = state_json(j->port, j->profile, j->version != NULL, j->version);
    j->done(j->arg, st, NULL);
    json_decref(st);
    job_free(j);
}

static void job_submit(struct gbx_server *s, struct gbx_live *l, enum job_kind kind,
                       gbx_browser_fn done, gbx_browser_shot_fn shot_done, void *arg)
{
    struct job *j = gbx_xcalloc(1, sizeof(*j));
    j->s = s;
    j->kind = kind;
    j->done = done;
    j->shot_done = shot_done;
    j->arg = arg;
    j->pid = l->sb->init_pid;
    j->port = l->browser_port ? l->browser_port : GBX_BROWSER_PORT;
    snprintf(j->id, sizeof(j->id), "%s", l->sb->id);
    snprintf(j->profile, sizeof(j->profile), "%s",
             l->browser_profile[0] ? l->browser_profile : GBX_BROWSER_PROFILE);
    j->fd_http = socket_in(j->pid);
    j->fd_ws = j->fd_http >= 0 ? socket_in(j->pid) : -1;
    if (j->fd_http < 0 || j->fd_ws < 0) {
        int e = j->fd_http < 0 ? -j->fd_http : -j->fd_ws;
        j->fd_http = j->fd_http < 0 ? -1 : j->fd_http;
        j->fd_ws = -1;
        gbx_err_sys(&j->err, e, "cannot reach sandbox '%s'", j->id);
    } else if (gbx_offload_submit(gbx_server_offload(s), job_work, job_done, j) == 0) {
        return;
    } else {
        gbx_err_set(&j->err, ESHUTDOWN, GBX_ERR_UNAVAILABLE, "the daemon is stopping");
    }
    if (kind == JOB_SHOT)
        shot_done(arg, NULL, 0, j->err);
    else
        done(arg, NULL, j->err);
    job_free(j);
}

void gbx_browser_status(struct gbx_server *s, struct gbx_live *l, gbx_browser_fn done, void *arg)
{
    job_submit(s, l, JOB_STATUS, done, NULL, arg);
}

void gbx_browser_stop(struct gbx_server *s, struct gbx_live *l, gbx_browser_fn done, void *arg)
{
    job_submit(s, l, JOB_STOP, done, NULL, arg);
}

void gbx_browser_screenshot(struct gbx_server *s, struct gbx_live *l, gbx_browser_shot_fn done,
                            void *arg)
{
    job_submit(s, l, JOB_SHOT, NULL, done, arg);
}
