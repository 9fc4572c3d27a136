/* SPDX-License-Identifier: MIT */
/* A template's start command: a process every sandbox of the template runs
 * from its start (a dev server, a notebook kernel), and the check that says
 * it is ready. A create, restore or resume that starts the sandbox's
 * processes answers once the check passed; a start command that exits
 * first, or is not ready in time, fails it (the caller removes the
 * sandbox) with the command's last output in the message.
 *
 * The setting (JSON, validated by api_template_start_parse):
 *   {"command": "sh -c text", "cwd": "/dir", "user": "name", "env": {...},
 *    "ready": {"command": "..."} | {"port": N} | {"port": N, "path": "/x"},
 *    "timeout_s": N}
 * ready.command passes when it exits 0; ready.port when a TCP connection to
 * the port inside the sandbox opens; with path, when an HTTP GET of it
 * answers 200..399. No ready: the sandbox is ready once the command runs. */

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <time.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "fd-util.h"
#include "log.h"
#include "sock-io.h"
#include "str-util.h"
#include "time-util.h"

#define START_TIMEOUT_DEFAULT_S 60U
#define START_TIMEOUT_MAX_S 600U
#define START_COMMAND_MAX 4096U
#define START_PATH_MAX 1024U
#define START_TAIL_MAX 512U          /* output kept for the error message */
#define START_PROBE_MSEC 1000        /* one HTTP probe's answer, at most */
#define START_POLL_MIN_MSEC 20
#define START_POLL_MAX_MSEC 250

static int string_field(const JsonValue *o, const char *key, size_t max, bool required, const char **ret,
                        ApiError *e) {
        const JsonValue *v = json_get(o, key);

        *ret = NULL;
        if (!v || json_is_null(v)) {
                if (required)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "start.%s is required", key);
                return 0;
        }
        if (json_type(v) != JSON_STRING || json_string_len(v) == 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "start.%s must be a non-empty string", key);
        if (json_string_len(v) > max)
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "start.%s is longer than %zu bytes", key, max);
        if (memchr(json_string(v), 0, json_string_len(v)))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "start.%s contains a NUL byte", key);
        *ret = json_string(v);
        return 1;
}

static int parse_ready(const JsonValue *ready, JsonWriter *w, ApiError *e) {
        static const char *const allowed[] = { "command", "port", "path", NULL };
        const char *unknown = NULL, *cmd, *path;
        const JsonValue *port = json_get(ready, "port");
        uint64_t p = 0;
        int k;

        if (json_type(ready) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "start.ready must be an object: {\"command\":...}, {\"port\":N} or "
                                 "{\"port\":N,\"path\":\"/...\"}");
        if (json_check_keys(ready, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field 'start.ready.%.64s'", strna(unknown));
        k = string_field(ready, "command", START_COMMAND_MAX, false, &cmd, e);
        if (k < 0)
                return k;
        k = string_field(ready, "path", START_PATH_MAX, false, &path, e);
        if (k < 0)
                return k;
        if (port && !json_is_null(port) &&
            (json_type(port) != JSON_NUMBER || json_uint64(port, &p) < 0 || p < 1 || p > 65535))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "start.ready.port must be a port (1..65535)");
        if (!!cmd == !!p)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "start.ready takes either a command or a port (with an optional path)");
        if (path && !p)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "start.ready.path needs start.ready.port");
        if (path && (path[0] != '/' || strpbrk(path, " \r\n\t")))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "start.ready.path must start with '/' and hold no space or line break");
        json_w_key(w, "ready");
        json_w_object_begin(w);
        if (cmd)
                json_w_kv_string(w, "command", cmd);
        else
                json_w_kv_int(w, "port", (int64_t) p);
        if (path)
                json_w_kv_string(w, "path", path);
        json_w_object_end(w);
        return 0;
}

int api_template_start_parse(const JsonValue *v, char **ret_json, ApiError *e) {
        static const char *const allowed[] = { "command", "cwd", "user", "env", "ready", "timeout_s", NULL };
        _cleanup_(json_w_done) JsonWriter w;
        const char *unknown = NULL, *cmd, *s;
        const JsonValue *x;
        uint64_t timeout = START_TIMEOUT_DEFAULT_S;
        int k;

        json_w_init(&w);
        if (json_type(v) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "start must be an object ({\"command\":...}) or null (no start command)");
        if (json_check_keys(v, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field 'start.%.64s'", strna(unknown));
        json_w_object_begin(&w);
        k = string_field(v, "command", START_COMMAND_MAX, true, &cmd, e);
        if (k < 0)
                return k;
        json_w_kv_string(&w, "command", cmd);
        k = string_field(v, "cwd", START_PATH_MAX, false, &s, e);
        if (k < 0)
                return k;
        if (s) {
                k = api_validate_path(s, strlen(s), "start.cwd", e);
                if (k < 0)
                        return k;
                json_w_kv_string(&w, "cwd", s);
        }
        k = string_field(v, "user", 64, false, &s, e);
        if (k < 0)
                return k;
        if (s)
                json_w_kv_string(&w, "user", s); /* checked as an exec's user when it runs */
        x = json_get(v, "env");
        if (x && !json_is_null(x)) {
                _cleanup_free_ char *text = NULL;
                if (json_type(x) != JSON_OBJECT)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "start.env must be an object of strings");
                for (size_t i = 0; i < json_object_size(x); i++)
                        if (json_type(json_object_value(x, i)) != JSON_STRING)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "start.env must be an object of strings");
                if (json_serialize(x, &text, NULL) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                json_w_key(&w, "env");
                json_w_raw(&w, text);
        }
        x = json_get(v, "ready");
        if (x && !json_is_null(x)) {
                k = parse_ready(x, &w, e);
                if (k < 0)
                        return k;
        }
        x = json_get(v, "timeout_s");
        if (x && !json_is_null(x) &&
            (json_type(x) != JSON_NUMBER || json_uint64(x, &timeout) < 0 || timeout < 1 || timeout > START_TIMEOUT_MAX_S))
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT, "start.timeout_s must be between 1 and %u",
                                 START_TIMEOUT_MAX_S);
        json_w_kv_int(&w, "timeout_s", (int64_t) timeout);
        json_w_object_end(&w);
        if (json_w_finish(&w, ret_json, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if (strlen(*ret_json) >= STORE_SETTING_VALUE_MAX) {
                *ret_json = mfree(*ret_json);
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "start is longer than %u bytes as JSON",
                                 STORE_SETTING_VALUE_MAX - 1);
        }
        return 0;
}

/* The last START_TAIL_MAX bytes of the start command's output. */
typedef struct Tail {
        char buf[START_TAIL_MAX];
        size_t n;
} Tail;

static void tail_add(Tail *t, const char *p, size_t n) {
        if (n >= sizeof t->buf) {
                memcpy(t->buf, p + n - sizeof t->buf, sizeof t->buf);
                t->n = sizeof t->buf;
                return;
        }
        if (t->n + n > sizeof t->buf) {
                size_t drop = t->n + n - sizeof t->buf;
                memmove(t->buf, t->buf + drop, t->n - drop);
                t->n -= drop;
        }
        memcpy(t->buf + t->n, p, n);
        t->n += n;
}

/* The tail as one printable line for a message. */
static void tail_line(const Tail *t, char *out, size_t size) {
        size_t j = 0;

        for (size_t i = 0; i < t->n && j + 1 < size; i++) {
                unsigned char c = (unsigned char) t->buf[i];
                out[j++] = c == '\n' || c == '\r' || c == '\t' ? ' ' : c < 0x20 || c == 0x7f ? '?' : (char) c;
        }
        while (j > 0 && out[j - 1] == ' ')
                j--;
        out[j] = 0;
}

/* Reads what the start command's connection has (never blocks): 1 if it
 * exited (*ret_code, *ret_signal), 0 if it runs, -errno. */
static int drain(int fd, Tail *t, int64_t *ret_code, char *ret_signal, size_t signal_size) {
        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                _cleanup_json_ JsonValue *v = NULL;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int k = poll(&p, 1, 0);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return 0;
                k = proto_recv(fd, &f);
                if (k < 0)
                        return k == -ECONNRESET ? -ECONNRESET : -EBADMSG;
                if (f.stream != AGENT_STREAM)
                        continue;
                if (f.type == PROTO_STDOUT || f.type == PROTO_STDERR)
                        tail_add(t, f.payload, f.len);
                else if (f.type == PROTO_EXIT) {
                        *ret_code = -1;
                        ret_signal[0] = 0;
                        if (agent_call_parse(&f, &v, NULL) >= 0) {
                                (void) json_int64(json_get(v, "code"), ret_code);
                                (void) strscpy(ret_signal, signal_size, strempty(json_string(json_get(v, "signal"))));
                        }
                        return 1;
                }
        }
}

/* An HTTP GET of path answers 200..399. */
static bool http_ready(int fd, uint16_t port, const char *path) {
        char req[START_PATH_MAX + 128], head[64];
        size_t n = 0;
        int len, code;

        len = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost:%u\r\nConnection: close\r\n\r\n", path,
                       (unsigned) port);
        if (len < 0 || (size_t) len >= sizeof req || sock_send_all(fd, req, (size_t) len, START_PROBE_MSEC) < 0)
                return false;
        while (n < 12) {
                ssize_t got = sock_recv_some(fd, head + n, sizeof head - 1 - n, START_PROBE_MSEC);
                if (got <= 0)
                        return false;
                n += (size_t) got;
        }
        head[n] = 0;
        if (!startswith(head, "HTTP/1.") || sscanf(head + 8, " %3d", &code) != 1)
                return false;
        return code >= 200 && code < 400;
}

/* An exec request of the start setting's cwd and user running shell: the
 * start command itself (with its env, living on after its connection) or
 * its ready command (killed with it, at most timeout_s). */
static int exec_body(const JsonValue *start, const char *shell, bool start_command, int64_t timeout_s,
                     JsonValue **ret) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *text = NULL;
        const JsonValue *env = json_get(start, "env");
        const char *s;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "shell", shell);
        if (!start_command)
                json_w_kv_int(&w, "timeout_s", timeout_s);
        if ((s = json_string(json_get(start, "cwd"))))
                json_w_kv_string(&w, "cwd", s);
        if ((s = json_string(json_get(start, "user"))))
                json_w_kv_string(&w, "user", s);
        if (start_command && json_type(env) == JSON_OBJECT) {
                _cleanup_free_ char *e = NULL;
                if (json_serialize(env, &e, NULL) < 0)
                        return -ENOMEM;
                json_w_key(&w, "env");
                json_w_raw(&w, e);
        }
        /* the start command's frames come here until it is ready (an exit before is seen); it runs
         * on after this connection closes, its output buffered for readers like any exec's */
        json_w_kv_string(&w, "on_disconnect", start_command ? "keep" : "kill");
        json_w_object_end(&w);
        if (json_w_finish(&w, &text, NULL) < 0)
                return -ENOMEM;
        return json_parse(text, strlen(text), ret, NULL, 0);
}

/* Runs the ready command to its end: 1 if it exited 0, 0 if not, -errno
 * (e) if it could not run. */
static int command_ready(ApiRequest *r, const Sandbox *sb, const JsonValue *start, int64_t deadline, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_close_ int fd = -EBADF;
        char exec_id[API_EXEC_ID_MAX + 1], sig[32];
        int64_t pid, code = -1, left = deadline - mono_msec();
        Tail t = {};
        int k;

        if (exec_body(start, json_string(json_get(json_get(start, "ready"), "command")), false,
                      MAX(left / 1000, (int64_t) 1), &body) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = api_exec_launch(r, sb, body, &fd, exec_id, &pid, e);
        if (k < 0)
                return k;
        for (;;) {
                left = deadline - mono_msec();
                if (left <= 0)
                        return 0;
                k = sock_wait(fd, POLLIN, (int) MIN(left, (int64_t) START_POLL_MAX_MSEC * 4));
                if (k == -ETIMEDOUT)
                        continue;
                if (k < 0)
                        return api_error(e, k, API_BAD_GATEWAY, "waiting for the ready command failed");
                k = drain(fd, &t, &code, sig, sizeof sig);
                if (k < 0)
                        return api_error(e, k, API_BAD_GATEWAY, "the agent lost the ready command");
                if (k > 0)
                        return code == 0;
        }
}

static int check_ready(ApiRequest *r, const Sandbox *sb, const JsonValue *start, int64_t deadline, ApiError *e) {
        const JsonValue *ready = json_get(start, "ready");
        _cleanup_close_ int fd = -EBADF;
        uint64_t port = 0;
        ApiError ignored = {};

        if (!ready)
                return 1;
        if (json_get(ready, "command"))
                return command_ready(r, sb, start, deadline, e);
        if (json_uint64(json_get(ready, "port"), &port) < 0 || port < 1 || port > 65535)
                return api_error(e, -EBADMSG, API_INTERNAL, "the template's start setting is malformed");
        if (api_sandbox_dial(r, sb, (uint16_t) port, &fd, &ignored) < 0)
                return 0; /* nothing listens yet */
        if (!json_get(ready, "path"))
                return 1;
        return http_ready(fd, (uint16_t) port, json_string(json_get(ready, "path")));
}

int api_sandbox_run_start(ApiRequest *r, const char *sandbox_id, const char *start_json, ApiError *e) {
        _cleanup_json_ JsonValue *start = NULL, *body = NULL;
        _cleanup_close_ int fd = -EBADF;
        char exec_id[API_EXEC_ID_MAX + 1], sig[32] = "", line[START_TAIL_MAX + 1], data[160];
        int64_t pid = 0, code = -1, t0 = mono_msec(), deadline;
        uint64_t timeout_s = START_TIMEOUT_DEFAULT_S;
        unsigned wait_msec = START_POLL_MIN_MSEC;
        Sandbox sb = {};
        Tail t = {};
        int k;

        if (isempty(start_json))
                return 0;
        if (json_parse(start_json, strlen(start_json), &start, NULL, 0) < 0 || json_type(start) != JSON_OBJECT ||
            !json_string(json_get(start, "command")) ||
            exec_body(start, json_string(json_get(start, "command")), true, 0, &body) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "the template's start setting is malformed");
        (void) json_uint64(json_get(start, "timeout_s"), &timeout_s);
        deadline = t0 + (int64_t) MIN(timeout_s, (uint64_t) START_TIMEOUT_MAX_S) * 1000;

        k = api_sandbox_lookup(r, sandbox_id, true, &sb, e);
        if (k < 0)
                return k;
        k = api_exec_launch(r, &sb, body, &fd, exec_id, &pid, e);
        if (k < 0) {
                char why[API_ERROR_MESSAGE_MAX];
                (void) strscpy(why, sizeof why, e->message);
                (void) api_error(e, k, e->code == API_OK ? API_BAD_GATEWAY : e->code,
                                 "the template's start command could not run: %s", why);
                goto done;
        }
        for (;;) {
                k = drain(fd, &t, &code, sig, sizeof sig);
                if (k < 0) {
                        k = api_error(e, k, API_BAD_GATEWAY, "the agent lost the template's start command");
                        goto done;
                }
                tail_line(&t, line, sizeof line);
                if (k > 0) {
                        if (sig[0])
                                k = api_error(e, -ECHILD, API_BAD_GATEWAY,
                                              "the template's start command was killed (%s) before it was ready%s%s",
                                              sig, line[0] ? "; its output ended: " : "", line);
                        else
                                k = api_error(e, -ECHILD, API_BAD_GATEWAY,
                                              "the template's start command exited with code %" PRId64
                                              " before it was ready%s%s", code, line[0] ? "; its output ended: " : "",
                                              line);
                        goto done;
                }
                k = check_ready(r, &sb, start, deadline, e);
                if (k < 0)
                        goto done;
                if (k > 0)
                        break;
                if (mono_msec() >= deadline) {
                        k = api_error(e, -ETIMEDOUT, API_TIMEOUT,
                                      "the template's start command was not ready within %" PRIu64 " s%s%s", timeout_s,
                                      line[0] ? "; its output ended: " : "", line);
                        goto done;
                }
                (void) sock_wait(fd, POLLIN, (int) MIN((int64_t) wait_msec, MAX(deadline - mono_msec(), (int64_t) 1)));
                wait_msec = MIN(wait_msec * 2, (unsigned) START_POLL_MAX_MSEC);
        }
        snprintf(data, sizeof data, "{\"exec_id\":\"%s\",\"pid\":%" PRId64 ",\"ready_ms\":%" PRId64 "}", exec_id, pid,
                 mono_msec() - t0);
        api_event(r, sb.id, "sandbox.start_ready", "", data);
        k = 0;
done:
        if (k < 0)
                log_warning("The start command of sandbox %s failed: %s", sandbox_id, e->message);
        sandbox_done(&sb);
        return k;
}
