/* SPDX-License-Identifier: MIT */
/* The namespace backend: sandboxes as namespaces + cgroups + seccomp on this kernel. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/log.h"
#include "sandbox/criu.h"
#include "sandbox/init_image.h"
#include "agent/proto.h"
#include "sandbox/ns.h"
#include "sandbox/template.h"

#define GBX_UID_BASE 0x20000000u
#define GBX_UID_SLOTS 4096u
#define GBX_DEFAULT_DISK (1024ull << 20)

char *gbx_sandbox_id_new(void)
{
    unsigned char b[6];
    if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        memcpy(b, &ts.tv_nsec, sizeof(b) < sizeof(ts.tv_nsec) ? sizeof(b) : sizeof(ts.tv_nsec));
    }
    return gbx_asprintf("sb-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
}

static const char *env_or(const char *opt, const char *env, const char *def)
{
    if (opt && *opt)
        return opt;
    const char *e = getenv(env);
    return e && *e ? e : def;
}

/* The runtime dir names this instance: sandboxes of daemons with different runtime dirs
 * get different cgroups even when their ids are the same. FNV-1a is enough: the names only
 * need to differ, and the runtime dir is chosen by the operator. */
static void cg_scope(struct gbx_runtime *rt)
{
    rt->cg.scope[0] = '\0';
    if (strcmp(rt->runtime_dir, GBX_DEFAULT_RUNTIME_DIR) == 0)
        return;
    uint32_t h = 2166136261u;
    for (const char *p = rt->runtime_dir; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    snprintf(rt->cg.scope, sizeof(rt->cg.scope), "g%08x-", h);
}

int gbx_runtime_init(struct gbx_runtime *rt, const struct gbx_runtime_opts *o, struct gbx_err **err)
{
    memset(rt, 0, sizeof(*rt));
    rt->init_fd = rt->slot_lock_fd = rt->spawner_fd = -1;
    rt->spawner_pid = -1;
    rt->state_dir =
        gbx_xstrdup(env_or(o ? o->state_dir : NULL, "GLOVEBOX_STATE_DIR", GBX_DEFAULT_STATE_DIR));
    rt->runtime_dir = gbx_xstrdup(
        env_or(o ? o->runtime_dir : NULL, "GLOVEBOX_RUNTIME_DIR", GBX_DEFAULT_RUNTIME_DIR));
    rt->uid_base = GBX_UID_BASE;
    rt->uid_slots = GBX_UID_SLOTS;
    rt->staging_dir = gbx_asprintf("%s/mnt", rt->runtime_dir);
    gbx_autofree char *sbdir = gbx_asprintf("%s/sandboxes", rt->runtime_dir);
    /* the uid ranges are the host's, whatever the runtime dir: every creator on this host
     * (daemons with other runtime dirs, `glovebox run`) claims its slots in one file */
    const char *lockenv = getenv("GLOVEBOX_UID_LOCK");
    gbx_autofree char *lockp = gbx_xstrdup(lockenv && *lockenv ? lockenv : GBX_UID_LOCK_PATH);
    int r;

    if (geteuid() != 0) {
        gbx_err_set(err, EPERM, GBX_ERR_PERMISSION,
                    "glovebox needs root to create sandboxes (it maps each sandbox to its own "
                    "unprivileged uid range)");
        goto fail;
    }
    /* the runtime dir must be searchable: sandbox children resolve the staging path after
     * they dropped to their unprivileged uid. A directory on the way that is not (what
     * mktemp -d makes) is refused now, by name, rather than at every create */
    const char *dirs[] = {rt->state_dir, rt->runtime_dir, rt->staging_dir};
    char closed[4096];
    if ((r = gbx_path_unsearchable(rt->runtime_dir, closed, sizeof(closed))) != 0) {
        if (r < 0)
            gbx_err_sys(err, -r, "cannot examine the runtime dir '%s'", rt->runtime_dir);
        else
            gbx_err_set(err, EACCES, GBX_ERR_PERMISSION,
                        "the runtime dir '%s' is under '%s', which others cannot search "
                        "(sandboxes reach the runtime dir with their own unprivileged uids): "
                        "run 'chmod o+x %s', or choose a runtime dir elsewhere",
                        rt->runtime_dir, closed, closed);
        goto fail;
    }
    for (size_t i = 0; i < GBX_ARRAY_SIZE(dirs); i++) {
        if ((r = gbx_mkdir_p(dirs[i], 0711)) < 0) {
            gbx_err_sys(err, -r, "cannot create '%s'", dirs[i]);
            goto fail;
        }
    }
    if ((r = gbx_mkdir_p(sbdir, 0700)) < 0) {
        gbx_err_sys(err, -r, "cannot create '%s'", sbdir);
        goto fail;
    }
    rt->slot_lock_fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (rt->slot_lock_fd < 0) {
        gbx_err_sys(err, errno, "cannot open '%s'", lockp);
        goto fail;
    }
    if (gbx_cg_layout_detect(&rt->cg, err) < 0)
        goto fail;
    cg_scope(rt);
    if (gbx_cgroup_prepare(&rt->cg, err) < 0)
        goto fail;
    if (!getenv("GLOVEBOX_NO_FAVORDYNMODS")) {
        gbx_autofree char *scratch = gbx_asprintf("%s/cgroup2-tune", rt->runtime_dir);
        (void)gbx_cg_favor_dynmods(&rt->cg, scratch);
    }
    gbx_seccomp_prebuilt(&rt->seccomp);
    /* CRIU keeps what it probes of the kernel (25 ms a run here) in /run/criu.kdat only when
     * /run is a tmpfs; point it at the runtime dir instead (scripts/criu-patches/0004), and
     * start each process with a fresh probe (a new kernel means a new boot, and a new one) */
    if (getenv("CRIU_KDAT_FILE") == NULL) {
        gbx_autofree char *kdat = gbx_asprintf("%s/criu.kdat", rt->runtime_dir);
        gbx_autofree char *tmp = gbx_asprintf("%s.tmp", kdat);
        (void)unlink(kdat);
        (void)unlink(tmp);
        (void)setenv("CRIU_KDAT_FILE", kdat, 0); /* before any thread runs CRIU */
    }
    if ((rt->init_fd = gbx_init_image_open()) < 0) {
        gbx_err_sys(err, -rt->init_fd, "cannot prepare the glovebox-init image");
        goto fail;
    }
    if ((r = gbx_spawner_start(rt)) < 0 && r != -ENOSYS)
        gbx_log_warn("cannot start the sandbox spawner (%s): sandboxes are cloned by the daemon",
                     strerror(-r));
    return 0;
fail:
    gbx_err_wrap(err, "initialise sandbox runtime");
    gbx_runtime_release(rt);
    return -1;
}

void gbx_runtime_release(struct gbx_runtime *rt)
{
    gbx_spawner_stop(rt);
    free(rt->state_dir);
    free(rt->runtime_dir);
    free(rt->staging_dir);
    free(rt->trust_bundle);
    gbx_cg_layout_release(&rt->cg);
    gbx_seccomp_prog_release(&rt->seccomp);
    if (rt->init_fd >= 0)
        close(rt->init_fd);
    if (rt->slot_lock_fd >= 0)
        close(rt->slot_lock_fd);
    memset(rt, 0, sizeof(*rt));
    rt->init_fd = rt->slot_lock_fd = rt->spawner_fd = -1;
    rt->spawner_pid = -1;
}

int gbx_ns_ctl_listen(struct gbx_sandbox *sb, int restoring, struct gbx_err **err)
{
    if (sb->dir == NULL) /* set already when an init is given a listener again */
        sb->dir = gbx_asprintf("%s/sandboxes/%s", sb->rt->runtime_dir, sb->id);
    if (mkdir(sb->dir, 0700) < 0 && !(restoring && errno == EEXIST)) {
        int e = errno;
        free(sb->dir);
        sb->dir = NULL;
        return gbx_err_sys(err, e, "cannot create '%s/sandboxes/%s'", sb->rt->runtime_dir, sb->id);
    }
    if (sb->ctl_path == NULL)
        sb->ctl_path = gbx_asprintf("%s/ctl.sock", sb->dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(sb->ctl_path) >= sizeof(sa.sun_path))
        return gbx_err_set(err, ENAMETOOLONG, GBX_ERR_INVALID, "control socket path too long");
    strcpy(sa.sun_path, sb->ctl_path);
    if (restoring)
        (void)unlink(sb->ctl_path); /* the one the dumped sandbox had */
    /* a restored init keeps the listener it is handed as it is: non-blocking (it accepts until
     * EAGAIN); a new init makes its own so */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (restoring ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return gbx_err_sys(err, errno, "cannot create control socket");
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
        int e = errno;
        close(fd);
        return gbx_err_sys(err, e, "cannot listen on '%s'", sb->ctl_path);
    }
    return fd;
}

static void sandbox_free(struct gbx_sandbox *sb)
{
    if (sb == NULL)
        return;
    if (sb->conn_fd >= 0)
        close(sb->conn_fd);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    gbx_cgroup_release(&sb->cg);
    gbx_saved_spec_free(sb->saved);
    free(sb->ctl_path);
    free(sb->dir);
    free(sb->id);
    free(sb);
}

#define KILL_WAIT_MS 10000

/* Kill the whole sandbox and wait until init (and with it the pid namespace) is gone, for at
 * most KILL_WAIT_MS: a process stuck in the kernel may not die at once, and nothing waits
 * forever. 0 once init is gone, -ETIMEDOUT when it is still there. */
static int kill_and_wait(struct gbx_sandbox *sb)
{
    if (sb->init_pid <= 0 || sb->exited)
        return 0;
    if (sb->pidfd >= 0)
        (void)syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    else
        kill(sb->init_pid, SIGKILL);
    int gone = 0;
    if (sb->pidfd >= 0) {
        /* readable once init has exited, our child or not (re-adopted after a restart) */
        struct pollfd pfd = {sb->pidfd, POLLIN, 0};
        long pr = GBX_RETRY(poll(&pfd, 1, KILL_WAIT_MS)); /* (cppcheck: not in one expression) */
        gone = pr > 0;
    } else {
        for (int i = 0; i < KILL_WAIT_MS && !gone; i++) {
            gone = kill(sb->init_pid, 0) < 0 && errno == ESRCH;
            if (!gone && waitpid(sb->init_pid, NULL, WNOHANG | __WALL) == sb->init_pid)
                gone = 1;
            if (!gone)
                usleep(1000);
        }
    }
    int status;
    (void)waitpid(sb->init_pid, &status, WNOHANG | __WALL); /* ours: reaped */
    if (!gone)
        return -ETIMEDOUT;
    sb->exited = 1;
    return 0;
}

/* Kill everything, wait, and remove what the sandbox has on the host. Returns 0, or -1 with
 * *err (may be NULL) naming what could not be removed; it carries on regardless. */
static int teardown(struct gbx_sandbox *sb, int slot_held, struct gbx_err **err)
{
    int r = 0, lingering = 0;
    if (kill_and_wait(sb) < 0) {
        lingering = 1;
        r = gbx_err_set(err, ETIMEDOUT, GBX_ERR_INTERNAL,
                        "sandbox '%s': its init %d did not die within %d s of SIGKILL (stuck in "
                        "the kernel?)",
                        sb->id, (int)sb->init_pid, KILL_WAIT_MS / 1000);
    }
    if (sb->cg.layout) {
        (void)!gbx_cgroup_kill(&sb->cg, NULL);
        if (gbx_cgroup_destroy(&sb->cg, r == 0 ? err : NULL) < 0) {
            lingering = 1; /* processes still in its groups */
            r = -1;
        }
    }
    if (sb->ctl_path)
        (void)unlink(sb->ctl_path);
    if (sb->dir && rmdir(sb->dir) < 0 && errno != ENOENT && r == 0)
        r = gbx_err_sys(err, errno, "cannot remove '%s'", sb->dir);
    /* a uid range with processes still in it is not handed to another sandbox: it stays
     * taken until this daemon exits (and the next one finds no row for it) */
    if (slot_held && !lingering)
        gbx_ns_slot_release(sb->rt, sb->uid_slot);
    return r;
}

static int ns_create(struct gbx_runtime *rt, const struct gbx_sandbox_spec *spec,
                     struct gbx_sandbox **out, struct gbx_err **err)
{
    if (gbx_sandbox_id_valid(spec->id) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "invalid sandbox id '%s': use 1-63 of [a-z0-9-], not starting "
                           "with '-'",
                           spec->id ? spec->id : "");
    struct gbx_template tmpl;
    if (gbx_template_open(rt->state_dir,
                          spec->template_name ? spec->template_name : GBX_DEFAULT_TEMPLATE, &tmpl,
                          err) < 0)
        return gbx_err_wrap(err, "create sandbox '%s'", spec->id);

    struct gbx_sandbox *sb = gbx_xcalloc(1, sizeof(*sb));
    sb->id = gbx_xstrdup(spec->id);
    sb->ops = &gbx_ns_backend;
    sb->rt = rt;
    sb->pidfd = sb->conn_fd = -1;
    sb->cg.v2fd = -1;
    int ctl_fd = -1, conn[2] = {-1, -1}, slot_held = 0, r;

    if ((r = gbx_ns_slot_acquire(rt, &sb->uid_slot)) < 0) {
        gbx_err_sys(err, -r, "no free uid range");
        goto fail;
    }
    slot_held = 1;
    sb->host_uid = rt->uid_base + sb->uid_slot * GBX_UID_RANGE;
    if (gbx_cgroup_begin(&sb->cg, &rt->cg, spec->id, err) < 0)
        goto fail;
    if (spec->ctl_socket && (ctl_fd = gbx_ns_ctl_listen(sb, 0, err)) < 0)
        goto fail;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, conn) < 0) {
        gbx_err_sys(err, errno, "cannot create agent connection");
        goto fail;
    }

    struct gbx_child_plan *p = gbx_xcalloc(1, sizeof(*p));
    uint64_t disk = spec->disk_bytes ? spec->disk_bytes : GBX_DEFAULT_DISK;
    snprintf(p->staging, sizeof(p->staging), "%s", rt->staging_dir);
    snprintf(p->upper, sizeof(p->upper), "%s/upper", rt->staging_dir);
    snprintf(p->work, sizeof(p->work), "%s/work", rt->staging_dir);
    snprintf(p->lower, sizeof(p->lower), "%s/lower", rt->staging_dir);
    snprintf(p->root, sizeof(p->root), "%s/root", rt->staging_dir);
    if (spec->nlayers > GBX_MAX_LAYERS) {
        free(p);
        gbx_err_set(err, E2BIG, GBX_ERR_INVALID, "more than %d snapshot layers", GBX_MAX_LAYERS);
        goto fail;
    }
    size_t off = (size_t)snprintf(p->overlay_opts, sizeof(p->overlay_opts), "lowerdir=");
    for (size_t i = 0; i < spec->nlayers; i++)
        off += (size_t)snprintf(p->overlay_opts + off, sizeof(p->overlay_opts) - off,
                                "%s/l%zu:", rt->staging_dir, i);
    snprintf(p->overlay_opts + off, sizeof(p->overlay_opts) - off,
             "%s,upperdir=%s,workdir=%s,userxattr", p->lower, p->upper, p->work);
    snprintf(p->layer_opts, sizeof(p->layer_opts), "size=%llu,mode=755", (unsigned long long)disk);
    snprintf(p->tmp_opts, sizeof(p->tmp_opts), "size=%llu,mode=1777", (unsigned long long)disk);
    snprintf(p->hostname, sizeof(p->hostname), "%s", spec->id);
    snprintf(p->trust_bundle, sizeof(p->trust_bundle), "%s",
             rt->trust_bundle ? rt->trust_bundle : "");
    p->usr_host = tmpl.usr_host;
    p->conn_fd = conn[1];
    p->ctl_fd = ctl_fd;
    p->init_fd = rt->init_fd;
    p->seccomp = &rt->seccomp;
    r = gbx_ns_spawn(rt, sb, p, tmpl.rootfs, spec->layers, spec->nlayers, &spec->limits, err);
    free(p);
    close(conn[1]);
    conn[1] = -1;
    if (ctl_fd >= 0)
        close(ctl_fd);
    ctl_fd = -1;
    if (r < 0)
        goto fail;
    sb->conn_fd = conn[0];
    gbx_sandbox_keep_spec(sb, spec);
    gbx_template_release(&tmpl);
    *out = sb;
    return 0;

fail:
    if (ctl_fd >= 0)
        close(ctl_fd);
    if (conn[0] >= 0)
        close(conn[0]);
    if (conn[1] >= 0)
        close(conn[1]);
    (void)teardown(sb, slot_held, NULL);
    sandbox_free(sb);
    gbx_template_release(&tmpl);
    return gbx_err_wrap(err, "create sandbox '%s'", spec->id);
}

static int ns_connect(struct gbx_sandbox *sb, int *fd, struct gbx_err **err)
{
    if (sb->ctl_path == NULL)
        return gbx_err_set(err, ENOTCONN, GBX_ERR_UNAVAILABLE, "sandbox '%s' has no control socket",
                           sb->id);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sb->ctl_path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return gbx_err_sys(err, errno, "cannot create socket");
    if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(s);
        return gbx_err_sys(err, e, "cannot connect to sandbox '%s'", sb->id);
    }
    *fd = s;
    return 0;
}

static int ns_freeze(struct gbx_sandbox *sb, struct gbx_err **err)
{
    if (gbx_cgroup_freeze(&sb->cg, 1, err) < 0)
        return gbx_err_wrap(err, "pause sandbox '%s'", sb->id);
    return 0;
}

static int ns_thaw(struct gbx_sandbox *sb, struct gbx_err **err)
{
    if (gbx_cgroup_freeze(&sb->cg, 0, err) < 0)
        return gbx_err_wrap(err, "resume sandbox '%s'", sb->id);
    return 0;
}

static int ns_usage(struct gbx_sandbox *sb, struct gbx_cg_usage *u, struct gbx_err **err)
{
    return gbx_cgroup_usage(&sb->cg, u, err);
}

static int ns_destroy(struct gbx_sandbox *sb, struct gbx_err **err)
{
    if (sb == NULL)
        return 0;
    /* a frozen sandbox must be thawed for SIGKILL to complete */
    if (sb->cg.v2dir || sb->cg.dir[GBX_CG_FREEZER])
        (void)!gbx_cgroup_freeze(&sb->cg, 0, NULL);
    int r = teardown(sb, 1, err);
    if (r < 0)
        gbx_err_wrap(err, "destroy sandbox '%s'", sb->id);
    sandbox_free(sb);
    return r;
}

const struct gbx_backend_ops gbx_ns_backend = {
    .name = "ns",
    .create = ns_create,
    .connect = ns_connect,
    .freeze = ns_freeze,
    .thaw = ns_thaw,
    .usage = ns_usage,
    .destroy = ns_destroy,
    .checkpoint = gbx_ns_checkpoint, /* criu.c */
    .restore = gbx_ns_restore,
};

int gbx_sandbox_create(struct gbx_runtime *rt, const struct gbx_sandbox_spec *spec,
                       struct gbx_sandbox **out, struct gbx_err **err)
{
    return gbx_ns_backend.create(rt, spec, out, err);
}

int gbx_sandbox_destroy(struct gbx_sandbox *sb, struct gbx_err **err)
{
    if (sb == NULL)
        return 0;
    return sb->ops->destroy(sb, err);
}

void gbx_sandbox_forget(struct gbx_sandbox *sb)
{
    /* the uid slot's lock stays with this process until it exits */
    sandbox_free(sb);
}

/* Is pid still the init we recorded: alive, and running as the sandbox's host uid? */
static int init_matches(pid_t pid, uint32_t host_uid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    gbx_autofree char *st = NULL;
    if (pid <= 1 || gbx_read_file(path, 1 << 16, &st, NULL) < 0)
        return 0;
    char want[64];
    snprintf(want, sizeof(want), "\nUid:\t%u\t", host_uid);
    return strstr(st, want) != NULL;
}

int gbx_sandbox_adopt(struct gbx_runtime *rt, const struct gbx_sandbox_record *rec,
                      struct gbx_sandbox **out, struct gbx_err **err)
{
    if (gbx_sandbox_id_valid(rec->id) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "invalid sandbox id '%s'", rec->id);
    struct gbx_sandbox *sb = gbx_xcalloc(1, sizeof(*sb));
    sb->id = gbx_xstrdup(rec->id);
    sb->ops = &gbx_ns_backend;
    sb->rt = rt;
    sb->pidfd = sb->conn_fd = -1;
    sb->cg.v2fd = -1;
    sb->init_pid = rec->init_pid;
    sb->uid_slot = rec->uid_slot;
    sb->host_uid = rec->host_uid;
    sb->dir = gbx_asprintf("%s/sandboxes/%s", rt->runtime_dir, rec->id);
    sb->ctl_path = gbx_asprintf("%s/ctl.sock", sb->dir);
    int r;
    /* the pidfd pins the process; checking its uid after taking it rules out a reused pid */
    sb->pidfd = (int)syscall(SYS_pidfd_open, rec->init_pid, 0);
    if (sb->pidfd < 0 || !init_matches(rec->init_pid, rec->host_uid)) {
        gbx_err_set(err, ESRCH, GBX_ERR_NOT_FOUND,
                    "sandbox '%s' is gone (its init %d no longer runs)", rec->id,
                    (int)rec->init_pid);
        goto fail;
    }
    if ((r = gbx_ns_slot_lock(rt, rec->uid_slot)) < 0) {
        gbx_err_sys(err, -r, "sandbox '%s': cannot lock its uid range", rec->id);
        goto fail;
    }
    if (gbx_cgroup_open(&sb->cg, &rt->cg, rec->id, err) < 0)
        goto fail_slot;
    if (ns_connect(sb, &sb->conn_fd, NULL) < 0) {
        /* nobody listens: a hibernate the last daemon did not finish (it died during the
         * dump) left init with a placeholder; give it its listener back. Its layer handle
         * went with the old daemon: snapshots of it are refused from now on */
        struct gbx_err *uerr = NULL;
        if (gbx_sandbox_unhibernate(sb, -1, &uerr) < 0) {
            gbx_err_set(err, ECONNREFUSED, GBX_ERR_UNAVAILABLE,
                        "sandbox '%s': its init does not answer: %s", rec->id, uerr->msg);
            gbx_err_free(uerr);
            goto fail_slot;
        }
        gbx_log_warn("sandbox '%s': a hibernate that did not finish is undone; it runs on",
                     rec->id);
        if (ns_connect(sb, &sb->conn_fd, err) < 0)
            goto fail_slot;
    }
    *out = sb;
    return 0;
fail_slot:
    gbx_ns_slot_release(rt, rec->uid_slot);
fail:
    sandbox_free(sb);
    return gbx_err_wrap(err, "adopt sandbox '%s'", rec->id);
}

int gbx_sandbox_reap(struct gbx_runtime *rt, const char *id, struct gbx_err **err)
{
    if (gbx_sandbox_id_valid(id) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "invalid sandbox id '%s'", id);
    struct gbx_cgroup cg;
    int r = 0;
    if (gbx_cgroup_open(&cg, &rt->cg, id, NULL) == 0) {
        (void)!gbx_cgroup_freeze(&cg, 0, NULL);
        (void)!gbx_cgroup_kill(&cg, NULL);
        if (gbx_cgroup_destroy(&cg, err) < 0)
            r = -1;
        gbx_cgroup_release(&cg);
    }
    gbx_autofree char *dir = gbx_asprintf("%s/sandboxes/%s", rt->runtime_dir, id);
    gbx_autofree char *ctl = gbx_asprintf("%s/ctl.sock", dir);
    (void)unlink(ctl);
    if (rmdir(dir) < 0 && errno != ENOENT && r == 0)
        r = gbx_err_sys(err, errno, "cannot remove '%s'", dir);
    return r;
}

int gbx_sandbox_layer_open(const struct gbx_sandbox *sb, int *fd, struct gbx_err **err)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)sb->init_pid, GBX_INIT_LAYER_FD);
    *fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0)
        return gbx_err_sys(err, errno, "sandbox '%s': cannot reach its writable layer", sb->id);
    return 0;
}

void gbx_runtime_set_trust_bundle(struct gbx_runtime *rt, const char *path)
{
    free(rt->trust_bundle);
    rt->trust_bundle = path ? gbx_xstrdup(path) : NULL;
}
