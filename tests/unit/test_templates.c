/* SPDX-License-Identifier: MIT */
/* Unit tests for the pure parts of the templates service: src/core/template_names.c (what a
 * tenant's name means in the store, who sees a stored name, the names a key cannot take, the
 * count of a key's templates on disk, a template's client view) and src/core/template_log.c
 * (a build's progress and events, kept for late watchers, and their JSON). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/err.h"
#include "base/fileutil.h"
#include "base/jsontext.h"
#include "core/actor.h"
#include "core/template_log.h"
#include "core/template_names.h"
#include "sandbox/template.h"

/* ---- names -------------------------------------------------------------------------------- */

static const struct gbx_actor admin = {.admin = 1, .owner = "", .name = "admin"};
static const struct gbx_actor k1 = {.admin = 0, .owner = "k1", .name = "k1"};
static const struct gbx_actor k2 = {.admin = 0, .owner = "k2", .name = "k2"};
static const struct gbx_actor nobody = {.admin = 0, .owner = "", .name = ""};

static void test_visible(void **state)
{
    (void)state;
    /* shared: everyone's, even an actor with no key */
    assert_true(gbx_templates_visible(&admin, "py"));
    assert_true(gbx_templates_visible(&k1, "py"));
    assert_true(gbx_templates_visible(&nobody, "py"));
    /* a key's own: its key's and the admin's, no one else's */
    assert_true(gbx_templates_visible(&k1, "py@k1"));
    assert_false(gbx_templates_visible(&k2, "py@k1"));
    assert_false(gbx_templates_visible(&nobody, "py@k1"));
    assert_true(gbx_templates_visible(&admin, "py@k1"));
}

/* The stored names that exist, and the names asked about. */
struct store {
    const char *const *have;
    char asked[8][128];
    int n;
};

static int exists(void *arg, const char *stored)
{
    struct store *st = arg;
    if (st->n < 8)
        snprintf(st->asked[st->n++], sizeof(st->asked[0]), "%s", stored);
    for (size_t i = 0; st->have[i]; i++)
        if (strcmp(st->have[i], stored) == 0)
            return 1;
    return 0;
}

static void test_ref(void **state)
{
    (void)state;
    static const char *const have[] = {"py", "py@k1", "node@k2", NULL};
    struct store st = {.have = have};
    char *r;
    /* a key's own comes before the shared one of the same name */
    r = gbx_template_ref_of(&k1, "py", exists, &st);
    assert_string_equal(r, "py@k1");
    free(r);
    assert_int_equal(st.n, 1);
    assert_string_equal(st.asked[0], "py@k1");
    /* no own one: the shared name (whether or not it exists) */
    r = gbx_template_ref_of(&k2, "py", exists, &st);
    assert_string_equal(r, "py");
    free(r);
    r = gbx_template_ref_of(&k1, "ruby", exists, &st);
    assert_string_equal(r, "ruby");
    free(r);
    /* another key's template is not reached by its NAME */
    r = gbx_template_ref_of(&k1, "node", exists, &st);
    assert_string_equal(r, "node");
    free(r);
    r = gbx_template_ref_of(&k2, "node", exists, &st);
    assert_string_equal(r, "node@k2");
    free(r);
    /* the admin's names, a name that says whose, and an actor with no key: as they are, and
     * nothing is looked up */
    st.n = 0;
    r = gbx_template_ref_of(&admin, "py", exists, &st);
    assert_string_equal(r, "py");
    free(r);
    r = gbx_template_ref_of(&admin, "node@k2", exists, &st);
    assert_string_equal(r, "node@k2");
    free(r);
    r = gbx_template_ref_of(&k1, "node@k2", exists, &st);
    assert_string_equal(r, "node@k2");
    free(r);
    r = gbx_template_ref_of(&nobody, "py", exists, &st);
    assert_string_equal(r, "py");
    free(r);
    assert_int_equal(st.n, 0);
}

static void test_stored_for_and_reserved(void **state)
{
    (void)state;
    char *n = gbx_template_stored_for(&k1, "py");
    assert_string_equal(n, "py@k1");
    assert_int_equal(gbx_template_name_valid(n), 0);
    assert_string_equal(gbx_template_owner(n), "k1");
    free(n);
    n = gbx_template_stored_for(&admin, "py");
    assert_string_equal(n, "py");
    assert_string_equal(gbx_template_owner(n), "");
    free(n);
    assert_true(gbx_template_name_reserved("host"));
    assert_true(gbx_template_name_reserved("base"));
    assert_true(gbx_template_name_reserved("default"));
    assert_true(gbx_template_name_reserved("code-interpreter-v1"));
    assert_false(gbx_template_name_reserved("python"));
    assert_false(gbx_template_name_reserved("hosts"));
}

static void mkdir_in(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_int_equal(mkdir(p, 0700), 0);
}

static void test_count_dir(void **state)
{
    (void)state;
    char dir[] = "/tmp/gbx-test-templates-XXXXXX";
    assert_non_null(mkdtemp(dir));
    mkdir_in(dir, "py");
    mkdir_in(dir, "node");
    mkdir_in(dir, "py@k1");
    mkdir_in(dir, "go@k1");
    mkdir_in(dir, "py@k2");
    mkdir_in(dir, ".build.rs@k1.123.0"); /* staging and trash trees are not templates */
    mkdir_in(dir, ".trash.py@k1.9");
    mkdir_in(dir, "Not_A_Name@k1");
    assert_int_equal(gbx_template_count_dir(dir, "k1"), 2);
    assert_int_equal(gbx_template_count_dir(dir, "k2"), 1);
    assert_int_equal(gbx_template_count_dir(dir, "k3"), 0);
    assert_int_equal(gbx_template_count_dir(dir, ""), 2); /* the shared ones */
    assert_int_equal(gbx_rm_rf(dir), 0);
    assert_int_equal(gbx_template_count_dir(dir, "k1"), 0); /* a state dir with none yet */
}

static void test_info_json(void **state)
{
    (void)state;
    char name[] = "py@k1", desc[] = "caf\xe9 latte" /* Latin-1: not UTF-8 */,
         source[] = "snapshot:snap-0123", created[] = "2024-05-01T10:00:00Z",
         start[] = "python3 -m http.server", cmd[] = "[\"python3\"]", env[] = "not json";
    struct gbx_template_info i = {
        .name = name,
        .description = desc,
        .source = source,
        .created = created,
        .start = start,
        .oci_cmd = cmd,
        .oci_env = env,
        .format = 2,
        .generated = 1,
        .size_bytes = 4096,
    };
    json_t *j = gbx_template_info_json(&k1, &i);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "py"); /* as shown */
    assert_string_equal(json_string_value(json_object_get(j, "state")), "ready");
    assert_int_equal(json_integer_value(json_object_get(j, "format")), 2);
    assert_true(json_is_false(json_object_get(j, "usr_host")));
    assert_true(json_is_false(json_object_get(j, "shared")));
    assert_string_equal(json_string_value(json_object_get(j, "owner")), "k1");
    assert_string_equal(json_string_value(json_object_get(j, "description")),
                        "caf\xef\xbf\xbd latte");
    /* a key is not told which snapshot it was made from; the admin is */
    assert_string_equal(json_string_value(json_object_get(j, "source")), "snapshot");
    assert_int_equal(json_integer_value(json_object_get(j, "size_bytes")), 4096);
    assert_null(json_object_get(j, "generated"));
    assert_string_equal(json_string_value(json_object_get(j, "start")), "python3 -m http.server");
    assert_null(json_object_get(j, "ready"));
    json_t *oci = json_object_get(j, "oci");
    assert_int_equal(json_object_size(oci), 1); /* env was not JSON: left out */
    assert_string_equal(json_string_value(json_array_get(json_object_get(oci, "cmd"), 0)),
                        "python3");
    json_decref(j);

    j = gbx_template_info_json(&admin, &i);
    assert_string_equal(json_string_value(json_object_get(j, "source")), "snapshot:snap-0123");
    json_decref(j);

    /* the built-in one before its first use: shared, no size yet, no oci */
    char host_name[] = "host";
    struct gbx_template_info host = {.name = host_name, .source = host_name, .usr_host = 1};
    j = gbx_template_info_json(&k2, &host);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "host");
    assert_true(json_is_true(json_object_get(j, "shared")));
    assert_null(json_object_get(j, "owner"));
    assert_true(json_is_true(json_object_get(j, "usr_host")));
    assert_true(json_is_false(json_object_get(j, "generated")));
    assert_null(json_object_get(j, "size_bytes"));
    assert_null(json_object_get(j, "oci"));
    assert_null(json_object_get(j, "description"));
    json_decref(j);
}

/* ---- progress and events ------------------------------------------------------------------ */

struct seen {
    char *lines[16];
    size_t n;
};

static void collect(void *arg, const json_t *ev)
{
    struct seen *s = arg;
    if (s->n < 16)
        s->lines[s->n++] = json_dumps(ev, JSON_COMPACT);
}

static void seen_clear(struct seen *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->lines[i]);
    s->n = 0;
}

static void test_tlog_progress(void **state)
{
    (void)state;
    struct gbx_tlog g;
    gbx_tlog_init(&g);
    assert_null(gbx_tlog_progress_json(&g)); /* nothing to say before the first */
    gbx_tlog_progress(&g, "queued", NULL, 0, 0, NULL);
    gbx_tlog_progress(&g, "unpack", "libc6", 3, 40, "Unpacking libc6 \xff");
    json_t *p = gbx_tlog_progress_json(&g);
    assert_non_null(p);
    assert_string_equal(json_string_value(json_object_get(p, "phase")), "unpack");
    assert_int_equal(json_integer_value(json_object_get(p, "step")), 3);
    assert_int_equal(json_integer_value(json_object_get(p, "total")), 40);
    assert_string_equal(json_string_value(json_object_get(p, "package")), "libc6");
    assert_string_equal(json_string_value(json_object_get(p, "line")),
                        "Unpacking libc6 \xef\xbf\xbd");
    json_decref(p);
    /* the last progress replaces the one before: no stale package or line */
    gbx_tlog_progress(&g, "configure", "", 4, 40, "");
    p = gbx_tlog_progress_json(&g);
    assert_string_equal(json_string_value(json_object_get(p, "phase")), "configure");
    assert_null(json_object_get(p, "package"));
    assert_null(json_object_get(p, "line"));
    json_decref(p);

    /* every event is kept, in order, each exactly the line a stream writes */
    struct seen s = {0};
    assert_int_equal(gbx_tlog_each(&g, 0, collect, &s), 3);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.lines[0],
                        "{\"type\":\"progress\",\"phase\":\"queued\",\"step\":0,\"total\":0}");
    assert_string_equal(s.lines[1],
                        "{\"type\":\"progress\",\"phase\":\"unpack\",\"step\":3,\"total\":40,"
                        "\"package\":\"libc6\",\"line\":\"Unpacking libc6 \xef\xbf\xbd\"}");
    assert_string_equal(s.lines[2],
                        "{\"type\":\"progress\",\"phase\":\"configure\",\"step\":4,\"total\":40}");
    for (size_t i = 0; i < 3; i++) /* a watcher gets the value the log kept, byte for byte */
        assert_string_equal(s.lines[i], g.events[i]);
    seen_clear(&s);
    /* a watcher picks up where it left off */
    gbx_tlog_push(&g, gbx_tlog_end_event("py@k1", 0, NULL));
    assert_int_equal(gbx_tlog_each(&g, 3, collect, &s), 4);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.lines[0], "{\"type\":\"done\",\"state\":\"ready\",\"name\":\"py\"}");
    seen_clear(&s);
    assert_int_equal(gbx_tlog_each(&g, 4, collect, &s), 4); /* nothing new */
    assert_int_equal(s.n, 0);
    gbx_tlog_release(&g);
}

static void test_end_event(void **state)
{
    (void)state;
    struct gbx_err *err = NULL;
    gbx_err_set(&err, ETIMEDOUT, GBX_ERR_UNAVAILABLE, "the build did not finish");
    json_t *ev = gbx_tlog_end_event("deb@k2", 1, err);
    char *t = json_dumps(ev, JSON_COMPACT);
    assert_string_equal(t, "{\"type\":\"error\",\"state\":\"failed\",\"name\":\"deb\",\"message\":"
                           "\"the build did not finish\",\"kind\":\"unavailable\"}");
    free(t);
    json_decref(ev);
    gbx_err_free(err);
    /* failed without a reason: no message */
    ev = gbx_tlog_end_event("deb", 1, NULL);
    t = json_dumps(ev, JSON_COMPACT);
    assert_string_equal(t, "{\"type\":\"error\",\"state\":\"failed\",\"name\":\"deb\"}");
    free(t);
    json_decref(ev);
}

static void test_tlog_cap(void **state)
{
    (void)state;
    struct gbx_tlog g;
    gbx_tlog_init(&g);
    for (int i = 0; i < GBX_TLOG_MAX + 7; i++)
        gbx_tlog_push(&g, json_pack("{s:i}", "i", i));
    assert_int_equal(g.nevents, GBX_TLOG_MAX);
    assert_int_equal(g.dropped, 7);
    assert_string_equal(g.events[0], "{\"i\":0}");
    char last[32];
    snprintf(last, sizeof(last), "{\"i\":%d}", GBX_TLOG_MAX - 1);
    assert_string_equal(g.events[GBX_TLOG_MAX - 1], last); /* the first ones are kept */
    gbx_tlog_release(&g);
}

/* A worker writes while the loop reads: nothing is lost or torn, and each writer's events keep
 * their order. */
#define PER_THREAD 1000

struct writer {
    struct gbx_tlog *g;
    int id;
};

static void *write_events(void *arg)
{
    struct writer *w = arg;
    for (int i = 0; i < PER_THREAD; i++)
        gbx_tlog_push(w->g, json_pack("{s:i,s:i}", "w", w->id, "i", i));
    return NULL;
}

struct order {
    int next[2];
    size_t n;
    int bad;
};

static void check_order(void *arg, const json_t *ev)
{
    struct order *o = arg;
    int w = (int)json_integer_value(json_object_get(ev, "w"));
    int i = (int)json_integer_value(json_object_get(ev, "i"));
    if (w < 0 || w > 1 || o->next[w] != i)
        o->bad++;
    else
        o->next[w]++;
    o->n++;
}

static void test_tlog_threads(void **state)
{
    (void)state;
    struct gbx_tlog g;
    gbx_tlog_init(&g);
    struct writer w[2] = {{&g, 0}, {&g, 1}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, write_events, &w[i]), 0);
    struct order o = {{0, 0}, 0, 0};
    size_t from = 0;
    while (from < 2 * PER_THREAD) /* the loop's side: read what is there, again and again */
        from = gbx_tlog_each(&g, from, check_order, &o);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(o.bad, 0);
    assert_int_equal(o.n, 2 * PER_THREAD);
    assert_int_equal(o.next[0], PER_THREAD);
    assert_int_equal(o.next[1], PER_THREAD);
    assert_int_equal(g.dropped, 0);
    gbx_tlog_release(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_visible),
        cmocka_unit_test(test_ref),
        cmocka_unit_test(test_stored_for_and_reserved),
        cmocka_unit_test(test_count_dir),
        cmocka_unit_test(test_info_json),
        cmocka_unit_test(test_tlog_progress),
        cmocka_unit_test(test_end_event),
        cmocka_unit_test(test_tlog_cap),
        cmocka_unit_test(test_tlog_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
