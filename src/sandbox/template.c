/* SPDX-License-Identifier: MIT */
#include "sandbox/template.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fileutil.h"
#include "base/mem.h"
#include "base/parse.h"
#include "sandbox/layer.h"

int gbx_template_name_valid(const char *name)
{
    const char *at = name ? strchr(name, '@') : NULL;
    if (at == NULL)
        return gbx_name_valid(name);
    char head[64];
    size_t n = (size_t)(at - name);
    if (n == 0 || n >= sizeof(head))
        return -EINVAL;
    memcpy(head, name, n);
    head[n] = '\0';
    return gbx_name_valid(head) < 0 ? -EINVAL : gbx_name_valid(at + 1);
}

size_t gbx_template_shown_len(const char *name)
{
    return strcspn(name, "@");
}

const char *gbx_template_shown(const char *name, char buf[GBX_TEMPLATE_SHOWN_MAX])
{
    size_t n = gbx_template_shown_len(name);
    if (name[n] == '\0')
        return name;
    snprintf(buf, GBX_TEMPLATE_SHOWN_MAX, "%.*s", (int)n, name);
    return buf;
}

int gbx_template_shown_is(const char *stored, const char *name)
{
    size_t n = gbx_template_shown_len(stored);
    return strncmp(stored, name, n) == 0 && name[n] == '\0';
}

const char *gbx_template_owner(const char *name)
{
    const char *at = strchr(name, '@');
    return at ? at + 1 : "";
}

/* The host /etc entries a working userland needs and that hold no host secrets. */
static const char *const etc_copy[] = {
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "localtime",
    "timezone",
    "bash.bashrc",
    "profile",
    "profile.d",
    "inputrc",
    "skel",
    "login.defs",
    "mime.types",
    "protocols",
    "services",
    "gai.conf",
    "host.conf",
    "debian_version",
    "os-release",
    "issue",
    "magic",
    "magic.mime",
    "python3",
    "python3.11",
    "perl",
    "vim",
    "nanorc",
    "terminfo",
    "environment",
    "shells",
    "mke2fs.conf",
    "npmrc",
    "gitconfig",
    "wgetrc",
    "gprofng.rc",
    "locale.alias",
    "locale.gen",
    "xattr.conf",
    "subuid",
    "subgid",
    "adduser.conf",
    "deluser.conf",
    "libaudit.conf",
    "ucf.conf",
    "mailcap",
    /* a browser (docs/browser.md): Debian's chromium wrapper reads these; text needs fonts */
    "fonts",
    "chromium",
    "chromium.d",
};

static int copy_tree(int sfd, int dfd, const char *name, int depth);

static int copy_file(int sfd, int dfd, const char *name, const struct stat *st)
{
    gbx_autoclose int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return errno == EACCES ? 0 : -errno;
    gbx_autoclose int out =
        openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st->st_mode & 07777);
    if (out < 0)
        return -errno;
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        int r = gbx_write_all(out, buf, (size_t)n);
        if (r < 0)
            return r;
    }
    if (fchmod(out, st->st_mode & 07777) < 0)
        return -errno;
    return 0;
}

static int copy_entry(int sfd, int dfd, const char *name, int depth)
{
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (S_ISLNK(st.st_mode)) {
        char target[4096];
        ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
        if (n < 0)
            return -errno;
        target[n] = '\0';
        if (symlinkat(target, dfd, name) < 0)
            return -errno;
        return 0;
    }
    if (S_ISDIR(st.st_mode))
        return copy_tree(sfd, dfd, name, depth + 1);
    if (S_ISREG(st.st_mode) && st.st_size < (16 << 20))
        return copy_file(sfd, dfd, name, &st);
    return 0; /* devices, fifos, sockets, huge files: not part of a template */
}

static int copy_tree(int sfd, int dfd, const char *name, int depth)
{
    if (depth > 16)
        return 0;
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (mkdirat(dfd, name, st.st_mode & 07777) < 0 && errno != EEXIST)
        return -errno;
    gbx_autoclose int s = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    gbx_autoclose int d = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s < 0 || d < 0)
        return s < 0 && errno == EACCES ? 0 : -errno;
    DIR *dir = fdopendir(dup(s));
    if (dir == NULL)
        return -errno;
    struct dirent *de;
    int r = 0;
    while ((de = readdir(dir)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((r = copy_entry(s, d, de->d_name, depth)) < 0)
            break;
    }
    closedir(dir);
    return r;
}

static int put(int root, const char *path, const char *text, mode_t mode)
{
    gbx_autoclose int fd = openat(root, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    if (fchmod(fd, mode) < 0)
        return -errno;
    return gbx_write_all(fd, text, strlen(text));
}

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "user:x:1000:1000:user:/home/user:/bin/bash\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group[] = "root:x:0:\ntty:x:5:\nusers:x:100:user\nuser:x:1000:\n"
                            "nogroup:x:65534:\n";
static const char shadow[] = "root:*:19000:0:99999:7:::\nuser:*:19000:0:99999:7:::\n"
                             "nobody:*:19000:0:99999:7:::\n";
static const char nsswitch[] = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                               "networks: files\nprotocols: files\nservices: files\n";
static const char hosts[] = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";

static int build_rootfs(int root, struct gbx_err **err)
{
    static const char *const dirs[] = {
        "etc",       "usr",     "proc", "dev",  "tmp",       "run", "var", "var/tmp", "var/lib",
        "var/cache", "var/log", "home", "root", "home/user", "mnt", "opt", "srv",     "sys"};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(dirs); i++) {
        mode_t mode = strcmp(dirs[i], "tmp") == 0 || strcmp(dirs[i], "var/tmp") == 0 ? 01777
                      : strcmp(dirs[i], "root") == 0                                 ? 0700
                                                                                     : 0755;
        if (mkdirat(root, dirs[i], mode) < 0 && errno != EEXIST)
            return gbx_err_sys(err, errno, "cannot create '%s'", dirs[i]);
        if (fchmodat(root, dirs[i], mode, 0) < 0)
            return gbx_err_sys(err, errno, "cannot chmod '%s'", dirs[i]);
    }
    if (fchownat(root, "home/user", GBX_USER_UID, GBX_USER_UID, 0) < 0)
        return gbx_err_sys(err, errno, "cannot chown 'home/user'");
    /* merged /usr: mirror the host's top-level links into /usr (bin, sbin, lib, lib64...) */
    gbx_autoclose int host = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fdopendir(dup(host));
    if (d == NULL)
        return gbx_err_sys(err, errno, "cannot list '/'");
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char target[256];
        ssize_t n = readlinkat(host, de->d_name, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strncmp(target, "usr/", 4) != 0 && strncmp(target, "/usr/", 5) != 0)
            continue;
        if (symlinkat(target, root, de->d_name) < 0 && errno != EEXIST) {
            closedir(d);
            return gbx_err_sys(err, errno, "cannot link '%s'", de->d_name);
        }
    }
    closedir(d);

    gbx_autoclose int hetc = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    gbx_autoclose int etc = openat(root, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (hetc < 0 || etc < 0)
        return gbx_err_sys(err, errno, "cannot open '/etc'");
    for (size_t i = 0; i < GBX_ARRAY_SIZE(etc_copy); i++) {
        int r = copy_entry(hetc, etc, etc_copy[i], 0);
        if (r < 0)
            return gbx_err_sys(err, -r, "cannot copy '/etc/%s'", etc_copy[i]);
    }
    struct {
        const char *path, *text;
        mode_t mode;
    } files[] = {
        {"etc/passwd", passwd, 0644},
        {"etc/group", group, 0644},
        {"etc/shadow", shadow, 0640},
        {"etc/nsswitch.conf", nsswitch, 0644},
        {"etc/hosts", hosts, 0644},
        {"etc/hostname", "sandbox\n", 0644},
        {"etc/resolv.conf", "nameserver 127.0.0.1\n", 0644},
        {"etc/machine-id", "", 0444},
        {"etc/mtab", "", 0644},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(files); i++) {
        (void)unlinkat(root, files[i].path, 0);
        int r = put(root, files[i].path, files[i].text, files[i].mode);
        if (r < 0)
            return gbx_err_sys(err, -r, "cannot write '%s'", files[i].path);
    }
    (void)unlinkat(root, "etc/mtab", 0);
    if (symlinkat("../proc/self/mounts", root, "etc/mtab") < 0)
        return gbx_err_sys(err, errno, "cannot link 'etc/mtab'");
    /* a home with the usual dot files */
    gbx_autoclose int skel = open("/etc/skel", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (skel >= 0) {
        static const char *const dots[] = {".bashrc", ".profile", ".bash_logout"};
        for (size_t i = 0; i < GBX_ARRAY_SIZE(dots); i++) {
            char p[64];
            snprintf(p, sizeof(p), "home/user/%s", dots[i]);
            gbx_autoclose int hu = openat(root, "home/user", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (hu >= 0 && copy_entry(skel, hu, dots[i], 0) == 0)
                (void)!fchownat(root, p, GBX_USER_UID, GBX_USER_UID, AT_SYMLINK_NOFOLLOW);
        }
    }
    return 0;
}

int gbx_template_build_host(const char *state_dir, struct gbx_err **err)
{
    gbx_autofree char *tdir = gbx_asprintf("%s/templates", state_dir);
    gbx_autofree char *final = gbx_asprintf("%s/host", tdir);
    gbx_autofree char *tmp = gbx_asprintf("%s/.host.tmp.%d.%d", tdir, (int)getpid(), gettid());
    int r = gbx_mkdir_p(tdir, 0700);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot create '%s'", tdir);
    (void)!gbx_rm_rf(tmp);
    gbx_autofree char *rootfs = gbx_asprintf("%s/rootfs", tmp);
    if ((r = gbx_mkdir_p(rootfs, 0755)) < 0)
        return gbx_err_sys(err, -r, "cannot create '%s'", rootfs);
    gbx_autoclose int root = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0 || build_rootfs(root, err) < 0) {
        if (root < 0)
            gbx_err_sys(err, errno, "cannot open '%s'", rootfs);
        (void)!gbx_rm_rf(tmp);
        return gbx_err_wrap(err, "build template 'host'");
    }
    gbx_autofree char *conf = gbx_asprintf(
        "format=%d\nusr=host\ndescription=the host's /usr, read-only, with a generated /etc\n",
        GBX_TEMPLATE_FORMAT);
    gbx_autofree char *confp = gbx_asprintf("%s/template.conf", tmp);
    if ((r = gbx_write_file_atomic(confp, conf, strlen(conf), 0644)) < 0) {
        (void)!gbx_rm_rf(tmp);
        return gbx_err_sys(err, -r, "cannot write '%s'", confp);
    }
    /* replace atomically; a concurrent builder may have won, which is fine */
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) < 0) {
        int e = errno;
        if (e == EEXIST || e == ENOTEMPTY) {
            gbx_autofree char *old =
                gbx_asprintf("%s/.host.old.%d.%d", tdir, (int)getpid(), gettid());
            if (rename(final, old) == 0) {
                if (rename(tmp, final) < 0)
                    e = errno;
                else
                    e = 0;
                (void)!gbx_rm_rf(old);
            }
        }
        if (e) {
            (void)!gbx_rm_rf(tmp);
            return gbx_err_sys(err, e, "cannot install template 'host'");
        }
    }
    return 0;
}

static int read_conf(struct gbx_template *t, int *format)
{
    gbx_autofree char *p = gbx_asprintf("%s/template.conf", t->dir);
    gbx_autofree char *txt = NULL;
    int r = gbx_read_file(p, 65536, &txt, NULL);
    if (r < 0)
        return r;
    *format = 0;
    char *save = NULL; /* creates run on several threads */
    for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "format=", 7) == 0)
            *format = atoi(line + 7);
        else if (strcmp(line, "usr=host") == 0)
            t->usr_host = 1;
    }
    return 0;
}

static pthread_mutex_t host_build_mu = PTHREAD_MUTEX_INITIALIZER;

int gbx_template_open(const char *state_dir, const char *name, struct gbx_template *t,
                      struct gbx_err **err)
{
    memset(t, 0, sizeof(*t));
    if (gbx_template_name_valid(name) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "invalid template name '%s'", name);
    t->name = gbx_xstrdup(name);
    t->dir = gbx_asprintf("%s/templates/%s", state_dir, name);
    t->rootfs = gbx_asprintf("%s/rootfs", t->dir);
    int format = 0;
    int r = read_conf(t, &format);
    int builtin = strcmp(name, GBX_TEMPLATE_HOST) == 0;
    if (builtin && (r < 0 || format != GBX_TEMPLATE_FORMAT)) {
        /* the first creates of a new daemon arrive together, on several threads: one builds,
         * the others wait for it and use what it built */
        pthread_mutex_lock(&host_build_mu);
        r = read_conf(t, &format);
        if (r < 0 || format != GBX_TEMPLATE_FORMAT) {
            if (gbx_template_build_host(state_dir, err) < 0) {
                pthread_mutex_unlock(&host_build_mu);
                gbx_template_release(t);
                return -1;
            }
            r = read_conf(t, &format);
        }
        pthread_mutex_unlock(&host_build_mu);
    }
    if (r < 0) {
        gbx_template_release(t);
        if (r == -ENOENT)
            return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "template '%s' not found", name);
        return gbx_err_sys(err, -r, "cannot read template '%s'", name);
    }
    return 0;
}

void gbx_template_release(struct gbx_template *t)
{
    free(t->name);
    free(t->dir);
    free(t->rootfs);
    memset(t, 0, sizeof(*t));
}

/* ---- catalogue: list, inspect, delete, install -------------------------------------------- */

static unsigned staging_seq;

static int conf_value(const char *txt, const char *key, char **out)
{
    size_t klen = strlen(key);
    *out = NULL;
    for (const char *line = txt; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n > klen && strncmp(line, key, klen) == 0 && line[klen] == '=') {
            free(*out); /* the last one wins */
            *out = gbx_xstrndup(line + klen + 1, n - klen - 1);
        }
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

int gbx_template_conf_get(const char *state_dir, const char *name, const char *key, char **out)
{
    *out = NULL;
    if (gbx_template_name_valid(name) < 0)
        return -EINVAL;
    gbx_autofree char *p = gbx_asprintf("%s/templates/%s/template.conf", state_dir, name);
    gbx_autofree char *txt = NULL;
    int r = gbx_read_file(p, 65536, &txt, NULL);
    if (r < 0)
        return r;
    return conf_value(txt, key, out);
}

void gbx_template_info_release(struct gbx_template_info *info)
{
    free(info->name);
    free(info->description);
    free(info->source);
    free(info->created);
    free(info->start);
    free(info->ready);
    free(info->oci_env);
    free(info->oci_cmd);
    free(info->oci_entrypoint);
    free(info->oci_workdir);
    memset(info, 0, sizeof(*info));
}

/* Bytes on disk of a tree (allocated blocks), without following symlinks or leaving it. */
static uint64_t du_at(int dfd, const char *name, dev_t dev, int depth)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != dev)
        return 0;
    uint64_t sum = (uint64_t)st.st_blocks * 512;
    if (!S_ISDIR(st.st_mode) || depth > 64)
        return sum;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return sum;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            sum += du_at(dirfd(d), de->d_name, dev, depth + 1);
    closedir(d);
    return sum;
}

static uint64_t du(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return 0;
    return du_at(AT_FDCWD, path, st.st_dev, 0);
}

int gbx_template_inspect(const char *state_dir, const char *name, int with_size,
                         struct gbx_template_info *out, struct gbx_err **err)
{
    memset(out, 0, sizeof(*out));
    if (gbx_template_name_valid(name) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_NOT_FOUND, "template '%s' not found", name);
    gbx_autofree char *dir = gbx_asprintf("%s/templates/%s", state_dir, name);
    gbx_autofree char *p = gbx_asprintf("%s/template.conf", dir);
    gbx_autofree char *txt = NULL;
    int r = gbx_read_file(p, 65536, &txt, NULL);
    int builtin = strcmp(name, GBX_TEMPLATE_HOST) == 0;
    out->name = gbx_xstrdup(name);
    if (r == -ENOENT && builtin) {
        out->generated = 0;
        out->usr_host = 1;
        out->format = GBX_TEMPLATE_FORMAT;
        out->description = gbx_xstrdup("the host's /usr, read-only, with a generated /etc "
                                       "(generated on first use)");
        out->source = gbx_xstrdup("host");
        return 0;
    }
    if (r < 0) {
        gbx_template_info_release(out);
        if (r == -ENOENT || r == -ENOTDIR)
            return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "template '%s' not found", name);
        return gbx_err_sys(err, -r, "cannot read template '%s'", name);
    }
    out->generated = 1;
    gbx_autofree char *format = NULL, *usr = NULL, *size = NULL;
    conf_value(txt, "format", &format);
    conf_value(txt, "usr", &usr);
    conf_value(txt, "size", &size);
    conf_value(txt, "description", &out->description);
    conf_value(txt, "source", &out->source);
    conf_value(txt, "created", &out->created);
    conf_value(txt, "start", &out->start);
    conf_value(txt, "ready", &out->ready);
    conf_value(txt, "oci_env", &out->oci_env);
    conf_value(txt, "oci_cmd", &out->oci_cmd);
    conf_value(txt, "oci_entrypoint", &out->oci_entrypoint);
    conf_value(txt, "oci_workdir", &out->oci_workdir);
    out->format = format ? atoi(format) : 0;
    out->usr_host = usr && strcmp(usr, "host") == 0;
    if (out->source == NULL && builtin)
        out->source = gbx_xstrdup("host");
    if (size)
        out->size_bytes = strtoull(size, NULL, 10);
    else if (with_size)
        out->size_bytes = du(dir);
    return 0;
}

static int info_cmp(const void *a, const void *b)
{
    return strcmp(((const struct gbx_template_info *)a)->name,
                  ((const struct gbx_template_info *)b)->name);
}

void gbx_template_list_free(struct gbx_template_info *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gbx_template_info_release(&v[i]);
    free(v);
}

int gbx_template_list(const char *state_dir, struct gbx_template_info **out, size_t *n,
                      struct gbx_err **err)
{
    gbx_autofree char *tdir = gbx_asprintf("%s/templates", state_dir);
    size_t cap = 8, len = 0;
    struct gbx_template_info *v = gbx_xcalloc(cap, sizeof(*v));
    int have_host = 0;
    DIR *d = opendir(tdir);
    if (d == NULL && errno != ENOENT) {
        free(v);
        return gbx_err_sys(err, errno, "cannot list '%s'", tdir);
    }
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (gbx_template_name_valid(de->d_name) < 0)
            continue; /* ".", "..", trash and staging directories */
        if (len == cap)
            v = gbx_xrealloc(v, (cap *= 2) * sizeof(*v));
        gbx_autoerr struct gbx_err *e = NULL;
        if (gbx_template_inspect(state_dir, de->d_name, 0, &v[len], &e) < 0)
            continue; /* not a template (being deleted, or not ours) */
        have_host |= strcmp(de->d_name, GBX_TEMPLATE_HOST) == 0;
        len++;
    }
    if (d)
        closedir(d);
    if (!have_host) {
        if (len == cap)
            v = gbx_xrealloc(v, (cap + 1) * sizeof(*v));
        gbx_autoerr struct gbx_err *e = NULL;
        if (gbx_template_inspect(state_dir, GBX_TEMPLATE_HOST, 0, &v[len], &e) == 0)
            len++;
    }
    qsort(v, len, sizeof(*v), info_cmp);
    *out = v;
    *n = len;
    return 0;
}

int gbx_template_trash(const char *state_dir, const char *name, char **trash, struct gbx_err **err)
{
    *trash = NULL;
    if (gbx_template_name_valid(name) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_NOT_FOUND, "template '%s' not found", name);
    gbx_autofree char *dir = gbx_asprintf("%s/templates/%s", state_dir, name);
    gbx_autofree char *t =
        gbx_asprintf("%s/templates/.trash.%s.%d.%u", state_dir, name, (int)getpid(),
                     __atomic_add_fetch(&staging_seq, 1, __ATOMIC_RELAXED));
    if (renameat2(AT_FDCWD, dir, AT_FDCWD, t, RENAME_NOREPLACE) < 0) {
        if (errno == ENOENT)
            return gbx_err_set(err, ENOENT, GBX_ERR_NOT_FOUND, "template '%s' not found", name);
        return gbx_err_sys(err, errno, "cannot move template '%s' aside", name);
    }
    *trash = gbx_steal_ptr(&t);
    return 0;
}

void gbx_template_unmount_below(const char *dir)
{
    gbx_autofree char *txt = NULL;
    if (gbx_read_file("/proc/self/mountinfo", 4 << 20, &txt, NULL) < 0)
        return;
    size_t dl = strlen(dir);
    char *save = NULL;
    char *points[64];
    size_t n = 0;
    for (char *line = strtok_r(txt, "\n", &save); line && n < GBX_ARRAY_SIZE(points);
         line = strtok_r(NULL, "\n", &save)) {
        /* id parent major:minor root mountpoint ... */
        char *f = line;
        for (int i = 0; i < 4 && f; i++) {
            f = strchr(f, ' ');
            if (f)
                f++;
        }
        if (f == NULL)
            continue;
        char *end = strchr(f, ' ');
        if (end)
            *end = '\0';
        if (strncmp(f, dir, dl) == 0 && f[dl] == '/')
            points[n++] = f; /* octal escapes: staging paths have none */
    }
    while (n > 0)
        (void)umount2(points[--n], MNT_DETACH); /* innermost first */
}

int gbx_template_remove_tree(const char *path)
{
    gbx_template_unmount_below(path);
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    return gbx_rm_rf_xdev_at(AT_FDCWD, path, st.st_dev);
}

void gbx_template_gc(const char *state_dir)
{
    gbx_autofree char *tdir = gbx_asprintf("%s/templates", state_dir);
    DIR *d = opendir(tdir);
    if (d == NULL)
        return;
    char mine[32];
    snprintf(mine, sizeof(mine), ".%d.", (int)getpid());
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, ".trash.", 7) != 0 && strncmp(de->d_name, ".build.", 7) != 0)
            continue;
        if (strstr(de->d_name, mine))
            continue; /* this process's: its owner removes it */
        gbx_autofree char *p = gbx_asprintf("%s/%s", tdir, de->d_name);
        (void)!gbx_template_remove_tree(p);
    }
    closedir(d);
}

int gbx_template_start_spec(const char *state_dir, const char *name, char **start, char **ready,
                            struct gbx_err **err)
{
    *start = *ready = NULL;
    int r = gbx_template_conf_get(state_dir, name, "start", start);
    if (r == 0)
        r = gbx_template_conf_get(state_dir, name, "ready", ready);
    if (r < 0 && r != -ENOENT) {
        free(*start);
        *start = NULL;
        return gbx_err_sys(err, -r, "cannot read template '%s'", name);
    }
    return 0; /* the built-in template, not generated yet, has neither */
}

int gbx_template_conf_extra(const char *description, const char *start, const char *ready,
                            char **out, struct gbx_err **err)
{
    const char *keys[] = {"description", "start", "ready"};
    const char *vals[] = {description, start, ready};
    char *t = gbx_xstrdup("");
    for (size_t i = 0; i < GBX_ARRAY_SIZE(keys); i++) {
        if (vals[i] == NULL)
            continue;
        if (strpbrk(vals[i], "\r\n") || strlen(vals[i]) > 4096) {
            free(t);
            return gbx_err_set(err, EINVAL, GBX_ERR_INVALID,
                               "%s: one line of at most 4096 bytes expected", keys[i]);
        }
        char *n = gbx_asprintf("%s%s=%s\n", t, keys[i], vals[i]);
        free(t);
        t = n;
    }
    *out = t;
    return 0;
}

int gbx_template_staging(const char *state_dir, const char *name, char **dir, struct gbx_err **err)
{
    gbx_autofree char *tdir = gbx_asprintf("%s/templates", state_dir);
    int r = gbx_mkdir_p(tdir, 0700);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot create '%s'", tdir);
    gbx_autofree char *p = gbx_asprintf("%s/.build.%s.%d.%u", tdir, name, (int)getpid(),
                                        __atomic_add_fetch(&staging_seq, 1, __ATOMIC_RELAXED));
    (void)!gbx_rm_rf(p);
    if (mkdir(p, 0700) < 0)
        return gbx_err_sys(err, errno, "cannot create '%s'", p);
    *dir = gbx_steal_ptr(&p);
    return 0;
}

int gbx_template_install(const char *state_dir, const char *name, const char *stage,
                         const char *conf, struct gbx_err **err)
{
    /* its own files: a root filesystem, or the layers it stacks on its base (whose files
     * count as the base's) */
    gbx_autofree char *rootfs = gbx_asprintf("%s/rootfs", stage);
    gbx_autofree char *layers = gbx_asprintf("%s/layers", stage);
    unsigned long long size = du(rootfs);
    size += du(layers);
    gbx_autofree char *full = gbx_asprintf("%ssize=%llu\n", conf, size);
    gbx_autofree char *confp = gbx_asprintf("%s/template.conf", stage);
    int r = gbx_write_file_atomic(confp, full, strlen(full), 0644);
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot write '%s'", confp);
    (void)chmod(stage, 0755);
    gbx_autofree char *final = gbx_asprintf("%s/templates/%s", state_dir, name);
    if (renameat2(AT_FDCWD, stage, AT_FDCWD, final, RENAME_NOREPLACE) < 0) {
        if (errno == EEXIST || errno == ENOTEMPTY)
            return gbx_err_set(err, EEXIST, GBX_ERR_CONFLICT, "template '%s' already exists", name);
        return gbx_err_sys(err, errno, "cannot install template '%s'", name);
    }
    (void)!gbx_fsync_dir_of(final);
    return 0;
}

/* Append line to a file of the rootfs unless a line starts with prefix. */
static int add_line(int root, const char *path, const char *prefix, const char *line, mode_t mode)
{
    gbx_autoclose int fd =
        openat(root, path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) || st.st_size > (1 << 20))
        return -EINVAL;
    gbx_autofree char *txt = gbx_xcalloc(1, (size_t)st.st_size + 2);
    txt[0] = '\n';
    if (pread(fd, txt + 1, (size_t)st.st_size, 0) != st.st_size)
        return -EIO;
    gbx_autofree char *needle = gbx_asprintf("\n%s", prefix);
    if (strstr(txt, needle))
        return 0;
    if (st.st_size > 0 && txt[st.st_size] != '\n' && gbx_write_all(fd, "\n", 1) < 0)
        return -errno;
    return gbx_write_all(fd, line, strlen(line));
}

int gbx_template_fixup_rootfs(int root, unsigned flags, struct gbx_err **err)
{
    static const struct {
        const char *dir;
        mode_t mode;
    } dirs[] = {{"etc", 0755},  {"proc", 0555}, {"dev", 0755},  {"sys", 0555},
                {"tmp", 01777}, {"run", 0755},  {"root", 0700}, {"home", 0755}};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(dirs); i++) {
        struct stat st;
        if (fstatat(root, dirs[i].dir, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
            (void)unlinkat(root, dirs[i].dir, 0); /* a link or file where a mount point goes */
        if (mkdirat(root, dirs[i].dir, dirs[i].mode) < 0 && errno != EEXIST)
            return gbx_err_sys(err, errno, "cannot create '%s'", dirs[i].dir);
    }
    (void)!fchmodat(root, "tmp", 01777, 0);
    struct {
        const char *path, *text;
        mode_t mode;
        int replace;
    } files[] = {
        {"etc/resolv.conf", "nameserver 127.0.0.1\n", 0644, 1},
        {"etc/hostname", "sandbox\n", 0644, 1},
        {"etc/machine-id", "", 0444, 1},
        {"etc/hosts", hosts, 0644, 0},
    };
    for (size_t i = 0; i < GBX_ARRAY_SIZE(files); i++) {
        struct stat st;
        if (!files[i].replace && fstatat(root, files[i].path, &st, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        (void)unlinkat(root, files[i].path, 0); /* also when it is a symlink */
        gbx_autoclose int fd =
            openat(root, files[i].path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                   files[i].mode);
        if (fd < 0 || fchmod(fd, files[i].mode) < 0 ||
            gbx_write_all(fd, files[i].text, strlen(files[i].text)) < 0)
            return gbx_err_sys(err, errno, "cannot write '%s'", files[i].path);
    }
    (void)unlinkat(root, "var/lib/dbus/machine-id", 0);
    if (!(flags & GBX_FIXUP_USER))
        return 0;
    int r;
    if ((r = add_line(root, "etc/passwd", "user:", "user:x:1000:1000:user:/home/user:/bin/bash\n",
                      0644)) < 0 ||
        (r = add_line(root, "etc/group", "user:", "user:x:1000:\n", 0644)) < 0 ||
        (r = add_line(root, "etc/shadow", "user:", "user:*:19000:0:99999:7:::\n", 0640)) < 0)
        return gbx_err_sys(err, -r, "cannot add the 'user' account");
    if (mkdirat(root, "home/user", 0755) < 0 && errno != EEXIST)
        return gbx_err_sys(err, errno, "cannot create 'home/user'");
    gbx_autoclose int hu =
        openat(root, "home/user", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (hu < 0 || fchown(hu, GBX_USER_UID, GBX_USER_UID) < 0)
        return gbx_err_sys(err, errno, "cannot chown 'home/user'");
    gbx_autoclose int skel =
        openat(root, "etc/skel", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (skel >= 0) {
        static const char *const dots[] = {".bashrc", ".profile", ".bash_logout"};
        for (size_t i = 0; i < GBX_ARRAY_SIZE(dots); i++) {
            struct stat st;
            if (fstatat(hu, dots[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
                continue;
            if (fstatat(skel, dots[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                copy_file(skel, hu, dots[i], &st) == 0)
                (void)!fchownat(hu, dots[i], GBX_USER_UID, GBX_USER_UID, AT_SYMLINK_NOFOLLOW);
        }
    }
    return 0;
}

/* ---- templates made from snapshots ---------------------------------------------------------- */

int gbx_template_resolve(const char *state_dir, const char *name, char **base, char ***layers,
                         size_t *nlayers, struct gbx_err **err)
{
    *base = NULL;
    *layers = NULL;
    *nlayers = 0;
    gbx_autofree char *b = NULL, *n = NULL;
    int r = gbx_template_conf_get(state_dir, name, "base", &b);
    if (r == -ENOENT || (r == 0 && b == NULL)) {
        *base = gbx_xstrdup(name); /* an ordinary template: itself, no layers */
        return 0;
    }
    if (r < 0)
        return gbx_err_sys(err, -r, "cannot read template '%s'", name);
    if (gbx_template_conf_get(state_dir, name, "layers", &n) < 0 || n == NULL)
        return gbx_err_set(err, EINVAL, GBX_ERR_INTERNAL, "template '%s': base without layers",
                           name);
    uint64_t count;
    if (gbx_parse_u64(n, 1, 32, &count) < 0 || gbx_template_name_valid(b) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INTERNAL, "template '%s': bad base or layers",
                           name);
    char **v = gbx_xcalloc(count, sizeof(char *));
    for (uint64_t i = 0; i < count; i++)
        v[i] = gbx_asprintf("%s/templates/%s/layers/%llu", state_dir, name, (unsigned long long)i);
    *base = gbx_xstrdup(b);
    *layers = v;
    *nlayers = (size_t)count;
    return 0;
}

char *gbx_template_dependent(const char *state_dir, const char *name)
{
    gbx_autofree char *dir = gbx_asprintf("%s/templates", state_dir);
    DIR *d = opendir(dir);
    char *found = NULL;
    for (struct dirent *e; d && found == NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || gbx_template_name_valid(e->d_name) < 0)
            continue;
        gbx_autofree char *base = NULL;
        if (gbx_template_conf_get(state_dir, e->d_name, "base", &base) == 0 && base &&
            strcmp(base, name) == 0)
            found = gbx_xstrdup(e->d_name);
    }
    if (d)
        closedir(d);
    return found;
}

int gbx_template_install_layers(const char *state_dir, const char *name, const char *base,
                                const char *const *layers, size_t nlayers, const char *source,
                                struct gbx_err **err)
{
    if (gbx_template_name_valid(name) < 0)
        return gbx_err_set(err, EINVAL, GBX_ERR_INVALID, "invalid template name '%s'", name);
    gbx_autofree char *stage = NULL, *created = NULL, *conf = NULL, *ldir = NULL;
    if (gbx_template_staging(state_dir, name, &stage, err) < 0 || stage == NULL)
        return -1;
    ldir = gbx_asprintf("%s/layers", stage);
    if (mkdir(ldir, 0755) < 0) {
        gbx_err_sys(err, errno, "cannot create '%s'", ldir);
        goto fail;
    }
    for (size_t i = 0; i < nlayers; i++) {
        int fd = open(layers[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        gbx_autofree char *dst = gbx_asprintf("%s/%zu", ldir, i);
        if (fd < 0) {
            gbx_err_sys(err, errno, "cannot open layer '%s'", layers[i]);
            goto fail;
        }
        /* a copy, owners kept (the layer is stored as the sandbox sees it already) */
        int r = gbx_layer_copy(fd, dst, 0, 0, NULL, err);
        close(fd);
        if (r < 0)
            goto fail;
    }
    created = gbx_rfc3339(gbx_realtime_ns());
    /* the description is every key's to read (a shared template): no snapshot id in it */
    char shown[GBX_TEMPLATE_SHOWN_MAX];
    conf = gbx_asprintf("format=%d\nbase=%s\nlayers=%zu\nsource=%s\ncreated=%s\ndescription=a "
                        "snapshot's files on %s\n",
                        GBX_TEMPLATE_FORMAT, base, nlayers, source, created,
                        gbx_template_shown(base, shown));
    if (gbx_template_install(state_dir, name, stage, conf, err) < 0)
        goto fail;
    return 0;
fail:
    (void)!gbx_template_remove_tree(stage);
    return -1;
}
