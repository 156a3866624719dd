/* SPDX-License-Identifier: MIT */
/* Diagnostic log: level-checked, text or JSON lines on stderr. Not the audit log. */
#ifndef GBX_BASE_LOG_H
#define GBX_BASE_LOG_H

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
#define gbx_log_debug(...) GBX_LOG_AT(GBX_LOG_DEBUG, __VA_ARGS__)
#define gbx_log_info(...) GBX_LOG_AT(GBX_LOG_INFO, __VA_ARGS__)
#define gbx_log_warn(...) GBX_LOG_AT(GBX_LOG_WARN, __VA_ARGS__)
#define gbx_log_error(...) GBX_LOG_AT(GBX_LOG_ERROR, __VA_ARGS__)

#endif
