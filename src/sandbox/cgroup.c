/* SPDX-License-Identifier: MIT */
#include "sandbox/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>

#include "base/clock.h"
#include "base/fileutil.h"
#include "base/mem.h"

#define GBX_CG_PARENT "glovebox"

static const char *const ctrl_names[GBX_CG_NCTRL] = {
    [GBX_CG_MEMORY] = "memory",   [GBX_CG_PIDS] = "pids",       [GBX_CG_CPU] = "cpu",
    [GBX_CG_CPUACCT] = "cpuacct", [GBX_CG_DEVICES] = "devices", [GBX_CG_FREEZER] = "freezer",
};

/* Does the comma-separated list contain word? */
static int list_has(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* Own path of the hierarchy holding ctrl ("" controller name means the v2 line "0::"). */
static char *own_path(const char *self_cgroup, const char *ctrl)
{
    const char *line = self_cgroup;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char *l = gbx_xstrndup(line, len);
        char *c1 = strchr(l, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c1 && c2) {
            *c2 = '\0';
            const char *ctrls = c1 + 1;
            int match = ctrl[0] == '\0' ? (strncmp(l, "0:", 2) == 0 && ctrls[0] == '\0')
                                        : list_has(ctrls, ctrl);
            if (match) {
                char *r = gbx_xstrdup(c2 + 1);
                free(l);
                return r;
            }
        }
        free(l);
        line = nl ? nl + 1 : NULL;
    }
    return NULL;
}

static char *join_path(const char *a, const char *b)
{
    if (strcmp(b, "/") == 0 || b[0] == '\0')
        return gbx_xstrdup(a);
    return gbx_asprintf("%s%s%s", a, b[0] == '/' ? "" : "/", b);
}

static char *v2_base(const char *mountinfo, const char *self_cgroup)
{
    struct gbx_cg_layout tmp;
    /* pretend every controller is in v2 so the parse keeps the v2 path */
    if (gbx_cg_layout_parse(&tmp, mountinfo, self_cgroup, "memory pids cpu") < 0)
        return NULL;
    char *r = tmp.v2 ? gbx_xstrdup(tmp.v2) : NULL;
    gbx_cg_layout_release(&tmp);
    return r;
}

int gbx_cg_layout_parse(struct gbx_cg_layout *l, const char *mountinfo, const char *self_cgroup,
                        const char *v2_controllers)
{
    memset(l, 0, sizeof(*l));
    const char *line = mountinfo;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char *buf = gbx_xstrndup(line, len);
        line = nl ? nl + 1 : NULL;

        /* fields: id parent dev root mountpoint opts [optional...] - fstype source superopts */
        char *sep = strstr(buf, " - ");
        char *fields[6] = {0};
        int nf = 0;
        char *save = NULL;
        if (sep == NULL) {
            free(buf);
            continue;
        }
        *sep = '\0';
        for (char *t = strtok_r(buf, " ", &save); t && nf < 6; t = strtok_r(NULL, " ", &save))
            fields[nf++] = t;
        char *save2 = NULL;
        char *fstype = strtok_r(sep + 3, " ", &save2);
        char *source = fstype ? strtok_r(NULL, " ", &save2) : NULL;
        char *superopts = source ? strtok_r(NULL, " ", &save2) : NULL;
        if (nf < 5 || fstype == NULL || fields[3] == NULL || strcmp(fields[3], "/") != 0) {
            free(buf);
            continue;
        }
        const char *mnt = fields[4];
        if ((strcmp(fstype, "cgroup2") == 0 || strcmp(fstype, "cgroup") == 0) && superopts &&
            list_has(superopts, "favordynmods"))
            l->favordynmods = 1;
        if (strcmp(fstype, "cgroup2") == 0 && l->v2 == NULL) {
            char *own = own_path(self_cgroup, "");
            if (own) {
                l->v2 = join_path(mnt, own);
                free(own);
            }
        } else if (strcmp(fstype, "cgroup") == 0 && superopts) {
            for (int c = 0; c < GBX_CG_NCTRL; c++) {
                if (l->v1[c] || !list_has(superopts, ctrl_names[c]))
                    continue;
                char *own = own_path(self_cgroup, ctrl_names[c]);
                if (own) {
                    l->v1[c] = join_path(mnt, own);
                    free(own);
                }
            }
        }
        free(buf);
    }
    if (l->v2) {
        l->v2_freeze = 1;
        if (l->v1[GBX_CG_MEMORY] == NULL && v2_controllers && strstr(v2_controllers, "memory") &&
            strstr(v2_controllers, "pids"))
            l->v2_limits = 1;
    }
    if (!l->v2_limits && (l->v1[GBX_CG_MEMORY] == NULL || l->v1[GBX_CG_PIDS] == NULL)) {
        gbx_cg_layout_release(l);
        return -EINVAL;
    }
    return 0;
}

int gbx_cg_layout_detect(struct gbx_cg_layout *l, struct gbx_err **err)
{
    gbx_autofree char *mi = NULL;
    gbx_autofree char *self = NULL;
    int r = gbx_read_file("/proc/self/mountinfo", 1 << 20, &mi, NULL);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot read '/proc/self/mountinfo'");
    r = gbx_read_file("/proc/self/cgroup", 1 << 16, &self, NULL);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot read '/proc/self/cgroup'");
    /* First pass to learn the v2 base (it may fail on a pure v2 host, where the controller
     * list decides), then read the v2 controllers there. */
    gbx_autofree char *ctrls = NULL;
    gbx_autofree char *v2 = v2_base(mi, self);
    if (v2) {
        gbx_autofree char *p = gbx_asprintf("%s/cgroup.controllers", v2);
        (void)!gbx_read_file(p, 4096, &ctrls, NULL);
    }
    if (gbx_cg_layout_parse(l, mi, self, ctrls) < 0)
        return gbx_err_set(err, 0, GBX_ERR_UNAVAILABLE,
                           "no usable cgroup hierarchy: need memory and pids controllers");
    return 0;
}

void gbx_cg_layout_release(struct gbx_cg_layout *l)
{
    for (int c = 0; c < GBX_CG_NCTRL; c++) {
        free(l->v1[c]);
        l->v1[c] = NULL;
    }
    free(l->v2);
    l->v2 = NULL;
}

const char *gbx_cg_layout_mode(const struct gbx_cg_layout *l)
{
    if (l->v2_limits)
        return "v2";
    if (l->v2 && l->v2_freeze)
        return "hybrid: limits in v1, freeze and kill in v2";
    return "v1";
}

static int write_cg(const char *dir, const char *file, const char *val)
{
    gbx_autofree char *p = gbx_asprintf("%s/%s", dir, file);
    return gbx_write_file(p, val, strlen(val));
}

static int mkdir_p_cg(const char *base)
{
    gbx_autofree char *parent = gbx_asprintf("%s/" GBX_CG_PARENT, base);
    if (mkdir(parent, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* v1 device allow-list: the nodes of a sandbox's minimal /dev. */
static const char *const dev_allow[] = {
    "c 1:3 rwm",   /* null */
    "c 1:5 rwm",   /* zero */
    "c 1:7 rwm",   /* full */
    "c 1:8 rwm",   /* random */
    "c 1:9 rwm",   /* urandom */
    "c 5:0 rwm",   /* tty */
    "c 5:2 rwm",   /* ptmx */
    "c 136:* rwm", /* pts */
};

/* Each v1 group costs a mkdir, an attach and an rmdir: create only those that do work.
 * cpu usage and freezing come from v2 core files where v2 is mounted. */
static int v1_needed(const struct gbx_cg_layout *l, int c, const struct gbx_cg_limits *lim)
{
    switch (c) {
    case GBX_CG_CPU:
        return lim->cpu_millis != 0 || l->v2 == NULL;
    case GBX_CG_CPUACCT:
        return l->v2 == NULL;
    case GBX_CG_FREEZER:
        return !l->v2_freeze;
    default:
        return 1;
    }
}

/* Does dir's devices.list hold exactly our allow-list? */
static int devices_in_force(const char *dir)
{
    gbx_autofree char *p = gbx_asprintf("%s/devices.list", dir);
    gbx_autofree char *list = NULL;
    if (gbx_read_file(p, 65536, &list, NULL) < 0)
        return 0;
    size_t lines = 0;
    for (char *c = list; *c; c++)
        lines += *c == '\n';
    if (lines != GBX_ARRAY_SIZE(dev_allow))
        return 0;
    for (size_t i = 0; i < GBX_ARRAY_SIZE(dev_allow); i++) {
        gbx_autofree char *want = gbx_asprintf("%s\n", dev_allow[i]);
        if (strstr(list, want) == NULL)
            return 0;
    }
    return 1;
}

int gbx_cgroup_prepare(struct gbx_cg_layout *l, struct gbx_err **err)
{
    int r;
    for (int c = 0; c < GBX_CG_NCTRL; c++) {
        if (l->v2_limits || l->v1[c] == NULL)
            continue;
        if ((r = mkdir_p_cg(l->v1[c])) < 0)
            return gbx_err_sys(err, -r, "cannot create '%s/" GBX_CG_PARENT "'", l->v1[c]);
    }
    if (l->v1[GBX_CG_DEVICES] && !l->v2_limits) {
        /* v1 children inherit their parent's device rules at creation: set them once here.
         * The kernel refuses to change a group's default while it has children (sandboxes
         * of a previous run); then each sandbox gets the rules itself. */
        gbx_autofree char *pp = gbx_asprintf("%s/" GBX_CG_PARENT, l->v1[GBX_CG_DEVICES]);
        int ok = devices_in_force(pp);
        if (!ok) {
            ok = write_cg(pp, "devices.deny", "a") == 0;
            for (size_t i = 0; ok && i < GBX_ARRAY_SIZE(dev_allow); i++)
                ok = write_cg(pp, "devices.allow", dev_allow[i]) == 0;
        }
        l->dev_inherited = ok;
    }
    if (l->v2) {
        if ((r = mkdir_p_cg(l->v2)) < 0)
            return gbx_err_sys(err, -r, "cannot create '%s/" GBX_CG_PARENT "'", l->v2);
        if (l->v2_limits) {
            gbx_autofree char *pp = gbx_asprintf("%s/" GBX_CG_PARENT, l->v2);
            (void)write_cg(l->v2, "cgroup.subtree_control", "+memory +pids +cpu");
            (void)write_cg(pp, "cgroup.subtree_control", "+memory +pids +cpu");
        }
    }
    return 0;
}

static int conflict(struct gbx_cgroup *cg, const char *id, struct gbx_err **err)
{
    gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "sandbox '%s' already exists", id);
    (void)!gbx_cgroup_destroy(cg, NULL);
    gbx_cgroup_release(cg);
    return -1;
}

int gbx_cgroup_begin(struct gbx_cgroup *cg, const struct gbx_cg_layout *l, const char *id,
                     struct gbx_err **err)
{
    memset(cg, 0, sizeof(*cg));
    cg->v2fd = -1;
    cg->layout = l;
    snprintf(cg->id, sizeof(cg->id), "%s", id);
    if (l->v2 == NULL)
        return 0;
    cg->v2dir = gbx_asprintf("%s/" GBX_CG_PARENT "/%s%s", l->v2, l->scope, id);
    if (mkdir(cg->v2dir, 0755) < 0) {
        int e = errno;
        free(cg->v2dir);
        cg->v2dir = NULL;
        if (e == EEXIST)
            return conflict(cg, id, err);
        gbx_cgroup_release(cg);
        return gbx_err_sys(err, e, "cannot create cgroup for '%s'", id);
    }
    cg->v2fd = open(cg->v2dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return 0;
}

int gbx_cgroup_finish(struct gbx_cgroup *cg, const struct gbx_cg_limits *lim, struct gbx_err **err)
{
    const struct gbx_cg_layout *l = cg->layout;
    const char *id = cg->id;
    int r;
    char buf[64];

    for (int c = 0; c < GBX_CG_NCTRL; c++) {
        if (l->v2_limits || l->v1[c] == NULL || !v1_needed(l, c, lim))
            continue;
        /* cpu and cpuacct are often co-mounted: one directory serves both */
        int dup = 0;
        for (int d = 0; d < c; d++)
            if (l->v1[d] && strcmp(l->v1[d], l->v1[c]) == 0)
                dup = 1;
        cg->dir[c] = gbx_asprintf("%s/" GBX_CG_PARENT "/%s%s", l->v1[c], l->scope, id);
        if (dup)
            continue;
        if (mkdir(cg->dir[c], 0755) < 0) {
            r = -errno;
            free(cg->dir[c]);
            cg->dir[c] = NULL;
            if (r == -EEXIST)
                return gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "sandbox '%s' already exists",
                                   id);
            return gbx_err_sys(err, -r, "cannot create cgroup for '%s'", id);
        }
    }

    /* limits */
    if (l->v2_limits) {
        if (lim->memory_bytes) {
            snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->memory_bytes);
            if ((r = write_cg(cg->v2dir, "memory.max", buf)) < 0)
                goto fail_limit;
            (void)write_cg(cg->v2dir, "memory.swap.max", "0");
        }
        if (lim->pids) {
            snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->pids);
            if ((r = write_cg(cg->v2dir, "pids.max", buf)) < 0)
                goto fail_limit;
        }
        if (lim->cpu_millis) {
            snprintf(buf, sizeof(buf), "%u 100000", lim->cpu_millis * 100);
            if ((r = write_cg(cg->v2dir, "cpu.max", buf)) < 0)
                goto fail_limit;
        }
        return 0;
    }
    if (lim->memory_bytes && cg->dir[GBX_CG_MEMORY]) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->memory_bytes);
        if ((r = write_cg(cg->dir[GBX_CG_MEMORY], "memory.limit_in_bytes", buf)) < 0)
            goto fail_limit;
        r = write_cg(cg->dir[GBX_CG_MEMORY], "memory.memsw.limit_in_bytes", buf);
        if (r < 0 && r != -ENOENT)
            goto fail_limit;
    }
    if (lim->pids && cg->dir[GBX_CG_PIDS]) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->pids);
        if ((r = write_cg(cg->dir[GBX_CG_PIDS], "pids.max", buf)) < 0)
            goto fail_limit;
    }
    if (lim->cpu_millis && cg->dir[GBX_CG_CPU]) {
        snprintf(buf, sizeof(buf), "%u", lim->cpu_millis * 100);
        if ((r = write_cg(cg->dir[GBX_CG_CPU], "cpu.cfs_period_us", "100000")) < 0 ||
            (r = write_cg(cg->dir[GBX_CG_CPU], "cpu.cfs_quota_us", buf)) < 0)
            goto fail_limit;
    }
    /* the device allow-list is inherited from the parent group, which gbx_cgroup_prepare
     * checked or set; only when it could not, each sandbox gets the rules itself */
    if (cg->dir[GBX_CG_DEVICES] && !l->dev_inherited) {
        if ((r = write_cg(cg->dir[GBX_CG_DEVICES], "devices.deny", "a")) < 0)
            goto fail_limit;
        for (size_t i = 0; i < GBX_ARRAY_SIZE(dev_allow); i++)
            if ((r = write_cg(cg->dir[GBX_CG_DEVICES], "devices.allow", dev_allow[i])) < 0)
                goto fail_limit;
    }
    return 0;

fail_limit:
    return gbx_err_sys(err, -r, "cannot set cgroup limits for '%s'", id);
}

int gbx_cgroup_create(struct gbx_cgroup *cg, const struct gbx_cg_layout *l, const char *id,
                      const struct gbx_cg_limits *lim, struct gbx_err **err)
{
    if (gbx_cgroup_begin(cg, l, id, err) < 0)
        return -1;
    if (gbx_cgroup_finish(cg, lim, err) < 0) {
        (void)!gbx_cgroup_destroy(cg, NULL);
        gbx_cgroup_release(cg);
        return -1;
    }
    return 0;
}

int gbx_cgroup_open(struct gbx_cgroup *cg, const struct gbx_cg_layout *l, const char *id,
                    struct gbx_err **err)
{
    memset(cg, 0, sizeof(*cg));
    cg->v2fd = -1;
    cg->layout = l;
    snprintf(cg->id, sizeof(cg->id), "%s", id);
    for (int c = 0; c < GBX_CG_NCTRL; c++) {
        if (l->v2_limits || l->v1[c] == NULL)
            continue;
        cg->dir[c] = gbx_asprintf("%s/" GBX_CG_PARENT "/%s%s", l->v1[c], l->scope, id);
        if (access(cg->dir[c], F_OK) < 0) {
            free(cg->dir[c]);
            cg->dir[c] = NULL;
        }
    }
    if (l->v2) {
        cg->v2dir = gbx_asprintf("%s/" GBX_CG_PARENT "/%s%s", l->v2, l->scope, id);
        cg->v2fd = open(cg->v2dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    const char *probe = cg->dir[GBX_CG_MEMORY] ? cg->dir[GBX_CG_MEMORY] : cg->v2dir;
    struct stat st;
    if (probe == NULL || stat(probe, &st) < 0) {
        gbx_cgroup_release(cg);
        return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "no cgroup for sandbox '%s'", id);
    }
    return 0;
}

int gbx_cgroup_attach(struct gbx_cgroup *cg, pid_t pid, int skip_v2, struct gbx_err **err)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", (int)pid);
    for (int c = 0; c < GBX_CG_NCTRL; c++) {
        if (cg->dir[c] == NULL)
            continue;
        int dup = 0;
        for (int d = 0; d < c; d++)
            if (cg->dir[d] && strcmp(cg->dir[d], cg->dir[c]) == 0)
                dup = 1;
        if (dup)
            continue;
        int r = write_cg(cg->dir[c], "cgroup.procs", buf);
        if (r < 0)
            return gbx_err_sys(err, -r, "cannot move %d into '%s'", (int)pid, cg->dir[c]);
    }
    if (cg->v2dir && !skip_v2) {
        int r = write_cg(cg->v2dir, "cgroup.procs", buf);
        if (r < 0)
            return gbx_err_sys(err, -r, "cannot move %d into '%s'", (int)pid, cg->v2dir);
    }
    return 0;
}

static int v2_file_exists(const struct gbx_cgroup *cg, const char *f)
{
    if (cg->v2dir == NULL)
        return 0;
    gbx_autofree char *p = gbx_asprintf("%s/%s", cg->v2dir, f);
    return access(p, F_OK) == 0;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Does cgroup.events (read from fd at offset 0) say "frozen <want>"? 1, 0, or -errno. */
static int events_frozen(int fd, int want)
{
    char buf[512];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    const char *f = strstr(buf, "frozen ");
    return f && (f[7] == '1') == !!want;
}

int gbx_cgroup_frozen(struct gbx_cgroup *cg)
{
    if (cg->v2dir && v2_file_exists(cg, "cgroup.freeze")) {
        gbx_autofree char *ev = gbx_asprintf("%s/cgroup.events", cg->v2dir);
        int fd = open(ev, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        int r = events_frozen(fd, 1);
        close(fd);
        return r;
    }
    if (cg->dir[GBX_CG_FREEZER]) {
        gbx_autofree char *st = gbx_asprintf("%s/freezer.state", cg->dir[GBX_CG_FREEZER]);
        gbx_autofree char *txt = NULL;
        if (gbx_read_file(st, 64, &txt, NULL) < 0)
            return -EIO;
        return strncmp(txt, "FROZEN", 6) == 0;
    }
    return 0;
}

int gbx_cgroup_freeze(struct gbx_cgroup *cg, int frozen, struct gbx_err **err)
{
    int r;
    if (v2_file_exists(cg, "cgroup.freeze")) {
        /* cgroup.events is opened and read before the write, so that a change after that
         * read wakes poll() (POLLPRI); bounded: 2 s */
        gbx_autofree char *ev = gbx_asprintf("%s/cgroup.events", cg->v2dir);
        int fd = open(ev, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            (void)events_frozen(fd, frozen);
        r = write_cg(cg->v2dir, "cgroup.freeze", frozen ? "1" : "0");
        if (r < 0) {
            if (fd >= 0)
                close(fd);
            return gbx_err_sys(err, -r, "cannot %s cgroup", frozen ? "freeze" : "thaw");
        }
        if (fd < 0)
            return gbx_err_sys(err, errno, "cannot read '%s'", ev);
        /* A freeze usually completes within tens of microseconds: re-read at once for a
         * little while; then wait in poll(), whose wake-ups the kernel rate-limits (one
         * cgroup.events notification per 10 ms), so at most 1 ms at a time. */
        int64_t t0 = gbx_monotonic_ns(), deadline = t0 + 2000000000ll;
        for (;;) {
            int done = events_frozen(fd, frozen);
            if (done != 0) {
                close(fd);
                return done < 0 ? gbx_err_sys(err, -done, "cannot read '%s'", ev) : 0;
            }
            int64_t now = gbx_monotonic_ns();
            if (now >= deadline)
                break;
            if (now - t0 < 500000) {
                sched_yield();
                continue;
            }
            struct pollfd pfd = {fd, POLLPRI, 0};
            (void)poll(&pfd, 1, 1);
        }
        close(fd);
        return gbx_err_set(err, ETIMEDOUT, GBX_ERR_UNAVAILABLE, "cgroup did not %s in time",
                           frozen ? "freeze" : "thaw");
    }
    if (cg->dir[GBX_CG_FREEZER]) {
        r = write_cg(cg->dir[GBX_CG_FREEZER], "freezer.state", frozen ? "FROZEN" : "THAWED");
        if (r < 0)
            return gbx_err_sys(err, -r, "cannot %s cgroup", frozen ? "freeze" : "thaw");
        gbx_autofree char *st = gbx_asprintf("%s/freezer.state", cg->dir[GBX_CG_FREEZER]);
        for (int i = 0; i < 2000; i++) {
            gbx_autofree char *txt = NULL;
            if (gbx_read_file(st, 64, &txt, NULL) < 0)
                break;
            if (strncmp(txt, frozen ? "FROZEN" : "THAWED", 6) == 0)
                return 0;
            sleep_us(1000);
        }
        return gbx_err_set(err, ETIMEDOUT, GBX_ERR_UNAVAILABLE, "cgroup did not %s in time",
                           frozen ? "freeze" : "thaw");
    }
    return gbx_err_set(err, ENOTSUP, GBX_ERR_UNAVAILABLE, "no cgroup freezer on this host");
}

const char *gbx_cgroup_procs_dir(const struct gbx_cgroup *cg)
{
    if (cg->v2dir)
        return cg->v2dir;
    static const enum gbx_cg_ctrl order[] = {GBX_CG_PIDS, GBX_CG_FREEZER, GBX_CG_MEMORY,
                                             GBX_CG_CPU};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(order); i++)
        if (cg->dir[order[i]])
            return cg->dir[order[i]];
    return NULL;
}

static int kill_procs_in(const char *dir)
{
    gbx_autofree char *p = gbx_asprintf("%s/cgroup.procs", dir);
    gbx_autofree char *txt = NULL;
    int r = gbx_read_file(p, 1 << 20, &txt, NULL);
    if (r < 0)
        return r;
    int n = 0;
    for (char *s = txt; *s;) {
        char *end;
        long pid = strtol(s, &end, 10);
        if (end == s)
            break;
        if (pid > 1)
            kill((pid_t)pid, SIGKILL), n++;
        s = end;
        while (*s == '\n')
            s++;
    }
    return n;
}

int gbx_cgroup_kill(struct gbx_cgroup *cg, struct gbx_err **err)
{
    if (v2_file_exists(cg, "cgroup.kill")) {
        int r = write_cg(cg->v2dir, "cgroup.kill", "1");
        if (r < 0)
            return gbx_err_sys(err, -r, "cannot kill cgroup");
        return 0;
    }
    const char *dir = cg->dir[GBX_CG_PIDS] ? cg->dir[GBX_CG_PIDS] : cg->dir[GBX_CG_MEMORY];
    if (dir == NULL)
        return gbx_err_set(err, ENOTSUP, GBX_ERR_UNAVAILABLE, "no cgroup to kill");
    /* freeze so nothing forks while we kill, then thaw so the kills land */
    int frozen = cg->dir[GBX_CG_FREEZER] &&
                 write_cg(cg->dir[GBX_CG_FREEZER], "freezer.state", "FROZEN") == 0;
    for (int i = 0; i < 100 && kill_procs_in(dir) > 0; i++)
        ;
    if (frozen)
        (void)write_cg(cg->dir[GBX_CG_FREEZER], "freezer.state", "THAWED");
    return 0;
}

int gbx_cgroup_destroy(struct gbx_cgroup *cg, struct gbx_err **err)
{
    int failed = 0, saved = 0;
    const char *what = NULL;
    for (int c = 0; c < GBX_CG_NCTRL; c++) {
        if (cg->dir[c] == NULL)
            continue;
        /* a group empties shortly after its last process is reaped: retry for up to 1 s */
        for (int i = 0; i < 1000; i++) {
            if (rmdir(cg->dir[c]) == 0 || errno == ENOENT)
                break;
            if (errno != EBUSY) {
                failed = 1, saved = errno, what = cg->dir[c];
                break;
            }
            if (i == 999)
                failed = 1, saved = EBUSY, what = cg->dir[c];
            sleep_us(1000);
        }
    }
    if (cg->v2dir) {
        if (cg->v2fd >= 0) {
            close(cg->v2fd);
            cg->v2fd = -1;
        }
        for (int i = 0; i < 1000; i++) {
            if (rmdir(cg->v2dir) == 0 || errno == ENOENT)
                break;
            if (errno != EBUSY || i == 999) {
                failed = 1, saved = errno, what = cg->v2dir;
                break;
            }
            sleep_us(1000);
        }
    }
    if (failed)
        return gbx_err_sys(err, saved, "cannot remove cgroup '%s'", what);
    return 0;
}

void gbx_cgroup_release(struct gbx_cgroup *cg)
{
    for (int c = 0; c < GBX_CG_NCTRL; c++) {
        free(cg->dir[c]);
        cg->dir[c] = NULL;
    }
    free(cg->v2dir);
    cg->v2dir = NULL;
    if (cg->v2fd >= 0)
        close(cg->v2fd);
    cg->v2fd = -1;
}

static uint64_t read_u64(const char *dir, const char *file)
{
    if (dir == NULL)
        return 0;
    gbx_autofree char *p = gbx_asprintf("%s/%s", dir, file);
    gbx_autofree char *txt = NULL;
    if (gbx_read_file(p, 4096, &txt, NULL) < 0)
        return 0;
    if (strncmp(txt, "max", 3) == 0)
        return UINT64_MAX;
    return strtoull(txt, NULL, 10);
}

static uint64_t read_keyed(const char *dir, const char *file, const char *key)
{
    if (dir == NULL)
        return 0;
    gbx_autofree char *p = gbx_asprintf("%s/%s", dir, file);
    gbx_autofree char *txt = NULL;
    if (gbx_read_file(p, 1 << 16, &txt, NULL) < 0)
        return 0;
    size_t kl = strlen(key);
    for (char *s = txt; s && *s;) {
        if (strncmp(s, key, kl) == 0 && s[kl] == ' ')
            return strtoull(s + kl + 1, NULL, 10);
        s = strchr(s, '\n');
        if (s)
            s++;
    }
    return 0;
}

int gbx_cgroup_usage(struct gbx_cgroup *cg, struct gbx_cg_usage *u, struct gbx_err **err)
{
    memset(u, 0, sizeof(*u));
    if (cg->layout && cg->layout->v2_limits) {
        u->memory_bytes = read_u64(cg->v2dir, "memory.current");
        u->memory_peak_bytes = read_u64(cg->v2dir, "memory.peak");
        u->memory_limit_bytes = read_u64(cg->v2dir, "memory.max");
        u->oom_kills = read_keyed(cg->v2dir, "memory.events", "oom_kill");
        u->pids = read_u64(cg->v2dir, "pids.current");
        u->pids_limit = read_u64(cg->v2dir, "pids.max");
        u->cpu_usage_ns = read_keyed(cg->v2dir, "cpu.stat", "usage_usec") * 1000;
    } else {
        const char *m = cg->dir[GBX_CG_MEMORY];
        u->memory_bytes = read_u64(m, "memory.usage_in_bytes");
        u->memory_peak_bytes = read_u64(m, "memory.max_usage_in_bytes");
        u->memory_limit_bytes = read_u64(m, "memory.limit_in_bytes");
        u->oom_kills = read_keyed(m, "memory.oom_control", "oom_kill");
        u->pids = read_u64(cg->dir[GBX_CG_PIDS], "pids.current");
        u->pids_limit = read_u64(cg->dir[GBX_CG_PIDS], "pids.max");
        if (cg->dir[GBX_CG_CPUACCT])
            u->cpu_usage_ns = read_u64(cg->dir[GBX_CG_CPUACCT], "cpuacct.usage");
        else
            u->cpu_usage_ns = read_keyed(cg->v2dir, "cpu.stat", "usage_usec") * 1000;
    }
    if (v2_file_exists(cg, "cgroup.events"))
        u->frozen = read_keyed(cg->v2dir, "cgroup.events", "frozen") == 1;
    (void)err;
    return 0;
}

int gbx_cg_favor_dynmods(const struct gbx_cg_layout *l, const char *scratch_dir)
{
    /* Only v1 placement migrates processes (v2 uses CLONE_INTO_CGROUP). Every migration
     * takes the global cgroup threadgroup rwsem for writing, which costs an RCU grace period
     * (~20 ms here) unless the kernel favours dynamic modifications. The flag is global and
     * is set by mounting cgroup2 with "favordynmods"; forks and exits pay a little more. */
    if (l->v2_limits || l->favordynmods)
        return 0;
    if (mkdir(scratch_dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    if (mount("none", scratch_dir, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, "favordynmods") <
        0) {
        int e = errno;
        rmdir(scratch_dir);
        return -e;
    }
    (void)umount2(scratch_dir, MNT_DETACH);
    (void)rmdir(scratch_dir);
    return 0;
}

/* Is the group (any of its hierarchies) empty? */
static int group_empty(const char *dir)
{
    gbx_autofree char *p = gbx_asprintf("%s/cgroup.procs", dir);
    gbx_autofree char *txt = NULL;
    if (gbx_read_file(p, 4096, &txt, NULL) < 0)
        return 0;
    return txt[0] == '\0';
}

int gbx_cgroup_gc(const struct gbx_cg_layout *l, const char *prefix, int min_age_s)
{
    const char *base = l->v2_limits ? l->v2 : l->v1[GBX_CG_PIDS];
    if (base == NULL)
        return 0;
    gbx_autofree char *parent = gbx_asprintf("%s/" GBX_CG_PARENT, base);
    DIR *d = opendir(parent);
    if (d == NULL)
        return 0;
    time_t now = time(NULL);
    int removed = 0;
    struct dirent *de;
    size_t scope_len = strlen(l->scope);
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, l->scope, scope_len) != 0 ||
            strncmp(de->d_name + scope_len, prefix, strlen(prefix)) != 0)
            continue;
        gbx_autofree char *dir = gbx_asprintf("%s/%s", parent, de->d_name);
        struct stat st;
        if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || now - st.st_mtime < min_age_s)
            continue;
        if (!group_empty(dir))
            continue;
        struct gbx_cgroup cg;
        if (gbx_cgroup_open(&cg, l, de->d_name + scope_len, NULL) < 0)
            continue;
        int busy = 0;
        for (int c = 0; c < GBX_CG_NCTRL; c++)
            if (cg.dir[c] && !group_empty(cg.dir[c]))
                busy = 1;
        if (cg.v2dir && !group_empty(cg.v2dir))
            busy = 1;
        if (!busy && gbx_cgroup_destroy(&cg, NULL) == 0)
            removed++;
        gbx_cgroup_release(&cg);
    }
    closedir(d);
    return removed;
}
