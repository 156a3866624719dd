/* SPDX-License-Identifier: MIT */
#include "base/log.h"

#include <math.h>
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

/* One field's value as text: a number as printf writes it (what both formats show), a string
 * as it is. buf holds a number's text. */
static const char *field_text(const struct gbx_log_field *f, char *buf, size_t bufsz)
{
    switch (f->type) {
    case GBX_LOG_F_INT:
        snprintf(buf, bufsz, "%lld", f->i);
        return buf;
    case GBX_LOG_F_REAL:
        snprintf(buf, bufsz, "%.*f", f->prec, f->d);
        return buf;
    case GBX_LOG_F_NONE:
        return "";
    case GBX_LOG_F_STR:
        break;
    }
    return f->s ? f->s : "";
}

static void write_line(enum gbx_log_level level, const char *msg, const struct gbx_log_field *fl,
                       size_t n)
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
    char num[64];
    if (log_json) {
        fprintf(f, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":\"", when, ts.tv_nsec / 1000000,
                level_names[level]);
        json_escape(f, msg);
        fputc('"', f);
        for (size_t i = 0; i < n; i++) {
            fputs(",\"", f);
            json_escape(f, fl[i].key);
            fputs("\":", f);
            const char *v = field_text(&fl[i], num, sizeof(num));
            if (fl[i].type == GBX_LOG_F_NONE ||
                (fl[i].type == GBX_LOG_F_REAL && !isfinite(fl[i].d))) {
                fputs("null", f); /* JSON has no NaN or infinity */
            } else if (fl[i].type == GBX_LOG_F_STR) {
                fputc('"', f);
                json_escape(f, v);
                fputc('"', f);
            } else {
                fputs(v, f); /* printf's %lld and %.*f of a finite value are JSON numbers */
            }
        }
        fputs("}\n", f);
    } else {
        fprintf(f, "%s.%03ldZ %s %s", when, ts.tv_nsec / 1000000, level_names[level], msg);
        for (size_t i = 0; i < n; i++) {
            const char *v = field_text(&fl[i], num, sizeof(num));
            fprintf(f, strpbrk(v, " \"=") || !v[0] ? " %s=\"%s\"" : " %s=%s", fl[i].key, v);
        }
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
    struct gbx_log_field fl[16];
    size_t n = 0;
    va_list ap;
    va_start(ap, msg);
    for (const char *k; n < GBX_ARRAY_SIZE(fl) && (k = va_arg(ap, const char *));) {
        const char *v = va_arg(ap, const char *);
        fl[n++] = GBX_LOG_STR(k, v ? v : "");
    }
    va_end(ap);
    write_line(level, msg, fl, n);
}

void gbx_log_fields_write(enum gbx_log_level level, const char *msg,
                          const struct gbx_log_field *fields, size_t n)
{
    write_line(level, msg, fields, n);
}
