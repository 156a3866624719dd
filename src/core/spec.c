/* SPDX-License-Identifier: MIT */
/* The create spec (spec.h): the native body's parser and its inverse, and the checks the
 * front ends share. */
#include "core/spec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/parse.h"
#include "core/limits.h"
#include "egress/policy.h"
#include "sandbox/backend.h"

#define MAX_MAP_ENTRIES 64
#define MAX_MAP_VALUE 4096
#define MAX_TIMEOUT_S (30 * 24 * 3600)

void gbx_create_spec_init(struct gbx_create_spec *c)
{
    memset(c, 0, sizeof(*c));
}

void gbx_create_spec_clear(struct gbx_create_spec *c)
{
    free(c->id);
    free(c->template_name);
    free(c->snapshot);
    free(c->idem_key);
    json_decref(c->env);
    json_decref(c->metadata);
    json_decref(c->labels);
    json_decref(c->network);
    gbx_egress_policy_free(c->policy);
    memset(c, 0, sizeof(*c));
}

static char *dup_or_null(const char *s)
{
    return s ? gbx_xstrdup(s) : NULL;
}

static json_t *copy_or_null(const json_t *v)
{
    return v ? json_deep_copy(v) : NULL;
}

void gbx_create_spec_copy(struct gbx_create_spec *dst, const struct gbx_create_spec *src)
{
    *dst = *src;
    dst->id = dup_or_null(src->id);
    dst->template_name = dup_or_null(src->template_name);
    dst->snapshot = dup_or_null(src->snapshot);
    dst->idem_key = dup_or_null(src->idem_key);
    dst->env = copy_or_null(src->env);
    dst->metadata = copy_or_null(src->metadata);
    dst->labels = copy_or_null(src->labels);
    dst->network = copy_or_null(src->network);
    dst->policy = src->policy ? gbx_egress_policy_dup(src->policy) : NULL;
}

int gbx_json_size(const json_t *v, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) > 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v))
        return -EINVAL;
    int r = gbx_parse_size(json_string_value(v), out);
    /* a size JSON cannot say as a number again (the spec's JSON) is too large to hold */
    return r == 0 && *out > INT64_MAX ? -ERANGE : r;
}

int gbx_json_timeout_ms(const json_t *v, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0 &&
        json_integer_value(v) <= MAX_TIMEOUT_S) {
        *out = (uint64_t)json_integer_value(v) * 1000;
        return 0;
    }
    if (json_is_string(v) && gbx_parse_duration_ms(json_string_value(v), out) == 0 &&
        *out <= (uint64_t)MAX_TIMEOUT_S * 1000)
        return 0;
    return -EINVAL;
}

/* A {"k": "v"} object of at most MAX_MAP_ENTRIES strings: metadata and labels. Label keys
 * and values are names (1-63 of [a-z0-9-], so a filter "k=v" is unambiguous). */
static int check_string_map(const char *field, json_t *v, int names, struct gbx_err **err)
{
    const char *k;
    json_t *x;
    if (!json_is_object(v) || json_object_size(v) > MAX_MAP_ENTRIES)
        goto bad;
    json_object_foreach(v, k, x)
    {
        if (!json_is_string(x) || strlen(k) == 0 || strlen(k) > 128 ||
            json_string_length(x) > MAX_MAP_VALUE ||
            memchr(json_string_value(x), 0, json_string_length(x)))
            goto bad;
        if (names && (gbx_name_valid(k) < 0 || gbx_name_valid(json_string_value(x)) < 0))
            goto bad;
    }
    return 0;
bad:
    if (names)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "'%s' must be an object of at most %d entries whose keys and "
                           "values are 1-63 of a-z, 0-9 and '-'",
                           field, MAX_MAP_ENTRIES);
    return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                       "'%s' must be an object of at most %d string values (keys up to "
                       "128 bytes, values up to %d)",
                       field, MAX_MAP_ENTRIES, MAX_MAP_VALUE);
}

/* {"NAME": "value"}: the environment every process of the sandbox starts with. */
static int check_env(json_t *v, struct gbx_err **err)
{
    const char *k;
    json_t *x;
    if (!json_is_object(v) || json_object_size(v) > 1024)
        goto bad;
    json_object_foreach(v, k, x)
    {
        char kv[8192];
        /* a '=' in the name would make it another variable ("A=B": "x" is A="B=x") */
        if (!json_is_string(x) || strchr(k, '=') != NULL ||
            snprintf(kv, sizeof(kv), "%s=%s", k, json_string_value(x)) >= (int)sizeof(kv) ||
            gbx_env_valid(kv) < 0 || memchr(json_string_value(x), 0, json_string_length(x)))
            goto bad;
    }
    return 0;
bad:
    return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                       "'env' must be an object of at most 1024 variables: NAME to a string "
                       "value (at most 8 KiB each)");
}

int gbx_create_spec_set_env(struct gbx_create_spec *c, json_t *v, struct gbx_err **err)
{
    if (check_env(v, err) < 0)
        return -1;
    json_decref(c->env);
    c->env = json_deep_copy(v);
    return 0;
}

int gbx_create_spec_set_metadata(struct gbx_create_spec *c, json_t *v, struct gbx_err **err)
{
    if (check_string_map("metadata", v, 0, err) < 0)
        return -1;
    json_decref(c->metadata);
    c->metadata = json_deep_copy(v);
    return 0;
}

/* A size too large to hold at all (a wrapped "100000000T"): the same answer as one above the
 * maximum. */
static int size_too_large(const char *field, const json_t *v, uint64_t max, struct gbx_err **err)
{
    char m[32];
    gbx_limits_fmt_size(max, m, sizeof(m));
    return gbx_err_set(err, ERANGE, GBX_ERR_INVALID,
                       "'%s' %s is too large: this daemon's maximum is %s", field,
                       json_is_string(v) ? json_string_value(v) : "(a number)", max ? m : "16E");
}

/* One field of the native body. 0 or -1 with *err. */
static int parse_field(const struct gbx_limits *lim, const char *key, json_t *v,
                       struct gbx_create_spec *c, struct gbx_err **err)
{
    if (strcmp(key, "id") == 0) {
        if (!json_is_string(v) || gbx_sandbox_id_valid(json_string_value(v)) < 0)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'id' must be 1-63 of [a-z0-9-], not starting with '-'");
        c->id = gbx_xstrdup(json_string_value(v));
    } else if (strcmp(key, "template") == 0) {
        if (!json_is_string(v) || gbx_name_valid(json_string_value(v)) < 0)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'template' must be a template name");
        c->template_name = gbx_xstrdup(json_string_value(v));
    } else if (strcmp(key, "memory") == 0) {
        int r = gbx_json_size(v, &c->limits.memory_bytes);
        if (r == -ERANGE)
            return size_too_large("memory", v, lim->max.memory_bytes, err);
        if (r < 0 || c->limits.memory_bytes < (4u << 20))
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'memory' must be a size of at least 4M (bytes, or a "
                               "string like \"512M\")");
    } else if (strcmp(key, "disk") == 0) {
        int r = gbx_json_size(v, &c->disk_bytes);
        if (r == -ERANGE)
            return size_too_large("disk", v, lim->max_disk, err);
        if (r < 0 || c->disk_bytes < (1u << 20))
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'disk' must be a size of at least 1M");
    } else if (strcmp(key, "pids") == 0) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4194304)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'pids' must be an integer from 1 to 4194304");
        c->limits.pids = (uint64_t)json_integer_value(v);
    } else if (strcmp(key, "timeout") == 0) {
        if (gbx_json_timeout_ms(v, &c->timeout_ms) < 0)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'timeout' must be seconds (0 to 2592000) or a duration "
                               "like \"30s\", \"5m\"");
        c->timeout_set = 1;
    } else if (strcmp(key, "cpus") == 0) {
        double d = json_is_number(v) ? json_number_value(v) : -1;
        if (d < 0.01 || d > 1024)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'cpus' must be a number of CPUs from 0.01 to 1024");
        c->limits.cpu_millis = (uint32_t)(d * 1000 + 0.5);
    } else if (strcmp(key, "env") == 0) {
        return gbx_create_spec_set_env(c, v, err);
    } else if (strcmp(key, "metadata") == 0) {
        return gbx_create_spec_set_metadata(c, v, err);
    } else if (strcmp(key, "labels") == 0) {
        if (check_string_map("labels", v, 1, err) < 0)
            return -1;
        c->labels = json_deep_copy(v);
    } else if (strcmp(key, "network") == 0) {
        if (!json_is_object(v) && !json_is_null(v))
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'network' must be an object {mode, rules, secrets}");
        if (json_is_object(v))
            c->network = json_deep_copy(v);
    } else if (strcmp(key, "snapshot") == 0) {
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 63)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'snapshot' must be a snapshot id or name");
        c->snapshot = gbx_xstrdup(json_string_value(v));
    } else if (strcmp(key, "on_timeout") == 0) {
        const char *ot = json_is_string(v) ? json_string_value(v) : "";
        if (strcmp(ot, "kill") != 0 && strcmp(ot, "pause") != 0)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'on_timeout' must be \"kill\" or \"pause\"");
        c->on_timeout_pause = ot[0] == 'p';
    } else if (strcmp(key, "auto_resume") == 0) {
        if (!json_is_boolean(v))
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "'auto_resume' must be a boolean");
        c->auto_resume = json_is_true(v);
    } else if (strcmp(key, "public") == 0) {
        if (!json_is_boolean(v))
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'public' must be true (ingress takes any request) or false");
        c->public_traffic = json_is_true(v);
    } else if (strcmp(key, "idempotency_key") == 0) {
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 256 ||
            memchr(json_string_value(v), 0, json_string_length(v)))
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "'idempotency_key' must be a string of 1 to 256 bytes");
        c->idem_key = gbx_xstrdup(json_string_value(v));
    } else {
        return gbx_err_set(
            err, EINVAL, GBX_ERR_INVALID,
            "unknown field '%s' (expected id, template, snapshot, memory, disk, "
            "pids, cpus, timeout, on_timeout, auto_resume, env, metadata, labels, network, "
            "public, idempotency_key)",
            key);
    }
    return 0;
}

int gbx_create_spec_parse(const struct gbx_limits *lim, json_t *body, struct gbx_create_spec *c,
                          struct gbx_err **err)
{
    gbx_create_spec_init(c);
    if (!json_is_object(body))
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "the create request must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        if (parse_field(lim, key, v, c, err) < 0) {
            gbx_create_spec_clear(c);
            return -1;
        }
    }
    return 0;
}

static void set_str(json_t *o, const char *k, const char *v)
{
    if (v)
        json_object_set_new(o, k, json_string(v));
}

static void set_copy(json_t *o, const char *k, const json_t *v)
{
    if (v)
        json_object_set_new(o, k, json_deep_copy(v));
}

json_t *gbx_create_spec_json(const struct gbx_create_spec *c)
{
    json_t *o = json_object();
    set_str(o, "id", c->id);
    set_str(o, "template", c->template_name);
    set_str(o, "snapshot", c->snapshot);
    set_str(o, "idempotency_key", c->idem_key);
    if (c->limits.memory_bytes)
        json_object_set_new(o, "memory", json_integer((json_int_t)c->limits.memory_bytes));
    if (c->disk_bytes)
        json_object_set_new(o, "disk", json_integer((json_int_t)c->disk_bytes));
    if (c->limits.pids)
        json_object_set_new(o, "pids", json_integer((json_int_t)c->limits.pids));
    if (c->limits.cpu_millis)
        json_object_set_new(o, "cpus", json_real(c->limits.cpu_millis / 1000.0));
    if (c->timeout_set && c->timeout_ms % 1000 == 0) {
        json_object_set_new(o, "timeout", json_integer((json_int_t)(c->timeout_ms / 1000)));
    } else if (c->timeout_set) {
        char t[32];
        snprintf(t, sizeof(t), "%" PRIu64 "ms", c->timeout_ms);
        json_object_set_new(o, "timeout", json_string(t));
    }
    if (c->on_timeout_pause)
        json_object_set_new(o, "on_timeout", json_string("pause"));
    if (c->public_traffic)
        json_object_set_new(o, "public", json_true());
    if (c->auto_resume)
        json_object_set_new(o, "auto_resume", json_true());
    set_copy(o, "env", c->env);
    set_copy(o, "metadata", c->metadata);
    set_copy(o, "labels", c->labels);
    if (c->policy)
        json_object_set_new(o, "network", gbx_egress_policy_json(c->policy));
    else
        set_copy(o, "network", c->network);
    return o;
}
