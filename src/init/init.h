/* SPDX-License-Identifier: MIT */
/* glovebox-init internals, shared by the files of src/init/ only.
 *
 * One epoll loop drives everything: connections (conn.c), processes (proc.c), file
 * operations (fs.c), inotify watches (watch.c), users and credentials (user.c).
 * Every object that owns a descriptor registers it through a struct gbx_src, whose
 * address is the epoll cookie. Objects are never freed while an epoll batch is being
 * dispatched: they are marked dead and freed in the loop tail (main.c). */
#ifndef GBX_INIT_INIT_H
#define GBX_INIT_INIT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "agent/frame.h"
#include "base/util.h"

#ifndef __GLIBC__
/* musl (what init is linked with when available: a ~100 KiB binary instead of ~700 KiB)
 * lacks these two wrappers in the version Debian 12 ships. */
#include <linux/close_range.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
static inline int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                            unsigned int flags)
{
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}
static inline int close_range(unsigned int first, unsigned int last, int flags)
{
    return (int)syscall(SYS_close_range, first, last, flags);
}
#endif

#define INIT_MAX_CONNS GBX_AGENT_MAX_CONNS
#define FRAME_MAX (GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD)
/* A connection whose unsent output reaches the soft cap stops being fed process output
 * and READ/LIST chunks; at the hard cap init also stops reading its requests. */
#define INIT_OUT_SOFT_CAP (1u << 20)
#define INIT_OUT_HARD_CAP (4u << 20)
#define INIT_MAX_WFILES 64
#define INIT_STDIN_MAX (8u << 20)
#define INIT_LIST_MAX_DEPTH 32
#define INIT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define INIT_MAX_GROUPS 64

enum gbx_src_kind {
    GBX_SRC_LISTEN = 1,
    GBX_SRC_CONN,
    GBX_SRC_SIGNAL,
    GBX_SRC_INOTIFY,
    GBX_SRC_PROC_OUT,  /* stdout pipe or PTY master */
    GBX_SRC_PROC_ERR,  /* stderr pipe */
    GBX_SRC_PROC_IN,   /* stdin pipe (write side) */
    GBX_SRC_PROC_EXEC, /* CLOEXEC pipe reporting exec failure */
};

/* One descriptor in the epoll set. events == 0 means "not registered": epoll reports
 * HUP/ERR even for an empty mask, so a paused descriptor is removed from the set. */
struct gbx_src {
    int kind;
    int fd; /* -1 when closed */
    uint32_t events;
    void *owner;
};

void gbx_src_init(struct gbx_src *s, int kind, int fd, void *owner);
void gbx_src_set(struct gbx_src *s, uint32_t events);
void gbx_src_close(struct gbx_src *s);

/* A resolved user: who a process runs as, whose credentials a file operation uses. */
struct gbx_user {
    uid_t uid;
    gid_t gid;
    int known; /* found in /etc/passwd */
    char name[64];
    char home[1024];
    char shell[256];
    int ngroups;
    gid_t groups[INIT_MAX_GROUPS];
};

/* user.c */
/* spec: NULL or "" (root), a name, "uid" or "uid:gid". -ENOENT for an unknown name,
 * -EINVAL for a malformed spec. */
int gbx_user_lookup(const char *spec, struct gbx_user *u);
/* Name of a uid or gid from /etc/passwd or /etc/group; 0 found, -ENOENT otherwise. */
int gbx_user_name(uid_t uid, char *out, size_t outsz);
int gbx_group_name(gid_t gid, char *out, size_t outsz);
/* Switch the filesystem credentials to u (fsgid, groups, fsuid); a no-op for root.
 * gbx_creds_leave restores init's own. Returns -EPERM if the switch did not take. */
int gbx_creds_enter(const struct gbx_user *u);
void gbx_creds_leave(void);
void gbx_creds_save_initial(void);

struct gbx_op;
struct gbx_wfile;

struct gbx_conn {
    struct gbx_src src;
    uint64_t serial; /* unique for the life of init; deferred replies look conns up by it */
    int dead;        /* closed; freed in the loop tail */
    int closing;     /* flush what is queued, then close (after a protocol error) */
    uint8_t *in;     /* GBX_FRAME_HDR_SIZE + GBX_FRAME_MAX_PAYLOAD bytes */
    size_t in_len;
    uint8_t *out;
    size_t out_off, out_len, out_cap;
    uint32_t next_handle;
    struct gbx_wfile *wfiles[INIT_MAX_WFILES];
    struct gbx_op *ops; /* streaming READ / LIST requests, oldest first */
};

/* A request being handled. Handlers return 0 once they sent (or scheduled) the reply,
 * or -errno with msg filled; the dispatcher then sends the ERROR. */
struct gbx_req {
    struct gbx_conn *c;
    uint32_t id;
    uint16_t type;
    const uint8_t *p;
    size_t len;
    char msg[512];
};

int gbx_req_fail(struct gbx_req *r, int err, const char *fmt, ...) GBX_PRINTF(3, 4);
int gbx_req_failx(struct gbx_req *r, int err, const char *fmt, ...) GBX_PRINTF(3, 4);
/* Attribute getters: 1 found, 0 absent (or -EINVAL with msg set when required), <0 bad. */
int gbx_req_u32(struct gbx_req *r, uint16_t tag, const char *name, uint32_t *out, int required);
int gbx_req_u64(struct gbx_req *r, uint16_t tag, const char *name, uint64_t *out, int required);
int gbx_req_str(struct gbx_req *r, uint16_t tag, const char *name, char *out, size_t outsz,
                int required);
/* USER attribute, resolved (default root). */
int gbx_req_user(struct gbx_req *r, struct gbx_user *u);

/* conn.c */
/* A FRAME_MAX-byte buffer (a spare one when there is one); give it back with _put. */
void *gbx_conn_buf_get(void);
void gbx_conn_buf_put(void *p);
void gbx_conn_accept(int lfd);
void gbx_conn_adopt(int fd);
void gbx_conn_event(struct gbx_conn *c, uint32_t events);
void gbx_conn_close(struct gbx_conn *c);
void gbx_conn_flush(struct gbx_conn *c);
void gbx_conn_update(struct gbx_conn *c);
size_t gbx_conn_pending(const struct gbx_conn *c);
/* Output at or above the soft cap (or the connection is gone): produce nothing for it. */
int gbx_conn_over(const struct gbx_conn *c);
struct gbx_conn *gbx_conn_by_serial(uint64_t serial);
/* Start a frame in c's output buffer (room for a full payload). c may be NULL or dead:
 * the frame is then built in scratch space and dropped by gbx_conn_msg_send. */
void gbx_conn_msg_start(struct gbx_conn *c, struct gbx_msg *m, uint16_t type, uint32_t id);
void gbx_conn_msg_send(struct gbx_conn *c, struct gbx_msg *m);
void gbx_conn_reply_ok(struct gbx_conn *c, uint32_t id);
void gbx_conn_reply_err(struct gbx_conn *c, uint32_t id, int err, const char *msg);

/* proc.c */
struct gbx_proc;
int gbx_proc_spawn(struct gbx_req *r);
int gbx_proc_stdin(struct gbx_req *r);
int gbx_proc_close_stdin(struct gbx_req *r);
int gbx_proc_signal(struct gbx_req *r);
int gbx_proc_resize(struct gbx_req *r);
int gbx_proc_ps(struct gbx_req *r);
int gbx_proc_attach(struct gbx_req *r);
void gbx_proc_event(struct gbx_src *s, uint32_t events);
void gbx_proc_reap(void);
/* Loop tail: pause/resume output, finish exited processes, free dead records. */
void gbx_proc_tick(void);
/* A PTY's stdin was closed: send its EOF character again while the program runs (see
 * gbx_proc_close_stdin). Returns the milliseconds until the next is due, or -1 for none: the
 * main loop's epoll timeout. */
int gbx_proc_eof_tick(void);
void gbx_proc_conn_closed(struct gbx_conn *c);
void gbx_proc_kill_all(void);

/* fs.c */
int gbx_fs_stat(struct gbx_req *r);
int gbx_fs_read(struct gbx_req *r);
int gbx_fs_write(struct gbx_req *r);
int gbx_fs_write_data(struct gbx_req *r);
int gbx_fs_write_end(struct gbx_req *r);
int gbx_fs_mkdir(struct gbx_req *r);
int gbx_fs_remove(struct gbx_req *r);
int gbx_fs_rename(struct gbx_req *r);
int gbx_fs_chmod(struct gbx_req *r);
int gbx_fs_realpath(struct gbx_req *r);
int gbx_fs_list(struct gbx_req *r);
/* Produce streamed READ/LIST output while c is under its soft cap. */
void gbx_fs_pump(struct gbx_conn *c);
void gbx_fs_conn_closed(struct gbx_conn *c);
/* Resolve path (relative: to u's home) to an absolute path inside the root. */
int gbx_fs_abspath(const struct gbx_user *u, const char *path, char *out, size_t outsz);
/* openat2(root, abs, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS); -errno on failure. */
int gbx_fs_open(const char *abs, int flags, mode_t mode);

/* watch.c */
int gbx_watch_add(struct gbx_req *r);
int gbx_watch_remove(struct gbx_req *r);
void gbx_watch_event(void);
void gbx_watch_tick(void);
void gbx_watch_conn_closed(struct gbx_conn *c);

/* main.c: process-wide state */
struct gbx_init {
    int epfd;
    int rootfd; /* O_PATH directory every file path resolves in */
    int is_pid1;
    struct gbx_src listen, sig, inotify;
    struct gbx_conn *conns[INIT_MAX_CONNS]; /* a dead one stays until the loop tail */
    uint64_t next_serial;
    struct rlimit nofile; /* as inherited; restored in spawned processes */
    int ngroups;          /* init's own supplementary groups, restored after file operations */
    gid_t groups[INIT_MAX_GROUPS];
};
extern struct gbx_init gbx_g;

void gbx_init_exit(void) __attribute__((noreturn));

#endif
