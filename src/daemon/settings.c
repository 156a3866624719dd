/* SPDX-License-Identifier: MIT */
/* The daemon's settings (settings.h): the table, applying one setting, reading the file and
 * the flags, and what a reload changes. */
#include "daemon/settings.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/conf.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/ratelimit.h"
#include "base/util.h"

#define RELOAD 1u /* a running daemon's reload applies it */
#define NOARG 2u  /* a flag without a value (true) */
#define LIMIT 4u  /* one of gbx_limits': its value in force is read back from there */

/* Every setting: its name (the flag without "--", the file's key), flags, and the default
 * it has when neither the file nor a flag gives it (NULL: off/none; for LIMIT: computed from
 * the host, read back). */
static const struct def {
    const char *name;
    unsigned flags;
    const char *dflt;
} defs[] = {
    {"state-dir", 0, "/var/lib/glovebox"},
    {"runtime-dir", 0, "/run/glovebox"},
    {"log-format", RELOAD, "text"},
    {"log-level", RELOAD, "info"},
    {"kill-on-exit", RELOAD | NOARG, "false"},
    {"listen", RELOAD, NULL},
    {"pool", RELOAD, "0"},
    {"max-body", 0, "1M"},
    {"max-upload", 0, "64M"},
    {"egress-default", RELOAD, "policy"},
    {"ingress-domain", RELOAD, NULL},
    {"egress-hosts", 0, NULL},
    {"egress-resolver", 0, NULL},
    {"egress-extra-ca", 0, NULL},
    {"egress-max-conns", 0, "256"},
    {"audit-rate", 0, "20/100"},
    {"state-reserve", 0, "the smaller of 64M and 1% of its file system"},
    {"retain-snapshots", RELOAD, NULL},
    {"retain-artifacts", RELOAD, NULL},
    {"retain-sessions", RELOAD, NULL},
    {"retain-stopped", RELOAD, NULL},
    {"gc-interval", RELOAD, "60s"},
    {"hibernate-timeout", RELOAD, "2m"},
    {"helper-timeout", RELOAD, "30m"},
    {"hello-timeout", RELOAD, "30s"},
    {"loop-priority", 0, "10"},
    {"rate-limit", RELOAD, "100/200"},
    {"max-conns", RELOAD, "1024"},
    {"max-conns-per-ip", RELOAD, "256"},
    {"header-timeout", RELOAD, "10s"},
    {"body-timeout", RELOAD, "60s"},
    {"body-min-rate", RELOAD, "16K"},
    {"idle-timeout", RELOAD, "60s"},
    {"default-memory", RELOAD | LIMIT, NULL},
    {"default-pids", RELOAD | LIMIT, NULL},
    {"default-cpus", RELOAD | LIMIT, NULL},
    {"default-disk", RELOAD | LIMIT, NULL},
    {"max-memory", RELOAD | LIMIT, NULL},
    {"max-pids", RELOAD | LIMIT, NULL},
    {"max-cpus", RELOAD | LIMIT, NULL},
    {"max-disk", RELOAD | LIMIT, NULL},
    {"max-timeout", RELOAD | LIMIT, NULL},
    {"quota-sandboxes", RELOAD | LIMIT, NULL},
    {"quota-memory", RELOAD | LIMIT, NULL},
    {"quota-disk", RELOAD | LIMIT, NULL},
    {"quota-snapshots", RELOAD | LIMIT, NULL},
    {"quota-sessions", RELOAD | LIMIT, NULL},
    {"quota-artifacts", RELOAD | LIMIT, NULL},
    {"quota-artifact-bytes", RELOAD | LIMIT, NULL},
    {"quota-templates", RELOAD | LIMIT, NULL},
};
#define NDEFS GBX_ARRAY_SIZE(defs)
_Static_assert(GBX_ARRAY_SIZE(defs) <= GBX_SETTINGS_MAX, "GBX_SETTINGS_MAX is too small");

static int def_index(const char *name)
{
    for (size_t i = 0; i < NDEFS; i++)
        if (strcmp(defs[i].name, name) == 0)
            return (int)i;
    return -1;
}

const struct option *gbx_settings_longopts(void)
{
    static struct option opts[GBX_SETTINGS_MAX + 3];
    if (opts[0].name == NULL) {
        size_t n = 0;
        opts[n++] = (struct option){"config", required_argument, NULL, GBX_OPT_CONFIG};
        for (size_t i = 0; i < NDEFS; i++)
            opts[n++] = (struct option){
                defs[i].name, defs[i].flags & NOARG ? no_argument : required_argument, NULL, 0};
        opts[n] = (struct option){"help", no_argument, NULL, 'h'};
    }
    return opts;
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

static int bad(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errsz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
    return -1;
}

/* A duration from lo to hi ms (or 0, when zero_ok): 0, else -1. */
static int duration_in(const char *value, uint64_t lo, uint64_t hi, int zero_ok, uint64_t *ms)
{
    if (gbx_parse_duration_ms(value, ms) < 0 || *ms > hi || (*ms < lo && !(zero_ok && *ms == 0)))
        return -1;
    return 0;
}

/* Apply one setting; value stays valid as long as st (it is st's copy). 0, or -1 with a
 * message in err. */
static int apply(struct gbx_settings *st, const char *key, const char *value, char *err,
                 size_t errsz)
{
    uint64_t n, ms;
    const char *v = value[0] ? value : NULL;
    if (strcmp(key, "state-dir") == 0 || strcmp(key, "runtime-dir") == 0) {
        if (value[0] != '/')
            return bad(err, errsz, "%s must be an absolute path", key);
        if (key[1] == 't')
            st->cfg.state_dir = value;
        else
            st->cfg.runtime_dir = value;
    } else if (strcmp(key, "listen") == 0) {
        st->lcfg.listen_tcp = v;
    } else if (strcmp(key, "pool") == 0) {
        if (gbx_parse_u64(value, 0, 1024, &n) < 0)
            return bad(err, errsz, "%s must be a number from 0 to 1024", key);
        st->cfg.pool_size = (size_t)n;
    } else if (strcmp(key, "max-body") == 0) {
        if (gbx_parse_size(value, &n) < 0 || n < 4096 || n > (1ull << 30))
            return bad(err, errsz, "%s must be a size from 4K to 1G (e.g. 1M)", key);
        st->lcfg.max_body = (size_t)n;
    } else if (strcmp(key, "max-upload") == 0) {
        if (gbx_parse_size(value, &n) < 0 || n < 4096 || n > (4ull << 30))
            return bad(err, errsz, "%s must be a size from 4K to 4G (e.g. 64M)", key);
        st->cfg.max_upload = st->lcfg.max_upload = (size_t)n;
    } else if (strcmp(key, "log-format") == 0) {
        if (strcmp(value, "json") != 0 && strcmp(value, "text") != 0)
            return bad(err, errsz, "%s must be text or json", key);
        st->log_json = strcmp(value, "json") == 0;
    } else if (strcmp(key, "log-level") == 0) {
        enum gbx_log_level lvl;
        if (gbx_log_parse_level(value, &lvl) < 0)
            return bad(err, errsz, "%s must be debug, info, warn or error", key);
        st->log_level = (int)lvl;
    } else if (strcmp(key, "egress-default") == 0) {
        if (strcmp(value, "policy") != 0 && strcmp(value, "none") != 0 &&
            strcmp(value, "open") != 0)
            return bad(err, errsz, "%s must be policy, none or open", key);
        st->cfg.egress_default = value;
    } else if (strcmp(key, "ingress-domain") == 0) {
        for (const char *p = value; *p; p++)
            if (!(isalnum((unsigned char)*p) || *p == '.' || *p == '-' || *p == ':'))
                return bad(err, errsz,
                           "%s must be a domain name, with a port if clients need one (e.g. "
                           "sandbox.example.com, localhost:7070)",
                           key);
        st->cfg.ingress_domain = v;
    } else if (strcmp(key, "egress-hosts") == 0) {
        st->cfg.egress_hosts = v;
    } else if (strcmp(key, "egress-resolver") == 0) {
        st->cfg.egress_resolver = v;
    } else if (strcmp(key, "egress-extra-ca") == 0) {
        if (v && v[0] != '/')
            return bad(err, errsz, "%s must be an absolute path", key);
        st->cfg.egress_extra_ca = v;
    } else if (strcmp(key, "egress-max-conns") == 0) {
        if (gbx_parse_u64(value, 1, 65536, &n) < 0)
            return bad(err, errsz, "%s must be a number from 1 to 65536", key);
        st->cfg.egress_max_conns = (unsigned)n;
    } else if (strcmp(key, "audit-rate") == 0) {
        uint64_t b = 0;
        char rate[32];
        const char *slash = strchr(value, '/');
        size_t len = slash ? (size_t)(slash - value) : strlen(value);
        if (len >= sizeof(rate) ||
            (memcpy(rate, value, len), rate[len] = '\0', gbx_parse_u64(rate, 0, 1000000, &n) < 0) ||
            (slash && gbx_parse_u64(slash + 1, 1, 1000000, &b) < 0))
            return bad(err, errsz,
                       "%s must be ROWS or ROWS/BURST, numbers up to 1000000 (e.g. 20/100; 0: no "
                       "limit)",
                       key);
        st->cfg.audit_rate = (unsigned)n;
        st->cfg.audit_unlimited = n == 0;
        st->cfg.audit_burst = (unsigned)b;
    } else if (strcmp(key, "state-reserve") == 0) {
        if (gbx_parse_size(value, &n) < 0)
            return bad(err, errsz, "%s must be a size (e.g. 64M; 0: no check)", key);
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
        if (r == NULL)
            return bad(err, errsz, "unknown setting '%s'", key);
        char why[160];
        if (gbx_retention_parse(value, sized, r, why, sizeof(why)) < 0) {
            snprintf(err, errsz, "%s: %s", key, why);
            return -1;
        }
    } else if (strcmp(key, "gc-interval") == 0) {
        if (duration_in(value, 100, 86400000ull, 0, &ms) < 0)
            return bad(err, errsz, "%s must be a duration from 100ms to 24h", key);
        st->cfg.retention.interval_ms = ms;
    } else if (strcmp(key, "hibernate-timeout") == 0 || strcmp(key, "helper-timeout") == 0) {
        if (duration_in(value, 100, 7 * 86400000ull, 0, &ms) < 0)
            return bad(err, errsz, "%s must be a duration from 100ms to 7d", key);
        if (key[1] == 'i')
            st->cfg.criu_timeout_ms = (int64_t)ms;
        else
            st->cfg.helper_timeout_ms = (int64_t)ms;
    } else if (strcmp(key, "hello-timeout") == 0) {
        if (duration_in(value, 100, 600000, 0, &ms) < 0)
            return bad(err, errsz, "%s must be a duration from 100ms to 10m", key);
        st->cfg.hello_timeout_ms = (int64_t)ms;
    } else if (strcmp(key, "loop-priority") == 0) {
        if (gbx_parse_u64(value, 0, 19, &n) < 0)
            return bad(err, errsz, "%s must be a number from 0 to 19", key);
        st->loop_nice = (int)n;
    } else if (strcmp(key, "rate-limit") == 0) {
        if (strcmp(value, "off") == 0)
            st->lcfg.rate_limit = 0;
        else if (gbx_ratelimit_parse(value, &st->lcfg.rate_limit, &st->lcfg.rate_burst) < 0)
            return bad(err, errsz,
                       "%s must be N[/BURST] requests per second (e.g. 100/200), or 0 for none",
                       key);
        st->lcfg.rate_limit_set = 1;
    } else if (strcmp(key, "max-conns") == 0 || strcmp(key, "max-conns-per-ip") == 0) {
        if (gbx_parse_u64(value, 0, 1000000, &n) < 0)
            return bad(err, errsz, "%s must be a number from 0 (no cap) to 1000000", key);
        if (key[9] == '\0')
            st->lcfg.http.max_conns = (unsigned)n;
        else
            st->lcfg.http.max_conns_per_ip = (unsigned)n;
    } else if (strcmp(key, "header-timeout") == 0 || strcmp(key, "body-timeout") == 0 ||
               strcmp(key, "idle-timeout") == 0) {
        if (duration_in(value, 100, 86400000ull, 1, &ms) < 0)
            return bad(err, errsz, "%s must be a duration from 100ms to 24h, or 0 for none", key);
        if (key[0] == 'h')
            st->lcfg.http.header_timeout_ms = ms;
        else if (key[0] == 'b')
            st->lcfg.http.body_timeout_ms = ms;
        else
            st->lcfg.http.idle_timeout_ms = ms;
    } else if (strcmp(key, "body-min-rate") == 0) {
        if (gbx_parse_size(value, &n) < 0 || n > (1ull << 30))
            return bad(err, errsz,
                       "%s must be a size per second up to 1G (e.g. 16K), or 0 for none", key);
        st->lcfg.http.body_min_rate = n;
    } else if (strcmp(key, "kill-on-exit") == 0) {
        if (parse_bool(value, &st->kill_on_exit) < 0)
            return bad(err, errsz, "%s must be true or false", key);
    } else {
        int r = gbx_limits_set(&st->limits, key, value, err, errsz);
        if (r == 1)
            return bad(err, errsz, "unknown setting '%s'", key);
        if (r != 0)
            return -1;
    }
    return 0;
}

/* Record the value (st's own copy), then apply it. */
static int set(struct gbx_settings *st, const char *key, const char *value,
               enum gbx_setting_src src, char *err, size_t errsz)
{
    int i = def_index(key);
    if (i < 0)
        return bad(err, errsz, "unknown setting '%s'", key);
    /* the environment beats the file for the two directories; a flag beats both */
    if (src == GBX_SRC_FILE &&
        ((i == 0 && getenv("GLOVEBOX_STATE_DIR")) || (i == 1 && getenv("GLOVEBOX_RUNTIME_DIR"))))
        return 0;
    char *copy = gbx_xstrdup(value);
    if (apply(st, key, copy, err, errsz) < 0) {
        free(copy);
        return -1;
    }
    /* the old copy is no longer pointed at: this setting's field now holds the new one */
    free(st->val[i]);
    st->val[i] = copy;
    st->src[i] = (unsigned char)src;
    return 0;
}

struct file_ctx {
    struct gbx_settings *st;
    char err[256];
};

static int apply_file_line(void *arg, const char *key, const char *value, unsigned line)
{
    struct file_ctx *fc = arg;
    char msg[200];
    if (set(fc->st, key, value, GBX_SRC_FILE, msg, sizeof(msg)) < 0) {
        snprintf(fc->err, sizeof(fc->err), "line %u: %s", line, msg);
        return -1;
    }
    return 0;
}

/* Read the configuration file: a path given (--config or $GLOVEBOX_CONFIG) must exist; the
 * default one is read if it exists. */
static int load_file(struct gbx_settings *st, int must_exist, char *err, size_t errsz)
{
    char *text = NULL;
    size_t len = 0;
    if (!must_exist && access(st->config_path, F_OK) < 0 && errno == ENOENT)
        return 0;
    int e = gbx_read_file(st->config_path, 1 << 20, &text, &len);
    if (e < 0) {
        snprintf(err, errsz, "cannot read '%s': %s", st->config_path, strerror(-e));
        return -1;
    }
    st->config_found = 1;
    struct file_ctx fc = {.st = st};
    int r = gbx_conf_parse(text, len, apply_file_line, &fc, fc.err, sizeof(fc.err));
    free(text);
    if (r != 0) {
        snprintf(err, errsz, "%s: %s", st->config_path, fc.err);
        return -1;
    }
    return 0;
}

int gbx_settings_load(struct gbx_settings *st, int argc, char **argv, int *help, char *err,
                      size_t errsz)
{
    *st = (struct gbx_settings){
        .loop_nice = 10, .log_level = GBX_LOG_INFO, .lcfg = {.http = GBX_GATE_LIMITS_DEFAULT}};
    *help = 0;
    {
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        gbx_limits_init(&st->limits, pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0,
                        ncpu > 0 ? (unsigned)ncpu : 1);
    }
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
    st->config_path = gbx_xstrdup(config ? config : GBX_DEFAULT_CONFIG);
    st->loaded_at = time(NULL);
    if (load_file(st, must_exist, err, errsz) < 0)
        return -1;
    const struct option *longopts = gbx_settings_longopts();
    int c, idx;
    optind = 0; /* glibc: start over (a reload reads the same argv again) */
    while ((c = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        char msg[200];
        switch (c) {
        case 0:
            if (set(st, longopts[idx].name, optarg ? optarg : "true", GBX_SRC_FLAG, msg,
                    sizeof(msg)) < 0) {
                snprintf(err, errsz, "--%s", msg);
                return -1;
            }
            break;
        case GBX_OPT_CONFIG:
            break;
        case 'h':
            *help = 1;
            return 0;
        default:
            snprintf(err, errsz, "unknown option (see gloveboxd --help)");
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, errsz, "unexpected argument '%s' (see gloveboxd --help)", argv[optind]);
        return -1;
    }
    char why[200];
    if (gbx_limits_check(&st->limits, why, sizeof(why)) < 0) {
        snprintf(err, errsz, "%s", why);
        return -1;
    }
    st->cfg.limits = &st->limits;
    return 0;
}

void gbx_settings_release(struct gbx_settings *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i < NDEFS; i++) {
        free(st->val[i]);
        free(st->pending[i]);
    }
    free(st->config_path);
    free(st->pending_error);
}

static int same(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

void gbx_settings_diff(struct gbx_settings *old, struct gbx_settings *nw, json_t *changed,
                       json_t *restart)
{
    for (size_t i = 0; i < NDEFS; i++) {
        if (same(old->val[i], nw->val[i]))
            continue;
        if (defs[i].flags & RELOAD) {
            json_array_append_new(changed, json_string(defs[i].name));
            continue;
        }
        json_array_append_new(restart, json_string(defs[i].name));
        /* in force: the old value; the file's waits for a restart (the field nw's struct
         * holds is never read again by a running daemon) */
        nw->pending[i] = nw->val[i];
        nw->val[i] = old->val[i] ? gbx_xstrdup(old->val[i]) : NULL;
        nw->src[i] = old->src[i];
    }
}

static const char *const src_names[] = {"default", "file", "flag", "environment"};

json_t *gbx_settings_describe(const struct gbx_settings *st)
{
    json_t *all = json_object();
    for (size_t i = 0; i < NDEFS; i++) {
        const struct def *d = &defs[i];
        const char *value = st->val[i];
        int src = st->src[i];
        char buf[64];
        const char *env = i == 0 ? "GLOVEBOX_STATE_DIR" : i == 1 ? "GLOVEBOX_RUNTIME_DIR" : NULL;
        if (env && src != GBX_SRC_FLAG && getenv(env)) {
            value = getenv(env);
            src = GBX_SRC_ENV;
        } else if (value == NULL && (d->flags & LIMIT) &&
                   gbx_limits_get(&st->limits, d->name, buf, sizeof(buf)) == 0) {
            value = buf;
        } else if (value == NULL) {
            value = d->dflt;
        }
        const char *rate = getenv("GLOVEBOX_E2B_RATE");
        if (src == GBX_SRC_DEFAULT && strcmp(d->name, "rate-limit") == 0 && rate && rate[0]) {
            value = rate;
            src = GBX_SRC_ENV;
        }
        json_t *o = json_pack("{s:s?,s:s}", "value", value, "source", src_names[src]);
        if (st->pending[i])
            json_object_set_new(o, "pending", json_string(st->pending[i]));
        if (!(d->flags & RELOAD))
            json_object_set_new(o, "reload", json_false());
        json_object_set_new(all, d->name, o);
    }
    char at[32];
    struct tm tm;
    gmtime_r(&st->loaded_at, &tm);
    strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_pack("{s:s,s:b,s:s,s:o}", "file", st->config_path, "file_found", st->config_found,
                     "loaded_at", at, "settings", all);
}
