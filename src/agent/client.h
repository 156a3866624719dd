/* SPDX-License-Identifier: MIT */
/* Blocking client for the agent protocol, used by `glovebox run`, tests and benchmarks.
 * (The daemon drives the same codec from its event loop.) One connection, one thread.
 * Events (process output, exits, watch events) that arrive while a request waits for its
 * reply are queued and returned later by gbx_agent_next_event(). */
#ifndef GBX_AGENT_CLIENT_H
#define GBX_AGENT_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/proto.h"
#include "base/err.h"

struct gbx_agent;

/* Take ownership of a connected stream socket to glovebox-init and say HELLO.
 * On failure the fd is closed. */
int gbx_agent_open(int fd, struct gbx_agent **out, struct gbx_err **err) GBX_WUR;
/* Connect to a control socket path (unix stream) and say HELLO. */
int gbx_agent_connect(const char *path, struct gbx_agent **out, struct gbx_err **err) GBX_WUR;
void gbx_agent_free(struct gbx_agent *a);
int gbx_agent_fd(const struct gbx_agent *a);
/* Reply timeout for requests, in ms (default 30000). */
void gbx_agent_set_timeout(struct gbx_agent *a, int timeout_ms);

int gbx_agent_ping(struct gbx_agent *a, struct gbx_err **err) GBX_WUR;
int gbx_agent_shutdown(struct gbx_agent *a, struct gbx_err **err) GBX_WUR;

struct gbx_spawn_opts {
    const char *const *argv; /* NULL-terminated, required */
    const char *const *env;  /* NULL-terminated "K=V" list, or NULL for init's defaults */
    const char *cwd;         /* NULL: the user's home */
    const char *user;        /* NULL: "root" */
    int pty;                 /* non-zero: run on a PTY of rows x cols */
    uint16_t rows, cols;
    int stdin_open; /* non-zero: keep stdin open for gbx_agent_stdin */
};

int gbx_agent_spawn(struct gbx_agent *a, const struct gbx_spawn_opts *o, uint32_t *proc, pid_t *pid,
                    struct gbx_err **err) GBX_WUR;
int gbx_agent_stdin(struct gbx_agent *a, uint32_t proc, const void *data, size_t len,
                    struct gbx_err **err) GBX_WUR;
int gbx_agent_close_stdin(struct gbx_agent *a, uint32_t proc, struct gbx_err **err) GBX_WUR;
int gbx_agent_signal(struct gbx_agent *a, uint32_t proc, int signo, struct gbx_err **err) GBX_WUR;
int gbx_agent_resize(struct gbx_agent *a, uint32_t proc, uint16_t rows, uint16_t cols,
                     struct gbx_err **err) GBX_WUR;
int gbx_agent_attach(struct gbx_agent *a, uint32_t proc, struct gbx_err **err) GBX_WUR;

struct gbx_proc_info {
    uint32_t proc;
    pid_t pid;
    int pty;
    char *cmdline; /* argv joined by spaces; owned by the array */
};
/* List running processes. *out is an array of *n entries; free with gbx_proc_info_free. */
int gbx_agent_ps(struct gbx_agent *a, struct gbx_proc_info **out, size_t *n,
                 struct gbx_err **err) GBX_WUR;
void gbx_proc_info_free(struct gbx_proc_info *v, size_t n);

enum gbx_event_kind { GBX_EVENT_STDOUT = 1, GBX_EVENT_STDERR, GBX_EVENT_EXIT, GBX_EVENT_WATCH };

struct gbx_event {
    enum gbx_event_kind kind;
    uint32_t id;   /* process handle, or watch handle */
    uint8_t *data; /* STDOUT/STDERR bytes; owned by the event */
    size_t len;
    int exit_code;   /* EXIT: code, or -1 when killed by a signal */
    int exit_signal; /* EXIT: signal number, or 0 */
    char *name;      /* WATCH: path relative to the watched directory; owned */
    uint32_t wevent; /* WATCH: GBX_WE_* bits */
};
/* Wait up to timeout_ms (-1 forever) for the next event. Returns 1 with *ev filled
 * (release it with gbx_event_release), 0 on timeout, -1 on error (connection lost). */
int gbx_agent_next_event(struct gbx_agent *a, struct gbx_event *ev, int timeout_ms,
                         struct gbx_err **err) GBX_WUR;
void gbx_event_release(struct gbx_event *ev);

/* Files. user may be NULL ("root"). */
struct gbx_file_stat {
    uint32_t ftype; /* GBX_FT_* */
    uint32_t mode;  /* permission bits */
    uint64_t size;
    uint64_t mtime_ns;
    uint32_t uid, gid;
    char *name; /* LIST: path relative to the listed directory; STAT: base name */
    char *link; /* symlink target or NULL */
};
void gbx_file_stat_release(struct gbx_file_stat *st);

int gbx_agent_stat(struct gbx_agent *a, const char *user, const char *path, int follow,
                   struct gbx_file_stat *out, struct gbx_err **err) GBX_WUR;
/* Read length bytes (UINT64_MAX: to the end) from offset; each chunk goes to cb.
 * A non-zero return from cb stops delivery (remaining chunks are drained and dropped). */
typedef int (*gbx_read_cb)(void *arg, const uint8_t *data, size_t len);
int gbx_agent_read(struct gbx_agent *a, const char *user, const char *path, uint64_t offset,
                   uint64_t length, gbx_read_cb cb, void *arg, struct gbx_err **err) GBX_WUR;
/* Convenience: read a whole file into a malloc'd buffer (bounded by max bytes). */
int gbx_agent_read_all(struct gbx_agent *a, const char *user, const char *path, size_t max,
                       uint8_t **data, size_t *len, struct gbx_err **err) GBX_WUR;
/* Chunked write: open, data..., end. wflags: GBX_W_*. */
int gbx_agent_write_open(struct gbx_agent *a, const char *user, const char *path, uint32_t mode,
                         uint32_t wflags, uint32_t *handle, struct gbx_err **err) GBX_WUR;
int gbx_agent_write_data(struct gbx_agent *a, uint32_t handle, const void *data, size_t len,
                         struct gbx_err **err) GBX_WUR;
int gbx_agent_write_end(struct gbx_agent *a, uint32_t handle, int commit, uint64_t *size,
                        struct gbx_err **err) GBX_WUR;
/* Convenience: write a whole buffer (chunked), atomically (temp + rename), creating it. */
int gbx_agent_write_all(struct gbx_agent *a, const char *user, const char *path, uint32_t mode,
                        const void *data, size_t len, struct gbx_err **err) GBX_WUR;
int gbx_agent_mkdir(struct gbx_agent *a, const char *user, const char *path, uint32_t mode,
                    int parents, struct gbx_err **err) GBX_WUR;
int gbx_agent_remove(struct gbx_agent *a, const char *user, const char *path, int recursive,
                     struct gbx_err **err) GBX_WUR;
int gbx_agent_rename(struct gbx_agent *a, const char *user, const char *from, const char *to,
                     int noreplace, struct gbx_err **err) GBX_WUR;
int gbx_agent_chmod(struct gbx_agent *a, const char *user, const char *path, uint32_t mode,
                    struct gbx_err **err) GBX_WUR;
/* List entries up to depth levels below path (1 = direct children). */
int gbx_agent_list(struct gbx_agent *a, const char *user, const char *path, uint32_t depth,
                   struct gbx_file_stat **out, size_t *n, struct gbx_err **err) GBX_WUR;
void gbx_file_stat_array_free(struct gbx_file_stat *v, size_t n);
int gbx_agent_watch(struct gbx_agent *a, const char *user, const char *path, int recursive,
                    uint32_t *handle, struct gbx_err **err) GBX_WUR;
int gbx_agent_unwatch(struct gbx_agent *a, uint32_t handle, struct gbx_err **err) GBX_WUR;

#endif
