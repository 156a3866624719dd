/* SPDX-License-Identifier: MIT */
/* The daemon's configuration file: one "key = value" per line, '#' starts a comment line,
 * blank lines are ignored, a value may be wrapped in double quotes (to keep spaces or a
 * leading '#'). Keys are the long flag names without "--" (docs: README "Configuration").
 * A pure function over a buffer: no I/O, unit-tested and fuzzed. */
#ifndef GBX_BASE_CONF_H
#define GBX_BASE_CONF_H

#include <stddef.h>

/* Called for each setting with NUL-terminated key and value and the 1-based line number.
 * A non-zero return stops the parse and is returned. */
typedef int (*gbx_conf_fn)(void *arg, const char *key, const char *value, unsigned line);

/* Parse text[0..len). Returns 0, fn's non-zero return, or -EINVAL with a message in
 * errbuf ("line 3: expected key = value"). Lines are at most 4095 bytes. */
int gbx_conf_parse(const char *text, size_t len, gbx_conf_fn fn, void *arg, char *errbuf,
                   size_t errsz);

#endif
