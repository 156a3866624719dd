/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the daemon side of the agent protocol (src/agent/client.c): the
 * bytes glovebox-init sends back are untrusted (init runs inside the sandbox, with the
 * sandbox's privileges). The input is everything "init" says on a connection; the client
 * says HELLO, then drives every kind of request and drains events. Nothing may crash, leak
 * or hang: every call either succeeds or fails with an error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return 0;
    /* our requests must never block on a full buffer: make room for them */
    int big = 4 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    size_t off = 0;
    while (off < size) {
        ssize_t n = write(sv[1], data + off, size - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    shutdown(sv[1], SHUT_WR); /* "init" says nothing more: every wait ends */

    struct gbx_agent *a = NULL;
    struct gbx_err *err = NULL;
    if (gbx_agent_open(sv[0], &a, &err) < 0) {
        gbx_err_free(err);
        close(sv[1]);
        return 0;
    }
    gbx_agent_set_timeout(a, 50);
    const char *argv[] = {"/bin/true", NULL};
    struct gbx_spawn_opts so = {.argv = argv, .pty = 1, .rows = 24, .cols = 80};
    uint32_t proc = 0, handle = 0;
    pid_t pid;
#define TRY(call)                                                                                  \
    do {                                                                                           \
        err = NULL;                                                                                \
        (void)(call);                                                                              \
        gbx_err_free(err);                                                                         \
    } while (0)
    TRY(gbx_agent_spawn(a, &so, &proc, &pid, &err));
    TRY(gbx_agent_stdin(a, proc, "x", 1, &err));
    struct gbx_proc_info *ps = NULL;
    size_t nps = 0;
    err = NULL;
    if (gbx_agent_ps(a, &ps, &nps, &err) == 0)
        gbx_proc_info_free(ps, nps);
    gbx_err_free(err);
    struct gbx_file_stat st;
    err = NULL;
    if (gbx_agent_stat(a, NULL, "/x", 1, &st, &err) == 0)
        gbx_file_stat_release(&st);
    gbx_err_free(err);
    uint8_t *buf = NULL;
    size_t len = 0;
    err = NULL;
    if (gbx_agent_read_all(a, NULL, "/x", 1 << 16, &buf, &len, &err) == 0)
        free(buf);
    gbx_err_free(err);
    struct gbx_file_stat *ents = NULL;
    size_t nents = 0;
    err = NULL;
    if (gbx_agent_list(a, NULL, "/", 2, &ents, &nents, &err) == 0)
        gbx_file_stat_array_free(ents, nents);
    gbx_err_free(err);
    TRY(gbx_agent_write_open(a, NULL, "/y", 0644, GBX_W_CREATE, &handle, &err));
    TRY(gbx_agent_watch(a, NULL, "/", 1, &handle, &err));
    struct gbx_event ev;
    for (int i = 0; i < 64; i++) {
        err = NULL;
        int r = gbx_agent_next_event(a, &ev, 0, &err);
        gbx_err_free(err);
        if (r != 1)
            break;
        gbx_event_release(&ev);
    }
    gbx_agent_free(a);
    close(sv[1]);
    return 0;
}
