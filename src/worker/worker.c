/* SPDX-License-Identifier: MIT */
/* The Managed Agents worker's protocol decisions: pure functions, no I/O (worker.h). */
#include "worker/worker.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/b64.h"
#include "base/mem.h"

/* A secret larger than this is not a secret (it holds a token and a URL). */
#define SECRET_MAX 65536

int gbx_worker_secret_decode(const char *secret, char **token, char **base_url)
{
    if (secret == NULL)
        return -EINVAL;
    size_t n = strlen(secret);
    if (n == 0 || n > SECRET_MAX)
        return -EINVAL;
    gbx_autofree char *std = gbx_xstrdup(secret);
    for (size_t i = 0; i < n; i++) {
        if (std[i] == '-')
            std[i] = '+';
        else if (std[i] == '_')
            std[i] = '/';
        else if (std[i] == '+' || std[i] == '/')
            return -EINVAL; /* not the URL-safe alphabet */
    }
    gbx_autofree uint8_t *raw = gbx_xmalloc(n / 4 * 3 + 3);
    size_t len = 0;
    if (gbx_b64_decode(std, n, raw, &len) < 0)
        return -EINVAL;
    json_t *j = json_loadb((const char *)raw, len, JSON_REJECT_DUPLICATES, NULL);
    const char *tok = json_string_value(json_object_get(j, "sessions_token"));
    json_t *url = json_object_get(j, "api_base_url");
    int ok = json_is_object(j) && tok && *tok &&
             strlen(tok) == json_string_length(json_object_get(j, "sessions_token")) &&
             !strpbrk(tok, "\r\n");
    if (ok && url && !json_is_null(url)) {
        const char *u = json_string_value(url);
        ok = u && (strncmp(u, "https://", 8) == 0 || strncmp(u, "http://", 7) == 0) &&
             strlen(u) == json_string_length(url) && !strpbrk(u, " \r\n");
    }
    if (!ok) {
        json_decref(j);
        return -EINVAL;
    }
    *token = gbx_xstrdup(tok);
    *base_url = json_is_string(url) ? gbx_xstrdup(json_string_value(url)) : NULL;
    json_decref(j);
    return 0;
}

long gbx_worker_beat_interval_ms(long ttl_seconds)
{
    if (ttl_seconds <= 0)
        return 30000;
    if (ttl_seconds > 3600)
        ttl_seconds = 3600;
    long ms = ttl_seconds * 1000 / 2;
    return ms < 1000 ? 1000 : ms > 30000 ? 30000 : ms;
}

enum gbx_worker_beat gbx_worker_beat_verdict(int status, json_t *reply, char **last, long *ttl)
{
    *last = NULL;
    *ttl = 0;
    if (status == 412)
        return GBX_WORKER_BEAT_LOST;
    if (status <= 0 || status >= 500 || status == 408 || status == 409 || status == 429)
        return GBX_WORKER_BEAT_TRANSIENT;
    if (status / 100 != 2)
        return GBX_WORKER_BEAT_FINISH;
    const char *lh = json_string_value(json_object_get(reply, "last_heartbeat"));
    const char *state = json_string_value(json_object_get(reply, "state"));
    json_t *ext = json_object_get(reply, "lease_extended");
    json_int_t t = json_integer_value(json_object_get(reply, "ttl_seconds"));
    if (lh == NULL || *lh == '\0' || json_is_false(ext) ||
        (state && (strcmp(state, "stopping") == 0 || strcmp(state, "stopped") == 0)))
        return GBX_WORKER_BEAT_FINISH;
    *last = gbx_xstrdup(lh);
    *ttl = t > 0 && t < 86400 ? (long)t : 0;
    return GBX_WORKER_BEAT_OK;
}

int gbx_worker_poll_empty(int status, json_t *reply)
{
    return status == 204 || (status == 200 && (reply == NULL || json_is_null(reply)));
}

int gbx_worker_id_valid(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    return n > 0 && n <= 128 &&
           strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789._-") == n;
}

int gbx_worker_item_parse(json_t *item, struct gbx_worker_item *out)
{
    memset(out, 0, sizeof(*out));
    const char *id = json_string_value(json_object_get(item, "id"));
    if (!gbx_worker_id_valid(id))
        return -EINVAL;
    json_t *data = json_object_get(item, "data");
    const char *type = json_string_value(json_object_get(data, "type"));
    const char *sid = json_string_value(json_object_get(data, "id"));
    const char *secret = json_string_value(json_object_get(item, "secret"));
    out->id = gbx_xstrdup(id);
    if (type && strcmp(type, "session") == 0 && gbx_worker_id_valid(sid))
        out->session_id = gbx_xstrdup(sid);
    if (secret && *secret)
        out->secret = gbx_xstrdup(secret);
    return 0;
}

void gbx_worker_item_release(struct gbx_worker_item *it)
{
    free(it->id);
    free(it->session_id);
    free(it->secret);
    memset(it, 0, sizeof(*it));
}

const char *gbx_worker_session_unsupported(json_t *session, size_t *skills)
{
    *skills = json_array_size(json_object_get(json_object_get(session, "agent"), "skills"));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(session, "resources"), i, r)
    {
        const char *type = json_string_value(json_object_get(r, "type"));
        if (type && strcmp(type, "memory_store") == 0)
            return "the session has memory stores, which this worker does not support yet";
    }
    return NULL;
}

int gbx_worker_tool_owned(const char *name)
{
    static const char *const owned[] = {"bash", "read", "write", "edit", "glob", "grep"};
    if (name == NULL)
        return 0;
    for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
        if (strcmp(name, owned[i]) == 0)
            return 1;
    return 0;
}

enum gbx_worker_event gbx_worker_event_kind(const char *sse_name, json_t *ev)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type == NULL)
        type = sse_name;
    if (type == NULL)
        return GBX_WORKER_EV_OTHER;
    if (strcmp(type, "error") == 0)
        return GBX_WORKER_EV_ERROR;
    if (strcmp(type, "ping") == 0)
        return GBX_WORKER_EV_IGNORE;
    if (strcmp(type, "user.tool_confirmation") == 0)
        return GBX_WORKER_EV_CONFIRM;
    if (strcmp(type, "agent.tool_use") == 0)
        return GBX_WORKER_EV_TOOL_USE;
    if (strcmp(type, "user.tool_result") == 0)
        return GBX_WORKER_EV_RESULT;
    if (strcmp(type, "session.status_terminated") == 0 || strcmp(type, "session.deleted") == 0)
        return GBX_WORKER_EV_TERMINATED;
    if (strcmp(type, "session.status_idle") == 0) {
        const char *why =
            json_string_value(json_object_get(json_object_get(ev, "stop_reason"), "type"));
        return why && strcmp(why, "end_turn") == 0 ? GBX_WORKER_EV_IDLE_END
                                                   : GBX_WORKER_EV_IDLE_OTHER;
    }
    return GBX_WORKER_EV_OTHER;
}

json_t *gbx_worker_execute_body(json_t *ev, int confirmed)
{
    if (!json_is_object(ev))
        return NULL;
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *id = json_string_value(json_object_get(ev, "id"));
    const char *name = json_string_value(json_object_get(ev, "name"));
    json_t *input = json_object_get(ev, "input");
    json_t *perm = json_object_get(ev, "evaluated_permission");
    if (type == NULL || strcmp(type, "agent.tool_use") != 0 || id == NULL || *id == '\0' ||
        !gbx_worker_tool_owned(name))
        return NULL;
    const char *p = json_string_value(perm);
    if (perm && !json_is_null(perm) &&
        !(p && (strcmp(p, "allow") == 0 || (confirmed && strcmp(p, "ask") == 0))))
        return NULL;
    if (input && !json_is_object(input) && !json_is_null(input))
        return NULL;
    json_t *in = json_is_object(input) ? json_incref(input) : json_object();
    return json_pack("{s:s,s:s,s:o}", "tool_use_id", id, "name", name, "input", in);
}

int gbx_worker_tool_held(json_t *ev)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *p = json_string_value(json_object_get(ev, "evaluated_permission"));
    return type && strcmp(type, "agent.tool_use") == 0 &&
           gbx_worker_tool_owned(json_string_value(json_object_get(ev, "name"))) && p &&
           strcmp(p, "ask") == 0;
}

int gbx_worker_confirmation(json_t *ev, const char **tool_use_id)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *id = json_string_value(json_object_get(ev, "tool_use_id"));
    const char *result = json_string_value(json_object_get(ev, "result"));
    if (type == NULL || strcmp(type, "user.tool_confirmation") != 0 || id == NULL || *id == '\0')
        return -1;
    *tool_use_id = id;
    return result && strcmp(result, "allow") == 0 ? 1 : 0;
}

json_t *gbx_worker_reconcile(json_t *events, json_t **held)
{
    json_t *answered = json_object(), *verdicts = json_object(), *out = json_array();
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *tid = json_string_value(json_object_get(ev, "tool_use_id"));
        int v = gbx_worker_confirmation(ev, &tid);
        if (v >= 0)
            json_object_set_new(verdicts, tid, json_boolean(v)); /* the last one counts */
        else if (type && tid && strcmp(type, "user.tool_result") == 0)
            json_object_set_new(answered, tid, json_true());
    }
    if (held)
        *held = json_object();
    json_t *queued = json_object(); /* a call listed twice runs once */
    json_array_foreach(events, i, ev)
    {
        const char *id = json_string_value(json_object_get(ev, "id"));
        if (id == NULL || json_object_get(answered, id) || json_object_get(queued, id))
            continue;
        json_t *verdict = json_object_get(verdicts, id);
        json_t *body = gbx_worker_execute_body(ev, json_is_true(verdict));
        if (body) {
            json_object_set_new(queued, id, json_true());
            json_array_append(out, ev);
        } else if (held && verdict == NULL && gbx_worker_tool_held(ev)) {
            json_object_set(*held, id, ev);
        }
        json_decref(body);
    }
    json_decref(queued);
    json_decref(verdicts);
    json_decref(answered);
    return out;
}

json_t *gbx_worker_result_event(const char *tool_use_id, json_t *reply, const char *errmsg)
{
    json_t *src = json_object_get(reply, "content");
    int is_error = json_is_true(json_object_get(reply, "is_error"));
    json_t *content = json_array();
    if (!json_is_array(src)) {
        is_error = 1;
        json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text",
                                                 errmsg && *errmsg ? errmsg : "tool call failed"));
    } else {
        size_t i;
        json_t *b;
        json_array_foreach(src, i, b)
        {
            const char *bt = json_string_value(json_object_get(b, "type"));
            if (bt == NULL)
                continue;
            if (strcmp(bt, "text") == 0) {
                const char *t = json_string_value(json_object_get(b, "text"));
                if (t == NULL || *t == '\0')
                    continue;
            }
            json_array_append(content, b);
        }
    }
    if (json_array_size(content) == 0)
        json_array_append_new(content,
                              json_pack("{s:s,s:s}", "type", "text", "text", GBX_WORKER_NO_OUTPUT));
    json_t *ev = json_pack("{s:s,s:s,s:b,s:o}", "type", "user.tool_result", "tool_use_id",
                           tool_use_id, "is_error", is_error, "content", content);
    return json_pack("{s:[o]}", "events", ev);
}

/* ---- SSE ------------------------------------------------------------------------------- */

static void sse_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*buf == NULL || *len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = gbx_xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = '\0';
}

static void sse_reset_event(struct gbx_worker_sse *s)
{
    s->data_len = 0;
    s->has_data = 0;
    s->name[0] = '\0';
}

static void sse_line(struct gbx_worker_sse *s, const char *line, size_t n)
{
    if (n == 0) { /* dispatch */
        if (s->has_data) {
            if (s->data == NULL)
                sse_append(&s->data, &s->data_len, &s->data_cap, "", 0);
            s->on_event(s->arg, s->name[0] ? s->name : "message", s->data, s->data_len);
        }
        sse_reset_event(s);
        return;
    }
    if (line[0] == ':')
        return;
    const char *colon = memchr(line, ':', n);
    size_t flen = colon ? (size_t)(colon - line) : n;
    const char *v = colon ? colon + 1 : line + n;
    size_t vlen = n - (size_t)(v - line);
    if (vlen > 0 && v[0] == ' ') {
        v++;
        vlen--;
    }
    if (flen == 5 && memcmp(line, "event", 5) == 0) {
        if (vlen >= sizeof(s->name))
            vlen = sizeof(s->name) - 1;
        memcpy(s->name, v, vlen);
        s->name[vlen] = '\0';
    } else if (flen == 4 && memcmp(line, "data", 4) == 0) {
        if (s->has_data)
            sse_append(&s->data, &s->data_len, &s->data_cap, "\n", 1);
        sse_append(&s->data, &s->data_len, &s->data_cap, v, vlen);
        s->has_data = 1;
    }
}

void gbx_worker_sse_feed(struct gbx_worker_sse *s, const char *buf, size_t len)
{
    size_t max = s->max_line ? s->max_line : (16u << 20);
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (s->after_cr) {
            s->after_cr = 0;
            if (c == '\n')
                continue; /* the \n of a \r\n */
        }
        if (c == '\n' || c == '\r') {
            s->after_cr = c == '\r';
            if (s->skipping) { /* the end of an overlong line: its event is dropped */
                s->skipping = 0;
                sse_reset_event(s);
            } else {
                sse_line(s, s->line ? s->line : "", s->line_len);
            }
            s->line_len = 0;
            continue;
        }
        if (s->skipping)
            continue;
        if (s->line_len >= max || s->data_len >= max) {
            s->skipping = 1;
            s->line_len = 0;
            continue;
        }
        sse_append(&s->line, &s->line_len, &s->line_cap, &c, 1);
    }
}

void gbx_worker_sse_release(struct gbx_worker_sse *s)
{
    free(s->line);
    free(s->data);
    s->line = s->data = NULL;
    s->line_len = s->line_cap = s->data_len = s->data_cap = 0;
    s->has_data = s->skipping = s->after_cr = 0;
    s->name[0] = '\0';
}

/* ---- webhook deliveries ---------------------------------------------------------------- */

int gbx_worker_hook_key(const char *secret, uint8_t **key, size_t *klen)
{
    if (secret == NULL)
        return -EINVAL;
    if (strncmp(secret, "whsec_", 6) == 0)
        secret += 6;
    size_t n = strlen(secret);
    if (n == 0 || n > 2048)
        return -EINVAL;
    uint8_t *raw = gbx_xmalloc(n / 4 * 3 + 3);
    size_t len = 0;
    if (gbx_b64_decode(secret, n, raw, &len) < 0 || len == 0 || len > 1024) {
        free(raw);
        return -EINVAL;
    }
    *key = raw;
    *klen = len;
    return 0;
}

int gbx_worker_hook_header(struct gbx_worker_hook *h, const char *name, size_t nlen,
                           const char *value, size_t vlen)
{
    char **slot = NULL;
    if (nlen == 10 && strncasecmp(name, "webhook-id", nlen) == 0)
        slot = &h->id;
    else if (nlen == 17 && strncasecmp(name, "webhook-timestamp", nlen) == 0)
        slot = &h->timestamp;
    else if (nlen == 17 && strncasecmp(name, "webhook-signature", nlen) == 0)
        slot = &h->signature;
    if (slot == NULL)
        return 0;
    if (*slot || vlen > GBX_WORKER_HOOK_HEADER_MAX || memchr(value, '\0', vlen))
        return -EINVAL;
    *slot = gbx_xstrndup(value, vlen);
    return 0;
}

void gbx_worker_hook_release(struct gbx_worker_hook *h)
{
    free(h->id);
    free(h->timestamp);
    free(h->signature);
    h->id = h->timestamp = h->signature = NULL;
}

void gbx_worker_hook_seen_release(struct gbx_worker_hook_seen *s)
{
    for (size_t i = 0; i < GBX_WORKER_HOOK_SEEN; i++) {
        free(s->ids[i]);
        s->ids[i] = NULL;
    }
    s->next = 0;
}

static int hook_seen(const struct gbx_worker_hook_seen *s, const char *id)
{
    for (size_t i = 0; i < GBX_WORKER_HOOK_SEEN; i++)
        if (s->ids[i] && strcmp(s->ids[i], id) == 0)
            return 1;
    return 0;
}

/* Whether one "v1,<base64>" entry (len bytes at e) is the signature mac. */
static int hook_entry_matches(const char *e, size_t len, const uint8_t mac[32],
                              const struct gbx_worker_crypto *c)
{
    if (len < 4 || strncmp(e, "v1,", 3) != 0 || len - 3 > 88)
        return 0;
    uint8_t raw[72];
    size_t n = 0;
    if (gbx_b64_decode(e + 3, len - 3, raw, &n) < 0 || n != 32)
        return 0;
    return c->memcmp(raw, mac, 32) == 0;
}

enum gbx_worker_hook_verdict gbx_worker_hook_verify(const struct gbx_worker_hook *h,
                                                    const char *body, size_t len,
                                                    const uint8_t *key, size_t klen, long long now,
                                                    const struct gbx_worker_crypto *c,
                                                    struct gbx_worker_hook_seen *seen)
{
    if (h->id == NULL || h->timestamp == NULL || h->signature == NULL || *h->id == '\0' ||
        *h->signature == '\0')
        return GBX_WORKER_HOOK_MISSING;
    size_t tn = strlen(h->timestamp);
    if (tn == 0 || tn > 15 || strspn(h->timestamp, "0123456789") != tn)
        return GBX_WORKER_HOOK_MALFORMED;
    long long ts = strtoll(h->timestamp, NULL, 10);
    if (ts > now + GBX_WORKER_HOOK_TOLERANCE || ts < now - GBX_WORKER_HOOK_TOLERANCE)
        return GBX_WORKER_HOOK_STALE;
    size_t in = strlen(h->id);
    size_t mlen = in + 1 + tn + 1 + len;
    gbx_autofree uint8_t *msg = gbx_xmalloc(mlen + 1);
    memcpy(msg, h->id, in);
    msg[in] = '.';
    memcpy(msg + in + 1, h->timestamp, tn);
    msg[in + 1 + tn] = '.';
    if (len)
        memcpy(msg + in + tn + 2, body, len);
    uint8_t mac[32];
    if (c->hmac(key, klen, msg, mlen, mac) < 0)
        return GBX_WORKER_HOOK_BAD_SIGNATURE;
    int ok = 0;
    for (const char *p = h->signature; *p;) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n && hook_entry_matches(p, n, mac, c))
            ok = 1; /* no early exit: every entry costs the same */
        p += n;
    }
    if (!ok)
        return GBX_WORKER_HOOK_BAD_SIGNATURE;
    if (seen == NULL)
        return GBX_WORKER_HOOK_OK;
    if (hook_seen(seen, h->id))
        return GBX_WORKER_HOOK_REPLAY;
    free(seen->ids[seen->next]);
    seen->ids[seen->next] = gbx_xstrdup(h->id);
    seen->next = (seen->next + 1) % GBX_WORKER_HOOK_SEEN;
    return GBX_WORKER_HOOK_OK;
}

const char *gbx_worker_hook_verdict_name(enum gbx_worker_hook_verdict v)
{
    switch (v) {
    case GBX_WORKER_HOOK_OK:
        return "ok";
    case GBX_WORKER_HOOK_REPLAY:
        return "already seen";
    case GBX_WORKER_HOOK_MISSING:
        return "missing header";
    case GBX_WORKER_HOOK_MALFORMED:
        return "malformed timestamp";
    case GBX_WORKER_HOOK_STALE:
        return "timestamp out of tolerance";
    case GBX_WORKER_HOOK_BAD_SIGNATURE:
        return "bad signature";
    }
    return "?";
}
