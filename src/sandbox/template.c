/* SPDX-License-Identifier: MIT */
#include "sandbox/template.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fileutil.h"
#include "base/mem.h"
#include "base/parse.h"

int gbx_template_name_valid(const char *name)
{
    return gbx_name_valid(name);
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
    gbx_autofree char *tmp = gbx_asprintf("%s/.host.tmp.%d", tdir, (int)getpid());
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
            gbx_autofree char *old = gbx_asprintf("%s/.host.old.%d", tdir, (int)getpid());
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
    for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "format=", 7) == 0)
            *format = atoi(line + 7);
        else if (strcmp(line, "usr=host") == 0)
            t->usr_host = 1;
    }
    return 0;
}

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
        if (gbx_template_build_host(state_dir, err) < 0) {
            gbx_template_release(t);
            return -1;
        }
        r = read_conf(t, &format);
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
