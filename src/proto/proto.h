/* SPDX-License-Identifier: MIT */
#pragma once

/* The space-agent wire protocol: a stream of frames over one socket.
 *
 *   frame  = header(12 bytes, little endian) payload
 *   header = u32 length (payload bytes, <= PROTO_PAYLOAD_MAX)
 *            u16 type   (ProtoType)
 *            u16 flags  (0; unknown bits are an error)
 *            u32 stream (request/stream id chosen by the host; 0 = connection)
 *
 * Control payloads are JSON objects (parsed with the strict JSON parser);
 * data payloads (STDOUT, STDERR, STDIN, DATA) are raw bytes.
 * Every frame from the agent is hostile input for the host: sizes are
 * bounded and every field is validated.
 *
 * Conversation (host → agent requests, agent → host replies on the same stream):
 *
 *   agent sends HELLO {"version":1,"agent":"space-agent 0.1","pid":1} on accept.
 *
 *   EXEC {"argv":[...]} | {"shell":"..."}  + optional
 *        "env":{"K":"V"}, "cwd":"/", "user":"root"|"user"|uid, "stdin":bool (keep
 *        stdin open for STDIN frames; default false = /dev/null), "pty":bool,
 *        "rows":N,"cols":N, "timeout_ms":N (0 = none), "background":bool
 *     → STARTED {"pid":N,"exec_id":"e1"}   (or ERROR {"errno":N,"code":"ENOENT","message":"..."})
 *     → STDOUT / STDERR (raw bytes; with a pty everything is STDOUT)
 *     → EXIT {"code":N} | {"signal":"SIGKILL","code":137,"reason":"timeout"|"killed"}
 *     A background exec gets STARTED and no further frames on that stream.
 *     Output is kept in a bounded buffer per exec ("buffer_bytes", default
 *     1 MiB): every byte of it has an offset (stdout and stderr counted
 *     together, in the order read). Readers of the output get it from the
 *     buffer; a reader that falls so far behind that the buffer dropped what
 *     it had not read gets DROPPED {"bytes":N} (N bytes skipped) and goes on
 *     with the oldest byte kept. While a reader is behind by half the buffer
 *     and took something within "stall_ms" (default 5000), the process's
 *     pipes are not read (it waits, nothing is lost); a reader that takes
 *     nothing for stall_ms no longer holds the process up.
 *     "on_disconnect": "keep" (default without pty: the process lives on when
 *     the EXEC's connection goes away), "hangup" (default with pty: SIGHUP to
 *     its group) or "kill" (SIGKILL to its group).
 *     "keep_ms" (default 600000): how long a finished exec's buffer and exit
 *     stay for late ATTACH readers (at most AGENT_EXEC_KEPT_MAX of them).
 *     "oom_base": N (from older API servers: opaque, echoed in EXIT). The agent
 *     itself tells an OOM kill: EXIT "reason":"oom" for a SIGKILL while its
 *     sandbox's OOM count (its own cgroup view) grew.
 *   STDIN (raw, on the exec's stream), STDIN_EOF (empty)
 *   SIGNAL {"signal":"SIGTERM"}        (on the exec's stream, or with "exec_id")
 *   RESIZE {"rows":N,"cols":N}         (pty only)
 *   ATTACH {"exec_id":"e1","output":bool,"from":N}  binds a stream on another connection to a
 *        running exec (to send STDIN/SIGNAL/RESIZE, and with output:true to receive
 *        its STDOUT/STDERR/EXIT) → STARTED {"pid":N,"exec_id":"e1","offset":N,"running":bool}
 *        With output:true the exec may have finished (while it is kept): the
 *        stream gets what is left of its buffer from "from" (default: the end,
 *        i.e. new output only; before the oldest byte kept: DROPPED first), then
 *        EXIT. "offset" is where the stream starts; "from" past the end is EINVAL.
 *   PS {} → RESULT {"processes":[{"exec_id":..,"pid":..,"argv":[..],"pty":bool}]}
 *
 *   FILE_READ {"path":"/a","offset":0,"length":-1}
 *     → FILE_INFO {"size":N,"mode":N,"type":"file"} then DATA... then DATA_END (empty)
 *   FILE_WRITE {"path":"/a","mode":420,"append":false,"parents":true,"uid":0,"gid":0}
 *     host then sends DATA... and DATA_END → RESULT {"bytes":N}
 *     (the agent writes to a temporary file beside the target and renames it at
 *     DATA_END, so a failed upload changes nothing unless append)
 *   FILE_LIST {"path":"/d","depth":1} → RESULT {"entries":[{"name","path","type","size","mode","mtime_ns","uid","gid","target"?}]}
 *   FILE_STAT {"path":"/a"} → RESULT {one entry}
 *   FILE_MKDIR {"path":"/d","parents":true,"mode":493} → RESULT {"created":bool}
 *   FILE_REMOVE {"path":"/a","recursive":false} → RESULT {}
 *   FILE_RENAME {"from":"/a","to":"/b"} → RESULT {}
 *   FILE_WATCH {"path":"/d","recursive":false} watches a directory (inotify) until
 *     the connection closes: → RESULT {"watching":"/d"} once armed (or ERROR), then
 *     RESULT {"events":[{"name":"a/b","op":"create"},...]} frames as things change.
 *     "name" is relative to the watched directory; "op" is one of create, write,
 *     remove, rename (moved away), chmod. "overflow":true in a frame says events
 *     were lost (kernel queue full, or the host did not read). Recursive watches
 *     follow new subdirectories, up to AGENT_WATCH_DIRS_MAX directories (then
 *     "incomplete":true). FILE_WRITE's temporary files are not reported; their
 *     rename onto the target is reported as create then write of the target. If
 *     the watched directory itself goes away: ERROR ENOENT, and the stream ends.
 *   Errors on any request: ERROR {"errno":N,"code":"ENOENT","message":"..."}.
 *   Relative paths are relative to the user's home directory. Paths are
 *   resolved inside the sandbox (the agent is confined to its root).
 *
 *   PING {} → PONG {}
 *
 * Details the agent implements (src/agent, requests parsed by proto-msg.h):
 *   - JSON payloads are at most PROTO_JSON_MAX bytes both ways; an empty request
 *     payload counts as {}. Unknown keys are an error, null counts as absent.
 *     A FILE_LIST or PS RESULT that would not fit is cut and gets "truncated":true.
 *   - File requests accept an optional "user" (name or uid) whose home relative
 *     paths are taken from (root's by default); FILE_MKDIR also takes "uid","gid".
 *   - FILE_WRITE: an ERROR is sent at most once; DATA up to DATA_END is then
 *     dropped. Without "mode" a replaced file keeps its mode and owner, a new one
 *     gets 0644.
 *   - SIGNAL/RESIZE on the exec's own stream are silent on success; sent on any
 *     other stream (with "exec_id") they get RESULT {}. The signal goes to the
 *     process group. EXIT "reason" is "timeout" if timeout_ms killed it, else
 *     "killed" for any death by signal. STDIN_EOF on a pty writes ^D.
 *   - A broken frame (bad header, oversized) gets ERROR on its stream, then the
 *     connection is closed; a bad request on a good frame only gets ERROR.
 */

#include "macros.h"

#define PROTO_VERSION 1
#define PROTO_HEADER_SIZE 12U
#define PROTO_PAYLOAD_MAX (1024U * 1024U)  /* one frame */
#define PROTO_DATA_CHUNK (64U * 1024U)     /* preferred size of DATA/STDOUT frames */
#define PROTO_JSON_MAX (256U * 1024U)      /* control payloads */

typedef enum ProtoType {
        PROTO_HELLO = 1,
        PROTO_PING,
        PROTO_PONG,
        PROTO_EXEC,
        PROTO_STARTED,
        PROTO_STDIN,
        PROTO_STDIN_EOF,
        PROTO_STDOUT,
        PROTO_STDERR,
        PROTO_EXIT,
        PROTO_SIGNAL,
        PROTO_RESIZE,
        PROTO_ATTACH,
        PROTO_PS,
        PROTO_FILE_READ,
        PROTO_FILE_INFO,
        PROTO_FILE_WRITE,
        PROTO_FILE_LIST,
        PROTO_FILE_STAT,
        PROTO_FILE_MKDIR,
        PROTO_FILE_REMOVE,
        PROTO_FILE_RENAME,
        PROTO_DATA,
        PROTO_DATA_END,
        PROTO_RESULT,
        PROTO_ERROR,
        PROTO_FILE_WATCH,
        PROTO_RESTORED,   /* vm: the machine was restored from saved memory; who it is now (agent-vm-restore.c) */
        PROTO_SYNC,       /* vm: write the guest's dirty file data to its disk (before a disk-only copy) */
        PROTO_DROPPED,    /* exec output lost from the buffer before this reader got it: {"bytes":N} */
        _PROTO_TYPE_MAX,
        _PROTO_TYPE_INVALID = -EINVAL,
} ProtoType;

const char *proto_type_to_string(ProtoType t);
ProtoType proto_type_from_string(const char *s);
/* True for types whose payload is JSON (everything but STDIN/STDOUT/STDERR/DATA/DATA_END/STDIN_EOF). */
bool proto_type_is_json(ProtoType t);

typedef struct ProtoFrame {
        ProtoType type;
        uint32_t stream;
        uint32_t len;
        char *payload; /* malloc'd, len bytes + a NUL (for convenience; not part of the data) */
} ProtoFrame;

void proto_frame_done(ProtoFrame *f);

/* Encodes a header into out[PROTO_HEADER_SIZE]. */
void proto_header_encode(uint8_t out[PROTO_HEADER_SIZE], ProtoType type, uint32_t stream, uint32_t len);
/* Decodes and validates a header: -EBADMSG for unknown type or flags, -EMSGSIZE over PROTO_PAYLOAD_MAX. */
int proto_header_decode(const uint8_t in[PROTO_HEADER_SIZE], ProtoType *ret_type, uint32_t *ret_stream,
                        uint32_t *ret_len);

/* Blocking helpers over a socket fd. */
int proto_send(int fd, ProtoType type, uint32_t stream, const void *payload, size_t len);
int proto_send_json(int fd, ProtoType type, uint32_t stream, const char *json); /* strlen(json) bytes */
/* Reads one whole frame. Returns 0 on success, -ECONNRESET on EOF at a frame
 * boundary, -EBADMSG/-EMSGSIZE on a bad frame (EOF inside a frame is -EBADMSG),
 * other -errno on I/O errors. */
int proto_recv(int fd, ProtoFrame *ret);
/* The same, done by deadline_msec (mono_msec()'s clock, as sock_wait_until; < 0 = none)
 * or -ETIMEDOUT, however the peer trickles its bytes or its reads (for a
 * peer as untrusted as a guest's agent). After a timeout the stream is out
 * of step: close it. */
int proto_send_until(int fd, int64_t deadline_msec, ProtoType type, uint32_t stream, const void *payload,
                     size_t len);
int proto_recv_until(int fd, int64_t deadline_msec, ProtoFrame *ret);

/* Incremental decoder for non-blocking readers (the agent's event loop, the worker). */
typedef struct ProtoReader {
        uint8_t header[PROTO_HEADER_SIZE];
        size_t have;         /* bytes of header or payload collected */
        bool in_payload;
        ProtoFrame cur;
} ProtoReader;

void proto_reader_init(ProtoReader *r);
void proto_reader_done(ProtoReader *r);
/* Feeds bytes; on a completed frame returns 1 and moves it to *ret (caller frees),
 * consuming *ret_consumed bytes. 0 = needs more. <0 = bad frame (drop the connection). */
int proto_reader_feed(ProtoReader *r, const void *p, size_t n, size_t *ret_consumed, ProtoFrame *ret);

/* Errors as they travel: code string ↔ errno. */
const char *proto_errno_to_code(int err);  /* "ENOENT", ... ("EIO" for unknown) */
int proto_errno_from_code(const char *code); /* -EINVAL if unknown */
