/* SPDX-License-Identifier: MIT */
#include "sandbox/debootstrap.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/clock.h"
#include "base/fileutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "sandbox/template.h"

#define DEFAULT_MIRROR "http://deb.debian.org/debian"
#define TAIL_LINES 6

const char *gbx_deb_phase_name(enum gbx_deb_phase p)
{
    static const char *const names[] = {"other",     "retrieve", "extract", "install",
                                        "configure", "done",     "error"};
    return (unsigned)p < GBX_ARRAY_SIZE(names) ? names[p] : "other";
}

static const struct {
    const char *verb;
    enum gbx_deb_phase phase;
    int counts;
} verbs[] = {
    {"Retrieving ", GBX_DEB_RETRIEVE, 1}, {"Validating ", GBX_DEB_RETRIEVE, 0},
    {"Extracting ", GBX_DEB_EXTRACT, 1},  {"Unpacking ", GBX_DEB_INSTALL, 1},
    {"Installing ", GBX_DEB_INSTALL, 0},  {"Configuring ", GBX_DEB_CONFIGURE, 1},
};

void gbx_deb_parse_line(const char *line, struct gbx_deb_line *out)
{
    memset(out, 0, sizeof(*out));
    if (strncmp(line, "E: ", 3) == 0) {
        out->phase = GBX_DEB_ERROR;
        return;
    }
    if (strncmp(line, "I: ", 3) != 0)
        return;
    const char *m = line + 3;
    if (strncmp(m, "Base system installed successfully", 34) == 0) {
        out->phase = GBX_DEB_DONE;
        return;
    }
    for (size_t i = 0; i < GBX_ARRAY_SIZE(verbs); i++) {
        size_t vl = strlen(verbs[i].verb);
        if (strncmp(m, verbs[i].verb, vl) != 0)
            continue;
        out->phase = verbs[i].phase;
        const char *p = m + vl;
        size_t n = strcspn(p, " .:\r\n"); /* "coreutils 9.1-1", "gzip...", "libpam:amd64..." */
        /* "Installing core packages...", "Unpacking required packages...", "Retrieving
         * InRelease", "Retrieving Packages": steps of the phase, no package */
        int generic = strstr(p, " packages") != NULL || strncmp(p, "InRelease", 9) == 0 ||
                      strncmp(p, "Packages", 8) == 0 || strncmp(p, "Release", 7) == 0;
        if (!generic && n > 0 && n < sizeof(out->package)) {
            memcpy(out->package, p, n);
            out->package[n] = '\0';
            out->counts = verbs[i].counts;
        }
        return;
    }
}

static int word_ok(const char *s, size_t max, const char *extra)
{
    if (s == NULL || s[0] == '\0' || strlen(s) > max || s[0] == '-')
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr(extra, *p)))
            return 0;
    return 1;
}

int gbx_deb_opts_check(const struct gbx_deb_opts *o, struct gbx_err **err)
{
    if (!word_ok(o->suite, 64, "-"))
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "suite: expected a Debian suite name such as 'bookworm'");
    if (o->variant && strcmp(o->variant, "minbase") != 0 && strcmp(o->variant, "buildd") != 0 &&
        strcmp(o->variant, "-") != 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "variant: expected 'minbase', 'buildd' or '-' (the default set)");
    const char *m = o->mirror;
    if (m && ((strncmp(m, "http://", 7) != 0 && strncmp(m, "https://", 8) != 0) ||
              strlen(m) > 512 || strpbrk(m, " \t\r\n'\"\\") != NULL))
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                           "mirror: expected an http:// or https:// URL");
    if (o->n_include > 256)
        return gbx_err_set(err, E2BIG, GBX_ERR_LIMIT, "include: more than 256 packages");
    for (size_t i = 0; i < o->n_include; i++)
        if (!word_ok(o->include[i], 128, "+-."))
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "include: '%s' is not a Debian package name", o->include[i]);
    return 0;
}

struct run {
    const struct gbx_deb_opts *o;
    char tail[TAIL_LINES][256];
    unsigned ntail;
    unsigned total, steps[GBX_DEB_ERROR + 1];
    enum gbx_deb_phase phase;
};

static void on_line(struct run *r, char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = '\0';
    if (n == 0)
        return;
    snprintf(r->tail[r->ntail++ % TAIL_LINES], sizeof(r->tail[0]), "%s", line);
    struct gbx_deb_line l;
    gbx_deb_parse_line(line, &l);
    if (l.phase == GBX_DEB_OTHER || l.phase == GBX_DEB_ERROR) {
        l.phase = r->phase; /* a line within the current phase */
    } else {
        r->phase = l.phase;
        if (l.counts)
            r->steps[l.phase]++;
        if (l.counts && l.phase == GBX_DEB_RETRIEVE)
            r->total = r->steps[GBX_DEB_RETRIEVE];
    }
    if (r->o->progress) {
        struct gbx_deb_progress p = {.phase = r->phase,
                                     .package = l.package,
                                     .step = r->steps[r->phase],
                                     .total = r->total,
                                     .line = line};
        r->o->progress(r->o->arg, &p);
    }
}

static char *tail_text(const struct run *r)
{
    char *t = gbx_xstrdup("");
    unsigned first = r->ntail > TAIL_LINES ? r->ntail - TAIL_LINES : 0;
    for (unsigned i = first; i < r->ntail; i++) {
        char *n = gbx_asprintf("%s%s%s", t, *t ? " | " : "", r->tail[i % TAIL_LINES]);
        free(t);
        t = n;
    }
    return t;
}

static int run_debootstrap(const struct gbx_deb_opts *o, const char *target, struct gbx_err **err)
{
    gbx_autofree char *variant = gbx_asprintf("--variant=%s", o->variant ? o->variant : "minbase");
    gbx_autofree char *include = NULL;
    if (o->n_include) {
        include = gbx_xstrdup("--include=");
        for (size_t i = 0; i < o->n_include; i++) {
            char *n = gbx_asprintf("%s%s%s", include, i ? "," : "", o->include[i]);
            free(include);
            include = n;
        }
    }
    const char *argv[8];
    size_t a = 0;
    argv[a++] = "debootstrap";
    if (strcmp(variant, "--variant=-") != 0)
        argv[a++] = variant;
    if (include)
        argv[a++] = include;
    argv[a++] = o->suite;
    argv[a++] = target;
    argv[a++] = o->mirror ? o->mirror : DEFAULT_MIRROR;
    argv[a] = NULL;
    static const char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
                                       "DEBIAN_FRONTEND=noninteractive", "HOME=/root", NULL};
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return gbx_err_sys(err, errno, "cannot make a pipe");
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    posix_spawnattr_init(&at);
    sigset_t none, def;
    sigemptyset(&none);
    sigfillset(&def);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
    pid_t pid;
    /* posix_spawn's prototype predates const: it does not write the strings */
    int r = posix_spawn(&pid, "/usr/sbin/debootstrap", &fa, &at, (char *const *)(uintptr_t)argv,
                        (char *const *)(uintptr_t)envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(pfd[1]);
    if (r != 0) {
        close(pfd[0]);
        return gbx_err_set(err, r, GBX_ERR_UNAVAILABLE, "cannot run debootstrap: %s%s", strerror(r),
                           r == ENOENT ? " (apt-get install debootstrap)" : "");
    }
    gbx_autofree struct run *run = gbx_xcalloc(1, sizeof(*run));
    run->o = o;
    char buf[4096];
    size_t have = 0;
    int killed = 0;
    int64_t kill_at = 0;
    for (;;) {
        if (o->cancel && *o->cancel && !killed) {
            (void)kill(-pid, SIGTERM);
            killed = 1;
            kill_at = gbx_monotonic_ns() + 3000000000LL;
        }
        if (killed == 1 && gbx_monotonic_ns() > kill_at) {
            (void)kill(-pid, SIGKILL);
            killed = 2;
        }
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        int pr = poll(&p, 1, 250);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0)
            continue;
        ssize_t n = read(pfd[0], buf + have, sizeof(buf) - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
        char *start = buf, *nl;
        while ((nl = strchr(start, '\n')) != NULL) {
            *nl = '\0';
            on_line(run, start);
            start = nl + 1;
        }
        have -= (size_t)(start - buf);
        memmove(buf, start, have);
        if (have == sizeof(buf) - 1) { /* a line too long: take it as it is */
            buf[have] = '\0';
            on_line(run, buf);
            have = 0;
        }
    }
    close(pfd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    (void)kill(-pid, SIGKILL); /* anything it left behind in its group */
    if (killed)
        return gbx_err_set(err, ECANCELED, GBX_ERR_UNAVAILABLE, "cancelled");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || run->phase != GBX_DEB_DONE) {
        gbx_autofree char *t = tail_text(run);
        return gbx_err_set(err, EIO, GBX_ERR_UNAVAILABLE, "debootstrap failed (%s %d): %s",
                           WIFEXITED(status) ? "exit" : "signal",
                           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), t);
    }
    return 0;
}

int gbx_template_build_debian(const char *state_dir, const char *name, const struct gbx_deb_opts *o,
                              struct gbx_err **err)
{
    if (gbx_template_name_valid(name) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "invalid template name '%s'", name);
    if (gbx_deb_opts_check(o, err) < 0)
        return -1;
    char *staging = NULL;
    if (gbx_template_staging(state_dir, name, &staging, err) < 0)
        return gbx_err_wrap(err, "build template '%s'", name);
    gbx_autofree char *stage = staging;
    gbx_autofree char *rootfs = gbx_asprintf("%s/rootfs", stage);
    int r = -1;
    if (mkdir(rootfs, 0755) < 0) {
        gbx_err_sys(err, errno, "cannot create '%s'", rootfs);
    } else if (run_debootstrap(o, rootfs, err) == 0) {
        gbx_autoclose int root = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
            gbx_err_sys(err, errno, "cannot open '%s'", rootfs);
        else if (gbx_template_fixup_rootfs(root, GBX_FIXUP_USER, err) == 0)
            r = 0;
        /* the downloaded .debs (tens of MB) are not part of the template */
        gbx_autofree char *debs = gbx_asprintf("%s/var/cache/apt/archives", rootfs);
        DIR *d = opendir(debs);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            size_t n = strlen(de->d_name);
            if (n > 4 && strcmp(de->d_name + n - 4, ".deb") == 0)
                (void)unlinkat(dirfd(d), de->d_name, 0);
        }
        if (d)
            closedir(d);
    }
    gbx_template_unmount_below(stage);
    if (r == 0) {
        gbx_autofree char *created = gbx_rfc3339(gbx_realtime_ns());
        const char *variant = o->variant ? o->variant : "minbase";
        gbx_autofree char *conf = gbx_asprintf(
            "format=%d\ndescription=Debian %s (%s)%s%s\nsource=debootstrap:%s\ncreated=%s\n",
            GBX_TEMPLATE_FORMAT, o->suite, variant, o->n_include ? " with " : "",
            o->n_include ? "extra packages" : "", o->suite, created);
        gbx_autofree char *full = gbx_asprintf("%s%s", conf, o->conf_extra ? o->conf_extra : "");
        r = gbx_template_install(state_dir, name, stage, full, err);
    }
    if (r < 0) {
        (void)!gbx_template_remove_tree(stage);
        return gbx_err_wrap(err, "build template '%s'", name);
    }
    return 0;
}
