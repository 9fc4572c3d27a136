/* SPDX-License-Identifier: MIT */
/* Connections: frame input, the bounded output queue, stream bindings and the
 * dispatch of requests to the exec and file modules. */
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>

#include "agent.h"
#include "alloc-util.h"
#include "space-build.h"
#include "fd-util.h"
#include "log.h"
#include "proto-msg.h"

#define CONN_READ_SIZE (64U * 1024U)
#define CONN_OUT_KEEP (4U * 1024U) /* an empty output buffer up to this size is kept */
#define CONN_ERRBUF 256

size_t agent_conn_queued(const Conn *c) {
        return c->out_tail - c->out_head;
}

bool agent_conn_congested(const Conn *c) {
        return agent_conn_queued(c) >= AGENT_OUT_HIGH;
}

int agent_conn_send(Conn *c, ProtoType type, uint32_t stream, const void *p, size_t n) {
        size_t need;

        if (c->dead)
                return 0;
        if (n > PROTO_PAYLOAD_MAX)
                return -EMSGSIZE;
        need = PROTO_HEADER_SIZE + n;
        if (c->out_head == c->out_tail)
                c->out_head = c->out_tail = 0;
        if (c->out_tail + need > c->out_alloc) {
                size_t queued = agent_conn_queued(c), want;
                char *b;

                if (c->out_head > 0) {
                        memmove(c->out, c->out + c->out_head, queued);
                        c->out_head = 0;
                        c->out_tail = queued;
                }
                if (c->out_tail + need > c->out_alloc) {
                        want = MAX(MAX(c->out_alloc * 2, c->out_tail + need), (size_t) CONN_OUT_KEEP);
                        b = realloc(c->out, want);
                        if (!b)
                                return -ENOMEM;
                        c->out = b;
                        c->out_alloc = want;
                }
        }
        proto_header_encode((uint8_t *) c->out + c->out_tail, type, stream, (uint32_t) n);
        if (n > 0)
                memcpy(c->out + c->out_tail + PROTO_HEADER_SIZE, p, n);
        c->out_tail += need;
        return 0;
}

int agent_conn_send_json(Conn *c, ProtoType type, uint32_t stream, JsonWriter *w) {
        _cleanup_free_ char *s = NULL;
        size_t n = 0;
        int r;

        r = json_w_finish(w, &s, &n);
        if (r < 0)
                return agent_conn_send_error(c, stream, r, "Failed to build the reply");
        if (n > PROTO_PAYLOAD_MAX)
                return agent_conn_send_error(c, stream, EMSGSIZE, "Reply too large");
        return agent_conn_send(c, type, stream, s, n);
}

int agent_conn_send_empty_result(Conn *c, uint32_t stream) {
        return agent_conn_send(c, PROTO_RESULT, stream, "{}", 2);
}

int agent_conn_send_error(Conn *c, uint32_t stream, int err, const char *fmt, ...) {
        _cleanup_free_ char *json = NULL;
        char msg[1024];
        va_list ap;
        int r;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        r = proto_error_json(err, msg, &json);
        if (r < 0)
                return r;
        return agent_conn_send(c, PROTO_ERROR, stream, json, strlen(json));
}

Stream *agent_conn_stream(Conn *c, uint32_t id) {
        for (size_t i = 0; i < c->n_streams; i++)
                if (c->streams[i].id == id)
                        return &c->streams[i];
        return NULL;
}

int agent_conn_stream_add(Conn *c, uint32_t id, StreamKind kind, Stream **ret) {
        if (agent_conn_stream(c, id))
                return -EBUSY;
        if (c->n_streams >= AGENT_STREAMS_MAX)
                return -EMFILE;
        if (GREEDY_REALLOC(c->streams, c->streams_alloc, c->n_streams + 1) < 0)
                return -ENOMEM;
        c->streams[c->n_streams] = (Stream){ .id = id, .kind = kind };
        *ret = &c->streams[c->n_streams++];
        return 0;
}

void agent_conn_stream_remove(Conn *c, uint32_t id) {
        Stream *s = agent_conn_stream(c, id);

        if (!s)
                return;
        *s = c->streams[--c->n_streams];
        if (c->n_streams == 0) {
                c->streams = mfree(c->streams);
                c->streams_alloc = 0;
        }
}

/* Input is taken while the peer is not behind on our output and no process it
 * feeds has a full stdin buffer. */
static bool conn_can_process(const Conn *c) {
        if (c->dead || agent_conn_congested(c))
                return false;
        for (size_t i = 0; i < c->n_streams; i++)
                if (c->streams[i].kind == STREAM_EXEC && agent_proc_stdin_full(c->streams[i].proc))
                        return false;
        return true;
}

static void conn_dispatch(Agent *a, Conn *c, ProtoFrame *f) {
        _cleanup_json_ JsonValue *v = NULL;
        char errbuf[CONN_ERRBUF] = "";
        int r;

        if (proto_type_is_json(f->type)) {
                if (f->len > PROTO_JSON_MAX) {
                        agent_conn_send_error(c, f->stream, E2BIG, "%s payload of %u bytes exceeds %u bytes",
                                              proto_type_to_string(f->type), f->len, PROTO_JSON_MAX);
                        return;
                }
                if (f->len > 0) {
                        r = json_parse(f->payload, f->len, &v, errbuf, sizeof errbuf);
                        if (r < 0) {
                                agent_conn_send_error(c, f->stream, r == -ENOMEM ? ENOMEM : r == -E2BIG ? E2BIG : EINVAL,
                                                      "Bad JSON in %s: %s", proto_type_to_string(f->type),
                                                      errbuf[0] ? errbuf : strerror(-r));
                                return;
                        }
                        if (json_type(v) != JSON_OBJECT) {
                                agent_conn_send_error(c, f->stream, EINVAL, "%s payload must be a JSON object",
                                                      proto_type_to_string(f->type));
                                return;
                        }
                }
        } else if ((f->type == PROTO_STDIN_EOF || f->type == PROTO_DATA_END) && f->len > 0) {
                agent_conn_send_error(c, f->stream, EINVAL, "%s carries no payload", proto_type_to_string(f->type));
                return;
        }

        switch (f->type) {
        case PROTO_PING:
                agent_conn_send(c, PROTO_PONG, f->stream, "{}", 2);
                break;
        case PROTO_EXEC:
                agent_exec_request(a, c, f->stream, v);
                break;
        case PROTO_STDIN:
        case PROTO_STDIN_EOF:
                agent_exec_stdin(a, c, f->type, f->stream, f->payload, f->len);
                break;
        case PROTO_SIGNAL:
        case PROTO_RESIZE:
        case PROTO_ATTACH:
        case PROTO_PS:
                agent_exec_control(a, c, f->type, f->stream, v);
                break;
        case PROTO_FILE_READ:
                agent_file_read_request(a, c, f->stream, v);
                break;
        case PROTO_FILE_WRITE:
                agent_file_write_request(a, c, f->stream, v);
                break;
        case PROTO_FILE_LIST:
        case PROTO_FILE_STAT:
        case PROTO_FILE_MKDIR:
        case PROTO_FILE_REMOVE:
        case PROTO_FILE_RENAME:
                agent_file_op_request(a, c, f->type, f->stream, v);
                break;
        case PROTO_FILE_WATCH:
                agent_watch_request(a, c, f->stream, v);
                break;
        case PROTO_RESTORED:
                agent_vm_restored(a, c, f->stream, v);
                break;
        case PROTO_SYNC:
                agent_vm_sync(a, c, f->stream);
                break;
        case PROTO_DATA:
        case PROTO_DATA_END:
                agent_file_data(a, c, f->type, f->stream, f->payload, f->len);
                break;
        default:
                agent_conn_send_error(c, f->stream, EINVAL, "%s is not a request",
                                      strna(proto_type_to_string(f->type)));
        }
}

static int conn_flush(Conn *c) {
        while (c->out_head < c->out_tail) {
                ssize_t k = write(c->src.fd, c->out + c->out_head, c->out_tail - c->out_head);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return negative_errno();
                }
                c->out_head += (size_t) k;
        }
        c->out_head = c->out_tail = 0;
        if (c->out_alloc > CONN_OUT_KEEP) {
                c->out = mfree(c->out);
                c->out_alloc = 0;
        }
        return 0;
}

/* A broken frame: say why (on the stream of the header, if any), then drop the connection. */
static void conn_bad_frame(Agent *a, Conn *c, int err) {
        const uint8_t *h = c->reader.header;
        uint32_t stream = (uint32_t) h[8] | ((uint32_t) h[9] << 8) | ((uint32_t) h[10] << 16) | ((uint32_t) h[11] << 24);

        if (err == -EMSGSIZE)
                agent_conn_send_error(c, stream, EMSGSIZE, "Frame payload exceeds %u bytes, closing", PROTO_PAYLOAD_MAX);
        else if (err == -ENOMEM)
                agent_conn_send_error(c, stream, ENOMEM, "Out of memory, closing");
        else
                agent_conn_send_error(c, stream, EBADMSG, "Bad frame header (unknown type or flags), closing");
        (void) conn_flush(c); /* best effort: a peer that does not read gets nothing */
        log_debug("connection %u: bad frame: %s", c->id, strerror(-err));
        agent_conn_close(a, c);
}

/* Feeds bytes to the reader and dispatches whole frames; what cannot be taken
 * now (input stopped) is stashed for later. */
static void conn_process(Agent *a, Conn *c, const char *p, size_t n) {
        while (n > 0 && !c->dead) {
                ProtoFrame f = {};
                size_t used = 0;
                int r;

                if (!conn_can_process(c)) {
                        c->in_stash = memdup(p, n);
                        if (!c->in_stash) {
                                agent_conn_close(a, c);
                                return;
                        }
                        c->in_stash_len = n;
                        return;
                }
                r = proto_reader_feed(&c->reader, p, n, &used, &f);
                p += used;
                n -= used;
                if (r < 0) {
                        conn_bad_frame(a, c, r);
                        return;
                }
                if (r > 0) {
                        conn_dispatch(a, c, &f);
                        proto_frame_done(&f);
                }
        }
}

static void conn_read(Agent *a, Conn *c) {
        static char buf[CONN_READ_SIZE];
        ssize_t k;

        if (c->in_stash || !conn_can_process(c))
                return;
        do
                k = read(c->src.fd, buf, sizeof buf);
        while (k < 0 && errno == EINTR);
        if (k < 0 && errno == EAGAIN)
                return;
        if (k <= 0) {
                if (k < 0)
                        log_debug_errno(errno, "connection %u: read failed: %m", c->id);
                agent_conn_close(a, c);
                return;
        }
        conn_process(a, c, buf, (size_t) k);
}

void agent_conn_event(Agent *a, Conn *c, uint32_t events) {
        if (c->dead)
                return;
        if (events & EPOLLOUT) {
                if (conn_flush(c) < 0) {
                        agent_conn_close(a, c);
                        return;
                }
        }
        if (events & EPOLLIN)
                conn_read(a, c);
        else if (events & (EPOLLERR | EPOLLHUP))
                agent_conn_close(a, c);
}

int agent_conn_new(Agent *a, int fd) {
        JsonWriter w;
        Conn *c;

        c = new0(Conn, 1);
        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        c->src = (Source){ .kind = SOURCE_CONN, .obj = c, .fd = fd };
        c->id = ++a->next_conn_id;
        proto_reader_init(&c->reader);
        c->next = a->conns;
        a->conns = c;
        a->n_conns++;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "version", PROTO_VERSION);
        json_w_kv_string(&w, "agent", "space-agent " SPACE_VERSION);
        json_w_kv_int(&w, "pid", getpid());
        json_w_object_end(&w);
        (void) agent_conn_send_json(c, PROTO_HELLO, 0, &w);
        log_debug("connection %u accepted", c->id);
        return agent_source_set(a, &c->src, EPOLLIN | EPOLLOUT);
}

void agent_conn_close(Agent *a, Conn *c) {
        if (c->dead)
                return;
        c->dead = true;
        /* Streams go first: an owned foreground process is killed, uploads are aborted. */
        for (size_t i = 0; i < c->n_streams; i++) {
                Stream *s = &c->streams[i];
                if (s->kind == STREAM_EXEC)
                        agent_proc_stream_closed(a, s);
                else if (s->kind == STREAM_WATCH)
                        agent_watch_stop(a, s->watch);
                else
                        agent_file_job_free(s->job);
        }
        c->streams = mfree(c->streams);
        c->n_streams = c->streams_alloc = 0;
        agent_source_close(a, &c->src);
        c->out = mfree(c->out);
        c->out_head = c->out_tail = c->out_alloc = 0;
        c->in_stash = mfree(c->in_stash);
        c->in_stash_len = 0;
        proto_reader_done(&c->reader);
        log_debug("connection %u closed", c->id);
}

static void conn_pump_files(Agent *a, Conn *c) {
        for (size_t i = 0; i < c->n_streams && !c->dead && !agent_conn_congested(c);) {
                Stream *s = &c->streams[i];
                if (s->kind != STREAM_FILE_READ || agent_file_pump(a, c, s)) {
                        i++;
                        continue;
                }
                agent_file_job_free(s->job);
                agent_conn_stream_remove(c, s->id); /* the last stream moved to i */
        }
}

static void conn_pump_execs(Agent *a, Conn *c) {
        for (size_t i = 0; i < c->n_streams && !c->dead && !agent_conn_congested(c);) {
                Stream *s = &c->streams[i];
                if (s->kind != STREAM_EXEC || !s->output || agent_proc_pump(a, c, s)) {
                        i++;
                        continue;
                }
                agent_conn_stream_remove(c, s->id); /* EXIT sent; the last stream moved to i */
        }
}

static bool conn_has_reads(const Conn *c) {
        for (size_t i = 0; i < c->n_streams; i++)
                if (c->streams[i].kind == STREAM_FILE_READ)
                        return true;
        return false;
}

void agent_conns_service(Agent *a) {
        agent_watch_collect(); /* watches stopped on an earlier turn */
        for (Conn *c = a->conns; c; c = c->next) {
                if (c->dead)
                        continue;
                if (c->in_stash && conn_can_process(c)) {
                        _cleanup_free_ char *stash = TAKE_PTR(c->in_stash);
                        size_t n = c->in_stash_len;
                        c->in_stash_len = 0;
                        conn_process(a, c, stash, n);
                }
                if (!c->dead)
                        conn_pump_execs(a, c);
                if (!c->dead)
                        conn_pump_files(a, c);
                if (!c->dead && conn_flush(c) < 0)
                        agent_conn_close(a, c);
        }

        for (Conn **pp = &a->conns; *pp;) {
                Conn *c = *pp;
                uint32_t want = 0;

                if (c->dead) {
                        *pp = c->next;
                        a->n_conns--;
                        free(c);
                        continue;
                }
                if (!c->in_stash && conn_can_process(c))
                        want |= EPOLLIN;
                if (agent_conn_queued(c) > 0 || (conn_has_reads(c) && !agent_conn_congested(c)))
                        want |= EPOLLOUT;
                if (agent_source_set(a, &c->src, want) < 0)
                        agent_conn_close(a, c); /* collected on the next turn */
                pp = &c->next;
        }
}
