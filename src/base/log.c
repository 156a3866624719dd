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

static void write_line(enum gbx_log_level level, const char *msg, const char *const *kv, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    /* one fprintf-built line per record, written with one call: lines never interleave */
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    GBX_BUG_ON(f == NULL);
    if (log_json) {
        fprintf(f, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":\"", when, ts.tv_nsec / 1000000,
                level_names[level]);
        json_escape(f, msg);
        fputc('"', f);
        for (size_t i = 0; i + 1 < n; i += 2) {
            fputs(",\"", f);
            json_escape(f, kv[i]);
            fputs("\":\"", f);
            json_escape(f, kv[i + 1]);
            fputc('"', f);
        }
        fputs("}\n", f);
    } else {
        fprintf(f, "%s.%03ldZ %s %s", when, ts.tv_nsec / 1000000, level_names[level], msg);
        for (size_t i = 0; i + 1 < n; i += 2)
            fprintf(f, strpbrk(kv[i + 1], " \"=") || !kv[i + 1][0] ? " %s=\"%s\"" : " %s=%s", kv[i],
                    kv[i + 1]);
        fputc('\n', f);
    }
    fclose(f);
    fwrite(line, 1, len, stderr);
    free(line);
}

void gbx_log_write(enum gbx_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = gbx_vasprintf(fmt, ap);
    va_end(ap);
    write_line(level, msg, NULL, 0);
    free(msg);
}

void gbx_log_kv_write(enum gbx_log_level level, const char *msg, ...)
{
    const char *kv[32];
    size_t n = 0;
    va_list ap;
    va_start(ap, msg);
    for (const char *k; n + 2 <= GBX_ARRAY_SIZE(kv) && (k = va_arg(ap, const char *));) {
        kv[n++] = k;
        const char *v = va_arg(ap, const char *);
        kv[n++] = v ? v : "";
    }
    va_end(ap);
    write_line(level, msg, kv, n);
}
