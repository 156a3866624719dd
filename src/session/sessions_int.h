/* SPDX-License-Identifier: MIT */
/* Internals of the sessions engine: sessions.c (registry, the execute queue, the event log),
 * session/tools.c (the six tools over a connection to the sandbox's init), session/ckpt.c (the
 * workspace checkpoint and its restore into a replacement sandbox). */
#ifndef GBX_SESSION_SESSIONS_INT_H
#define GBX_SESSION_SESSIONS_INT_H

#include <event2/event.h>
#include <jansson.h>
#include <stdint.h>

#include "agent/aconn.h"
#include "core/actor.h"
#include "session/sessions.h"
#include "session/toolkit.h"

struct gbx_session;
struct ckpt_entry;

/* One execute in flight (or queued): every request with its tool_use_id waits on it. */
struct gbx_call {
    struct gbx_call *next;
    struct gbx_session *ses;
    uint64_t seq; /* unique in the engine: what a later callback finds it by */
    char *tool_use_id;
    char *name;
    json_t *input; /* owned; tc borrows from it */
    struct gbx_tool_call tc;
    int parsed; /* tc is valid (else parse_error holds why) */
    char *parse_error;
    struct gbx_waiter {
        struct gbx_waiter *next;
        gbx_session_result_fn done;
        void *arg;
    } * waiters;
    int64_t t0;
    /* running */
    char *path;            /* the file tools' resolved path */
    struct evbuffer *data; /* READ data, grep output */
    uint32_t handle;       /* WRITE handle */
    uint32_t proc;         /* grep's process */
    int step;
    struct gbx_tool_bash_out *bout;
    struct event *timer;
    char *note;                           /* said at the end of the result (a replaced sandbox) */
    void (*resolved)(struct gbx_call *c); /* what runs once c->path is canonical */
    const char *tool_name;
    json_t *result;
};

struct gbx_session {
    struct gbx_session *next;
    struct gbx_sessions *all;
    char *id, *owner, *workdir;
    char *tools_root;    /* the file tools' confinement: "/" (the sandbox is the boundary, as for
                            bash) unless the session asked for a narrower one */
    struct gbx_actor as; /* its owner: what the session does later (a queued call, a
                            replacement sandbox, a wake) it does as this, never as whoever's
                            request the loop happens to be handling */
    json_t *spec;        /* the create body, for a replacement */
    char *sandbox_id;
    int64_t created_ns;
    int64_t last_ns;      /* its newest event (retention counts age from here) */
    struct gbx_aconn *ac; /* to the sandbox's init, while it lives */
    uint32_t shell;       /* the persistent bash's process handle, 0: none */
    struct gbx_call *queue, *queue_tail;
    int busy;
    int replaced_note; /* the next result says the sandbox was replaced */
    /* the workspace checkpoint (session/ckpt.c) */
    char *ckpt_dir;
    struct ckpt_entry *manifest;
    size_t nmanifest, capmanifest;
    struct gbx_ckpt_job *ckpt;              /* running checkpoint or restore */
    struct gbx_session_follower *followers; /* live event streams */
    int deleting;
};

struct gbx_sessions {
    struct gbx_server *srv;
    struct event_base *base;
    struct gbx_session *list;
    char *state_dir;
    uint64_t call_seq; /* the last call's seq */
    int stopping;      /* the daemon is: no queued call starts */
};

/* sessions.c */
/* Append an event to the log (durable) and push it to live streams. data: stolen. */
int gbx_session_log(struct gbx_session *ses, const char *type, const char *tool_use_id,
                    json_t *data, struct gbx_err **err);
/* The call finished: record the result, answer every waiter, go on with the queue. */
void gbx_session_call_done(struct gbx_call *c, json_t *result);
/* The sandbox's agent connection, opened when needed (NULL and *err when it cannot be). */
struct gbx_aconn *gbx_session_agent(struct gbx_session *ses, struct gbx_err **err);
/* The environment tool processes start with (new reference). */
json_t *gbx_session_env(struct gbx_session *ses);
/* Forget the agent connection (the sandbox died or is being replaced). */
void gbx_session_drop_agent(struct gbx_session *ses);

/* session/tools.c */
void gbx_session_tool_start(struct gbx_call *c);
/* Unsolicited agent events (process output and exits) for this session. */
void gbx_session_tool_event(struct gbx_session *ses, const struct gbx_frame_hdr *h,
                            const uint8_t *p);
/* The agent connection was lost while c ran. */
void gbx_session_tool_lost(struct gbx_call *c);

/* session/ckpt.c */
struct gbx_ckpt_job;
/* After a mutating call: bring the host copy of the workspace up to date with what changed,
 * then call done(c). file/content: what write or edit produced (NULL after bash: list the
 * workspace and fetch what changed). */
void gbx_session_ckpt_after(struct gbx_call *c, const char *file, const void *content, size_t len,
                            void (*done)(struct gbx_call *c));
/* Put the checkpoint into a fresh sandbox's workspace, then call done(c, ok). */
void gbx_session_ckpt_restore(struct gbx_call *c, void (*done)(struct gbx_call *c, int ok));
void gbx_session_ckpt_free(struct gbx_session *ses);

#endif
