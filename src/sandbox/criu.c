/* SPDX-License-Identifier: MIT */
/* Hibernate with CRIU (docs/hibernate.md).
 *
 * checkpoint                                   restore (any process)
 *   scan init's mountinfo: every bind mount      lock the uid slot, cgroups, new listener at
 *   from outside becomes --external mnt[..]      <runtime>/sandboxes/<id>/ctl.sock
 *   hold the writable layer (init's fd 7)        a throwaway userns with the slot's map for
 *   HIBERNATE: init drops every connection,      idmapped clones of template, layers, /usr
 *   parks a placeholder at fd 3                  child: private mount ns, tmpfs at staging,
 *   criu dump (kills the tree)                   upper.tar unpacked, overlay at root/,
 *   tar the upper (its tmpfs outlives the        joins the cgroups, exec criu restore
 *   tree through our layer fd)                   --root root/ --inherit-fd fd[3]:placeholder
 *   hibernate.conf; tear the rest down           connect to ctl.sock
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/client.h"
#include "agent/frame.h"
#include "agent/proto.h"
#include "base/conf.h"
#include "base/child.h"
#include "base/clock.h"
#include "base/fault.h"
#include "base/fileutil.h"
#include "base/mem.h"
#include "sandbox/criu.h"
#include "sandbox/criu_int.h"
#include "sandbox/ns.h"
#include "sandbox/template.h"

#define CONF_NAME "hibernate.conf"
#define TRUST_MOUNTPOINT "/etc/ssl/certs/ca-certificates.crt"

/* ---- the saved spec --------------------------------------------------------------------- */

void gbx_sandbox_keep_spec(struct gbx_sandbox *sb, const struct gbx_sandbox_spec *spec)
{
    gbx_saved_spec_free(sb->saved);
    struct gbx_saved_spec *s = gbx_xcalloc(1, sizeof(*s));
    s->template_name =
        gbx_xstrdup(spec->template_name ? spec->template_name : GBX_DEFAULT_TEMPLATE);
    s->nlayers = spec->nlayers;
    s->layers = gbx_xcalloc(spec->nlayers + 1, sizeof(char *));
    for (size_t i = 0; i < spec->nlayers; i++)
        s->layers[i] = gbx_xstrdup(spec->layers[i]);
    s->limits = spec->limits;
    s->disk_bytes = spec->disk_bytes;
    sb->saved = s;
}

void gbx_saved_spec_free(struct gbx_saved_spec *s)
{
    if (s == NULL)
        return;
    free(s->template_name);
    for (size_t i = 0; i < s->nlayers; i++)
        free(s->layers[i]);
    free(s->layers);
    free(s);
}

/* ---- the conf file ---------------------------------------------------------------------- */

struct hib_conf {
    char *id;
    uint32_t uid_slot, host_uid;
    struct gbx_saved_spec spec;
    unsigned long placeholder;       /* inode of init's fd-3 placeholder socket */
    unsigned long layer_placeholder; /* inode of the one at fd 7 (the layer handle) */
    char *ext_mp[MAX_EXTERNALS];     /* mountpoints inside the sandbox */
    char *ext_key[MAX_EXTERNALS];    /* dev-<name>, usr, trust */
    size_t next;
};

static void hib_conf_release(struct hib_conf *c)
{
    free(c->id);
    free(c->spec.template_name);
    for (size_t i = 0; i < c->spec.nlayers; i++)
        free(c->spec.layers[i]);
    free(c->spec.layers);
    for (size_t i = 0; i < c->next; i++) {
        free(c->ext_mp[i]);
        free(c->ext_key[i]);
    }
    memset(c, 0, sizeof(*c));
}

static int conf_line(void *arg, const char *key, const char *value, unsigned line)
{
    struct hib_conf *c = arg;
    char *end = NULL;
    if (strcmp(key, "id") == 0) {
        free(c->id);
        c->id = gbx_xstrdup(value);
    } else if (strcmp(key, "uid_slot") == 0) {
        c->uid_slot = (uint32_t)strtoul(value, &end, 10);
    } else if (strcmp(key, "host_uid") == 0) {
        c->host_uid = (uint32_t)strtoul(value, &end, 10);
    } else if (strcmp(key, "template") == 0) {
        free(c->spec.template_name);
        c->spec.template_name = gbx_xstrdup(value);
    } else if (strcmp(key, "layer") == 0) {
        if (c->spec.nlayers >= GBX_MAX_LAYERS)
            return -E2BIG;
        c->spec.layers = gbx_xrealloc(c->spec.layers, (c->spec.nlayers + 2) * sizeof(char *));
        c->spec.layers[c->spec.nlayers++] = gbx_xstrdup(value);
        c->spec.layers[c->spec.nlayers] = NULL;
    } else if (strcmp(key, "disk_bytes") == 0) {
        c->spec.disk_bytes = strtoull(value, &end, 10);
    } else if (strcmp(key, "memory_bytes") == 0) {
        c->spec.limits.memory_bytes = strtoull(value, &end, 10);
    } else if (strcmp(key, "pids") == 0) {
        c->spec.limits.pids = strtoull(value, &end, 10);
    } else if (strcmp(key, "cpu_millis") == 0) {
        c->spec.limits.cpu_millis = (uint32_t)strtoul(value, &end, 10);
    } else if (strcmp(key, "placeholder") == 0) {
        c->placeholder = strtoul(value, &end, 10);
    } else if (strcmp(key, "layer_placeholder") == 0) {
        c->layer_placeholder = strtoul(value, &end, 10);
    } else if (strcmp(key, "external") == 0) {
        const char *sp = strrchr(value, ' ');
        if (sp == NULL || c->next >= MAX_EXTERNALS)
            return -EINVAL;
        c->ext_mp[c->next] = gbx_xstrndup(value, (size_t)(sp - value));
        c->ext_key[c->next++] = gbx_xstrdup(sp + 1);
    }
    /* unknown keys: written by a newer version; ignored */
    return end && *end ? -EINVAL : 0;
}

/* ---- checkpoint ------------------------------------------------------------------------- */

/* Bind mounts from outside in init's mount table, each with its restore key. */
static int scan_externals(struct gbx_sandbox *sb, struct hib_conf *c, struct gbx_err **err)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)sb->init_pid);
    gbx_autofree char *text = NULL;
    if (gbx_read_file(path, 1 << 20, &text, NULL) < 0)
        return gbx_err_sys(err, errno, "cannot read '%s'", path);
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char root[1024], mp[1024], fstype[64];
        const char *dash = strstr(l, " - ");
        if (dash == NULL || sscanf(l, "%*s %*s %*s %1023s %1023s", root, mp) != 2 ||
            sscanf(dash + 3, "%63s", fstype) != 1)
            continue;
        if (strcmp(mp, "/") == 0)
            continue; /* the root: CRIU takes it from --root */
        /* the daemon's binds first, whatever filesystem their source is on (the trust bundle
         * lives in the runtime dir, which may be a tmpfs) */
        int ours = strcmp(mp, "/usr") == 0 || strcmp(mp, TRUST_MOUNTPOINT) == 0;
        static const char *const own[] = {"proc", "tmpfs", "devpts", "mqueue", "sysfs"};
        int handled = 0;
        for (size_t i = 0; i < GBX_ARRAY_SIZE(own); i++)
            handled |= strcmp(fstype, own[i]) == 0;
        if (handled && !ours)
            continue; /* CRIU dumps these itself (tmpfs with its contents) */
        char *key;
        if (strchr(mp, '\\'))
            return gbx_err_set(err, ENOTSUP, GBX_ERR_UNAVAILABLE,
                               "cannot hibernate: mount point '%s' has escaped characters", mp);
        if (strcmp(fstype, "devtmpfs") == 0 && strchr(root + 1, '/') == NULL)
            key = gbx_asprintf("dev-%s", root + 1);
        else if (strcmp(mp, "/usr") == 0)
            key = gbx_xstrdup("usr");
        else if (strcmp(mp, TRUST_MOUNTPOINT) == 0)
            key = gbx_xstrdup("trust");
        else
            return gbx_err_set(err, ENOTSUP, GBX_ERR_UNAVAILABLE,
                               "cannot hibernate: unknown mount at '%s' (%s %s)", mp, fstype, root);
        if (c->next >= MAX_EXTERNALS) {
            free(key);
            return gbx_err_set(err, E2BIG, GBX_ERR_UNAVAILABLE,
                               "cannot hibernate: too many "
                               "mounts");
        }
        c->ext_mp[c->next] = gbx_xstrdup(mp);
        c->ext_key[c->next++] = key;
    }
    return 0;
}

/* Tell init to get ready (GBX_MSG_HIBERNATE) and wait until it closed the connection. */
static int send_hibernate(struct gbx_sandbox *sb, struct gbx_err **err)
{
    int fd = -1;
    if (sb->ops->connect(sb, &fd, err) < 0)
        return -1;
    struct gbx_agent *a = NULL;
    if (gbx_agent_open(fd, &a, err) < 0)
        return -1;
    fd = gbx_agent_fd(a);
    uint8_t buf[GBX_FRAME_HDR_SIZE + 16];
    struct gbx_msg m;
    gbx_msg_start(&m, buf, sizeof(buf), GBX_MSG_HIBERNATE, 0x4849);
    long n = gbx_msg_finish(&m);
    int r = 0;
    if (n <= 0 || gbx_write_all(fd, buf, (size_t)n) < 0) {
        r = gbx_err_sys(err, errno ? errno : EIO, "cannot ask init to hibernate");
    } else {
        /* the reply (OK or ERROR), then EOF once init closed everything */
        uint8_t in[4096];
        size_t have = 0;
        ssize_t k;
        struct pollfd pfd = {fd, POLLIN, 0};
        while (poll(&pfd, 1, 10000) > 0 &&
               (k = GBX_RETRY(read(fd, in + have, sizeof(in) - have))) > 0)
            have += (size_t)k;
        struct gbx_frame_hdr h;
        if (gbx_frame_decode_hdr(in, have, &h) != 0 || h.type != GBX_MSG_OK)
            r = gbx_err_set(err, EPROTO, GBX_ERR_INTERNAL,
                            "init of sandbox '%s' refused to hibernate (is it too old?)", sb->id);
    }
    gbx_agent_free(a);
    if (sb->conn_fd >= 0) {
        close(sb->conn_fd);
        sb->conn_fd = -1;
    }
    return r;
}

/* The inode of the socket at fd of pid. */
static int placeholder_ino(pid_t pid, int fd, unsigned long *ino)
{
    char link[64], target[64];
    snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)pid, fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0)
        return -1;
    target[n] = '\0';
    return sscanf(target, "socket:[%lu]", ino) == 1 ? 0 : -1;
}

static int write_conf(const char *dir, const struct hib_conf *c, struct gbx_err **err)
{
    size_t cap = 8192, len = 0;
    gbx_autofree char *t = gbx_xcalloc(1, cap);
#define ADD(...)                                                                                   \
    do {                                                                                           \
        int k_ = snprintf(t + len, cap - len, __VA_ARGS__);                                        \
        if (k_ < 0 || (size_t)k_ >= cap - len)                                                     \
            return gbx_err_set(err, E2BIG, GBX_ERR_INTERNAL, "hibernate.conf too large");          \
        len += (size_t)k_;                                                                         \
    } while (0)
    ADD("# glovebox hibernate image (docs/hibernate.md)\nformat = 1\n");
    ADD("id = %s\nuid_slot = %u\nhost_uid = %u\n", c->id, c->uid_slot, c->host_uid);
    ADD("template = \"%s\"\n", c->spec.template_name);
    for (size_t i = 0; i < c->spec.nlayers; i++)
        ADD("layer = \"%s\"\n", c->spec.layers[i]);
    ADD("disk_bytes = %llu\nmemory_bytes = %llu\npids = %llu\ncpu_millis = %u\n",
        (unsigned long long)c->spec.disk_bytes, (unsigned long long)c->spec.limits.memory_bytes,
        (unsigned long long)c->spec.limits.pids, c->spec.limits.cpu_millis);
    ADD("placeholder = %lu\nlayer_placeholder = %lu\n", c->placeholder, c->layer_placeholder);
    for (size_t i = 0; i < c->next; i++)
        ADD("external = \"%s %s\"\n", c->ext_mp[i], c->ext_key[i]);
#undef ADD
    gbx_autofree char *p = gbx_asprintf("%s/" CONF_NAME, dir);
    int r = gbx_write_file_durable(p, t, len, 0600);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot write '%s'", p);
    return 0;
}

/* ---- a hibernate that did not happen ---------------------------------------------------- */

/* The sandbox's processes that are stopped (state T or t), as "pid," lines into buf. */
static void stopped_tasks(const struct gbx_sandbox *sb, char *buf, size_t bufsz)
{
    buf[0] = '\0';
    if (sb->cg.v2dir == NULL)
        return;
    gbx_autofree char *procs = gbx_asprintf("%s/cgroup.procs", sb->cg.v2dir);
    gbx_autofree char *text = NULL;
    if (gbx_read_file(procs, 1 << 20, &text, NULL) < 0)
        return;
    size_t len = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%s/stat", l);
        gbx_autofree char *st = NULL;
        if (gbx_read_file(path, 4096, &st, NULL) < 0)
            continue;
        const char *rp = strrchr(st, ')');
        if (rp == NULL || (rp[2] != 'T' && rp[2] != 't'))
            continue;
        int k = snprintf(buf + len, bufsz - len, "%s,", l);
        if (k < 0 || (size_t)k >= bufsz - len)
            break;
        len += (size_t)k;
    }
}

/* Processes CRIU left stopped (stopped now, not before the dump) go on. */
static void continue_stopped(const struct gbx_sandbox *sb, const char *before)
{
    char now[4096];
    stopped_tasks(sb, now, sizeof(now));
    gbx_autofree char *was = gbx_asprintf(",%s", before);
    char *save = NULL;
    for (char *p = strtok_r(now, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char key[32];
        snprintf(key, sizeof(key), ",%s,", p);
        if (strstr(was, key) == NULL)
            (void)kill((pid_t)atoi(p), SIGCONT);
    }
}

/* 1 while a task of the sandbox is still traced (by a criu on its way out). */
static int any_traced(const struct gbx_sandbox *sb)
{
    gbx_autofree char *procs = gbx_asprintf("%s/cgroup.procs", sb->cg.v2dir);
    gbx_autofree char *text = NULL;
    if (sb->cg.v2dir == NULL || gbx_read_file(procs, 1 << 20, &text, NULL) < 0)
        return 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%s/status", l);
        gbx_autofree char *st = NULL;
        if (gbx_read_file(path, 1 << 16, &st, NULL) < 0)
            continue;
        const char *t = strstr(st, "\nTracerPid:");
        if (t && strtol(t + 12, NULL, 10) != 0)
            return 1;
    }
    return 0;
}

/* A criu killed mid-dump (its deadline, a cancel): its tracees are let go when it is gone,
 * which can be a little after its group leader was reaped. Wait (bounded) for that, then a
 * moment more for a process it left in an injected syscall to die on the breakpoint after it
 * (see docs/hibernate.md): what is judged alive afterwards is. */
static void settle_after_kill(const struct gbx_sandbox *sb)
{
    int64_t until = gbx_monotonic_ns() + 2000 * 1000000LL;
    while (any_traced(sb) && gbx_monotonic_ns() < until)
        (void)poll(NULL, 0, 10);
    struct pollfd pf = {.fd = sb->pidfd, .events = POLLIN};
    (void)poll(&pf, 1, 100);
}

/* Give init back what do_hibernate (src/init/conn.c) put aside: a new listener at fd 3 in
 * place of the placeholder and, when layer_fd >= 0, the writable layer's handle at fd 7.
 * The placeholder is an unbound datagram socket nobody can reach; a copy of it (taken with
 * pidfd_getfd) is bound on a path under the sandbox's runtime dir (0700, the daemon's) and
 * the two descriptors are sent through it. Then init must answer a new connection. */
static int rescue_init(struct gbx_sandbox *sb, int layer_fd, struct gbx_err **err)
{
    int ph = (int)syscall(SYS_pidfd_getfd, sb->pidfd, 3, 0);
    if (ph < 0)
        return gbx_err_sys(err, errno, "cannot reach init's placeholder");
    int type = 0;
    socklen_t tl = sizeof(type);
    if (getsockopt(ph, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_DGRAM) {
        close(ph);
        return gbx_err_set(err, EPROTO, GBX_ERR_INTERNAL,
                           "init's fd 3 is not a hibernate placeholder: nothing to give back");
    }
    gbx_autofree char *path = gbx_asprintf("%s/rescue.sock", sb->dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        close(ph);
        return gbx_err_set(err, ENAMETOOLONG, GBX_ERR_INTERNAL, "'%s' is too long", path);
    }
    strcpy(sa.sun_path, path);
    (void)unlink(path);
    int lfd = -1, tx = -1, r = 0;
    if (bind(ph, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = gbx_err_sys(err, errno, "cannot bind init's placeholder");
        goto out;
    }
    if ((lfd = gbx_ns_ctl_listen(sb, 1, err)) < 0) {
        r = -1;
        goto out;
    }
    if ((tx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
        r = gbx_err_sys(err, errno, "socket");
        goto out;
    }
    int fds[2] = {lfd, layer_fd};
    size_t nfds = layer_fd >= 0 ? 2 : 1;
    char data[] = "GBXRESCUE";
    struct iovec iov = {.iov_base = data, .iov_len = 9};
    int sr = gbx_send_fds(tx, (const struct sockaddr *)&sa, sizeof(sa), &iov, 1, fds, nfds);
    if (sr < 0) {
        r = gbx_err_sys(err, -sr, "cannot send init its listener");
        goto out;
    }
    /* init takes them on its next turn: a connection answers once it has */
    int fd = -1;
    for (int i = 0; i < 100; i++) {
        if (sb->ops->connect(sb, &fd, NULL) == 0)
            break;
        usleep(20000);
    }
    if (fd < 0) {
        r = gbx_err_set(err, ETIMEDOUT, GBX_ERR_INTERNAL, "init did not take its listener back");
        goto out;
    }
    struct gbx_agent *a = NULL;
    if (gbx_agent_open(fd, &a, err) < 0) {
        r = gbx_err_wrap(err, "init after the rescue");
        goto out;
    }
    gbx_agent_free(a);
out:
    (void)unlink(path);
    close(ph);
    if (lfd >= 0)
        close(lfd);
    if (tx >= 0)
        close(tx);
    return r;
}

int gbx_sandbox_unhibernate(struct gbx_sandbox *sb, int layer_fd, struct gbx_err **err)
{
    /* a network lock of CRIU's (nftables table "CRIU-<run id>") that an interrupted dump left */
    int r = gbx_ns_netns_drop_tables(sb->init_pid, "CRIU-");
    if (r < 0)
        return gbx_err_sys(err, -r, "sandbox '%s': cannot lift CRIU's network lock", sb->id);
    if (rescue_init(sb, layer_fd, err) < 0)
        return gbx_err_wrap(err, "sandbox '%s'", sb->id);
    return 0;
}

/* Free space for a checkpoint of sb in dir: about its memory and its writable layer. */
static int room_for(struct gbx_sandbox *sb, const char *dir, int layer_fd, struct gbx_err **err)
{
    struct gbx_cg_usage u;
    memset(&u, 0, sizeof(u));
    (void)!gbx_cgroup_usage(&sb->cg, &u, NULL);
    uint64_t need = u.memory_bytes;
    struct statfs lfs;
    if (fstatfs(layer_fd, &lfs) == 0)
        need += (uint64_t)(lfs.f_blocks - lfs.f_bfree) * (uint64_t)lfs.f_bsize;
    need += need / 8 + (4u << 20); /* image headers, the tar's, the conf */
    struct statvfs vfs;
    if (statvfs(dir, &vfs) < 0)
        return gbx_err_sys(err, errno, "cannot examine '%s'", dir);
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    if (avail < need)
        return gbx_err_set(err, ENOSPC, GBX_ERR_STORAGE,
                           "cannot hibernate: it needs about %llu MiB in '%s', %llu MiB are free",
                           (unsigned long long)(need >> 20), dir,
                           (unsigned long long)(avail >> 20));
    return 0;
}

/* ---- checkpoint ----------------------------------------------------------------------- */

static int ns_checkpoint_impl(struct gbx_sandbox *sb, const char *dir, int *gone,
                              struct gbx_err **err)
{
    *gone = 0;
    const char *criu = NULL;
    struct hib_conf c;
    memset(&c, 0, sizeof(c));
    int layer_fd = -1, r = -1, killed = 0;
    enum { UNTOUCHED, ASKED, DUMPED } stage = UNTOUCHED;
    char stopped[4096] = "";
    gbx_autofree char *images = gbx_asprintf("%s/images", dir);
    gbx_autofree char *pid = gbx_asprintf("%d", (int)sb->init_pid);
    gbx_autofree char *log = gbx_asprintf("%s/dump.log", images);
    gbx_autofree char *tarp = gbx_asprintf("%s/upper.tar", dir);
    gbx_autofree char *conf = gbx_asprintf("%s/" CONF_NAME, dir);
    int64_t tmo = gbx_criu_timeout(sb->rt);

    if (gbx_criu_usable(sb->rt, &criu, err) < 0)
        goto out;
    if (sb->saved == NULL) {
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                    "sandbox '%s' has no recorded spec (adopted? see gbx_sandbox_keep_spec)",
                    sb->id);
        goto out;
    }
    if (sb->ctl_path == NULL || sb->pidfd < 0) {
        gbx_err_set(err, ENOTSUP, GBX_ERR_UNAVAILABLE,
                    "sandbox '%s' has no control socket: it cannot be restored", sb->id);
        goto out;
    }
    int e;
    /* a directory used before: no stale image or conf may survive into this checkpoint */
    (void)unlink(conf);
    (void)!gbx_rm_rf(images);
    if ((e = gbx_mkdir_p(images, 0700)) < 0) {
        gbx_err_sys(err, -e, "cannot create '%s'", images);
        goto out;
    }
    c.id = gbx_xstrdup(sb->id);
    c.uid_slot = sb->uid_slot;
    c.host_uid = sb->host_uid;
    c.spec.template_name = gbx_xstrdup(sb->saved->template_name);
    c.spec.layers = gbx_xcalloc(sb->saved->nlayers + 1, sizeof(char *));
    for (size_t i = 0; i < sb->saved->nlayers; i++)
        c.spec.layers[i] = gbx_xstrdup(sb->saved->layers[i]);
    c.spec.nlayers = sb->saved->nlayers;
    c.spec.limits = sb->saved->limits;
    c.spec.disk_bytes = sb->saved->disk_bytes;
    if (scan_externals(sb, &c, err) < 0)
        goto out;
    /* the writable layer's tmpfs outlives the dumped tree through this fd */
    if (gbx_sandbox_layer_open(sb, &layer_fd, err) < 0)
        goto out;
    if (room_for(sb, dir, layer_fd, err) < 0)
        goto out;

    /* a paused sandbox: its init must answer, and CRIU cannot seize frozen tasks */
    if (gbx_cgroup_freeze(&sb->cg, 0, err) < 0)
        goto out;
    if (gbx_fault("hibernate.ask") < 0) {
        gbx_err_set(err, EIO, GBX_ERR_INTERNAL, "fault injected before the dump");
        goto out;
    }
    stopped_tasks(sb, stopped, sizeof(stopped));
    /* from here on init has put its listener and layer handle aside: a failure must give
     * them back (gbx_sandbox_unhibernate) */
    stage = ASKED;
    if (send_hibernate(sb, err) < 0)
        goto out;
    if (placeholder_ino(sb->init_pid, 3, &c.placeholder) < 0) {
        gbx_err_set(err, EPROTO, GBX_ERR_INTERNAL, "init of sandbox '%s' has no placeholder",
                    sb->id);
        goto out;
    }
    (void)placeholder_ino(sb->init_pid, GBX_INIT_LAYER_FD, &c.layer_placeholder);

    struct gbx_criu_args a = {.n = 0};
    gbx_criu_arg(&a, criu);
    gbx_criu_arg(&a, "dump");
    gbx_criu_arg(&a, "-t");
    gbx_criu_arg(&a, pid);
    gbx_criu_arg(&a, "-D");
    gbx_criu_arg(&a, images);
    gbx_criu_arg(&a, "-o");
    gbx_criu_arg(&a, "dump.log");
    gbx_criu_arg(&a, getenv("GLOVEBOX_CRIU_VERBOSE") ? "-v4" : "-v2");
    gbx_criu_arg(&a, "--network-lock");
    gbx_criu_arg(&a, "nftables");
    gbx_criu_arg(&a, "--tcp-close");
    gbx_criu_arg(&a, "--skip-in-flight");
    for (size_t i = 0; i < c.next; i++) {
        gbx_autofree char *ext = gbx_asprintf("mnt[%s]:%s", c.ext_mp[i], c.ext_key[i]);
        gbx_criu_arg(&a, "--external");
        gbx_criu_arg(&a, ext);
    }
    if (gbx_fault("hibernate.dump") < 0) {
        /* a criu that never returns, for the fault suite: this one waits for its deadline */
        gbx_criu_args_free(&a);
        gbx_criu_arg(&a, "sleep");
        gbx_criu_arg(&a, "3600");
    }
    int st = gbx_criu_run(a.v, NULL, 0, -1, tmo, &sb->cancel);
    gbx_criu_args_free(&a);
    killed = st == -ETIMEDOUT || st == -ECANCELED;
    if (st != 0) {
        gbx_criu_failed(err, "criu dump", st, tmo, log);
        goto out;
    }
    /* the tree is gone; its upper is still there, and now stays still */
    stage = DUMPED;
    gbx_fault_point("hibernate.dumped");
    static const char *const tarv[] = {"tar",
                                       "-C",
                                       "/proc/self/fd/3/upper",
                                       "--xattrs",
                                       "--xattrs-include=*",
                                       "--numeric-owner",
                                       "--sparse",
                                       "-cpf",
                                       NULL,
                                       "."};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(tarv); i++)
        gbx_criu_arg(&a, tarv[i] ? tarv[i] : tarp);
    int64_t htmo = gbx_criu_helper_timeout(sb->rt);
    st = gbx_criu_run(a.v, NULL, 0, layer_fd, htmo, NULL);
    gbx_criu_args_free(&a);
    if (st != 0) {
        char why[96];
        gbx_err_set(err, EIO, GBX_ERR_INTERNAL, "cannot save the writable layer (tar: %s)",
                    gbx_child_status_str(st, htmo, why, sizeof(why)));
        goto out;
    }
    if (write_conf(dir, &c, err) < 0)
        goto out;
    r = 0;
out:
    if (r < 0 && stage == ASKED) {
        /* the dump did not finish: unless the tree died meanwhile, it runs on (as it was, when
         * criu ended on its own: it let go of every process as it found it) */
        if (killed)
            settle_after_kill(sb);
        struct pollfd pf = {.fd = sb->pidfd, .events = POLLIN};
        if (poll(&pf, 1, 0) == 0) {
            continue_stopped(sb, stopped);
            struct gbx_err *rerr = NULL;
            if (gbx_sandbox_unhibernate(sb, layer_fd, &rerr) == 0) {
                stage = UNTOUCHED;
                gbx_err_wrap(err, killed ? "the sandbox runs on (criu was stopped mid-dump: a "
                                           "process it was working in may have died with it)"
                                         : "the sandbox runs on as it was");
            } else {
                gbx_err_wrap(err, "%s", rerr->msg);
                gbx_err_free(rerr);
            }
        } else {
            gbx_err_wrap(err, killed ? "its init died when criu was stopped mid-dump"
                                     : "its init died during the dump");
        }
    }
    if (layer_fd >= 0)
        close(layer_fd);
    hib_conf_release(&c);
    if (r < 0 && stage == UNTOUCHED)
        return gbx_err_wrap(err, "hibernate sandbox '%s'", sb->id);
    /* dumped (or lost): take down what is left, free sb */
    *gone = 1;
    gbx_autofree char *id = gbx_xstrdup(sb->id);
    struct gbx_err *derr = NULL;
    if (gbx_sandbox_destroy(sb, &derr) < 0 && r == 0) {
        if (err)
            *err = derr;
        else
            gbx_err_free(derr);
        derr = NULL;
        r = -1;
    }
    gbx_err_free(derr);
    if (r < 0)
        return gbx_err_wrap(err, "hibernate sandbox '%s' (the sandbox is lost)", id);
    return 0;
}

int gbx_sandbox_checkpoint(struct gbx_sandbox *sb, const char *dir, int *gone, struct gbx_err **err)
{
    return sb->ops->checkpoint(sb, dir, gone, err);
}

/* ---- restore ---------------------------------------------------------------------------- */

/* A user namespace with the slot's map, for idmapped mounts (the restored sandbox gets its
 * own from CRIU; an idmap needs only the same mapping). fd or -errno. */
static int slot_userns(uint32_t host_uid)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return -e;
    }
    if (pid == 0) {
        close(sv[0]);
        char b = unshare(CLONE_NEWUSER) == 0 ? 'U' : 'E';
        (void)!write(sv[1], &b, 1);
        (void)!read(sv[1], &b, 1); /* EOF: the parent is done */
        _exit(0);
    }
    close(sv[1]);
    char b = 0;
    ssize_t n = GBX_RETRY(read(sv[0], &b, 1));
    int r = n == 1 && b == 'U' ? 0 : -EPERM;
    int fd = -1;
    if (r == 0 && (r = gbx_ns_write_idmap(pid, host_uid, GBX_UID_RANGE)) == 0)
        r = fd = gbx_ns_userns_open(pid);
    close(sv[0]);
    (void)GBX_RETRY(waitpid(pid, NULL, 0));
    return r < 0 ? r : fd;
}

/* Restored tasks read some images themselves, through CRIU's descriptor of the images
 * directory, some (timens) before their user namespace has its map: as "other". The images
 * become readable and the directory searchable for everybody; dir itself (0700, root) keeps
 * everybody else out. */
static int images_readable(const char *dir, struct gbx_err **err)
{
    gbx_autofree char *images = gbx_asprintf("%s/images", dir);
    DIR *d = opendir(images);
    if (d == NULL)
        return gbx_err_sys(err, errno, "cannot open '%s'", images);
    struct dirent *de;
    int r = 0;
    while ((de = readdir(d)) != NULL)
        if (de->d_type == DT_REG && fchmodat(dirfd(d), de->d_name, 0644, 0) < 0)
            r = -errno;
    closedir(d);
    if (r == 0 && (chmod(images, 0711) < 0 || chmod(dir, 0700) < 0))
        r = -errno;
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot make '%s' readable for the restore", images);
    return 0;
}

struct restore_plan {
    const char *criu, *dir, *staging, *trust;
    struct hib_conf *c;
    int tmpl_fd, usr_fd, layer_fds[GBX_MAX_LAYERS];
    int listen_fd, sync_fd, err_fd;
    int64_t tar_timeout_ms;
};

#define CHILD_FAIL(what_)                                                                          \
    do {                                                                                           \
        dprintf(pl->err_fd, "%s: %s", what_, strerror(errno));                                     \
        _exit(126);                                                                                \
    } while (0)

/* The restorer child: the root filesystem in a private mount namespace, then criu. */
__attribute__((noreturn)) static void restore_child(const struct restore_plan *pl)
{
    const struct hib_conf *c = pl->c;
    char p[PATH_MAX + 64];
    gbx_child_prepare(); /* its own process group: the parent's deadline kills all of it */
    if (unshare(CLONE_NEWNS) < 0)
        CHILD_FAIL("unshare mount namespace");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        CHILD_FAIL("make mounts private");
    char opts[64];
    uint64_t disk = c->spec.disk_bytes ? c->spec.disk_bytes : (1024ull << 20);
    snprintf(opts, sizeof(opts), "size=%llu,mode=755", (unsigned long long)disk);
    if (mount("tmpfs", pl->staging, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
        CHILD_FAIL("mount writable layer");
    /* init's handle of the layer (its fd 7), as at create */
    int layer_fd = open(pl->staging, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (layer_fd < 0)
        CHILD_FAIL("open writable layer");
    static const char *const dirs[] = {"upper", "work", "lower", "root", "usr"};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(dirs); i++) {
        snprintf(p, sizeof(p), "%s/%s", pl->staging, dirs[i]);
        if (mkdir(p, 0755) < 0)
            CHILD_FAIL("mkdir in the writable layer");
    }
    snprintf(p, sizeof(p), "%s/work", pl->staging);
    if (chown(p, c->host_uid, c->host_uid) < 0 || chmod(p, 0700) < 0)
        CHILD_FAIL("chown work");
    snprintf(p, sizeof(p), "%s/lower", pl->staging);
    if (move_mount(pl->tmpl_fd, "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        CHILD_FAIL("attach template");
    if (pl->usr_fd >= 0) {
        snprintf(p, sizeof(p), "%s/usr", pl->staging);
        if (move_mount(pl->usr_fd, "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH) < 0)
            CHILD_FAIL("attach /usr");
    }
    for (size_t i = 0; i < c->spec.nlayers; i++) {
        snprintf(p, sizeof(p), "%s/l%zu", pl->staging, i);
        if (mkdir(p, 0755) < 0 ||
            move_mount(pl->layer_fds[i], "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH) < 0)
            CHILD_FAIL("attach a snapshot layer");
    }
    gbx_autofree char *tarp = gbx_asprintf("%s/upper.tar", pl->dir);
    snprintf(p, sizeof(p), "%s/upper", pl->staging);
    struct gbx_criu_args a = {.n = 0};
    static const char *const tarv[] = {
        "tar", "-C", NULL, "--xattrs", "--xattrs-include=*", "--numeric-owner", "-xpf", NULL};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(tarv); i++)
        gbx_criu_arg(&a, tarv[i] ? tarv[i] : i == 2 ? p : tarp);
    int st = gbx_criu_run(a.v, NULL, 0, -1, pl->tar_timeout_ms, NULL);
    gbx_criu_args_free(&a);
    if (st != 0) {
        errno = st == -ETIMEDOUT ? ETIMEDOUT : EIO;
        CHILD_FAIL("unpack the writable layer");
    }
    size_t cap = (GBX_MAX_LAYERS + 4) * (PATH_MAX + 8);
    char *ov = malloc(cap);
    if (ov == NULL)
        CHILD_FAIL("malloc");
    size_t off = (size_t)snprintf(ov, cap, "lowerdir=");
    for (size_t i = 0; i < c->spec.nlayers; i++)
        off += (size_t)snprintf(ov + off, cap - off, "%s/l%zu:", pl->staging, i);
    snprintf(ov + off, cap - off, "%s/lower,upperdir=%s/upper,workdir=%s/work,userxattr",
             pl->staging, pl->staging, pl->staging);
    snprintf(p, sizeof(p), "%s/root", pl->staging);
    if (mount("overlay", p, "overlay", MS_NODEV, ov) < 0)
        CHILD_FAIL("mount overlay rootfs");
    free(ov);

    /* the parent puts us into the sandbox's cgroups: everything CRIU forks lands there */
    char go = 0;
    if (GBX_RETRY(read(pl->sync_fd, &go, 1)) != 1 || go != 'G') {
        errno = EPIPE;
        CHILD_FAIL("wait for cgroups");
    }
    /* with --manage-cgroups=ignore CRIU leaves the cgroup namespace to its caller: one
     * rooted at the sandbox's groups, as at create */
    if (unshare(CLONE_NEWCGROUP) < 0)
        CHILD_FAIL("create cgroup namespace");

    gbx_autofree char *images = gbx_asprintf("%s/images", pl->dir);
    gbx_autofree char *root = gbx_asprintf("%s/root", pl->staging);
    gbx_autofree char *pidfile = gbx_asprintf("%s/restore.pid", pl->dir);
    gbx_autofree char *inh = gbx_asprintf("fd[3]:socket:[%lu]", c->placeholder);
    gbx_criu_arg(&a, pl->criu);
    gbx_criu_arg(&a, "restore");
    gbx_criu_arg(&a, "-D");
    gbx_criu_arg(&a, images);
    gbx_criu_arg(&a, "-o");
    gbx_criu_arg(&a, "restore.log");
    gbx_criu_arg(&a, getenv("GLOVEBOX_CRIU_VERBOSE") ? "-v4" : "-v2");
    gbx_criu_arg(&a, "--restore-detached");
    gbx_criu_arg(&a, "--root");
    gbx_criu_arg(&a, root);
    gbx_criu_arg(&a, "--manage-cgroups=ignore");
    gbx_criu_arg(&a, "--tcp-close");
    /* a fresh network namespace, not the dumped one: restoring addresses, routes and rules
     * runs an `ip` per table (15 ms); the daemon brings up loopback and installs its route,
     * rules and listeners itself, as for any sandbox (gbx_egress_netns_setup) */
    gbx_criu_arg(&a, "--empty-ns");
    gbx_criu_arg(&a, "net");
    gbx_criu_arg(&a, "--pidfile");
    gbx_criu_arg(&a, pidfile);
    gbx_criu_arg(&a, "--inherit-fd");
    gbx_criu_arg(&a, inh);
    if (c->layer_placeholder) {
        gbx_autofree char *linh = gbx_asprintf("fd[4]:socket:[%lu]", c->layer_placeholder);
        gbx_criu_arg(&a, "--inherit-fd");
        gbx_criu_arg(&a, linh);
    }
    for (size_t i = 0; i < c->next; i++) {
        const char *key = c->ext_key[i];
        char *src;
        if (strncmp(key, "dev-", 4) == 0)
            src = gbx_asprintf("/dev/%s", key + 4);
        else if (strcmp(key, "usr") == 0)
            src = gbx_asprintf("%s/usr", pl->staging);
        else if (strcmp(key, "trust") == 0 && pl->trust)
            src = gbx_xstrdup(pl->trust);
        else {
            errno = ENOENT;
            CHILD_FAIL("no source for a mount of the checkpoint");
        }
        gbx_autofree char *ext = gbx_asprintf("mnt[%s]:%s", key, src);
        free(src);
        gbx_criu_arg(&a, "--external");
        gbx_criu_arg(&a, ext);
    }
    int null = open("/dev/null", O_RDWR);
    int lst = fcntl(pl->listen_fd, F_DUPFD_CLOEXEC, 100);
    int lay = fcntl(layer_fd, F_DUPFD_CLOEXEC, 100);
    if (null < 0 || lst < 0 || lay < 0 || dup2(lst, 3) != 3 || dup2(lay, 4) != 4)
        CHILD_FAIL("arrange file descriptors");
    (void)dup2(null, 0);
    (void)dup2(null, 1);
    (void)dup2(null, 2);
    syscall(SYS_close_range, 5, ~0U, 0);
    execv(pl->criu, a.v);
    _exit(127);
}

static int ns_restore_impl(struct gbx_runtime *rt, const char *dir, const char *want_id,
                           struct gbx_sandbox **out, struct gbx_err **err)
{
    const char *criu = NULL;
    if (gbx_criu_available(&criu, err) < 0)
        return gbx_err_wrap(err, "restore sandbox");
    struct hib_conf c;
    memset(&c, 0, sizeof(c));
    gbx_autofree char *confp = gbx_asprintf("%s/" CONF_NAME, dir);
    gbx_autofree char *text = NULL;
    size_t len = 0;
    char ebuf[128] = "";
    if (gbx_read_file(confp, 1 << 20, &text, &len) < 0)
        return gbx_err_sys(err, errno, "restore: cannot read '%s'", confp);
    int r = gbx_conf_parse(text, len, conf_line, &c, ebuf, sizeof(ebuf));
    if (r != 0 || c.id == NULL || gbx_sandbox_id_valid(c.id) < 0 || c.placeholder == 0 ||
        c.spec.template_name == NULL || c.host_uid != rt->uid_base + c.uid_slot * GBX_UID_RANGE) {
        hib_conf_release(&c);
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "restore: '%s' is not valid %s", confp,
                           ebuf);
    }
    if (want_id && strcmp(want_id, c.id) != 0) {
        gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "restore: '%s' holds sandbox '%s', not '%s'", dir,
                    c.id, want_id);
        hib_conf_release(&c);
        return -1;
    }

    struct gbx_template tmpl;
    memset(&tmpl, 0, sizeof(tmpl));
    struct gbx_sandbox *sb = gbx_xcalloc(1, sizeof(*sb));
    sb->id = gbx_xstrdup(c.id);
    sb->ops = &gbx_ns_backend;
    sb->rt = rt;
    sb->pidfd = sb->conn_fd = -1;
    sb->cg.v2fd = -1;
    sb->uid_slot = c.uid_slot;
    sb->host_uid = c.host_uid;
    int slot_held = 0, cg_made = 0, listen_fd = -1, ufd = -1, child = -1;
    int sync[2] = {-1, -1}, errp[2] = {-1, -1};
    gbx_autofree char *pidfile = gbx_asprintf("%s/restore.pid", dir);
    gbx_autofree char *pidtxt = NULL;
    struct restore_plan pl;
    memset(&pl, 0, sizeof(pl));
    pl.tmpl_fd = pl.usr_fd = -1;
    for (size_t i = 0; i < GBX_MAX_LAYERS; i++)
        pl.layer_fds[i] = -1;
    r = -1;

    if (gbx_ns_slot_lock(rt, c.uid_slot) < 0) {
        gbx_err_set(err, EBUSY, GBX_ERR_CONFLICT,
                    "uid range %u of the sandbox is taken by another sandbox", c.uid_slot);
        goto out;
    }
    slot_held = 1;
    if (images_readable(dir, err) < 0)
        goto out;
    if (gbx_template_open(rt->state_dir, c.spec.template_name, &tmpl, err) < 0)
        goto out;
    if (gbx_cgroup_begin(&sb->cg, &rt->cg, c.id, err) < 0)
        goto out;
    cg_made = 1;
    if (gbx_cgroup_finish(&sb->cg, &c.spec.limits, err) < 0)
        goto out;
    if ((listen_fd = gbx_ns_ctl_listen(sb, 1, err)) < 0)
        goto out;
    if ((ufd = slot_userns(c.host_uid)) < 0) {
        gbx_err_sys(err, -ufd, "cannot create a user namespace for the idmap");
        goto out;
    }
    if ((pl.tmpl_fd = gbx_ns_idmapped_tree(tmpl.rootfs, ufd)) < 0) {
        gbx_err_sys(err, -pl.tmpl_fd, "cannot idmap template '%s'", tmpl.name);
        goto out;
    }
    if (tmpl.usr_host && (pl.usr_fd = gbx_ns_idmapped_tree("/usr", ufd)) < 0) {
        gbx_err_sys(err, -pl.usr_fd, "cannot idmap /usr");
        goto out;
    }
    for (size_t i = 0; i < c.spec.nlayers; i++) {
        if ((pl.layer_fds[i] = gbx_ns_idmapped_tree(c.spec.layers[i], ufd)) < 0) {
            gbx_err_sys(err, -pl.layer_fds[i], "cannot idmap layer '%s'", c.spec.layers[i]);
            goto out;
        }
    }
    if (pipe2(sync, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
        gbx_err_sys(err, errno, "pipe");
        goto out;
    }
    pl.criu = criu;
    pl.dir = dir;
    pl.staging = rt->staging_dir;
    pl.trust = rt->trust_bundle;
    pl.c = &c;
    pl.listen_fd = listen_fd;
    pl.sync_fd = sync[0];
    pl.err_fd = errp[1];
    pl.tar_timeout_ms = gbx_criu_helper_timeout(rt);
    (void)unlink(pidfile);
    /* the restored init is criu's child; when criu exits, it becomes ours */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    child = fork();
    if (child < 0) {
        gbx_err_sys(err, errno, "fork");
        goto out;
    }
    if (child == 0)
        restore_child(&pl);
    close(errp[1]);
    errp[1] = -1;
    close(sync[0]);
    sync[0] = -1;
    char go = 'G';
    int st = -1;
    if (gbx_cgroup_attach(&sb->cg, child, 0, err) < 0) {
        kill(child, SIGKILL);
        (void)GBX_RETRY(waitpid(child, NULL, 0));
        goto out;
    }
    (void)!write(sync[1], &go, 1);
    int64_t tmo = gbx_criu_timeout(rt) + pl.tar_timeout_ms;
    st = gbx_child_wait(child, tmo, &sb->cancel);
    if (st != 0) {
        char msg[256] = "";
        ssize_t k = st < 0 ? 0 : GBX_RETRY(read(errp[0], msg, sizeof(msg) - 1));
        if (k > 0) {
            msg[k] = '\0';
            gbx_err_set(err, EIO, GBX_ERR_INTERNAL, "restore: %s", msg);
        } else {
            gbx_autofree char *log = gbx_asprintf("%s/images/restore.log", dir);
            gbx_criu_failed(err, "criu restore", st, tmo, log);
        }
        goto out;
    }
    if (gbx_read_file(pidfile, 64, &pidtxt, NULL) < 0 || atoi(pidtxt) <= 1) {
        gbx_err_set(err, EIO, GBX_ERR_INTERNAL, "restore: criu wrote no pid file");
        goto out;
    }
    sb->init_pid = atoi(pidtxt);
    sb->pidfd = (int)syscall(SYS_pidfd_open, sb->init_pid, 0);
    if (sb->pidfd < 0) {
        gbx_err_sys(err, errno, "restore: the restored init is gone");
        goto out;
    }
    close(listen_fd);
    listen_fd = -1;
    if (sb->ops->connect(sb, &sb->conn_fd, err) < 0) {
        int ist = 0;
        /* the restored init is our child (we are a subreaper): say how it ended */
        if (GBX_RETRY(waitpid(sb->init_pid, &ist, WNOHANG)) == sb->init_pid) {
            sb->exited = 1;
            gbx_err_wrap(err, "the restored init %s %d",
                         WIFSIGNALED(ist) ? "was killed by signal" : "exited with status",
                         WIFSIGNALED(ist) ? WTERMSIG(ist) : WEXITSTATUS(ist));
        }
        goto out;
    }
    gbx_sandbox_keep_spec(sb,
                          &(struct gbx_sandbox_spec){.id = c.id,
                                                     .template_name = c.spec.template_name,
                                                     .limits = c.spec.limits,
                                                     .disk_bytes = c.spec.disk_bytes,
                                                     .layers = (const char *const *)c.spec.layers,
                                                     .nlayers = c.spec.nlayers});
    *out = sb;
    sb = NULL;
    r = 0;
out:
    if (listen_fd >= 0)
        close(listen_fd);
    if (ufd >= 0)
        close(ufd);
    if (pl.tmpl_fd >= 0)
        close(pl.tmpl_fd);
    if (pl.usr_fd >= 0)
        close(pl.usr_fd);
    for (size_t i = 0; i < GBX_MAX_LAYERS; i++)
        if (pl.layer_fds[i] >= 0)
            close(pl.layer_fds[i]);
    for (int i = 0; i < 2; i++) {
        if (sync[i] >= 0)
            close(sync[i]);
        if (errp[i] >= 0)
            close(errp[i]);
    }
    gbx_template_release(&tmpl);
    if (sb) {
        if (!cg_made && slot_held)
            gbx_ns_slot_release(rt, c.uid_slot);
        if (cg_made || sb->init_pid > 0) {
            /* a partly restored tree, its groups, socket, dir and slot */
            (void)gbx_sandbox_destroy(sb, NULL);
        } else {
            free(sb->id);
            free(sb);
        }
    }
    hib_conf_release(&c);
    if (r < 0)
        return gbx_err_wrap(err, "restore sandbox from '%s'", dir);
    return 0;
}

int gbx_sandbox_restore(struct gbx_runtime *rt, const char *dir, const char *id,
                        struct gbx_sandbox **out, struct gbx_err **err)
{
    return ns_restore_impl(rt, dir, id, out, err);
}

/* the backend's slots (ns.c) */
int gbx_ns_checkpoint(struct gbx_sandbox *sb, const char *dir, int *gone, struct gbx_err **err)
{
    return ns_checkpoint_impl(sb, dir, gone, err);
}

int gbx_ns_restore(struct gbx_runtime *rt, const char *dir, struct gbx_sandbox **out,
                   struct gbx_err **err)
{
    return ns_restore_impl(rt, dir, NULL, out, err);
}
