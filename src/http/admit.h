/* SPDX-License-Identifier: MIT */
/* A request's admission on the state disk (core/server.h gbx_server_admit), asked with the
 * request's own method. The front end answers a refusal in its own form. */
#ifndef GBX_HTTP_ADMIT_H
#define GBX_HTTP_ADMIT_H

#include <stdint.h>

#include "core/server.h"

struct evhttp_request;

/* 0: go on; -1 with *err (STORAGE) and *free_bytes: the request is refused. */
int gbx_http_admit(struct gbx_server *s, struct evhttp_request *req, const char *path,
                   enum gbx_admit_front front, int64_t *free_bytes, struct gbx_err **err) GBX_WUR;
/* The native API's refusal: 507 with the state dir, its free bytes and its reserve. */
void gbx_http_reply_refused(struct gbx_server *s, struct evhttp_request *req,
                            const struct gbx_err *err, int64_t free_bytes);

#endif
