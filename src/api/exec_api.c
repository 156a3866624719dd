/* SPDX-License-Identifier: MIT */
/* POST /v1/sandboxes/{id}/exec: the request (http/exec.h says what it gets back):
 *
 *   {"cmd": ["ls", "-l"] | "shell": "ls -l | wc -l", "env": {"K": "V"}, "cwd": "/tmp",
 *    "user": "user", "stdin": true, "pty": {"rows": 24, "cols": 80}, "timeout": "30s",
 *    "wait": true, "max_output": 1048576, "kill_on_disconnect": true}
 *
 * parsed and checked here, then handed to the exec streams (http/exec.c), which the E2B front
 * end shares. */
#include "api/exec_api.h"

#include <event2/http.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/frame.h"
#include "agent/proto.h"
#include "base/mem.h"
#include "base/parse.h"
#include "http/exec.h"
#include "http/http.h"

#define EXEC_MAX_ARGS 4096
#define EXEC_MAX_ENV 1024
/* run-and-wait: output kept per stream, by default and at most */
#define EXEC_WAIT_OUTPUT (1u << 20)
#define EXEC_WAIT_OUTPUT_MAX (16u << 20)
#define EXEC_PTY_MAX 1000
#define EXEC_TIMEOUT_MAX_MS (30ull * 24 * 3600 * 1000)

/* ---- the request ---------------------------------------------------------------------- */

struct exec_opts {
    json_t *cmd, *shell, *env, *cwd, *user; /* borrowed from the body */
    json_t *sandbox_env;                    /* borrowed: the sandbox's env, set at create */
    int pty, stdin_open, wait, kill_on_disconnect;
    uint32_t rows, cols;
    uint64_t timeout_ms;
    size_t max_output;
};

static int pty_size(json_t *v, uint32_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > EXEC_PTY_MAX)
        return -1;
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

static int parse_pty(struct evhttp_request *req, json_t *v, struct exec_opts *o)
{
    if (json_is_boolean(v)) {
        o->pty = json_is_true(v);
        o->rows = 24;
        o->cols = 80;
        return 0;
    }
    const char *key;
    json_t *x;
    if (json_is_object(v)) {
        int ok = 1;
        json_object_foreach(v, key, x)
        {
            ok &= strcmp(key, "rows") == 0 || strcmp(key, "cols") == 0;
        }
        if (ok && pty_size(json_object_get(v, "rows"), &o->rows) == 0 &&
            pty_size(json_object_get(v, "cols"), &o->cols) == 0) {
            o->pty = 1;
            return 0;
        }
    }
    gbx_http_reply_error(req, GBX_ERR_INVALID,
                         "'pty' must be true, false or {\"rows\": N, \"cols\": N} with N from 1 "
                         "to %d",
                         EXEC_PTY_MAX);
    return -1;
}

/* seconds (an integer or a fraction), or a duration string ("30s", "5m", "1500ms") */
static int parse_timeout(json_t *v, uint64_t *out)
{
    if (json_is_number(v) && json_number_value(v) >= 0 &&
        json_number_value(v) <= (double)EXEC_TIMEOUT_MAX_MS / 1000) {
        *out = (uint64_t)(json_number_value(v) * 1000 + 0.5);
        return 0;
    }
    if (json_is_string(v) && gbx_parse_duration_ms(json_string_value(v), out) == 0 &&
        *out <= EXEC_TIMEOUT_MAX_MS)
        return 0;
    return -1;
}

static int parse_flag(struct evhttp_request *req, json_t *v, const char *name, int *out)
{
    if (!json_is_boolean(v)) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'%s' must be true or false", name);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* Check the request body; replies 400 and returns -1 on bad input. */
static int parse_exec(struct evhttp_request *req, json_t *body, struct exec_opts *o)
{
    const char *key;
    json_t *v, *max_output = NULL;
    memset(o, 0, sizeof(*o));
    o->max_output = EXEC_WAIT_OUTPUT;
    json_object_foreach(body, key, v)
    {
        if (strcmp(key, "cmd") == 0) {
            o->cmd = v;
        } else if (strcmp(key, "shell") == 0) {
            o->shell = v;
        } else if (strcmp(key, "env") == 0) {
            o->env = v;
        } else if (strcmp(key, "cwd") == 0) {
            o->cwd = v;
        } else if (strcmp(key, "user") == 0) {
            o->user = v;
        } else if (strcmp(key, "stdin") == 0) {
            if (parse_flag(req, v, "stdin", &o->stdin_open) < 0)
                return -1;
        } else if (strcmp(key, "wait") == 0) {
            if (parse_flag(req, v, "wait", &o->wait) < 0)
                return -1;
        } else if (strcmp(key, "kill_on_disconnect") == 0) {
            if (parse_flag(req, v, "kill_on_disconnect", &o->kill_on_disconnect) < 0)
                return -1;
        } else if (strcmp(key, "pty") == 0) {
            if (parse_pty(req, v, o) < 0)
                return -1;
        } else if (strcmp(key, "timeout") == 0) {
            if (parse_timeout(v, &o->timeout_ms) < 0) {
                gbx_http_reply_error(req, GBX_ERR_INVALID,
                                     "'timeout' must be seconds (0 to 2592000) or a duration "
                                     "like \"30s\", \"5m\"");
                return -1;
            }
        } else if (strcmp(key, "max_output") == 0) {
            max_output = v;
        } else {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "unknown field '%s' (expected cmd or shell, env, cwd, user, "
                                 "stdin, pty, timeout, wait, max_output, "
                                 "kill_on_disconnect)",
                                 key);
            return -1;
        }
    }
    if ((o->cmd == NULL) == (o->shell == NULL)) {
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "give exactly one of 'cmd' (an array of strings) and 'shell' "
                             "(a string)");
        return -1;
    }
    if (o->shell && (!json_is_string(o->shell) || json_string_length(o->shell) == 0 ||
                     memchr(json_string_value(o->shell), 0, json_string_length(o->shell)))) {
        gbx_http_reply_error(req, GBX_ERR_INVALID, "'shell' must be a non-empty string");
        return -1;
    }
    if (o->cmd) {
        size_t i;
        json_t *a;
        if (!json_is_array(o->cmd) || json_array_size(o->cmd) == 0 ||
            json_array_size(o->cmd) > EXEC_MAX_ARGS) {
            gbx_http_reply_error(req, GBX_ERR_INVALID, "'cmd' must be an array of 1 to %d strings",
                                 EXEC_MAX_ARGS);
            return -1;
        }
        json_array_foreach(o->cmd, i, a)
        {
            if (!json_is_string(a) || memchr(json_string_value(a), 0, json_string_length(a))) {
                gbx_http_reply_error(req, GBX_ERR_INVALID,
                                     "'cmd' must be an array of strings without NUL bytes");
                return -1;
            }
        }
    }
    if (o->env) {
        if (!json_is_object(o->env) || json_object_size(o->env) > EXEC_MAX_ENV) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'env' must be an object of at most %d strings", EXEC_MAX_ENV);
            return -1;
        }
        json_object_foreach(o->env, key, v)
        {
            char kv[8192];
            if (!json_is_string(v) ||
                snprintf(kv, sizeof(kv), "%s=%s", key, json_string_value(v)) >= (int)sizeof(kv) ||
                gbx_env_valid(kv) < 0 || memchr(json_string_value(v), 0, json_string_length(v))) {
                gbx_http_reply_error(req, GBX_ERR_INVALID,
                                     "'env' entry '%s' must be a NAME with a string value "
                                     "(at most 8 KiB)",
                                     key);
                return -1;
            }
        }
    }
    json_t *strs[] = {o->cwd, o->user};
    const char *names[] = {"cwd", "user"};
    for (int f = 0; f < 2; f++) {
        json_t *x = strs[f];
        if (x &&
            (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) > 4095 ||
             memchr(json_string_value(x), 0, json_string_length(x)))) {
            gbx_http_reply_error(req, GBX_ERR_INVALID, "'%s' must be a non-empty string", names[f]);
            return -1;
        }
    }
    if (o->kill_on_disconnect && o->wait) {
        /* a waiting request has no reply started: the server does not watch its connection */
        gbx_http_reply_error(req, GBX_ERR_INVALID,
                             "'kill_on_disconnect' applies only to a stream, not with \"wait\": "
                             "true");
        return -1;
    }
    if (max_output) {
        if (!o->wait) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'max_output' applies only with \"wait\": true");
            return -1;
        }
        if (!json_is_integer(max_output) || json_integer_value(max_output) < 0 ||
            json_integer_value(max_output) > EXEC_WAIT_OUTPUT_MAX) {
            gbx_http_reply_error(req, GBX_ERR_INVALID,
                                 "'max_output' must be a number of bytes from 0 to %u",
                                 EXEC_WAIT_OUTPUT_MAX);
            return -1;
        }
        o->max_output = (size_t)json_integer_value(max_output);
    }
    return 0;
}

/* Build the SPAWN request from checked options: the sandbox's environment (if it has one),
 * the request's own on top. */
static void build_spawn(struct gbx_msg *m, const struct exec_opts *o)
{
    json_t *sbenv = o->sandbox_env;
    const char *key;
    json_t *v;
    json_t *env = json_object();
    if (sbenv && o->env == NULL) {
        /* what the agent's default environment would have had, unless the sandbox's says */
        json_object_set_new(env, "LANG", json_string("C.UTF-8"));
        if (o->pty)
            json_object_set_new(env, "TERM", json_string("xterm-256color"));
    }
    if (sbenv)
        json_object_update(env, sbenv);
    if (o->env)
        json_object_update(env, o->env);
    if (o->shell) {
        gbx_msg_put_str(m, GBX_A_ARGV, "/bin/sh");
        gbx_msg_put_str(m, GBX_A_ARGV, "-c");
        gbx_msg_put_str(m, GBX_A_ARGV, json_string_value(o->shell));
    } else {
        size_t i;
        json_array_foreach(o->cmd, i, v)
        {
            gbx_msg_put_str(m, GBX_A_ARGV, json_string_value(v));
        }
    }
    json_object_foreach(env, key, v)
    {
        gbx_autofree char *kv = gbx_asprintf("%s=%s", key, json_string_value(v));
        gbx_msg_put_str(m, GBX_A_ENV, kv);
    }
    json_decref(env);
    if (o->cwd)
        gbx_msg_put_str(m, GBX_A_CWD, json_string_value(o->cwd));
    if (o->user)
        gbx_msg_put_str(m, GBX_A_USER, json_string_value(o->user));
    if (o->pty) {
        gbx_msg_put_u32(m, GBX_A_PTY_ROWS, o->rows);
        gbx_msg_put_u32(m, GBX_A_PTY_COLS, o->cols);
    }
    if (o->stdin_open)
        gbx_msg_put_u32(m, GBX_A_STDIN, 1);
}

/* What the audit records say ran (the environment's values stay out of the log). */
static json_t *audit_what(const struct exec_opts *o)
{
    json_t *what = json_object();
    json_object_set(what, o->cmd ? "cmd" : "shell", o->cmd ? o->cmd : o->shell);
    json_object_set_new(what, "user", o->user ? json_copy(o->user) : json_string("root"));
    if (o->cwd)
        json_object_set(what, "cwd", o->cwd);
    if (o->pty)
        json_object_set_new(what, "pty", json_true());
    if (o->stdin_open)
        json_object_set_new(what, "stdin", json_true());
    if (o->wait)
        json_object_set_new(what, "wait", json_true());
    if (o->timeout_ms)
        json_object_set_new(what, "timeout_ms", json_integer((json_int_t)o->timeout_ms));
    if (o->kill_on_disconnect)
        json_object_set_new(what, "kill_on_disconnect", json_true());
    return what;
}

static void build(struct gbx_msg *m, void *arg)
{
    build_spawn(m, arg);
}

void gbx_api_exec(struct gbx_server *srv, const struct gbx_actor *who, struct event_base *base,
                  struct evhttp_request *req, struct gbx_sandbox *sb, json_t *sandbox_env)
{
    json_t *body = gbx_http_body_object(req);
    if (body == NULL)
        return;
    struct exec_opts o;
    if (parse_exec(req, body, &o) < 0) {
        json_decref(body);
        return;
    }
    o.sandbox_env = sandbox_env;
    struct gbx_exec_native_opts no = {.wait = o.wait,
                                      .timeout_ms = o.timeout_ms,
                                      .max_output = o.max_output,
                                      .kill_on_disconnect = o.kill_on_disconnect,
                                      .what = audit_what(&o)};
    gbx_exec_native(srv, who, base, req, sb, &no, build, &o);
    json_decref(body);
}
