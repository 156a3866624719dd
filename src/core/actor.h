/* SPDX-License-Identifier: MIT */
/* Who a request acts for. The dispatcher makes one per request from its credential (the
 * admin socket, an API key, an E2B sandbox's access token); every handler and every core call
 * takes it as an argument, and every callback and deferred job (a queued session call, a
 * hibernate, a delete that waits, a create on a worker thread) keeps its own copy. Nothing in
 * the daemon reads a "current caller": the server has none. */
#ifndef GBX_CORE_ACTOR_H
#define GBX_CORE_ACTOR_H

#define GBX_ACTOR_MAX 128

struct gbx_actor {
    int admin;                 /* sees and may do everything: the admin socket, the daemon */
    char owner[GBX_ACTOR_MAX]; /* the API key whose things it sees and makes; "" with admin */
    char name[GBX_ACTOR_MAX];  /* what the audit log calls it ("admin", "system", a key) */
};

/* The daemon's own work (the reaper, re-adoption, the pool): sees all, audited as "system". */
extern const struct gbx_actor gbx_actor_system;

/* Acting for owner: an API key's name (at most 63 characters, gbx_name_valid), or "" for
 * the admin (audited as "admin"). */
void gbx_actor_for(struct gbx_actor *a, const char *owner);
/* May a sees what owner owns? (The admin sees everything, a key only its own.) */
int gbx_actor_sees(const struct gbx_actor *a, const char *owner);

#endif
