/* SPDX-License-Identifier: MIT */
#include "api/offload.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/util.h"

#define MAX_THREADS 8

struct job {
    struct job *next;
    gbx_offload_work_fn work;
    gbx_offload_done_fn done;
    void *arg;
};

struct gbx_offload {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *todo, **todo_tail; /* FIFO */
    struct job *finished;          /* LIFO; reversed when drained */
    int stopping;
    int efd;
    struct event *ev;
    pthread_t threads[MAX_THREADS];
    unsigned nthreads;
};

static void *worker(void *p)
{
    struct gbx_offload *o = p;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (o->todo == NULL && !o->stopping)
            pthread_cond_wait(&o->cv, &o->mu);
        struct job *j = o->todo;
        if (j == NULL)
            break;
        o->todo = j->next;
        if (o->todo == NULL)
            o->todo_tail = &o->todo;
        pthread_mutex_unlock(&o->mu);
        j->work(j->arg);
        pthread_mutex_lock(&o->mu);
        j->next = o->finished;
        o->finished = j;
        uint64_t one = 1;
        (void)!write(o->efd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
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
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&o->threads[i], NULL, worker, o) != 0)
            break;
        o->nthreads++;
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
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return 0;
}

void gbx_offload_free(struct gbx_offload *o)
{
    if (o == NULL)
        return;
    pthread_mutex_lock(&o->mu);
    o->stopping = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    for (unsigned i = 0; i < o->nthreads; i++)
        pthread_join(o->threads[i], NULL);
    drain_finished(o);
    event_free(o->ev);
    close(o->efd);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
    free(o);
}
