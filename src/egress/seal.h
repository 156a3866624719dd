/* SPDX-License-Identifier: MIT */
/* Secrets at rest: AES-256-GCM under a 32-byte key kept in a 0600 file. A sealed blob is
 * nonce (12 bytes, random) || ciphertext || tag (16 bytes); the aad (the secret's name) binds
 * a blob to its context, so a blob copied under another name does not open. */
#ifndef GBX_EGRESS_SEAL_H
#define GBX_EGRESS_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define GBX_SEAL_KEY_LEN 32
#define GBX_SEAL_NONCE_LEN 12
#define GBX_SEAL_TAG_LEN 16
#define GBX_SEAL_OVERHEAD (GBX_SEAL_NONCE_LEN + GBX_SEAL_TAG_LEN)

/* Load the key at path into key; when absent, create it (O_EXCL, mode 0600, random bytes,
 * fsync'd, parent directory fsync'd; the parent directory must exist). Refuses with
 * GBX_ERR_PERMISSION a key file not owned by the effective uid or accessible by group or
 * others, and with GBX_ERR_INVALID one that is not a regular file of exactly 32 bytes. The
 * caller should OPENSSL_cleanse the key when done with it. */
int gbx_seal_key_load(const char *path, uint8_t key[GBX_SEAL_KEY_LEN],
                      struct gbx_err **err) GBX_WUR;

/* Seal n bytes of plain. aad may be NULL (same as ""). *out (malloc'd, owned by the caller)
 * gets n + GBX_SEAL_OVERHEAD bytes. 0, or -1 with err (GBX_ERR_LIMIT above 1 GiB). */
int gbx_seal(const uint8_t key[GBX_SEAL_KEY_LEN], const void *plain, size_t n, const char *aad,
             uint8_t **out, size_t *outlen, struct gbx_err **err) GBX_WUR;

/* Open a sealed blob of n bytes: *plain (malloc'd, owned by the caller, NUL-terminated for
 * convenience; *plainlen excludes the NUL). A wrong key or aad, or a truncated or altered
 * blob, fails with GBX_ERR_INVALID "sealed value does not authenticate". */
int gbx_seal_open(const uint8_t key[GBX_SEAL_KEY_LEN], const uint8_t *blob, size_t n,
                  const char *aad, char **plain, size_t *plainlen, struct gbx_err **err) GBX_WUR;

#endif
