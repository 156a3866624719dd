/* SPDX-License-Identifier: MIT */
/* The daemon <-> glovebox-init agent protocol: message types and attribute tags.
 * Wire format and semantics: docs/agent-protocol.md. Shared by both sides. */
#ifndef GBX_AGENT_PROTO_H
#define GBX_AGENT_PROTO_H

#include <stdint.h>

#define GBX_AGENT_VERSION 1
/* Connections init serves at once; one more gets an ERROR frame (EMFILE, id 0) and is closed.
 * The daemon holds one per exec stream, attached process, download, upload or watch. */
#define GBX_AGENT_MAX_CONNS 256
/* init's O_PATH handle of the sandbox's writable layer (see src/init/main.c) */
#define GBX_INIT_LAYER_FD 7
#define GBX_FRAME_MAGIC 0x47 /* 'G' */
#define GBX_FRAME_HDR_SIZE 16
/* Largest payload either side accepts. Bigger data is split into chunks. */
#define GBX_FRAME_MAX_PAYLOAD (256u * 1024u)
/* Largest data chunk carried in one DATA attribute (leaves room for other attributes). */
#define GBX_FRAME_CHUNK (64u * 1024u)

/* Message types. Requests go daemon -> init; every request gets exactly one reply
 * (OK or ERROR) whose id is the request's id. Events go init -> daemon unprompted. */
enum gbx_msg_type {
    /* replies */
    GBX_MSG_OK = 0x01,    /* success; reply attributes depend on the request */
    GBX_MSG_ERROR = 0x02, /* failure: ERRNO, MESSAGE */

    /* session */
    GBX_MSG_HELLO = 0x03,     /* VERSION -> OK: VERSION, PID (init's host-invisible pid 1) */
    GBX_MSG_PING = 0x04,      /* -> OK */
    GBX_MSG_SHUTDOWN = 0x05,  /* -> OK, then init kills every process and exits */
    GBX_MSG_HIBERNATE = 0x06, /* -> OK, then init closes every connection and its layer
                                 handle, and parks an unreachable placeholder at fd 3 in
                                 place of its listener: ready for a CRIU dump */

    /* processes */
    GBX_MSG_SPAWN = 0x10,       /* ARGV+, ENV*, CWD?, USER?, PTY_ROWS?, PTY_COLS?, STDIN?,
                                   -> OK: PROC, PID */
    GBX_MSG_STDIN = 0x11,       /* PROC, DATA -> OK once the bytes are written to the process */
    GBX_MSG_CLOSE_STDIN = 0x12, /* PROC -> OK */
    GBX_MSG_SIGNAL = 0x13,      /* PROC, SIGNO, GROUP? -> OK */
    GBX_MSG_RESIZE = 0x14,      /* PROC, PTY_ROWS, PTY_COLS -> OK */
    GBX_MSG_PS = 0x15,          /* -> OK: PROCINFO* (nested: PROC PID ARGV+ CWD USER PTY) */
    GBX_MSG_ATTACH = 0x16,      /* PROC -> OK; output and exit of PROC now go to this connection */

    /* files; every request may carry USER (default "root") */
    GBX_MSG_STAT = 0x20,  /* PATH, FOLLOW? -> OK: STAT attributes (see below) */
    GBX_MSG_READ = 0x21,  /* PATH, OFFSET?, LENGTH? -> DATA events (id = request), then OK: SIZE */
    GBX_MSG_WRITE = 0x22, /* PATH, MODE?, WFLAGS? -> OK: HANDLE */
    GBX_MSG_WRITE_DATA = 0x23, /* HANDLE, DATA -> OK */
    GBX_MSG_WRITE_END = 0x24,  /* HANDLE, COMMIT (0 aborts) -> OK: SIZE */
    GBX_MSG_MKDIR = 0x25,      /* PATH, MODE?, PARENTS? -> OK */
    GBX_MSG_REMOVE = 0x26,     /* PATH, RECURSIVE? -> OK */
    GBX_MSG_RENAME = 0x27,     /* PATH, PATH2, NOREPLACE? -> OK */
    GBX_MSG_LIST = 0x28,       /* PATH, DEPTH? -> DIRENT events (id = request), then OK: COUNT */
    GBX_MSG_WATCH = 0x29,      /* PATH, RECURSIVE? -> OK: HANDLE; then WATCH events */
    GBX_MSG_UNWATCH = 0x2a,    /* HANDLE -> OK */
    GBX_MSG_CHMOD = 0x2b,      /* PATH, MODE -> OK */
    GBX_MSG_REALPATH = 0x2c,   /* PATH -> OK: PATH (every symlink followed; missing tail kept) */

    /* events (init -> daemon) */
    GBX_EV_STDOUT = 0x40, /* id = PROC; DATA (for a PTY, all terminal output) */
    GBX_EV_STDERR = 0x41, /* id = PROC; DATA */
    GBX_EV_EXIT = 0x42,   /* id = PROC; EXIT_CODE or EXIT_SIGNAL (+ CORE) */
    GBX_EV_DATA = 0x43,   /* id = READ request; DATA */
    GBX_EV_DIRENT = 0x44, /* id = LIST request; ENTRY* (nested STAT attributes + NAME) */
    GBX_EV_WATCH = 0x45,  /* id = HANDLE; NAME (relative to the watched path), WEVENT */
};

/* Attribute tags. Integer attributes are little-endian u32 or u64 of exactly that size;
 * strings are bytes without a terminator and must not contain NUL. */
enum gbx_attr_tag {
    GBX_A_VERSION = 1,      /* u32 */
    GBX_A_ERRNO = 2,        /* u32, positive errno */
    GBX_A_MESSAGE = 3,      /* str */
    GBX_A_PID = 4,          /* u32 */
    GBX_A_PROC = 5,         /* u32 process handle, assigned by init, never reused */
    GBX_A_ARGV = 6,         /* str, repeated in order */
    GBX_A_ENV = 7,          /* str "KEY=VALUE", repeated */
    GBX_A_CWD = 8,          /* str */
    GBX_A_USER = 9,         /* str: a user name, or "uid" or "uid:gid" */
    GBX_A_PTY_ROWS = 10,    /* u32; presence of ROWS+COLS in SPAWN asks for a PTY */
    GBX_A_PTY_COLS = 11,    /* u32 */
    GBX_A_STDIN = 12,       /* u32 bool: keep stdin open (default 0: stdin is /dev/null) */
    GBX_A_DATA = 13,        /* bytes */
    GBX_A_SIGNO = 14,       /* u32 */
    GBX_A_GROUP = 15,       /* u32 bool: signal the whole process group (default 1) */
    GBX_A_EXIT_CODE = 16,   /* u32 */
    GBX_A_EXIT_SIGNAL = 17, /* u32 */
    GBX_A_CORE = 18,        /* u32 bool */
    GBX_A_PROCINFO = 19,    /* nested */
    GBX_A_PTY = 20,         /* u32 bool */
    GBX_A_PATH = 21,        /* str */
    GBX_A_PATH2 = 22,       /* str */
    GBX_A_FOLLOW = 23,      /* u32 bool: follow a final symlink (default 1) */
    GBX_A_OFFSET = 24,      /* u64 */
    GBX_A_LENGTH = 25,      /* u64; absent = to the end */
    GBX_A_SIZE = 26,        /* u64 */
    GBX_A_MODE = 27,        /* u32 permission bits */
    GBX_A_WFLAGS = 28,      /* u32 GBX_W_* */
    GBX_A_HANDLE = 29,      /* u32 */
    GBX_A_COMMIT = 30,      /* u32 bool */
    GBX_A_PARENTS = 31,     /* u32 bool */
    GBX_A_RECURSIVE = 32,   /* u32 bool */
    GBX_A_NOREPLACE = 33,   /* u32 bool */
    GBX_A_DEPTH = 34,       /* u32, 1 = direct children only (default 1) */
    GBX_A_COUNT = 35,       /* u64 */
    GBX_A_ENTRY = 36,       /* nested: NAME + STAT attributes */
    GBX_A_NAME = 37,        /* str */
    GBX_A_FTYPE = 38,       /* u32 GBX_FT_* */
    GBX_A_MTIME_NS = 39,    /* u64 nanoseconds since the epoch */
    GBX_A_UID = 40,         /* u32 */
    GBX_A_GID = 41,         /* u32 */
    GBX_A_LINK = 42,        /* str: symlink target */
    GBX_A_WEVENT = 43,      /* u32 GBX_WE_* bits */
    GBX_A_OWNER = 44,       /* str: owner user name, if known */
    GBX_A_GROUPNAME = 45,   /* str: owner group name, if known */
};

/* WRITE flags */
enum {
    GBX_W_CREATE = 1 << 0,  /* create if missing */
    GBX_W_TRUNC = 1 << 1,   /* replace contents */
    GBX_W_APPEND = 1 << 2,  /* append (not atomic) */
    GBX_W_EXCL = 1 << 3,    /* fail if it exists */
    GBX_W_ATOMIC = 1 << 4,  /* write to a temporary file and rename over the target on commit */
    GBX_W_PARENTS = 1 << 5, /* create missing parent directories */
};

/* file types */
enum { GBX_FT_FILE = 1, GBX_FT_DIR = 2, GBX_FT_SYMLINK = 3, GBX_FT_OTHER = 4 };

/* watch event bits */
enum {
    GBX_WE_CREATE = 1 << 0,
    GBX_WE_WRITE = 1 << 1,
    GBX_WE_REMOVE = 1 << 2,
    GBX_WE_RENAME = 1 << 3,
    GBX_WE_CHMOD = 1 << 4,
    GBX_WE_OVERFLOW = 1 << 5, /* events were lost; rescan */
};

#endif
