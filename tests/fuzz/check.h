/* SPDX-License-Identifier: MIT */
/* The fuzz targets' assertion: a property that does not hold traps, and libFuzzer keeps the
 * input that made it fail. */
#ifndef GBX_FUZZ_CHECK_H
#define GBX_FUZZ_CHECK_H

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

#endif
