/* SPDX-License-Identifier: MIT */
/* OCI image import: an image archive (`docker save` output, or a tarball of an OCI image
 * layout) becomes a template's rootfs. The layers are applied in order with libarchive
 * (gzip, zstd or uncompressed), whiteouts honoured, and every entry is written relative to a
 * directory fd of the rootfs without ever following a symlink: hostile entries (".."
 * components, absolute names, links whose targets leave the tree, writes through a symlink,
 * owners above 65535) refuse the whole import with the entry's name.
 *
 * The name checks and whiteout classification are pure functions (tests/unit/test_oci.c,
 * tests/fuzz/fuzz_oci.c). */
#ifndef GBX_SANDBOX_OCI_H
#define GBX_SANDBOX_OCI_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* ---- pure ------------------------------------------------------------------------------- */

/* Normalise an archive entry name into a relative path "a/b/c" in out: a leading "./" (and
 * "." or empty components, and trailing slashes) are dropped. Returns 0, 1 when the name is
 * the root itself ("./", "."), -EINVAL for a hostile or unusable name (absolute, a ".."
 * component, empty), -ENAMETOOLONG when it does not fit outsz, PATH_MAX or NAME_MAX. */
int gbx_oci_path_clean(const char *name, char *out, size_t outsz);

enum gbx_oci_kind {
    GBX_OCI_ENTRY = 0, /* an ordinary entry */
    GBX_OCI_WHITEOUT,  /* ".wh.<name>": delete <name> from the layers below */
    GBX_OCI_OPAQUE,    /* ".wh..wh..opq": empty this directory of the layers below */
    GBX_OCI_WH_META,   /* another ".wh..wh.*" (aufs bookkeeping): ignored */
};
/* Classify a cleaned path. For a whiteout, target gets the path it deletes; for an opaque
 * marker, the directory it empties ("" for the root). -EINVAL for a whiteout that names
 * nothing usable (".wh.", ".wh..", ".wh..."), -ENAMETOOLONG when target is too small. */
int gbx_oci_classify(const char *clean, char *target, size_t targetsz);

/* Would a symlink at the cleaned path `at` with this target climb above the root when
 * resolved lexically? Absolute targets never do (they are resolved inside the sandbox's
 * root). 1 yes, 0 no. */
int gbx_oci_link_escapes(const char *at, const char *target);

/* Is s a well-formed "sha256:<64 hex>" digest? On success out (>= 65 bytes) gets the hex. */
int gbx_oci_digest_hex(const char *s, char *out, size_t outsz);

/* ---- applying layers -------------------------------------------------------------------- */

struct gbx_oci_opts {
    uint64_t max_bytes;   /* bound on file bytes written (0: none) */
    uint64_t max_entries; /* bound on entries per archive (0: none) */
    /* progress: phase ("extract", "layer", "done"), a detail, step of steps (may be NULL) */
    void (*progress)(void *arg, const char *phase, const char *detail, unsigned step,
                     unsigned steps);
    void *arg;
    const volatile int *cancel; /* non-zero: stop with ECANCELED (may be NULL) */
    const char *conf_extra;     /* key=value lines added to template.conf (start=, ready=,
                                   description=: gbx_template_conf_extra), or NULL */
};

struct gbx_oci_stats {
    uint64_t entries, bytes, whiteouts, devices_skipped, xattrs_skipped;
};

/* Apply one layer (a tar, any compression libarchive knows) held in memory onto the
 * directory rootfd. Stats accumulate. 0 or -1 with *err (INVALID for a bad or hostile
 * archive, naming the entry). */
int gbx_oci_apply_layer_mem(int rootfd, const void *data, size_t len, const struct gbx_oci_opts *o,
                            struct gbx_oci_stats *st, struct gbx_err **err) GBX_WUR;
/* The same from a file (read twice: whiteouts first, then entries). */
int gbx_oci_apply_layer_file(int rootfd, const char *path, const struct gbx_oci_opts *o,
                             struct gbx_oci_stats *st, struct gbx_err **err) GBX_WUR;

/* ---- importing an image into a template ------------------------------------------------- */

/* What the image's config says, as compact JSON text (NULL when absent). Owned. */
struct gbx_oci_config {
    char *entrypoint, *cmd, *env, *workdir, *user;
};
void gbx_oci_config_release(struct gbx_oci_config *c);

/* Import the image archive at path (or, when path is NULL, the len bytes at data) as the
 * template name under <state>/templates: the rootfs is built in a temporary directory and
 * renamed into place at the end. source is recorded as source=oci:<source>. CONFLICT when
 * the template exists. */
int gbx_oci_import(const char *state_dir, const char *name, const char *path, const void *data,
                   size_t len, const char *source, const struct gbx_oci_opts *o,
                   struct gbx_oci_stats *st, struct gbx_err **err) GBX_WUR;

#endif
