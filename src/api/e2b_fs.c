/* SPDX-License-Identifier: MIT */
/* envd filesystem.Filesystem (stub until implemented). */
#include "api/e2b.h"

void gbx_e2b_filesystem(struct gbx_server *s, struct event_base *base, struct evhttp_request *req,
                        struct gbx_live *l, const char *method)
{
    (void)s;
    (void)base;
    (void)l;
    gbx_e2b_rpc_error(req, "unimplemented", "filesystem.Filesystem/%s is not implemented yet",
                      method);
}
