/* SPDX-License-Identifier: MIT */
#pragma once

/* space-agent: PID 1 of every sandbox. One thread, one epoll loop:
 *
 *   agent.c        main, options, signals (reaping), the loop, timers
 *   agent-conn.c   connections: framing, output queue, streams, request dispatch
 *   agent-exec.c   processes: EXEC, output, exit, STDIN, SIGNAL, RESIZE, ATTACH, PS
 *   agent-outbuf.c the bounded output buffer of one exec (offsets, oldest dropped first)
 *   agent-spawn.c  fork/exec of one process (child side: no allocation), environment
 *   agent-pty.c    pseudo terminals
 *   agent-user.c   users from the sandbox's /etc/passwd and /etc/group
 *   agent-file-io.c   FILE_READ, FILE_WRITE (streams with DATA frames)
 *   agent-file-ops.c  FILE_LIST, FILE_STAT, FILE_MKDIR, FILE_REMOVE, FILE_RENAME
 *   agent-watch.c     FILE_WATCH (recursive inotify, events streamed as RESULT frames)
 *
 * Output for a connection is queued in its buffer; producers (file reads,
 * the exec output buffers' readers) stop while it holds more than
 * AGENT_OUT_HIGH bytes and resume below AGENT_OUT_LOW, so memory stays
 * bounded whatever the peer does. A process's pipes are read into its own
 * bounded output buffer (agent-outbuf.c), whatever its readers do; a reader
 * that keeps taking output holds the process up instead of losing bytes. */

#include <sys/types.h>

#include "json.h"
#include "proto.h"

#define AGENT_CONN_MAX 64U                      /* connections at once */
#define AGENT_STREAMS_MAX 1024U                 /* bound streams per connection */
#define AGENT_PROC_MAX 4096U                    /* processes started and not yet finished */
#define AGENT_OUT_HIGH (1024U * 1024U)          /* queued output that stops producers */
#define AGENT_OUT_LOW (256U * 1024U)            /* ... and resumes them */
#define AGENT_STDIN_BUF_MAX (1024U * 1024U)     /* buffered STDIN per process that stops its writers */
#define AGENT_EXIT_DRAIN_MSEC 250U              /* after exit, wait this long for the pipes to close */
#define AGENT_EXEC_KEPT_MAX 64U                 /* finished execs kept for late readers */
#define AGENT_RESULT_MAX (PROTO_JSON_MAX - 256U)   /* list RESULTs are cut (truncated:true) to fit PROTO_JSON_MAX */
#define AGENT_LIST_ENTRIES_MAX 100000U          /* FILE_LIST entries */
#define AGENT_TREE_DEPTH_MAX 256U               /* recursive remove */
#define AGENT_WATCHES_MAX 64U                   /* FILE_WATCH streams at once */
#define AGENT_WATCH_DIRS_MAX 8192U              /* directories one recursive watch follows */
#define AGENT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

typedef struct Agent Agent;
typedef struct Conn Conn;
typedef struct Proc Proc;
typedef struct FileJob FileJob;
typedef struct Watch Watch;
typedef struct OutChunk OutChunk;

/* agent-outbuf.c: the newest output of an exec, offsets [start, end). */
typedef struct OutBuf {
        OutChunk *head, **tail_link;
        uint64_t start, end;
        size_t limit, charged; /* bytes of memory allowed, used */
} OutBuf;

void agent_outbuf_init(OutBuf *b, size_t limit);
void agent_outbuf_done(OutBuf *b);
/* Appends n <= PROTO_DATA_CHUNK bytes, dropping the oldest beyond the limit. */
int agent_outbuf_append(OutBuf *b, bool err, const void *p, size_t n);
/* The contiguous bytes from pos (start <= pos < end) of one stream: their count (0 if none). */
size_t agent_outbuf_peek(const OutBuf *b, uint64_t pos, bool *ret_err, const char **ret_data);

typedef enum SourceKind {
        SOURCE_LISTEN,
        SOURCE_SIGNAL,
        SOURCE_CONN,
        SOURCE_PROC_OUT,
        SOURCE_PROC_ERR,
        SOURCE_PROC_IN,
        SOURCE_WATCH,
} SourceKind;

/* An fd in the epoll set; events == 0 means not registered. */
typedef struct Source {
        SourceKind kind;
        void *obj;
        int fd;
        uint32_t events;
} Source;

typedef enum StreamKind {
        STREAM_EXEC,       /* bound to a process (by EXEC or ATTACH) */
        STREAM_FILE_READ,  /* FILE_READ being streamed out */
        STREAM_FILE_WRITE, /* FILE_WRITE waiting for DATA / DATA_END */
        STREAM_WATCH,      /* FILE_WATCH: events until the connection closes */
} StreamKind;

typedef struct Stream {
        uint32_t id;
        StreamKind kind;
        bool owner;  /* the EXEC stream of a foreground process: closing it kills the process */
        bool output; /* receives STDOUT/STDERR/EXIT */
        Proc *proc;
        uint64_t cursor;        /* output: the next offset to send */
        uint64_t progress_msec; /* output: when it last took something */
        FileJob *job;
        Watch *watch;
} Stream;

struct Conn {
        Source src;
        ProtoReader reader;
        char *out;                       /* queued frames: out[out_head..out_tail) */
        size_t out_head, out_tail, out_alloc;
        char *in_stash;                  /* read bytes not yet processed (input stopped mid-buffer) */
        size_t in_stash_len;
        Stream *streams;
        size_t n_streams, streams_alloc;
        unsigned id;
        bool dead;
        Conn *next;
};

struct Agent {
        int epoll_fd;
        Source listen_src;
        Source signal_src;
        bool pid1;
        bool single; /* serving one inherited connection, no listener */
        bool vm;     /* /init of a microVM (agent-vm.c) */
        Conn *conns;
        unsigned n_conns, next_conn_id;
        Proc *procs;
        unsigned n_procs;                /* not finished */
        unsigned n_kept;                 /* finished, kept for readers */
        uint64_t next_exec_id;
        char boot_tag[7];                /* random, in every exec id of this agent */
        bool quit;
};

/* agent.c */
int agent_source_set(Agent *a, Source *s, uint32_t events);
void agent_source_close(Agent *a, Source *s);
uint64_t agent_now_msec(void);

/* agent-conn.c */
int agent_conn_new(Agent *a, int fd);
void agent_conn_event(Agent *a, Conn *c, uint32_t events);
void agent_conn_close(Agent *a, Conn *c);
void agent_conns_service(Agent *a); /* once per loop turn: pump, flush, resume, collect */
bool agent_conn_congested(const Conn *c);  /* >= AGENT_OUT_HIGH queued */
size_t agent_conn_queued(const Conn *c);
int agent_conn_send(Conn *c, ProtoType type, uint32_t stream, const void *p, size_t n);
int agent_conn_send_json(Conn *c, ProtoType type, uint32_t stream, JsonWriter *w); /* finishes w */
int agent_conn_send_empty_result(Conn *c, uint32_t stream);
/* ERROR {"errno","code","message"}; returns 0 (or -ENOMEM). */
int agent_conn_send_error(Conn *c, uint32_t stream, int err, const char *fmt, ...) _printf_(4, 5);
Stream *agent_conn_stream(Conn *c, uint32_t id);
int agent_conn_stream_add(Conn *c, uint32_t id, StreamKind kind, Stream **ret);
void agent_conn_stream_remove(Conn *c, uint32_t id);

/* agent-exec.c */
void agent_exec_request(Agent *a, Conn *c, uint32_t stream, const JsonValue *req);
void agent_exec_control(Agent *a, Conn *c, ProtoType type, uint32_t stream, const JsonValue *req);
void agent_exec_stdin(Agent *a, Conn *c, ProtoType type, uint32_t stream, const void *p, size_t n);
void agent_proc_event(Agent *a, Source *s, uint32_t events);
void agent_proc_reaped(Agent *a, pid_t pid, int status);
void agent_proc_stream_closed(Agent *a, Stream *s); /* the connection of s goes away */
/* Sends buffered output to an output stream while c is not congested; false once
 * the stream is done (EXIT sent) and was removed. */
bool agent_proc_pump(Agent *a, Conn *c, Stream *s);
bool agent_proc_stdin_full(const Proc *p);
void agent_procs_service(Agent *a, uint64_t now_msec, uint64_t *next_msec); /* timeouts, drains, resumes */
void agent_procs_kill_all(Agent *a);
void agent_procs_free_all(Agent *a);

/* agent-file-io.c */
void agent_file_read_request(Agent *a, Conn *c, uint32_t stream, const JsonValue *req);
void agent_file_write_request(Agent *a, Conn *c, uint32_t stream, const JsonValue *req);
void agent_file_data(Agent *a, Conn *c, ProtoType type, uint32_t stream, const void *p, size_t n);
/* Produces DATA for a FILE_READ stream until the connection is congested; true if more remains. */
bool agent_file_pump(Agent *a, Conn *c, Stream *s);
void agent_file_job_free(FileJob *j); /* aborts: a pending write removes its temporary file */

/* agent-file-ops.c */
void agent_file_op_request(Agent *a, Conn *c, ProtoType type, uint32_t stream, const JsonValue *req);
/* Makes a request path absolute: relative paths are relative to user's home (root's by default). */
int agent_path_resolve(const char *path, const char *user, char **ret);
/* mkdir -p; new directories get mode (exactly) and, unless -1, uid/gid. *ret_created: the last one was made. */
int agent_mkdir_p(const char *path, mode_t mode, uid_t uid, gid_t gid, bool *ret_created);

/* agent-watch.c */
void agent_watch_request(Agent *a, Conn *c, uint32_t stream, const JsonValue *req);
void agent_watch_event(Agent *a, Watch *w, uint32_t events);
/* Stops a watch whose stream goes away; the memory is released by agent_watch_collect(). */
void agent_watch_stop(Agent *a, Watch *w);
/* Frees stopped watches (once per loop turn, when no epoll event can name them any more). */
void agent_watch_collect(void);

/* agent-vm.c: the agent as /init of a microVM (the vm runtime). */
bool agent_vm_is_init(const char *argv0);
/* Loads modules, mounts the sandbox's disk as root, settings; *ret_listen_path: where to listen. */
int agent_vm_boot(const char **ret_listen_path);
/* eth0 with address/31 and the default route via gateway (again, after a restore). */
int agent_vm_net_configure(const char *address, const char *gateway, const char *mac);
/* /etc/resolv.conf of the root disk. */
int agent_vm_write_resolv(const char *text);
/* Starts the thread that serves the host's connections over virtio-serial. */
int agent_vm_start_mux(void);

/* agent-vm-restore.c: RESTORED (vm only): after a restore from saved memory
 * the host says who the guest is now; the agent re-seeds the kernel's RNG,
 * steps the clock, and takes the hostname, machine-id and environment. */
void agent_vm_restored(Agent *a, Conn *c, uint32_t stream, const JsonValue *req);
/* SYNC (vm only): sync() before the host copies the disk without the memory. */
void agent_vm_sync(Agent *a, Conn *c, uint32_t stream);
