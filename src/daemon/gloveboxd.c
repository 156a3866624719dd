/* SPDX-License-Identifier: MIT */
/* gloveboxd: the Glovebox daemon. One libevent loop; the admin API on a unix socket.
 *
 *   gloveboxd [--state-dir DIR] [--runtime-dir DIR] [--log-format text|json]
 *             [--log-level debug|info|warn|error] [--kill-on-exit]
 *
 * SIGTERM or SIGINT: stop accepting and exit; sandboxes keep running for the next daemon to
 * adopt (or are destroyed with --kill-on-exit). */
#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "api/server.h"
#include "base/log.h"
#include "base/parse.h"

static const char usage[] =
    "usage: gloveboxd [options]\n"
    "\n"
    "  --state-dir DIR        templates and the database (default /var/lib/glovebox,\n"
    "                         or $GLOVEBOX_STATE_DIR)\n"
    "  --runtime-dir DIR      sockets and locks (default /run/glovebox, or\n"
    "                         $GLOVEBOX_RUNTIME_DIR); the admin API is DIR/api.sock\n"
    "  --log-format text|json\n"
    "  --log-level debug|info|warn|error   (default info)\n"
    "  --listen ADDR:PORT     also serve HTTP on TCP; every request there needs an API key\n"
    "  --pool N               keep N fresh sandboxes of the default template ready\n"
    "                         (create then takes one: well under a millisecond)\n"
    "  --kill-on-exit         destroy all sandboxes when stopping\n"
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

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct event_base *base = arg;
    gbx_log_info("received signal %d, stopping", (int)sig);
    event_base_loopbreak(base);
}

int main(int argc, char **argv)
{
    enum { OPT_STATE = 256, OPT_RUNTIME, OPT_LOGFMT, OPT_LOGLEVEL, OPT_KILL, OPT_LISTEN, OPT_POOL };
    static const struct option longopts[] = {
        {"state-dir", required_argument, NULL, OPT_STATE},
        {"runtime-dir", required_argument, NULL, OPT_RUNTIME},
        {"log-format", required_argument, NULL, OPT_LOGFMT},
        {"log-level", required_argument, NULL, OPT_LOGLEVEL},
        {"kill-on-exit", no_argument, NULL, OPT_KILL},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"pool", required_argument, NULL, OPT_POOL},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct gbx_server_config cfg = {0};
    int kill_on_exit = 0, c;
    gbx_log_set_level(GBX_LOG_INFO);
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_STATE:
            cfg.state_dir = optarg;
            break;
        case OPT_RUNTIME:
            cfg.runtime_dir = optarg;
            break;
        case OPT_LISTEN:
            cfg.listen_tcp = optarg;
            break;
        case OPT_POOL: {
            uint64_t n;
            if (gbx_parse_u64(optarg, 0, 1024, &n) < 0) {
                fprintf(stderr, "gloveboxd: --pool must be a number from 0 to 1024\n");
                return 2;
            }
            cfg.pool_size = (size_t)n;
            break;
        }
        case OPT_LOGFMT:
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0) {
                fprintf(stderr, "gloveboxd: --log-format must be text or json\n");
                return 2;
            }
            gbx_log_set_json(strcmp(optarg, "json") == 0);
            break;
        case OPT_LOGLEVEL: {
            enum gbx_log_level lvl;
            if (gbx_log_parse_level(optarg, &lvl) < 0) {
                fprintf(stderr, "gloveboxd: --log-level must be debug, info, warn or error\n");
                return 2;
            }
            gbx_log_set_level(lvl);
            break;
        }
        case OPT_KILL:
            kill_on_exit = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    raise_nofile();
    struct event_base *base = event_base_new();
    if (base == NULL) {
        fprintf(stderr, "gloveboxd: cannot create the event loop\n");
        return 1;
    }
    struct gbx_server *srv = NULL;
    struct gbx_err *err = NULL;
    if (gbx_server_new(base, &cfg, &srv, &err) < 0) {
        gbx_log_error("%s", err->msg);
        gbx_err_free(err);
        event_base_free(base);
        return 1;
    }
    struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, base);
    struct event *sigint = evsignal_new(base, SIGINT, on_signal, base);
    event_add(sigterm, NULL);
    event_add(sigint, NULL);
    gbx_log_info("serving on '%s'", gbx_server_socket_path(srv));
    event_base_dispatch(base);
    gbx_server_shutdown(srv, kill_on_exit);
    gbx_server_free(srv);
    event_free(sigterm);
    event_free(sigint);
    event_base_free(base);
    gbx_log_info("stopped");
    return 0;
}
