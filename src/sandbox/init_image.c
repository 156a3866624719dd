/* SPDX-License-Identifier: MIT */
/* The sealed memfd that every sandbox executes glovebox-init from. Sealing makes the
 * image immutable: a sandbox can never write through /proc/1/exe, and there is no host
 * path to it inside the sandbox. */
#include "sandbox/init_image.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "base/fileutil.h"

extern const unsigned char gbx_init_blob[];
extern const unsigned long gbx_init_blob_size;

size_t gbx_init_image_size(void)
{
    return (size_t)gbx_init_blob_size;
}

int gbx_init_image_open(void)
{
    int fd = memfd_create("glovebox-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    int r = gbx_write_all(fd, gbx_init_blob, gbx_init_image_size());
    if (r == 0 && fchmod(fd, 0555) < 0)
        r = -errno;
    if (r == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
        r = -errno;
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}
