/* SPDX-License-Identifier: MIT */
#include "sbtest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fileutil.h"
#include "base/mem.h"

void sbt_require_sandboxes(void)
{
    if (geteuid() != 0) {
        printf("skip: needs root to create sandboxes\n");
        exit(77);
    }
    if (access("/proc/self/ns/user", F_OK) < 0) {
        printf("skip: no user namespaces\n");
        exit(77);
    }
}

/* Sandboxes still alive when a test fails half-way (cmocka jumps out of the test) are
 * destroyed when the runtime is freed, so a failing test leaves nothing behind either. */
#define SBT_MAX_LIVE 64
static struct sbt *live[SBT_MAX_LIVE];

static void live_add(struct sbt *t)
{
    for (int i = 0; i < SBT_MAX_LIVE; i++)
        if (live[i] == NULL) {
            live[i] = t;
            return;
        }
}

static void live_del(struct sbt *t)
{
    for (int i = 0; i < SBT_MAX_LIVE; i++)
        if (live[i] == t)
            live[i] = NULL;
}

struct gbx_runtime *sbt_runtime_new(void)
{
    char tmpl[] = "/tmp/gbx-test-XXXXXX";
    char *base = mkdtemp(tmpl);
    assert_non_null(base);
    /* the runtime dir must be searchable by the sandboxes' unprivileged uids */
    assert_int_equal(chmod(base, 0711), 0);
    struct gbx_runtime_opts o;
    gbx_autofree char *state = gbx_asprintf("%s/state", base);
    gbx_autofree char *run = gbx_asprintf("%s/run", base);
    /* share the generated host template between tests: state dir from the environment */
    const char *shared = getenv("GBX_TEST_STATE_DIR");
    o.state_dir = shared ? shared : state;
    o.runtime_dir = run;
    struct gbx_runtime *rt = gbx_xcalloc(1, sizeof(*rt));
    struct gbx_err *err = NULL;
    if (gbx_runtime_init(rt, &o, &err) < 0) {
        fprintf(stderr, "runtime init: %s\n", err->msg);
        gbx_err_free(err);
        fail();
    }
    return rt;
}

void sbt_runtime_free(struct gbx_runtime *rt)
{
    if (rt == NULL)
        return;
    for (int i = 0; i < SBT_MAX_LIVE; i++) {
        if (live[i] && live[i]->sb && live[i]->sb->rt == rt) {
            fprintf(stderr, "sbtest: destroying sandbox '%s' left by a failed test\n",
                    live[i]->sb->id);
            gbx_agent_free(live[i]->agent);
            live[i]->agent = NULL;
            (void)!gbx_sandbox_destroy(live[i]->sb, NULL);
            live[i]->sb = NULL;
            live[i] = NULL;
        }
    }
    gbx_autofree char *base = gbx_xstrdup(rt->runtime_dir);
    char *slash = strrchr(base, '/');
    if (slash)
        *slash = '\0';
    gbx_runtime_release(rt);
    free(rt);
    if (strncmp(base, "/tmp/gbx-test-", 14) == 0)
        (void)!gbx_rm_rf(base);
}

const char *sbt_build_path(const char *name)
{
    static char buf[4096];
    const char *b = getenv("BUILD");
    snprintf(buf, sizeof(buf), "%s/%s", b && *b ? b : "build", name);
    return buf;
}

void sbt_create(struct gbx_runtime *rt, struct sbt *t, const struct gbx_cg_limits *lim,
                uint64_t disk_bytes)
{
    memset(t, 0, sizeof(*t));
    gbx_autofree char *id = gbx_sandbox_id_new();
    struct gbx_sandbox_spec spec = {.id = id, .disk_bytes = disk_bytes, .ctl_socket = 1};
    if (lim)
        spec.limits = *lim;
    struct gbx_err *err = NULL;
    if (gbx_sandbox_create(rt, &spec, &t->sb, &err) < 0) {
        fprintf(stderr, "create: %s\n", err->msg);
        gbx_err_free(err);
        fail();
    }
    live_add(t);
    if (gbx_agent_open(gbx_steal_fd(&t->sb->conn_fd), &t->agent, &err) < 0) {
        fprintf(stderr, "agent: %s\n", err->msg);
        gbx_err_free(err);
        fail();
    }
}

void sbt_destroy(struct sbt *t)
{
    live_del(t);
    gbx_agent_free(t->agent);
    t->agent = NULL;
    struct gbx_err *err = NULL;
    if (t->sb && gbx_sandbox_destroy(t->sb, &err) < 0) {
        fprintf(stderr, "destroy: %s\n", err->msg);
        gbx_err_free(err);
        t->sb = NULL;
        fail();
    }
    t->sb = NULL;
}

/* Append with geometric growth: outputs of 100 MB arrive in 64 KiB chunks. The capacity
 * is kept in front of the buffer's logical end by rounding to powers of two. */
static size_t cap_for(size_t n)
{
    size_t c = 64;
    while (c < n)
        c *= 2;
    return c;
}

static void append(uint8_t **buf, size_t *len, const uint8_t *d, size_t n)
{
    size_t need = *len + n + 1;
    if (cap_for(need) != cap_for(*len + 1) || *len == 0)
        *buf = gbx_xrealloc(*buf, cap_for(need));
    memcpy(*buf + *len, d, n);
    *len += n;
    (*buf)[*len] = '\0';
}

void sbt_run(struct sbt *t, const char *user, const char *const *argv, const void *in,
             size_t in_len, struct sbt_result *r)
{
    memset(r, 0, sizeof(*r));
    r->out = gbx_xcalloc(1, 1);
    r->err = gbx_xcalloc(1, 1);
    struct gbx_spawn_opts so = {.argv = argv, .user = user, .stdin_open = in != NULL};
    uint32_t proc;
    pid_t pid;
    struct gbx_err *err = NULL;
    if (gbx_agent_spawn(t->agent, &so, &proc, &pid, &err) < 0) {
        fprintf(stderr, "spawn %s: %s\n", argv[0], err->msg);
        gbx_err_free(err);
        fail();
    }
    if (in) {
        const uint8_t *p = in;
        size_t left = in_len;
        while (left) {
            size_t n = left > 65536 ? 65536 : left;
            assert_int_equal(gbx_agent_stdin(t->agent, proc, p, n, NULL), 0);
            p += n;
            left -= n;
        }
        assert_int_equal(gbx_agent_close_stdin(t->agent, proc, NULL), 0);
    }
    for (;;) {
        struct gbx_event ev;
        int rr = gbx_agent_next_event(t->agent, &ev, 60000, &err);
        if (rr <= 0) {
            fprintf(stderr, "wait for %s: %s\n", argv[0], err ? err->msg : "timeout");
            gbx_err_free(err);
            fail();
        }
        int done = 0;
        if (ev.id == proc) {
            if (ev.kind == GBX_EVENT_STDOUT)
                append(&r->out, &r->out_len, ev.data, ev.len);
            else if (ev.kind == GBX_EVENT_STDERR)
                append(&r->err, &r->err_len, ev.data, ev.len);
            else if (ev.kind == GBX_EVENT_EXIT) {
                r->exit_code = ev.exit_code;
                r->exit_signal = ev.exit_signal;
                done = 1;
            }
        }
        gbx_event_release(&ev);
        if (done)
            break;
    }
}

void sbt_sh(struct sbt *t, const char *script, struct sbt_result *r)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    sbt_run(t, NULL, argv, NULL, 0, r);
}

void sbt_result_release(struct sbt_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

void sbt_install_probe(struct sbt *t)
{
    gbx_autofree char *data = NULL;
    size_t len = 0;
    assert_int_equal(gbx_read_file(sbt_build_path("gbx-probe"), 64 << 20, &data, &len), 0);
    struct gbx_err *err = NULL;
    if (gbx_agent_write_all(t->agent, NULL, "/tmp/gbx-probe", 0755, data, len, &err) < 0) {
        fprintf(stderr, "install probe: %s\n", err->msg);
        gbx_err_free(err);
        fail();
    }
}
