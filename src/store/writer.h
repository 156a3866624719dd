/* SPDX-License-Identifier: MIT */
/* The write-behind store writer: a thread with its own connection to the database that
 * performs the daemon's writes with group commit (everything queued goes into one
 * transaction, so one fsync covers a batch) and hands completions back to the event loop
 * through an eventfd.
 *
 * Threads: gbx_store_writer_new/_free/_complete/_flush and the queueing calls belong to one
 * thread, the loop's (queueing from other threads is safe too, but completions always run on
 * the thread that calls _complete). Order: jobs are performed and completed in the order they
 * were queued, so audit records chain in queueing order. A synchronous write on another
 * connection (gbx_store_audit_append on the loop's store) lands between two batches: it is
 * ordered against the writer's records by commit time, not by call time. */
#ifndef GBX_STORE_WRITER_H
#define GBX_STORE_WRITER_H

#include <stdint.h>

#include "base/err.h"
#include "store/store.h"

struct gbx_store_writer;

/* Open a second connection to the database at db_path (already migrated by gbx_store_open)
 * and start the writer thread. */
int gbx_store_writer_new(const char *db_path, struct gbx_store_writer **out,
                         struct gbx_err **err) GBX_WUR;
/* Finish every queued write (blocking), stop the thread, run the remaining completions, free.
 * NULL-safe. Not from inside a completion. */
void gbx_store_writer_free(struct gbx_store_writer *w);

/* Completion: runs on the thread that calls gbx_store_writer_complete(), once the write is
 * durable (status 0, msg NULL) or failed (status -1, msg says why; valid during the call
 * only).
 * A completion may queue more writes. */
typedef void (*gbx_store_done_fn)(void *arg, int status, const char *msg);

/* Queue writes. Every argument is copied (the caller keeps what it passed); done may be NULL.
 * Never blocks on I/O: only on the queue's mutex, held for a few instructions. */
void gbx_store_writer_sandbox_put(struct gbx_store_writer *w, const struct gbx_store_sandbox *row,
                                  gbx_store_done_fn done, void *arg);
void gbx_store_writer_sandbox_delete(struct gbx_store_writer *w, const char *id,
                                     gbx_store_done_fn done, void *arg);
void gbx_store_writer_sandbox_set_expiry(struct gbx_store_writer *w, const char *id,
                                         int64_t expires_ns, gbx_store_done_fn done, void *arg);
void gbx_store_writer_sandbox_set_state(struct gbx_store_writer *w, const char *id,
                                        const char *state, gbx_store_done_fn done, void *arg);
void gbx_store_writer_audit(struct gbx_store_writer *w, const struct gbx_audit_entry *e,
                            gbx_store_done_fn done, void *arg);

/* A descriptor (eventfd, non-blocking, close-on-exec) that is readable while completions
 * wait; the loop watches it. Owned by the writer. */
int gbx_store_writer_fd(const struct gbx_store_writer *w);
/* The writer thread's id (0 until it has started), to raise its priority with the loop's:
 * the loop's own writes wait for the write lock the writer holds. */
int gbx_store_writer_tid(const struct gbx_store_writer *w);
/* Run the waiting completions (in queue order) and reset the fd. */
void gbx_store_writer_complete(struct gbx_store_writer *w);
/* Block until everything queued so far is durable (for shutdown and tests); then
 * completions are waiting. */
void gbx_store_writer_flush(struct gbx_store_writer *w);

#endif
