/* SPDX-License-Identifier: MIT */
/* The I/O side of the worker's webhook mode: libcrypto's HMAC loaded at run time (the glovebox
 * binary does not link libcrypto), and one HTTP request read from a connection with the
 * system's http-parser, bounded in size and time. The verification is worker.c's. */
#ifndef GBX_WORKER_HOOK_H
#define GBX_WORKER_HOOK_H

#include <stddef.h>

#include "base/err.h"
#include "base/util.h"
#include "worker/worker.h"

/* The largest request body accepted (413 above it). */
#define GBX_WORKER_HOOK_BODY_MAX (1u << 20)

/* Load libcrypto.so.3 (HMAC, EVP_sha256, CRYPTO_memcmp) and fill *c. */
int gbx_worker_crypto_load(struct gbx_worker_crypto *c, struct gbx_err **err) GBX_WUR;

struct gbx_worker_hook_req {
    int post; /* the method is POST */
    struct gbx_worker_hook h;
    char *body; /* NUL-terminated */
    size_t len;
};

/* Read one request from the connected socket fd within timeout_ms. Returns 0, or the HTTP
 * status to answer instead: 400 (not HTTP, or a webhook header given twice or too long),
 * 413 (headers over 64 KiB or a body over GBX_WORKER_HOOK_BODY_MAX), 408 (too slow, or the
 * peer closed early). */
int gbx_worker_hook_read(int fd, long timeout_ms, struct gbx_worker_hook_req *r);
void gbx_worker_hook_req_release(struct gbx_worker_hook_req *r);

/* Write a small answer (Connection: close) and ignore failures. */
void gbx_worker_hook_answer(int fd, int status, const char *text);

#endif
