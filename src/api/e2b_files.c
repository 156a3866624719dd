/* SPDX-License-Identifier: MIT */
/* envd GET/POST /files (stub until implemented). */
#include "api/e2b.h"

void gbx_e2b_files(struct gbx_server *s, struct event_base *base, struct evhttp_request *req,
                   struct gbx_live *l)
{
    (void)s;
    (void)base;
    (void)l;
    gbx_e2b_error(req, 501, "/files is not implemented yet");
}
