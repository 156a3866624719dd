/* SPDX-License-Identifier: MIT */
/* Blocking work off the event loop: a small pool of worker threads takes jobs in order and
 * hands each back to the loop when done (copies of snapshot layers, artifact hashing,
 * checkpoints, template imports, garbage collection). The loop never waits on disk. */
#ifndef GBX_CORE_OFFLOAD_H
#define GBX_CORE_OFFLOAD_H

struct event_base;
struct gbx_offload;

typedef void (*gbx_offload_work_fn)(void *arg); /* on a worker thread: no loop state here */
typedef void (*gbx_offload_done_fn)(void *arg); /* on the loop thread, after work returned */

/* threads: how many are kept even when idle (0 for 2); more are started while jobs wait
 * for one, up to 64. -errno on failure. */
int gbx_offload_new(struct event_base *base, unsigned threads, struct gbx_offload **out);
/* Queue a job; done (may be NULL) runs on the loop once work has returned. 0 or -errno. */
int gbx_offload_submit(struct gbx_offload *o, gbx_offload_work_fn work, gbx_offload_done_fn done,
                       void *arg);
/* Finish every queued job (blocking), run their completions, stop the threads, free. */
void gbx_offload_free(struct gbx_offload *o);

#endif
