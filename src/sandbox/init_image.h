/* SPDX-License-Identifier: MIT */
#ifndef GBX_SANDBOX_INIT_IMAGE_H
#define GBX_SANDBOX_INIT_IMAGE_H

#include <stddef.h>

/* A sealed, close-on-exec memfd with the embedded glovebox-init. Returns fd or -errno. */
int gbx_init_image_open(void);
size_t gbx_init_image_size(void);

#endif
