/* SPDX-License-Identifier: MIT */
/* Helpers for integration tests that create real sandboxes through the library. */
#ifndef GBX_TESTS_SBTEST_H
#define GBX_TESTS_SBTEST_H

#include <stddef.h>
#include <stdint.h>

#include "agent/client.h"
#include "sandbox/backend.h"

/* Exit 77 (skip) with a reason unless the machine can run sandboxes (root, userns). */
void sbt_require_sandboxes(void);
/* A runtime with private state and runtime dirs under /tmp, removed by sbt_runtime_free. */
struct gbx_runtime *sbt_runtime_new(void);
void sbt_runtime_free(struct gbx_runtime *rt);

struct sbt {
    struct gbx_sandbox *sb;
    struct gbx_agent *agent;
};
/* Create a sandbox (asserts success) with optional limits; id is generated. */
void sbt_create(struct gbx_runtime *rt, struct sbt *t, const struct gbx_cg_limits *lim,
                uint64_t disk_bytes);
void sbt_destroy(struct sbt *t);

struct sbt_result {
    uint8_t *out;
    size_t out_len;
    uint8_t *err;
    size_t err_len;
    int exit_code;
    int exit_signal;
};
/* Run argv (NULL-terminated) as user (NULL: root) with optional stdin data; wait for exit. */
void sbt_run(struct sbt *t, const char *user, const char *const *argv, const void *in,
             size_t in_len, struct sbt_result *r);
/* Shorthand for sh -c SCRIPT as root. */
void sbt_sh(struct sbt *t, const char *script, struct sbt_result *r);
void sbt_result_release(struct sbt_result *r);
/* Copy the probe binary into the sandbox at /tmp/gbx-probe. */
void sbt_install_probe(struct sbt *t);
/* Path of a built artefact: $BUILD/name (BUILD from the environment, default "build"). */
const char *sbt_build_path(const char *name);

#endif
