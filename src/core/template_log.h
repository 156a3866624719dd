/* SPDX-License-Identifier: MIT */
/* A template build's progress as the templates service (core/templates.h) keeps it: the last
 * progress (phase, package, step of total, line) for GET, and the events of the build, kept
 * for late watchers (the first GBX_TLOG_MAX; the rest only counted). The worker thread writes,
 * the loop reads, under the log's mutex. And the events themselves: a progress line, and the
 * last event of a build. Pure (no loop, no server), so it is in the library and unit-tested
 * (tests/unit/test_templates.c). */
#ifndef GBX_CORE_TEMPLATE_LOG_H
#define GBX_CORE_TEMPLATE_LOG_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>

struct gbx_err;

#define GBX_TLOG_MAX 5000 /* events kept per build (the rest only counted) */

struct gbx_tlog {
    pthread_mutex_t mu;
    char phase[32], package[128], line[256];
    unsigned step, total;
    char **events; /* compact JSON texts, in order */
    size_t nevents, dropped;
};

void gbx_tlog_init(struct gbx_tlog *g);
void gbx_tlog_release(struct gbx_tlog *g);
/* Append an event (stolen); any thread. */
void gbx_tlog_push(struct gbx_tlog *g, json_t *ev);
/* Set the progress and append its event {type "progress", phase, step, total, package?,
 * line?} (package and line may be NULL or ""); any thread. */
void gbx_tlog_progress(struct gbx_tlog *g, const char *phase, const char *package, unsigned step,
                       unsigned total, const char *line);
/* The last progress as {phase, step, total, package?, line?}, or NULL before any. */
json_t *gbx_tlog_progress_json(struct gbx_tlog *g);
/* Call fn for each event from index from on, in order, under the mutex (fn must not call
 * back into the log). Returns the index after the last: where the next call starts. */
size_t gbx_tlog_each(struct gbx_tlog *g, size_t from, void (*fn)(void *arg, const json_t *ev),
                     void *arg);

/* A build's last event: {type "done", state "ready", name (as shown)}, or when it failed
 * {type "error", state "failed", name, message?, kind?} (err may be NULL). Also what is said
 * of a template that was not built by this daemon (failed 0, err NULL). */
json_t *gbx_tlog_end_event(const char *stored, int failed, const struct gbx_err *err);

#endif
