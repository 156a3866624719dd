/* SPDX-License-Identifier: MIT */
/* glovebox run: a one-shot sandbox, like bwrap, through the library the daemon uses. */
#include "base/clock.h"
#include "cli/run.h"

#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "agent/client.h"
#include "base/fileutil.h"
#include "base/mem.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "sandbox/backend.h"

static const char run_usage[] =
    "usage: glovebox run [options] [--] COMMAND [ARG...]\n"
    "\n"
    "Run COMMAND in a new sandbox, pass stdin, stdout, stderr and the exit status through,\n"
    "and destroy the sandbox afterwards.\n"
    "\n"
    "  -m, --memory SIZE     memory limit including swap (e.g. 512M, 2G)\n"
    "  -p, --pids N          maximum number of processes\n"
    "  -c, --cpus N          CPU quota in CPUs (e.g. 0.5, 2)\n"
    "  -d, --disk SIZE       size of the writable layer (default 1G)\n"
    "  -t, --timeout DUR     kill the command after DUR (e.g. 30, 10s, 500ms, 5m); exit 124\n"
    "  -e, --env KEY=VALUE   set an environment variable (repeatable)\n"
    "  -w, --cwd DIR         working directory (default: the user's home)\n"
    "  -u, --user USER       user name or uid[:gid] (default: root)\n"
    "  -T, --template NAME   template (default: host)\n"
    "      --tty / --no-tty  force or forbid a terminal (default: when stdin is a terminal)\n"
    "  -h, --help            show this help\n";

int gbx_run_parse(int argc, char **argv, struct gbx_run_opts *o, struct gbx_err **err)
{
    enum { OPT_TTY = 256, OPT_NO_TTY };
    static const struct option longopts[] = {
        {"memory", required_argument, NULL, 'm'},
        {"pids", required_argument, NULL, 'p'},
        {"cpus", required_argument, NULL, 'c'},
        {"disk", required_argument, NULL, 'd'},
        {"timeout", required_argument, NULL, 't'},
        {"env", required_argument, NULL, 'e'},
        {"cwd", required_argument, NULL, 'w'},
        {"user", required_argument, NULL, 'u'},
        {"template", required_argument, NULL, 'T'},
        {"tty", no_argument, NULL, OPT_TTY},
        {"no-tty", no_argument, NULL, OPT_NO_TTY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->tty = -1;
    optind = 0; /* full reset, so the parser can be called more than once */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:m:p:c:d:t:e:w:u:T:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (gbx_parse_size(optarg, &o->memory_bytes) < 0 || o->memory_bytes < (4 << 20))
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                                   "invalid --memory '%s': use a size of at least 4M, e.g. 512M",
                                   optarg);
            break;
        case 'p':
            if (gbx_parse_u64(optarg, 1, 4194304, &o->pids) < 0)
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                                   "invalid --pids '%s': use a number from 1 to 4194304", optarg);
            break;
        case 'c':
            /* the kernel's smallest quota is 1 ms per 100 ms period: 0.01 CPU */
            if (gbx_parse_cpus(optarg, &o->cpu_millis) < 0 || o->cpu_millis < 10)
                return gbx_err_set(
                    err, EINVAL, GBX_ERR_INVALID,
                    "invalid --cpus '%s': use a number of CPUs from 0.01, e.g. 0.5 or 2", optarg);
            break;
        case 'd':
            if (gbx_parse_size(optarg, &o->disk_bytes) < 0 || o->disk_bytes < (1 << 20))
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                                   "invalid --disk '%s': use a size of at least 1M, e.g. 2G",
                                   optarg);
            break;
        case 't':
            if (gbx_parse_duration_ms(optarg, &o->timeout_ms) < 0 || o->timeout_ms == 0)
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                                   "invalid --timeout '%s': use e.g. 30, 10s, 500ms or 5m", optarg);
            break;
        case 'e':
            if (gbx_env_valid(optarg) < 0)
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                                   "invalid --env '%s': use KEY=VALUE", optarg);
            if (o->nenv >= GBX_RUN_MAX_ENV)
                return gbx_err_set(err, E2BIG, GBX_ERR_LIMIT, "too many --env options (max %d)",
                                   GBX_RUN_MAX_ENV);
            o->env[o->nenv++] = optarg;
            break;
        case 'w':
            if (optarg[0] == '\0')
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "--cwd must not be empty");
            o->cwd = optarg;
            break;
        case 'u':
            if (optarg[0] == '\0')
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "--user must not be empty");
            o->user = optarg;
            break;
        case 'T':
            if (gbx_sandbox_id_valid(optarg) < 0)
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "invalid --template '%s'", optarg);
            o->template_name = optarg;
            break;
        case OPT_TTY:
            o->tty = 1;
            break;
        case OPT_NO_TTY:
            o->tty = 0;
            break;
        case 'h':
            o->help = 1;
            return 0;
        case ':':
        default: {
            /* name the option as typed: a long one from argv, a short one from optopt (in a
             * cluster like -qm, optind has not moved past it yet) */
            const char *prev = optind > 0 && optind <= argc ? argv[optind - 1] : "";
            char shortopt[3] = {'-', (char)optopt, '\0'};
            const char *name = strncmp(prev, "--", 2) == 0 || !optopt ? prev : shortopt;
            size_t len = strcspn(name, "=");
            if (c == ':')
                return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "option '%.*s' needs a value",
                                   (int)len, name);
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "unknown option '%s'", name);
        }
        }
    }
    o->env[o->nenv] = NULL;
    if (optind >= argc)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "no command given (usage: glovebox run [options] -- COMMAND)");
    o->argv = argv + optind;
    return 0;
}

struct relay {
    struct gbx_agent *agent;
    uint32_t proc;
    int done, status;
    int stdin_open;
    int timed_out;
};

static int handle_event(struct relay *rl, struct gbx_event *ev)
{
    int r = 0;
    switch (ev->kind) {
    case GBX_EVENT_STDOUT:
        r = gbx_write_all(STDOUT_FILENO, ev->data, ev->len);
        break;
    case GBX_EVENT_STDERR:
        r = gbx_write_all(STDERR_FILENO, ev->data, ev->len);
        break;
    case GBX_EVENT_EXIT:
        if (ev->id == rl->proc) {
            rl->done = 1;
            rl->status = ev->exit_signal ? GBX_EXIT_SIGNAL + ev->exit_signal : ev->exit_code;
        }
        break;
    default:
        break;
    }
    /* a closed stdout (e.g. `| head`) must not stop the sandbox's process from finishing */
    return r == -EPIPE ? 0 : r;
}

static int relay_loop(struct relay *rl, const struct gbx_run_opts *o, int tty, struct gbx_err **err)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGWINCH);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    gbx_autoclose int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    uint64_t deadline =
        o->timeout_ms ? (uint64_t)(gbx_monotonic_ns() / 1000000) + o->timeout_ms : 0;
    uint8_t buf[GBX_FRAME_CHUNK];
    struct gbx_event ev;

    while (!rl->done) {
        int r;
        while (!rl->done && (r = gbx_agent_next_event(rl->agent, &ev, 0, err)) == 1) {
            r = handle_event(rl, &ev);
            gbx_event_release(&ev);
            if (r < 0)
                return gbx_err_sys(err, -r, "cannot write output");
        }
        if (r < 0)
            return -1;
        if (rl->done)
            break;
        struct pollfd p[3] = {
            {gbx_agent_fd(rl->agent), POLLIN, 0},
            {sfd, POLLIN, 0},
            {rl->stdin_open ? STDIN_FILENO : -1, POLLIN, 0},
        };
        int timeout = -1;
        if (deadline) {
            uint64_t n = (uint64_t)(gbx_monotonic_ns() / 1000000);
            if (n >= deadline) {
                fprintf(stderr, "glovebox: command timed out after %llu ms; killing it\n",
                        (unsigned long long)o->timeout_ms);
                (void)!gbx_agent_signal(rl->agent, rl->proc, SIGKILL, NULL);
                deadline = 0;
                rl->timed_out = 1;
                /* keep draining until the exit event arrives */
                continue;
            }
            timeout = (int)(deadline - n);
        }
        if (poll(p, 3, timeout) < 0) {
            if (errno == EINTR)
                continue;
            return gbx_err_sys(err, errno, "poll");
        }
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGWINCH && tty) {
                    struct winsize ws;
                    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
                        (void)!gbx_agent_resize(rl->agent, rl->proc, ws.ws_row, ws.ws_col, NULL);
                } else if (si.ssi_signo != SIGWINCH) {
                    (void)!gbx_agent_signal(rl->agent, rl->proc, (int)si.ssi_signo, NULL);
                }
            }
        }
        if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
            if (n > 0) {
                if (gbx_agent_stdin(rl->agent, rl->proc, buf, (size_t)n, NULL) < 0)
                    rl->stdin_open = 0; /* the process closed its stdin; keep going */
            } else if (n == 0 || errno != EINTR) {
                rl->stdin_open = 0;
                (void)!gbx_agent_close_stdin(rl->agent, rl->proc, NULL);
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            r = gbx_agent_next_event(rl->agent, &ev, 0, err);
            if (r < 0)
                return -1;
            if (r == 1) {
                r = handle_event(rl, &ev);
                gbx_event_release(&ev);
                if (r < 0)
                    return gbx_err_sys(err, -r, "cannot write output");
            }
        }
    }
    return 0;
}

/* GLOVEBOX_DEBUG_TIMING=1 prints where the time of a run goes, phase by phase. */
static int timing_on = -1;
static uint64_t timing_last;

static void timing(const char *phase)
{
    if (timing_on < 0)
        timing_on = getenv("GLOVEBOX_DEBUG_TIMING") != NULL;
    if (!timing_on)
        return;
    uint64_t n = (uint64_t)(gbx_monotonic_ns() / 1000);
    if (timing_last && phase)
        fprintf(stderr, "glovebox: timing: %-12s %6.3f ms\n", phase,
                (double)(n - timing_last) / 1000);
    timing_last = n;
}

static struct termios saved_tio;
static int tio_saved;

static void tty_raw(void)
{
    struct termios t;
    if (tcgetattr(STDIN_FILENO, &saved_tio) < 0)
        return;
    tio_saved = 1;
    t = saved_tio;
    cfmakeraw(&t);
    (void)tcsetattr(STDIN_FILENO, TCSANOW, &t);
}

static void tty_restore(void)
{
    if (tio_saved)
        (void)tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
    tio_saved = 0;
}

int gbx_cmd_run(int argc, char **argv)
{
    struct gbx_run_opts o;
    gbx_autoerr struct gbx_err *err = NULL;
    if (gbx_run_parse(argc, argv, &o, &err) < 0) {
        gbx_cli_error("%s", err->msg);
        return GBX_EXIT_GLOVEBOX;
    }
    if (o.help) {
        fputs(run_usage, stdout);
        return 0;
    }
    int tty = o.tty == -1 ? isatty(STDIN_FILENO) : o.tty;
    timing(NULL);

    struct gbx_runtime rt;
    if (gbx_runtime_init(&rt, NULL, &err) < 0) {
        gbx_cli_error("%s", err->msg);
        return GBX_EXIT_GLOVEBOX;
    }
    timing("runtime");
    gbx_autofree char *rnd = gbx_sandbox_id_new();
    /* "run-xxxxxxxxxxxx": recognisable in ps and cgroups */
    gbx_autofree char *id = gbx_asprintf("run-%s", rnd + 3);
    struct gbx_sandbox_spec spec = {
        .id = id,
        .template_name = o.template_name,
        .limits = {.memory_bytes = o.memory_bytes, .pids = o.pids, .cpu_millis = o.cpu_millis},
        .disk_bytes = o.disk_bytes,
    };
    struct gbx_sandbox *sb = NULL;
    struct gbx_agent *agent = NULL;
    int status = GBX_EXIT_GLOVEBOX;
    gbx_autofree char *term = NULL;
    if (gbx_sandbox_create(&rt, &spec, &sb, &err) < 0)
        goto out;
    timing("create");
    if (gbx_agent_open(gbx_steal_fd(&sb->conn_fd), &agent, &err) < 0)
        goto out;
    timing("hello");

    const char *envbuf[GBX_RUN_MAX_ENV + 2];
    const char *const *env = NULL;
    if (o.nenv) {
        size_t n = 0;
        for (; n < o.nenv; n++)
            envbuf[n] = o.env[n];
        if (tty && getenv("TERM")) {
            term = gbx_asprintf("TERM=%s", getenv("TERM"));
            envbuf[n++] = term;
        }
        envbuf[n] = NULL;
        env = envbuf;
    }
    struct gbx_spawn_opts so = {
        .argv = (const char *const *)o.argv,
        .env = env,
        .cwd = o.cwd,
        .user = o.user,
        .stdin_open = 1,
    };
    if (tty) {
        struct winsize ws = {.ws_row = 24, .ws_col = 80};
        (void)ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
        so.pty = 1;
        so.rows = ws.ws_row ? ws.ws_row : 24;
        so.cols = ws.ws_col ? ws.ws_col : 80;
    }
    struct relay rl = {.agent = agent, .stdin_open = 1};
    pid_t pid;
    if (gbx_agent_spawn(agent, &so, &rl.proc, &pid, &err) < 0) {
        status = gbx_cli_cannot_run(err->msg);
        goto out;
    }
    timing("spawn");
    if (tty && isatty(STDIN_FILENO))
        tty_raw();
    int r = relay_loop(&rl, &o, tty, &err);
    tty_restore();
    if (r == 0)
        status = rl.timed_out ? GBX_EXIT_TIMEOUT : rl.status;
    timing("run");
out:
    if (err)
        gbx_cli_error("%s", err->msg);
    gbx_agent_free(agent);
    gbx_autoerr struct gbx_err *derr = NULL;
    if (sb && gbx_sandbox_destroy(sb, &derr) < 0) {
        gbx_cli_error("%s", derr->msg);
        if (status == 0)
            status = GBX_EXIT_GLOVEBOX;
    }
    /* a `glovebox run` killed with SIGKILL cannot remove its sandbox's cgroups; whoever runs
     * next does, once they are old and empty */
    (void)gbx_cgroup_gc(&rt.cg, "run-", 60);
    timing("destroy");
    gbx_runtime_release(&rt);
    return status;
}
const char *const gbx_usage_run = run_usage;
