/* SPDX-License-Identifier: MIT */
/* The pure parts of the Claude agent toolset (agent_toolset_20260401: bash, read, write, edit,
 * glob, grep) that a session runs in its sandbox: input parsing, path arithmetic, text slicing
 * and editing, the bash sentinel framing, glob matching, result formatting. No I/O and no
 * system calls: the daemon side does the file operations and runs the shell, and hands the
 * bytes to these functions. Everything here takes untrusted bytes (from a model or from a
 * sandbox), is O(input) (glob matching: O(pattern x path)) and bounds sizes before allocating.
 * Behaviour and result strings follow docs protocols/managed-agents-worker.md §6, which follows
 * the SDKs' reference implementations. */
#ifndef GBX_SESSION_TOOLKIT_H
#define GBX_SESSION_TOOLKIT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

/* --- inputs ---------------------------------------------------------------------------- */
enum gbx_tool {
    GBX_TOOL_BASH,
    GBX_TOOL_READ,
    GBX_TOOL_WRITE,
    GBX_TOOL_EDIT,
    GBX_TOOL_GLOB,
    GBX_TOOL_GREP,
};

#define GBX_TOOL_BASH_TIMEOUT_DEFAULT_MS 120000
#define GBX_TOOL_BASH_TIMEOUT_MAX_MS 600000
/* Input size bounds, checked by gbx_tool_parse */
#define GBX_TOOL_PATH_MAX 4096                  /* file_path, path */
#define GBX_TOOL_COMMAND_MAX (1024 * 1024)      /* bash command */
#define GBX_TOOL_CONTENT_MAX (16 * 1024 * 1024) /* write content */
#define GBX_TOOL_GLOB_PATTERN_MAX 1024          /* glob pattern */
#define GBX_TOOL_GREP_PATTERN_MAX (64 * 1024)   /* grep regex */
#define GBX_TOOL_EDIT_STRING_MAX (256 * 1024)   /* old_string, new_string */

struct gbx_tool_call {
    enum gbx_tool tool;
    /* bash: command is NULL only with restart. timeout_ms: 0 means the default; parse fills
     * in GBX_TOOL_BASH_TIMEOUT_DEFAULT_MS for an omitted or 0 value */
    const char *command;
    int restart;
    int64_t timeout_ms;
    /* read/write/edit. view: 1-based inclusive lines, view_end <= 0: to EOF; parse clamps a
     * view_start below 1 to 1 */
    const char *file_path;
    int64_t view_start, view_end;
    int has_view;
    /* write: content may contain NUL bytes (JSON "\u0000"): write content_len bytes */
    const char *content;
    size_t content_len;
    /* edit: neither contains a NUL byte; old_string is never empty after parse */
    const char *old_string, *new_string;
    int replace_all;
    /* glob/grep: path NULL (omitted or ""): the workdir */
    const char *pattern;
    const char *path;
};

/* Parse execute's {name, input}: name must be one of the six (lowercase); input must be an
 * object with exactly the documented fields (unknown fields: error), of the right types
 * (view_range: array of 2 integers, [] and null mean none; timeout_ms integer in
 * [0, 600000]). null for an optional field means omitted. Strings borrow from input (keep it
 * alive). Also rejects: NUL bytes in any string but content, strings over the bounds above,
 * view_range on image/PDF paths, a glob pattern that gbx_tool_glob_check refuses. Errors:
 * GBX_ERR_INVALID (GBX_ERR_LIMIT for sizes) with a message the model can act on ("edit:
 * 'old_string' is required"). */
int gbx_tool_parse(const char *name, const json_t *input, struct gbx_tool_call *out,
                   struct gbx_err **err) GBX_WUR;
/* Name -> tool: 0, or -1 for a name the toolset does not own (leave it unanswered) */
int gbx_tool_from_name(const char *name, enum gbx_tool *t) GBX_WUR;
/* "bash", "read", ... (static) */
const char *gbx_tool_name(enum gbx_tool t);
/* The tool is mutating (write, edit, bash): the caller checkpoints after it */
int gbx_tool_mutates(enum gbx_tool t);

/* --- paths ----------------------------------------------------------------------------- */
/* Join a tool's path with the workdir (absolute: as is; relative: workdir/path; NULL or "":
 * the workdir) and normalize lexically (collapse //, ., .., drop a trailing slash), never
 * going above "/". A relative workdir is taken from "/". Output malloc'd (caller frees),
 * absolute. */
char *gbx_tool_path_join(const char *workdir, const char *path);
/* Is resolved (an already symlink-resolved absolute path) inside root (equal or below it)?
 * Both are normalized lexically first, so "/work/../etc" is not inside "/work" and "/work/"
 * equals "/work"; "/workspace" is not inside "/work". A relative path is never inside. 1/0 */
int gbx_tool_path_inside(const char *root, const char *resolved);

/* --- read ------------------------------------------------------------------------------ */
#define GBX_TOOL_TEXT_MAX (256 * 1024)
#define GBX_TOOL_IMAGE_B64_MAX (5 * 1024 * 1024)     /* base64 text of an image block */
#define GBX_TOOL_DOCUMENT_B64_MAX (20 * 1024 * 1024) /* base64 text of a PDF block */

/* Given the whole file's bytes: validate UTF-8 (error "read: FILE is not UTF-8 text; use bash
 * to inspect it"; a NUL byte counts as binary), enforce the 256 KiB cap (error suggests bash),
 * slice lines by view_range (1-based inclusive; end <= 0 or past the last line: to EOF, keeping
 * the file's final newline; otherwise the last line's newline is dropped; start beyond the
 * last line or end before start: error), return the raw text (no line numbers) malloc'd in
 * *text (caller frees). FILE is c->file_path as the model wrote it. An image/PDF path is an
 * error here: see gbx_tool_read_kind. */
int gbx_tool_read_text(const struct gbx_tool_call *c, const uint8_t *data, size_t len, char **text,
                       struct gbx_err **err) GBX_WUR;
/* By extension, case-insensitive: .png .jpg .jpeg .gif .webp: *kind "image", *media_type
 * "image/png" ...; .pdf: "document", "application/pdf"; returns 1 (binary block) or 0 (text).
 * The strings are static. */
int gbx_tool_read_kind(const char *path, const char **kind, const char **media_type);
/* Size check before reading a file of size bytes for c (read: by its kind; edit: the text cap),
 * so the caller can refuse without reading it. 0, or -1 with GBX_ERR_LIMIT and a message that
 * suggests bash. */
int gbx_tool_size_check(const struct gbx_tool_call *c, uint64_t size, struct gbx_err **err) GBX_WUR;
/* Build the content block for a binary read: {"type":"image"|"document","source":{"type":
 * "base64","media_type":...,"data":...}}. Checks the cap on the base64 size (images 5 MiB,
 * PDFs 20 MiB) before encoding, and sniffs the bytes: an image whose magic names another of
 * the four image types gets that media type (the API rejects a mismatch), bytes that are no
 * supported image / no PDF ("%PDF-" in the first 1024 bytes) are an error. New reference, or
 * NULL with *err set. */
json_t *gbx_tool_read_block(const char *kind, const char *media_type, const uint8_t *data,
                            size_t len, struct gbx_err **err);

/* --- edit ------------------------------------------------------------------------------ */
/* Apply old->new to the file's bytes: exact substring, non-overlapping occurrences counted
 * left to right ("aaa" holds "aa" once); 0 hits: error "edit: old_string not found in FILE";
 * >1 hits without replace_all: error naming the count; old_string empty: error; the result
 * over GBX_TOOL_TEXT_MAX: error. Same 256 KiB cap and UTF-8 check as read (NUL bytes are
 * allowed: the output has a length); old/new must be UTF-8 too, so the result always is. Result
 * malloc'd in *out (caller frees; NUL-terminated too), *outlen its length, *count the replacements
 * made (1 without replace_all). */
int gbx_tool_edit_apply(const struct gbx_tool_call *c, const uint8_t *data, size_t len, char **out,
                        size_t *outlen, size_t *count, struct gbx_err **err) GBX_WUR;
/* "edited PATH (N replacement(s))" exactly as §6; malloc'd */
char *gbx_tool_edit_result(const char *path, size_t count);
/* "wrote N bytes to PATH" (N in bytes); malloc'd */
char *gbx_tool_write_result(const char *path, size_t bytes);

/* --- bash ------------------------------------------------------------------------------ */
#define GBX_TOOL_OUTPUT_MAX (100 * 1024)
/* The bytes to write to the persistent shell's stdin for one command (malloc'd, ends with a
 * newline): the command goes single-quoted through eval, so a syntax error in it (an open
 * quote, a stray "}") fails that command with status 2 instead of eating the framing; stdin
 * from /dev/null, stderr merged into stdout; then a sentinel line with the exit status:
 * "\n__GBX_<nonce>_<status>__\n", the literal split by '' in the script so an echo of the
 * script is no sentinel. nonce: 16 lowercase hex chars (aborts otherwise). NULL when command
 * is longer than GBX_TOOL_COMMAND_MAX. */
char *gbx_tool_bash_script(const char *command, const char nonce[17]);
/* Output accumulator for one command. Feed output chunks; returns 1 once the sentinel line
 * with this nonce has been seen (sets *status, 0..999), 0 to wait for more. Accumulates the
 * bytes before the sentinel, keeping only the last GBX_TOOL_OUTPUT_MAX plus a truncation
 * flag; bytes after the sentinel are ignored, as are later feeds. O(n) in the bytes fed. */
struct gbx_tool_bash_out;
struct gbx_tool_bash_out *gbx_tool_bash_out_new(const char nonce[17]);
int gbx_tool_bash_out_feed(struct gbx_tool_bash_out *o, const uint8_t *p, size_t n, int *status);
/* Was output dropped (more than GBX_TOOL_OUTPUT_MAX bytes before the sentinel)? */
int gbx_tool_bash_out_truncated(const struct gbx_tool_bash_out *o);
/* The final text (also usable before the sentinel, e.g. on a timeout): ANSI escape sequences
 * stripped (CSI, OSC ended by BEL or ESC \, and lone ESC x), "[output truncated]\n"
 * prefixed when truncated (a UTF-8 character cut by the truncation is dropped), trailing
 * newlines trimmed like the reference, invalid UTF-8 and NUL bytes replaced with U+FFFD so it
 * can go in JSON. Malloc'd; may be "". */
char *gbx_tool_bash_out_text(struct gbx_tool_bash_out *o);
void gbx_tool_bash_out_free(struct gbx_tool_bash_out *o);
/* The tool result for a command that finished with status: the text above; non-zero status:
 * is_error, and "exit N" when the output is empty (the reference's wording). New reference. */
json_t *gbx_tool_bash_result(struct gbx_tool_bash_out *o, int status);

/* --- glob ------------------------------------------------------------------------------ */
#define GBX_TOOL_GLOB_RESULTS_MAX 200
/* doublestar matching of a relative path ("src/a/b.c") against a pattern: "**" as a whole
 * segment matches any number of directories including none ("a/" then "**" also matches "a"), "*"
 * any run of chars except '/', "?" one character (UTF-8) except '/', "[...]" classes ("[!a]"
 * and "[^a]" negate, ranges, "]" first is literal; never '/'), "{a,b}" alternatives (nested,
 * may hold '/'), "\x" a literal x. Dotfiles are not special: "*" matches ".git" (as the SDKs'
 * Python and Go globs do). A leading "./" in the pattern is ignored. A malformed pattern
 * matches nothing. 1/0 */
int gbx_tool_glob_match(const char *pattern, const char *relpath);
/* The same, compiled once for a walk: NULL with *err set for a pattern glob_check refuses */
struct gbx_tool_glob;
struct gbx_tool_glob *gbx_tool_glob_new(const char *pattern, struct gbx_err **err);
int gbx_tool_glob_test(const struct gbx_tool_glob *g, const char *relpath);
void gbx_tool_glob_free(struct gbx_tool_glob *g);
/* Validate a glob pattern: empty, absolute ("glob: absolute pattern not permitted"), holding a
 * ".." segment ("glob: '..' is not permitted in the pattern"), longer than
 * GBX_TOOL_GLOB_PATTERN_MAX, or malformed (unterminated "[" or "{", trailing "\"): error. */
int gbx_tool_glob_check(const char *pattern, struct gbx_err **err) GBX_WUR;
/* Format results: hits (relpath + mtime_ns; sorted in place) newest first, ties by path, at
 * most 200, one per line as root-joined absolute paths; "no matches" when empty; invalid
 * UTF-8 replaced. Malloc'd. */
struct gbx_tool_glob_hit {
    const char *path;
    int64_t mtime_ns;
};
char *gbx_tool_glob_result(const char *root, struct gbx_tool_glob_hit *hits, size_t n);

/* --- grep ------------------------------------------------------------------------------ */
#define GBX_TOOL_GREP_LINE_MAX 2000
#define GBX_TOOL_GREP_TRUNCATED "[output truncated at 102400 bytes]"
/* Post-process raw "path:lineno:text" output of `grep -rnHE` / `rg -n --no-heading` run in
 * the sandbox: a trailing "\r" is dropped from each line; lines whose text (after the first
 * ":N:") is longer than 2000 bytes are dropped and counted in a last line "[N matching lines
 * longer than 2000 bytes omitted]"; whole lines are kept while they fit in
 * GBX_TOOL_OUTPUT_MAX (each counts its length + 1), then the marker line
 * GBX_TOOL_GREP_TRUNCATED ends the list; "no matches" when no line is left; invalid UTF-8
 * and NUL -> U+FFFD. Lines are joined by "\n", no trailing newline. Malloc'd. */
char *gbx_tool_grep_result(const uint8_t *raw, size_t len);

/* --- results --------------------------------------------------------------------------- */
/* {"content":[{"type":"text","text":...}],"is_error":b}: text never empty ("(no output)" for
 * NULL or "", as the worker must never post an empty result); invalid UTF-8 replaced. New
 * reference. */
json_t *gbx_tool_result_text(const char *text, int is_error);
/* {"content":[block],"is_error":false}; steals block. New reference. */
json_t *gbx_tool_result_block(json_t *block);

#endif
