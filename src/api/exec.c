/* SPDX-License-Identifier: MIT */
/* /v1/sandboxes/{id}/exec: run a command through the sandbox's agent and
 * stream its output as NDJSON; stdin, signal and resize of a running exec
 * over a second connection (ATTACH); the list of processes (PS). */

#include <poll.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "fd-util.h"
#include "log.h"

#define EXEC_ID_MAX 64U
#define EXEC_ACTIVITY_MSEC 1000 /* a running exec records activity this often */

typedef struct OutCarry {
        char b[4];      /* an incomplete UTF-8 sequence held back for the next frame */
        size_t n;
} OutCarry;

static void sandbox_donep(Sandbox *sb) {
        sandbox_done(sb);
}
#define _cleanup_sandbox_ _cleanup_(sandbox_donep)

bool api_exec_id_valid(const char *s, size_t max) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > max)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '_' || s[i] == '-'))
                        return false;
        return true;
}

static int stream_error(ApiRequest *r, const char *code, const char *message) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "error");
        json_w_kv_string(&w, "code", code);
        json_w_kv_string(&w, "message", message);
        json_w_object_end(&w);
        return api_stream_line(r, &w);
}

static int stream_exit_code(ApiRequest *r, int code) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "exit");
        json_w_kv_int(&w, "code", code);
        json_w_object_end(&w);
        return api_stream_line(r, &w);
}

/* Ends a stream that went wrong after it began: an error line, then the end. */
static int stream_abort(ApiRequest *r, const char *code, const char *message) {
        log_warning("Exec stream aborted: %s", message);
        if (stream_error(r, code, message) < 0 || http_conn_stream_end(r->conn) < 0)
                http_conn_set_close(r->conn);
        return 0;
}

static int emit_data(ApiRequest *r, const char *type, const char *p, size_t n) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_out_exec_data(&w, type, p, n);
        return api_stream_line(r, &w);
}

static int emit_output(ApiRequest *r, OutCarry *c, const char *type, const char *p, size_t n) {
        _cleanup_free_ char *joined = NULL;
        size_t m = n, tail;
        const char *q = p;
        int k;

        if (c->n > 0) {
                joined = malloc(c->n + n);
                if (!joined)
                        return -ENOMEM;
                memcpy(joined, c->b, c->n);
                memcpy(joined + c->n, p, n);
                q = joined;
                m = c->n + n;
                c->n = 0;
        }
        tail = utf8_incomplete_tail(q, m);
        if (tail > 0 && tail < sizeof c->b && utf8_valid(q, m - tail)) {
                memcpy(c->b, q + m - tail, tail);
                c->n = tail;
                m -= tail;
        }
        if (m == 0)
                return 0;
        k = emit_data(r, type, q, m);
        return k;
}

static int flush_carry(ApiRequest *r, OutCarry *c, const char *type) {
        size_t n = c->n;
        c->n = 0;
        return n > 0 ? emit_data(r, type, c->b, n) : 0;
}

static int send_stdin(int fd, const char *p, size_t n) {
        int k;

        for (size_t off = 0; off < n;) {
                size_t chunk = MIN(n - off, (size_t) PROTO_DATA_CHUNK);
                k = proto_send(fd, PROTO_STDIN, AGENT_STREAM, p + off, chunk);
                if (k < 0)
                        return k;
                off += chunk;
        }
        return proto_send(fd, PROTO_STDIN_EOF, AGENT_STREAM, NULL, 0);
}

/* The agent refused the EXEC (no such program, bad cwd or user, ...): that is
 * the command's outcome, so it is told in the stream, like a shell would. */
static int exec_refused(ApiRequest *r, const ProtoFrame *f, ApiError *e) {
        ApiError ae = {};
        int k, err;

        err = -agent_call_error(f, NULL, &ae);
        if (ae.code == API_BAD_GATEWAY) { /* a malformed ERROR frame: answer 502 */
                *e = ae;
                return -err;
        }
        k = api_stream_begin(r, 200, "application/x-ndjson");
        if (k < 0)
                return 0;
        if (stream_error(r, "exec_failed", ae.message) < 0 ||
            stream_exit_code(r, err == ENOENT || err == ENOTDIR ? 127 : 126) < 0 ||
            http_conn_stream_end(r->conn) < 0)
                http_conn_set_close(r->conn);
        return 0;
}

static int parse_started(const ProtoFrame *f, char exec_id[static EXEC_ID_MAX + 1], int64_t *ret_pid, ApiError *e) {
        _cleanup_json_ JsonValue *v = NULL;
        JsonValue *id;
        uint64_t pid;
        int k;

        k = agent_call_parse(f, &v, e);
        if (k < 0)
                return k;
        id = json_get(v, "exec_id");
        if (json_type(id) != JSON_STRING || !api_exec_id_valid(json_string(id), EXEC_ID_MAX) ||
            json_uint64(json_get(v, "pid"), &pid) < 0 || pid > INT32_MAX)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed STARTED payload");
        snprintf(exec_id, EXEC_ID_MAX + 1, "%s", json_string(id));
        *ret_pid = (int64_t) pid;
        return 0;
}

/* Relays output frames until EXIT, a bad frame, or the client going away.
 * A running exec is activity: the idle policy must not pause its sandbox. */
static int relay(ApiRequest *r, int fd) {
        OutCarry carry[2] = {};
        unsigned foreign = 0;
        int64_t touched = now_usec();

        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                _cleanup_json_ JsonValue *v = NULL;
                struct pollfd p[2] = {
                        { .fd = fd, .events = POLLIN },
                        { .fd = http_conn_fd(r->conn), .events = POLLRDHUP },
                };
                ApiError ae = {};
                int k;

                if (now_usec() - touched >= EXEC_ACTIVITY_MSEC * 1000) {
                        (void) store_sandbox_touch(r->store, r->params[0]);
                        touched = now_usec();
                }
                k = poll(p, 2, EXEC_ACTIVITY_MSEC);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return stream_abort(r, "internal", "poll failed");
                if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
                        /* Closing the agent connection (by returning) makes it kill a foreground process. */
                        log_info("Client went away during exec: closing the agent connection");
                        http_conn_set_close(r->conn);
                        return 0;
                }
                if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;

                k = proto_recv(fd, &f);
                if (k == -ECONNRESET)
                        return stream_abort(r, "bad_gateway", "the agent closed the connection before the exit");
                if (k < 0)
                        return stream_abort(r, "bad_gateway", "the agent sent a malformed frame");
                if (f.stream != AGENT_STREAM) {
                        if (++foreign > AGENT_FOREIGN_FRAMES_MAX)
                                return stream_abort(r, "bad_gateway", "the agent sent too many unexpected frames");
                        continue;
                }

                switch (f.type) {
                case PROTO_STDOUT:
                case PROTO_STDERR: {
                        bool out = f.type == PROTO_STDOUT;
                        if (f.len > PROTO_PAYLOAD_MAX)
                                return stream_abort(r, "bad_gateway", "the agent sent an oversized output frame");
                        k = emit_output(r, &carry[out ? 0 : 1], out ? "stdout" : "stderr", f.payload, f.len);
                        if (k < 0) {
                                log_info_errno(k, "Writing exec output to the client failed, closing the exec: %m");
                                http_conn_set_close(r->conn);
                                return 0;
                        }
                        break;
                }
                case PROTO_EXIT: {
                        _cleanup_(json_w_done) JsonWriter w;
                        json_w_init(&w);
                        if (agent_call_parse(&f, &v, &ae) < 0 || json_out_exit(&w, v) < 0)
                                return stream_abort(r, "bad_gateway", "the agent sent a malformed EXIT payload");
                        if (flush_carry(r, &carry[0], "stdout") < 0 || flush_carry(r, &carry[1], "stderr") < 0 ||
                            api_stream_line(r, &w) < 0 || http_conn_stream_end(r->conn) < 0)
                                http_conn_set_close(r->conn);
                        return 0;
                }
                case PROTO_ERROR:
                        (void) agent_call_error(&f, NULL, &ae);
                        return stream_abort(r, "exec_failed", ae.message);
                default:
                        return stream_abort(r, "bad_gateway", "the agent sent an unexpected frame");
                }
        }
}

int api_exec(ApiRequest *r, ApiError *e) {
        _cleanup_(exec_request_done) ExecRequest x = {};
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_close_ int fd = -EBADF;
        char exec_id[EXEC_ID_MAX + 1];
        int64_t pid = 0;
        int k;

        json_w_init(&w);
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        k = api_validate_exec(body, api_config(r->api), &x, e);
        if (k < 0)
                return k;
        k = api_sandbox_lookup(r, r->params[0], true, &sb, e);
        if (k < 0)
                return k;
        k = api_exec_merge_env(&x, sb.env_json, e);
        if (k < 0)
                return k;
        {
                /* placeholders of credentials granted since the sandbox was created */
                _cleanup_free_ char *cred_env = NULL;

                k = api_credentials_env_of(r, sb.id, &cred_env, e);
                if (k >= 0 && cred_env)
                        k = api_exec_merge_env(&x, cred_env, e);
                if (k < 0)
                        return k;
        }
        k = agent_call_connect(r, &sb, &fd, e);
        if (k < 0)
                return k;
        k = proto_send_json(fd, PROTO_EXEC, AGENT_STREAM, x.agent_json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
        if (k < 0)
                return k;
        if (f.type == PROTO_ERROR)
                return exec_refused(r, &f, e);
        if (f.type != PROTO_STARTED)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent answered EXEC with %s",
                                 proto_type_to_string(f.type) ?: "an unknown frame");
        k = parse_started(&f, exec_id, &pid, e);
        if (k < 0)
                return k;

        k = api_stream_begin(r, 200, "application/x-ndjson");
        if (k < 0)
                return 0; /* the client is gone; closing fd kills the process */
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "start");
        json_w_kv_string(&w, "exec_id", exec_id);
        json_w_kv_int(&w, "pid", pid);
        json_w_object_end(&w);
        if (api_stream_line(r, &w) < 0) {
                http_conn_set_close(r->conn);
                return 0;
        }
        if (x.stdin_data && send_stdin(fd, x.stdin_data, x.stdin_len) < 0)
                return stream_abort(r, "bad_gateway", "sending stdin to the agent failed");
        if (x.background) {
                if (http_conn_stream_end(r->conn) < 0)
                        http_conn_set_close(r->conn);
                return 0;
        }
        return relay(r, fd);
}

/* ---- operations on a running exec ---- */

/* Connects and attaches to exec params[1] of sandbox params[0] (without its output). */
static int exec_attach(ApiRequest *r, int *ret_fd, ApiError *e) {
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_free_ char *json = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *exec_id = r->params[1];
        char what[EXEC_ID_MAX + 16];
        int k;

        json_w_init(&w);
        k = api_sandbox_lookup(r, r->params[0], true, &sb, e);
        if (k < 0)
                return k;
        if (!api_exec_id_valid(exec_id, EXEC_ID_MAX))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no exec '%.64s'", exec_id);
        k = agent_call_connect(r, &sb, &fd, e);
        if (k < 0)
                return k;
        json_w_object_begin(&w);
        json_w_kv_string(&w, "exec_id", exec_id);
        json_w_kv_bool(&w, "output", false);
        json_w_object_end(&w);
        if (json_w_finish(&w, &json, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = proto_send_json(fd, PROTO_ATTACH, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
        if (k < 0)
                return k;
        snprintf(what, sizeof what, "'%s'", exec_id);
        if (f.type == PROTO_ERROR)
                return agent_call_error(&f, what, e);
        if (f.type != PROTO_STARTED)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent answered ATTACH with %s",
                                 proto_type_to_string(f.type) ?: "an unknown frame");
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Waits until the agent processed what we sent (PING → PONG), reporting an ERROR it sent first. */
static int exec_sync(int fd, ApiError *e) {
        int k;

        k = proto_send_json(fd, PROTO_PING, AGENT_STREAM, "{}");
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
                if (k < 0)
                        return k;
                if (f.type == PROTO_PONG)
                        return 0;
                if (f.type == PROTO_ERROR)
                        return agent_call_error(&f, "exec", e);
                /* output of the exec is not ours to relay (we attached without it): skip */
                if (f.type != PROTO_STDOUT && f.type != PROTO_STDERR && f.type != PROTO_EXIT)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent an unexpected %s frame",
                                         proto_type_to_string(f.type) ?: "unknown");
        }
}

int api_exec_stdin(ApiRequest *r, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        bool eof = false;
        int k;

        k = api_query_bool(r, "eof", &eof, e);
        if (k < 0)
                return k;
        k = exec_attach(r, &fd, e);
        if (k < 0)
                return k;
        buf = malloc(PROTO_DATA_CHUNK);
        if (!buf)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        for (;;) {
                ssize_t n = http_conn_read_body(r->conn, buf, PROTO_DATA_CHUNK);
                if (n < 0)
                        return api_error(e, (int) n, API_BAD_REQUEST, "could not read the request body: %s",
                                         strerror((int) -n));
                if (n == 0)
                        break;
                k = proto_send(fd, PROTO_STDIN, AGENT_STREAM, buf, (size_t) n);
                if (k < 0)
                        return api_error(e, k, API_BAD_GATEWAY, "sending stdin to the agent failed: %s", strerror(-k));
        }
        r->body_read = true;
        if (eof) {
                k = proto_send(fd, PROTO_STDIN_EOF, AGENT_STREAM, NULL, 0);
                if (k < 0)
                        return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        }
        k = exec_sync(fd, e);
        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}

int api_exec_signal(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "signal", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *unknown = NULL, *sig;
        char json[64];
        int k;

        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        if (json_type(json_get(body, "signal")) != JSON_STRING)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "signal (e.g. \"SIGTERM\") is required");
        sig = api_signal_name(json_string(json_get(body, "signal")));
        if (!sig)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "'%.32s' is not a signal that can be sent",
                                 json_string(json_get(body, "signal")));
        k = exec_attach(r, &fd, e);
        if (k < 0)
                return k;
        snprintf(json, sizeof json, "{\"signal\":\"%s\"}", sig);
        k = proto_send_json(fd, PROTO_SIGNAL, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = exec_sync(fd, e);
        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}

int api_exec_resize(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "rows", "cols", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *unknown = NULL;
        uint64_t rows, cols;
        char json[64];
        int k;

        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        if (json_uint64(json_get(body, "rows"), &rows) < 0 || json_uint64(json_get(body, "cols"), &cols) < 0 ||
            rows < 1 || rows > API_PTY_DIM_MAX || cols < 1 || cols > API_PTY_DIM_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "rows and cols must be integers from 1 to %u",
                                 API_PTY_DIM_MAX);
        k = exec_attach(r, &fd, e);
        if (k < 0)
                return k;
        snprintf(json, sizeof json, "{\"rows\":%u,\"cols\":%u}", (unsigned) rows, (unsigned) cols);
        k = proto_send_json(fd, PROTO_RESIZE, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = exec_sync(fd, e);
        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}

int api_exec_list(ApiRequest *r, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_json_ JsonValue *result = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_close_ int fd = -EBADF;
        int k;

        json_w_init(&w);
        k = api_sandbox_lookup(r, r->params[0], true, &sb, e);
        if (k < 0)
                return k;
        k = agent_call_connect(r, &sb, &fd, e);
        if (k < 0)
                return k;
        k = agent_call_json(fd, PROTO_PS, "{}", "ps", &result, e);
        if (k < 0)
                return k;
        if (json_out_agent_list(&w, result, "processes", json_out_process) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed process list");
        return api_reply_json(r, 200, &w);
}
