/* SPDX-License-Identifier: MIT */
/* Hibernate: checkpoint a whole running sandbox to a directory with CRIU and restore it
 * later, from any process (docs/hibernate.md). */
#ifndef GBX_SANDBOX_CRIU_H
#define GBX_SANDBOX_CRIU_H

#include "sandbox/backend.h"

/* What create was asked for, kept with the sandbox so that a checkpoint can record it
 * (gbx_sandbox.saved; NULL for an adopted sandbox until gbx_sandbox_keep_spec is called). */
struct gbx_saved_spec {
    char *template_name;
    char **layers; /* top first */
    size_t nlayers;
    struct gbx_cg_limits limits;
    uint64_t disk_bytes;
};
void gbx_sandbox_keep_spec(struct gbx_sandbox *sb, const struct gbx_sandbox_spec *spec);
void gbx_saved_spec_free(struct gbx_saved_spec *s);

/* Find a CRIU >= 4: $GLOVEBOX_CRIU, then .deps/criu/bin/criu of the source tree (next to the
 * running binary or the working directory), then `criu` in PATH. *path stays valid until
 * the process exits. 0, or -1 with an UNAVAILABLE error saying how to get one. */
int gbx_criu_available(const char **path, struct gbx_err **err) GBX_WUR;

/* Is CRIU usable here: found (gbx_criu_available), and can it really dump and restore on
 * this kernel (gbx_criu_probe's answer, waited for if it is still running)? 0 with *path,
 * or -1 with an UNAVAILABLE error saying why. */
int gbx_criu_usable(struct gbx_runtime *rt, const char **path, struct gbx_err **err) GBX_WUR;

/* Probe CRIU on this host, once per process (later calls wait for the first and return its
 * answer): dump and restore a throwaway process, each under a short deadline. The answer is
 * kept in <state>/criu-probe.conf for this kernel build and this CRIU, so a restart on the
 * same ones does not probe again. 1 usable, 0 not (why: the reason, static or owned by the
 * module until exit). Thread-safe; blocks up to about 2 x 15 s the first time. */
int gbx_criu_probe(struct gbx_runtime *rt, const char **why);
/* For a daemon that is stopping: a probe still running ends at once (its criu killed), with
 * 0 ("not known: ...") for its callers, and nothing is kept in the probe's files, so the next
 * daemon probes again. For good: later probes end the same way. */
void gbx_criu_probe_stop(void);
/* The probe's answer without waiting: 1 usable, 0 not, -1 not known yet (why as above). */
int gbx_criu_probe_result(const char **why);

/* After a checkpoint that did not finish, with the tree still alive: lift CRIU's network
 * lock and give init its control listener (and, layer_fd >= 0, its layer handle) back, then
 * check that it answers. gbx_sandbox_checkpoint does this itself; a daemon that adopts a
 * sandbox whose hibernate was interrupted by its predecessor's death calls it too. */
int gbx_sandbox_unhibernate(struct gbx_sandbox *sb, int layer_fd, struct gbx_err **err) GBX_WUR;

/* Dump the sandbox's processes and memory into dir (created if missing, 0700) and save its
 * writable layer and what a restore needs (hibernate.conf). The sandbox is gone afterwards:
 * on success sb is destroyed and freed. A failure before the dump completed (no CRIU, no
 * room, an unknown bind mount, criu failing, stopped at its deadline or cancelled through
 * sb->cancel) leaves sb running: the error says "runs on as it was", or, when criu had to be
 * killed, "runs on" and that a process criu was working in may have died (a criu killed inside
 * an injected syscall leaves that process on its breakpoint). Only when the dump completed
 * (the tree is gone) and saving the rest failed, or the tree died (on its own, or of the
 * killed criu), is sb destroyed and freed too (*err says "the sandbox is lost"). *gone says
 * whether sb was freed (1: dumped, or lost; 0: it runs on). */
int gbx_sandbox_checkpoint(struct gbx_sandbox *sb, const char *dir, int *gone,
                           struct gbx_err **err) GBX_WUR;

/* Restore a sandbox checkpointed into dir, in this process (which need not be the one that
 * dumped it), under its old id (id: NULL, or the checkpointed id). Takes its uid slot again
 * (CONFLICT if another sandbox holds it), recreates its cgroups and control socket, and
 * returns it like create does: (*out)->conn_fd is connected to the restored init. This
 * process becomes a child subreaper (PR_SET_CHILD_SUBREAPER) so that the restored init is
 * its child. The network namespace comes back with its loopback, routes and nftables
 * table, but without the daemon's egress listeners: plumb them again as after adoption. */
int gbx_sandbox_restore(struct gbx_runtime *rt, const char *dir, const char *id,
                        struct gbx_sandbox **out, struct gbx_err **err) GBX_WUR;

/* the namespace backend's checkpoint and restore slots */
int gbx_ns_checkpoint(struct gbx_sandbox *sb, const char *dir, int *gone, struct gbx_err **err);
int gbx_ns_restore(struct gbx_runtime *rt, const char *dir, struct gbx_sandbox **out,
                   struct gbx_err **err);

#endif
