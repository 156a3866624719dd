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
 * The service behind them (names per tenant, the builds on the worker threads, their
 * progress, the delete) is core/templates.h; these parse, call it and reply. */
#ifndef GBX_API_TEMPLATES_API_H
#define GBX_API_TEMPLATES_API_H

#include "core/actor.h"

struct event_base;
struct evhttp_request;
struct gbx_server;

/* /v1/templates and /v1/templates/... */
void gbx_api_templates(struct gbx_server *s, const struct gbx_actor *who, struct event_base *base,
                       struct evhttp_request *req, const char *path);

#endif
