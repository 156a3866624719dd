/* SPDX-License-Identifier: MIT */
/* The CLI's side of the daemon's API: HTTP over the admin socket, with libevent's client. */
#ifndef GBX_CLI_API_H
#define GBX_CLI_API_H

#include <jansson.h>
#include <stddef.h>

/* The negative statuses of the calls below: the daemon cannot be reached; or something here
 * failed (libcurl cannot be loaded, a download cannot be written). A message has been
 * printed. */
#define GBX_CLI_NO_DAEMON (-1)
#define GBX_CLI_LOCAL_FAILURE (-2)

/* The admin socket: $GLOVEBOX_RUNTIME_DIR/api.sock or /run/glovebox/api.sock. */
const char *gbx_cli_socket(void);

/* One request. body may be NULL. *reply gets the parsed JSON body (or NULL when empty or not
 * JSON); returns the HTTP status, or -1 when the daemon cannot be reached (a message has been
 * printed). */
int gbx_cli_call(const char *method, const char *path, json_t *body, json_t **reply);

/* The same with a raw body (application/octet-stream) of len bytes. Thread-safe once a first
 * call has loaded libcurl. */
int gbx_cli_call_raw(const char *method, const char *path, const void *data, size_t len,
                     json_t **reply);

/* A streaming request: each complete line of the reply goes to on_line. Returns the status
 * (the lines of an error reply are not passed on; *reply gets its JSON). */
typedef void (*gbx_line_fn)(void *arg, const char *line, size_t len);
int gbx_cli_stream(const char *method, const char *path, json_t *body, gbx_line_fn on_line,
                   void *arg, json_t **reply);
/* From on_line: end the stream after this line (the connection is closed; gbx_cli_stream
 * returns the status it had). */
void gbx_cli_stream_stop(void);

/* The exit status of a call that should have answered ok: GBX_EXIT_OK, GBX_EXIT_NOT_FOUND
 * (404), GBX_EXIT_NO_DAEMON, or GBX_EXIT_FAILED (with the daemon's message printed). */
int gbx_cli_result(int status, json_t *reply, int ok);
/* A call that should answer 200: GBX_EXIT_OK with the reply in *reply (the caller's to free),
 * or gbx_cli_result's exit status, its message printed and *reply NULL. */
int gbx_cli_call_ok(const char *method, const char *path, json_t *body, json_t **reply);
/* The same for a call that should answer want (201 for what it makes). */
int gbx_cli_call_want(const char *method, const char *path, json_t *body, int want, json_t **reply);

/* Print an error reply {"error":{"kind","message"}} (or the status) as "glovebox: ...". */
void gbx_cli_print_error(int status, json_t *reply);

/* A request whose body is read from in_fd (in_len bytes, or -1 when unknown: chunked; in_fd
 * -1: no body) and whose 2xx reply body is written to out_fd (-1: parsed into *reply like
 * gbx_cli_call). An error reply's JSON goes to *reply. Returns the status, or -1 when the
 * daemon cannot be reached or out_fd cannot be written (a message has been printed). */
int gbx_cli_transfer(const char *method, const char *path, int in_fd, long long in_len, int out_fd,
                     json_t **reply);

/* GET path into the file target, atomically (a temporary file beside it, renamed over it
 * once complete), mode 0666 less the umask; "-": standard output. The HTTP status (200 when
 * it is all there), or -1 when the daemon cannot be reached or the file cannot be written (a
 * message has been printed). An error reply's JSON goes to *reply. */
int gbx_cli_download(const char *path, const char *target, json_t **reply);

#endif
