/* SPDX-License-Identifier: MIT */
/* A new event-driven connection (agent/aconn.h) to a sandbox's agent: the backend opens the
 * socket, the agent client takes it over. The agent room knows frames and sockets, not
 * sandboxes; this is where the two meet. */
#include "sandbox/backend.h"

int gbx_aconn_open(struct event_base *base, struct gbx_sandbox *sb, gbx_aconn_event_fn on_event,
                   gbx_aconn_close_fn on_close, void *arg, struct gbx_aconn **out,
                   struct gbx_err **err)
{
    int fd = -1;
    if (sb->ops->connect(sb, &fd, err) < 0)
        return -1;
    *out = gbx_aconn_new(base, fd, on_event, on_close, arg);
    return 0;
}
