/* SPDX-License-Identifier: MIT */
/* A reply that acknowledges an audit record (recorded.h): sent once the record is durable. */
#include "http/recorded.h"

#include <event2/http.h>
#include <stdlib.h>

#include "base/mem.h"
#include "http/http.h"

struct audit_reply {
    struct gbx_http_later *later;
    int status;
    json_t *body;
    char *kind;
};

static void reply_recorded(void *arg, const struct gbx_err *err)
{
    struct audit_reply *r = arg;
    struct evhttp_request *req = gbx_http_later_take(r->later);
    if (req && err) {
        gbx_autoerr struct gbx_err *e = NULL;
        gbx_server_unrecorded(&e, r->kind, err);
        gbx_http_reply_err(req, e);
    } else if (req)
        gbx_http_reply_json(req, r->status, gbx_steal_ptr(&r->body));
    json_decref(r->body);
    free(r->kind);
    free(r);
}

void gbx_http_reply_recorded(struct gbx_server *s, const char *actor, const char *kind,
                             const char *sandbox, json_t *detail, struct evhttp_request *req,
                             int status, json_t *body)
{
    struct audit_reply *r = gbx_xcalloc(1, sizeof(*r));
    r->later = gbx_http_later_new(req);
    r->status = status;
    r->body = body;
    r->kind = gbx_xstrdup(kind);
    gbx_server_audit_then(s, actor, kind, sandbox, detail, reply_recorded, r);
}
