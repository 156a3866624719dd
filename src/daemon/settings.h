/* SPDX-License-Identifier: MIT */
/* The daemon's settings: built-in defaults, then the configuration file (--config,
 * $GLOVEBOX_CONFIG or /etc/glovebox/gloveboxd.conf), then the command line's flags, which
 * beat the file. One table names every setting, whether a reload (SIGHUP, POST
 * /v1/daemon/reload) can change it in a running daemon, and its default; each value in force
 * remembers where it came from, for `glovebox status` and GET /v1/daemon/config. */
#ifndef GBX_DAEMON_SETTINGS_H
#define GBX_DAEMON_SETTINGS_H

#include <getopt.h>
#include <jansson.h>
#include <stddef.h>
#include <time.h>

#include "core/limits.h"
#include "core/server.h"
#include "daemon/listen.h"

#define GBX_DEFAULT_CONFIG "/etc/glovebox/gloveboxd.conf"
#define GBX_SETTINGS_MAX 64

enum gbx_setting_src { GBX_SRC_DEFAULT, GBX_SRC_FILE, GBX_SRC_FLAG, GBX_SRC_ENV };

struct gbx_settings {
    struct gbx_server_config cfg;
    struct gbx_listen_config lcfg;
    struct gbx_limits limits;
    int kill_on_exit;
    int loop_nice; /* how much higher the loop's priority is than the process's */
    int log_json;
    int log_level; /* enum gbx_log_level */
    /* per setting of the table: the value as given (NULL: the default), where it came from,
     * and, after a reload, a value the file now says that needs a restart */
    char *val[GBX_SETTINGS_MAX];
    unsigned char src[GBX_SETTINGS_MAX];
    char *pending[GBX_SETTINGS_MAX];
    char *config_path;   /* the file read, or looked for */
    int config_found;    /* it existed and was read */
    time_t loaded_at;    /* when */
    char *pending_error; /* the last reload's error (the settings above stayed in force) */
};

/* The getopt table of every setting (and --config, --help): static, NULL-terminated. */
const struct option *gbx_settings_longopts(void);
enum { GBX_OPT_CONFIG = 256 };

/* Read everything: defaults, the file, then argv's flags. 0; 2 after printing the usage
 * (--help: 0 with *help set); -1 with a message in err ("FILE: line 3: pool must be ..."). */
int gbx_settings_load(struct gbx_settings *st, int argc, char **argv, int *help, char *err,
                      size_t errsz);
void gbx_settings_release(struct gbx_settings *st);

/* Compare the settings in force with newly read ones: the names of the settings that differ
 * go to changed (a reload applies them) or to restart (only a new daemon would); for those,
 * nw takes old's value back and keeps the file's as pending. */
void gbx_settings_diff(struct gbx_settings *old, struct gbx_settings *nw, json_t *changed,
                       json_t *restart);

/* {"file", "file_found", "loaded_at", "settings": {NAME: {"value", "source"[, "pending"]
 * [, "reload": false]}}} */
json_t *gbx_settings_describe(const struct gbx_settings *st);

#endif
