/* SPDX-License-Identifier: MIT */
/* E2B control plane (stub until implemented). */
#include "api/e2b.h"

void gbx_e2b_control(struct gbx_server *s, struct evhttp_request *req, const char *path)
{
    (void)s;
    gbx_e2b_error(req, 501, "'%s' is not implemented yet", path);
}
