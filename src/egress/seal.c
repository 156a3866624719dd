/* SPDX-License-Identifier: MIT */
#include "egress/ca.h"
#include "egress/seal.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "base/fileutil.h"
#include "base/mem.h"

#define SEAL_MAX ((size_t)1 << 30) /* secrets are small; EVP lengths are int */

static int key_read(int fd, const char *path, uint8_t key[GBX_SEAL_KEY_LEN], struct gbx_err **err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return gbx_err_sys(err, errno, "cannot stat seal key '%s'", path);
    if (!S_ISREG(st.st_mode))
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "seal key '%s' is not a regular file", path);
    if (st.st_uid != geteuid())
        return gbx_err_set(err, 0, GBX_ERR_PERMISSION,
                           "seal key '%s' is owned by uid %u, not by the daemon's uid %u", path,
                           (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & 077)
        return gbx_err_set(err, 0, GBX_ERR_PERMISSION,
                           "seal key '%s' is accessible by group or others (mode %04o); "
                           "it must be 0600",
                           path, (unsigned)(st.st_mode & 07777));
    if (st.st_size != GBX_SEAL_KEY_LEN)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "seal key '%s' has %lld bytes, not %d", path,
                           (long long)st.st_size, GBX_SEAL_KEY_LEN);
    uint8_t buf[GBX_SEAL_KEY_LEN + 1];
    size_t n = 0;
    while (n < sizeof(buf)) {
        ssize_t r = read(fd, buf + n, sizeof(buf) - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            OPENSSL_cleanse(buf, sizeof(buf));
            return gbx_err_sys(err, e, "cannot read seal key '%s'", path);
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n != GBX_SEAL_KEY_LEN) { /* changed under us */
        OPENSSL_cleanse(buf, sizeof(buf));
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "seal key '%s' has %zu bytes, not %d", path, n,
                           GBX_SEAL_KEY_LEN);
    }
    memcpy(key, buf, GBX_SEAL_KEY_LEN);
    OPENSSL_cleanse(buf, sizeof(buf));
    return 0;
}

/* Create the key file: 0 with key filled, 1 if it appeared meanwhile, -1 with err. */
static int key_create(const char *path, uint8_t key[GBX_SEAL_KEY_LEN], struct gbx_err **err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            return 1;
        return gbx_err_sys(err, errno, "cannot create seal key '%s'", path);
    }
    int r = 0;
    if (RAND_bytes(key, GBX_SEAL_KEY_LEN) != 1) {
        ERR_clear_error();
        r = -EIO;
    }
    if (r == 0 && fchmod(fd, 0600) < 0) /* whatever the umask */
        r = -errno;
    if (r == 0)
        r = gbx_write_all(fd, key, GBX_SEAL_KEY_LEN);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0)
        r = gbx_fsync_dir_of(path);
    if (r < 0) {
        OPENSSL_cleanse(key, GBX_SEAL_KEY_LEN);
        unlink(path);
        return gbx_err_sys(err, -r, "cannot write seal key '%s'", path);
    }
    return 0;
}

int gbx_seal_key_load(const char *path, uint8_t key[GBX_SEAL_KEY_LEN], struct gbx_err **err)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        gbx_autoclose int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            return key_read(fd, path, key, err);
        if (errno != ENOENT)
            return gbx_err_sys(err, errno, "cannot open seal key '%s'", path);
        int r = key_create(path, key, err);
        if (r <= 0)
            return r;
    }
    return gbx_err_set(err, EAGAIN, GBX_ERR_UNAVAILABLE,
                       "seal key '%s' keeps appearing and disappearing", path);
}

int gbx_seal(const uint8_t key[GBX_SEAL_KEY_LEN], const void *plain, size_t n, const char *aad,
             uint8_t **out, size_t *outlen, struct gbx_err **err)
{
    size_t alen = aad ? strlen(aad) : 0;
    if (n > SEAL_MAX || alen > SEAL_MAX)
        return gbx_err_set(err, E2BIG, GBX_ERR_LIMIT, "value to seal is too large (%zu bytes)", n);
    size_t total = GBX_SEAL_NONCE_LEN + n + GBX_SEAL_TAG_LEN;
    uint8_t *buf = gbx_xmalloc(total);
    uint8_t *nonce = buf, *ct = buf + GBX_SEAL_NONCE_LEN, *tag = ct + n;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len;
    if (c == NULL || RAND_bytes(nonce, GBX_SEAL_NONCE_LEN) != 1 ||
        !EVP_EncryptInit_ex2(c, EVP_aes_256_gcm(), key, nonce, NULL) ||
        (alen && !EVP_EncryptUpdate(c, NULL, &len, (const unsigned char *)aad, (int)alen)) ||
        (n && !EVP_EncryptUpdate(c, ct, &len, plain, (int)n)) ||
        !EVP_EncryptFinal_ex(c, ct + n, &len) ||
        !EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, GBX_SEAL_TAG_LEN, tag)) {
        EVP_CIPHER_CTX_free(c);
        free(buf);
        return gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "seal");
    }
    EVP_CIPHER_CTX_free(c);
    *out = buf;
    *outlen = total;
    return 0;
}

int gbx_seal_open(const uint8_t key[GBX_SEAL_KEY_LEN], const uint8_t *blob, size_t n,
                  const char *aad, char **plain, size_t *plainlen, struct gbx_err **err)
{
    size_t alen = aad ? strlen(aad) : 0;
    if (n < GBX_SEAL_OVERHEAD || n - GBX_SEAL_OVERHEAD > SEAL_MAX || alen > SEAL_MAX)
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "sealed value does not authenticate");
    size_t ctlen = n - GBX_SEAL_OVERHEAD;
    const uint8_t *nonce = blob, *ct = blob + GBX_SEAL_NONCE_LEN;
    uint8_t tag[GBX_SEAL_TAG_LEN];
    memcpy(tag, ct + ctlen, sizeof(tag)); /* EVP wants it writable */
    char *out = gbx_xmalloc(ctlen + 1);
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len;
    if (c == NULL || !EVP_DecryptInit_ex2(c, EVP_aes_256_gcm(), key, nonce, NULL) ||
        (alen && !EVP_DecryptUpdate(c, NULL, &len, (const unsigned char *)aad, (int)alen)) ||
        (ctlen && !EVP_DecryptUpdate(c, (unsigned char *)out, &len, ct, (int)ctlen)) ||
        !EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, GBX_SEAL_TAG_LEN, tag)) {
        EVP_CIPHER_CTX_free(c);
        OPENSSL_cleanse(out, ctlen + 1);
        free(out);
        return gbx_egress_ssl_fail(err, GBX_ERR_INTERNAL, "open sealed value");
    }
    int ok = EVP_DecryptFinal_ex(c, (unsigned char *)out + ctlen, &len);
    EVP_CIPHER_CTX_free(c);
    if (ok != 1) {
        ERR_clear_error();
        OPENSSL_cleanse(out, ctlen + 1);
        free(out);
        return gbx_err_set(err, 0, GBX_ERR_INVALID, "sealed value does not authenticate");
    }
    out[ctlen] = '\0';
    *plain = out;
    *plainlen = ctlen;
    return 0;
}
