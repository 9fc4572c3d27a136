/* SPDX-License-Identifier: MIT */
/* /v1/sandboxes/{id}/exec: run a command through the sandbox's agent and
 * stream its output as NDJSON (exec-stream.c); reattach to its output from
 * an offset; stdin, signal and resize of a running exec over a second
 * connection (ATTACH); the list of processes (PS). */

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "fd-util.h"
#include "log.h"

#define EXEC_ID_MAX API_EXEC_ID_MAX

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

static int stream_exit_code(ApiRequest *r, ExecOutput o, int code) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "exit");
        json_w_kv_int(&w, "code", code);
        json_w_object_end(&w);
        return exec_stream_event(r, o, &w);
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
static int exec_refused(ApiRequest *r, ExecOutput o, const ProtoFrame *f, ApiError *e) {
        ApiError ae = {};
        int k, err;

        err = -agent_call_error(f, NULL, &ae);
        if (ae.code == API_BAD_GATEWAY) { /* a malformed ERROR frame: answer 502 */
                *e = ae;
                return -err;
        }
        k = api_stream_begin(r, 200, exec_output_content_type(o));
        if (k < 0)
                return 0;
        if (exec_stream_error(r, o, "exec_failed", ae.message) < 0 ||
            stream_exit_code(r, o, err == ENOENT || err == ENOTDIR ? 127 : 126) < 0 ||
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

/* Adds the output buffer's settings (config) to the EXEC payload (a JSON
 * object). (The agent reads its sandbox's OOM count itself: an exec start
 * asks the worker nothing.) */
static int add_stream_settings(ApiRequest *r, const char *id, char **json) {
        const Config *c = api_config(r->api);
        size_t l = strlen(*json);
        char *s;

        (void) id;
        if (l < 2 || (*json)[l - 1] != '}')
                return -EINVAL;
        s = strdup_printf("%.*s,\"buffer_bytes\":%" PRIu64 ",\"stall_ms\":%" PRIu64 ",\"keep_ms\":%" PRIu64 "}",
                          (int) (l - 1), *json, c->exec_buffer_kb * 1024, c->exec_stall_ms, c->exec_keep_s * 1000);
        if (!s)
                return -ENOMEM;
        free(*json);
        *json = s;
        return 0;
}

/* Accept: application/vnd.space.exec-frames (alone) asks for the frames form
 * where the request names none. */
static bool accepts_frames(ApiRequest *r) {
        const char *a = http_head_header(r->head, "Accept");
        return a && startswith(a, exec_output_content_type(EXEC_OUTPUT_FRAMES)) && !strchr(a, ',');
}

/* An agent that does not know the buffer fields refuses them as unknown. */
static bool agent_predates_buffers(const ProtoFrame *f) {
        _cleanup_json_ JsonValue *v = NULL;
        const char *m;

        if (f->type != PROTO_ERROR || agent_call_parse(f, &v, NULL) < 0)
                return false;
        m = json_string(json_get(v, "message"));
        return m && strstr(m, "unknown field 'buffer_bytes'");
}

static int start_line(ApiRequest *r, ExecOutput o, const char *exec_id, int64_t pid, uint64_t offset) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "start");
        json_w_kv_string(&w, "exec_id", exec_id);
        json_w_kv_int(&w, "pid", pid);
        json_w_key(&w, "offset");
        json_w_uint(&w, offset);
        json_w_object_end(&w);
        return exec_stream_event(r, o, &w);
}

/* Sends x to sb's agent with the sandbox's env and the placeholders of its
 * credentials under the request's own: *ret_fd is the connection, *ret the
 * agent's first answer (STARTED, or ERROR when it refused). */
static int exec_send(ApiRequest *r, const Sandbox *sb, ExecRequest *x, int *ret_fd, ProtoFrame *ret, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *plain = NULL, *cred_env = NULL;
        int k;

        k = api_exec_merge_env(x, sb->env_json, e);
        if (k < 0)
                return k;
        /* placeholders of credentials granted since the sandbox was created */
        k = api_credentials_env_of(r, sb->id, &cred_env, e);
        if (k >= 0 && cred_env)
                k = api_exec_merge_env(x, cred_env, e);
        if (k < 0)
                return k;
        k = agent_call_connect(r, sb, &fd, e);
        if (k < 0)
                return k;
        plain = strdup(x->agent_json);
        if (!plain)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = add_stream_settings(r, sb->id, &x->agent_json);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot build the exec request: %s", strerror(-k));
        k = proto_send_json(fd, PROTO_EXEC, AGENT_STREAM, x->agent_json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, ret, e);
        if (k < 0)
                return k;
        if (agent_predates_buffers(ret)) {
                /* an agent from before exec buffers (a vm saved with it): its own defaults, no OOM reason */
                proto_frame_done(ret);
                k = proto_send_json(fd, PROTO_EXEC, AGENT_STREAM, plain);
                if (k < 0)
                        return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
                k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, ret, e);
                if (k < 0)
                        return k;
        }
        if (ret->type != PROTO_ERROR && ret->type != PROTO_STARTED) {
                int t = ret->type;
                proto_frame_done(ret);
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent answered EXEC with %s",
                                 proto_type_to_string(t) ?: "an unknown frame");
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int api_exec_launch(ApiRequest *r, const Sandbox *sb, const JsonValue *body, int *ret_fd,
                    char ret_exec_id[static API_EXEC_ID_MAX + 1], int64_t *ret_pid, ApiError *e) {
        _cleanup_(exec_request_done) ExecRequest x = {};
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        _cleanup_close_ int fd = -EBADF;
        int k;

        k = api_validate_exec(body, api_config(r->api), &x, e);
        if (k < 0)
                return k;
        k = exec_send(r, sb, &x, &fd, &f, e);
        if (k < 0)
                return k;
        if (f.type == PROTO_ERROR)
                return agent_call_error(&f, NULL, e);
        k = parse_started(&f, ret_exec_id, ret_pid, e);
        if (k < 0)
                return k;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int api_exec(ApiRequest *r, ApiError *e) {
        _cleanup_(exec_request_done) ExecRequest x = {};
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_close_ int fd = -EBADF;
        char exec_id[EXEC_ID_MAX + 1];
        int64_t pid = 0;
        int k;

        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        k = api_validate_exec(body, api_config(r->api), &x, e);
        if (k < 0)
                return k;
        if (!json_get(body, "output") && accepts_frames(r))
                x.output = EXEC_OUTPUT_FRAMES;
        k = api_sandbox_lookup(r, r->params[0], true, &sb, e);
        if (k < 0)
                return k;
        k = exec_send(r, &sb, &x, &fd, &f, e);
        if (k < 0)
                return k;
        if (f.type == PROTO_ERROR)
                return exec_refused(r, x.output, &f, e);
        k = parse_started(&f, exec_id, &pid, e);
        if (k < 0)
                return k;

        k = api_stream_begin(r, 200, exec_output_content_type(x.output));
        if (k < 0)
                return 0; /* the client is gone; the exec lives on (reattach) unless on_disconnect says not */
        if (start_line(r, x.output, exec_id, pid, 0) < 0) {
                http_conn_set_close(r->conn);
                return 0;
        }
        if (x.stdin_data && send_stdin(fd, x.stdin_data, x.stdin_len) < 0) {
                if (exec_stream_error(r, x.output, "bad_gateway", "sending stdin to the agent failed") < 0 ||
                    http_conn_stream_end(r->conn) < 0)
                        http_conn_set_close(r->conn);
                return 0;
        }
        if (x.background) {
                if (http_conn_stream_end(r->conn) < 0)
                        http_conn_set_close(r->conn);
                return 0;
        }
        ExecRelay relay = { .r = r, .fd = fd, .sandbox_id = sb.id, .output = x.output };
        return exec_relay(&relay);
}

/* GET .../exec/{exec_id}/output?from=N&output=text|base64: the exec's output
 * from offset N (default 0: the oldest byte kept) to its end, running or not. */
int api_exec_output(ApiRequest *r, ApiError *e) {
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_free_ char *mode = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *exec_id = r->params[1];
        ExecOutput output = EXEC_OUTPUT_TEXT;
        uint64_t from = 0, offset, pid;
        char json[EXEC_ID_MAX + 96], what[EXEC_ID_MAX + 16];
        int k;

        k = api_query_u64(r, "from", 0, INT64_MAX, &from, e);
        if (k < 0)
                return k;
        k = api_query_string(r, "output", &mode, e);
        if (k < 0)
                return k;
        if (mode && (output = exec_output_from_string(mode)) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "output must be text, base64 or frames, not '%.32s'",
                                 mode);
        if (!mode && accepts_frames(r))
                output = EXEC_OUTPUT_FRAMES;
        k = api_sandbox_lookup(r, r->params[0], true, &sb, e);
        if (k < 0)
                return k;
        if (!api_exec_id_valid(exec_id, EXEC_ID_MAX))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no exec '%.64s'", exec_id);
        k = agent_call_connect(r, &sb, &fd, e);
        if (k < 0)
                return k;
        snprintf(json, sizeof json, "{\"exec_id\":\"%s\",\"output\":true,\"from\":%" PRIu64 "}", exec_id, from);
        k = proto_send_json(fd, PROTO_ATTACH, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
        if (k < 0)
                return k;
        snprintf(what, sizeof what, "exec '%s'", exec_id);
        if (f.type == PROTO_ERROR) {
                k = agent_call_error(&f, what, e);
                if (e->code == API_NOT_FOUND)
                        (void) api_error(e, k, API_NOT_FOUND, "no exec '%s' (never started, or no longer kept)", exec_id);
                return k;
        }
        if (f.type != PROTO_STARTED)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent answered ATTACH with %s",
                                 proto_type_to_string(f.type) ?: "an unknown frame");
        k = agent_call_parse(&f, &v, e);
        if (k < 0)
                return k;
        if (json_uint64(json_get(v, "offset"), &offset) < 0 || offset != from || json_uint64(json_get(v, "pid"), &pid) < 0 ||
            pid > INT32_MAX)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed STARTED payload");

        k = api_stream_begin(r, 200, exec_output_content_type(output));
        if (k < 0)
                return 0;
        if (start_line(r, output, exec_id, (int64_t) pid, offset) < 0) {
                http_conn_set_close(r->conn);
                return 0;
        }
        ExecRelay relay = { .r = r, .fd = fd, .sandbox_id = sb.id, .output = output, .offset = offset };
        return exec_relay(&relay);
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
