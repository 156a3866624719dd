/* SPDX-License-Identifier: MIT */
/* The sandbox seccomp filter: a deny-list with argument filters, as a table. Every rule
 * carries the reason it exists; docs/security.md lists them and a unit test keeps the two
 * in step. */
#ifndef GBX_SANDBOX_SECCOMP_H
#define GBX_SANDBOX_SECCOMP_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum gbx_sc_cmp { GBX_SC_ANY = 0, GBX_SC_MASKED_EQ };

struct gbx_seccomp_rule {
    const char *syscall; /* name as libseccomp knows it */
    int errnum;          /* returned instead of running the call */
    enum gbx_sc_cmp cmp; /* GBX_SC_ANY: every call; else arg & mask == value */
    unsigned arg;
    uint64_t mask, value;
    const char *reason;
};

extern const struct gbx_seccomp_rule gbx_seccomp_rules[];
extern const size_t gbx_seccomp_nrules;

/* The filter compiled to classic BPF once per process, so that a sandbox child only has to
 * install it (no allocation, no libseccomp work between clone and exec). */
struct gbx_seccomp_prog {
    void *filter; /* struct sock_filter[len]; owned */
    unsigned short len;
};
int gbx_seccomp_compile(struct gbx_seccomp_prog *p) GBX_WUR;
/* The same program, compiled at build time (tools/gen-seccomp.c). Never fails. */
void gbx_seccomp_prebuilt(struct gbx_seccomp_prog *p);
void gbx_seccomp_prog_release(struct gbx_seccomp_prog *p);
/* Install into the calling thread (sets no_new_privs first). Async-signal-safe. */
int gbx_seccomp_apply(const struct gbx_seccomp_prog *p) GBX_WUR;

/* The capabilities kept in the bounding set (all others are dropped). */
extern const int gbx_caps_keep[];
extern const size_t gbx_caps_nkeep;

#endif
