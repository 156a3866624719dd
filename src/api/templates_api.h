/* SPDX-License-Identifier: MIT */
/* The template routes (templates_api.c):
 *
 *   GET    /v1/templates                  every template, and the ones being built
 *   GET    /v1/templates/{name}           one: state (building, ready, failed), progress
 *   GET    /v1/templates/{name}/events    the build's progress as NDJSON, until it ends
 *   DELETE /v1/templates/{name}           204; 409 while a sandbox uses it; cancels a build;
 *                                         a key deletes its own, the admin any
 *   POST   /v1/templates                  {"name", "from": {"oci": {"path"}}} (admin) or
 *                                         {"name", "from": {"debian": {...}}} (admin) -> 202
 *   POST   /v1/templates/{name}/oci       the image archive as the body -> 202
 *
 * Builds run on the worker threads (api/offload.h); the loop only keeps their progress. */
#ifndef GBX_API_TEMPLATES_API_H
#define GBX_API_TEMPLATES_API_H

#include <stddef.h>
#include <stdint.h>

#include "core/actor.h"

struct event_base;
struct evhttp_request;
struct gbx_server;

/* Template names are per tenant (sandbox/template.h): the stored name of the template a
 * client calls name: the key's own "NAME@KEY" when it has one, else the shared "NAME" (which
 * may not exist). The admin's names are stored names as they are. Owned. */
char *gbx_templates_ref(struct gbx_server *s, const struct gbx_actor *who, const char *name);
/* May who see (and use) the stored template name? Shared ones: everyone. */
int gbx_templates_visible(const struct gbx_actor *who, const char *stored);

/* How many templates a key has (stored, and being built). */
uint64_t gbx_templates_count(struct gbx_server *s, const char *owner);

/* /v1/templates and /v1/templates/... */
void gbx_api_templates(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                       struct evhttp_request *req, const char *path);
/* The daemon is stopping: end every progress stream, ask every build to stop. Returns the
 * number of streams ended. */
size_t gbx_api_templates_drain(const char *why);
/* Before the worker threads are joined: cancel builds (debootstrap is killed); after this,
 * builds that finish touch nothing of the loop. Frees what the loop kept. */
void gbx_api_templates_shutdown(void);

#endif
