/* SPDX-License-Identifier: MIT */
/* gloveboxd: the Glovebox daemon. One libevent loop; the admin API on a unix socket.
 *
 *   gloveboxd [--state-dir DIR] [--runtime-dir DIR] [--log-format text|json]
 *             [--log-level debug|info|warn|error] [--kill-on-exit]
 *
 * SIGTERM or SIGINT: stop accepting and exit; sandboxes keep running for the next daemon to
 * adopt (or are destroyed with --kill-on-exit). */
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
#include "daemon/listen.h"
#include "session/sessions.h"
#include "sandbox/backend.h"
#include "base/log.h"
#include "base/conf.h"
#include "base/fileutil.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/ratelimit.h"
#include "base/sched.h"

#define GBX_DEFAULT_CONFIG "/etc/glovebox/gloveboxd.conf"

static const char usage[] =
    "usage: gloveboxd [options]\n"
    "\n"
    "  --config FILE          settings as 'key = value' lines, keys as the flags below\n"
    "                         (default " GBX_DEFAULT_CONFIG " if it exists, or\n"
    "                         $GLOVEBOX_CONFIG); flags override the file\n"
    "  --state-dir DIR        templates and the database (default /var/lib/glovebox,\n"
    "                         or $GLOVEBOX_STATE_DIR)\n"
    "  --runtime-dir DIR      sockets and locks (default /run/glovebox, or\n"
    "                         $GLOVEBOX_RUNTIME_DIR); the admin API is DIR/api.sock\n"
    "  --log-format text|json\n"
    "  --log-level debug|info|warn|error   (default info)\n"
    "  --listen ADDR:PORT     also serve HTTP on TCP; every request there needs an API key\n"
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

struct settings {
    struct gbx_server_config cfg;
    struct gbx_listen_config lcfg;
    struct gbx_limits limits;
    int kill_on_exit;
    int loop_nice;   /* how much higher the loop's priority is than the process's */
    char *owned[16]; /* strings read from the configuration file */
    size_t nowned;
};

static const char *keep(struct settings *st, const char *v)
{
    if (st->nowned == GBX_ARRAY_SIZE(st->owned))
        return NULL;
    return st->owned[st->nowned++] = gbx_xstrdup(v);
}

static int parse_bool(const char *v, int *out)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "1") == 0 || v[0] == '\0')
        *out = 1;
    else if (strcmp(v, "false") == 0 || strcmp(v, "no") == 0 || strcmp(v, "0") == 0)
        *out = 0;
    else
        return -EINVAL;
    return 0;
}

/* Apply one setting, from a flag (--name value) or the configuration file (name = value).
 * Returns 0, or -1 with a message in err. */
static int apply(struct settings *st, const char *key, const char *value, int from_file, char *err,
                 size_t errsz)
{
    if (strcmp(key, "state-dir") == 0 || strcmp(key, "runtime-dir") == 0) {
        int state = key[0] == 's';
        /* the environment beats the file, a flag beats both */
        if (from_file && getenv(state ? "GLOVEBOX_STATE_DIR" : "GLOVEBOX_RUNTIME_DIR"))
            return 0;
        const char *v = from_file ? keep(st, value) : value;
        if (value[0] != '/' || v == NULL) {
            snprintf(err, errsz, "%s must be an absolute path", key);
            return -1;
        }
        if (state)
            st->cfg.state_dir = v;
        else
            st->cfg.runtime_dir = v;
    } else if (strcmp(key, "listen") == 0) {
        st->lcfg.listen_tcp = value[0] ? (from_file ? keep(st, value) : value) : NULL;
    } else if (strcmp(key, "pool") == 0) {
        uint64_t n;
        if (gbx_parse_u64(value, 0, 1024, &n) < 0) {
            snprintf(err, errsz, "pool must be a number from 0 to 1024");
            return -1;
        }
        st->cfg.pool_size = (size_t)n;
    } else if (strcmp(key, "max-body") == 0) {
        uint64_t n;
        if (gbx_parse_size(value, &n) < 0 || n < 4096 || n > (1ull << 30)) {
            snprintf(err, errsz, "max-body must be a size from 4K to 1G (e.g. 1M)");
            return -1;
        }
        st->lcfg.max_body = (size_t)n;
    } else if (strcmp(key, "max-upload") == 0) {
        uint64_t n;
        if (gbx_parse_size(value, &n) < 0 || n < 4096 || n > (4ull << 30)) {
            snprintf(err, errsz, "max-upload must be a size from 4K to 4G (e.g. 64M)");
            return -1;
        }
        st->cfg.max_upload = st->lcfg.max_upload = (size_t)n;
    } else if (strcmp(key, "log-format") == 0) {
        if (strcmp(value, "json") != 0 && strcmp(value, "text") != 0) {
            snprintf(err, errsz, "log-format must be text or json");
            return -1;
        }
        gbx_log_set_json(strcmp(value, "json") == 0);
    } else if (strcmp(key, "log-level") == 0) {
        enum gbx_log_level lvl;
        if (gbx_log_parse_level(value, &lvl) < 0) {
            snprintf(err, errsz, "log-level must be debug, info, warn or error");
            return -1;
        }
        gbx_log_set_level(lvl);
    } else if (strcmp(key, "egress-default") == 0) {
        if (strcmp(value, "policy") != 0 && strcmp(value, "none") != 0 &&
            strcmp(value, "open") != 0) {
            snprintf(err, errsz, "egress-default must be policy, none or open");
            return -1;
        }
        st->cfg.egress_default = from_file ? keep(st, value) : value;
    } else if (strcmp(key, "egress-hosts") == 0) {
        st->cfg.egress_hosts = value[0] ? (from_file ? keep(st, value) : value) : NULL;
    } else if (strcmp(key, "egress-resolver") == 0) {
        st->cfg.egress_resolver = value[0] ? (from_file ? keep(st, value) : value) : NULL;
    } else if (strcmp(key, "egress-extra-ca") == 0) {
        if (value[0] && value[0] != '/') {
            snprintf(err, errsz, "egress-extra-ca must be an absolute path");
            return -1;
        }
        st->cfg.egress_extra_ca = value[0] ? (from_file ? keep(st, value) : value) : NULL;
    } else if (strcmp(key, "egress-max-conns") == 0) {
        uint64_t n;
        if (gbx_parse_u64(value, 1, 65536, &n) < 0) {
            snprintf(err, errsz, "egress-max-conns must be a number from 1 to 65536");
            return -1;
        }
        st->cfg.egress_max_conns = (unsigned)n;
    } else if (strcmp(key, "audit-rate") == 0) {
        uint64_t n, b = 0;
        char rate[32];
        const char *slash = strchr(value, '/');
        size_t len = slash ? (size_t)(slash - value) : strlen(value);
        if (len >= sizeof(rate) ||
            (memcpy(rate, value, len), rate[len] = '\0', gbx_parse_u64(rate, 0, 1000000, &n) < 0) ||
            (slash && gbx_parse_u64(slash + 1, 1, 1000000, &b) < 0)) {
            snprintf(err, errsz,
                     "audit-rate must be ROWS or ROWS/BURST, numbers up to 1000000 "
                     "(e.g. 20/100; 0: no limit)");
            return -1;
        }
        st->cfg.audit_rate = (unsigned)n;
        st->cfg.audit_unlimited = n == 0;
        st->cfg.audit_burst = (unsigned)b;
    } else if (strcmp(key, "state-reserve") == 0) {
        uint64_t n;
        if (gbx_parse_size(value, &n) < 0) {
            snprintf(err, errsz, "state-reserve must be a size (e.g. 64M; 0: no check)");
            return -1;
        }
        st->cfg.state_reserve = n;
        st->cfg.state_reserve_set = 1;
    } else if (strncmp(key, "retain-", 7) == 0) {
        struct gbx_retention_rule *r = NULL;
        int sized = 1;
        if (strcmp(key + 7, "snapshots") == 0)
            r = &st->cfg.retention.snapshots;
        else if (strcmp(key + 7, "artifacts") == 0)
            r = &st->cfg.retention.artifacts;
        else if (strcmp(key + 7, "sessions") == 0)
            r = &st->cfg.retention.sessions, sized = 0;
        else if (strcmp(key + 7, "stopped") == 0)
            r = &st->cfg.retention.stopped, sized = 0;
        if (r == NULL) {
            snprintf(err, errsz, "unknown setting '%s'", key);
            return -1;
        }
        char why[160];
        if (gbx_retention_parse(value, sized, r, why, sizeof(why)) < 0) {
            snprintf(err, errsz, "%s: %s", key, why);
            return -1;
        }
    } else if (strcmp(key, "gc-interval") == 0) {
        uint64_t ms;
        if (gbx_parse_duration_ms(value, &ms) < 0 || ms < 100 || ms > 86400000ull) {
            snprintf(err, errsz, "gc-interval must be a duration from 100ms to 24h");
            return -1;
        }
        st->cfg.retention.interval_ms = ms;
    } else if (strcmp(key, "hibernate-timeout") == 0 || strcmp(key, "helper-timeout") == 0) {
        uint64_t ms;
        if (gbx_parse_duration_ms(value, &ms) < 0 || ms < 100 || ms > 7 * 86400000ull) {
            snprintf(err, errsz, "%s must be a duration from 100ms to 7d", key);
            return -1;
        }
        if (key[1] == 'i')
            st->cfg.criu_timeout_ms = (int64_t)ms;
        else
            st->cfg.helper_timeout_ms = (int64_t)ms;
    } else if (strcmp(key, "hello-timeout") == 0) {
        uint64_t ms;
        if (gbx_parse_duration_ms(value, &ms) < 0 || ms < 100 || ms > 600000) {
            snprintf(err, errsz, "hello-timeout must be a duration from 100ms to 10m");
            return -1;
        }
        st->cfg.hello_timeout_ms = (int64_t)ms;
    } else if (strcmp(key, "loop-priority") == 0) {
        uint64_t n;
        if (gbx_parse_u64(value, 0, 19, &n) < 0) {
            snprintf(err, errsz, "loop-priority must be a number from 0 to 19");
            return -1;
        }
        st->loop_nice = (int)n;
    } else if (strcmp(key, "rate-limit") == 0) {
        if (strcmp(value, "off") == 0 ||
            gbx_ratelimit_parse(value, &st->lcfg.rate_limit, &st->lcfg.rate_burst) < 0) {
            if (strcmp(value, "off") != 0) {
                snprintf(err, errsz,
                         "rate-limit must be N[/BURST] requests per second (e.g. "
                         "100/200), or 0 for none");
                return -1;
            }
            st->lcfg.rate_limit = 0;
        }
        st->lcfg.rate_limit_set = 1;
    } else if (strcmp(key, "max-conns") == 0 || strcmp(key, "max-conns-per-ip") == 0) {
        uint64_t n;
        if (gbx_parse_u64(value, 0, 1000000, &n) < 0) {
            snprintf(err, errsz, "%s must be a number from 0 (no cap) to 1000000", key);
            return -1;
        }
        if (key[9] == '\0')
            st->lcfg.http.max_conns = (unsigned)n;
        else
            st->lcfg.http.max_conns_per_ip = (unsigned)n;
    } else if (strcmp(key, "header-timeout") == 0 || strcmp(key, "body-timeout") == 0 ||
               strcmp(key, "idle-timeout") == 0) {
        uint64_t ms;
        if (gbx_parse_duration_ms(value, &ms) < 0 || ms > 86400000ull || (ms && ms < 100)) {
            snprintf(err, errsz, "%s must be a duration from 100ms to 24h, or 0 for none", key);
            return -1;
        }
        if (key[0] == 'h')
            st->lcfg.http.header_timeout_ms = ms;
        else if (key[0] == 'b')
            st->lcfg.http.body_timeout_ms = ms;
        else
            st->lcfg.http.idle_timeout_ms = ms;
    } else if (strcmp(key, "body-min-rate") == 0) {
        uint64_t n;
        if (gbx_parse_size(value, &n) < 0 || n > (1ull << 30)) {
            snprintf(err, errsz,
                     "body-min-rate must be a size per second up to 1G (e.g. 16K), "
                     "or 0 for none");
            return -1;
        }
        st->lcfg.http.body_min_rate = n;
    } else if (strcmp(key, "kill-on-exit") == 0) {
        if (parse_bool(value, &st->kill_on_exit) < 0) {
            snprintf(err, errsz, "kill-on-exit must be true or false");
            return -1;
        }
    } else {
        int r = gbx_limits_set(&st->limits, key, value, err, errsz);
        if (r == 1)
            snprintf(err, errsz, "unknown setting '%s'", key);
        if (r != 0)
            return -1;
    }
    return 0;
}

struct file_ctx {
    struct settings *st;
    char err[256];
};

static int apply_file_line(void *arg, const char *key, const char *value, unsigned line)
{
    struct file_ctx *fc = arg;
    char msg[200];
    if (apply(fc->st, key, value, 1, msg, sizeof(msg)) < 0) {
        snprintf(fc->err, sizeof(fc->err), "line %u: %s", line, msg);
        return -1;
    }
    return 0;
}

/* Read the configuration file: path given (--config or $GLOVEBOX_CONFIG; must exist), or
 * the default one if it exists. */
static int load_config(struct settings *st, const char *path, int must_exist)
{
    char *text = NULL;
    size_t len = 0;
    if (!must_exist && access(path, F_OK) < 0 && errno == ENOENT)
        return 0;
    int e = gbx_read_file(path, 1 << 20, &text, &len);
    if (e < 0) {
        fprintf(stderr, "gloveboxd: cannot read '%s': %s\n", path, strerror(-e));
        return -1;
    }
    struct file_ctx fc = {.st = st};
    int r = gbx_conf_parse(text, len, apply_file_line, &fc, fc.err, sizeof(fc.err));
    free(text);
    if (r != 0) {
        fprintf(stderr, "gloveboxd: %s: %s\n", path, fc.err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    enum { OPT_CONFIG = 256 };
    static const struct option longopts[] = {
        {"config", required_argument, NULL, OPT_CONFIG},
        {"state-dir", required_argument, NULL, 0},
        {"runtime-dir", required_argument, NULL, 0},
        {"log-format", required_argument, NULL, 0},
        {"log-level", required_argument, NULL, 0},
        {"kill-on-exit", no_argument, NULL, 0},
        {"listen", required_argument, NULL, 0},
        {"pool", required_argument, NULL, 0},
        {"max-body", required_argument, NULL, 0},
        {"max-upload", required_argument, NULL, 0},
        {"egress-default", required_argument, NULL, 0},
        {"egress-hosts", required_argument, NULL, 0},
        {"egress-resolver", required_argument, NULL, 0},
        {"egress-extra-ca", required_argument, NULL, 0},
        {"egress-max-conns", required_argument, NULL, 0},
        {"audit-rate", required_argument, NULL, 0},
        {"state-reserve", required_argument, NULL, 0},
        {"retain-snapshots", required_argument, NULL, 0},
        {"retain-artifacts", required_argument, NULL, 0},
        {"retain-sessions", required_argument, NULL, 0},
        {"retain-stopped", required_argument, NULL, 0},
        {"gc-interval", required_argument, NULL, 0},
        {"hibernate-timeout", required_argument, NULL, 0},
        {"helper-timeout", required_argument, NULL, 0},
        {"hello-timeout", required_argument, NULL, 0},
        {"loop-priority", required_argument, NULL, 0},
        {"rate-limit", required_argument, NULL, 0},
        {"max-conns", required_argument, NULL, 0},
        {"max-conns-per-ip", required_argument, NULL, 0},
        {"header-timeout", required_argument, NULL, 0},
        {"body-timeout", required_argument, NULL, 0},
        {"body-min-rate", required_argument, NULL, 0},
        {"idle-timeout", required_argument, NULL, 0},
        {"default-memory", required_argument, NULL, 0},
        {"default-pids", required_argument, NULL, 0},
        {"default-cpus", required_argument, NULL, 0},
        {"default-disk", required_argument, NULL, 0},
        {"max-memory", required_argument, NULL, 0},
        {"max-pids", required_argument, NULL, 0},
        {"max-cpus", required_argument, NULL, 0},
        {"max-disk", required_argument, NULL, 0},
        {"max-timeout", required_argument, NULL, 0},
        {"quota-sandboxes", required_argument, NULL, 0},
        {"quota-memory", required_argument, NULL, 0},
        {"quota-disk", required_argument, NULL, 0},
        {"quota-snapshots", required_argument, NULL, 0},
        {"quota-sessions", required_argument, NULL, 0},
        {"quota-artifacts", required_argument, NULL, 0},
        {"quota-artifact-bytes", required_argument, NULL, 0},
        {"quota-templates", required_argument, NULL, 0},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct settings st = {.loop_nice = 10, .lcfg = {.http = GBX_GATE_LIMITS_DEFAULT}};
    int c, idx;
    {
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        gbx_limits_init(&st.limits, pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0,
                        ncpu > 0 ? (unsigned)ncpu : 1);
    }
    gbx_log_set_level(GBX_LOG_INFO);
    /* the file first, so that flags override it */
    const char *config = getenv("GLOVEBOX_CONFIG");
    int must_exist = config != NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[i + 1];
            must_exist = 1;
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            config = argv[i] + 9;
            must_exist = 1;
        }
    }
    if (load_config(&st, config ? config : GBX_DEFAULT_CONFIG, must_exist) < 0)
        return 2;
    while ((c = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        char msg[200];
        switch (c) {
        case 0:
            if (apply(&st, longopts[idx].name, optarg ? optarg : "true", 0, msg, sizeof(msg)) < 0) {
                fprintf(stderr, "gloveboxd: --%s\n", msg);
                return 2;
            }
            break;
        case OPT_CONFIG:
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    {
        char why[200];
        if (gbx_limits_check(&st.limits, why, sizeof(why)) < 0) {
            fprintf(stderr, "gloveboxd: %s\n", why);
            return 2;
        }
    }
    st.cfg.limits = &st.limits;
    struct gbx_server_config cfg = st.cfg;
    struct gbx_listen_config lcfg = st.lcfg;
    int kill_on_exit = st.kill_on_exit;
    int loop_nice = st.loop_nice;
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
    struct gbx_sessions *sessions = NULL;
    /* the core, then the session engine above it (the core keeps it: gbx_session_ops), then
     * the listeners that let requests in */
    int bad = gbx_server_new(base, &cfg, &srv, &err) < 0 ||
              gbx_sessions_new(srv, base, gbx_server_runtime(srv)->state_dir, &sessions, &err) < 0;
    if (!bad) {
        gbx_server_set_sessions(srv, sessions, &gbx_sessions_ops);
        bad = gbx_listen_start(srv, &lcfg, &net, &err) < 0;
    }
    if (bad) {
        gbx_log_error("%s", err->msg);
        gbx_err_free(err);
        gbx_listen_free(net);
        gbx_server_free(srv);
        event_base_free(base);
        return 1;
    }
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
    event_add(sigterm, NULL);
    event_add(sigint, NULL);
    gbx_log_info("serving on '%s'", gbx_server_socket_path(srv));
    event_base_dispatch(base);
    gbx_listen_stop(net);
    gbx_server_shutdown(srv, kill_on_exit);
    gbx_server_free(srv); /* the store writer's thread ends with it */
    gbx_listen_free(net); /* the front doors, after the servers that used them */
    gbx_sched_release();
    event_free(sigterm);
    event_free(sigint);
    event_base_free(base);
    gbx_log_info("stopped");
    for (size_t i = 0; i < st.nowned; i++)
        free(st.owned[i]);
    return 0;
}
