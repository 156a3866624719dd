/* The code interpreter's kernel (interp_kernel.py), embedded as a NUL-terminated string. */
    .section .rodata
    .global gbx_interp_kernel
gbx_interp_kernel:
    .incbin GBX_INTERP_KERNEL
    .byte 0
    .section .note.GNU-stack,"",@progbits
