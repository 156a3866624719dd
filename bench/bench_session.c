/* SPDX-License-Identifier: MIT */
/* Sessions benchmark: a libcurl client on gloveboxd's admin socket (HTTP/1.1, one keep-alive
 * connection, as bench_api.c), each measurement interleaved run by run with a peer on the
 * same daemon:
 *
 *   bash       POST /v1/sessions/{id}/execute bash {"command":"true"} -> 200, is_error false
 *              vs  POST /v1/sandboxes/{sb}/exec {"cmd":["true"],"wait":true} on the session's
 *              own sandbox (native exec, one JSON ExecResult)
 *   replay     the same execute again with a tool_use_id that has a result (Glovebox-Replayed:
 *              true, nothing runs)  vs  GET /healthz (the HTTP floor)
 *   read       read of a 200 KiB text file (the text cap, GBX_TOOL_TEXT_MAX, is 256 KiB of the
 *              whole file, view_range or not: a 1 MiB text file is refused, checked here) and
 *              read of a 1 MiB .png (an image block, base64 in the JSON)  vs  GET
 *              /v1/sandboxes/{sb}/files?path=... of the same file
 *   replace    DELETE /v1/sandboxes/{sb} (not timed), then the next execute (bash true, or glob:
 *              no shell, no checkpoint after it) creates a sandbox, restores the workspace and
 *              runs; with an empty workspace and with FILES files of FILE_BYTES written by bash
 *              before  vs  POST /v1/sandboxes {} (the delete not timed); and the first bash true
 *              of a new session (the shell's start, no replacement)
 *
 * Usage: bench_session --socket PATH [--runs N] [--image-runs N] [--replace-runs N]
 *                      [--files N] [--file-bytes B]
 * Defaults: 1000 round trips, 100 image reads (each result, 1.4 MB of base64, is kept in the
 * session's log), 20 replacements, 100 files of 100000 bytes (10 MB). */
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/mem.h"
#include "lib/client.h"

/* ---- the API ------------------------------------------------------------------------------- */

struct session {
    char *id;
    char *sandbox; /* as of the last session_refresh */
};

static void session_create(struct client *c, struct session *s)
{
    if (call(c, "POST", "/v1/sessions", "{}") < 0 || c->code != 201)
        die("POST /v1/sessions: %s", what_failed(c));
    json_t *j = json_loads(c->body, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *sb = json_string_value(json_object_get(j, "sandbox_id"));
    const char *wd = json_string_value(json_object_get(j, "workdir"));
    if (id == NULL || sb == NULL || wd == NULL || strcmp(wd, "/workspace") != 0)
        die("POST /v1/sessions: unexpected reply %.300s", c->body);
    s->id = gbx_xstrdup(id);
    s->sandbox = gbx_xstrdup(sb);
    json_decref(j);
}

/* the session's live sandbox id, from GET /v1/sessions/{id} */
static void session_refresh(struct client *c, struct session *s)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sessions/%s", s->id);
    if (call(c, "GET", path, NULL) < 0 || c->code != 200)
        die("GET %s: %s", path, what_failed(c));
    json_t *j = json_loads(c->body, 0, NULL);
    const char *sb = json_string_value(json_object_get(j, "sandbox_id"));
    if (sb == NULL)
        die("GET %s: no live sandbox: %.300s", path, c->body);
    free(s->sandbox);
    s->sandbox = gbx_xstrdup(sb);
    json_decref(j);
}

static void session_delete(struct client *c, struct session *s)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sessions/%s", s->id);
    if (call(c, "DELETE", path, NULL) < 0 || c->code != 204)
        die("DELETE %s: %s", path, what_failed(c));
    free(s->id);
    free(s->sandbox);
    memset(s, 0, sizeof(*s));
}

static void sandbox_delete(struct client *c, const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    if (call(c, "DELETE", path, NULL) < 0 || c->code != 204)
        die("DELETE %s: %s", path, what_failed(c));
}

/* An execute request body, built before the clock starts: {tool_use_id, name, input}; input
 * is a JSON object given as text. malloc'd. */
static char *exec_body(const char *tuid, const char *name, const char *input)
{
    json_t *in = json_loads(input, 0, NULL);
    if (in == NULL)
        die("bad input JSON %s", input);
    json_t *j = json_pack("{s:s,s:s,s:o}", "tool_use_id", tuid, "name", name, "input", in);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

static char *execute_path(const struct session *s)
{
    return gbx_asprintf("/v1/sessions/%s/execute", s->id);
}

/* POST execute; 200 or die. The parsed result is returned (caller decrefs). */
static json_t *execute(struct client *c, const char *path, const char *body)
{
    if (call(c, "POST", path, body) < 0 || c->code != 200)
        die("POST %s %.200s: %s", path, body, what_failed(c));
    json_t *j = json_loads(c->body, 0, NULL);
    if (j == NULL || !json_is_array(json_object_get(j, "content")))
        die("POST %s: not a tool result: %.300s", path, c->body);
    return j;
}

static int is_error(json_t *r)
{
    return json_is_true(json_object_get(r, "is_error"));
}

/* the text of content block i, or "" */
static const char *block_text(json_t *r, size_t i)
{
    return json_string_value(
               json_object_get(json_array_get(json_object_get(r, "content"), i), "text"))
               ?: "";
}

/* execute a setup command (bash) and die unless it succeeds */
static void setup_bash(struct client *c, const struct session *s, const char *tuid,
                       const char *command)
{
    json_t *in = json_pack("{s:s}", "command", command);
    json_t *j = json_pack("{s:s,s:s,s:o}", "tool_use_id", tuid, "name", "bash", "input", in);
    gbx_autofree char *body = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    gbx_autofree char *path = execute_path(s);
    json_t *r = execute(c, path, body);
    if (is_error(r))
        die("setup '%s' failed: %.300s", command, c->body);
    json_decref(r);
}

/* native exec of true with wait: 0 when exit_code is 0 */
static int native_exec_true(struct client *c, const char *path)
{
    if (call(c, "POST", path, "{\"cmd\":[\"true\"],\"wait\":true}") < 0 || c->code != 200)
        return -1;
    json_t *j = json_loads(c->body, 0, NULL);
    json_t *ec = json_object_get(j, "exit_code");
    int ok = ec && json_integer_value(ec) == 0;
    json_decref(j);
    return ok ? 0 : -1;
}

/* ---- the measurements ------------------------------------------------------------------------ */

struct opts {
    const char *sock;
    int runs, image_runs, replace_runs, files;
    long file_bytes;
};

static void bench_bash_and_replay(struct client *c, const struct session *s, int n)
{
    printf("== session execute round trip: bash true vs the native exec API, interleaved\n");
    gbx_autofree char *path = execute_path(s);
    gbx_autofree char *xpath = gbx_asprintf("/v1/sandboxes/%s/exec", s->sandbox);
    char tuid[64];
    for (int i = 0; i < 10; i++) { /* warm up: the shell starts on the first call */
        snprintf(tuid, sizeof(tuid), "warm-%d", i);
        gbx_autofree char *body = exec_body(tuid, "bash", "{\"command\":\"true\"}");
        json_decref(execute(c, path, body));
        if (native_exec_true(c, xpath) < 0)
            die("exec true: %s", what_failed(c));
    }
    double *a = gbx_xcalloc((size_t)n, sizeof(double));
    double *b = gbx_xcalloc((size_t)n, sizeof(double));
    char **bodies = gbx_xcalloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) {
        snprintf(tuid, sizeof(tuid), "rt-%d", i);
        bodies[i] = exec_body(tuid, "bash", "{\"command\":\"true\"}");
        double t0 = now_us();
        json_t *r = execute(c, path, bodies[i]);
        a[i] = now_us() - t0;
        if (is_error(r) || c->replayed)
            die("bash true #%d: %.300s (replayed %d)", i, c->body, c->replayed);
        json_decref(r);
        t0 = now_us();
        if (native_exec_true(c, xpath) < 0)
            die("exec true: %s", what_failed(c));
        b[i] = now_us() - t0;
    }
    double p50 = line("execute bash true", a, n, "[tool.call + tool.result logged]");
    double q50 = line("peer: exec {\"cmd\":[\"true\"],\"wait\":true}", b, n, "[same sandbox]");
    ratio("execute bash true / native exec", p50, q50);
    target_ms("execute bash true", p50, 2.0);

    printf("== idempotent replay: the same %d executes again (Glovebox-Replayed: true) vs GET "
           "/healthz, interleaved\n",
           n);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        json_t *r = execute(c, path, bodies[i]);
        a[i] = now_us() - t0;
        if (!c->replayed || is_error(r))
            die("replay #%d was not replayed: %.300s", i, c->body);
        json_decref(r);
        t0 = now_us();
        if (call(c, "GET", "/healthz", NULL) < 0 || c->code != 200)
            die("GET /healthz: %s", what_failed(c));
        b[i] = now_us() - t0;
    }
    p50 = line("execute, replayed", a, n, "[nothing runs]");
    q50 = line("peer: GET /healthz", b, n, "[the HTTP floor]");
    ratio("replay / HTTP floor", p50, q50);
    for (int i = 0; i < n; i++)
        free(bodies[i]);
    free(bodies);
    free(a);
    free(b);
}

/* read FILE n times (unique tool_use_ids) vs GET .../files?path=/workspace/FILE; every result
 * is checked for `expect` bytes of text, or of base64 for an image */
static void bench_read_one(struct client *c, const struct session *s, const char *label,
                           const char *file, long expect, int image, int n)
{
    gbx_autofree char *path = execute_path(s);
    gbx_autofree char *fpath =
        gbx_asprintf("/v1/sandboxes/%s/files?path=/workspace/%s", s->sandbox, file);
    gbx_autofree char *input = gbx_asprintf("{\"file_path\":\"%s\"}", file);
    double *a = gbx_xcalloc((size_t)n, sizeof(double));
    double *b = gbx_xcalloc((size_t)n, sizeof(double));
    char tuid[64];
    size_t want = image ? (size_t)(expect + 2) / 3 * 4 : (size_t)expect;
    for (int i = -3; i < n; i++) { /* three warm-ups */
        snprintf(tuid, sizeof(tuid), "read-%s-%d", file, i);
        gbx_autofree char *body = exec_body(tuid, "read", input);
        double t0 = now_us();
        json_t *r = execute(c, path, body);
        double t = now_us() - t0;
        json_t *blk = json_array_get(json_object_get(r, "content"), 0);
        size_t got =
            image
                ? strlen(json_string_value(json_object_get(json_object_get(blk, "source"), "data"))
                             ?: "")
                : strlen(block_text(r, 0));
        if (is_error(r) || got != want)
            die("read %s: %zu bytes, not %zu: %.300s", file, got, want, c->body);
        json_decref(r);
        t0 = now_us();
        if (call(c, "GET", fpath, NULL) < 0 || c->code != 200 || c->len != (size_t)expect)
            die("GET %s: %zu bytes: %s", fpath, c->len, what_failed(c));
        if (i >= 0) {
            a[i] = t;
            b[i] = now_us() - t0;
        }
    }
    char name[96];
    snprintf(name, sizeof(name), "execute read, %s", label);
    double p50 = line(name, a, n, image ? "[one image block, base64]" : "[one text block]");
    double q50 = line("peer: GET .../files?path= (download)", b, n, "[the raw bytes]");
    ratio("read / files download", p50, q50);
    free(a);
    free(b);
}

static void bench_read(struct client *c, const struct session *s, const struct opts *o)
{
    printf("== read tool vs the files API download of the same file, interleaved\n");
    /* text: ASCII lines of base64, exactly 200 KiB; the image: PNG magic + random bytes, 1 MiB;
     * the 1 MiB text file shows the cap */
    setup_bash(c, s, "setup-read",
               "set -e; base64 -w 76 </dev/urandom | head -c 204800 >read200k.txt; "
               "base64 -w 76 </dev/urandom | head -c 1048576 >read1m.txt; "
               "{ printf '\\211PNG\\r\\n\\032\\n'; head -c 1048568 /dev/urandom; } >read1m.png");
    gbx_autofree char *path = execute_path(s);
    gbx_autofree char *body =
        exec_body("read-cap", "read", "{\"file_path\":\"read1m.txt\",\"view_range\":[1,10]}");
    json_t *r = execute(c, path, body);
    printf("  %-44s %s: %.160s\n", "read of a 1 MiB text file, view_range [1,10]",
           is_error(r) ? "refused" : "ACCEPTED", block_text(r, 0));
    json_decref(r);
    bench_read_one(c, s, "200 KiB text file", "read200k.txt", 204800, 0, o->runs);
    bench_read_one(c, s, "1 MiB .png file", "read1m.png", 1048576, 1, o->image_runs);
}

/* n replacements of s's sandbox: delete it, time the next execute (bash true or glob) and,
 * interleaved, a plain sandbox create (b, when not NULL); a[] gets the executes */
static void replace_loop(struct client *c, struct session *s, const char *tool, int n, double *a,
                         double *b)
{
    gbx_autofree char *path = execute_path(s);
    const char *input =
        strcmp(tool, "bash") == 0 ? "{\"command\":\"true\"}" : "{\"pattern\":\"*.none\"}";
    char tuid[64];
    static int seq;
    for (int i = 0; i < n; i++) {
        session_refresh(c, s);
        sandbox_delete(c, s->sandbox);
        snprintf(tuid, sizeof(tuid), "replace-%d", seq++);
        gbx_autofree char *body = exec_body(tuid, tool, input);
        double t0 = now_us();
        json_t *r = execute(c, path, body);
        a[i] = now_us() - t0;
        if (is_error(r) || strstr(block_text(r, 0), "sandbox was gone") == NULL)
            die("%s after the delete: not a replacement: %.300s", tool, c->body);
        json_decref(r);
        if (b == NULL)
            continue;
        t0 = now_us();
        if (call(c, "POST", "/v1/sandboxes", "{}") < 0 || c->code != 201)
            die("POST /v1/sandboxes: %s", what_failed(c));
        b[i] = now_us() - t0;
        json_t *j = json_loads(c->body, 0, NULL);
        const char *id = json_string_value(json_object_get(j, "id"));
        if (id == NULL)
            die("POST /v1/sandboxes: no id: %.300s", c->body);
        sandbox_delete(c, id);
        json_decref(j);
    }
}

static void bench_replace(struct client *c, const struct opts *o)
{
    int n = o->replace_runs;
    double mb = (double)o->files * (double)o->file_bytes / 1e6;
    printf("== sandbox replacement: DELETE the session's sandbox, then time the next execute "
           "(create + restore + run) vs POST /v1/sandboxes {}\n");
    double *a = gbx_xcalloc((size_t)n, sizeof(double));
    double *b = gbx_xcalloc((size_t)n, sizeof(double));
    char name[128];

    struct session e;
    session_create(c, &e);
    replace_loop(c, &e, "bash", 2, a, NULL); /* warm up */
    replace_loop(c, &e, "bash", n, a, b);
    double empty50 = line("replacement, empty workspace: bash true", a, n, NULL);
    double create50 = line("peer: POST /v1/sandboxes {}", b, n, "[the delete not timed]");
    replace_loop(c, &e, "glob", n, a, NULL);
    double eglob50 =
        line("replacement, empty workspace: glob", a, n, "[no shell start, no checkpoint after]");
    session_delete(c, &e);

    struct session l;
    session_create(c, &l);
    gbx_autofree char *mk = gbx_asprintf(
        "set -e; for i in $(seq %d); do base64 -w 76 </dev/urandom | head -c %ld >f$i.txt; done",
        o->files, o->file_bytes);
    setup_bash(c, &l, "setup-files", mk); /* the checkpoint reads them back before the reply */
    double *a2 = gbx_xcalloc((size_t)n, sizeof(double));
    replace_loop(c, &l, "bash", n, a2, NULL);
    snprintf(name, sizeof(name), "replacement, %d files / %.1f MB: bash true", o->files, mb);
    double full50 = line(name, a2, n, NULL);
    replace_loop(c, &l, "glob", n, a, NULL);
    snprintf(name, sizeof(name), "replacement, %d files / %.1f MB: glob", o->files, mb);
    double fglob50 = line(name, a, n, "[no shell start, no checkpoint after]");
    /* the files came back: count them and their bytes */
    {
        gbx_autofree char *path = execute_path(&l);
        gbx_autofree char *body =
            exec_body("replace-check", "bash", "{\"command\":\"ls | wc -l; cat f*.txt | wc -c\"}");
        json_t *r = execute(c, path, body);
        long nf = 0, nb = 0;
        if (is_error(r) || sscanf(block_text(r, 0), "%ld %ld", &nf, &nb) != 2 || nf != o->files ||
            nb != o->files * o->file_bytes)
            die("after the replacements the workspace holds %ld files, %ld bytes: %.300s", nf, nb,
                c->body);
        json_decref(r);
        printf("  %-44s %ld files, %ld bytes: all there\n", "workspace after the replacements", nf,
               nb);
    }
    session_delete(c, &l);

    /* the shell's start: the first bash true of a fresh session */
    for (int i = 0; i < n; i++) {
        struct session f;
        session_create(c, &f);
        gbx_autofree char *path = execute_path(&f);
        gbx_autofree char *body = exec_body("first", "bash", "{\"command\":\"true\"}");
        double t0 = now_us();
        json_t *r = execute(c, path, body);
        a[i] = now_us() - t0;
        if (is_error(r))
            die("first bash true: %.300s", c->body);
        json_decref(r);
        session_delete(c, &f);
    }
    line("first bash true of a new session", a, n, "[shell start, no replacement]");

    ratio("replacement (empty) / plain create", empty50, create50);
    snprintf(name, sizeof(name), "replacement (%.0f MB) / plain create", mb);
    ratio(name, full50, create50);
    target_ms("replacement, empty workspace", empty50, 50.0);
    printf("  %-44s +%.1f ms over empty for %.1f MB: %.0f MB/s (restore, and after bash the "
           "checkpoint reading them back)\n",
           "restore cost (bash true)", full50 - empty50, mb,
           full50 > empty50 ? mb / ((full50 - empty50) / 1e3) : 0);
    printf("  %-44s +%.1f ms over empty for %.1f MB: %.0f MB/s\n",
           "restore cost (glob: the restore alone)", fglob50 - eglob50, mb,
           fglob50 > eglob50 ? mb / ((fglob50 - eglob50) / 1e3) : 0);
    free(a);
    free(a2);
    free(b);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'},
        {"runs", required_argument, NULL, 'n'},
        {"image-runs", required_argument, NULL, 'i'},
        {"replace-runs", required_argument, NULL, 'r'},
        {"files", required_argument, NULL, 'f'},
        {"file-bytes", required_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {
        .runs = 1000, .image_runs = 100, .replace_runs = 20, .files = 100, .file_bytes = 100000};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            o.sock = optarg;
            break;
        case 'n':
            o.runs = atoi(optarg);
            break;
        case 'i':
            o.image_runs = atoi(optarg);
            break;
        case 'r':
            o.replace_runs = atoi(optarg);
            break;
        case 'f':
            o.files = atoi(optarg);
            break;
        case 'b':
            o.file_bytes = atol(optarg);
            break;
        default:
            fprintf(stderr, "usage: bench_session --socket PATH [--runs N] [--image-runs N] "
                            "[--replace-runs N] [--files N] [--file-bytes B]\n");
            return 2;
        }
    }
    if (o.sock == NULL) {
        fprintf(stderr, "bench_session: --socket is needed\n");
        return 2;
    }
    if (o.runs < 10)
        o.runs = 10;
    if (o.image_runs < 5)
        o.image_runs = 5;
    if (o.replace_runs < 5)
        o.replace_runs = 5;
    if (o.files < 1 || o.file_bytes < 1)
        die("--files and --file-bytes must be positive");
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct client c;
    client_init(&c, o.sock);
    struct session s;
    session_create(&c, &s);
    bench_bash_and_replay(&c, &s, o.runs);
    fflush(stdout);
    bench_read(&c, &s, &o);
    fflush(stdout);
    session_delete(&c, &s);
    bench_replace(&c, &o);
    client_release(&c);
    curl_global_cleanup();
    return 0;
}
