/* SPDX-License-Identifier: MIT */
/* process.Process over the agent: Start (EXEC, output streamed as Connect
 * envelopes), Connect (ATTACH with output), List (PS), SendInput, CloseStdin,
 * SendSignal and Update (ATTACH/SIGNAL/RESIZE by exec id, found from the pid
 * through PS). A Start whose client leaves hands its agent connection to a
 * drainer (e2b-procs.c), so the process lives on as E2B's do. */

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <time.h>

#include "alloc-util.h"
#include "base64.h"
#include "e2b.h"
#include "fd-util.h"
#include "log.h"
#include "proto-msg.h"
#include "str-util.h"
#include "time-util.h"

#define E2B_TAG_MAX 256U
#define E2B_ARGS_MAX 4096U
#define E2B_ARG_MAX (128U * 1024U)
#define E2B_ENVS_MAX 4096U
#define E2B_PTY_DIM_MAX 10000U

/* ---- agent conversations ---- */

/* One process of a PS result (hostile): -EBADMSG if malformed. */
static int ps_entry(const JsonValue *p, E2bProc *ret) {
        const JsonValue *id = json_get(p, "exec_id"), *pty = json_get(p, "pty");
        uint64_t pid;

        if (json_type(id) != JSON_STRING || !api_exec_id_valid(json_string(id), E2B_EXEC_ID_MAX) ||
            json_uint64(json_get(p, "pid"), &pid) < 0 || pid == 0 || pid > INT32_MAX)
                return -EBADMSG;
        (void) strscpy(ret->exec_id, sizeof ret->exec_id, json_string(id));
        ret->pid = (uint32_t) pid;
        ret->pty = false;
        if (pty && json_bool(pty, &ret->pty) < 0)
                return -EBADMSG;
        return 0;
}

static int agent_ps(int fd, JsonValue **ret, const JsonValue **ret_list, ApiError *e) {
        _cleanup_json_ JsonValue *result = NULL;
        const JsonValue *list = NULL;
        int k;

        k = agent_call_json(fd, PROTO_PS, "{}", "ps", &result, e);
        if (k < 0)
                return k;
        list = json_get(result, "processes");
        if (json_type(list) != JSON_ARRAY)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed process list");
        *ret_list = list;
        *ret = TAKE_PTR(result);
        return 0;
}

/* ProcessSelector {"pid":N} | {"tag":"t"} → the running process. */
int e2b_proc_resolve(E2bEnvd *x, int fd, const JsonValue *sel, E2bProc *ret, ApiError *e) {
        _cleanup_json_ JsonValue *ps = NULL;
        const JsonValue *list = NULL, *v;
        uint32_t pid = 0;
        int k;

        if (json_type(sel) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process (a selector with pid or tag) is required");
        if ((v = e2b_field(sel, "pid", NULL))) {
                if (e2b_uint32(v, &pid) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process.pid must be an unsigned integer");
        } else if ((v = e2b_field(sel, "tag", NULL))) {
                if (json_type(v) != JSON_STRING)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process.tag must be a string");
                pid = e2b_procs_pid_by_tag(x->sb.id, json_string(v));
                if (pid == 0)
                        return api_error(e, -ESRCH, API_NOT_FOUND, "process with tag '%.64s' not found",
                                         json_string(v));
        } else
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process must name a pid or a tag");

        k = agent_ps(fd, &ps, &list, e);
        if (k < 0)
                return k;
        for (size_t i = 0; i < json_array_size(list); i++) {
                E2bProc p;
                if (ps_entry(json_array_at(list, i), &p) < 0)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed process entry");
                if (p.pid == pid) {
                        *ret = p;
                        return 0;
                }
        }
        return api_error(e, -ESRCH, API_NOT_FOUND, "process with pid %" PRIu32 " not found", pid);
}

/* ATTACH without output: the stream then carries STDIN/STDIN_EOF for the process. */
int e2b_proc_attach(int fd, const char *exec_id, bool output, ApiError *e) {
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        char json[E2B_EXEC_ID_MAX + 64];
        int k;

        snprintf(json, sizeof json, "{\"exec_id\":\"%s\",\"output\":%s}", exec_id, output ? "true" : "false");
        k = proto_send_json(fd, PROTO_ATTACH, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
        if (k < 0)
                return k;
        if (f.type == PROTO_ERROR) {
                k = agent_call_error(&f, NULL, e);
                if (e->code == API_NOT_FOUND)
                        (void) api_error(e, k, API_NOT_FOUND, "the process is not running");
                return k;
        }
        if (f.type != PROTO_STARTED)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent answered ATTACH with %s",
                                 proto_type_to_string(f.type) ?: "an unknown frame");
        return 0;
}

/* Waits until the agent handled what was sent (PING → PONG), taking an ERROR it sent first. */
int e2b_proc_sync(int fd, ApiError *e) {
        int k;

        k = proto_send_json(fd, PROTO_PING, AGENT_STREAM, "{}");
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        for (unsigned i = 0; i < AGENT_FOREIGN_FRAMES_MAX; i++) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
                if (k < 0)
                        return k;
                if (f.type == PROTO_PONG)
                        return 0;
                if (f.type == PROTO_ERROR)
                        return agent_call_error(&f, NULL, e);
        }
        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent too many unexpected frames");
}

/* ---- streams ---- */

static void start_event(JsonWriter *w, uint32_t pid) {
        json_w_object_begin(w);
        json_w_key(w, "event");
        json_w_object_begin(w);
        json_w_key(w, "start");
        json_w_object_begin(w);
        json_w_kv_int(w, "pid", pid);
        json_w_object_end(w);
        json_w_object_end(w);
        json_w_object_end(w);
}

static int send_data(ApiRequest *r, const char *kind, const char *p, size_t n) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *b64 = NULL;

        if (base64_encode(p, n, &b64, NULL) < 0)
                return -ENOMEM;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "event");
        json_w_object_begin(&w);
        json_w_key(&w, "data");
        json_w_object_begin(&w);
        json_w_kv_string(&w, kind, b64);
        json_w_object_end(&w);
        json_w_object_end(&w);
        json_w_object_end(&w);
        return e2b_stream_send(r, &w);
}

static int send_keepalive(ApiRequest *r) {
        static const char ka[] = "{\"event\":{\"keepalive\":{}}}";
        JsonWriter w;

        json_w_init(&w);
        json_w_raw(&w, ka);
        return e2b_stream_send(r, &w);
}

/* Go's names of signals (syscall.Signal.String()), as envd reports them. */
static const char *go_signal_name(int sig) {
        static const char *const names[] = {
                [1] = "hangup",        [2] = "interrupt",       [3] = "quit",
                [4] = "illegal instruction", [5] = "trace/breakpoint trap", [6] = "aborted",
                [7] = "bus error",     [8] = "floating point exception", [9] = "killed",
                [10] = "user defined signal 1", [11] = "segmentation fault", [12] = "user defined signal 2",
                [13] = "broken pipe",  [14] = "alarm clock",     [15] = "terminated",
        };
        return sig > 0 && (size_t) sig < ELEMENTSOF(names) ? names[sig] : NULL;
}

/* The agent's EXIT → envd's end event. */
static int send_end(ApiRequest *r, const ProtoFrame *f) {
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        const JsonValue *sig;
        char status[64];
        int64_t code = 0;
        bool signaled;
        ApiError ignored = {};

        if (agent_call_parse(f, &v, &ignored) < 0 || json_int64(json_get(v, "code"), &code) < 0 || code < 0 ||
            code > 255)
                return -EBADMSG;
        sig = json_get(v, "signal");
        signaled = json_type(sig) == JSON_STRING;
        if (signaled) {
                int n = proto_signal_from_string(json_string(sig));
                const char *name = go_signal_name(n);
                if (name)
                        snprintf(status, sizeof status, "signal: %s", name);
                else
                        snprintf(status, sizeof status, "signal: %d", n > 0 ? n : (int) code - 128);
        } else
                snprintf(status, sizeof status, "exit status %" PRIi64, code);

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "event");
        json_w_object_begin(&w);
        json_w_key(&w, "end");
        json_w_object_begin(&w);
        json_w_kv_int(&w, "exitCode", signaled ? -1 : code);
        json_w_kv_bool(&w, "exited", !signaled);
        json_w_kv_string(&w, "status", status);
        if (signaled || code != 0)
                json_w_kv_string(&w, "error", status);
        json_w_object_end(&w);
        json_w_object_end(&w);
        json_w_object_end(&w);
        return e2b_stream_send(r, &w);
}

/* An EXIT of a process the agent killed at its timeout (the call's deadline). */
static bool exit_timed_out(const ProtoFrame *f) {
        _cleanup_json_ JsonValue *v = NULL;
        ApiError ignored = {};
        const JsonValue *reason;

        if (agent_call_parse(f, &v, &ignored) < 0)
                return false;
        reason = json_get(v, "reason");
        return json_type(reason) == JSON_STRING && streq(json_string(reason), "timeout");
}

typedef struct Relay {
        E2bEnvd *x;
        int fd;                /* taken over by a drainer if owner and the client leaves */
        bool owner;            /* Start: the process must outlive the client */
        bool pty;
        const char *exec_id;
        uint64_t deadline_msec; /* Connect: end the stream then (0: none) */
} Relay;

/* The client left (or stopped reading): a started process lives on without it. */
static int client_gone(Relay *rl) {
        http_conn_set_close(rl->x->r->conn);
        if (rl->owner) {
                log_debug("E2B client left process %s: it keeps running", rl->exec_id);
                e2b_drain_start(TAKE_FD(rl->fd), rl->x->sb.id, rl->exec_id);
        }
        return 0;
}

/* Relays the process's output until its exit, the deadline or the client leaving. Always returns 0. */
static int relay(Relay *rl) {
        ApiRequest *r = rl->x->r;
        uint64_t keepalive = (uint64_t) e2b_rpc_keepalive_sec(r) * 1000U, last = mono_msec();
        ApiError e = {};

        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                struct pollfd p[2] = {
                        { .fd = rl->fd, .events = POLLIN },
                        { .fd = http_conn_fd(r->conn), .events = POLLRDHUP },
                };
                uint64_t now = mono_msec(), wake = last + keepalive;
                int k, timeout;

                if (rl->deadline_msec > 0 && now >= rl->deadline_msec) {
                        (void) api_error(&e, -ETIMEDOUT, API_TIMEOUT, "the deadline (Connect-Timeout-Ms) passed");
                        return e2b_stream_end(r, &e);
                }
                if (rl->deadline_msec > 0)
                        wake = MIN(wake, rl->deadline_msec);
                timeout = wake > now ? (int) MIN(wake - now, (uint64_t) INT32_MAX) : 0;
                k = poll(p, 2, timeout);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        (void) api_error(&e, negative_errno(), API_INTERNAL, "poll failed");
                        return e2b_stream_end(r, &e);
                }
                if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
                        return client_gone(rl);
                if (k == 0) {
                        if ((uint64_t) mono_msec() >= last + keepalive) {
                                if (send_keepalive(r) < 0)
                                        return client_gone(rl);
                                last = mono_msec();
                        }
                        continue;
                }
                if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                k = proto_recv(rl->fd, &f);
                if (k < 0 || f.stream != AGENT_STREAM) {
                        if (rl->owner)
                                e2b_procs_forget(rl->x->sb.id, rl->exec_id);
                        if (k == -ECONNRESET)
                                return e2b_stream_abort(r);
                        (void) api_error(&e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a bad frame");
                        return e2b_stream_end(r, &e);
                }
                switch (f.type) {
                case PROTO_STDOUT:
                case PROTO_STDERR:
                        if (f.len > 0 &&
                            send_data(r, rl->pty ? "pty" : f.type == PROTO_STDOUT ? "stdout" : "stderr", f.payload,
                                      f.len) < 0)
                                return client_gone(rl);
                        last = mono_msec();
                        break;
                case PROTO_DROPPED: /* envd has no such event: what the agent's buffer lost is just not there */
                        break;
                case PROTO_EXIT:
                        e2b_procs_forget(rl->x->sb.id, rl->exec_id);
                        if (exit_timed_out(&f)) {
                                /* envd ends a call whose Connect-Timeout-Ms passed with deadline_exceeded
                                 * (the SDKs' TimeoutException), not with the killed process's end */
                                (void) api_error(&e, -ETIMEDOUT, API_TIMEOUT,
                                                 "the deadline (Connect-Timeout-Ms) passed: the process was killed");
                                return e2b_stream_end(r, &e);
                        }
                        if (send_end(r, &f) < 0) {
                                (void) api_error(&e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed EXIT");
                                return e2b_stream_end(r, &e);
                        }
                        return e2b_stream_end(r, NULL);
                case PROTO_ERROR:
                        (void) agent_call_error(&f, NULL, &e);
                        return e2b_stream_end(r, &e);
                default:
                        (void) api_error(&e, -EBADMSG, API_BAD_GATEWAY, "the agent sent an unexpected %s frame",
                                         proto_type_to_string(f.type) ?: "unknown");
                        return e2b_stream_end(r, &e);
                }
        }
}

/* ---- Start ---- */

typedef struct StartRequest {
        JsonWriter exec;        /* the agent EXEC, without "user" */
        char *tag, *cwd, *envs_json;
        bool pty;
} StartRequest;

static void start_request_done(StartRequest *s) {
        json_w_done(&s->exec);
        s->tag = mfree(s->tag);
        s->cwd = mfree(s->cwd);
        s->envs_json = mfree(s->envs_json);
}

static int string_ok(const JsonValue *v, size_t max) {
        return json_type(v) == JSON_STRING && json_string_len(v) <= max &&
               strlen(json_string(v)) == json_string_len(v);
}

static int parse_start(const JsonValue *req, const char *sandbox_env_json, uint64_t timeout_ms, StartRequest *s,
                       ApiError *e) {
        const JsonValue *proc = e2b_field(req, "process", NULL), *cmd, *args, *envs, *cwd, *pty, *tag, *in;
        _cleanup_json_ JsonValue *base = NULL;
        bool stdin_open = true;

        json_w_init(&s->exec);
        if (json_type(proc) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process (cmd, args, envs, cwd) is required");
        cmd = e2b_field(proc, "cmd", NULL);
        if (!string_ok(cmd, E2B_ARG_MAX) || json_string_len(cmd) == 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process.cmd must be a non-empty string");
        json_w_object_begin(&s->exec);
        json_w_key(&s->exec, "argv");
        json_w_array_begin(&s->exec);
        json_w_string(&s->exec, json_string(cmd));
        args = e2b_field(proc, "args", NULL);
        if (args && (json_type(args) != JSON_ARRAY || json_array_size(args) >= E2B_ARGS_MAX))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process.args must be an array of strings");
        for (size_t i = 0; i < json_array_size(args); i++) {
                const JsonValue *a = json_array_at(args, i);
                if (!string_ok(a, E2B_ARG_MAX))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "process.args[%zu] must be a string without NUL", i);
                json_w_string_n(&s->exec, json_string(a), json_string_len(a));
        }
        json_w_array_end(&s->exec);

        envs = e2b_field(proc, "envs", NULL);
        if (envs) {
                if (json_type(envs) != JSON_OBJECT || json_object_size(envs) > E2B_ENVS_MAX)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process.envs must be an object of strings");
                for (size_t i = 0; i < json_object_size(envs); i++) {
                        const char *key = json_object_key(envs, i);
                        if (isempty(key) || strchr(key, '=') || !string_ok(json_object_value(envs, i), E2B_ARG_MAX))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "process.envs must map names (without '=') to strings");
                }
                if (json_serialize(envs, &s->envs_json, NULL) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        }
        /* validated when it was stored: a failure here is ours */
        /* the sandbox's envs (its create's envVars) under the request's: one taken
         * from a warm pool was started before its envs were known, so they go with
         * every process, as /v1 exec does */
        if (!isempty(sandbox_env_json) &&
            (json_parse(sandbox_env_json, strlen(sandbox_env_json), &base, NULL, 0) < 0 ||
             json_type(base) != JSON_OBJECT))
                return api_error(e, -EBADMSG, API_INTERNAL, "the sandbox's stored env is not a JSON object");
        if (envs || json_object_size(base) > 0) {
                json_w_key(&s->exec, "env");
                api_json_write_merged_env(&s->exec, base, envs);
        }

        cwd = e2b_field(proc, "cwd", NULL);
        if (cwd) {
                const char *c;
                if (!string_ok(cwd, API_PATH_MAX))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "process.cwd must be a path");
                c = json_string(cwd);
                s->cwd = strdup(c);
                if (!s->cwd)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                /* "~" is the home (the agent's default), "~/x" relative to it */
                if (streq(c, "~/"))
                        c = "~";
                if (!streq(c, "~") && c[0])
                        json_w_kv_string(&s->exec, "cwd", startswith(c, "~/") ?: c);
        }

        in = e2b_field(req, "stdin", NULL);
        if (in && json_bool(in, &stdin_open) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "stdin must be a boolean");
        json_w_kv_bool(&s->exec, "stdin", stdin_open);

        pty = e2b_field(req, "pty", NULL);
        if (pty) {
                const JsonValue *size = e2b_field(pty, "size", NULL);
                uint32_t cols = 80, rows = 24;
                if (json_type(pty) != JSON_OBJECT)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "pty must be an object");
                if (size && ((e2b_field(size, "cols", NULL) && e2b_uint32(e2b_field(size, "cols", NULL), &cols) < 0) ||
                             (e2b_field(size, "rows", NULL) && e2b_uint32(e2b_field(size, "rows", NULL), &rows) < 0)))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "pty.size cols and rows must be integers");
                if (cols == 0)
                        cols = 80;
                if (rows == 0)
                        rows = 24;
                if (cols > E2B_PTY_DIM_MAX || rows > E2B_PTY_DIM_MAX)
                        return api_error(e, -ERANGE, API_INVALID_ARGUMENT, "pty.size must be at most %ux%u",
                                         E2B_PTY_DIM_MAX, E2B_PTY_DIM_MAX);
                json_w_kv_bool(&s->exec, "pty", true);
                json_w_kv_int(&s->exec, "rows", rows);
                json_w_kv_int(&s->exec, "cols", cols);
                s->pty = true;
        }

        tag = e2b_field(req, "tag", NULL);
        if (tag) {
                if (!string_ok(tag, E2B_TAG_MAX))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "tag must be a string of at most %u bytes",
                                         E2B_TAG_MAX);
                s->tag = strdup(json_string(tag));
                if (!s->tag)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        }
        if (timeout_ms > 0) {
                json_w_key(&s->exec, "timeout_ms");
                json_w_uint(&s->exec, MIN(timeout_ms, (uint64_t) PROTO_TIMEOUT_MS_MAX));
        }
        return 0;
}

/* The agent refused EXEC: the error E2B clients expect. Sets *ret_unknown_user. */
static int exec_refused(const ProtoFrame *f, const char *cwd, bool *ret_unknown_user, ApiError *e) {
        _cleanup_json_ JsonValue *v = NULL;
        const char *msg;
        int k;

        k = agent_call_error(f, NULL, e);
        if (e->code == API_BAD_GATEWAY)
                return k;
        if (agent_call_parse(f, &v, NULL) < 0)
                return k;
        msg = json_string(json_get(v, "message"));
        if (msg && startswith(msg, "Unknown user")) {
                *ret_unknown_user = true;
                return api_error(e, k, API_UNAUTHORIZED, "%s", msg);
        }
        if (msg && startswith(msg, "Failed to change directory"))
                return api_error(e, k, API_INVALID_ARGUMENT, "cwd '%.256s' does not exist", strempty(cwd));
        if (e->code == API_NOT_FOUND)
                (void) api_error(e, k, API_INVALID_ARGUMENT, "%s", msg ?: "no such file");
        return k;
}

static int exec_with_user(int fd, const StartRequest *s, const char *user, ProtoFrame *ret, ApiError *e) {
        _cleanup_free_ char *base = NULL, *json = NULL;
        size_t n;
        int k;

        /* the EXEC built so far is an open object: copy it and add the user */
        if (s->exec.error || !s->exec.buf)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        base = memdup_suffix0(s->exec.buf, s->exec.n);
        if (!base)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        json = strdup_printf("%s,\"user\":\"%s\"}", base, user); /* user names are validated: no escaping needed */
        if (!json)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        n = strlen(json);
        k = proto_send(fd, PROTO_EXEC, AGENT_STREAM, json, n);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        return agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, ret, e);
}

static int parse_started(const ProtoFrame *f, E2bProc *ret, ApiError *e) {
        _cleanup_json_ JsonValue *v = NULL;
        int k;

        k = agent_call_parse(f, &v, e);
        if (k < 0)
                return k;
        if (ps_entry(v, ret) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed STARTED payload");
        return 0;
}

static int process_start(E2bEnvd *x) {
        _cleanup_(start_request_done) StartRequest s = {};
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_close_ int fd = -EBADF;
        ApiRequest *r = x->r;
        ApiError e = {};
        E2bProc p = {};
        bool unknown_user = false;
        JsonWriter w;
        int k;

        json_w_init(&s.exec);
        k = e2b_rpc_read(x, true, &req, &e);
        if (k >= 0)
                k = parse_start(req, x->sb.env_json, e2b_rpc_timeout_ms(r), &s, &e);
        if (k >= 0)
                k = e2b_envd_agent(x, &fd, &e);
        if (k < 0)
                return e.code == API_BAD_GATEWAY ? e2b_reply_gone(r, x->sb.id) : e2b_stream_fail(r, &e);

        for (int attempt = 0;; attempt++) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                const char *user = attempt == 0 && x->user[0] ? x->user : attempt == 0 ? E2B_DEFAULT_USER : "root";

                k = exec_with_user(fd, &s, user, &f, &e);
                if (k < 0)
                        return e2b_stream_fail(r, &e);
                if (f.type == PROTO_STARTED) {
                        k = parse_started(&f, &p, &e);
                        if (k < 0)
                                return e2b_stream_fail(r, &e);
                        break;
                }
                if (f.type != PROTO_ERROR) {
                        (void) api_error(&e, -EBADMSG, API_BAD_GATEWAY, "the agent answered EXEC with %s",
                                         proto_type_to_string(f.type) ?: "an unknown frame");
                        return e2b_stream_fail(r, &e);
                }
                unknown_user = false;
                k = exec_refused(&f, s.cwd, &unknown_user, &e);
                /* the default user does not exist in this template: run as root */
                if (attempt == 0 && unknown_user && !x->user[0])
                        continue;
                return e2b_stream_fail(r, &e);
        }

        e2b_procs_add(x->sb.id, p.pid, p.exec_id, TAKE_PTR(s.tag), TAKE_PTR(s.cwd), TAKE_PTR(s.envs_json));
        if (e2b_stream_begin(r) < 0) {
                e2b_drain_start(TAKE_FD(fd), x->sb.id, p.exec_id);
                return 0;
        }
        json_w_init(&w);
        start_event(&w, p.pid);
        if (e2b_stream_send(r, &w) < 0) {
                json_w_done(&w);
                e2b_drain_start(TAKE_FD(fd), x->sb.id, p.exec_id);
                http_conn_set_close(r->conn);
                return 0;
        }
        json_w_done(&w);
        Relay rl = { .x = x, .fd = fd, .owner = true, .pty = s.pty, .exec_id = p.exec_id };
        k = relay(&rl);
        fd = rl.fd; /* -EBADF if a drainer took it */
        return k;
}

/* ---- Connect ---- */

static int process_connect(E2bEnvd *x) {
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_close_ int fd = -EBADF;
        ApiRequest *r = x->r;
        uint64_t timeout = e2b_rpc_timeout_ms(r);
        ApiError e = {};
        E2bProc p = {};
        JsonWriter w;
        int k;

        k = e2b_rpc_read(x, true, &req, &e);
        if (k >= 0)
                k = e2b_envd_agent(x, &fd, &e);
        if (k < 0 && e.code == API_BAD_GATEWAY)
                return e2b_reply_gone(r, x->sb.id);
        if (k >= 0)
                k = e2b_proc_resolve(x, fd, e2b_field(req, "process", NULL), &p, &e);
        if (k >= 0)
                k = e2b_proc_attach(fd, p.exec_id, true, &e);
        if (k < 0)
                return e2b_stream_fail(r, &e);
        if (e2b_stream_begin(r) < 0)
                return 0;
        json_w_init(&w);
        start_event(&w, p.pid);
        k = e2b_stream_send(r, &w);
        json_w_done(&w);
        if (k < 0) {
                http_conn_set_close(r->conn);
                return 0;
        }
        Relay rl = { .x = x, .fd = fd, .pty = p.pty, .exec_id = p.exec_id,
                     .deadline_msec = timeout > 0 ? mono_msec() + timeout : 0 };
        return relay(&rl);
}

/* ---- unary calls ---- */

static int process_list(E2bEnvd *x, ApiError *e) {
        _cleanup_json_ JsonValue *req = NULL, *ps = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_close_ int fd = -EBADF;
        const JsonValue *list = NULL;
        int k;

        json_w_init(&w);
        k = e2b_rpc_read(x, false, &req, e);
        if (k >= 0)
                k = e2b_envd_agent(x, &fd, e);
        if (k >= 0)
                k = agent_ps(fd, &ps, &list, e);
        if (k < 0)
                return k;
        json_w_object_begin(&w);
        json_w_key(&w, "processes");
        json_w_array_begin(&w);
        for (size_t i = 0; i < json_array_size(list); i++) {
                const JsonValue *entry = json_array_at(list, i), *argv = json_get(entry, "argv");
                _cleanup_free_ char *tag = NULL;
                bool known = false;
                E2bProc p;

                if (ps_entry(entry, &p) < 0 || json_type(argv) != JSON_ARRAY || json_array_size(argv) == 0)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed process entry");
                json_w_object_begin(&w);
                json_w_key(&w, "config");
                json_w_object_begin(&w);
                for (size_t j = 0; j < json_array_size(argv); j++) {
                        const JsonValue *a = json_array_at(argv, j);
                        if (json_type(a) != JSON_STRING)
                                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed argv");
                        if (j == 0)
                                json_w_kv_string(&w, "cmd", json_string(a));
                        if (j == 1) {
                                json_w_key(&w, "args");
                                json_w_array_begin(&w);
                        }
                        if (j >= 1)
                                json_w_string_n(&w, json_string(a), json_string_len(a));
                }
                if (json_array_size(argv) > 1)
                        json_w_array_end(&w);
                e2b_procs_write_config(&w, x->sb.id, p.exec_id, &known, &tag);
                if (!known) {
                        json_w_key(&w, "envs");
                        json_w_object_begin(&w);
                        json_w_object_end(&w);
                }
                json_w_object_end(&w);
                json_w_kv_int(&w, "pid", p.pid);
                if (tag)
                        json_w_kv_string(&w, "tag", tag);
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        return e2b_unary_reply(x->r, &w);
}

int e2b_proc_empty_reply(E2bEnvd *x) {
        JsonWriter w;
        int k;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_object_end(&w);
        k = e2b_unary_reply(x->r, &w);
        json_w_done(&w);
        return k;
}

static int process_signal(E2bEnvd *x, ApiError *e) {
        static const char *const signals[] = { [0] = "SIGNAL_UNSPECIFIED", [9] = "SIGNAL_SIGKILL",
                                               [15] = "SIGNAL_SIGTERM" };
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_close_ int fd = -EBADF;
        const JsonValue *v;
        char json[E2B_EXEC_ID_MAX + 64];
        int sig = 0, k;
        E2bProc p;

        k = e2b_rpc_read(x, false, &req, e);
        if (k < 0)
                return k;
        v = e2b_field(req, "signal", NULL);
        if (!v || e2b_enum(v, signals, ELEMENTSOF(signals), &sig) < 0 || sig == 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
        k = e2b_envd_agent(x, &fd, e);
        if (k >= 0)
                k = e2b_proc_resolve(x, fd, e2b_field(req, "process", NULL), &p, e);
        if (k < 0)
                return k;
        snprintf(json, sizeof json, "{\"signal\":\"%s\",\"exec_id\":\"%s\"}", sig == 9 ? "SIGKILL" : "SIGTERM",
                 p.exec_id);
        k = agent_call_json(fd, PROTO_SIGNAL, json, NULL, NULL, e);
        if (k < 0) {
                if (e->code == API_NOT_FOUND)
                        (void) api_error(e, k, API_NOT_FOUND, "process with pid %" PRIu32 " not found", p.pid);
                return k;
        }
        return e2b_proc_empty_reply(x);
}

static int process_update(E2bEnvd *x, ApiError *e) {
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_close_ int fd = -EBADF;
        const JsonValue *pty, *size;
        uint32_t cols = 0, rows = 0;
        char json[E2B_EXEC_ID_MAX + 96];
        E2bProc p;
        int k;

        k = e2b_rpc_read(x, false, &req, e);
        if (k < 0)
                return k;
        pty = e2b_field(req, "pty", NULL);
        if (!pty)
                return e2b_proc_empty_reply(x); /* nothing to change */
        size = e2b_field(pty, "size", NULL);
        if (!size || e2b_uint32(e2b_field(size, "cols", NULL), &cols) < 0 ||
            e2b_uint32(e2b_field(size, "rows", NULL), &rows) < 0 || cols == 0 || rows == 0 ||
            cols > E2B_PTY_DIM_MAX || rows > E2B_PTY_DIM_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "pty.size needs cols and rows from 1 to %u",
                                 E2B_PTY_DIM_MAX);
        k = e2b_envd_agent(x, &fd, e);
        if (k >= 0)
                k = e2b_proc_resolve(x, fd, e2b_field(req, "process", NULL), &p, e);
        if (k < 0)
                return k;
        if (!p.pty)
                return api_error(e, -ENOTTY, API_INVALID_ARGUMENT, "process %" PRIu32 " has no pty", p.pid);
        snprintf(json, sizeof json, "{\"rows\":%" PRIu32 ",\"cols\":%" PRIu32 ",\"exec_id\":\"%s\"}", rows, cols,
                 p.exec_id);
        k = agent_call_json(fd, PROTO_RESIZE, json, NULL, NULL, e);
        if (k < 0)
                return k;
        return e2b_proc_empty_reply(x);
}

int e2b_process_handle(E2bEnvd *x, const char *method) {
        static const E2bUnaryMethod methods[] = {
                { "List", process_list },
                { "SendInput", e2b_process_send_input },
                { "CloseStdin", e2b_process_close_stdin },
                { "SendSignal", process_signal },
                { "Update", process_update },
        };

        if (streq(method, "Start"))
                return process_start(x);
        if (streq(method, "Connect"))
                return process_connect(x);
        if (streq(method, "StreamInput"))
                return e2b_process_stream_input(x);
        return e2b_unary_dispatch(x, "process.Process", methods, ELEMENTSOF(methods), method);
}
