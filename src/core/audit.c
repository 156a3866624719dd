/* SPDX-License-Identifier: MIT */
/* Audit records, written behind by the store writer (store/writer.h). A record that a reply
 * acknowledges (an exec's end, a session's call) takes a completion, so that the reply waits
 * until the record is durable and says so when it could not be written: an acknowledged
 * call is a recorded call. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/server_int.h"
#include "base/log.h"
#include "base/mem.h"
#include "store/writer.h"

void gbx_server_audit(struct gbx_server *s, const struct gbx_actor *who, const char *kind,
                      const char *sandbox, json_t *detail)
{
    gbx_server_audit_as(s, who->name, kind, sandbox, detail);
}

void gbx_server_audit_as(struct gbx_server *s, const char *actor, const char *kind,
                         const char *sandbox, json_t *detail)
{
    gbx_server_audit_then(s, actor, kind, sandbox, detail, NULL, NULL);
}

struct audit_done {
    struct gbx_server *s;
    gbx_server_audit_fn done;
    void *arg;
};

static void audit_done(void *arg, int status, const char *msg)
{
    struct audit_done *d = arg;
    gbx_srv_write_done(d->s, status, msg);
    if (d->done) {
        gbx_autoerr struct gbx_err *err = NULL;
        if (status < 0) {
            /* the writer says why as text; a full state disk is STORAGE (store.c) */
            int full = msg && (strstr(msg, "disk is full") || strstr(msg, "directory is full"));
            gbx_err_set(&err, full ? ENOSPC : 0, full ? GBX_ERR_STORAGE : GBX_ERR_INTERNAL, "%s",
                        msg ? msg : "the audit record could not be written");
        }
        d->done(d->arg, err);
    }
    free(d);
}

int gbx_server_unrecorded(struct gbx_err **err, const char *kind, const struct gbx_err *aerr)
{
    return gbx_err_set(err, aerr->errnum, aerr->kind,
                       "it was done, but its audit record ('%s') could not be written: %s", kind,
                       aerr->msg);
}

void gbx_server_audit_then(struct gbx_server *s, const char *actor, const char *kind,
                           const char *sandbox, json_t *detail, gbx_server_audit_fn done, void *arg)
{
    char *text = detail ? json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    struct gbx_audit_entry e = {.actor = actor, .kind = kind, .sandbox = sandbox, .detail = text};
    struct audit_done *d = gbx_xcalloc(1, sizeof(*d));
    d->s = s;
    d->done = done;
    d->arg = arg;
    s->writes_pending++;
    gbx_store_writer_audit(s->writer, &e, audit_done, d);
    free(text);
    json_decref(detail);
}
