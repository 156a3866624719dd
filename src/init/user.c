/* SPDX-License-Identifier: MIT */
/* Users and credentials. A static binary has no NSS: /etc/passwd and /etc/group are
 * parsed here. File operations switch the filesystem credentials (fsuid, fsgid, groups)
 * around each operation; the kernel drops the fs capabilities while fsuid != 0. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "init/init.h"

#define DB_MAX (4u << 20)

static uid_t initial_uid;
static gid_t initial_gid;
static int entered;

/* Read a whole small file into a NUL-terminated heap buffer. */
static char *slurp(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    GBX_BUG_ON(buf == NULL);
    for (;;) {
        if (cap - len < 2) {
            if (cap >= DB_MAX)
                break;
            cap *= 2;
            char *nb = realloc(buf, cap);
            GBX_BUG_ON(nb == NULL); /* aborts: nothing to free */
            buf = nb;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

/* Split a line into at most n ':'-separated fields, in place. Returns the field count. */
static int split_fields(char *line, char **f, int n)
{
    int i = 0;
    f[i++] = line;
    for (char *p = line; *p && i < n; p++) {
        if (*p == ':') {
            *p = '\0';
            f[i++] = p + 1;
        }
    }
    return i;
}

static int parse_id(const char *s, unsigned long *out)
{
    if (*s == '\0')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end != '\0' || v > 0xfffffffeUL || s[0] == '-' || s[0] == '+')
        return -EINVAL;
    *out = v;
    return 0;
}

static void copy(char *dst, size_t sz, const char *src)
{
    snprintf(dst, sz, "%s", src);
}

/* Find a passwd entry by name (name != NULL) or by uid. */
static int passwd_find(const char *name, uid_t uid, struct gbx_user *u)
{
    char *db = slurp("/etc/passwd");
    if (db == NULL)
        return -ENOENT;
    int found = -ENOENT;
    char *save = NULL;
    for (char *line = strtok_r(db, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[7];
        if (split_fields(line, f, 7) != 7)
            continue;
        unsigned long id, gid;
        if (parse_id(f[2], &id) < 0 || parse_id(f[3], &gid) < 0)
            continue;
        if (name ? strcmp(f[0], name) != 0 : id != uid)
            continue;
        u->uid = (uid_t)id;
        u->gid = (gid_t)gid;
        u->known = 1;
        copy(u->name, sizeof(u->name), f[0]);
        copy(u->home, sizeof(u->home), f[5][0] ? f[5] : "/");
        copy(u->shell, sizeof(u->shell), f[6][0] ? f[6] : "/bin/sh");
        found = 0;
        break;
    }
    free(db);
    return found;
}

static void add_group(struct gbx_user *u, gid_t g)
{
    for (int i = 0; i < u->ngroups; i++)
        if (u->groups[i] == g)
            return;
    if (u->ngroups < INIT_MAX_GROUPS)
        u->groups[u->ngroups++] = g;
}

/* Supplementary groups: every group in /etc/group that lists u->name as a member. */
static void group_members(struct gbx_user *u)
{
    char *db = slurp("/etc/group");
    if (db == NULL)
        return;
    char *save = NULL;
    for (char *line = strtok_r(db, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4];
        if (split_fields(line, f, 4) != 4)
            continue;
        unsigned long gid;
        if (parse_id(f[2], &gid) < 0)
            continue;
        char *msave = NULL;
        for (char *m = strtok_r(f[3], ",", &msave); m; m = strtok_r(NULL, ",", &msave)) {
            if (strcmp(m, u->name) == 0) {
                add_group(u, (gid_t)gid);
                break;
            }
        }
    }
    free(db);
}

/* Lookups are cached until /etc/passwd or /etc/group changes (inode, size or mtime):
 * every spawn and file request resolves a user, and re-reading two files each time is
 * most of what a spawn costs init itself. */
#define UCACHE_SIZE 8
struct ucache_entry {
    char spec[sizeof(((struct gbx_user *)0)->name)];
    struct gbx_user u;
};
static struct ucache_entry ucache[UCACHE_SIZE];
static int ucache_len, ucache_next;
static struct stat db_stamp[2];
static int db_present[2];

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Drop the cache if either database changed since it was filled. */
static void ucache_check(void)
{
    static const char *const dbs[2] = {"/etc/passwd", "/etc/group"};
    int changed = 0;
    for (int i = 0; i < 2; i++) {
        struct stat st;
        int present = stat(dbs[i], &st) == 0;
        if (present != db_present[i] || (present && !same_file(&st, &db_stamp[i])))
            changed = 1;
        db_present[i] = present;
        if (present)
            db_stamp[i] = st;
    }
    if (changed)
        ucache_len = ucache_next = 0;
}

static int lookup_uncached(const char *spec, struct gbx_user *u);

int gbx_user_lookup(const char *spec, struct gbx_user *u)
{
    if (spec == NULL || spec[0] == '\0')
        spec = "root";
    ucache_check();
    for (int i = 0; i < ucache_len; i++) {
        if (strcmp(ucache[i].spec, spec) == 0) {
            *u = ucache[i].u;
            return 0;
        }
    }
    int r = lookup_uncached(spec, u);
    if (r == 0 && strlen(spec) < sizeof(ucache[0].spec)) {
        struct ucache_entry *e = &ucache[ucache_next];
        snprintf(e->spec, sizeof(e->spec), "%s", spec);
        e->u = *u;
        ucache_next = (ucache_next + 1) % UCACHE_SIZE;
        if (ucache_len < UCACHE_SIZE)
            ucache_len++;
    }
    return r;
}

static int lookup_uncached(const char *spec, struct gbx_user *u)
{
    memset(u, 0, sizeof(*u));
    if (spec == NULL || spec[0] == '\0')
        spec = "root";
    if (strlen(spec) >= sizeof(u->name))
        return -EINVAL;
    if (spec[0] >= '0' && spec[0] <= '9') {
        char buf[64];
        copy(buf, sizeof(buf), spec);
        char *colon = strchr(buf, ':');
        if (colon)
            *colon = '\0';
        unsigned long uid, gid = 0;
        if (parse_id(buf, &uid) < 0 || (colon && parse_id(colon + 1, &gid) < 0))
            return -EINVAL;
        if (passwd_find(NULL, (uid_t)uid, u) < 0) {
            u->uid = (uid_t)uid;
            u->gid = (gid_t)uid;
            snprintf(u->name, sizeof(u->name), "%lu", uid);
            copy(u->home, sizeof(u->home), "/");
            copy(u->shell, sizeof(u->shell), "/bin/sh");
        }
        if (colon)
            u->gid = (gid_t)gid;
    } else if (passwd_find(spec, 0, u) < 0) {
        if (strcmp(spec, "root") != 0)
            return -ENOENT;
        copy(u->name, sizeof(u->name), "root");
        copy(u->home, sizeof(u->home), "/root");
        copy(u->shell, sizeof(u->shell), "/bin/sh");
    }
    add_group(u, u->gid);
    if (u->known)
        group_members(u);
    return 0;
}

static int name_lookup(const char *path, unsigned long want, int idfield, char *out, size_t outsz)
{
    char *db = slurp(path);
    if (db == NULL)
        return -ENOENT;
    int r = -ENOENT;
    char *save = NULL;
    for (char *line = strtok_r(db, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4];
        unsigned long id;
        if (split_fields(line, f, 4) <= idfield || parse_id(f[idfield], &id) < 0)
            continue;
        if (id == want && f[0][0]) {
            copy(out, outsz, f[0]);
            r = 0;
            break;
        }
    }
    free(db);
    return r;
}

int gbx_user_name(uid_t uid, char *out, size_t outsz)
{
    return name_lookup("/etc/passwd", uid, 2, out, outsz);
}

int gbx_group_name(gid_t gid, char *out, size_t outsz)
{
    return name_lookup("/etc/group", gid, 2, out, outsz);
}

void gbx_creds_save_initial(void)
{
    initial_uid = geteuid();
    initial_gid = getegid();
    int n = getgroups(INIT_MAX_GROUPS, gbx_g.groups);
    gbx_g.ngroups = n < 0 ? 0 : n;
}

int gbx_creds_enter(const struct gbx_user *u)
{
    if (u->uid == initial_uid && u->gid == initial_gid)
        return 0;
    entered = 1;
    setfsgid(u->gid);
    /* With "setgroups deny" in a user namespace this fails; the groups stay init's. */
    if (setgroups((size_t)u->ngroups, u->groups) < 0 && errno != EPERM)
        goto fail;
    setfsuid(u->uid);
    if ((uid_t)setfsuid((uid_t)-1) != u->uid || (gid_t)setfsgid((gid_t)-1) != u->gid)
        goto fail;
    return 0;
fail:
    gbx_creds_leave();
    return -EPERM;
}

void gbx_creds_leave(void)
{
    if (!entered)
        return;
    entered = 0;
    setfsuid(initial_uid);
    setfsgid(initial_gid);
    if (setgroups((size_t)gbx_g.ngroups, gbx_g.groups) < 0) {
        /* denied in this user namespace: the groups never changed */
    }
}
