/* SPDX-License-Identifier: MIT */
/* The egress gateway's state: sandboxes, credentials, the emergency block, counters. The
 * DNS server is dns.c, the proxy proxy.c, the namespace plumbing netns.c. */
#include <arpa/inet.h>
#include <ctype.h>
#include <event2/dns.h>
#include <ifaddrs.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "egress/egress_int.h"

const char *const gbx_egress_trust_env[] = {"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
                                            "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", NULL};

#define HOST_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define BLOCK_KEY "egress.block"

/* ---- secrets ------------------------------------------------------------------------------- */

static void secret_free(struct gbx_egress_secret *s)
{
    if (s == NULL)
        return;
    free(s->name);
    for (size_t i = 0; i < s->nhosts; i++)
        free(s->hosts[i]);
    free(s->hosts);
    free(s->header_name);
    if (s->header_value) {
        OPENSSL_cleanse(s->header_value, strlen(s->header_value));
        free(s->header_value);
    }
    free(s->header_line);
    free(s);
}

static int header_name_valid(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_')
            return 0;
    return 1;
}

static int text_printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

/* Build a secret from its stored parts; value is copied into the expanded header only. */
static int secret_build(const char *name, const char *value, const json_t *hosts,
                        const char *header, int64_t created_ns, struct gbx_egress_secret **out,
                        struct gbx_err **err)
{
    if (gbx_egress_secret_name_valid(name) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "secret name '%s': use 1-64 of [A-Za-z0-9_.-]", name);
    if (!text_printable(value) || strlen(value) > 8192)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "secret '%s': the value must be at most 8192 printable characters "
                           "(no line breaks)",
                           name);
    const char *colon = header ? strchr(header, ':') : NULL;
    if (colon == NULL || !header_name_valid(header, (size_t)(colon - header)))
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "secret '%s': header must look like 'Authorization: Bearer ${secret}'",
                           name);
    const char *tmpl = colon + 1;
    while (*tmpl == ' ')
        tmpl++;
    const char *at = strstr(tmpl, "${secret}");
    if (at == NULL || strstr(at + 1, "${secret}") || !text_printable(tmpl) || strlen(tmpl) > 1024)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "secret '%s': the header template must hold '${secret}' exactly once "
                           "and no line breaks",
                           name);
    if (!json_is_array(hosts) || json_array_size(hosts) == 0 || json_array_size(hosts) > 64)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "secret '%s': hosts must be a list of 1-64 host names", name);
    struct gbx_egress_secret *s = gbx_xcalloc(1, sizeof(*s));
    s->hosts = gbx_xcalloc(json_array_size(hosts), sizeof(char *));
    size_t i;
    json_t *h;
    json_array_foreach(hosts, i, h)
    {
        const char *v = json_string_value(h);
        const char *bare = v && strncmp(v, "*.", 2) == 0 ? v + 2 : v;
        if (v == NULL || gbx_egress_name_valid(bare) < 0) {
            secret_free(s);
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "secret '%s': hosts[%zu] is not a host name or '*.domain'", name, i);
        }
        s->hosts[s->nhosts] = gbx_xstrdup(v);
        for (char *p = s->hosts[s->nhosts]; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        s->nhosts++;
    }
    s->name = gbx_xstrdup(name);
    s->header_name = gbx_xstrndup(header, (size_t)(colon - header));
    s->header_value = gbx_asprintf("%.*s%s%s", (int)(at - tmpl), tmpl, value, at + 9);
    s->header_line = gbx_xstrdup(header);
    s->created_ns = created_ns;
    *out = s;
    return 0;
}

static struct gbx_egress_secret *secret_find(const struct gbx_egress *eg, const char *name)
{
    for (struct gbx_egress_secret *s = eg->secrets; s; s = s->next)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

static void secret_unlink(struct gbx_egress *eg, const char *name)
{
    for (struct gbx_egress_secret **pp = &eg->secrets; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->name, name) == 0) {
            struct gbx_egress_secret *s = *pp;
            *pp = s->next;
            secret_free(s);
            return;
        }
}

static int host_matches(const char *pattern, const char *host)
{
    if (strncmp(pattern, "*.", 2) != 0)
        return strcmp(pattern, host) == 0;
    size_t pl = strlen(pattern + 1), hl = strlen(host); /* ".example.com" */
    return hl > pl && strcmp(host + hl - pl, pattern + 1) == 0;
}

const struct gbx_egress_secret *gbx_egress_secret_for(const struct gbx_egress_sb *sb,
                                                      const char *host)
{
    if (host == NULL || sb->policy == NULL)
        return NULL;
    for (size_t i = 0; i < sb->policy->nsecrets; i++) {
        const struct gbx_egress_secret *s = secret_find(sb->eg, sb->policy->secrets[i]);
        if (s == NULL)
            continue; /* revoked */
        for (size_t j = 0; j < s->nhosts; j++)
            if (host_matches(s->hosts[j], host))
                return s;
    }
    return NULL;
}

int gbx_egress_secret_put(struct gbx_egress *eg, const char *name, const char *value,
                          const json_t *hosts, const char *header, int replace,
                          struct gbx_err **err)
{
    if (name == NULL || value == NULL)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "a secret needs a name and a value");
    struct gbx_egress_secret *s = NULL;
    int64_t now = gbx_realtime_ns();
    if (secret_build(name, value, hosts, header, now, &s, err) < 0)
        return -1;
    if (!replace && secret_find(eg, name)) {
        secret_free(s);
        return gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "a secret named '%s' exists", name);
    }
    uint8_t *blob = NULL;
    size_t bloblen = 0;
    gbx_autofree char *hosts_text = json_dumps(hosts, JSON_COMPACT);
    if (gbx_seal(eg->key, value, strlen(value), name, &blob, &bloblen, err) < 0) {
        secret_free(s);
        return -1;
    }
    struct gbx_store_secret row = {.name = name,
                                   .hosts = hosts_text,
                                   .header = header,
                                   .sealed = blob,
                                   .sealed_len = bloblen,
                                   .created_ns = now};
    int r = gbx_store_secret_put(eg->store, &row, replace, err);
    free(blob);
    if (r < 0) {
        secret_free(s);
        return -1;
    }
    secret_unlink(eg, name);
    s->next = eg->secrets;
    eg->secrets = s;
    return 0;
}

int gbx_egress_secret_delete(struct gbx_egress *eg, const char *name, struct gbx_err **err)
{
    if (secret_find(eg, name) == NULL)
        return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "no secret named '%s'", name);
    if (gbx_store_secret_delete(eg->store, name, err) < 0)
        return -1;
    secret_unlink(eg, name);
    return 0;
}

static json_t *secret_json(const struct gbx_egress_secret *s)
{
    json_t *hosts = json_array();
    for (size_t i = 0; i < s->nhosts; i++)
        json_array_append_new(hosts, json_string(s->hosts[i]));
    return json_pack("{s:s,s:o,s:s,s:I}", "name", s->name, "hosts", hosts, "header", s->header_line,
                     "created", (json_int_t)(s->created_ns / 1000000000));
}

json_t *gbx_egress_secret_list(const struct gbx_egress *eg)
{
    json_t *a = json_array();
    for (const struct gbx_egress_secret *s = eg->secrets; s; s = s->next)
        json_array_append_new(a, secret_json(s));
    return a;
}

json_t *gbx_egress_secret_info(const struct gbx_egress *eg, const char *name)
{
    const struct gbx_egress_secret *s = secret_find(eg, name);
    return s ? secret_json(s) : NULL;
}

static int load_one(void *arg, const struct gbx_store_secret *row)
{
    struct gbx_egress *eg = arg;
    gbx_autoerr struct gbx_err *err = NULL;
    char *value = NULL;
    size_t n = 0;
    json_t *hosts = json_loads(row->hosts, 0, NULL);
    struct gbx_egress_secret *s = NULL;
    if (gbx_seal_open(eg->key, row->sealed, row->sealed_len, row->name, &value, &n, &err) < 0 ||
        secret_build(row->name, value, hosts, row->header, row->created_ns, &s, &err) < 0 ||
        s == NULL)
        gbx_log_warn("secret '%s' cannot be used: %s", row->name, err ? err->msg : "?");
    else {
        s->next = eg->secrets;
        eg->secrets = s;
    }
    if (value) {
        OPENSSL_cleanse(value, n);
        free(value);
    }
    json_decref(hosts);
    return 0;
}

int gbx_egress_check_secrets(struct gbx_egress *eg, const struct gbx_egress_policy *p,
                             struct gbx_err **err)
{
    for (size_t i = 0; p && i < p->nsecrets; i++)
        if (secret_find(eg, p->secrets[i]) == NULL)
            return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "no secret named '%s'",
                               p->secrets[i]);
    return 0;
}

/* ---- host facts ---------------------------------------------------------------------------- */

int gbx_egress_host_lookup(const struct gbx_egress *eg, const char *name, struct in_addr *out)
{
    for (size_t i = 0; i < eg->nhosts; i++)
        if (strcmp(eg->hosts[i].name, name) == 0) {
            *out = eg->hosts[i].addr;
            return 1;
        }
    return 0;
}

int gbx_egress_addr_own(const struct gbx_egress *eg, const struct in_addr *a)
{
    for (size_t i = 0; i < eg->nown; i++)
        if (eg->own[i].s_addr == a->s_addr)
            return 1;
    return 0;
}

static int parse_hosts(struct gbx_egress *eg, const char *text, struct gbx_err **err)
{
    if (text == NULL)
        return 0;
    gbx_autofree char *copy = gbx_xstrdup(text);
    char *save = NULL;
    for (char *tok = strtok_r(copy, " ,\t\n", &save); tok; tok = strtok_r(NULL, " ,\t\n", &save)) {
        char *eq = strchr(tok, '=');
        struct in_addr a;
        if (eq == NULL)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "egress hosts: '%s' is not name=IPv4",
                               tok);
        *eq = '\0';
        for (char *p = tok; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        if (gbx_egress_name_valid(tok) < 0 || inet_pton(AF_INET, eq + 1, &a) != 1)
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "egress hosts: '%s=%s' is not name=IPv4", tok, eq + 1);
        eg->hosts = gbx_xrealloc(eg->hosts, (eg->nhosts + 1) * sizeof(*eg->hosts));
        eg->hosts[eg->nhosts].name = gbx_xstrdup(tok);
        eg->hosts[eg->nhosts].addr = a;
        eg->nhosts++;
    }
    return 0;
}

static void load_own_addresses(struct gbx_egress *eg)
{
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0)
        return;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
            continue;
        eg->own = gbx_xrealloc(eg->own, (eg->nown + 1) * sizeof(*eg->own));
        eg->own[eg->nown++] = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr;
    }
    freeifaddrs(ifa);
}

static int write_trust_bundle(struct gbx_egress *eg, const char *runtime_dir, struct gbx_err **err)
{
    gbx_autofree char *host = NULL;
    size_t hlen = 0;
    if (gbx_read_file(HOST_BUNDLE, 16u << 20, &host, &hlen) < 0) {
        host = gbx_xstrdup("");
        hlen = 0;
    }
    const char *ca = gbx_ca_cert_pem(eg->ca);
    gbx_autofree char *all = gbx_asprintf("%s%s# Glovebox egress CA\n%s", host,
                                          hlen && host[hlen - 1] != '\n' ? "\n" : "", ca);
    eg->trust_path = gbx_asprintf("%s/egress-trust.crt", runtime_dir);
    /* running sandboxes have the file bind-mounted: replace it only when it changes (a
     * replaced file leaves them a deleted inode, which a checkpoint cannot name) */
    gbx_autofree char *cur = NULL;
    size_t clen = 0;
    if (gbx_read_file(eg->trust_path, 32u << 20, &cur, &clen) == 0 && clen == strlen(all) &&
        memcmp(cur, all, clen) == 0)
        return 0;
    int r = gbx_write_file_atomic(eg->trust_path, all, strlen(all), 0644);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot write '%s'", eg->trust_path);
    return 0;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    gbx_egress_proxy_reap(arg);
}

int gbx_egress_new(struct event_base *base, const struct gbx_egress_opts *o,
                   gbx_egress_audit_fn audit, void *arg, struct gbx_egress **out,
                   struct gbx_err **err)
{
    struct gbx_egress *eg = gbx_xcalloc(1, sizeof(*eg));
    eg->base = base;
    eg->store = o->store;
    eg->audit = audit;
    eg->audit_arg = arg;
    eg->audit_rate = o->audit_unlimited ? 0 : o->audit_rate ? o->audit_rate : GBX_EGRESS_AUDIT_RATE;
    eg->audit_burst = o->audit_burst ? o->audit_burst : GBX_EGRESS_AUDIT_BURST;
    eg->default_mode = o->default_mode;
    eg->max_conns = o->max_conns ? o->max_conns : 256;
    unsigned ct = o->connect_timeout_ms ? o->connect_timeout_ms : 10000;
    unsigned it = o->idle_timeout_ms ? o->idle_timeout_ms : 300000;
    eg->connect_tv = (struct timeval){ct / 1000, (ct % 1000) * 1000};
    eg->idle_tv = (struct timeval){it / 1000, (it % 1000) * 1000};
    gbx_autofree char *keyp = gbx_asprintf("%s/secrets.key", o->dir);
    gbx_autofree char *cadir = gbx_asprintf("%s/ca", o->dir);
    gbx_autofree char *blocked = NULL;
    int r = gbx_mkdir_p(o->dir, 0700);
    if (r < 0) {
        gbx_err_sys(err, -r, "cannot create '%s'", o->dir);
        goto fail;
    }
    if (parse_hosts(eg, o->hosts, err) < 0 || gbx_seal_key_load(keyp, eg->key, err) < 0 ||
        gbx_ca_open(cadir, &eg->ca, err) < 0 ||
        (eg->client_ctx = gbx_ca_client_ctx_new(o->extra_ca_file, err)) == NULL ||
        write_trust_bundle(eg, o->runtime_dir, err) < 0 ||
        gbx_store_secret_each(eg->store, load_one, eg, err) < 0)
        goto fail;
    load_own_addresses(eg);
    /* the host's resolver, or the one nameserver said; a test configuration that names every
     * host never uses it */
    if (o->resolver) {
        eg->resolver = evdns_base_new(base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        GBX_BUG_ON(eg->resolver == NULL);
        if (evdns_base_nameserver_ip_add(eg->resolver, o->resolver) != 0) {
            gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "egress resolver '%s': not IPv4[:PORT]",
                        o->resolver);
            goto fail;
        }
    } else {
        eg->resolver = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                                EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (eg->resolver == NULL)
            eg->resolver = evdns_base_new(base, 0); /* no resolv.conf: names fail, overrides work */
    }
    GBX_BUG_ON(eg->resolver == NULL);
    blocked = gbx_store_meta_get(eg->store, BLOCK_KEY);
    eg->blocked = blocked && strcmp(blocked, "1") == 0;
    if (eg->blocked)
        gbx_log_warn("egress is blocked (emergency block in effect since an earlier run)");
    eg->reap_ev = event_new(base, -1, 0, on_reap, eg);
    *out = eg;
    return 0;
fail:
    gbx_egress_free(eg);
    return gbx_err_wrap(err, "egress");
}

void gbx_egress_free(struct gbx_egress *eg)
{
    if (eg == NULL)
        return;
    while (eg->sandboxes)
        gbx_egress_detach(eg->sandboxes);
    gbx_egress_proxy_reap(eg);
    if (eg->reap_ev)
        event_free(eg->reap_ev);
    if (eg->resolver)
        evdns_base_free(eg->resolver, 1); /* pending lookups are called back, cancelled */
    while (eg->secrets) {
        struct gbx_egress_secret *s = eg->secrets;
        eg->secrets = s->next;
        secret_free(s);
    }
    for (size_t i = 0; i < eg->nhosts; i++)
        free(eg->hosts[i].name);
    free(eg->hosts);
    free(eg->own);
    if (eg->client_ctx)
        SSL_CTX_free(eg->client_ctx);
    gbx_ca_free(eg->ca);
    OPENSSL_cleanse(eg->key, sizeof(eg->key));
    free(eg->trust_path);
    free(eg);
}

const char *gbx_egress_trust_bundle(const struct gbx_egress *eg)
{
    return eg->trust_path;
}

const char *gbx_egress_ca_pem(const struct gbx_egress *eg)
{
    return gbx_ca_cert_pem(eg->ca);
}

enum gbx_egress_mode gbx_egress_default_mode(const struct gbx_egress *eg)
{
    return eg->default_mode;
}

void gbx_egress_set_default_mode(struct gbx_egress *eg, enum gbx_egress_mode mode)
{
    eg->default_mode = mode;
}

static void audit_emit(struct gbx_egress_sb *sb, const char *kind, json_t *detail)
{
    if (sb->eg->audit)
        sb->eg->audit(sb->eg->audit_arg, kind, sb->id, detail);
    else
        json_decref(detail);
}

/* The kinds of rows the rate limit keeps apart, and what their summary calls them. */
static const struct {
    const char *kind, *summary, *noun;
} rated[] = {
    {"egress.dns", "egress.dns.suppressed", "queries"},
    {"egress.conn", "egress.conn.suppressed", "connections"},
    {"egress.http", "egress.http.suppressed", "requests"},
};

/* Write the summary of every row held back since the last one (the window ended, or the
 * sandbox goes). */
static void audit_summarise(struct gbx_egress_sb *sb)
{
    int64_t now = gbx_realtime_ns();
    for (size_t i = 0; i < GBX_ARRAY_SIZE(rated); i++) {
        struct gbx_egress_bucket *b = &sb->buckets[i];
        int64_t since = b->since_ns;
        uint64_t held[GBX_EGRESS_NVERDICTS];
        char msg[160];
        if (!gbx_egress_bucket_summary(b, rated[i].noun, now, msg, sizeof(msg), held))
            continue;
        uint64_t total = 0;
        for (int v = 0; v < GBX_EGRESS_NVERDICTS; v++)
            total += held[v];
        gbx_autofree char *from = gbx_rfc3339(since), *to = gbx_rfc3339(now);
        json_t *d =
            json_pack("{s:s,s:I,s:I,s:I,s:s,s:s,s:i,s:i}", "message", msg, "count",
                      (json_int_t)total, "allowed", (json_int_t)held[GBX_EGRESS_ALLOW], "denied",
                      (json_int_t)held[GBX_EGRESS_DENY], "since", from, "until", to, "rate",
                      (int)sb->eg->audit_rate, "burst", (int)sb->eg->audit_burst);
        /* the other verdicts only where there were any (only connections have them) */
        for (int v = GBX_EGRESS_UPSTREAM_FAILED; v < GBX_EGRESS_NVERDICTS; v++)
            if (held[v])
                json_object_set_new(d, gbx_egress_verdict_name(v),
                                    json_integer((json_int_t)held[v]));
        audit_emit(sb, rated[i].summary, d);
        gbx_log_info("sandbox '%s': %s: %s", sb->id, rated[i].kind, msg);
    }
}

static void on_summary(evutil_socket_t fd, short what, void *arg)
{
    audit_summarise(arg);
}

void gbx_egress_audit(struct gbx_egress_sb *sb, const char *kind, json_t *detail)
{
    struct gbx_egress *eg = sb->eg;
    size_t i = 0;
    while (i < GBX_ARRAY_SIZE(rated) && strcmp(rated[i].kind, kind) != 0)
        i++;
    if (i == GBX_ARRAY_SIZE(rated) || gbx_egress_bucket_take(&sb->buckets[i], gbx_monotonic_ns(),
                                                             eg->audit_rate, eg->audit_burst))
        return audit_emit(sb, kind, detail);
    /* over the rate: counted by decision (the decision itself was made and stands) */
    const char *d = json_string_value(json_object_get(detail, "decision"));
    gbx_egress_bucket_hold(&sb->buckets[i], gbx_egress_verdict_parse(d), gbx_realtime_ns());
    json_decref(detail);
    if (sb->summary_ev == NULL) {
        sb->summary_ev = event_new(eg->base, -1, 0, on_summary, sb);
        GBX_BUG_ON(sb->summary_ev == NULL);
    }
    if (!evtimer_pending(sb->summary_ev, NULL)) {
        struct timeval tv = {GBX_EGRESS_AUDIT_WINDOW_NS / 1000000000, 0};
        event_add(sb->summary_ev, &tv);
    }
}

int gbx_egress_attach(struct gbx_egress *eg, const char *id, pid_t pid,
                      const struct gbx_egress_policy *p, struct gbx_egress_sb **out,
                      struct gbx_err **err)
{
    struct gbx_egress_socks socks;
    if (gbx_egress_netns_setup(pid, &socks, err) < 0)
        return -1;
    return gbx_egress_attach_socks(eg, id, p, &socks, out, err);
}

int gbx_egress_attach_socks(struct gbx_egress *eg, const char *id,
                            const struct gbx_egress_policy *p, struct gbx_egress_socks *socks,
                            struct gbx_egress_sb **out, struct gbx_err **err)
{
    struct gbx_egress_sb *sb = gbx_xcalloc(1, sizeof(*sb));
    sb->eg = eg;
    sb->id = gbx_xstrdup(id);
    sb->policy = p ? gbx_egress_policy_dup(p) : gbx_egress_policy_new(eg->default_mode);
    sb->socks = *socks;
    socks->proxy_fd = socks->dns_udp_fd = socks->dns_tcp_fd = -1;
    sb->next = eg->sandboxes;
    if (eg->sandboxes)
        eg->sandboxes->prev = sb;
    eg->sandboxes = sb;
    if (gbx_egress_dns_start(sb, err) < 0 || gbx_egress_proxy_start(sb, err) < 0) {
        gbx_egress_detach(sb);
        return gbx_err_wrap(err, "egress");
    }
    *out = sb;
    return 0;
}

void gbx_egress_detach(struct gbx_egress_sb *sb)
{
    if (sb == NULL)
        return;
    struct gbx_egress *eg = sb->eg;
    gbx_egress_proxy_stop(sb); /* (its connections' rows first, then what was held back) */
    gbx_egress_dns_stop(sb);
    audit_summarise(sb);
    if (sb->summary_ev)
        event_free(sb->summary_ev);
    gbx_egress_socks_release(&sb->socks);
    if (sb->prev)
        sb->prev->next = sb->next;
    else
        eg->sandboxes = sb->next;
    if (sb->next)
        sb->next->prev = sb->prev;
    for (uint32_t i = 0; i < sb->nnames; i++)
        free(sb->names[i]);
    free(sb->names);
    free(sb->index);
    gbx_egress_policy_free(sb->policy);
    free(sb->id);
    free(sb);
}

int gbx_egress_set_policy(struct gbx_egress_sb *sb, const struct gbx_egress_policy *p,
                          struct gbx_err **err)
{
    if (gbx_egress_check_secrets(sb->eg, p, err) < 0)
        return -1;
    gbx_egress_policy_free(sb->policy);
    sb->policy = gbx_egress_policy_dup(p);
    gbx_egress_proxy_recheck(sb, 0);
    return 0;
}

const struct gbx_egress_policy *gbx_egress_policy_of(const struct gbx_egress_sb *sb)
{
    return sb->policy;
}

static json_t *counters_json(const struct gbx_egress_counters *c)
{
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "connections_allowed",
                     (json_int_t)c->conn_allow, "connections_denied", (json_int_t)c->conn_deny,
                     "connections_upstream_failed", (json_int_t)c->conn_upstream_failed,
                     "connections_client_error", (json_int_t)c->conn_client_error, "dns_allowed",
                     (json_int_t)c->dns_allow, "dns_denied", (json_int_t)c->dns_deny,
                     "requests_allowed", (json_int_t)c->http_allow, "requests_denied",
                     (json_int_t)c->http_deny, "bytes_up", (json_int_t)c->bytes_up, "bytes_down",
                     (json_int_t)c->bytes_down);
}

json_t *gbx_egress_sb_stats(const struct gbx_egress_sb *sb)
{
    json_t *j = counters_json(&sb->c);
    json_object_set_new(j, "connections_open", json_integer(sb->nconns));
    json_object_set_new(j, "names", json_integer(sb->nnames));
    return j;
}

int gbx_egress_block(struct gbx_egress *eg, int on, struct gbx_err **err)
{
    if (gbx_store_meta_set(eg->store, BLOCK_KEY, on ? "1" : NULL, err) < 0)
        return -1;
    eg->blocked = on ? 1 : 0;
    if (on)
        for (struct gbx_egress_sb *sb = eg->sandboxes; sb; sb = sb->next)
            gbx_egress_proxy_recheck(sb, 1);
    return 0;
}

int gbx_egress_blocked(const struct gbx_egress *eg)
{
    return eg->blocked;
}

void gbx_egress_metrics(const struct gbx_egress *eg, struct evbuffer *out)
{
    const struct gbx_egress_counters *c = &eg->c;
    evbuffer_add_printf(
        out,
        "# HELP glovebox_egress_connections_total Egress TCP connections by decision: allow, "
        "deny (by policy), upstream_failed (allowed; resolve or connect failed), client_error.\n"
        "# TYPE glovebox_egress_connections_total counter\n"
        "glovebox_egress_connections_total{decision=\"allow\"} %llu\n"
        "glovebox_egress_connections_total{decision=\"deny\"} %llu\n"
        "glovebox_egress_connections_total{decision=\"upstream_failed\"} %llu\n"
        "glovebox_egress_connections_total{decision=\"client_error\"} %llu\n"
        "# HELP glovebox_egress_dns_answers_total DNS answers by decision.\n"
        "# TYPE glovebox_egress_dns_answers_total counter\n"
        "glovebox_egress_dns_answers_total{decision=\"allow\"} %llu\n"
        "glovebox_egress_dns_answers_total{decision=\"deny\"} %llu\n"
        "# HELP glovebox_egress_requests_total Intercepted HTTP requests by decision.\n"
        "# TYPE glovebox_egress_requests_total counter\n"
        "glovebox_egress_requests_total{decision=\"allow\"} %llu\n"
        "glovebox_egress_requests_total{decision=\"deny\"} %llu\n"
        "# HELP glovebox_egress_bytes_total Bytes relayed by direction.\n"
        "# TYPE glovebox_egress_bytes_total counter\n"
        "glovebox_egress_bytes_total{direction=\"up\"} %llu\n"
        "glovebox_egress_bytes_total{direction=\"down\"} %llu\n"
        "# HELP glovebox_egress_connections_open Egress connections open now.\n"
        "# TYPE glovebox_egress_connections_open gauge\n"
        "glovebox_egress_connections_open %llu\n"
        "# HELP glovebox_egress_blocked 1 while the emergency block is in effect.\n"
        "# TYPE glovebox_egress_blocked gauge\n"
        "glovebox_egress_blocked %d\n",
        (unsigned long long)c->conn_allow, (unsigned long long)c->conn_deny,
        (unsigned long long)c->conn_upstream_failed, (unsigned long long)c->conn_client_error,
        (unsigned long long)c->dns_allow, (unsigned long long)c->dns_deny,
        (unsigned long long)c->http_allow, (unsigned long long)c->http_deny,
        (unsigned long long)c->bytes_up, (unsigned long long)c->bytes_down,
        (unsigned long long)eg->open_conns, eg->blocked);
}
