/* SPDX-License-Identifier: MIT */
/* Admission on the state disk, from an evhttp request (admit.h). */
#include "http/admit.h"

#include <event2/http.h>
#include <jansson.h>

#include "http/http.h"

int gbx_http_admit(struct gbx_server *s, struct evhttp_request *req, const char *path,
                   enum gbx_admit_front front, int64_t *free_bytes, struct gbx_err **err)
{
    enum evhttp_cmd_type c = evhttp_request_get_command(req);
    enum gbx_admit_method m = c == EVHTTP_REQ_DELETE ? GBX_ADMIT_DELETE
                              : c == EVHTTP_REQ_POST || c == EVHTTP_REQ_PUT || c == EVHTTP_REQ_PATCH
                                  ? GBX_ADMIT_WRITE
                                  : GBX_ADMIT_READ;
    return gbx_server_admit(s, front, m, path, free_bytes, err);
}

void gbx_http_reply_refused(struct gbx_server *s, struct evhttp_request *req,
                            const struct gbx_err *err, int64_t free_bytes)
{
    uint64_t reserve = 0;
    const char *dir = gbx_server_state_dir(s, &reserve);
    gbx_http_reply_json(req, 507,
                        json_pack("{s:{s:s,s:s,s:s,s:I,s:I}}", "error", "kind", "storage",
                                  "message", err->msg, "state_dir", dir, "free_bytes",
                                  (json_int_t)free_bytes, "reserve_bytes", (json_int_t)reserve));
}
