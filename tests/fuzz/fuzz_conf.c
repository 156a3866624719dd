/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the configuration file parser (src/base/conf.c): whatever the input,
 * the parser terminates, and every setting it reports has a well-formed key and a value
 * without a newline or NUL. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check(void *arg, const char *key, const char *value, unsigned line)
{
    size_t *count = arg;
    if (key[0] == '\0' || strchr(value, '\n') || line == 0)
        __builtin_trap();
    for (const char *k = key; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '-' || *k == '_'))
            __builtin_trap();
    (*count)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t count = 0;
    char err[128];
    int r = gbx_conf_parse((const char *)data, size, check, &count, err, sizeof(err));
    if (r != 0 && err[0] == '\0')
        __builtin_trap(); /* a failure always says why */
    return 0;
}
