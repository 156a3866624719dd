/* SPDX-License-Identifier: MIT */
/* Admission on the state disk (base/diskguard.h): which requests make something new and are
 * refused while the state directory is short of space, and which delete and may use its
 * reserve file. Everything else (reads, stopping, pausing, policy and the emergency block,
 * signals to processes) always goes through: those must work on a full disk.
 *
 * New work: POST/PUT/PATCH under /v1 (creates, exec, session calls, snapshots and forks,
 * publishes, template imports, uploads and directories, keys, secrets), but for
 *   /v1/gc                                   the collector deletes
 *   /v1/egress/...                           the block, a security control
 *   /v1/apikeys/{name}/quota                 an admin control
 *   /v1/sandboxes/{id}/pause|resume|timeout|network|processes/...|files/move
 * and, for E2B, a create (POST /sandboxes, /v2/sandboxes), snapshots and templates, POST
 * /files, process Start, MakeDir and the interpreter's POSTs. Deletes: DELETE, POST /v1/gc, E2B's
 * Remove. */
#include <string.h>

#include "base/log.h"
#include "core/server_int.h"

/* what follows /v1/sandboxes/{id} (or NULL when path is not below one) */
static const char *sandbox_sub(const char *path)
{
    if (strncmp(path, "/v1/sandboxes/", 14) != 0)
        return NULL;
    return strchr(path + 14, '/');
}

static int prefixed(const char *s, const char *name)
{
    size_t n = strlen(name);
    return strncmp(s, name, n) == 0 && (s[n] == '\0' || s[n] == '/');
}

static int native_is_new(const char *path)
{
    if (strncmp(path, "/v1/", 4) != 0 || strcmp(path, "/v1/gc") == 0 ||
        prefixed(path, "/v1/egress"))
        return 0;
    size_t n = strlen(path);
    if (strncmp(path, "/v1/apikeys/", 12) == 0 && n > 18 && strcmp(path + n - 6, "/quota") == 0)
        return 0; /* a key's quota: an admin control */
    const char *sub = sandbox_sub(path);
    if (sub == NULL)
        return 1;
    static const char *const exempt[] = {"/pause",   "/resume",    "/timeout",
                                         "/network", "/processes", "/files/move"};
    for (size_t i = 0; i < GBX_ARRAY_SIZE(exempt); i++)
        if (prefixed(sub, exempt[i]))
            return 0;
    return 1;
}

static int e2b_is_new(const char *path, int data, int interp)
{
    if (interp)
        return 1; /* /execute, /contexts: processes */
    if (!data)
        return strcmp(path, "/sandboxes") == 0 || strcmp(path, "/v2/sandboxes") == 0 ||
               prefixed(path, "/v3/templates") || prefixed(path, "/templates") ||
               (strncmp(path, "/sandboxes/", 11) == 0 && strstr(path, "/snapshots"));
    return strcmp(path, "/files") == 0 || strcmp(path, "/process.Process/Start") == 0 ||
           strcmp(path, "/filesystem.Filesystem/MakeDir") == 0;
}

int gbx_server_admit(struct gbx_server *s, enum gbx_admit_front front, enum gbx_admit_method m,
                     const char *path, int64_t *free_bytes, struct gbx_err **err)
{
    int e2b = front != GBX_ADMIT_NATIVE;
    *free_bytes = 0;
    if (m == GBX_ADMIT_DELETE || (!e2b && m == GBX_ADMIT_WRITE && strcmp(path, "/v1/gc") == 0) ||
        (front == GBX_ADMIT_E2B_DATA && strcmp(path, "/filesystem.Filesystem/Remove") == 0)) {
        (void)gbx_diskguard_before_delete(&s->disk);
        return 0;
    }
    if (m != GBX_ADMIT_WRITE)
        return 0;
    if (e2b ? !e2b_is_new(path, front != GBX_ADMIT_E2B_CONTROL, front == GBX_ADMIT_E2B_INTERP)
            : !native_is_new(path))
        return 0;
    if (gbx_diskguard_admit(&s->disk, free_bytes, err) == 0)
        return 0;
    gbx_log_warn("refused %s: %s", path, (*err)->msg);
    return -1;
}

const char *gbx_server_state_dir(const struct gbx_server *s, uint64_t *reserve)
{
    *reserve = s->disk.reserve;
    return s->disk.dir;
}
