/* SPDX-License-Identifier: MIT */
#pragma once

/* Requests of the space-agent protocol (see proto.h), parsed from their JSON
 * payloads into plain structs. Every field is type- and range-checked here, so
 * the agent (and the fuzzer) run the same validation. A JSON null counts as an
 * absent key; unknown keys are an error. Parsers return 0 or -EINVAL/-ENOMEM and
 * on -EINVAL write a short reason into errbuf ("'argv' must be ..."). */

#include "json.h"
#include "proto.h"

#define PROTO_ARGV_MAX 4096U           /* argv entries */
#define PROTO_ENV_MAX 4096U            /* env entries */
#define PROTO_PATH_MAX 4095U           /* bytes of a path (PATH_MAX - 1) */
#define PROTO_NAME_MAX 256U            /* user names, exec ids, signal names */
#define PROTO_TIMEOUT_MS_MAX (366ULL * 24 * 3600 * 1000)
#define PROTO_WINSIZE_MAX 10000U       /* rows, cols */
#define PROTO_LIST_DEPTH_MAX 64U       /* FILE_LIST depth */
#define PROTO_ID_MAX 0xffffffffU       /* uid, gid */

typedef struct ProtoExecRequest {
        char **argv;  /* "shell" becomes {"/bin/sh", "-c", shell} */
        char **env;   /* "K=V" in request order; NULL if none */
        char *cwd;    /* NULL: the user's home */
        char *user;   /* user name; NULL with !have_uid: root */
        bool have_uid;
        uint32_t uid;
        bool stdin_open; /* "stdin" */
        bool pty;
        bool background;
        uint16_t rows, cols; /* 24x80 unless given */
        uint64_t timeout_ms; /* 0 = none */
        uint64_t buffer_bytes; /* output kept for readers; 0 = PROTO_EXEC_BUFFER_DEFAULT */
        uint64_t stall_ms;     /* a reader idle this long no longer holds the process up */
        uint64_t keep_ms;      /* a finished exec's buffer and exit are kept this long */
        uint64_t oom_base;     /* echoed in EXIT */
        bool have_oom_base;
        int on_disconnect;     /* ProtoDisconnect */
} ProtoExecRequest;

typedef enum ProtoDisconnect {
        PROTO_DISCONNECT_KEEP,   /* the process lives on */
        PROTO_DISCONNECT_HANGUP, /* SIGHUP to its process group */
        PROTO_DISCONNECT_KILL,   /* SIGKILL to its process group */
        _PROTO_DISCONNECT_MAX,
        _PROTO_DISCONNECT_INVALID = -EINVAL,
} ProtoDisconnect;
const char *proto_disconnect_to_string(ProtoDisconnect d);
ProtoDisconnect proto_disconnect_from_string(const char *s);

#define PROTO_EXEC_BUFFER_DEFAULT (1024U * 1024U)
#define PROTO_EXEC_BUFFER_MIN (64U * 1024U)
#define PROTO_EXEC_BUFFER_MAX (256U * 1024U * 1024U)
#define PROTO_EXEC_STALL_MS_DEFAULT 5000U
#define PROTO_EXEC_KEEP_MS_DEFAULT 600000U
#define PROTO_EXEC_KEEP_MS_MAX (7ULL * 24 * 3600 * 1000)

int proto_exec_request_parse(const JsonValue *obj, ProtoExecRequest *ret, char *errbuf, size_t errbuf_size);
void proto_exec_request_done(ProtoExecRequest *r);

/* FILE_READ, FILE_WRITE, FILE_LIST, FILE_STAT, FILE_MKDIR, FILE_REMOVE, FILE_RENAME, FILE_WATCH. */
typedef struct ProtoFileRequest {
        ProtoType type;
        char *path;        /* FILE_RENAME: "from" */
        char *to;          /* FILE_RENAME only */
        char *user;        /* optional: relative paths are relative to this user's home (default root) */
        uint64_t offset;   /* FILE_READ */
        int64_t length;    /* FILE_READ, -1 = to the end */
        bool have_mode;
        uint32_t mode;     /* permission bits, <= 07777 */
        bool append, parents, recursive;
        bool have_uid, have_gid;
        uint32_t uid, gid; /* FILE_WRITE, FILE_MKDIR */
        unsigned depth;    /* FILE_LIST, 1 unless given */
        char **metadata;   /* FILE_WRITE: key, value, key, value...: the file's user.e2b.<key> xattrs */
} ProtoFileRequest;

/* File metadata (E2B's X-Metadata-*): user.e2b.<key> xattrs of a file. Keys
 * are lower-case letters, digits, '-', '_' and '.'; values text without NUL. */
#define PROTO_FILE_METADATA_MAX 32U          /* entries per file */
#define PROTO_FILE_METADATA_KEY_MAX 128U
#define PROTO_FILE_METADATA_VALUE_MAX 1024U
#define PROTO_FILE_METADATA_XATTR_PREFIX "user.e2b."
bool proto_file_metadata_key_valid(const char *key, size_t n);

int proto_file_request_parse(ProtoType type, const JsonValue *obj, ProtoFileRequest *ret, char *errbuf,
                             size_t errbuf_size);
void proto_file_request_done(ProtoFileRequest *r);

/* SIGNAL {"signal","exec_id"?}, RESIZE {"rows","cols"}, ATTACH {"exec_id","output"?,"from"?}, PS {}. */
typedef struct ProtoControlRequest {
        ProtoType type;
        char *exec_id;
        int signal;
        uint16_t rows, cols;
        bool output;
        bool have_from;
        uint64_t from; /* ATTACH: output offset to start at */
} ProtoControlRequest;

int proto_control_request_parse(ProtoType type, const JsonValue *obj, ProtoControlRequest *ret, char *errbuf,
                                size_t errbuf_size);
void proto_control_request_done(ProtoControlRequest *r);

/* "SIGTERM", "TERM" or a decimal number (1..64) → signal number; -EINVAL otherwise. */
int proto_signal_from_string(const char *s);
/* "SIGTERM"...; NULL for numbers without a name. */
const char *proto_signal_to_string(int sig);

/* {"errno":N,"code":"ENOENT","message":"..."}; message may be NULL (strerror is used). */
int proto_error_json(int err, const char *message, char **ret);
