/* SPDX-License-Identifier: MIT */
/* Finding CRIU, running it under deadlines, and probing once whether it can dump and restore
 * on this kernel at all (docs/hibernate.md); checkpoint and restore are in criu.c. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/child.h"
#include "base/conf.h"
#include "base/fileutil.h"
#include "base/mem.h"
#include "sandbox/criu.h"
#include "sandbox/criu_int.h"

/* ---- running programs -------------------------------------------------------------------- */

void gbx_criu_arg(struct gbx_criu_args *a, const char *s)
{
    GBX_BUG_ON(a->n + 1 >= GBX_ARRAY_SIZE(a->v));
    a->v[a->n++] = gbx_xstrdup(s);
    a->v[a->n] = NULL;
}

void gbx_criu_args_free(struct gbx_criu_args *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    a->n = 0;
}

int64_t gbx_criu_timeout(const struct gbx_runtime *rt)
{
    return rt && rt->criu_timeout_ms > 0 ? rt->criu_timeout_ms : GBX_DEFAULT_CRIU_TIMEOUT_MS;
}

int64_t gbx_criu_helper_timeout(const struct gbx_runtime *rt)
{
    return rt && rt->helper_timeout_ms > 0 ? rt->helper_timeout_ms : GBX_DEFAULT_HELPER_TIMEOUT_MS;
}

/* Run argv under a deadline (gbx_child_run): stdout into *out when out is not NULL, keep_fd
 * (or -1) as fd 3, stopped early when cancel (may be NULL) is set. The wait status, or
 * -ETIMEDOUT / -ECANCELED / -errno. */
int gbx_criu_run(char *const argv[], char *out, size_t outsz, int keep_fd, int64_t timeout_ms,
                 const atomic_int *cancel)
{
    struct gbx_child_opts o = {
        .out = out, .outsz = outsz, .keep_fd = keep_fd, .timeout_ms = timeout_ms, .cancel = cancel};
    return gbx_child_run(argv, &o);
}

static int criu_version_ok(const char *path)
{
    char out[256];
    struct gbx_criu_args a = {.n = 0};
    gbx_criu_arg(&a, path);
    gbx_criu_arg(&a, "--version");
    int st = gbx_criu_run(a.v, out, sizeof(out), -1, 10000, NULL);
    gbx_criu_args_free(&a);
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 0;
    const char *v = strstr(out, "Version: ");
    return v && atoi(v + 9) >= 4;
}

static char *criu_path;

static int try_candidate(const char *p)
{
    if (access(p, X_OK) != 0 || !criu_version_ok(p))
        return 0;
    criu_path = gbx_xstrdup(p);
    return 1;
}

static int criu_find(const char **path, struct gbx_err **err)
{
    if (criu_path) {
        *path = criu_path;
        return 0;
    }
    const char *env = getenv("GLOVEBOX_CRIU");
    if (env && *env) {
        if (try_candidate(env)) {
            *path = criu_path;
            return 0;
        }
        return gbx_err_set(err, ENOENT, GBX_ERR_UNAVAILABLE,
                           "GLOVEBOX_CRIU='%s' is not a runnable CRIU >= 4", env);
    }
    /* the source tree's .deps: the binary lives in build/ (or build/tests/...), or we run
     * from the tree */
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        for (int up = 0; up < 4; up++) {
            char *slash = strrchr(exe, '/');
            if (slash == NULL || slash == exe)
                break;
            *slash = '\0';
            gbx_autofree char *p = gbx_asprintf("%s/.deps/criu/bin/criu", exe);
            if (try_candidate(p)) {
                *path = criu_path;
                return 0;
            }
        }
    }
    if (try_candidate(".deps/criu/bin/criu")) {
        *path = criu_path;
        return 0;
    }
    const char *pathenv = getenv("PATH");
    gbx_autofree char *dirs = gbx_xstrdup(pathenv ? pathenv : "/usr/sbin:/usr/bin:/sbin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        gbx_autofree char *p = gbx_asprintf("%s/criu", d);
        if (try_candidate(p)) {
            *path = criu_path;
            return 0;
        }
    }
    return gbx_err_set(err, ENOENT, GBX_ERR_UNAVAILABLE,
                       "hibernate needs CRIU >= 4 (Debian 12's 3.17 does not work on this "
                       "kernel): run scripts/criu.sh, or set GLOVEBOX_CRIU");
}

/* daemon worker threads hibernate and restore at the same time */
static pthread_mutex_t criu_mu = PTHREAD_MUTEX_INITIALIZER;

int gbx_criu_available(const char **path, struct gbx_err **err)
{
    pthread_mutex_lock(&criu_mu);
    int r = criu_find(path, err);
    pthread_mutex_unlock(&criu_mu);
    return r;
}

/* ---- can CRIU work here? ---------------------------------------------------------------- */

#define PROBE_TIMEOUT_MS 15000
#define PROBE_CONF "criu-probe.conf"
/* The answer for the whole host too: a kernel build does not change until a reboot clears
 * /run, and a daemon on a fresh state dir (every test) would otherwise wait 15 s for a dump
 * that hangs on such a kernel before it knows. */
#define PROBE_HOST_CONF "/run/glovebox-criu-probe.conf"

static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t probe_cv = PTHREAD_COND_INITIALIZER;
static int probe_state = -1, probing; /* -1 unknown, 0 unusable, 1 usable */
static char probe_why[768];
/* set by a daemon that is stopping: a probe still running ends at once, unanswered */
static atomic_int probe_stop;

/* What the cached answer is for: this kernel build and this CRIU binary. */
static char *probe_key(const char *criu)
{
    struct utsname u;
    struct stat st;
    if (uname(&u) < 0 || stat(criu, &st) < 0)
        return NULL;
    return gbx_asprintf("%s %s | %s %lld %lld", u.release, u.version, criu, (long long)st.st_size,
                        (long long)st.st_mtime);
}

struct probe_cache {
    char *key, *why;
    int ok;
};

static int probe_conf_line(void *arg, const char *key, const char *value, unsigned line)
{
    struct probe_cache *c = arg;
    (void)line;
    if (strcmp(key, "for") == 0) {
        free(c->key);
        c->key = gbx_xstrdup(value);
    } else if (strcmp(key, "usable") == 0) {
        c->ok = strcmp(value, "yes") == 0;
    } else if (strcmp(key, "why") == 0) {
        free(c->why);
        c->why = gbx_xstrdup(value);
    }
    return 0;
}

/* A throwaway process, dumped (which kills it) and restored, each under a deadline: on some
 * builds of this kernel criu dump never returns (docs/hibernate.md). 1, or 0 with why. */
static int probe_run(struct gbx_runtime *rt, const char *criu, char *why, size_t whysz)
{
    gbx_autofree char *dir = gbx_asprintf("%s/criu-probe", rt->runtime_dir);
    gbx_autofree char *pidfile = gbx_asprintf("%s/restored.pid", dir);
    (void)!gbx_rm_rf(dir);
    if (gbx_mkdir_p(dir, 0700) < 0) {
        snprintf(why, whysz, "cannot create '%s'", dir);
        return 0;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whysz, "cannot fork a test process: %s", strerror(errno));
        return 0;
    }
    if (pid == 0) {
        gbx_child_prepare();
        (void)setsid();
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            (void)dup2(null, 0);
            (void)dup2(null, 1);
            (void)dup2(null, 2);
        }
        syscall(SYS_close_range, 3, ~0U, 0);
        execlp("sleep", "sleep", "600", (char *)NULL);
        _exit(127);
    }
    gbx_autofree char *spid = gbx_asprintf("%d", (int)pid);
    static const char *const dumpv[] = {"dump", "-t",       NULL,  "-D",         NULL,
                                        "-o",   "dump.log", "-v4", "--shell-job"};
    struct gbx_criu_args a = {.n = 0};
    gbx_criu_arg(&a, criu);
    for (size_t i = 0; i < GBX_ARRAY_SIZE(dumpv); i++)
        gbx_criu_arg(&a, dumpv[i] ? dumpv[i] : i == 2 ? spid : dir);
    int ok = 0;
    char how[96];
    gbx_autofree char *text = NULL; /* before the first goto: it is freed at out */
    usleep(20000);                  /* let it reach its exec */
    int st = gbx_criu_run(a.v, NULL, 0, -1, PROBE_TIMEOUT_MS, &probe_stop);
    gbx_criu_args_free(&a);
    (void)kill(pid, SIGKILL); /* dumped: gone already; otherwise now */
    (void)GBX_RETRY(waitpid(pid, NULL, 0));
    if (st == -ECANCELED)
        goto stopped;
    if (st != 0) {
        gbx_autofree char *log = gbx_asprintf("%s/dump.log", dir);
        gbx_autofree char *lines = gbx_criu_log_errors(log);
        if (st == -ETIMEDOUT)
            snprintf(why, whysz,
                     "criu dump of a test process did not finish within %d s: it "
                     "hangs on this kernel (its log: %s)",
                     PROBE_TIMEOUT_MS / 1000, log);
        else
            snprintf(why, whysz, "criu dump of a test process failed (%s): %s",
                     gbx_child_status_str(st, PROBE_TIMEOUT_MS, how, sizeof(how)), lines);
        goto out;
    }
    static const char *const restorev[] = {
        "restore",   "-D", NULL, "-o", "restore.log", "-v4", "--shell-job", "--restore-detached",
        "--pidfile", NULL};
    gbx_criu_arg(&a, criu);
    for (size_t i = 0; i < GBX_ARRAY_SIZE(restorev); i++)
        gbx_criu_arg(&a, restorev[i] ? restorev[i] : i == 2 ? dir : pidfile);
    st = gbx_criu_run(a.v, NULL, 0, -1, PROBE_TIMEOUT_MS, &probe_stop);
    gbx_criu_args_free(&a);
    if (gbx_read_file(pidfile, 64, &text, NULL) == 0 && atoi(text) > 1) {
        pid_t rp = atoi(text);
        (void)kill(rp, SIGKILL);
        (void)waitpid(rp, NULL, WNOHANG); /* ours only when this process is a subreaper */
    }
    if (st == -ECANCELED)
        goto stopped;
    if (st != 0) {
        gbx_autofree char *log = gbx_asprintf("%s/restore.log", dir);
        gbx_autofree char *lines = gbx_criu_log_errors(log);
        snprintf(why, whysz, "criu restore of a test process failed (%s): %s",
                 gbx_child_status_str(st, PROBE_TIMEOUT_MS, how, sizeof(how)), lines);
        goto out;
    }
    ok = 1;
    snprintf(why, whysz, "criu dumped and restored a test process");
out:
    if (ok)
        (void)!gbx_rm_rf(dir); /* a failure's logs stay for a look */
    return ok;
stopped:
    snprintf(why, whysz, "not known: the daemon stopped before the probe of CRIU ended");
    (void)!gbx_rm_rf(dir);
    return -1;
}

static int probe_now(struct gbx_runtime *rt, char *why, size_t whysz)
{
    /* the fallbacks' tests: a kernel that cannot, whether or not a CRIU is installed */
    if (getenv("GLOVEBOX_CRIU_PROBE_FAIL")) {
        snprintf(why, whysz, "%s", getenv("GLOVEBOX_CRIU_PROBE_FAIL"));
        return 0;
    }
    const char *criu = NULL;
    struct gbx_err *err = NULL;
    pthread_mutex_lock(&criu_mu);
    int r = criu_find(&criu, &err);
    pthread_mutex_unlock(&criu_mu);
    if (r < 0 || criu == NULL) {
        snprintf(why, whysz, "%s", err ? err->msg : "criu not found");
        gbx_err_free(err);
        return 0;
    }
    gbx_autofree char *key = probe_key(criu);
    gbx_autofree char *conf = gbx_asprintf("%s/" PROBE_CONF, rt->state_dir);
    int ok = -1;
    for (int i = 0; i < 2 && key && ok < 0; i++) {
        gbx_autofree char *text = NULL;
        size_t len = 0;
        struct probe_cache c = {0};
        char ebuf[64];
        if (gbx_read_file(i == 0 ? conf : PROBE_HOST_CONF, 64 << 10, &text, &len) == 0 &&
            gbx_conf_parse(text, len, probe_conf_line, &c, ebuf, sizeof(ebuf)) == 0 && c.key &&
            strcmp(c.key, key) == 0) {
            snprintf(why, whysz, "%s", c.why ? c.why : "");
            ok = c.ok;
        }
        free(c.key);
        free(c.why);
        if (ok >= 0 && i == 0)
            return ok;
    }
    if (ok < 0 && (ok = probe_run(rt, criu, why, whysz)) < 0)
        return -1; /* stopped: no answer, and none kept for the next daemon */
    if (key) {
        /* quotes and newlines cannot appear in a conf value */
        gbx_autofree char *safe = gbx_xstrdup(why);
        for (char *p = safe; *p; p++)
            if (*p == '"' || *p == '\n' || *p == '\\')
                *p = '\'';
        gbx_autofree char *out =
            gbx_asprintf("# what gloveboxd found CRIU can do here (delete it, in the state dir\n"
                         "# and in /run, to probe again)\n"
                         "for = \"%s\"\nusable = %s\nwhy = \"%s\"\n",
                         key, ok ? "yes" : "no", safe);
        (void)!gbx_write_file_atomic(conf, out, strlen(out), 0644);
        (void)!gbx_write_file_atomic(PROBE_HOST_CONF, out, strlen(out), 0644);
    }
    return ok;
}

int gbx_criu_probe(struct gbx_runtime *rt, const char **why)
{
    pthread_mutex_lock(&probe_mu);
    while (probe_state < 0 && probing)
        pthread_cond_wait(&probe_cv, &probe_mu);
    if (probe_state < 0) {
        probing = 1;
        pthread_mutex_unlock(&probe_mu);
        char buf[sizeof(probe_why)];
        int ok = probe_now(rt, buf, sizeof(buf));
        pthread_mutex_lock(&probe_mu);
        memcpy(probe_why, buf, sizeof(buf));
        probe_state = ok; /* stays unknown (-1) when the daemon stopped it */
        probing = 0;
        pthread_cond_broadcast(&probe_cv);
    }
    int r = probe_state < 0 ? 0 : probe_state;
    if (why)
        *why = probe_why;
    pthread_mutex_unlock(&probe_mu);
    return r;
}

void gbx_criu_probe_stop(void)
{
    atomic_store(&probe_stop, 1);
}

int gbx_criu_probe_result(const char **why)
{
    pthread_mutex_lock(&probe_mu);
    int r = probe_state;
    if (why)
        *why = r < 0 ? (probing        ? "being probed"
                        : probe_why[0] ? probe_why
                                       : "not probed yet")
                     : probe_why;
    pthread_mutex_unlock(&probe_mu);
    return r;
}

int gbx_criu_usable(struct gbx_runtime *rt, const char **path, struct gbx_err **err)
{
    if (gbx_criu_available(path, err) < 0)
        return -1;
    const char *why = NULL;
    if (gbx_criu_probe(rt, &why) != 1)
        return gbx_err_set(err, ENOTSUP, GBX_ERR_UNAVAILABLE,
                           "hibernate is unavailable on this host: %s (pause keeps sandboxes "
                           "frozen in memory instead)",
                           why);
    return 0;
}

/* The Error lines of a CRIU log (but the harmless ones), for an error message. */
char *gbx_criu_log_errors(const char *log)
{
    gbx_autofree char *text = NULL;
    if (gbx_read_file(log, 8 << 20, &text, NULL) < 0)
        return gbx_asprintf("(no log at %s)", log);
    size_t cap = 1024, len = 0;
    char *out = gbx_xcalloc(1, cap);
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strstr(l, "Error") == NULL || strstr(l, "RLIMIT_NOFILE") || strstr(l, "tables-") ||
            strstr(l, "tables-legacy"))
            continue;
        int k = snprintf(out + len, cap - len, "%s%s", len ? " | " : "", l);
        if (k < 0 || (size_t)k >= cap - len)
            break;
        len += (size_t)k;
    }
    if (len == 0)
        snprintf(out, cap, "(see %s)", log);
    return out;
}

int gbx_criu_failed(struct gbx_err **err, const char *what, int st, int64_t timeout_ms,
                    const char *log)
{
    gbx_autofree char *lines = gbx_criu_log_errors(log);
    char why[96];
    if (st == -ETIMEDOUT)
        return gbx_err_set(err, ETIMEDOUT, GBX_ERR_UNAVAILABLE,
                           "%s did not finish within %lld s and was stopped (a CRIU that hangs on "
                           "this kernel? see docs/hibernate.md); log: %s",
                           what, (long long)(timeout_ms / 1000), log);
    if (st == -ECANCELED)
        return gbx_err_set(err, ECANCELED, GBX_ERR_CONFLICT, "%s was cancelled", what);
    if (st < 0)
        return gbx_err_sys(err, -st, "%s: cannot run criu", what);
    return gbx_err_set(err, EIO, GBX_ERR_INTERNAL, "%s failed (%s): %s; log: %s", what,
                       gbx_child_status_str(st, timeout_ms, why, sizeof(why)), lines, log);
}
