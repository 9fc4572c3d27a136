/* SPDX-License-Identifier: MIT */
/* process.Process input: SendInput and CloseStdin (unary), and StreamInput,
 * the client-streaming call: a start event naming the process, then data
 * events (stdin or pty bytes) and keepalives, each relayed to the agent as it
 * arrives. The end of the request does not close the process's stdin
 * (CloseStdin does, as in envd). The reply is a Connect stream: the empty
 * StreamInputResponse, then the end-stream envelope (with the error if any). */

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>

#include "alloc-util.h"
#include "e2b.h"
#include "fd-util.h"
#include "log.h"
#include "proto-msg.h"
#include "str-util.h"

#define E2B_INPUT_CHUNK (64U * 1024U)     /* bytes of one STDIN frame to the agent */
#define E2B_STREAM_READ (64U * 1024U)     /* bytes read from the request at a time */
#define E2B_STREAM_INPUT_MESSAGES_MAX (1U << 24) /* messages of one StreamInput call */

/* Input bytes {"stdin":b64} | {"pty":b64} → (data, n), *ret_pty. */
static int input_decode(const JsonValue *input, void **ret, size_t *ret_len, bool *ret_pty, ApiError *e) {
        const JsonValue *v;

        if (json_type(input) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "input (stdin or pty bytes) is required");
        v = e2b_field(input, "stdin", NULL);
        *ret_pty = !v;
        if (!v)
                v = e2b_field(input, "pty", NULL);
        if (!v)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "input must carry stdin or pty bytes");
        if (e2b_bytes_decode(v, ret, ret_len) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "input bytes must be base64");
        return 0;
}

static int input_send(int fd, const void *data, size_t n, ApiError *e) {
        for (size_t off = 0; off < n;) {
                size_t chunk = MIN(n - off, (size_t) E2B_INPUT_CHUNK);
                int k = proto_send(fd, PROTO_STDIN, AGENT_STREAM, (const char *) data + off, chunk);
                if (k < 0)
                        return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
                off += chunk;
        }
        return 0;
}

static int input_sync(int fd, const E2bProc *p, ApiError *e) {
        int k = e2b_proc_sync(fd, e);
        if (k == -EBADF)
                (void) api_error(e, k, API_INTERNAL, "process %" PRIu32 " has no stdin (start it with stdin)", p->pid);
        return k;
}

int e2b_process_send_input(E2bEnvd *x, ApiError *e) {
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ void *data = NULL;
        bool to_pty = false;
        E2bProc p;
        size_t n = 0;
        int k;

        k = e2b_rpc_read(x, false, &req, e);
        if (k >= 0)
                k = input_decode(e2b_field(req, "input", NULL), &data, &n, &to_pty, e);
        if (k >= 0)
                k = e2b_envd_agent(x, &fd, e);
        if (k >= 0)
                k = e2b_proc_resolve(x, fd, e2b_field(req, "process", NULL), &p, e);
        if (k < 0)
                return k;
        if (to_pty && !p.pty)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process %" PRIu32 " has no pty", p.pid);
        k = e2b_proc_attach(fd, p.exec_id, false, e);
        if (k >= 0)
                k = input_send(fd, data, n, e);
        if (k >= 0)
                k = input_sync(fd, &p, e);
        if (k < 0)
                return k;
        return e2b_proc_empty_reply(x);
}

int e2b_process_close_stdin(E2bEnvd *x, ApiError *e) {
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_close_ int fd = -EBADF;
        E2bProc p;
        int k;

        k = e2b_rpc_read(x, false, &req, e);
        if (k >= 0)
                k = e2b_envd_agent(x, &fd, e);
        if (k >= 0)
                k = e2b_proc_resolve(x, fd, e2b_field(req, "process", NULL), &p, e);
        if (k < 0)
                return k;
        if (p.pty)
                return api_error(e, -EINVAL, API_CONFLICT, "process %" PRIu32 " has a pty, not a stdin to close",
                                 p.pid);
        k = e2b_proc_attach(fd, p.exec_id, false, e);
        if (k < 0)
                return k;
        k = proto_send(fd, PROTO_STDIN_EOF, AGENT_STREAM, NULL, 0);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = e2b_proc_sync(fd, e);
        if (k == -EBADF)
                return api_error(e, k, API_INTERNAL, "process %" PRIu32 " has no stdin", p.pid);
        if (k < 0 && k != -EPIPE) /* closed twice is fine */
                return k;
        return e2b_proc_empty_reply(x);
}

/* ---- StreamInput ---- */

/* The envelopes of a request body as they arrive. */
typedef struct EnvelopeReader {
        char *buf;
        size_t len, allocated, consumed;
        bool eof;
} EnvelopeReader;

static void envelope_reader_done(EnvelopeReader *rd) {
        rd->buf = mfree(rd->buf);
}

/* The next message (valid until the next call): 1, or 0 at the end of the
 * body, or < 0 with e set. */
static int envelope_next(ApiRequest *r, EnvelopeReader *rd, Slice *ret, ApiError *e) {
        if (rd->consumed > 0) {
                memmove(rd->buf, rd->buf + rd->consumed, rd->len - rd->consumed);
                rd->len -= rd->consumed;
                rd->consumed = 0;
        }
        for (;;) {
                uint8_t flags = 0;
                size_t size = 0;
                ssize_t n;
                int k;

                k = e2b_envelope_decode(rd->buf, rd->len, E2B_BODY_MAX, &flags, ret, &size);
                if (k == -EMSGSIZE)
                        return api_error(e, k, API_PAYLOAD_TOO_LARGE, "request messages are limited to %u bytes",
                                         E2B_BODY_MAX);
                if (k < 0 || (k > 0 && flags != 0))
                        return api_error(e, -EBADMSG, API_INVALID_ARGUMENT,
                                         "the request must be uncompressed Connect message envelopes");
                if (k > 0) {
                        rd->consumed = size;
                        return 1;
                }
                if (rd->eof) {
                        if (rd->len > 0)
                                return api_error(e, -EBADMSG, API_INVALID_ARGUMENT,
                                                 "the request ends inside a Connect envelope");
                        return 0;
                }
                if (GREEDY_REALLOC(rd->buf, rd->allocated, rd->len + E2B_STREAM_READ) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                n = http_conn_read_body(r->conn, rd->buf + rd->len, E2B_STREAM_READ);
                if (n < 0)
                        return api_error(e, (int) n, API_BAD_REQUEST, "could not read the request body: %s",
                                         strerror((int) -n));
                if (n == 0)
                        rd->eof = true;
                rd->len += (size_t) n;
        }
}

static int message_parse(Slice msg, JsonValue **ret, ApiError *e) {
        char errbuf[128] = "";
        int k;

        k = msg.n == 0 ? json_parse("{}", 2, ret, NULL, 0) : json_parse(msg.p, msg.n, ret, errbuf, sizeof errbuf);
        if (k == -ENOMEM)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "malformed JSON message: %s",
                                 errbuf[0] ? errbuf : strerror(-k));
        if (json_type(*ret) != JSON_OBJECT) {
                *ret = json_free(*ret);
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the message must be a JSON object");
        }
        return 0;
}

/* An ERROR the agent sent while input was flowing (the process ended, its
 * stdin closed): taken without waiting, so the agent never blocks on us. */
static int agent_check(int fd, const E2bProc *p, ApiError *e) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        int k;

        k = poll(&pfd, 1, 0);
        if (k < 0)
                return api_error(e, -errno, API_INTERNAL, "poll: %s", strerror(errno));
        if (k == 0)
                return 0;
        k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
        if (k < 0)
                return k;
        if (f.type != PROTO_ERROR)
                return 0; /* nothing else is expected; ignored */
        k = agent_call_error(&f, NULL, e);
        if (k == -EBADF)
                (void) api_error(e, k, API_INTERNAL, "process %" PRIu32 " has no stdin (start it with stdin)", p->pid);
        return k;
}

static int stream_input(E2bEnvd *x, ApiError *e) {
        _cleanup_(envelope_reader_done) EnvelopeReader rd = {};
        _cleanup_json_ JsonValue *first = NULL;
        _cleanup_close_ int fd = -EBADF;
        const JsonValue *start;
        E2bProc p;
        Slice msg;
        int k;

        k = e2b_rpc_check_content(x->r, true, e);
        if (k < 0)
                return k;
        x->r->body_read = true; /* read here, envelope by envelope */
        k = envelope_next(x->r, &rd, &msg, e);
        if (k == 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the stream must begin with a start event");
        if (k > 0)
                k = message_parse(msg, &first, e);
        if (k < 0)
                return k;
        start = e2b_field(first, "start", NULL);
        if (json_type(start) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the stream must begin with a start event");
        k = e2b_envd_agent(x, &fd, e);
        if (k >= 0)
                k = e2b_proc_resolve(x, fd, e2b_field(start, "process", NULL), &p, e);
        if (k >= 0)
                k = e2b_proc_attach(fd, p.exec_id, false, e);
        if (k < 0)
                return k;

        for (unsigned i = 0; i < E2B_STREAM_INPUT_MESSAGES_MAX; i++) {
                _cleanup_json_ JsonValue *m = NULL;
                _cleanup_free_ void *data = NULL;
                const JsonValue *ev;
                bool to_pty = false;
                size_t n = 0;

                k = envelope_next(x->r, &rd, &msg, e);
                if (k < 0)
                        return k;
                if (k == 0)
                        return input_sync(fd, &p, e);
                k = message_parse(msg, &m, e);
                if (k < 0)
                        return k;
                if (e2b_field(m, "keepalive", NULL))
                        continue;
                if (e2b_field(m, "start", NULL))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "only the first event may be a start event");
                ev = e2b_field(m, "data", NULL);
                if (json_type(ev) != JSON_OBJECT)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "an event must be start, data or keepalive");
                k = input_decode(e2b_field(ev, "input", NULL), &data, &n, &to_pty, e);
                if (k < 0)
                        return k;
                if (to_pty && !p.pty)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process %" PRIu32 " has no pty", p.pid);
                k = agent_check(fd, &p, e);
                if (k >= 0)
                        k = input_send(fd, data, n, e);
                if (k < 0)
                        return k;
        }
        return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "a StreamInput call is limited to %u messages",
                         E2B_STREAM_INPUT_MESSAGES_MAX);
}

int e2b_process_stream_input(E2bEnvd *x) {
        ApiRequest *r = x->r;
        ApiError e = {};
        JsonWriter w;
        int k;

        k = stream_input(x, &e);
        if (k < 0) {
                /* the rest of the request is not read: the connection cannot be reused */
                http_conn_set_close(r->conn);
                if (e.code == API_BAD_GATEWAY)
                        return e2b_reply_gone(r, x->sb.id);
                return e2b_stream_fail(r, &e);
        }
        if (e2b_stream_begin(r) < 0) {
                http_conn_set_close(r->conn);
                return 0;
        }
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_object_end(&w);
        k = e2b_stream_send(r, &w);
        json_w_done(&w);
        if (k >= 0)
                k = e2b_stream_end(r, NULL);
        if (k < 0)
                http_conn_set_close(r->conn);
        return 0;
}
