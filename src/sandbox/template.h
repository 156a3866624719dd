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

#include "base/err.h"

#define GBX_TEMPLATE_FORMAT 2    /* 2: resolv.conf names the egress DNS server */
#define GBX_TEMPLATE_HOST "host" /* the built-in template */
#define GBX_USER_UID 1000

struct gbx_template {
    char *name;
    char *dir;    /* <state>/templates/<name> */
    char *rootfs; /* <dir>/rootfs */
    int usr_host; /* bind the host's /usr */
};

/* Validate a template name (same rules as sandbox ids). */
int gbx_template_name_valid(const char *name);
/* Open a template; the built-in "host" one is generated on first use. */
int gbx_template_open(const char *state_dir, const char *name, struct gbx_template *t,
                      struct gbx_err **err) GBX_WUR;
void gbx_template_release(struct gbx_template *t);
/* (Re)generate the built-in host template under <state>/templates/host. */
int gbx_template_build_host(const char *state_dir, struct gbx_err **err) GBX_WUR;

#endif
