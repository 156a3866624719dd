/* SPDX-License-Identifier: MIT */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"

enum gbx_log_level gbx_log_min_level = GBX_LOG_WARN;
static int log_json;

void gbx_log_set_level(enum gbx_log_level level)
{
    gbx_log_min_level = level;
}

void gbx_log_set_json(int json)
{
    log_json = json;
}

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

int gbx_log_parse_level(const char *s, enum gbx_log_level *out)
{
    for (size_t i = 0; i < GBX_ARRAY_SIZE(level_names); i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum gbx_log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

static void json_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

void gbx_log_write(enum gbx_log_level level, const char *fmt, ...)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);

    va_list ap;
    va_start(ap, fmt);
    char *msg = gbx_vasprintf(fmt, ap);
    va_end(ap);

    if (log_json) {
        fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":\"", when,
                ts.tv_nsec / 1000000, level_names[level]);
        json_escape(stderr, msg);
        fputs("\"}\n", stderr);
    } else {
        fprintf(stderr, "%s.%03ldZ %s %s\n", when, ts.tv_nsec / 1000000, level_names[level], msg);
    }
    free(msg);
}
