/* SPDX-License-Identifier: MIT */
/* A template build's progress and events (see template_log.h). Events are kept as compact
 * JSON text, not as jansson values: a Debian build has thousands of lines, and text is a
 * fraction of the memory; a watcher gets each parsed back, the same value. */
#include "core/template_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/jsontext.h"
#include "base/mem.h"
#include "sandbox/template.h"

void gbx_tlog_init(struct gbx_tlog *g)
{
    memset(g, 0, sizeof(*g));
    pthread_mutex_init(&g->mu, NULL);
}

void gbx_tlog_release(struct gbx_tlog *g)
{
    for (size_t i = 0; i < g->nevents; i++)
        free(g->events[i]);
    free(g->events);
    g->events = NULL;
    g->nevents = 0;
    pthread_mutex_destroy(&g->mu);
}

void gbx_tlog_push(struct gbx_tlog *g, json_t *ev)
{
    char *t = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (t == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    if (g->nevents >= GBX_TLOG_MAX) {
        g->dropped++;
        free(t);
    } else {
        g->events = gbx_xrealloc(g->events, (g->nevents + 1) * sizeof(char *));
        g->events[g->nevents++] = t;
    }
    pthread_mutex_unlock(&g->mu);
}

void gbx_tlog_progress(struct gbx_tlog *g, const char *phase, const char *package, unsigned step,
                       unsigned total, const char *line)
{
    pthread_mutex_lock(&g->mu);
    snprintf(g->phase, sizeof(g->phase), "%s", phase);
    snprintf(g->package, sizeof(g->package), "%s", package ? package : "");
    snprintf(g->line, sizeof(g->line), "%s", line ? line : "");
    g->step = step;
    g->total = total;
    pthread_mutex_unlock(&g->mu);
    json_t *ev = json_pack("{s:s,s:s,s:I,s:I}", "type", "progress", "phase", phase, "step",
                           (json_int_t)step, "total", (json_int_t)total);
    if (package && package[0])
        json_object_set_new(ev, "package", gbx_json_text(package));
    if (line && line[0])
        json_object_set_new(ev, "line", gbx_json_text(line));
    gbx_tlog_push(g, ev);
}

json_t *gbx_tlog_progress_json(struct gbx_tlog *g)
{
    json_t *p = NULL;
    pthread_mutex_lock(&g->mu);
    if (g->phase[0]) {
        p = json_pack("{s:s,s:I,s:I}", "phase", g->phase, "step", (json_int_t)g->step, "total",
                      (json_int_t)g->total);
        if (g->package[0])
            json_object_set_new(p, "package", gbx_json_text(g->package));
        if (g->line[0])
            json_object_set_new(p, "line", gbx_json_text(g->line));
    }
    pthread_mutex_unlock(&g->mu);
    return p;
}

size_t gbx_tlog_each(struct gbx_tlog *g, size_t from, void (*fn)(void *arg, const json_t *ev),
                     void *arg)
{
    pthread_mutex_lock(&g->mu);
    size_t i = from;
    for (; i < g->nevents; i++) {
        json_t *ev = json_loads(g->events[i], JSON_DECODE_ANY, NULL);
        if (ev) /* always: it is jansson's own text */
            fn(arg, ev);
        json_decref(ev);
    }
    pthread_mutex_unlock(&g->mu);
    return i;
}

json_t *gbx_tlog_end_event(const char *stored, int failed, const struct gbx_err *err)
{
    json_t *ev =
        json_pack("{s:s,s:s,s:s%}", "type", failed ? "error" : "done", "state",
                  failed ? "failed" : "ready", "name", stored, gbx_template_shown_len(stored));
    if (failed && err) {
        json_object_set_new(ev, "message", gbx_json_text(err->msg));
        json_object_set_new(ev, "kind", json_string(gbx_err_kind_name(err->kind)));
    }
    return ev;
}
