/* SPDX-License-Identifier: MIT */
/* Debian templates: debootstrap into a staging directory, with progress parsed from its
 * "I: ..." lines, then the tree is fixed up into a Glovebox template (the egress DNS in
 * resolv.conf, a "user" account, no machine-id) and renamed into place. */
#ifndef GBX_SANDBOX_DEBOOTSTRAP_H
#define GBX_SANDBOX_DEBOOTSTRAP_H

#include <stddef.h>

#include "base/err.h"

enum gbx_deb_phase {
    GBX_DEB_OTHER = 0, /* a line that moves no phase ("I: Checking Release signature") */
    GBX_DEB_RETRIEVE,  /* "I: Retrieving <pkg> <version>", "I: Validating ..." */
    GBX_DEB_EXTRACT,   /* "I: Extracting <pkg>..." */
    GBX_DEB_INSTALL,   /* "I: Installing core packages...", "I: Unpacking <pkg>..." */
    GBX_DEB_CONFIGURE, /* "I: Configuring <pkg>..." */
    GBX_DEB_DONE,      /* "I: Base system installed successfully." */
    GBX_DEB_ERROR,     /* "E: ..." */
};
const char *gbx_deb_phase_name(enum gbx_deb_phase p);

struct gbx_deb_line {
    enum gbx_deb_phase phase;
    char package[128]; /* "" when the line names none ("Retrieving InRelease" names none) */
    int counts;        /* a per-package step of the phase (Validating repeats Retrieving) */
};
/* Parse one line of debootstrap's output (pure). */
void gbx_deb_parse_line(const char *line, struct gbx_deb_line *out);

struct gbx_deb_progress {
    enum gbx_deb_phase phase;
    const char *package; /* may be "" */
    unsigned step;       /* packages done in this phase */
    unsigned total;      /* packages retrieved (0 until known) */
    const char *line;    /* the raw line */
};

struct gbx_deb_opts {
    const char *suite;          /* "bookworm" */
    const char *mirror;         /* NULL: http://deb.debian.org/debian */
    const char *variant;        /* NULL: "minbase" */
    const char *const *include; /* extra packages, n_include of them */
    size_t n_include;
    void (*progress)(void *arg, const struct gbx_deb_progress *p); /* may be NULL */
    void *arg;
    const volatile int *cancel; /* non-zero: kill debootstrap, ECANCELED (may be NULL) */
    const char *conf_extra;     /* key=value lines added to template.conf, or NULL */
};

/* Check the options (suite, mirror, variant, package names) without running anything. */
int gbx_deb_opts_check(const struct gbx_deb_opts *o, struct gbx_err **err) GBX_WUR;

/* Build <state>/templates/<name> from Debian (blocking; minutes). CONFLICT when the name is
 * taken, UNAVAILABLE when debootstrap fails (its last lines in the message). */
int gbx_template_build_debian(const char *state_dir, const char *name, const struct gbx_deb_opts *o,
                              struct gbx_err **err) GBX_WUR;

#endif
