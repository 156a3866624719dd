/* The glovebox-init binary, embedded so the library never looks it up on disk. */
    .section .rodata
    .global gbx_init_blob
    .global gbx_init_blob_size
    .balign 16
gbx_init_blob:
    .incbin GBX_INIT_PATH
gbx_init_blob_end:
    .balign 8
gbx_init_blob_size:
    .quad gbx_init_blob_end - gbx_init_blob
    .section .note.GNU-stack,"",@progbits
