/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the Managed Agents worker's parsers of network bytes (src/worker/).
 * Every input goes through each of them:
 *   - the webhook request reader (hook.c), which reads one HTTP request from whoever reaches
 *     the webhook port: the input is everything the peer sends (from a memfd). The answer is
 *     0 or 400, 408, 413; an accepted request has a NUL-terminated body within the limit.
 *     Its headers then go to the Standard Webhooks verifier (worker.c) with a fixed key and
 *     the real HMAC: as sent (never OK unless the signature is right), and with a correct
 *     signature put in, which is OK exactly when the id and timestamp are well formed and in
 *     tolerance, and a REPLAY the second time;
 *   - the text/event-stream framing (worker.c), fed the input whole, one byte at a time and
 *     in pseudo-random pieces: the same events each time, each with a name of under 128 bytes
 *     without CR or LF and NUL-terminated data without CR; with a small line limit too;
 *   - the protocol decisions on what the API server sends: each event's data that is JSON
 *     goes through the event, heartbeat, work item and result functions, and all of them
 *     through reconcile. A call is only ever run when it is an owned tool with an id whose
 *     permission is absent, "allow", or "ask" with a confirmation (fail closed), and reconcile
 *     runs each id once, never an answered one, and holds only "ask" calls with no verdict;
 *   - the work item secret and webhook key decoders, on the input as a string: what they
 *     accept keeps the promises of worker.h. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/err.h"
#include "worker/hook.h"
#include "worker/worker.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW 1700000000LL

static const uint8_t key[] = "a fixed webhook signing key";

static uint64_t rng_state;

static uint32_t rng(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

/* --- webhooks ------------------------------------------------------------------------- */

static int ts_in_tolerance(const char *ts)
{
    size_t n = strlen(ts);
    if (n == 0 || n > 15 || strspn(ts, "0123456789") != n)
        return 0;
    long long v = strtoll(ts, NULL, 10);
    return v >= NOW - GBX_WORKER_HOOK_TOLERANCE && v <= NOW + GBX_WORKER_HOOK_TOLERANCE;
}

/* "v1,<base64 of HMAC-SHA256(key, id.ts.body)>", computed apart from the code under test */
static char *sign(const char *id, const char *ts, const char *body, size_t len)
{
    size_t in = strlen(id), tn = strlen(ts);
    uint8_t *msg = malloc(in + tn + len + 2);
    CHECK(msg != NULL);
    memcpy(msg, id, in);
    msg[in] = '.';
    memcpy(msg + in + 1, ts, tn);
    msg[in + 1 + tn] = '.';
    memcpy(msg + in + tn + 2, body, len);
    uint8_t mac[32];
    unsigned int maclen = 0;
    CHECK(HMAC(EVP_sha256(), key, sizeof(key) - 1, msg, in + tn + len + 2, mac, &maclen) &&
          maclen == 32);
    free(msg);
    char *sig = malloc(3 + 44 + 1);
    CHECK(sig != NULL);
    memcpy(sig, "v1,", 3);
    CHECK(EVP_EncodeBlock((unsigned char *)sig + 3, mac, 32) == 44);
    return sig;
}

static void fuzz_hook(const uint8_t *data, size_t size, const struct gbx_worker_crypto *crypto)
{
    static int fd = -1;
    if (fd < 0)
        fd = memfd_create("fuzz_worker", 0);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);

    struct gbx_worker_hook_req r;
    int st = gbx_worker_hook_read(fd, 1000, &r);
    CHECK(st == 0 || st == 400 || st == 408 || st == 413);
    CHECK(r.body != NULL && r.body[r.len] == '\0' && r.len <= GBX_WORKER_HOOK_BODY_MAX);
    if (st == 0) {
        const struct gbx_worker_hook *h = &r.h;
        CHECK(r.len <= size);
        CHECK(!h->id || strlen(h->id) <= GBX_WORKER_HOOK_HEADER_MAX);
        CHECK(!h->timestamp || strlen(h->timestamp) <= GBX_WORKER_HOOK_HEADER_MAX);
        CHECK(!h->signature || strlen(h->signature) <= GBX_WORKER_HOOK_HEADER_MAX);

        /* as sent: the fuzzer cannot forge an HMAC, so never OK unless it is a right one */
        char *right = h->id && h->timestamp ? sign(h->id, h->timestamp, r.body, r.len) : NULL;
        enum gbx_worker_hook_verdict v =
            gbx_worker_hook_verify(h, r.body, r.len, key, sizeof(key) - 1, NOW, crypto, NULL);
        CHECK(v >= GBX_WORKER_HOOK_OK && v <= GBX_WORKER_HOOK_BAD_SIGNATURE);
        CHECK(gbx_worker_hook_verdict_name(v) != NULL);
        if (v == GBX_WORKER_HOOK_OK)
            CHECK(right && h->signature && strstr(h->signature, right));

        /* signed right (after whatever the signature header held) */
        if (right) {
            size_t ol = h->signature ? strlen(h->signature) : 0;
            char *sig = malloc(ol + strlen(right) + 2);
            CHECK(sig != NULL);
            snprintf(sig, ol + strlen(right) + 2, "%s %s", h->signature ? h->signature : "", right);
            struct gbx_worker_hook s = {.id = h->id, .timestamp = h->timestamp, .signature = sig};
            struct gbx_worker_hook_seen seen = {0};
            int expect_ok = h->id[0] != '\0' && ts_in_tolerance(h->timestamp);
            v = gbx_worker_hook_verify(&s, r.body, r.len, key, sizeof(key) - 1, NOW, crypto, &seen);
            CHECK((v == GBX_WORKER_HOOK_OK) == expect_ok);
            if (expect_ok)
                CHECK(gbx_worker_hook_verify(&s, r.body, r.len, key, sizeof(key) - 1, NOW, crypto,
                                             &seen) == GBX_WORKER_HOOK_REPLAY);
            gbx_worker_hook_seen_release(&seen);
            free(sig);
        }
        free(right);
    }
    gbx_worker_hook_req_release(&r);
}

/* --- SSE ------------------------------------------------------------------------------ */

struct events {
    uint64_t hash;
    size_t count;
    json_t *json; /* the events whose data is JSON, when not NULL */
};

/* What execute_body promises about a call it lets run */
static void check_execute(json_t *ev, json_t *body, int confirmed)
{
    if (body == NULL)
        return;
    const char *perm = json_string_value(json_object_get(ev, "evaluated_permission"));
    json_t *p = json_object_get(ev, "evaluated_permission");
    CHECK(p == NULL || json_is_null(p) ||
          (perm && (strcmp(perm, "allow") == 0 || (confirmed && strcmp(perm, "ask") == 0))));
    CHECK(strcmp(json_string_value(json_object_get(ev, "type")), "agent.tool_use") == 0);
    const char *id = json_string_value(json_object_get(body, "tool_use_id"));
    const char *name = json_string_value(json_object_get(body, "name"));
    CHECK(id && *id && gbx_worker_tool_owned(name));
    CHECK(json_is_object(json_object_get(body, "input")) && json_object_size(body) == 3);
}

static void fuzz_decisions(const char *name, json_t *ev)
{
    enum gbx_worker_event k = gbx_worker_event_kind(name, ev);
    CHECK(k >= GBX_WORKER_EV_OTHER && k <= GBX_WORKER_EV_ERROR);
    CHECK(gbx_worker_event_kind(NULL, ev) <= GBX_WORKER_EV_ERROR);
    for (int confirmed = 0; confirmed < 2; confirmed++) {
        json_t *body = gbx_worker_execute_body(ev, confirmed);
        check_execute(ev, body, confirmed);
        if (body)
            CHECK(k == GBX_WORKER_EV_TOOL_USE);
        json_decref(body);
    }
    if (gbx_worker_tool_held(ev)) {
        json_t *body = gbx_worker_execute_body(ev, 0);
        CHECK(body == NULL); /* held: never run unconfirmed */
    }
    const char *tid = NULL;
    int v = gbx_worker_confirmation(ev, &tid);
    CHECK(v == -1 || ((v == 0 || v == 1) && tid && *tid));

    char *last = NULL;
    long ttl = -1;
    int status = 200 + (int)(json_object_size(ev) % 3) * 100; /* 200, 300, 400 */
    enum gbx_worker_beat b = gbx_worker_beat_verdict(status, ev, &last, &ttl);
    CHECK(b == GBX_WORKER_BEAT_OK ? last && *last && ttl >= 0 && ttl < 86400
                                  : last == NULL && ttl == 0);
    free(last);

    struct gbx_worker_item it;
    if (gbx_worker_item_parse(ev, &it) == 0) {
        CHECK(gbx_worker_id_valid(it.id));
        CHECK(!it.session_id || gbx_worker_id_valid(it.session_id));
        CHECK(!it.secret || *it.secret);
    } else {
        CHECK(it.id == NULL && it.session_id == NULL && it.secret == NULL);
    }
    gbx_worker_item_release(&it);
    gbx_worker_item_release(&it);

    size_t skills = 0;
    const char *why = gbx_worker_session_unsupported(ev, &skills);
    CHECK(why == NULL || *why);

    json_t *res = gbx_worker_result_event("toolu_1", ev, k == GBX_WORKER_EV_ERROR ? "" : NULL);
    json_t *r0 = json_array_get(json_object_get(res, "events"), 0);
    json_t *content = json_object_get(r0, "content");
    CHECK(json_array_size(content) >= 1);
    size_t i;
    json_t *blk;
    json_array_foreach(content, i, blk)
    {
        const char *bt = json_string_value(json_object_get(blk, "type"));
        CHECK(bt != NULL);
        if (strcmp(bt, "text") == 0)
            CHECK(json_string_length(json_object_get(blk, "text")) > 0);
    }
    json_decref(res);
}

/* reconcile over every JSON event of the stream */
static void fuzz_reconcile(json_t *events)
{
    json_t *held = NULL;
    json_t *run = gbx_worker_reconcile(events, &held);
    CHECK(json_is_array(run) && json_is_object(held));
    json_t *seen = json_object();
    size_t i;
    json_t *ev;
    json_array_foreach(run, i, ev)
    {
        const char *id = json_string_value(json_object_get(ev, "id"));
        CHECK(id && json_object_get(seen, id) == NULL); /* each call once */
        json_object_set_new(seen, id, json_true());
        /* confirmed only by an allowing confirmation, the last one for the id */
        int confirmed = 0, answered = 0;
        size_t j;
        json_t *e;
        json_array_foreach(events, j, e)
        {
            const char *tid = NULL;
            int v = gbx_worker_confirmation(e, &tid);
            if (v >= 0 && strcmp(tid, id) == 0)
                confirmed = v;
            const char *type = json_string_value(json_object_get(e, "type"));
            const char *rid = json_string_value(json_object_get(e, "tool_use_id"));
            if (v < 0 && type && rid && strcmp(type, "user.tool_result") == 0 &&
                strcmp(rid, id) == 0)
                answered = 1;
        }
        CHECK(!answered);
        json_t *body = gbx_worker_execute_body(ev, confirmed);
        CHECK(body != NULL);
        check_execute(ev, body, confirmed);
        json_decref(body);
    }
    /* held: "ask" calls with no verdict (an id listed twice may also run: the caller drops
     * the held one then) */
    const char *id;
    json_object_foreach(held, id, ev)
    {
        CHECK(gbx_worker_tool_held(ev));
        size_t j;
        json_t *e;
        json_array_foreach(events, j, e)
        {
            const char *tid = NULL;
            CHECK(gbx_worker_confirmation(e, &tid) < 0 || strcmp(tid, id) != 0);
        }
    }
    json_t *again = gbx_worker_reconcile(events, NULL); /* the same without held */
    CHECK(json_array_size(again) == json_array_size(run));
    json_decref(again);
    json_decref(seen);
    json_decref(held);
    json_decref(run);
}

static void on_event(void *arg, const char *name, const char *d, size_t len)
{
    struct events *e = arg;
    size_t nl = strlen(name);
    CHECK(nl > 0 && nl < 128 && strpbrk(name, "\r\n") == NULL);
    CHECK(d[len] == '\0' && memchr(d, '\r', len) == NULL);
    /* FNV-1a over name, a separator, data and the length */
    uint64_t h = e->hash ^ 0xcbf29ce484222325ULL;
    for (size_t i = 0; i <= nl; i++)
        h = (h ^ (uint8_t)name[i]) * 0x100000001b3ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)d[i]) * 0x100000001b3ULL;
    e->hash = (h ^ len) * 0x100000001b3ULL;
    e->count++;
    if (e->json == NULL)
        return;
    json_t *ev = json_loadb(d, len, JSON_REJECT_DUPLICATES, NULL);
    if (ev == NULL)
        return;
    fuzz_decisions(name, ev);
    if (json_array_size(e->json) < 64)
        json_array_append(e->json, ev);
    json_decref(ev);
}

/* 0: whole, 1: one byte at a time, 2: pseudo-random pieces */
static struct events sse_run(const uint8_t *data, size_t size, size_t max_line, int how,
                             json_t *json)
{
    struct events e = {.json = json};
    struct gbx_worker_sse s = {.on_event = on_event, .arg = &e, .max_line = max_line};
    for (size_t pos = 0; pos < size;) {
        size_t k = how == 0 ? size - pos : how == 1 ? 1 : 1 + rng() % 97;
        if (k > size - pos)
            k = size - pos;
        gbx_worker_sse_feed(&s, (const char *)data + pos, k);
        pos += k;
    }
    gbx_worker_sse_release(&s);
    gbx_worker_sse_release(&s); /* twice is fine */
    return e;
}

static void fuzz_sse(const uint8_t *data, size_t size)
{
    size_t limits[2] = {0, 1 + size % 40};
    for (int l = 0; l < 2; l++) {
        json_t *json = l == 0 ? json_array() : NULL;
        struct events a = sse_run(data, size, limits[l], 0, json);
        struct events b = sse_run(data, size, limits[l], 1, NULL);
        struct events c = sse_run(data, size, limits[l], 2, NULL);
        CHECK(a.count == b.count && a.hash == b.hash);
        CHECK(a.count == c.count && a.hash == c.hash);
        if (json) {
            fuzz_reconcile(json);
            json_decref(json);
        }
    }
}

/* --- secrets -------------------------------------------------------------------------- */

static void fuzz_secrets(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';

    char *token = NULL, *url = NULL;
    if (gbx_worker_secret_decode(s, &token, &url) == 0) {
        CHECK(token && token[0] && strpbrk(token, "\r\n") == NULL);
        CHECK(!url || strncmp(url, "https://", 8) == 0 || strncmp(url, "http://", 7) == 0);
        CHECK(!url || strpbrk(url, " \r\n") == NULL);
        free(token);
        free(url);
    } else {
        CHECK(token == NULL && url == NULL);
    }

    uint8_t *k = NULL;
    size_t klen = 0;
    if (gbx_worker_hook_key(s, &k, &klen) == 0) {
        CHECK(k && klen >= 1 && klen <= 1024);
        free(k);
    } else {
        CHECK(k == NULL);
    }
    CHECK(gbx_worker_id_valid(s) == 0 || gbx_worker_id_valid(s) == 1);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gbx_worker_crypto crypto;
    if (crypto.hmac == NULL) {
        struct gbx_err *err = NULL;
        CHECK(gbx_worker_crypto_load(&crypto, &err) == 0);
    }
    rng_state = size;
    for (size_t i = 0; i < size && i < 16; i++)
        rng_state = rng_state * 31 + data[i];

    fuzz_hook(data, size, &crypto);
    fuzz_sse(data, size);
    fuzz_secrets(data, size);
    return 0;
}
