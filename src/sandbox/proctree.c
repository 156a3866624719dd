/* SPDX-License-Identifier: MIT */
/* A sandbox's processes read on the host (see proctree.h). The group's cgroup.procs names
 * them by host pid; each is checked to be in the sandbox's pid namespace (a pid reused by a
 * host process meanwhile is left out), and its NSpid line gives the pid the sandbox sees. */
#include "sandbox/proctree.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "base/path.h"
#include "sandbox/backend.h"

#define PROCS_FILE_MAX (4u << 20) /* cgroup.procs: ~500k pids */
#define CMDLINE_MAX (16u << 10)   /* of a process's argv, what is shown */
#define PASSWD_MAX (1u << 20)
#define PASSWD_LINE_MAX 4096

struct proc {
    pid_t host, host_ppid, pid, ppid;
    uint32_t uid;
    char state;
    int helper;
    char name[64];
    json_t *cmd;
};

/* The last number of a "Key:\t1\t2..." line of a status text, or -1. */
static long status_last(const char *status, const char *key)
{
    const char *p = strstr(status, key);
    if (p == NULL)
        return -1;
    p += strlen(key);
    long last = -1;
    for (;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        last = v;
        p = end;
        if (*p == '\n' || *p == '\0')
            break;
    }
    return last;
}

/* The first number of a "Key:\t1\t2..." line, or -1. */
static long status_first(const char *status, const char *key)
{
    const char *p = strstr(status, key);
    if (p == NULL)
        return -1;
    char *end;
    long v = strtol(p + strlen(key), &end, 10);
    return end == p + strlen(key) ? -1 : v;
}

static int same_file(const char *a, const struct stat *b)
{
    struct stat st;
    return stat(a, &st) == 0 && st.st_dev == b->st_dev && st.st_ino == b->st_ino;
}

/* Read one process; 0, or -1 when it is gone or not the sandbox's. */
static int read_proc(pid_t host, const struct stat *ns, const struct stat *init_exe,
                     uint32_t host_uid, struct proc *p)
{
    char path[64];
    memset(p, 0, sizeof(*p));
    p->host = host;
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)host);
    if (!same_file(path, ns))
        return -1;
    gbx_autofree char *stat_txt = NULL, *status = NULL;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)host);
    if (gbx_read_file(path, 4096, &stat_txt, NULL) < 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)host);
    if (gbx_read_file(path, 1 << 16, &status, NULL) < 0)
        return -1;
    /* pid (comm) S ppid ...: comm may hold ')' and spaces, so from the last ')' */
    char *lp = strchr(stat_txt, '('), *rp = strrchr(stat_txt, ')');
    if (lp == NULL || rp == NULL || rp < lp || rp[1] != ' ' || rp[2] == '\0')
        return -1;
    size_t n = (size_t)(rp - lp - 1);
    if (n >= sizeof(p->name))
        n = sizeof(p->name) - 1;
    memcpy(p->name, lp + 1, n);
    p->state = rp[2];
    p->host_ppid = (pid_t)strtol(rp + 3, NULL, 10);
    long nspid = status_last(status, "\nNSpid:");
    long uid = status_first(status, "\nUid:");
    if (nspid < 1 || uid < 0)
        return -1;
    /* still the sandbox's (not a host process given the pid of one that ended meanwhile) */
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)host);
    if (!same_file(path, ns))
        return -1;
    p->pid = (pid_t)nspid;
    p->uid = (uint32_t)uid >= host_uid && (uint32_t)uid - host_uid < GBX_UID_RANGE
                 ? (uint32_t)uid - host_uid
                 : 65534; /* outside its map: the overflow uid, as inside */
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)host);
    p->helper = p->pid != 1 && same_file(path, init_exe);
    p->cmd = json_array();
    /* reading another process's argv waits for its memory: nothing in a sandbox can stall
     * that for long (no userfaultfd: seccomp.c; no FUSE) */
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)host);
    gbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf = gbx_xmalloc(CMDLINE_MAX + 1);
    ssize_t len = 0;
    while (fd >= 0 && (size_t)len < CMDLINE_MAX) {
        ssize_t r = read(fd, buf + len, CMDLINE_MAX - (size_t)len);
        if (r <= 0)
            break;
        len += r;
    }
    buf[len] = '\0';
    for (ssize_t i = 0; i < len;) {
        size_t k = strlen(buf + i);
        /* not UTF-8: shown mangled, not dropped (as the agent's PS does) */
        json_t *s = json_stringn(buf + i, k);
        json_array_append_new(p->cmd, s ? s : json_string("?"));
        i += (ssize_t)k + 1;
    }
    free(buf);
    return 0;
}

static int by_pid(const void *a, const void *b)
{
    const struct proc *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* The in-sandbox pid of host pid h: from the list, else read (a parent past the cap). */
static pid_t ns_pid_of(const struct proc *v, size_t n, pid_t h, const struct stat *ns)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].host == h)
            return v[i].pid;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)h);
    if (h <= 0 || !same_file(path, ns))
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)h);
    gbx_autofree char *status = NULL;
    if (gbx_read_file(path, 1 << 16, &status, NULL) < 0)
        return 0;
    long p = status_last(status, "\nNSpid:");
    return p > 0 ? (pid_t)p : 0;
}

/* uid -> name from the sandbox's /etc/passwd, resolved inside its root (its symlinks cannot
 * lead out); the first line of each uid wins. A JSON object {"uid": "name"}, maybe empty. */
static json_t *passwd_names(pid_t init_pid)
{
    json_t *names = json_object();
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/root", (int)init_pid);
    gbx_autoclose int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return names;
    /* non-blocking: a FIFO put there must not hold the reader */
    int fd = gbx_path_open_in(root, "/etc/passwd", O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    struct stat st;
    if (fd < 0)
        return names;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)PASSWD_MAX) {
        close(fd);
        return names;
    }
    FILE *f = fdopen(fd, "r");
    if (f == NULL) {
        close(fd);
        return names;
    }
    struct passwd pw, *res = NULL;
    char *line = gbx_xmalloc(PASSWD_LINE_MAX);
    int r;
    while ((r = fgetpwent_r(f, &pw, line, PASSWD_LINE_MAX, &res)) == 0 || r == ERANGE) {
        if (r == ERANGE || res == NULL)
            continue; /* a line too long for the buffer: skipped */
        char key[16];
        snprintf(key, sizeof(key), "%u", (unsigned)pw.pw_uid);
        json_t *name = json_string(pw.pw_name);
        if (name && json_object_get(names, key) == NULL)
            json_object_set_new(names, key, name);
        else
            json_decref(name);
    }
    free(line);
    fclose(f);
    return names;
}

int gbx_sandbox_proctree(const struct gbx_proctree_src *src, size_t max, json_t **out,
                         struct gbx_err **err)
{
    *out = NULL;
    char path[64];
    struct stat ns, init_exe;
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)src->init_pid);
    if (stat(path, &ns) < 0)
        return gbx_err_set(err, ESRCH, GBX_ERR_UNAVAILABLE, "the sandbox's init is gone");
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)src->init_pid);
    if (stat(path, &init_exe) < 0)
        memset(&init_exe, 0, sizeof(init_exe));
    gbx_autofree char *procs = gbx_asprintf("%s/cgroup.procs", src->cgroup_dir);
    gbx_autofree char *txt = NULL;
    int r = gbx_read_file(procs, PROCS_FILE_MAX, &txt, NULL);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot read '%s'", procs);
    /* init first, then the group's order, up to max */
    struct proc *v = gbx_xcalloc(max + 1, sizeof(*v));
    size_t n = 0, total = 0, left_out = 0;
    if (max > 0 && read_proc(src->init_pid, &ns, &init_exe, src->host_uid, &v[0]) == 0)
        n = 1;
    for (char *s = txt; *s;) {
        char *end;
        long h = strtol(s, &end, 10);
        if (end == s)
            break;
        s = end;
        while (*s == '\n')
            s++;
        if (h <= 0)
            continue;
        total++;
        if ((pid_t)h == src->init_pid)
            continue;
        if (n >= max) {
            left_out++;
            continue;
        }
        if (read_proc((pid_t)h, &ns, &init_exe, src->host_uid, &v[n]) == 0)
            n++;
        else
            json_decref(v[n].cmd);
    }
    for (size_t i = 0; i < n; i++)
        v[i].ppid = v[i].pid == 1 ? 0 : ns_pid_of(v, n, v[i].host_ppid, &ns);
    qsort(v, n, sizeof(*v), by_pid);
    json_t *names = passwd_names(src->init_pid);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        char key[16], st[2] = {v[i].state, '\0'};
        snprintf(key, sizeof(key), "%u", (unsigned)v[i].uid);
        json_t *name = json_object_get(names, key);
        name = name ? json_incref(name) : json_string(key);
        json_t *o = json_object(), *comm = json_string(v[i].name);
        json_object_set_new(o, "pid", json_integer(v[i].pid));
        json_object_set_new(o, "ppid", json_integer(v[i].ppid));
        json_object_set_new(o, "uid", json_integer((json_int_t)v[i].uid));
        json_object_set_new(o, "user", name);
        json_object_set_new(o, "state", json_string(st));
        json_object_set_new(o, "name", comm ? comm : json_string("?"));
        json_object_set_new(o, "cmd", v[i].cmd);
        json_object_set_new(o, "kind",
                            json_string(v[i].pid == 1 ? "init"
                                        : v[i].helper ? "helper"
                                                      : "other"));
        json_array_append_new(arr, o);
    }
    json_decref(names);
    free(v);
    *out = json_pack("{s:o,s:I,s:b}", "processes", arr, "total", (json_int_t)total, "truncated",
                     left_out > 0);
    return 0;
}
