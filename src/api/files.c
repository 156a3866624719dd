/* SPDX-License-Identifier: MIT */
#include "api/files.h"

#include "api/http.h"

void gbx_api_files(struct gbx_server *srv, struct event_base *base, struct evhttp_request *req,
                   struct gbx_sandbox *sb, const char *sub)
{
    (void)srv;
    (void)base;
    (void)sb;
    gbx_http_reply_error(req, GBX_ERR_UNAVAILABLE, "files%s: not implemented yet", sub);
}
