/* SPDX-License-Identifier: MIT */
#include "core/offload.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/sched.h"
#include "base/util.h"

/* The pool grows when a job finds every thread busy (a hung helper holds one until its
 * deadline: the next sandbox's job must not wait behind it), up to MAX_THREADS; threads
 * that stay idle for IDLE_S seconds beyond the first ones end. */
#define MAX_THREADS 64
#define IDLE_S 30

struct job {
    struct job *next;
    gbx_offload_work_fn work;
    gbx_offload_done_fn done;
    void *arg;
};

/* The loop never waits for a worker: jobs are announced with a semaphore (sem_post never
 * blocks, where glibc's pthread_cond_signal can wait for woken waiters under CPU pressure),
 * and the mutex guards a few pointer moves only, no system call. */
struct gbx_offload {
    pthread_mutex_t mu;
    pthread_cond_t cv;             /* gbx_offload_free waits on it for the last thread */
    sem_t work;                    /* one post per queued job (and per thread, when stopping) */
    struct job *todo, **todo_tail; /* FIFO */
    struct job *finished;          /* LIFO; reversed when drained */
    int stopping;
    int efd;
    struct event *ev;
    unsigned nthreads, min_threads;
    atomic_uint idle; /* threads waiting for a job */
};

static void *worker(void *p)
{
    struct gbx_offload *o = p;
    gbx_sched_unboost_self(); /* blocking work runs at the process's priority, below the loop */
    for (;;) {
        atomic_fetch_add(&o->idle, 1);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += IDLE_S;
        int r;
        while ((r = sem_timedwait(&o->work, &until)) < 0 && errno == EINTR)
            ;
        atomic_fetch_sub(&o->idle, 1);
        pthread_mutex_lock(&o->mu);
        if (r < 0) { /* idle that long: end, unless it is one of the kept ones */
            if (o->nthreads > o->min_threads || o->stopping)
                break;
            pthread_mutex_unlock(&o->mu);
            continue;
        }
        struct job *j = o->todo;
        if (j == NULL) { /* the post of a stop */
            if (o->stopping)
                break;
            pthread_mutex_unlock(&o->mu);
            continue;
        }
        o->todo = j->next;
        if (o->todo == NULL)
            o->todo_tail = &o->todo;
        pthread_mutex_unlock(&o->mu);
        j->work(j->arg);
        pthread_mutex_lock(&o->mu);
        j->next = o->finished;
        o->finished = j;
        pthread_mutex_unlock(&o->mu);
        uint64_t one = 1;
        (void)!write(o->efd, &one, sizeof(one));
    }
    o->nthreads--;
    pthread_cond_broadcast(&o->cv); /* gbx_offload_free waits for the last one */
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

/* One more worker (detached: the count, not a join, says when all are gone), already
 * counted in nthreads by the caller. */
static int spawn(struct gbx_offload *o)
{
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int r = pthread_create(&t, &at, worker, o);
    pthread_attr_destroy(&at);
    return -r;
}

static void drain_finished(struct gbx_offload *o)
{
    pthread_mutex_lock(&o->mu);
    struct job *list = o->finished, *rev = NULL;
    o->finished = NULL;
    pthread_mutex_unlock(&o->mu);
    while (list) { /* completions in the order the jobs finished */
        struct job *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    while (rev) {
        struct job *n = rev->next;
        if (rev->done)
            rev->done(rev->arg);
        free(rev);
        rev = n;
    }
}

static void on_event(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    uint64_t n;
    (void)!read(fd, &n, sizeof(n));
    drain_finished(arg);
}

int gbx_offload_new(struct event_base *base, unsigned threads, struct gbx_offload **out)
{
    struct gbx_offload *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return -ENOMEM;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    sem_init(&o->work, 0, 0);
    o->todo_tail = &o->todo;
    o->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (o->efd < 0 ||
        (o->ev = event_new(base, o->efd, EV_READ | EV_PERSIST, on_event, o)) == NULL ||
        event_add(o->ev, NULL) < 0) {
        int e = o->efd < 0 ? -errno : -ENOMEM;
        if (o->ev)
            event_free(o->ev);
        if (o->efd >= 0)
            close(o->efd);
        free(o);
        return e;
    }
    if (threads == 0)
        threads = 2;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    o->min_threads = threads;
    for (unsigned i = 0; i < threads; i++) {
        pthread_mutex_lock(&o->mu);
        o->nthreads++;
        pthread_mutex_unlock(&o->mu);
        if (spawn(o) < 0) {
            pthread_mutex_lock(&o->mu);
            o->nthreads--;
            pthread_mutex_unlock(&o->mu);
            break;
        }
    }
    if (o->nthreads == 0) {
        gbx_offload_free(o);
        return -EAGAIN;
    }
    *out = o;
    return 0;
}

int gbx_offload_submit(struct gbx_offload *o, gbx_offload_work_fn work, gbx_offload_done_fn done,
                       void *arg)
{
    struct job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return -ENOMEM;
    j->work = work;
    j->done = done;
    j->arg = arg;
    pthread_mutex_lock(&o->mu);
    if (o->stopping) {
        pthread_mutex_unlock(&o->mu);
        free(j);
        return -ESHUTDOWN;
    }
    *o->todo_tail = j;
    o->todo_tail = &j->next;
    /* more jobs waiting than threads free to take them: one more thread (at the cap, the
     * job waits for one to be free) */
    unsigned queued = 0;
    for (struct job *q = o->todo; q; q = q->next)
        queued++;
    int more = queued > atomic_load(&o->idle) && o->nthreads < MAX_THREADS;
    if (more)
        o->nthreads++; /* counted now: the thread is started outside the lock */
    pthread_mutex_unlock(&o->mu);
    sem_post(&o->work);
    if (more && spawn(o) < 0) {
        pthread_mutex_lock(&o->mu);
        o->nthreads--;
        pthread_mutex_unlock(&o->mu);
    }
    return 0;
}

void gbx_offload_free(struct gbx_offload *o)
{
    if (o == NULL)
        return;
    pthread_mutex_lock(&o->mu);
    o->stopping = 1;
    unsigned n = o->nthreads;
    pthread_mutex_unlock(&o->mu);
    for (unsigned i = 0; i < n; i++) /* each thread ends once it finds nothing left to do */
        sem_post(&o->work);
    pthread_mutex_lock(&o->mu);
    while (o->nthreads > 0)
        pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
    drain_finished(o);
    event_free(o->ev);
    close(o->efd);
    sem_destroy(&o->work);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
    free(o);
}
