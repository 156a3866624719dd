/* SPDX-License-Identifier: MIT */
#include "store/writer.h"

#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <semaphore.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/mem.h"

/* A batch holds at most this many jobs, so that the write lock (which a synchronous write on
 * the loop's connection waits for) is never held for long. */
#define BATCH_MAX 64
/* BEGIN IMMEDIATE waits for the write lock up to the busy timeout (5 s) each time. */
#define BEGIN_TRIES 3

enum job_kind {
    JOB_SANDBOX_PUT,
    JOB_SANDBOX_DELETE,
    JOB_SANDBOX_EXPIRY,
    JOB_SANDBOX_STATE,
    JOB_AUDIT,
};

struct job {
    struct job *next;
    enum job_kind kind;
    struct gbx_store_sandbox row; /* JOB_SANDBOX_PUT; its strings point into strs */
    struct gbx_audit_entry audit; /* JOB_AUDIT; likewise */
    const char *id;               /* JOB_SANDBOX_DELETE, JOB_SANDBOX_EXPIRY */
    int64_t expires_ns;
    char *strs[7]; /* owned copies of every string above */
    gbx_store_done_fn done;
    void *arg;
    int status;
    char *msg; /* owned; why the job failed */
};

struct gbx_store_writer {
    struct gbx_store *store; /* used by the writer thread only, once started */
    int tid;                 /* the writer thread's id (atomic; 0 until it runs) */
    char *wal_path;          /* <db>-wal: synced after each batch, outside the write lock */
    int wal_fd;              /* the writer thread's; -1 until the first batch */
    dev_t wal_dev;
    ino_t wal_ino;
    pthread_t thread;
    bool started;
    int efd;
    pthread_mutex_t mu;
    sem_t wake;          /* posted for each queued job (and the stop): the thread waits on it */
    pthread_cond_t idle; /* flush waits on it for finished jobs */
    /* under mu: */
    struct job *queue, **queue_tail;
    struct job *done, **done_tail;
    uint64_t queued, finished;
    bool stop;
};

static char *dup_or_null(const char *s)
{
    return s ? gbx_xstrdup(s) : NULL;
}

static void job_free(struct job *j)
{
    for (size_t i = 0; i < GBX_ARRAY_SIZE(j->strs); i++)
        free(j->strs[i]);
    free(j->msg);
    free(j);
}

static void job_fail(struct job *j, const char *msg)
{
    j->status = -1;
    free(j->msg);
    j->msg = gbx_xstrdup(msg);
}

static int job_run(struct gbx_store *s, struct job *j, struct gbx_err **err)
{
    switch (j->kind) {
    case JOB_SANDBOX_PUT:
        return gbx_store_sandbox_put(s, &j->row, err);
    case JOB_SANDBOX_DELETE:
        return gbx_store_sandbox_delete(s, j->id, err);
    case JOB_SANDBOX_EXPIRY:
        return gbx_store_sandbox_set_expiry(s, j->id, j->expires_ns, err);
    case JOB_SANDBOX_STATE:
        return gbx_store_sandbox_set_state(s, j->id, j->strs[1], err);
    case JOB_AUDIT:
        return gbx_store_audit_append(s, &j->audit, NULL, err);
    }
    GBX_BUG_ON(1);
    return -1;
}

/* The transaction is gone or cannot go on: every job of the batch that has not failed on
 * its own fails with the batch's reason (nothing of it was committed). */
static void batch_fail(struct gbx_store_writer *w, struct job *batch, const char *msg)
{
    if (gbx_store_in_transaction(w->store)) {
        struct gbx_err *err = NULL;
        if (gbx_store_exec(w->store, "ROLLBACK", &err) < 0)
            gbx_err_free(err);
    }
    for (struct job *j = batch; j; j = j->next)
        if (j->status == 0)
            job_fail(j, msg);
}

/* fdatasync the WAL through a descriptor of our own (opened again if the file was replaced).
 * 0, or -1 with errno. */
static int wal_sync(struct gbx_store_writer *w)
{
    struct stat st;
    if (stat(w->wal_path, &st) < 0) /* no WAL: a checkpoint moved it all, and synced it */
        return errno == ENOENT ? 0 : -1;
    if (w->wal_fd < 0 || st.st_dev != w->wal_dev || st.st_ino != w->wal_ino) {
        if (w->wal_fd >= 0)
            close(w->wal_fd);
        w->wal_fd = open(w->wal_path, O_RDONLY | O_CLOEXEC);
        if (w->wal_fd < 0)
            return -1;
        w->wal_dev = st.st_dev;
        w->wal_ino = st.st_ino;
    }
    return fdatasync(w->wal_fd);
}

/* One transaction for the whole batch: one fsync. Each job runs under its own savepoint, so
 * a job that fails is undone alone and the others still commit. */
static void batch_run(struct gbx_store_writer *w, struct job *batch)
{
    gbx_autoerr struct gbx_err *err = NULL;
    int r = -1;
    for (int i = 0; i < BEGIN_TRIES && r < 0; i++) {
        gbx_err_free(err);
        err = NULL;
        r = gbx_store_exec(w->store, "BEGIN IMMEDIATE", &err);
    }
    if (r < 0) {
        gbx_err_wrap(&err, "store writer: begin");
        batch_fail(w, batch, err->msg);
        return;
    }
    for (struct job *j = batch; j; j = j->next) {
        if (gbx_store_exec(w->store, "SAVEPOINT job", &err) < 0)
            goto fatal;
        struct gbx_err *jerr = NULL;
        if (job_run(w->store, j, &jerr) < 0) {
            job_fail(j, jerr ? jerr->msg : "store writer: write failed");
            gbx_err_free(jerr);
            /* an I/O error or a full disk makes SQLite roll back the whole transaction */
            if (!gbx_store_in_transaction(w->store)) {
                gbx_err_set(&err, 0, GBX_ERR_UNAVAILABLE,
                            "store writer: the batch was rolled back: %s", j->msg);
                goto fatal;
            }
            if (gbx_store_exec(w->store, "ROLLBACK TO job", &err) < 0)
                goto fatal;
        }
        if (gbx_store_exec(w->store, "RELEASE job", &err) < 0)
            goto fatal;
    }
    if (gbx_store_exec(w->store, "COMMIT", &err) < 0)
        goto fatal;
    /* committed with synchronous = NORMAL, so the write lock is free again before the disk
     * has the batch: the WAL is synced now, and only then are the jobs completed (acknowledged
     * records are durable, as with FULL, and the loop's own writes never wait for an fsync) */
    if (wal_sync(w) < 0) {
        gbx_err_set(&err, errno, GBX_ERR_INTERNAL, "store writer: cannot sync '%s': %s",
                    w->wal_path, strerror(errno));
        for (struct job *j = batch; j; j = j->next)
            if (j->status == 0)
                job_fail(j, err->msg);
    }
    return;

fatal:
    batch_fail(w, batch, err ? err->msg : "store writer: batch failed");
}

static void *writer_main(void *arg)
{
    struct gbx_store_writer *w = arg;
    __atomic_store_n(&w->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->queue == NULL && !w->stop) {
            /* a semaphore, not a condition variable: the loop's post never waits */
            pthread_mutex_unlock(&w->mu);
            while (sem_wait(&w->wake) < 0 && errno == EINTR)
                ;
            pthread_mutex_lock(&w->mu);
        }
        if (w->queue == NULL)
            break;
        struct job *batch = w->queue, *last = batch;
        uint64_t n = 1;
        while (last->next && n < BATCH_MAX) {
            last = last->next;
            n++;
        }
        w->queue = last->next;
        if (w->queue == NULL)
            w->queue_tail = &w->queue;
        last->next = NULL;
        pthread_mutex_unlock(&w->mu);

        batch_run(w, batch);

        pthread_mutex_lock(&w->mu);
        *w->done_tail = batch;
        w->done_tail = &last->next;
        w->finished += n;
        pthread_cond_broadcast(&w->idle);
        pthread_mutex_unlock(&w->mu);
        uint64_t one = 1;
        /* cannot fail short of a counter overflow; a readable fd is all that matters */
        (void)!write(w->efd, &one, sizeof(one));
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int gbx_store_writer_new(const char *db_path, struct gbx_store_writer **out, struct gbx_err **err)
{
    struct gbx_store_writer *w = gbx_xcalloc(1, sizeof(*w));
    w->efd = -1;
    pthread_mutex_init(&w->mu, NULL);
    sem_init(&w->wake, 0, 0);
    pthread_cond_init(&w->idle, NULL);
    w->queue_tail = &w->queue;
    w->done_tail = &w->done;
    w->wal_fd = -1;
    w->wal_path = gbx_asprintf("%s-wal", db_path);
    if (gbx_store_open(db_path, &w->store, err) < 0) {
        gbx_err_wrap(err, "store writer");
        gbx_store_writer_free(w);
        return -1;
    }
    /* durability comes from wal_sync after each commit, not from the commit itself */
    if (gbx_store_exec(w->store, "PRAGMA synchronous = NORMAL", err) < 0) {
        gbx_err_wrap(err, "store writer");
        gbx_store_writer_free(w);
        return -1;
    }
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->efd < 0) {
        gbx_err_sys(err, errno, "store writer: eventfd");
        gbx_store_writer_free(w);
        return -1;
    }
    /* signals are the loop thread's business: the writer thread blocks them all */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, writer_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        gbx_err_sys(err, rc, "store writer: cannot start its thread");
        gbx_store_writer_free(w);
        return -1;
    }
    w->started = true;
    *out = w;
    return 0;
}

void gbx_store_writer_free(struct gbx_store_writer *w)
{
    if (w == NULL)
        return;
    if (w->started) {
        /* completions may queue more writes: drain until a flush leaves nothing behind */
        for (;;) {
            gbx_store_writer_flush(w);
            pthread_mutex_lock(&w->mu);
            bool more = w->done != NULL;
            pthread_mutex_unlock(&w->mu);
            if (!more)
                break;
            gbx_store_writer_complete(w);
        }
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_mutex_unlock(&w->mu);
        sem_post(&w->wake);
        pthread_join(w->thread, NULL);
    }
    GBX_BUG_ON(w->queue != NULL || w->done != NULL);
    gbx_store_close(w->store);
    if (w->wal_fd >= 0)
        close(w->wal_fd);
    free(w->wal_path);
    if (w->efd >= 0)
        close(w->efd);
    pthread_cond_destroy(&w->idle);
    sem_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static void enqueue(struct gbx_store_writer *w, struct job *j, gbx_store_done_fn done, void *arg)
{
    j->done = done;
    j->arg = arg;
    pthread_mutex_lock(&w->mu);
    GBX_BUG_ON(w->stop);
    *w->queue_tail = j;
    w->queue_tail = &j->next;
    w->queued++;
    pthread_mutex_unlock(&w->mu);
    sem_post(&w->wake);
}

void gbx_store_writer_sandbox_put(struct gbx_store_writer *w, const struct gbx_store_sandbox *row,
                                  gbx_store_done_fn done, void *arg)
{
    struct job *j = gbx_xcalloc(1, sizeof(*j));
    j->kind = JOB_SANDBOX_PUT;
    j->row = *row;
    j->row.id = j->strs[0] = dup_or_null(row->id);
    j->row.owner = j->strs[1] = dup_or_null(row->owner);
    j->row.template_name = j->strs[2] = dup_or_null(row->template_name);
    j->row.state = j->strs[3] = dup_or_null(row->state);
    j->row.spec = j->strs[4] = dup_or_null(row->spec);
    j->row.token = j->strs[5] = dup_or_null(row->token);
    j->row.attrs = j->strs[6] = dup_or_null(row->attrs);
    enqueue(w, j, done, arg);
}

void gbx_store_writer_sandbox_delete(struct gbx_store_writer *w, const char *id,
                                     gbx_store_done_fn done, void *arg)
{
    struct job *j = gbx_xcalloc(1, sizeof(*j));
    j->kind = JOB_SANDBOX_DELETE;
    j->id = j->strs[0] = dup_or_null(id);
    enqueue(w, j, done, arg);
}

void gbx_store_writer_sandbox_set_expiry(struct gbx_store_writer *w, const char *id,
                                         int64_t expires_ns, gbx_store_done_fn done, void *arg)
{
    struct job *j = gbx_xcalloc(1, sizeof(*j));
    j->kind = JOB_SANDBOX_EXPIRY;
    j->id = j->strs[0] = dup_or_null(id);
    j->expires_ns = expires_ns;
    enqueue(w, j, done, arg);
}

void gbx_store_writer_sandbox_set_state(struct gbx_store_writer *w, const char *id,
                                        const char *state, gbx_store_done_fn done, void *arg)
{
    struct job *j = gbx_xcalloc(1, sizeof(*j));
    j->kind = JOB_SANDBOX_STATE;
    j->id = j->strs[0] = dup_or_null(id);
    j->strs[1] = dup_or_null(state);
    enqueue(w, j, done, arg);
}

void gbx_store_writer_audit(struct gbx_store_writer *w, const struct gbx_audit_entry *e,
                            gbx_store_done_fn done, void *arg)
{
    struct job *j = gbx_xcalloc(1, sizeof(*j));
    j->kind = JOB_AUDIT;
    j->audit.actor = j->strs[0] = dup_or_null(e->actor);
    j->audit.kind = j->strs[1] = dup_or_null(e->kind);
    j->audit.sandbox = j->strs[2] = dup_or_null(e->sandbox);
    j->audit.detail = j->strs[3] = dup_or_null(e->detail);
    enqueue(w, j, done, arg);
}

int gbx_store_writer_tid(const struct gbx_store_writer *w)
{
    return __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE);
}

int gbx_store_writer_fd(const struct gbx_store_writer *w)
{
    return w->efd;
}

void gbx_store_writer_complete(struct gbx_store_writer *w)
{
    uint64_t n;
    /* reset first: completions that arrive after the swap below make it readable again */
    (void)!read(w->efd, &n, sizeof(n));
    pthread_mutex_lock(&w->mu);
    struct job *list = w->done;
    w->done = NULL;
    w->done_tail = &w->done;
    pthread_mutex_unlock(&w->mu);
    while (list) {
        struct job *j = list;
        list = j->next;
        if (j->done)
            j->done(j->arg, j->status, j->status == 0 ? NULL : j->msg);
        job_free(j);
    }
}

void gbx_store_writer_flush(struct gbx_store_writer *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t target = w->queued;
    while (w->finished < target)
        pthread_cond_wait(&w->idle, &w->mu);
    pthread_mutex_unlock(&w->mu);
}
