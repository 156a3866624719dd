/* SPDX-License-Identifier: MIT */
/* What a create asks for, as the core takes it. Each front end parses its own wire form into
 * one (the native body: gbx_create_spec_parse; E2B's NewSandbox: e2b/control.c with the
 * setters below, which apply the same rules), and the registry makes the sandbox from the
 * struct (core/sandboxes.h gbx_sandboxes_create_spec). The struct's native JSON
 * (gbx_create_spec_json) is what the store keeps, what a retried create is compared by, and
 * what the audit record says. Pure: no I/O, no server. */
#ifndef GBX_CORE_SPEC_H
#define GBX_CORE_SPEC_H

#include <jansson.h>
#include <stdint.h>

#include "base/err.h"
#include "sandbox/cgroup.h"

struct gbx_limits;
struct gbx_egress_policy;

/* Everything is owned (gbx_create_spec_clear frees it); a field left 0 or NULL was not asked
 * for, and the daemon's default applies. */
struct gbx_create_spec {
    char *id;                         /* the sandbox's id, or NULL: the server chooses */
    char *template_name;              /* as the caller named it, or NULL: the default template */
    char *snapshot;                   /* start from this snapshot (id or name), or NULL */
    char *idem_key;                   /* idempotency key, or NULL */
    struct gbx_cg_limits limits;      /* memory, pids, cpus asked for */
    uint64_t disk_bytes;              /* disk asked for */
    uint64_t timeout_ms;              /* 0 with timeout_set: no timeout */
    int timeout_set;                  /* the request said "timeout" */
    int on_timeout_pause;             /* "on_timeout": "pause" */
    int public_traffic;               /* "public": ingress takes requests without a credential */
    int auto_resume;                  /* "auto_resume": a request that needs it thaws it */
    json_t *env;                      /* {"NAME": "value"}, checked, or NULL */
    json_t *metadata;                 /* {"k": "v"}, checked, or NULL */
    json_t *labels;                   /* {"k": "v"} of names, checked, or NULL */
    json_t *network;                  /* the native policy as sent, not yet parsed, or NULL */
    struct gbx_egress_policy *policy; /* a policy the front end parsed itself (wins over
                                       * network), or NULL */
};

void gbx_create_spec_init(struct gbx_create_spec *c);
void gbx_create_spec_clear(struct gbx_create_spec *c);
/* A deep copy of src into dst (which is initialised first). */
void gbx_create_spec_copy(struct gbx_create_spec *dst, const struct gbx_create_spec *src);

/* The native create body ({"template", "memory", "timeout", "env", ...}: docs/api.yaml
 * SandboxCreate) into *c (initialised here; cleared on failure). lim says the maximums that
 * an unrepresentable size is reported against. -1 with *err (INVALID, naming the field). */
int gbx_create_spec_parse(const struct gbx_limits *lim, json_t *body, struct gbx_create_spec *c,
                          struct gbx_err **err) GBX_WUR;
/* The spec as a native create body: sizes in bytes, cpus as a number, a timeout in seconds
 * (or "Nms"), a parsed policy as its JSON. Parsing it gives the same spec. New reference. */
json_t *gbx_create_spec_json(const struct gbx_create_spec *c);

/* Setters for front ends that build a spec themselves: the same checks as the native parser,
 * with its messages (field names are the native ones). v is copied. 0 or -1 with *err. */
int gbx_create_spec_set_env(struct gbx_create_spec *c, json_t *v, struct gbx_err **err);
int gbx_create_spec_set_metadata(struct gbx_create_spec *c, json_t *v, struct gbx_err **err);

/* A size given as a number of bytes or a string like "512M": 0, -EINVAL, or -ERANGE for one
 * too large to hold (above INT64_MAX). */
int gbx_json_size(const json_t *v, uint64_t *out);
/* A timeout: seconds as a number, or a duration string ("30s", "5m", "1500ms"); 0 means
 * none. At most 30 days. 0 or -EINVAL. */
int gbx_json_timeout_ms(const json_t *v, uint64_t *out);

#endif
