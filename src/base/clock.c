/* SPDX-License-Identifier: MIT */
#include "base/clock.h"

#include <stdio.h>

#include "base/mem.h"

char *gbx_rfc3339(int64_t ns)
{
    time_t t = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char buf[40];
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    return gbx_asprintf("%s.%03dZ", buf, (int)((ns / 1000000) % 1000));
}
