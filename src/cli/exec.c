/* SPDX-License-Identifier: MIT */
/* glovebox exec SANDBOX [-i|--stdin] [-t|--tty] [-d|--detach [--json]] [--timeout D]
 *                       [--user U] [--cwd DIR] [--env K=V]... -- CMD [ARG...]
 * Runs CMD in a sandbox of the daemon, streams its output here and exits with its status
 * (128+N when signal N killed it, 124 when its timeout killed it).
 *
 * SIGINT, SIGTERM and SIGHUP sent to us go to the process's group (POST .../processes/{proc}/
 * signal; caught with a signalfd read by the second thread), and we go on streaming until it
 * exits: its status is ours. One that comes before the process started ends us as usual. If
 * we go away anyway (SIGKILL, a crash), the daemon kills the process ("kill_on_disconnect").
 * With -d, nothing of this: the process is started, its handle printed, and left running.
 *
 * With -i, local stdin goes to the process (POST .../processes/{proc}/stdin, one request per
 * chunk, from a second thread while the main one reads the stream), and end of file closes
 * its stdin. With -t it runs on a terminal of the local terminal's size, resized on
 * SIGWINCH; with both and a local terminal, that terminal is in raw mode meanwhile (so ^C,
 * ^D, ^Z go to the process), restored on every way out. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include "base/b64.h"
#include "base/clock.h"
#include "base/fileutil.h"
#include "base/parse.h"
#include "cli/api.h"
#include "cli/cli.h"

#define EXEC_STDIN_CHUNK (64u << 10)

struct exec_state {
    int status; /* -1 until the exit event */
    const char *id;
    int forward_stdin;        /* -i: send local stdin */
    int tty;                  /* -t: resize on SIGWINCH */
    int detach;               /* -d: leave once it started */
    long proc;                /* from the start event; 0 before */
    int sigfd;                /* SIGINT, SIGTERM, SIGHUP (and SIGWINCH with -t), or -1 */
    int wake[2];              /* 's': the process started; 'x': the stream ended */
    int stop_sig;             /* a SIGTERM or SIGHUP passed on, or 0 */
    int64_t stop_deadline_ms; /* the process must end by then (CLOCK_MONOTONIC), or we do */
    pthread_t thread;
    int thread_started;
};

/* ---- the local terminal ------------------------------------------------------------- */

static struct termios saved_tio;
static volatile sig_atomic_t tio_saved;

static void tty_restore(void)
{
    if (tio_saved)
        (void)tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
    tio_saved = 0;
}

static void on_fatal_signal(int sig)
{
    tty_restore();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void tty_raw(void)
{
    struct termios t;
    if (tcgetattr(STDIN_FILENO, &saved_tio) < 0)
        return;
    tio_saved = 1;
    atexit(tty_restore);
    static const int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], on_fatal_signal);
    t = saved_tio;
    cfmakeraw(&t);
    (void)tcsetattr(STDIN_FILENO, TCSANOW, &t);
}

static void term_size(unsigned *rows, unsigned *cols)
{
    struct winsize ws = {0};
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0)
        (void)ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
    *rows = ws.ws_row ? ws.ws_row : 24;
    *cols = ws.ws_col ? ws.ws_col : 80;
    if (*rows > 1000)
        *rows = 1000;
    if (*cols > 1000)
        *cols = 1000;
}

/* ---- the second thread: stdin, resizes and signals ---------------------------------- */

static void proc_path(const struct exec_state *st, const char *what, char *buf, size_t n)
{
    snprintf(buf, n, "/v1/sandboxes/%s/processes/%ld/%s", st->id, st->proc, what);
}

static void send_resize(struct exec_state *st)
{
    char path[512];
    unsigned rows, cols;
    term_size(&rows, &cols);
    proc_path(st, "resize", path, sizeof(path));
    json_t *body = json_pack("{s:i,s:i}", "rows", (json_int_t)rows, "cols", (json_int_t)cols);
    json_t *reply = NULL;
    (void)gbx_cli_call("POST", path, body, &reply);
    json_decref(body);
    json_decref(reply);
}

/* Send one chunk; 0, or -1 when stdin cannot take more (the process closed it or ended). */
static int send_stdin(struct exec_state *st, const void *data, size_t len)
{
    char path[512];
    json_t *reply = NULL;
    proc_path(st, "stdin", path, sizeof(path));
    int status = gbx_cli_call_raw("POST", path, data, len, &reply);
    if (status != 204 && status != 404 && status != 409 && status >= 0)
        gbx_cli_print_error(status, reply);
    json_decref(reply);
    return status == 204 ? 0 : -1;
}

static void send_signal(struct exec_state *st, const char *name)
{
    char path[512];
    json_t *reply = NULL;
    proc_path(st, "signal", path, sizeof(path));
    json_t *body = json_pack("{s:s}", "signal", name);
    int status = gbx_cli_call("POST", path, body, &reply);
    /* 404: it has just exited (its exit event is on its way) */
    if (status != 204 && status != 404 && status >= 0) {
        const char *msg =
            json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
        gbx_cli_error("cannot pass SIG%s on to process %ld: %s", name, st->proc,
                      msg ? msg : "the daemon refused");
    }
    json_decref(body);
    json_decref(reply);
}

/* End us by sig, as if it had not been caught: the terminal restored, our connection closes
 * (and so, with kill_on_disconnect, the daemon kills the process's group). */
static void die_by(int sig)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, sig);
    tty_restore();
    signal(sig, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, &mask, NULL);
    raise(sig);
    _exit(GBX_EXIT_SIGNAL + sig);
}

/* After a SIGTERM or SIGHUP passed on, how long the process has to end before we do. */
#define EXEC_STOP_GRACE_MS 10000

/* A signal for us: the process's, once it has started; before, nothing runs yet, and it
 * ends us as it would have without the signalfd. SIGINT is passed on each time (^C, ^C);
 * SIGTERM and SIGHUP once: a second one, or EXEC_STOP_GRACE_MS without the process ending
 * (an interactive shell ignores SIGTERM), ends us, and the daemon kills the process. */
static void on_signal(struct exec_state *st, int sig, int started)
{
    const char *name = sig == SIGINT ? "INT" : sig == SIGTERM ? "TERM" : "HUP";
    if (sig == SIGWINCH) {
        if (started)
            send_resize(st);
        return;
    }
    if (!started)
        die_by(sig);
    if (sig != SIGINT && st->stop_sig)
        die_by(sig);
    send_signal(st, name);
    if (sig != SIGINT) {
        st->stop_sig = sig;
        st->stop_deadline_ms = gbx_monotonic_ns() / 1000000 + EXEC_STOP_GRACE_MS;
    }
}

static void *forward(void *arg)
{
    struct exec_state *st = arg;
    static uint8_t buf[EXEC_STDIN_CHUNK];
    int in_open = 0, started = 0;
    for (;;) {
        struct pollfd fds[3] = {
            {.fd = st->wake[0], .events = POLLIN},
            {.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN},
            {.fd = st->sigfd, .events = POLLIN},
        };
        int wait_ms = -1;
        if (st->stop_sig) {
            int64_t left = st->stop_deadline_ms - gbx_monotonic_ns() / 1000000;
            wait_ms = left > 0 ? (int)left : 0;
        }
        int pr = poll(fds, 3, wait_ms);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pr == 0 && st->stop_sig) {
            gbx_cli_error("the process did not end within %d s of SIG%s: ending it",
                          EXEC_STOP_GRACE_MS / 1000, st->stop_sig == SIGTERM ? "TERM" : "HUP");
            die_by(st->stop_sig);
        }
        if (fds[0].revents) {
            char what = 'x';
            if (read(st->wake[0], &what, 1) != 1 || what != 's')
                break;
            started = 1;
            in_open = st->forward_stdin;
            if (st->tty)
                send_resize(st); /* the size may have changed since the request */
            continue;
        }
        if (fds[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(st->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                on_signal(st, (int)si.ssi_signo, started);
        }
        if (fds[1].revents) {
            ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n > 0 && send_stdin(st, buf, (size_t)n) == 0)
                continue;
            in_open = 0;
            if (n <= 0) { /* end of file (or a read error): so does the process's stdin */
                char path[512];
                json_t *reply = NULL;
                proc_path(st, "close-stdin", path, sizeof(path));
                (void)gbx_cli_call("POST", path, NULL, &reply);
                json_decref(reply);
            }
            if (st->sigfd < 0)
                break;
        }
    }
    return NULL;
}

/* Start the second thread (it waits for the process to start); -1 if it cannot be. */
static int start_forwarding(struct exec_state *st)
{
    if (pipe2(st->wake, O_CLOEXEC) < 0) {
        gbx_cli_error("cannot forward stdin and signals: %s", strerror(errno));
        return -1;
    }
    if (pthread_create(&st->thread, NULL, forward, st) != 0) {
        gbx_cli_error("cannot forward stdin and signals: cannot start a thread");
        close(st->wake[0]);
        close(st->wake[1]);
        return -1;
    }
    st->thread_started = 1;
    return 0;
}

static void stop_forwarding(struct exec_state *st)
{
    if (!st->thread_started)
        return;
    (void)!write(st->wake[1], "x", 1);
    pthread_join(st->thread, NULL);
    close(st->wake[0]);
    close(st->wake[1]);
    st->thread_started = 0;
}

/* ---- the stream ----------------------------------------------------------------------- */

static void on_line(void *arg, const char *line, size_t len)
{
    struct exec_state *st = arg;
    json_t *ev = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type == NULL) {
        json_decref(ev);
        return;
    }
    if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        const char *b64 = json_string_value(json_object_get(ev, "data"));
        size_t n = b64 ? strlen(b64) : 0, m = 0;
        uint8_t *out = malloc(n / 4 * 3 + 3);
        if (out && gbx_b64_decode(b64 ? b64 : "", n, out, &m) == 0 && m > 0)
            (void)!gbx_write_all(strcmp(type, "stdout") == 0 ? STDOUT_FILENO : STDERR_FILENO, out,
                                 m);
        free(out);
    } else if (strcmp(type, "start") == 0) {
        st->proc = (long)json_integer_value(json_object_get(ev, "process"));
        if (st->detach)
            gbx_cli_stream_stop();
        else if (st->thread_started)
            (void)!write(st->wake[1], "s", 1); /* st->proc is the thread's from here on */
    } else if (strcmp(type, "exit") == 0) {
        json_t *sig = json_object_get(ev, "signal");
        st->status = json_is_true(json_object_get(ev, "timed_out")) ? GBX_EXIT_TIMEOUT
                     : sig ? GBX_EXIT_SIGNAL + (int)json_integer_value(sig)
                           : (int)json_integer_value(json_object_get(ev, "exit_code"));
    } else if (strcmp(type, "error") == 0 || strcmp(type, "detached") == 0) {
        gbx_cli_error("%s", json_string_value(json_object_get(ev, "message")));
    }
    json_decref(ev);
}

static const char exec_usage[] =
    "usage: glovebox exec SANDBOX [options] -- CMD [ARG...]\n"
    "  -i, --stdin          send stdin to the command (end of file closes its stdin)\n"
    "  -t, --tty            run it on a terminal (raw mode here with -i on a terminal)\n"
    "  -d, --detach         start it, print its process handle and leave it running\n"
    "      --json           with -d: print {\"sandbox\":ID,\"proc\":N}\n"
    "      --timeout D      kill it after D (\"30s\", \"5m\"); exit status 124\n"
    "  -u, --user U         a user name, uid or uid:gid (default root)\n"
    "  -w, --cwd DIR        working directory (default the user's home)\n"
    "  -e, --env K=V        environment (repeatable; replaces the default one)\n"
    "^C (SIGINT), SIGTERM and SIGHUP are passed on to the command, which keeps its output\n"
    "coming here; the exit status is then its own (130, 143, 129 when it dies of them). A\n"
    "second SIGTERM or SIGHUP, or 10 s without the command ending after the first, ends this\n"
    "client. If this client goes away before the command ends, the daemon kills it (not\n"
    "with -d).\n";

/* -d: the process started (or not); say its handle */
static int detached(const struct exec_state *st, int json)
{
    if (st->proc <= 0) {
        gbx_cli_error("the stream ended before the process started");
        return 125;
    }
    if (json) {
        json_t *o = json_pack("{s:s,s:i}", "sandbox", st->id, "proc", (json_int_t)st->proc);
        char *t = json_dumps(o, JSON_COMPACT);
        puts(t);
        free(t);
        json_decref(o);
    } else {
        printf("%ld\n", st->proc);
    }
    return fflush(stdout) == 0 ? 0 : 125;
}

static int run_exec(struct exec_state *st, json_t *body, int json)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", st->id);
    st->sigfd = -1;
    if (!st->detach) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        if (st->tty)
            sigaddset(&mask, SIGWINCH);
        /* blocked here, before the second thread exists, so that it inherits the mask */
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        st->sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (st->sigfd < 0)
            gbx_cli_error("cannot catch signals: %s", strerror(errno));
        if (start_forwarding(st) < 0 || st->sigfd < 0) {
            pthread_sigmask(SIG_UNBLOCK, &mask, NULL); /* they end us, as before */
            if (st->sigfd >= 0)
                close(st->sigfd);
            st->sigfd = -1;
        }
        json_object_set_new(body, "kill_on_disconnect", json_true());
    }
    if (st->tty && st->forward_stdin && isatty(STDIN_FILENO))
        tty_raw();
    json_t *reply = NULL;
    int status = gbx_cli_stream("POST", path, body, on_line, st, &reply);
    stop_forwarding(st);
    tty_restore();
    if (st->sigfd >= 0)
        close(st->sigfd);
    if (status != 200) {
        if (status >= 0)
            gbx_cli_print_error(status, reply);
        const char *msg =
            json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
        int r = status == 400 ? gbx_cli_cannot_run(msg) : GBX_EXIT_GLOVEBOX;
        json_decref(reply);
        return r;
    }
    json_decref(reply);
    if (st->detach)
        return detached(st, json);
    if (st->status < 0) {
        gbx_cli_error("the stream ended before the process did");
        return GBX_EXIT_GLOVEBOX;
    }
    return st->status;
}

int gbx_cmd_exec(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"user", required_argument, NULL, 'u'}, {"cwd", required_argument, NULL, 'w'},
        {"env", required_argument, NULL, 'e'},  {"stdin", no_argument, NULL, 'i'},
        {"tty", no_argument, NULL, 't'},        {"timeout", required_argument, NULL, 'T'},
        {"detach", no_argument, NULL, 'd'},     {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
    };
    json_t *body = json_object(), *env = json_object();
    struct exec_state st = {.status = -1, .sigfd = -1};
    int c, rc = GBX_EXIT_GLOVEBOX, json = 0;
    /* glovebox exec ID [options] -- CMD, or glovebox exec [options] ID -- CMD */
    if (argc > 1 && argv[1][0] != '-') {
        st.id = argv[1];
        argc--;
        argv++;
    }
    optind = 0;
    while ((c = getopt_long(argc, argv, "+u:w:e:itdh", longopts, NULL)) != -1) {
        switch (c) {
        case 'u':
            json_object_set_new(body, "user", json_string(optarg));
            break;
        case 'w':
            json_object_set_new(body, "cwd", json_string(optarg));
            break;
        case 'i':
            st.forward_stdin = 1;
            break;
        case 't':
            st.tty = 1;
            break;
        case 'd':
            st.detach = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'T': {
            uint64_t ms;
            if (gbx_parse_duration_ms(optarg, &ms) < 0) {
                gbx_cli_error("invalid --timeout '%s': use a duration like 30s, 5m, 1500ms",
                              optarg);
                goto out;
            }
            json_object_set_new(body, "timeout", json_string(optarg));
            break;
        }
        case 'e': {
            const char *eq = strchr(optarg, '=');
            if (gbx_env_valid(optarg) < 0 || eq == NULL) {
                gbx_cli_error("invalid --env '%s': use KEY=VALUE", optarg);
                goto out;
            }
            char *key = strndup(optarg, (size_t)(eq - optarg));
            json_object_set_new(env, key, json_string(eq + 1));
            free(key);
            break;
        }
        case 'h':
            fputs(exec_usage, stdout);
            rc = 0;
            goto out;
        default:
            goto out;
        }
    }
    if (st.id == NULL && optind < argc)
        st.id = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (st.id == NULL || optind >= argc) {
        fputs(exec_usage, stderr);
        goto out;
    }
    if (st.detach && st.forward_stdin) {
        gbx_cli_error("-i and --detach do not go together: nothing would be here to send stdin");
        goto out;
    }
    if (json && !st.detach) {
        gbx_cli_error("--json applies only with --detach");
        goto out;
    }
    json_t *cmd = json_array();
    for (int i = optind; i < argc; i++)
        json_array_append_new(cmd, json_string(argv[i]));
    json_object_set_new(body, "cmd", cmd);
    if (st.tty) {
        unsigned rows, cols;
        term_size(&rows, &cols);
        json_object_set_new(
            body, "pty",
            json_pack("{s:i,s:i}", "rows", (json_int_t)rows, "cols", (json_int_t)cols));
        /* the default environment has TERM with a terminal; a given one gets ours */
        const char *term = getenv("TERM");
        if (json_object_size(env) && term && json_object_get(env, "TERM") == NULL)
            json_object_set_new(env, "TERM", json_string(term));
    }
    if (st.forward_stdin)
        json_object_set_new(body, "stdin", json_true());
    if (json_object_size(env))
        json_object_set(body, "env", env);
    rc = run_exec(&st, body, json);
out:
    json_decref(body);
    json_decref(env);
    return rc;
}
const char *const gbx_usage_exec = exec_usage;
