/* SPDX-License-Identifier: MIT */
/* Unit tests for src/worker/worker.c, the Managed Agents worker's protocol decisions: the
 * work item secret, the heartbeat interval and verdicts, poll answers, SSE framing across
 * split reads, reconcile, execute bodies and result events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "base/mem.h"
#include "worker/hook.h"
#include "worker/worker.h"

/* base64url without padding of s */
static char *b64url(const char *s)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t n = strlen(s);
    char *out = malloc(n / 3 * 4 + 5), *o = out;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        *o++ = a[p[i] >> 2];
        *o++ = a[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
        *o++ = a[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)];
        *o++ = a[p[i + 2] & 63];
    }
    if (n - i == 1) {
        *o++ = a[p[i] >> 2];
        *o++ = a[(p[i] & 3) << 4];
    } else if (n - i == 2) {
        *o++ = a[p[i] >> 2];
        *o++ = a[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
        *o++ = a[(p[i + 1] & 15) << 2];
    }
    *o = '\0';
    return out;
}

static int decode(const char *json, char **tok, char **url)
{
    char *s = b64url(json);
    int r = gbx_worker_secret_decode(s, tok, url);
    free(s);
    return r;
}

static void test_secret(void **state)
{
    char *tok = NULL, *url = NULL;
    assert_int_equal(decode("{\"sessions_token\":\"sk-ant-req-A\"}", &tok, &url), 0);
    assert_string_equal(tok, "sk-ant-req-A");
    assert_null(url);
    free(tok);
    assert_int_equal(decode("{\"sessions_token\":\"sk-ant-req-B\",\"api_base_url\":"
                            "\"https://x.example/\"}",
                            &tok, &url),
                     0);
    assert_string_equal(tok, "sk-ant-req-B");
    assert_string_equal(url, "https://x.example/");
    free(tok);
    free(url);
    /* ?? and ?> make '/' and '+' in standard base64: the URL-safe alphabet decodes them */
    assert_int_equal(decode("{\"sessions_token\":\"a??b>>c\"}", &tok, &url), 0);
    assert_string_equal(tok, "a??b>>c");
    free(tok);
    /* padded is fine too */
    char *s = b64url("{\"sessions_token\":\"t\"}");
    char padded[256];
    snprintf(padded, sizeof(padded), "%s%s", s,
             strlen(s) % 4 == 2   ? "=="
             : strlen(s) % 4 == 3 ? "="
                                  : "");
    free(s);
    assert_int_equal(gbx_worker_secret_decode(padded, &tok, &url), 0);
    assert_string_equal(tok, "t");
    free(tok);
}

static void test_secret_malformed(void **state)
{
    char unset[] = "unset";
    char *tok = unset, *url = unset;
    assert_int_equal(gbx_worker_secret_decode(NULL, &tok, &url), -EINVAL);
    assert_int_equal(gbx_worker_secret_decode("", &tok, &url), -EINVAL);
    assert_int_equal(gbx_worker_secret_decode("!!!!", &tok, &url), -EINVAL);
    assert_int_equal(gbx_worker_secret_decode("abc+/def", &tok, &url), -EINVAL);
    assert_int_equal(decode("not json", &tok, &url), -EINVAL);
    assert_int_equal(decode("[1,2]", &tok, &url), -EINVAL);
    assert_int_equal(decode("{}", &tok, &url), -EINVAL);
    assert_int_equal(decode("{\"sessions_token\":\"\"}", &tok, &url), -EINVAL);
    assert_int_equal(decode("{\"sessions_token\":42}", &tok, &url), -EINVAL);
    assert_int_equal(decode("{\"sessions_token\":\"a\\r\\nX-Evil: 1\"}", &tok, &url), -EINVAL);
    assert_int_equal(decode("{\"sessions_token\":\"a\\u0000b\"}", &tok, &url), -EINVAL);
    assert_int_equal(
        decode("{\"sessions_token\":\"t\",\"api_base_url\":\"file:///etc\"}", &tok, &url), -EINVAL);
    assert_int_equal(decode("{\"sessions_token\":\"t\",\"api_base_url\":7}", &tok, &url), -EINVAL);
    assert_int_equal(decode("{\"sessions_token\":\"t\",\"sessions_token\":\"u\"}", &tok, &url),
                     -EINVAL);
    /* nothing was set */
    assert_ptr_equal(tok, unset);
    assert_ptr_equal(url, unset);
}

static void test_interval(void **state)
{
    assert_int_equal(gbx_worker_beat_interval_ms(0), 30000);
    assert_int_equal(gbx_worker_beat_interval_ms(-5), 30000);
    assert_int_equal(gbx_worker_beat_interval_ms(1), 1000);
    assert_int_equal(gbx_worker_beat_interval_ms(2), 1000);
    assert_int_equal(gbx_worker_beat_interval_ms(3), 1500);
    assert_int_equal(gbx_worker_beat_interval_ms(4), 2000);
    assert_int_equal(gbx_worker_beat_interval_ms(60), 30000);
    assert_int_equal(gbx_worker_beat_interval_ms(90), 30000);
    assert_int_equal(gbx_worker_beat_interval_ms(300), 30000);
    assert_int_equal(gbx_worker_beat_interval_ms(1L << 40), 30000);
}

static enum gbx_worker_beat verdict(int status, const char *body, char **last, long *ttl)
{
    json_t *j = body ? json_loads(body, JSON_DECODE_ANY, NULL) : NULL;
    enum gbx_worker_beat v = gbx_worker_beat_verdict(status, j, last, ttl);
    json_decref(j);
    return v;
}

static void test_beat_verdict(void **state)
{
    char *last;
    long ttl;
    assert_int_equal(verdict(200,
                             "{\"type\":\"work_heartbeat\",\"last_heartbeat\":\"2026-11-29T18:02:"
                             "16.611Z\",\"lease_extended\":true,\"state\":\"active\","
                             "\"ttl_seconds\":4}",
                             &last, &ttl),
                     GBX_WORKER_BEAT_OK);
    assert_string_equal(last, "2026-11-29T18:02:16.611Z");
    assert_int_equal(ttl, 4);
    free(last);
    assert_int_equal(verdict(200,
                             "{\"last_heartbeat\":\"x\",\"lease_extended\":true,\"state\":"
                             "\"stopping\",\"ttl_seconds\":4}",
                             &last, &ttl),
                     GBX_WORKER_BEAT_FINISH);
    assert_null(last);
    assert_int_equal(verdict(200, "{\"last_heartbeat\":\"x\",\"state\":\"stopped\"}", &last, &ttl),
                     GBX_WORKER_BEAT_FINISH);
    assert_int_equal(verdict(200,
                             "{\"last_heartbeat\":\"x\",\"lease_extended\":false,\"state\":"
                             "\"active\"}",
                             &last, &ttl),
                     GBX_WORKER_BEAT_FINISH);
    assert_int_equal(verdict(200, "{\"state\":\"active\"}", &last, &ttl), GBX_WORKER_BEAT_FINISH);
    assert_int_equal(verdict(412, "{\"type\":\"error\"}", &last, &ttl), GBX_WORKER_BEAT_LOST);
    assert_int_equal(verdict(-1, NULL, &last, &ttl), GBX_WORKER_BEAT_TRANSIENT);
    assert_int_equal(verdict(503, NULL, &last, &ttl), GBX_WORKER_BEAT_TRANSIENT);
    assert_int_equal(verdict(429, NULL, &last, &ttl), GBX_WORKER_BEAT_TRANSIENT);
    assert_int_equal(verdict(409, NULL, &last, &ttl), GBX_WORKER_BEAT_TRANSIENT);
    assert_int_equal(verdict(404, NULL, &last, &ttl), GBX_WORKER_BEAT_FINISH);
    assert_int_equal(verdict(401, NULL, &last, &ttl), GBX_WORKER_BEAT_FINISH);
}

static void test_poll_and_item(void **state)
{
    json_t *null = json_null(), *obj = json_object();
    assert_true(gbx_worker_poll_empty(204, NULL));
    assert_true(gbx_worker_poll_empty(200, NULL));
    assert_true(gbx_worker_poll_empty(200, null));
    assert_false(gbx_worker_poll_empty(200, obj));
    json_decref(obj);

    json_t *j = json_loads("{\"type\":\"work\",\"id\":\"work_A\",\"data\":{\"type\":\"session\","
                           "\"id\":\"sesn_A\"},\"secret\":\"eyJ4\"}",
                           0, NULL);
    struct gbx_worker_item it;
    assert_int_equal(gbx_worker_item_parse(j, &it), 0);
    assert_string_equal(it.id, "work_A");
    assert_string_equal(it.session_id, "sesn_A");
    assert_string_equal(it.secret, "eyJ4");
    gbx_worker_item_release(&it);
    gbx_worker_item_release(&it);
    json_decref(j);

    j = json_loads("{\"id\":\"work_B\",\"data\":{\"type\":\"other\",\"id\":\"x\"},\"secret\":null}",
                   0, NULL);
    assert_int_equal(gbx_worker_item_parse(j, &it), 0);
    assert_null(it.session_id);
    assert_null(it.secret);
    gbx_worker_item_release(&it);
    json_decref(j);

    j = json_loads("{\"id\":\"../x\",\"data\":{\"type\":\"session\",\"id\":\"s\"}}", 0, NULL);
    assert_int_equal(gbx_worker_item_parse(j, &it), -EINVAL);
    json_decref(j);
    j = json_loads("{\"id\":\"w\",\"data\":{\"type\":\"session\",\"id\":\"a/b\"}}", 0, NULL);
    assert_int_equal(gbx_worker_item_parse(j, &it), 0);
    assert_null(it.session_id); /* not a safe path segment: treated as no session */
    gbx_worker_item_release(&it);
    json_decref(j);
}

/* ---- SSE ---- */

struct got {
    int n;
    char names[16][64];
    char data[16][256];
};

static void on_ev(void *arg, const char *name, const char *data, size_t len)
{
    struct got *g = arg;
    assert_true(g->n < 16);
    assert_int_equal(strlen(data), len);
    snprintf(g->names[g->n], sizeof(g->names[0]), "%s", name);
    snprintf(g->data[g->n], sizeof(g->data[0]), "%s", data);
    g->n++;
}

static const char stream[] = ": connected\n"
                             "\n"
                             "event: ping\n"
                             "data: {}\n"
                             "\n"
                             "event: agent.tool_use\r\n"
                             "data: {\"type\":\"agent.tool_use\",\r\n"
                             "data: \"id\":\"sevt_1\"}\r\n"
                             "\r\n"
                             ": keep-alive\n"
                             "id: 7\n"
                             "retry: 100\n"
                             "data:no-space\n"
                             "\n"
                             "event: nodata\n"
                             "\n"
                             "event:session.status_idle\rdata: {\"x\":1}\r\r";

static void check_stream(struct got *g)
{
    assert_int_equal(g->n, 4);
    assert_string_equal(g->names[0], "ping");
    assert_string_equal(g->data[0], "{}");
    assert_string_equal(g->names[1], "agent.tool_use");
    assert_string_equal(g->data[1], "{\"type\":\"agent.tool_use\",\n\"id\":\"sevt_1\"}");
    assert_string_equal(g->names[2], "message");
    assert_string_equal(g->data[2], "no-space");
    assert_string_equal(g->names[3], "session.status_idle");
    assert_string_equal(g->data[3], "{\"x\":1}");
}

static void test_sse_whole_and_split(void **state)
{
    size_t n = strlen(stream);
    /* in one piece, then in every pair of pieces, then a byte at a time */
    for (size_t cut = 0; cut <= n; cut++) {
        struct got g = {0};
        struct gbx_worker_sse s = {.on_event = on_ev, .arg = &g};
        gbx_worker_sse_feed(&s, stream, cut);
        gbx_worker_sse_feed(&s, stream + cut, n - cut);
        check_stream(&g);
        gbx_worker_sse_release(&s);
    }
    struct got g = {0};
    struct gbx_worker_sse s = {.on_event = on_ev, .arg = &g};
    for (size_t i = 0; i < n; i++)
        gbx_worker_sse_feed(&s, stream + i, 1);
    check_stream(&g);
    gbx_worker_sse_release(&s);
    gbx_worker_sse_release(&s);
}

static void test_sse_overlong(void **state)
{
    struct got g = {0};
    struct gbx_worker_sse s = {.on_event = on_ev, .arg = &g, .max_line = 16};
    const char *in = "event: a\ndata: 0123456789abcdefghij\n\n"
                     "event: b\ndata: ok\n\n";
    gbx_worker_sse_feed(&s, in, strlen(in));
    assert_int_equal(g.n, 1);
    assert_string_equal(g.names[0], "b");
    assert_string_equal(g.data[0], "ok");
    gbx_worker_sse_release(&s);
}

/* ---- events ---- */

static void test_event_kind(void **state)
{
    struct {
        const char *json, *sse;
        enum gbx_worker_event kind;
    } cases[] = {
        {"{\"type\":\"agent.tool_use\"}", NULL, GBX_WORKER_EV_TOOL_USE},
        {"{\"type\":\"user.tool_result\"}", NULL, GBX_WORKER_EV_RESULT},
        {"{\"type\":\"session.status_idle\",\"stop_reason\":{\"type\":\"end_turn\"}}", NULL,
         GBX_WORKER_EV_IDLE_END},
        {"{\"type\":\"session.status_idle\",\"stop_reason\":{\"type\":\"requires_action\"}}", NULL,
         GBX_WORKER_EV_IDLE_OTHER},
        {"{\"type\":\"session.status_terminated\"}", NULL, GBX_WORKER_EV_TERMINATED},
        {"{\"type\":\"session.deleted\"}", NULL, GBX_WORKER_EV_TERMINATED},
        {"{\"type\":\"agent.message\"}", NULL, GBX_WORKER_EV_OTHER},
        {"{\"type\":\"user.tool_confirmation\"}", NULL, GBX_WORKER_EV_CONFIRM},
        {"{}", "ping", GBX_WORKER_EV_IGNORE},
        {"{\"error\":{}}", "error", GBX_WORKER_EV_ERROR},
        {"{}", "session.status_terminated", GBX_WORKER_EV_TERMINATED},
        {"{}", NULL, GBX_WORKER_EV_OTHER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = json_loads(cases[i].json, 0, NULL);
        assert_int_equal(gbx_worker_event_kind(cases[i].sse, j), cases[i].kind);
        json_decref(j);
    }
}

static void test_execute_body(void **state)
{
    json_t *ev = json_loads("{\"type\":\"agent.tool_use\",\"id\":\"sevt_1\",\"name\":\"bash\","
                            "\"input\":{\"command\":\"ls\"},\"processed_at\":\"t\"}",
                            0, NULL);
    json_t *b = gbx_worker_execute_body(ev, 1);
    assert_non_null(b);
    char *s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"input\":{\"command\":\"ls\"},\"name\":\"bash\",\"tool_use_id\":"
                           "\"sevt_1\"}");
    free(s);
    json_decref(b);
    json_decref(ev);

    const char *refused[] = {
        "{\"type\":\"agent.tool_use\",\"id\":\"x\",\"name\":\"web_fetch\",\"input\":{}}",
        "{\"type\":\"agent.tool_use\",\"id\":\"x\",\"name\":\"Bash\",\"input\":{}}",
        "{\"type\":\"agent.custom_tool_use\",\"id\":\"x\",\"name\":\"bash\",\"input\":{}}",
        "{\"type\":\"agent.tool_use\",\"name\":\"bash\",\"input\":{}}",
        "{\"type\":\"agent.tool_use\",\"id\":\"x\",\"name\":\"bash\",\"input\":[1]}",
        "{\"type\":\"agent.tool_use\",\"id\":\"x\",\"name\":\"bash\",\"input\":{},"
        "\"evaluated_permission\":\"ask\"}",
        "{\"type\":\"agent.tool_use\",\"id\":\"x\",\"name\":\"bash\",\"input\":{},"
        "\"evaluated_permission\":\"deny\"}",
        "{\"type\":\"agent.tool_use\",\"id\":\"x\",\"name\":\"bash\",\"input\":{},"
        "\"evaluated_permission\":\"maybe\"}",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        ev = json_loads(refused[i], 0, NULL);
        assert_non_null(ev);
        b = gbx_worker_execute_body(ev, 0);
        if (b)
            fail_msg("executed: %s", refused[i]);
        json_decref(ev);
    }
    ev = json_loads("{\"type\":\"agent.tool_use\",\"id\":\"x\",\"name\":\"bash\","
                    "\"evaluated_permission\":\"ask\"}",
                    0, NULL);
    assert_true(gbx_worker_tool_held(ev));
    b = gbx_worker_execute_body(ev, 1); /* confirmed */
    assert_non_null(b);
    json_decref(b);
    json_object_set_new(ev, "evaluated_permission", json_string("deny"));
    assert_false(gbx_worker_tool_held(ev));
    assert_null(gbx_worker_execute_body(ev, 1));
    json_decref(ev);
    ev = json_loads("{\"type\":\"agent.tool_use\",\"id\":\"x\",\"name\":\"read\","
                    "\"evaluated_permission\":\"allow\"}",
                    0, NULL);
    b = gbx_worker_execute_body(ev, 0);
    assert_non_null(b);
    assert_true(json_is_object(json_object_get(b, "input"))); /* absent input: {} */
    json_decref(b);
    json_decref(ev);
}

static void test_reconcile(void **state)
{
    json_t *hist = json_loads(
        "[{\"type\":\"user.message\",\"id\":\"m\"},"
        "{\"type\":\"agent.tool_use\",\"id\":\"t_answered\",\"name\":\"bash\",\"input\":{}},"
        "{\"type\":\"user.tool_result\",\"tool_use_id\":\"t_answered\",\"content\":[]},"
        "{\"type\":\"agent.tool_use\",\"id\":\"t_open1\",\"name\":\"write\",\"input\":{}},"
        "{\"type\":\"agent.custom_tool_use\",\"id\":\"c1\",\"name\":\"lookup\",\"input\":{}},"
        "{\"type\":\"agent.tool_use\",\"id\":\"t_web\",\"name\":\"web_fetch\",\"input\":{}},"
        "{\"type\":\"agent.tool_use\",\"id\":\"t_ask\",\"name\":\"bash\",\"input\":{},"
        "\"evaluated_permission\":\"ask\"},"
        "{\"type\":\"agent.tool_use\",\"id\":\"t_open2\",\"name\":\"read\",\"input\":{}},"
        "{\"type\":\"agent.tool_use\",\"id\":\"t_open1\",\"name\":\"write\",\"input\":{}},"
        "{\"type\":\"agent.tool_use\",\"id\":\"t_late\",\"name\":\"grep\",\"input\":{}},"
        "{\"type\":\"user.tool_result\",\"tool_use_id\":\"t_late\",\"content\":[]}]",
        0, NULL);
    assert_non_null(hist);
    json_t *held = NULL;
    json_t *todo = gbx_worker_reconcile(hist, &held);
    assert_int_equal(json_array_size(todo), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(todo, 0), "id")),
                        "t_open1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(todo, 1), "id")),
                        "t_open2");
    assert_int_equal(json_object_size(held), 1); /* t_ask waits for a confirmation */
    assert_non_null(json_object_get(held, "t_ask"));
    json_decref(held);
    json_decref(todo);
    json_decref(hist);

    /* confirmations: allowed runs (in order), denied never, unknown permissions never */
    hist = json_loads(
        "[{\"type\":\"agent.tool_use\",\"id\":\"a1\",\"name\":\"bash\",\"input\":{},"
        "\"evaluated_permission\":\"ask\"},"
        "{\"type\":\"agent.tool_use\",\"id\":\"a2\",\"name\":\"bash\",\"input\":{},"
        "\"evaluated_permission\":\"ask\"},"
        "{\"type\":\"agent.tool_use\",\"id\":\"a3\",\"name\":\"bash\",\"input\":{},"
        "\"evaluated_permission\":\"deny\"},"
        "{\"type\":\"agent.tool_use\",\"id\":\"a4\",\"name\":\"bash\",\"input\":{},"
        "\"evaluated_permission\":\"ask\"},"
        "{\"type\":\"user.tool_confirmation\",\"tool_use_id\":\"a2\",\"result\":\"deny\"},"
        "{\"type\":\"user.tool_confirmation\",\"tool_use_id\":\"a1\",\"result\":\"allow\"},"
        "{\"type\":\"user.tool_confirmation\",\"tool_use_id\":\"a3\",\"result\":\"allow\"}]",
        0, NULL);
    assert_non_null(hist);
    todo = gbx_worker_reconcile(hist, &held);
    assert_int_equal(json_array_size(todo), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(todo, 0), "id")), "a1");
    assert_int_equal(json_object_size(held), 1);
    assert_non_null(json_object_get(held, "a4"));
    json_decref(held);
    json_decref(todo);
    json_decref(hist);

    const char *tid = NULL;
    json_t *c = json_loads("{\"type\":\"user.tool_confirmation\",\"tool_use_id\":\"x\","
                           "\"result\":\"allow\"}",
                           0, NULL);
    assert_int_equal(gbx_worker_confirmation(c, &tid), 1);
    assert_string_equal(tid, "x");
    json_object_set_new(c, "result", json_string("maybe"));
    assert_int_equal(gbx_worker_confirmation(c, &tid), 0);
    json_object_del(c, "tool_use_id");
    assert_int_equal(gbx_worker_confirmation(c, &tid), -1);
    json_decref(c);

    json_t *empty = json_array();
    todo = gbx_worker_reconcile(empty, NULL);
    assert_int_equal(json_array_size(todo), 0);
    json_decref(todo);
    json_decref(empty);
}

static json_t *only_event(json_t *body)
{
    json_t *evs = json_object_get(body, "events");
    assert_int_equal(json_array_size(evs), 1);
    json_t *ev = json_array_get(evs, 0);
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "user.tool_result");
    assert_true(json_array_size(json_object_get(ev, "content")) > 0);
    return ev;
}

static void test_result_event(void **state)
{
    json_t *reply = json_loads("{\"content\":[{\"type\":\"text\",\"text\":\"out\\nerr\"}],"
                               "\"is_error\":true}",
                               0, NULL);
    json_t *body = gbx_worker_result_event("sevt_a1", reply, NULL);
    char *s = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s, "{\"events\":[{\"type\":\"user.tool_result\",\"tool_use_id\":"
                           "\"sevt_a1\",\"is_error\":true,\"content\":[{\"type\":\"text\","
                           "\"text\":\"out\\nerr\"}]}]}");
    free(s);
    json_decref(body);
    json_decref(reply);

    /* empty content, an empty text block: "(no output)" */
    const char *empties[] = {"{\"content\":[],\"is_error\":false}",
                             "{\"content\":[{\"type\":\"text\",\"text\":\"\"}],\"is_error\":false}",
                             "{\"content\":[{\"text\":\"no type\"}]}"};
    for (size_t i = 0; i < 3; i++) {
        reply = json_loads(empties[i], 0, NULL);
        body = gbx_worker_result_event("t", reply, NULL);
        json_t *ev = only_event(body);
        assert_false(json_is_true(json_object_get(ev, "is_error")));
        json_t *b = json_array_get(json_object_get(ev, "content"), 0);
        assert_string_equal(json_string_value(json_object_get(b, "text")), "(no output)");
        json_decref(body);
        json_decref(reply);
    }

    /* an image block passes through; the empty text beside it goes */
    reply = json_loads("{\"content\":[{\"type\":\"text\",\"text\":\"\"},{\"type\":\"image\","
                       "\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":"
                       "\"AA==\"}}],\"is_error\":false}",
                       0, NULL);
    body = gbx_worker_result_event("t", reply, NULL);
    json_t *ev = only_event(body);
    assert_int_equal(json_array_size(json_object_get(ev, "content")), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(ev, "content"), 0), "type")),
                        "image");
    json_decref(body);
    json_decref(reply);

    /* no reply: an error result with the message, or a default one */
    body = gbx_worker_result_event("t", NULL, "glovebox: no session");
    ev = only_event(body);
    assert_true(json_is_true(json_object_get(ev, "is_error")));
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(ev, "content"), 0), "text")),
                        "glovebox: no session");
    json_decref(body);
    body = gbx_worker_result_event("t", NULL, "");
    ev = only_event(body);
    assert_true(json_is_true(json_object_get(ev, "is_error")));
    json_decref(body);
}

static void test_session_unsupported(void **state)
{
    size_t skills = 99;
    json_t *j =
        json_loads("{\"type\":\"session\",\"agent\":{\"skills\":[]},\"resources\":[]}", 0, NULL);
    assert_null(gbx_worker_session_unsupported(j, &skills));
    assert_int_equal(skills, 0);
    json_decref(j);
    j = json_loads("{\"agent\":{\"skills\":[{\"type\":\"anthropic\",\"skill_id\":\"pdf\"}]},"
                   "\"resources\":[{\"type\":\"file\"}]}",
                   0, NULL);
    assert_null(gbx_worker_session_unsupported(j, &skills));
    assert_int_equal(skills, 1);
    json_decref(j);
    j = json_loads("{\"resources\":[{\"type\":\"file\"},{\"type\":\"memory_store\","
                   "\"memory_store_id\":\"m\"}]}",
                   0, NULL);
    assert_non_null(gbx_worker_session_unsupported(j, &skills));
    json_decref(j);
    assert_null(gbx_worker_session_unsupported(NULL, &skills));
}

static void test_tool_owned(void **state)
{
    const char *yes[] = {"bash", "read", "write", "edit", "glob", "grep"};
    for (size_t i = 0; i < 6; i++)
        assert_true(gbx_worker_tool_owned(yes[i]));
    assert_false(gbx_worker_tool_owned("web_fetch"));
    assert_false(gbx_worker_tool_owned("web_search"));
    assert_false(gbx_worker_tool_owned(""));
    assert_false(gbx_worker_tool_owned(NULL));
}

/* ---- webhook deliveries ---- */

static char *b64std(const uint8_t *p, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc(n / 3 * 4 + 5), *o = out;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        *o++ = a[p[i] >> 2];
        *o++ = a[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
        *o++ = a[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)];
        *o++ = a[p[i + 2] & 63];
    }
    if (n - i == 1) {
        *o++ = a[p[i] >> 2];
        *o++ = a[(p[i] & 3) << 4];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        *o++ = a[p[i] >> 2];
        *o++ = a[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
        *o++ = a[(p[i + 1] & 15) << 2];
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

static struct gbx_worker_crypto crypto;

static int hook_setup(void **state)
{
    struct gbx_err *err = NULL;
    if (gbx_worker_crypto_load(&crypto, &err) < 0) {
        fprintf(stderr, "%s\n", err->msg);
        gbx_err_free(err);
        return -1;
    }
    return 0;
}

#define HOOK_KEY "fake-webhook-signing-key-0123456789"
#define HOOK_BODY                                                                                  \
    "{\"type\":\"event\",\"id\":\"event_1\",\"data\":{\"type\":\"session.status_run_started\"}}"
#define NOW 1790000000LL

/* "v1,<base64 HMAC>" of id.ts.body under HOOK_KEY */
static char *sign(const char *id, const char *ts, const char *body)
{
    char *msg = gbx_asprintf("%s.%s.%s", id, ts, body);
    uint8_t mac[32];
    assert_int_equal(crypto.hmac((const uint8_t *)HOOK_KEY, strlen(HOOK_KEY), (const uint8_t *)msg,
                                 strlen(msg), mac),
                     0);
    free(msg);
    char *b = b64std(mac, 32);
    char *out = gbx_asprintf("v1,%s", b);
    free(b);
    return out;
}

static enum gbx_worker_hook_verdict verify(const char *id, const char *ts, const char *sig,
                                           const char *body, struct gbx_worker_hook_seen *seen)
{
    struct gbx_worker_hook h = {0};
    if (id)
        assert_int_equal(gbx_worker_hook_header(&h, "Webhook-Id", 10, id, strlen(id)), 0);
    if (ts)
        assert_int_equal(gbx_worker_hook_header(&h, "webhook-timestamp", 17, ts, strlen(ts)), 0);
    if (sig)
        assert_int_equal(gbx_worker_hook_header(&h, "WEBHOOK-SIGNATURE", 17, sig, strlen(sig)), 0);
    enum gbx_worker_hook_verdict v = gbx_worker_hook_verify(
        &h, body, strlen(body), (const uint8_t *)HOOK_KEY, strlen(HOOK_KEY), NOW, &crypto, seen);
    gbx_worker_hook_release(&h);
    return v;
}

static void test_hook_hmac_known_answer(void **state)
{
    /* RFC 4231 test case 2 */
    static const uint8_t want[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e,
                                     0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
                                     0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83,
                                     0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
    const char *d = "what do ya want for nothing?";
    uint8_t mac[32];
    assert_int_equal(crypto.hmac((const uint8_t *)"Jefe", 4, (const uint8_t *)d, strlen(d), mac),
                     0);
    assert_memory_equal(mac, want, 32);
    assert_int_equal(crypto.memcmp(mac, want, 32), 0);
    mac[31] ^= 1;
    assert_int_not_equal(crypto.memcmp(mac, want, 32), 0);
}

static void test_hook_key(void **state)
{
    uint8_t *key = NULL;
    size_t n = 0;
    char *b = b64std((const uint8_t *)HOOK_KEY, strlen(HOOK_KEY));
    char *w = gbx_asprintf("whsec_%s", b);
    assert_int_equal(gbx_worker_hook_key(w, &key, &n), 0);
    assert_int_equal(n, strlen(HOOK_KEY));
    assert_memory_equal(key, HOOK_KEY, n);
    free(key);
    assert_int_equal(gbx_worker_hook_key(b, &key, &n), 0); /* the prefix is optional */
    free(key);
    assert_int_equal(gbx_worker_hook_key("whsec_", &key, &n), -EINVAL);
    assert_int_equal(gbx_worker_hook_key("whsec_not base64!", &key, &n), -EINVAL);
    assert_int_equal(gbx_worker_hook_key("whsec_a", &key, &n), -EINVAL);
    assert_int_equal(gbx_worker_hook_key(NULL, &key, &n), -EINVAL);
    free(w);
    free(b);
}

static void test_hook_headers(void **state)
{
    struct gbx_worker_hook h = {0};
    assert_int_equal(gbx_worker_hook_header(&h, "Content-Type", 12, "x", 1), 0);
    assert_int_equal(gbx_worker_hook_header(&h, "webhook-id", 10, "event_1", 7), 0);
    assert_string_equal(h.id, "event_1");
    assert_int_equal(gbx_worker_hook_header(&h, "WEBHOOK-ID", 10, "event_2", 7), -EINVAL);
    assert_string_equal(h.id, "event_1");
    assert_null(h.timestamp);
    char *big = calloc(1, GBX_WORKER_HOOK_HEADER_MAX + 2);
    memset(big, 'a', GBX_WORKER_HOOK_HEADER_MAX + 1);
    assert_int_equal(gbx_worker_hook_header(&h, "webhook-signature", 17, big, strlen(big)),
                     -EINVAL);
    assert_null(h.signature);
    free(big);
    gbx_worker_hook_release(&h);
    gbx_worker_hook_release(&h);
}

static void test_hook_verify(void **state)
{
    char ts[32];
    snprintf(ts, sizeof(ts), "%lld", NOW);
    char *good = sign("event_1", ts, HOOK_BODY);
    assert_int_equal(verify("event_1", ts, good, HOOK_BODY, NULL), GBX_WORKER_HOOK_OK);
    /* tampered body */
    assert_int_equal(verify("event_1", ts, good, HOOK_BODY " ", NULL),
                     GBX_WORKER_HOOK_BAD_SIGNATURE);
    /* the id and the timestamp are signed too */
    assert_int_equal(verify("event_2", ts, good, HOOK_BODY, NULL), GBX_WORKER_HOOK_BAD_SIGNATURE);
    /* tampered signature: one bit of the MAC */
    char *bad = strdup(good);
    bad[5] = bad[5] == 'A' ? 'B' : 'A';
    assert_int_equal(verify("event_1", ts, bad, HOOK_BODY, NULL), GBX_WORKER_HOOK_BAD_SIGNATURE);
    /* several entries, one good, in any place; other versions and junk are skipped */
    char *multi = gbx_asprintf("v1,%s v2,%s  %s v1,@@@@", bad + 3, good + 3, good);
    assert_int_equal(verify("event_1", ts, multi, HOOK_BODY, NULL), GBX_WORKER_HOOK_OK);
    char *none = gbx_asprintf("v1,%s v2,%s v1a,%s", bad + 3, good + 3, good + 3);
    assert_int_equal(verify("event_1", ts, none, HOOK_BODY, NULL), GBX_WORKER_HOOK_BAD_SIGNATURE);
    /* malformed base64 */
    assert_int_equal(verify("event_1", ts, "v1,not*base64", HOOK_BODY, NULL),
                     GBX_WORKER_HOOK_BAD_SIGNATURE);
    assert_int_equal(verify("event_1", ts, "v1,", HOOK_BODY, NULL), GBX_WORKER_HOOK_BAD_SIGNATURE);
    assert_int_equal(verify("event_1", ts, "v1,YWJj", HOOK_BODY, NULL),
                     GBX_WORKER_HOOK_BAD_SIGNATURE); /* valid base64, wrong length */
    /* missing headers */
    assert_int_equal(verify(NULL, ts, good, HOOK_BODY, NULL), GBX_WORKER_HOOK_MISSING);
    assert_int_equal(verify("event_1", NULL, good, HOOK_BODY, NULL), GBX_WORKER_HOOK_MISSING);
    assert_int_equal(verify("event_1", ts, NULL, HOOK_BODY, NULL), GBX_WORKER_HOOK_MISSING);
    assert_int_equal(verify("", ts, good, HOOK_BODY, NULL), GBX_WORKER_HOOK_MISSING);
    /* malformed timestamps */
    assert_int_equal(verify("event_1", "", good, HOOK_BODY, NULL), GBX_WORKER_HOOK_MALFORMED);
    assert_int_equal(verify("event_1", "-5", good, HOOK_BODY, NULL), GBX_WORKER_HOOK_MALFORMED);
    assert_int_equal(verify("event_1", "1790000000.5", good, HOOK_BODY, NULL),
                     GBX_WORKER_HOOK_MALFORMED);
    free(good);
    free(bad);
    free(multi);
    free(none);
}

static void test_hook_timestamps(void **state)
{
    const long long offs[] = {-301, -300, 300, 301, -600, 600};
    const enum gbx_worker_hook_verdict want[] = {GBX_WORKER_HOOK_STALE, GBX_WORKER_HOOK_OK,
                                                 GBX_WORKER_HOOK_OK,    GBX_WORKER_HOOK_STALE,
                                                 GBX_WORKER_HOOK_STALE, GBX_WORKER_HOOK_STALE};
    for (size_t i = 0; i < 6; i++) {
        char ts[32];
        snprintf(ts, sizeof(ts), "%lld", NOW + offs[i]);
        char *sig = sign("event_t", ts, HOOK_BODY); /* correctly signed, still refused */
        assert_int_equal(verify("event_t", ts, sig, HOOK_BODY, NULL), want[i]);
        free(sig);
    }
}

static void test_hook_replay(void **state)
{
    struct gbx_worker_hook_seen *seen = calloc(1, sizeof(*seen));
    char ts[32];
    snprintf(ts, sizeof(ts), "%lld", NOW);
    char *sig = sign("event_r", ts, HOOK_BODY);
    assert_int_equal(verify("event_r", ts, sig, HOOK_BODY, seen), GBX_WORKER_HOOK_OK);
    assert_int_equal(verify("event_r", ts, sig, HOOK_BODY, seen), GBX_WORKER_HOOK_REPLAY);
    /* a forged delivery reusing the id is refused, not a replay */
    assert_int_equal(verify("event_r", ts, sig, HOOK_BODY "x", seen),
                     GBX_WORKER_HOOK_BAD_SIGNATURE);
    /* a refused delivery does not poison its id */
    char *other = sign("event_s", ts, HOOK_BODY);
    assert_int_equal(verify("event_s", ts, sig, HOOK_BODY, seen), GBX_WORKER_HOOK_BAD_SIGNATURE);
    assert_int_equal(verify("event_s", ts, other, HOOK_BODY, seen), GBX_WORKER_HOOK_OK);
    /* bounded: after GBX_WORKER_HOOK_SEEN newer ids, the oldest is forgotten */
    for (int i = 0; i < GBX_WORKER_HOOK_SEEN; i++) {
        char id[32];
        snprintf(id, sizeof(id), "event_n%d", i);
        char *s = sign(id, ts, HOOK_BODY);
        assert_int_equal(verify(id, ts, s, HOOK_BODY, seen), GBX_WORKER_HOOK_OK);
        free(s);
    }
    assert_int_equal(verify("event_r", ts, sig, HOOK_BODY, seen), GBX_WORKER_HOOK_OK);
    assert_int_equal(verify("event_n999", ts, "v1,x", HOOK_BODY, seen),
                     GBX_WORKER_HOOK_BAD_SIGNATURE);
    gbx_worker_hook_seen_release(seen);
    free(seen);
    free(sig);
    free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secret),
        cmocka_unit_test(test_secret_malformed),
        cmocka_unit_test(test_interval),
        cmocka_unit_test(test_beat_verdict),
        cmocka_unit_test(test_poll_and_item),
        cmocka_unit_test(test_sse_whole_and_split),
        cmocka_unit_test(test_sse_overlong),
        cmocka_unit_test(test_event_kind),
        cmocka_unit_test(test_execute_body),
        cmocka_unit_test(test_reconcile),
        cmocka_unit_test(test_result_event),
        cmocka_unit_test(test_session_unsupported),
        cmocka_unit_test(test_tool_owned),
        cmocka_unit_test_setup(test_hook_hmac_known_answer, hook_setup),
        cmocka_unit_test(test_hook_key),
        cmocka_unit_test(test_hook_headers),
        cmocka_unit_test_setup(test_hook_verify, hook_setup),
        cmocka_unit_test_setup(test_hook_timestamps, hook_setup),
        cmocka_unit_test_setup(test_hook_replay, hook_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
