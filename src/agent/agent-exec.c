/* SPDX-License-Identifier: MIT */
/* Processes: EXEC, their output and exit, STDIN, SIGNAL, RESIZE, ATTACH and PS. */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "agent-image.h"
#include "agent-pty.h"
#include "agent-spawn.h"
#include "agent-user.h"
#include "agent.h"
#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "proto-msg.h"
#include "str-util.h"

#define PROC_DRAIN_READS_MAX 16U     /* chunks read at the drain deadline before giving up on the pipes */
#define PS_ARGV_BYTES_MAX 4096U      /* argv bytes per process in a PS reply */
#define EXEC_ERRBUF 1024
#define AGENT_OOM_RECHECK_MSEC 20

extern char **environ;

struct Proc {
        char exec_id[32];
        pid_t pid;
        char **argv;
        bool pty, background;
        Source out, err, in;
        char *in_buf; /* pending stdin: in_buf[in_head..in_len) */
        size_t in_head, in_len, in_alloc;
        bool had_stdin, in_eof;
        bool paused;
        bool exited, timed_out, finished;
        int status;
        uint64_t deadline_msec;       /* timeout; 0 = none */
        uint64_t drain_deadline_msec; /* after exit */
        OutBuf buf;                   /* output for its readers */
        uint64_t stall_ms;            /* a reader idle this long no longer holds it up */
        uint64_t keep_ms, finished_msec;
        ProtoDisconnect on_disconnect;
        uint64_t oom_base;
        bool have_oom_base;
        uint64_t own_oom_base; /* the sandbox's OOM count when the exec started (own_oom_kills) */
        bool have_own_oom_base;
        char *exit_json;              /* once finished: the EXIT payload */
        size_t exit_len;
        Proc *next;
};

bool agent_proc_stdin_full(const Proc *p) {
        return p && p->in_len - p->in_head >= AGENT_STDIN_BUF_MAX;
}

static void kv_uint(JsonWriter *w, const char *key, uint64_t v) {
        json_w_key(w, key);
        json_w_uint(w, v);
}

/* A process by id, finished ones (kept for their readers) included. */
static Proc *proc_by_id(Agent *a, const char *exec_id) {
        for (Proc *p = a->procs; p; p = p->next)
                if (streq(p->exec_id, exec_id))
                        return p;
        return NULL;
}

static Proc *proc_by_pid(Agent *a, pid_t pid) {
        for (Proc *p = a->procs; p; p = p->next)
                if (!p->exited && p->pid == pid)
                        return p;
        return NULL;
}

static void proc_free(Agent *a, Proc *p) {
        agent_source_close(a, &p->out);
        agent_source_close(a, &p->err);
        agent_source_close(a, &p->in);
        strv_free(p->argv);
        free(p->in_buf);
        free(p->exit_json);
        agent_outbuf_done(&p->buf);
        free(p);
}

/* True while a reader that keeps taking output is a quarter of the buffer
 * behind: then the pipes wait rather than the buffer dropping what it did not
 * read. A reader idle for stall_ms does not hold the process up. */
static bool proc_held(Agent *a, Proc *p, uint64_t now, uint64_t *next) {
        bool held = false;

        for (Conn *c = a->conns; c; c = c->next)
                for (size_t i = 0; !c->dead && i < c->n_streams; i++) {
                        Stream *s = &c->streams[i];
                        if (s->kind != STREAM_EXEC || s->proc != p || !s->output ||
                            p->buf.end - s->cursor < p->buf.limit / 4 || now >= s->progress_msec + p->stall_ms)
                                continue;
                        held = true;
                        if (next)
                                *next = MIN(*next, s->progress_msec + p->stall_ms);
                }
        return held;
}

static void proc_set_paused(Agent *a, Proc *p, bool paused) {
        p->paused = paused;
        (void) agent_source_set(a, &p->out, paused ? 0 : EPOLLIN);
        (void) agent_source_set(a, &p->err, paused ? 0 : EPOLLIN);
}

static bool proc_has_readers(Agent *a, Proc *p) {
        for (Conn *c = a->conns; c; c = c->next)
                for (size_t i = 0; !c->dead && i < c->n_streams; i++)
                        if (c->streams[i].kind == STREAM_EXEC && c->streams[i].proc == p && c->streams[i].output)
                                return true;
        return false;
}

/* Unbinds the streams of p (only those without output, unless all); a reader
 * still waiting for output is told the exec is gone. */
static void proc_unbind(Agent *a, Proc *p, bool all) {
        for (Conn *c = a->conns; c; c = c->next)
                for (size_t i = 0; i < c->n_streams;) {
                        Stream *s = &c->streams[i];
                        if (s->kind == STREAM_EXEC && s->proc == p && (all || !s->output)) {
                                if (s->output)
                                        (void) agent_conn_send_error(c, s->id, ESRCH,
                                                                     "exec %s is no longer kept", p->exec_id);
                                agent_conn_stream_remove(c, s->id);
                        } else
                                i++;
                }
}


/* How many processes the kernel's OOM killer ended in this sandbox so far,
 * from its own cgroup as it sees it read-only at /sys/fs/cgroup (cgroup v2's
 * memory.events, v1's memory.oom_control): -ENOENT where there is none (a
 * vm guest). Read by the agent itself, so an exec never waits on the worker. */
static int own_oom_kills(uint64_t *ret) {
        static const char *const files[] = { "/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control" };

        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                char buf[512];
                const char *at;
                ssize_t n;
                int fd = open(files[i], O_RDONLY | O_CLOEXEC | O_NOCTTY);

                if (fd < 0)
                        continue;
                n = read(fd, buf, sizeof buf - 1);
                close(fd);
                if (n <= 0)
                        continue;
                buf[n] = 0;
                at = strstr(buf, "oom_kill ");
                if (!at || (at != buf && at[-1] != '\n'))
                        continue;
                *ret = strtoull(at + strlen("oom_kill "), NULL, 10);
                return 0;
        }
        return -ENOENT;
}

/* A SIGKILL while the sandbox's OOM count grew past what it was when the exec
 * started was the kernel's OOM killer (a heuristic where several processes
 * die at once: another process's OOM kill during the exec makes a plain
 * SIGKILL of this one look like one too). */
static bool exit_was_oom(const Proc *p, int sig) {
        uint64_t now;

        if (sig != SIGKILL || !p->have_own_oom_base)
                return false;
        for (int i = 0; i < 2; i++) {
                if (own_oom_kills(&now) < 0)
                        return false;
                if (now > p->own_oom_base)
                        return true;
                /* the killer counts just after it sent the SIGKILL: a victim on another CPU can
                 * die first (one short second look, only for a plain SIGKILL) */
                if (i == 0)
                        (void) poll(NULL, 0, AGENT_OOM_RECHECK_MSEC);
        }
        return false;
}

static void proc_finish(Agent *a, Proc *p) {
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        if (WIFSIGNALED(p->status)) {
                int sig = WTERMSIG(p->status);
                char name[16];
                const char *s = proto_signal_to_string(sig);
                if (!s) {
                        snprintf(name, sizeof name, "SIG%d", sig);
                        s = name;
                }
                json_w_kv_string(&w, "signal", s);
                json_w_kv_int(&w, "code", 128 + sig);
                json_w_kv_string(&w, "reason", p->timed_out ? "timeout" : exit_was_oom(p, sig) ? "oom" : "killed");
        } else
                json_w_kv_int(&w, "code", WIFEXITED(p->status) ? WEXITSTATUS(p->status) : 255);
        if (p->have_oom_base)
                kv_uint(&w, "oom_base", p->oom_base);
        json_w_object_end(&w);
        if (json_w_finish(&w, &p->exit_json, &p->exit_len) < 0) {
                p->exit_json = strdup("{\"code\":255}");
                p->exit_len = p->exit_json ? strlen(p->exit_json) : 0;
        }

        log_debug("exec %s (pid %d) finished, status 0x%x", p->exec_id, (int) p->pid, (unsigned) p->status);
        proc_unbind(a, p, false);
        agent_source_close(a, &p->out);
        agent_source_close(a, &p->err);
        agent_source_close(a, &p->in);
        /* kept for its readers: the EXIT goes out once they read the buffer (agent_proc_pump) */
        p->finished = true;
        p->finished_msec = agent_now_msec();
        a->n_procs--;
        a->n_kept++;
}

static void proc_check_finished(Agent *a, Proc *p) {
        if (p->exited && !p->finished && p->out.fd < 0 && p->err.fd < 0)
                proc_finish(a, p);
}

/* Reads one chunk; returns bytes read, 0 at EOF (source closed), -EAGAIN if none. */
static ssize_t proc_read(Agent *a, Proc *p, Source *s) {
        static char buf[PROTO_DATA_CHUNK];
        ssize_t k;

        do
                k = read(s->fd, buf, sizeof buf);
        while (k < 0 && errno == EINTR);
        if (k < 0 && errno == EAGAIN)
                return -EAGAIN;
        if (k <= 0) { /* EOF, or EIO from a pty master once every slave is closed */
                agent_source_close(a, s);
                return 0;
        }
        if (agent_outbuf_append(&p->buf, s->kind == SOURCE_PROC_ERR, buf, (size_t) k) < 0)
                log_debug("exec %s: out of memory, %zd bytes of output lost", p->exec_id, k);
        return k;
}

static void proc_stdin_close(Agent *a, Proc *p) {
        agent_source_close(a, &p->in);
        p->in_buf = mfree(p->in_buf);
        p->in_head = p->in_len = p->in_alloc = 0;
}

static void proc_stdin_flush(Agent *a, Proc *p) {
        while (p->in.fd >= 0 && p->in_head < p->in_len) {
                ssize_t k = write(p->in.fd, p->in_buf + p->in_head, p->in_len - p->in_head);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        proc_stdin_close(a, p); /* EPIPE: the process closed its stdin */
                        return;
                }
                p->in_head += (size_t) k;
        }
        if (p->in.fd < 0)
                return;
        if (p->in_head == p->in_len) {
                p->in_head = p->in_len = 0;
                if (p->in_alloc > PROTO_DATA_CHUNK) {
                        p->in_buf = mfree(p->in_buf);
                        p->in_alloc = 0;
                }
                if (p->in_eof && !p->pty) {
                        proc_stdin_close(a, p);
                        return;
                }
        }
        (void) agent_source_set(a, &p->in, p->in_head < p->in_len ? EPOLLOUT : 0);
}

static int proc_stdin_append(Proc *p, const void *data, size_t n) {
        if (n == 0)
                return 0;
        if (p->in_head > 0 && p->in_head == p->in_len)
                p->in_head = p->in_len = 0;
        if (p->in_len + n > p->in_alloc && p->in_head > 0) {
                memmove(p->in_buf, p->in_buf + p->in_head, p->in_len - p->in_head);
                p->in_len -= p->in_head;
                p->in_head = 0;
        }
        if (GREEDY_REALLOC(p->in_buf, p->in_alloc, p->in_len + n) < 0)
                return -ENOMEM;
        memcpy(p->in_buf + p->in_len, data, n);
        p->in_len += n;
        return 0;
}

void agent_proc_event(Agent *a, Source *s, uint32_t events) {
        Proc *p = s->obj;

        if (s->fd < 0 || p->finished)
                return;
        if (s->kind == SOURCE_PROC_IN) {
                if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLOUT))
                        proc_stdin_close(a, p);
                else
                        proc_stdin_flush(a, p);
                return;
        }
        if (proc_read(a, p, s) > 0 && proc_held(a, p, agent_now_msec(), NULL))
                proc_set_paused(a, p, true);
        proc_check_finished(a, p);
}

void agent_proc_reaped(Agent *a, pid_t pid, int status) {
        Proc *p = proc_by_pid(a, pid);

        if (!p)
                return; /* an orphan we inherited as PID 1, or a child reaped earlier */
        p->exited = true;
        p->status = status;
        p->deadline_msec = 0;
        p->drain_deadline_msec = agent_now_msec() + AGENT_EXIT_DRAIN_MSEC;
        proc_check_finished(a, p);
}

static int proc_kill(Proc *p, int sig) {
        if (kill(-p->pid, sig) >= 0)
                return 0;
        if (errno == ESRCH && kill(p->pid, sig) >= 0)
                return 0;
        return negative_errno();
}

void agent_proc_stream_closed(Agent *a, Stream *s) {
        Proc *p = s->proc;

        if (!s->owner || !p || p->background || p->exited || p->on_disconnect == PROTO_DISCONNECT_KEEP)
                return;
        log_debug("exec %s: connection closed, %s process group %d", p->exec_id,
                  p->on_disconnect == PROTO_DISCONNECT_KILL ? "killing" : "hanging up", (int) p->pid);
        (void) proc_kill(p, p->on_disconnect == PROTO_DISCONNECT_KILL ? SIGKILL : SIGHUP);
}

static int send_dropped(Conn *c, uint32_t stream, uint64_t bytes) {
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        kv_uint(&w, "bytes", bytes);
        json_w_object_end(&w);
        return agent_conn_send_json(c, PROTO_DROPPED, stream, &w);
}

bool agent_proc_pump(Agent *a, Conn *c, Stream *s) {
        Proc *p = s->proc;
        uint64_t now = agent_now_msec();

        while (!c->dead && !agent_conn_congested(c)) {
                const char *data;
                size_t n;
                bool err;

                if (s->cursor < p->buf.start) {
                        if (send_dropped(c, s->id, p->buf.start - s->cursor) < 0)
                                break;
                        s->cursor = p->buf.start;
                        s->progress_msec = now;
                        continue;
                }
                n = s->cursor < p->buf.end ? agent_outbuf_peek(&p->buf, s->cursor, &err, &data) : 0;
                if (n > 0) {
                        n = MIN(n, (size_t) PROTO_DATA_CHUNK);
                        if (agent_conn_send(c, err ? PROTO_STDERR : PROTO_STDOUT, s->id, data, n) < 0)
                                break;
                        s->cursor += n;
                        s->progress_msec = now;
                        continue;
                }
                s->progress_msec = now; /* it has everything there is */
                if (p->finished) {
                        (void) agent_conn_send(c, PROTO_EXIT, s->id, p->exit_json, p->exit_len);
                        return false;
                }
                break;
        }
        (void) a;
        return true;
}

/* Once the process exited and AGENT_EXIT_DRAIN_MSEC passed, pipes still held
 * open by its descendants are read out once more and closed, so EXIT is sent. */
static void proc_drain(Agent *a, Proc *p) {
        for (unsigned i = 0; i < PROC_DRAIN_READS_MAX && p->out.fd >= 0; i++)
                if (proc_read(a, p, &p->out) <= 0)
                        break;
        for (unsigned i = 0; i < PROC_DRAIN_READS_MAX && p->err.fd >= 0; i++)
                if (proc_read(a, p, &p->err) <= 0)
                        break;
        agent_source_close(a, &p->out);
        agent_source_close(a, &p->err);
        proc_check_finished(a, p);
}

void agent_procs_service(Agent *a, uint64_t now, uint64_t *next) {
        unsigned kept = 0;

        for (Proc **pp = &a->procs; *pp;) {
                Proc *p = *pp;

                if (p->finished) {
                        /* newest first: beyond AGENT_EXEC_KEPT_MAX, or past keep_ms once no reader
                         * is still on its way to the EXIT (a stalled one is cut by the host), it goes */
                        if (++kept > AGENT_EXEC_KEPT_MAX ||
                            (now >= p->finished_msec + p->keep_ms && !proc_has_readers(a, p))) {
                                proc_unbind(a, p, true);
                                *pp = p->next;
                                a->n_kept--;
                                proc_free(a, p);
                                continue;
                        }
                        /* expired with a reader: look again soon */
                        *next = MIN(*next, now < p->finished_msec + p->keep_ms ? p->finished_msec + p->keep_ms
                                                                               : now + 100);
                        pp = &p->next;
                        continue;
                }
                if (proc_held(a, p, now, next) != p->paused)
                        proc_set_paused(a, p, !p->paused);
                if (!p->exited && p->deadline_msec > 0) {
                        if (now >= p->deadline_msec) {
                                log_debug("exec %s: timeout, killing process group %d", p->exec_id, (int) p->pid);
                                p->timed_out = true;
                                p->deadline_msec = 0;
                                (void) proc_kill(p, SIGKILL);
                        } else
                                *next = MIN(*next, p->deadline_msec);
                }
                if (p->exited && !p->paused) {
                        if (now >= p->drain_deadline_msec)
                                proc_drain(a, p);
                        else
                                *next = MIN(*next, p->drain_deadline_msec);
                }
                if (p->finished)
                        *next = MIN(*next, now + p->keep_ms); /* collect it then */
                pp = &p->next;
        }
}

void agent_procs_kill_all(Agent *a) {
        for (Proc *p = a->procs; p; p = p->next) {
                if (p->exited)
                        continue;
                (void) proc_kill(p, SIGKILL);
                while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
                        ;
                p->exited = true;
        }
}

void agent_procs_free_all(Agent *a) {
        while (a->procs) {
                Proc *p = a->procs;
                a->procs = p->next;
                proc_free(a, p);
        }
        a->n_procs = 0;
        a->n_kept = 0;
}

static void send_started(Conn *c, uint32_t stream, Proc *p, uint64_t offset) {
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "pid", p->pid);
        json_w_kv_string(&w, "exec_id", p->exec_id);
        kv_uint(&w, "offset", offset);
        json_w_kv_bool(&w, "running", !p->finished);
        json_w_object_end(&w);
        (void) agent_conn_send_json(c, PROTO_STARTED, stream, &w);
}

void agent_exec_request(Agent *a, Conn *c, uint32_t stream, const JsonValue *v) {
        _cleanup_(proto_exec_request_done) ProtoExecRequest req = {};
        _cleanup_(agent_user_done) AgentUser user = {};
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_free_ char *cwd = NULL;
        char errbuf[EXEC_ERRBUF] = "";
        Spawned sp;
        Stream *s = NULL;
        Proc *p;
        int r;

        if (agent_conn_stream(c, stream)) {
                agent_conn_send_error(c, stream, EBUSY, "Stream %" PRIu32 " is in use", stream);
                return;
        }
        r = proto_exec_request_parse(v, &req, errbuf, sizeof errbuf);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Bad EXEC request: %s", errbuf[0] ? errbuf : strerror(-r));
                return;
        }
        if (a->n_procs >= AGENT_PROC_MAX) {
                agent_conn_send_error(c, stream, EAGAIN, "Too many processes (%u)", AGENT_PROC_MAX);
                return;
        }
        if (!req.background && c->n_streams >= AGENT_STREAMS_MAX) {
                agent_conn_send_error(c, stream, EMFILE, "Too many streams on this connection");
                return;
        }
        /* a template from an image: its config's user, cwd and env */
        r = agent_image_defaults_apply(AGENT_IMAGE_DEFAULTS_PATH, &req);
        if (r < 0)
                log_debug_errno(r, "Ignoring the image defaults in %s: %m", AGENT_IMAGE_DEFAULTS_PATH);
        if (!req.user && !req.have_uid && geteuid() != 0) {
                /* an unprivileged agent (tests) runs things as itself by default */
                req.have_uid = true;
                req.uid = (uint32_t) geteuid();
        }
        r = agent_user_lookup(req.user, req.have_uid, req.uid, &user);
        if (r < 0) {
                if (req.user)
                        agent_conn_send_error(c, stream, r, "Unknown user '%.256s'", req.user);
                else
                        agent_conn_send_error(c, stream, r, "Failed to look up uid %" PRIu32 ": %s", req.uid,
                                              strerror(-r));
                return;
        }
        r = agent_env_build(environ, user.home, user.name, req.env, req.pty, &env);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Failed to build the environment: %s", strerror(-r));
                return;
        }
        if (req.cwd && req.cwd[0] != '/')
                cwd = strjoin(user.home, streq(user.home, "/") ? "" : "/", req.cwd);
        else
                cwd = strdup(req.cwd ?: user.home);
        if (!cwd) {
                agent_conn_send_error(c, stream, ENOMEM, "Out of memory");
                return;
        }

        SpawnParams params = {
                .argv = req.argv,
                .envp = env,
                .cwd = cwd,
                .cwd_fallback = !req.cwd,
                .uid = user.uid,
                .gid = user.gid,
                .groups = user.groups,
                .n_groups = user.n_groups,
                .stdin_pipe = req.stdin_open,
                .pty = req.pty,
                .rows = req.rows,
                .cols = req.cols,
        };
        p = new0(Proc, 1);
        if (!p) {
                agent_conn_send_error(c, stream, ENOMEM, "Out of memory");
                return;
        }
        r = agent_spawn(&params, &sp, errbuf, sizeof errbuf);
        if (r < 0) {
                free(p);
                agent_conn_send_error(c, stream, r, "%s", errbuf[0] ? errbuf : strerror(-r));
                return;
        }

        /* the boot tag: an id read again after the agent restarted (suspend, restore) names nothing */
        if (!a->boot_tag[0] && random_alnum(a->boot_tag, sizeof a->boot_tag - 1) < 0)
                snprintf(a->boot_tag, sizeof a->boot_tag, "%06x", (unsigned) (agent_now_msec() & 0xffffff));
        snprintf(p->exec_id, sizeof p->exec_id, "e%" PRIu64 "-%s", a->next_exec_id++, a->boot_tag);
        p->pid = sp.pid;
        p->argv = TAKE_PTR(req.argv);
        p->pty = req.pty;
        p->background = req.background;
        p->had_stdin = req.pty || req.stdin_open;
        p->out = (Source){ .kind = SOURCE_PROC_OUT, .obj = p, .fd = sp.stdout_fd };
        p->err = (Source){ .kind = SOURCE_PROC_ERR, .obj = p, .fd = sp.stderr_fd };
        p->in = (Source){ .kind = SOURCE_PROC_IN, .obj = p, .fd = sp.stdin_fd };
        if (req.timeout_ms > 0)
                p->deadline_msec = agent_now_msec() + req.timeout_ms;
        agent_outbuf_init(&p->buf, req.buffer_bytes);
        p->stall_ms = req.stall_ms;
        p->keep_ms = req.keep_ms;
        p->on_disconnect = req.on_disconnect;
        p->oom_base = req.oom_base;
        p->have_oom_base = req.have_oom_base;
        p->have_own_oom_base = own_oom_kills(&p->own_oom_base) >= 0;
        p->next = a->procs;
        a->procs = p;
        a->n_procs++;
        (void) agent_source_set(a, &p->out, EPOLLIN);
        (void) agent_source_set(a, &p->err, EPOLLIN);

        if (!req.background && agent_conn_stream_add(c, stream, STREAM_EXEC, &s) >= 0) {
                s->proc = p;
                s->owner = true;
                s->output = true;
                s->progress_msec = agent_now_msec();
        }
        log_debug("exec %s: started pid %d (%s)", p->exec_id, (int) p->pid, p->argv[0]);
        send_started(c, stream, p, 0);
}

void agent_exec_stdin(Agent *a, Conn *c, ProtoType type, uint32_t stream, const void *data, size_t n) {
        Stream *s = agent_conn_stream(c, stream);
        Proc *p;

        if (!s || s->kind != STREAM_EXEC) {
                agent_conn_send_error(c, stream, EBADF, "No process on stream %" PRIu32, stream);
                return;
        }
        p = s->proc;
        if (p->in.fd < 0) {
                if (!p->had_stdin)
                        agent_conn_send_error(c, stream, EBADF,
                                              "stdin of %s is not open (start it with \"stdin\":true)", p->exec_id);
                else if (p->in_eof)
                        agent_conn_send_error(c, stream, EPIPE, "stdin of %s was closed by STDIN_EOF", p->exec_id);
                /* else: the process closed it or exited, a normal race */
                return;
        }
        if (type == PROTO_STDIN_EOF) {
                if (p->pty) /* a terminal has no EOF of its own: send its EOF character */
                        (void) proc_stdin_append(p, "\x04", 1);
                else
                        p->in_eof = true;
        } else if (proc_stdin_append(p, data, n) < 0) {
                agent_conn_send_error(c, stream, ENOMEM, "Out of memory");
                return;
        }
        proc_stdin_flush(a, p);
}

static void exec_ps(Agent *a, Conn *c, uint32_t stream) {
        JsonWriter w;
        bool truncated = false;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "processes");
        json_w_array_begin(&w);
        for (Proc *p = a->procs; p; p = p->next) {
                _cleanup_free_ char *entry = NULL;
                size_t bytes = 0, n = 0;
                JsonWriter ew;

                if (p->exited)
                        continue;
                json_w_init(&ew);
                json_w_object_begin(&ew);
                json_w_kv_string(&ew, "exec_id", p->exec_id);
                json_w_kv_int(&ew, "pid", p->pid);
                json_w_key(&ew, "argv");
                json_w_array_begin(&ew);
                for (char **arg = p->argv; arg && *arg; arg++) {
                        size_t l = strlen(*arg);
                        if (bytes + l > PS_ARGV_BYTES_MAX) {
                                json_w_string_n(&ew, *arg, PS_ARGV_BYTES_MAX - bytes);
                                break;
                        }
                        json_w_string(&ew, *arg);
                        bytes += l;
                }
                json_w_array_end(&ew);
                json_w_kv_bool(&ew, "pty", p->pty);
                json_w_object_end(&ew);
                /* an entry that does not fit ends the list */
                if (json_w_finish(&ew, &entry, &n) < 0 || w.n + n + 64 > AGENT_RESULT_MAX) {
                        truncated = true;
                        break;
                }
                json_w_raw(&w, entry);
        }
        json_w_array_end(&w);
        if (truncated)
                json_w_kv_bool(&w, "truncated", true);
        json_w_object_end(&w);
        (void) agent_conn_send_json(c, PROTO_RESULT, stream, &w);
}

void agent_exec_control(Agent *a, Conn *c, ProtoType type, uint32_t stream, const JsonValue *v) {
        _cleanup_(proto_control_request_done) ProtoControlRequest req = {};
        char errbuf[EXEC_ERRBUF] = "";
        Stream *s = agent_conn_stream(c, stream);
        bool on_exec_stream = s && s->kind == STREAM_EXEC;
        Proc *p = NULL;
        int r;

        r = proto_control_request_parse(type, v, &req, errbuf, sizeof errbuf);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Bad %s request: %s", proto_type_to_string(type),
                                      errbuf[0] ? errbuf : strerror(-r));
                return;
        }
        if (type == PROTO_PS) {
                exec_ps(a, c, stream);
                return;
        }
        if (type == PROTO_ATTACH) {
                if (s) {
                        agent_conn_send_error(c, stream, EBUSY, "Stream %" PRIu32 " is in use", stream);
                        return;
                }
                p = proc_by_id(a, req.exec_id);
                if (!p || (p->finished && !req.output)) {
                        agent_conn_send_error(c, stream, ESRCH, "No process with exec_id '%.64s'", req.exec_id);
                        return;
                }
                if (req.output && req.have_from && req.from > p->buf.end) {
                        agent_conn_send_error(c, stream, EINVAL, "Offset %" PRIu64 " is past the output of %s (%" PRIu64 " bytes)",
                                              req.from, p->exec_id, p->buf.end);
                        return;
                }
                r = agent_conn_stream_add(c, stream, STREAM_EXEC, &s);
                if (r < 0) {
                        agent_conn_send_error(c, stream, r, "Failed to bind stream %" PRIu32, stream);
                        return;
                }
                s->proc = p;
                s->output = req.output;
                s->cursor = req.have_from ? req.from : p->buf.end;
                s->progress_msec = agent_now_msec();
                send_started(c, stream, p, s->cursor);
                return;
        }

        /* SIGNAL, RESIZE: the process of this stream, or the one named. */
        if (req.exec_id)
                p = proc_by_id(a, req.exec_id);
        else if (on_exec_stream)
                p = s->proc;
        else {
                agent_conn_send_error(c, stream, EINVAL, "%s needs \"exec_id\" or a stream bound to a process",
                                      proto_type_to_string(type));
                return;
        }
        if (!p || p->exited) {
                agent_conn_send_error(c, stream, ESRCH, "The process is not running");
                return;
        }
        if (type == PROTO_SIGNAL)
                r = proc_kill(p, req.signal);
        else if (!p->pty)
                r = -ENOTTY;
        else
                r = agent_pty_resize(p->in.fd, req.rows, req.cols);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "%s of %s failed: %s", proto_type_to_string(type), p->exec_id,
                                      strerror(-r));
                return;
        }
        /* On the exec's own stream success is silent; elsewhere it gets a RESULT. */
        if (!on_exec_stream)
                (void) agent_conn_send_empty_result(c, stream);
}
