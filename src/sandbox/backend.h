/* SPDX-License-Identifier: MIT */
/* The sandbox backend interface. The namespace backend (ns_*.c) is the first; a microVM
 * backend can plug in behind the same table later. */
#ifndef GBX_SANDBOX_BACKEND_H
#define GBX_SANDBOX_BACKEND_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/aconn.h"
#include "base/err.h"
#include "base/parse.h"
#include "sandbox/cgroup.h"
#include "sandbox/seccomp.h"
#include "sandbox/template.h"

#define GBX_ID_MAX 63
#define GBX_DEFAULT_TEMPLATE GBX_TEMPLATE_HOST
#define GBX_DEFAULT_STATE_DIR "/var/lib/glovebox"
#define GBX_DEFAULT_RUNTIME_DIR "/run/glovebox"
#define GBX_UID_RANGE 65536u
#define GBX_MAX_LAYERS 32 /* snapshot layers a sandbox may stack on its template */
#define GBX_MAX_UID_SLOTS 4096u
/* where every creator on the host claims uid slots ($GLOVEBOX_UID_LOCK overrides) */
#define GBX_UID_LOCK_PATH "/run/glovebox-uids.lock"

/* Process-wide context of the sandbox library: what every create needs and what is
 * expensive enough to prepare once (the sealed init image, the compiled seccomp filter,
 * the cgroup layout). */
struct gbx_runtime {
    char *state_dir;   /* owned */
    char *runtime_dir; /* owned */
    struct gbx_cg_layout cg;
    struct gbx_seccomp_prog seccomp;
    int init_fd;       /* sealed memfd holding glovebox-init */
    int slot_lock_fd;  /* GBX_UID_LOCK_PATH: one OFD byte lock per uid slot */
    uint32_t uid_base; /* first host uid of slot 0 */
    uint32_t uid_slots;
    /* slots this process holds (the byte locks do not tell: a lock of our own file
     * description never conflicts with itself): 0 free, 1 in use, 2 reserved for a restore
     * (a hibernated sandbox's); guarded by a mutex in userns.c */
    uint8_t slot_state[GBX_MAX_UID_SLOTS];
    char *staging_dir;  /* <runtime>/mnt: empty mount point each sandbox mounts over privately */
    char *trust_bundle; /* CA bundle bound over the sandbox's, or NULL (owned) */
    /* deadlines of external helpers, ms (0: the defaults below): a helper that takes longer
     * is killed with its process group and its step fails cleanly */
    int64_t criu_timeout_ms;   /* one criu dump or restore */
    int64_t helper_timeout_ms; /* tar of a writable layer, debootstrap, and the like */
    /* the spawner (spawner.c): its socket, pid, and whether creates may use it */
    int spawner_fd;
    pid_t spawner_pid;
    int spawner_ok; /* atomic */
};

#define GBX_DEFAULT_CRIU_TIMEOUT_MS (120 * 1000)
#define GBX_DEFAULT_HELPER_TIMEOUT_MS (30 * 60 * 1000)

struct gbx_sandbox_spec {
    const char *id;            /* [a-z0-9][a-z0-9-]*, at most GBX_ID_MAX */
    const char *template_name; /* NULL: "host" */
    struct gbx_cg_limits limits;
    uint64_t disk_bytes; /* size of the writable layer; 0: default (1 GiB) */
    int ctl_socket;      /* create <runtime>/sandboxes/<id>/ctl.sock for reconnects */
    /* read-only layers stacked on the template, top first (snapshots: trees stored as the
     * sandbox sees them, uid 0 on disk is root inside); at most GBX_MAX_LAYERS */
    const char *const *layers;
    size_t nlayers;
};

struct gbx_sandbox {
    char *id;
    const struct gbx_backend_ops *ops;
    struct gbx_runtime *rt; /* borrowed */
    pid_t init_pid;         /* host pid of glovebox-init */
    int pidfd;
    int conn_fd;    /* the creator's connection to init; take it with gbx_steal_fd */
    char *ctl_path; /* or NULL */
    char *dir;      /* <runtime>/sandboxes/<id>, or NULL */
    uint32_t uid_slot;
    uint32_t host_uid; /* host uid of the sandbox's root */
    struct gbx_cgroup cg;
    int exited;
    int exit_status;
    struct gbx_saved_spec *saved; /* what create asked for, for a checkpoint (sandbox/criu.h) */
    atomic_int cancel; /* set (from any thread) to stop a checkpoint or restore in progress */
};

struct gbx_saved_spec;

struct gbx_backend_ops {
    const char *name;
    int (*create)(struct gbx_runtime *rt, const struct gbx_sandbox_spec *spec,
                  struct gbx_sandbox **out, struct gbx_err **err);
    /* a new connection to the sandbox's agent (the exec channel) */
    int (*connect)(struct gbx_sandbox *sb, int *fd, struct gbx_err **err);
    int (*freeze)(struct gbx_sandbox *sb, struct gbx_err **err);
    int (*thaw)(struct gbx_sandbox *sb, struct gbx_err **err);
    int (*usage)(struct gbx_sandbox *sb, struct gbx_cg_usage *u, struct gbx_err **err);
    /* kill everything, wait, remove every trace; frees sb even on error */
    int (*destroy)(struct gbx_sandbox *sb, struct gbx_err **err);
    int (*checkpoint)(struct gbx_sandbox *sb, const char *dir, int *gone, struct gbx_err **err);
    int (*restore)(struct gbx_runtime *rt, const char *dir, struct gbx_sandbox **out,
                   struct gbx_err **err);
};

extern const struct gbx_backend_ops gbx_ns_backend;

struct gbx_runtime_opts {
    const char *state_dir;   /* NULL: $GLOVEBOX_STATE_DIR or the default */
    const char *runtime_dir; /* NULL: $GLOVEBOX_RUNTIME_DIR or the default */
};

int gbx_runtime_init(struct gbx_runtime *rt, const struct gbx_runtime_opts *o,
                     struct gbx_err **err) GBX_WUR;
void gbx_runtime_release(struct gbx_runtime *rt);
/* Sandboxes created from now on see path (a world-readable PEM bundle) as their system CA
 * bundle, /etc/ssl/certs/ca-certificates.crt, read-only (the egress CA rides in it). */
void gbx_runtime_set_trust_bundle(struct gbx_runtime *rt, const char *path);

/* Bring up loopback in the calling thread's network namespace (a restored sandbox's starts
 * empty: see criu.c). 0 or -errno. */
int gbx_sandbox_loopback_up(void);

/* Validate a sandbox id: a name (base/parse.h: 1-63 of [a-z0-9-], not starting with '-').
 * 0 or -EINVAL. */
static inline int gbx_sandbox_id_valid(const char *id)
{
    return gbx_name_valid(id);
}
/* A fresh random id ("sb-" + 12 hex digits), malloc'd. */
char *gbx_sandbox_id_new(void);

/* The sandbox's writable layer, seen from the host: an O_PATH directory fd holding upper/
 * (the overlay's upper dir: what the sandbox changed, owned by its host uids) and work/.
 * Read it while the sandbox is frozen for a consistent view. 0 or -1 with *err. */
int gbx_sandbox_layer_open(const struct gbx_sandbox *sb, int *fd, struct gbx_err **err) GBX_WUR;

/* Convenience wrappers over sb->ops. */
int gbx_sandbox_create(struct gbx_runtime *rt, const struct gbx_sandbox_spec *spec,
                       struct gbx_sandbox **out, struct gbx_err **err) GBX_WUR;
int gbx_sandbox_destroy(struct gbx_sandbox *sb, struct gbx_err **err);
/* What a daemon remembers of a sandbox to find it again after a restart. */
struct gbx_sandbox_record {
    const char *id;
    uint32_t uid_slot;
    uint32_t host_uid;
    pid_t init_pid;
};
/* Take charge of a running sandbox created by an earlier process: check that its init is
 * still the one recorded (same pid, same uid), re-lock its uid slot, open its cgroups and
 * connect to its control socket (the connection is in (*out)->conn_fd). Fails with
 * NOT_FOUND when the sandbox is gone; gbx_sandbox_reap then removes what it left. */
int gbx_sandbox_adopt(struct gbx_runtime *rt, const struct gbx_sandbox_record *rec,
                      struct gbx_sandbox **out, struct gbx_err **err) GBX_WUR;
/* Remove whatever a sandbox that cannot be adopted left on the host: its processes (if
 * any survive), cgroups, control socket and directory. */
int gbx_sandbox_reap(struct gbx_runtime *rt, const char *id, struct gbx_err **err);
/* A sandbox with no processes, the stand-in for a hibernated one. reserve: it reserves uid
 * slot uid_slot for the restore (no create takes it; the restore does); its destroy
 * releases the slot, gbx_sandbox_forget does not. Without reserve it holds nothing (a
 * placeholder while the real one is being dumped): only ever forget it. */
int gbx_sandbox_hold(struct gbx_runtime *rt, const char *id, uint32_t uid_slot, int reserve,
                     struct gbx_sandbox **out, struct gbx_err **err) GBX_WUR;
/* Reserve a stand-in's slot again after a failed restore released it. 0 or -errno (another
 * sandbox took it meanwhile). */
int gbx_sandbox_hold_renew(struct gbx_sandbox *sb) GBX_WUR;
/* Let go of a sandbox without stopping it (a daemon shutting down leaves sandboxes running
 * for the next one to adopt through their control sockets): frees sb, closes its fds. */
void gbx_sandbox_forget(struct gbx_sandbox *sb);

/* Open a new event-driven connection to a sandbox's agent (sandbox/agentconn.c). */
int gbx_aconn_open(struct event_base *base, struct gbx_sandbox *sb, gbx_aconn_event_fn on_event,
                   gbx_aconn_close_fn on_close, void *arg, struct gbx_aconn **out,
                   struct gbx_err **err) GBX_WUR;

#endif
