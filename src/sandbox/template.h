/* SPDX-License-Identifier: MIT */
/* Templates: the read-only lower layer of a sandbox's root filesystem.
 *
 * <state>/templates/<name>/template.conf   key=value lines (format, usr, description)
 * <state>/templates/<name>/rootfs/         the tree, owned as the sandbox should see it
 *                                          (uid 0 on disk is root inside; 1000 is "user")
 *
 * usr=host in template.conf asks for the host's /usr, read-only and idmapped, at /usr. */
#ifndef GBX_SANDBOX_TEMPLATE_H
#define GBX_SANDBOX_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define GBX_TEMPLATE_FORMAT 3 /* 2: resolv.conf names the egress DNS server; 3: fonts, chromium */
#define GBX_TEMPLATE_HOST "host" /* the built-in template */
#define GBX_USER_UID 1000

struct gbx_template {
    char *name;
    char *dir;    /* <state>/templates/<name> */
    char *rootfs; /* <dir>/rootfs */
    int usr_host; /* bind the host's /usr */
};

/* Template names are per tenant. What a client names is "NAME" (1-63 of [a-z0-9-], as sandbox
 * ids); the store keeps an API key's own template as "NAME@KEY" and a shared one (the admin's,
 * visible to every key, read-only to them) as "NAME". A stored name: 0 or -EINVAL. */
int gbx_template_name_valid(const char *name);
/* The part of a stored name a client sees (its length: the NAME before any '@'). */
size_t gbx_template_shown_len(const char *name);
/* The NAME of a stored name, in buf when it has a key's part (else the name itself). */
#define GBX_TEMPLATE_SHOWN_MAX 64
const char *gbx_template_shown(const char *name, char buf[GBX_TEMPLATE_SHOWN_MAX]);
/* Is name (as a client says it) the NAME of the stored name? */
int gbx_template_shown_is(const char *stored, const char *name);
/* The key a stored name belongs to, or "" for a shared template. */
const char *gbx_template_owner(const char *name);
/* Open a template; the built-in "host" one is generated on first use. */
int gbx_template_open(const char *state_dir, const char *name, struct gbx_template *t,
                      struct gbx_err **err) GBX_WUR;
void gbx_template_release(struct gbx_template *t);
/* (Re)generate the built-in host template under <state>/templates/host. */
int gbx_template_build_host(const char *state_dir, struct gbx_err **err) GBX_WUR;

/* ---- catalogue: list, inspect, delete, install (docs/templates.md) ----------------------
 * template.conf also holds source= (host | debootstrap:<suite> | oci:<ref or file>),
 * created= (RFC 3339), size= (bytes on disk, recorded at install), start= (a shell command
 * started in the background when a sandbox of this template starts), ready= (a shell
 * command that must exit 0 before the sandbox is reported ready) and, for OCI images,
 * oci_entrypoint=, oci_cmd=, oci_env=, oci_workdir=, oci_user= (compact JSON). base= and
 * layers= are reserved for templates made from snapshots. */

struct gbx_template_info {
    char *name, *description, *source, *created, *start, *ready;
    char *oci_env, *oci_cmd, *oci_entrypoint, *oci_workdir; /* JSON text, or NULL */
    int format;
    int usr_host;
    int generated; /* the built-in one, not generated yet */
    uint64_t size_bytes;
};
void gbx_template_info_release(struct gbx_template_info *info);

/* One key of a template's template.conf (*out owned, NULL when absent). -errno. */
int gbx_template_conf_get(const char *state_dir, const char *name, const char *key,
                          char **out) GBX_WUR;
/* What a template is. with_size: walk the tree when template.conf records no size. */
int gbx_template_inspect(const char *state_dir, const char *name, int with_size,
                         struct gbx_template_info *out, struct gbx_err **err) GBX_WUR;
/* Every template (the built-in "host" always), sorted by name: *out is an owned array of n. */
int gbx_template_list(const char *state_dir, struct gbx_template_info **out, size_t *n,
                      struct gbx_err **err) GBX_WUR;
void gbx_template_list_free(struct gbx_template_info *v, size_t n);
/* Take a template out of use: its directory is renamed to a trash name atomically (*trash,
 * owned: remove it with gbx_rm_rf, off the loop). NOT_FOUND when absent. Whether a sandbox
 * uses it is the caller's question. */
int gbx_template_trash(const char *state_dir, const char *name, char **trash,
                       struct gbx_err **err) GBX_WUR;
/* Remove a template, trash or staging tree: whatever is mounted below it is detached first
 * (a debootstrap stopped mid-way leaves proc, sys, dev binds), and the removal never crosses
 * into another filesystem. 0 or -errno. */
int gbx_template_remove_tree(const char *path) GBX_WUR;
/* Detach every mount below dir (innermost first). */
void gbx_template_unmount_below(const char *dir);
/* Remove trash and build directories left by earlier daemons (not this process's). */
void gbx_template_gc(const char *state_dir);
/* The commands a sandbox of this template runs: start (in the background when it starts)
 * and ready (must exit 0 before it is reported ready); each owned, NULL when unset. */
int gbx_template_start_spec(const char *state_dir, const char *name, char **start, char **ready,
                            struct gbx_err **err) GBX_WUR;

/* The template.conf lines for what a caller sets: description, start and ready (each may be
 * NULL). *out owned ("" when none). INVALID for a newline or a value over 4096 bytes. */
int gbx_template_conf_extra(const char *description, const char *start, const char *ready,
                            char **out, struct gbx_err **err) GBX_WUR;
/* A fresh staging directory <state>/templates/.build.<name>.<pid>.<n> (*dir owned). */
int gbx_template_staging(const char *state_dir, const char *name, char **dir,
                         struct gbx_err **err) GBX_WUR;
/* Write conf (plus size=: the bytes of its rootfs/, or of the layers/ a template made from a
 * snapshot stacks on its base) into the staging directory stage and rename it to
 * <state>/templates/<name>; CONFLICT when the name is taken. */
int gbx_template_install(const char *state_dir, const char *name, const char *stage,
                         const char *conf, struct gbx_err **err) GBX_WUR;
#define GBX_FIXUP_USER 1u /* add the "user" account (uid 1000, /home/user) when missing */
/* Make a rootfs usable as a template: the mount points (proc, dev, tmp, sys, run), the egress
 * DNS in etc/resolv.conf, hosts and hostname, an empty machine-id. */
int gbx_template_fixup_rootfs(int rootfd, unsigned flags, struct gbx_err **err) GBX_WUR;

/* A template made from a snapshot names its base template (base=) and holds the snapshot's
 * layers (layers=N, in <dir>/layers/0..N-1, top first). *base: the template a sandbox's
 * library create uses (the name itself for an ordinary template); *layers (owned, free each
 * and the array): what to stack on it, top first, after any snapshot's own. */
int gbx_template_resolve(const char *state_dir, const char *name, char **base, char ***layers,
                         size_t *nlayers, struct gbx_err **err) GBX_WUR;
/* A template made on top of name (base=name), malloc'd, or NULL. */
char *gbx_template_dependent(const char *state_dir, const char *name);
/* Make template name from layers (paths, top first) on base: the layers are copied. */
int gbx_template_install_layers(const char *state_dir, const char *name, const char *base,
                                const char *const *layers, size_t nlayers, const char *source,
                                struct gbx_err **err) GBX_WUR;

#endif
