/* SPDX-License-Identifier: MIT */
/* The browser routes of the native front end (the service: browser/browser.h). */
#ifndef GBX_API_BROWSER_API_H
#define GBX_API_BROWSER_API_H

#include "core/actor.h"

struct evhttp_request;
struct gbx_live;
struct gbx_server;

/* /v1/sandboxes/{id}/browser<rest>: rest is "" or "/screenshot"; l is who's. */
void gbx_api_sandbox_browser(struct gbx_server *s, const struct gbx_actor *who,
                             struct evhttp_request *req, struct gbx_live *l, const char *rest);

#endif
