/* SPDX-License-Identifier: MIT */
/* Diagnostic log: level-checked, text or JSON lines on stderr. Not the audit log. */
#ifndef GBX_BASE_LOG_H
#define GBX_BASE_LOG_H

#include <stddef.h>

#include "base/util.h"

enum gbx_log_level { GBX_LOG_DEBUG, GBX_LOG_INFO, GBX_LOG_WARN, GBX_LOG_ERROR, GBX_LOG_OFF };

extern enum gbx_log_level gbx_log_min_level;

void gbx_log_set_level(enum gbx_log_level level);
/* Parse "debug", "info", "warn", "error", "off"; returns -EINVAL if unknown. */
int gbx_log_parse_level(const char *s, enum gbx_log_level *out);
void gbx_log_set_json(int json);
void gbx_log_write(enum gbx_log_level level, const char *fmt, ...) GBX_PRINTF(2, 3);
/* A record with fields: msg, then "key", "value" string pairs ending with NULL. JSON lines
 * carry them as members, text lines as key=value. */
void gbx_log_kv_write(enum gbx_log_level level, const char *msg, ...) __attribute__((sentinel));

/* A typed field, for records that carry numbers (the request log's status and ms). The caller
 * says a value is a number by its type, and a number is written from the C value itself: a
 * JSON line carries it bare (a JSON number), a text line as key=value exactly as a string of
 * the same printf text would be. Typed rather than "a value that looks like a number is
 * written bare" on purpose: that rule would turn a string that merely looks numeric (a
 * sandbox id "123", a key name "1e5") into a number in one record and leave it a string in
 * the next, and a consumer could not rely on a field's type. With types, a string field is
 * a JSON string whatever its text, and a number field is a JSON number whatever its value
 * (null when there is none: GBX_LOG_NONE, or a REAL that is not finite). */
enum gbx_log_ftype { GBX_LOG_F_STR, GBX_LOG_F_INT, GBX_LOG_F_REAL, GBX_LOG_F_NONE };
struct gbx_log_field {
    const char *key;
    enum gbx_log_ftype type;
    const char *s; /* STR (NULL is "") */
    long long i;   /* INT: "%lld" */
    double d;      /* REAL: "%.*f" with prec decimals */
    int prec;
};
#define GBX_LOG_STR(k, v) ((struct gbx_log_field){.key = (k), .type = GBX_LOG_F_STR, .s = (v)})
#define GBX_LOG_INT(k, v) ((struct gbx_log_field){.key = (k), .type = GBX_LOG_F_INT, .i = (v)})
#define GBX_LOG_REAL(k, v, p)                                                                      \
    ((struct gbx_log_field){.key = (k), .type = GBX_LOG_F_REAL, .d = (v), .prec = (p)})
/* A number field with no value: key="" in text, "key":null in JSON. */
#define GBX_LOG_NONE(k) ((struct gbx_log_field){.key = (k), .type = GBX_LOG_F_NONE})
/* A record with fields[0..n) (borrowed for the call). */
void gbx_log_fields_write(enum gbx_log_level level, const char *msg,
                          const struct gbx_log_field *fields, size_t n);

#define GBX_LOG_AT(lvl, ...)                                                                       \
    do {                                                                                           \
        if ((lvl) >= gbx_log_min_level)                                                            \
            gbx_log_write((lvl), __VA_ARGS__);                                                     \
    } while (0)
#define gbx_log_kv(lvl, ...)                                                                       \
    do {                                                                                           \
        if ((lvl) >= gbx_log_min_level)                                                            \
            gbx_log_kv_write((lvl), __VA_ARGS__);                                                  \
    } while (0)
/* gbx_log_fields(GBX_LOG_INFO, "request", GBX_LOG_STR("path", p), GBX_LOG_INT("status", 200)) */
#define gbx_log_fields(lvl, msg, ...)                                                              \
    do {                                                                                           \
        if ((lvl) >= gbx_log_min_level) {                                                          \
            const struct gbx_log_field gbx_lf_[] = {__VA_ARGS__};                                  \
            gbx_log_fields_write((lvl), (msg), gbx_lf_, GBX_ARRAY_SIZE(gbx_lf_));                  \
        }                                                                                          \
    } while (0)
#define gbx_log_debug(...) GBX_LOG_AT(GBX_LOG_DEBUG, __VA_ARGS__)
#define gbx_log_info(...) GBX_LOG_AT(GBX_LOG_INFO, __VA_ARGS__)
#define gbx_log_warn(...) GBX_LOG_AT(GBX_LOG_WARN, __VA_ARGS__)
#define gbx_log_error(...) GBX_LOG_AT(GBX_LOG_ERROR, __VA_ARGS__)

#endif
