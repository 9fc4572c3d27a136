/* SPDX-License-Identifier: MIT */
/* space exec, and the exec engine shared with space shell.
 *
 * The main thread reads the NDJSON event stream of POST .../exec and writes
 * stdout/stderr. With stdin forwarding a second thread (a "pump") reads our
 * stdin and window changes and sends them as POST .../stdin and .../resize on
 * a second keep-alive connection; the main thread stops it at the exit event.
 * A thread (not poll on one socket) because the HTTP client buffers
 * internally and a poll on its fd could miss buffered events. */

#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include "base64.h"
#include "cli-exec.h"
#include "cli-tty.h"
#include "cli-verbs.h"
#include "fd-util.h"

#define CLI_PUMP_BUFFER (64U * 1024U)
#define CLI_PUMP_TIMEOUT_MSEC 30000

typedef struct StdinPump {
        pthread_t thread;
        bool started;
        int wake[2];
        int winch_fd; /* -1: no resizes */
        int in_fd;
        void (*on_input)(void *userdata, size_t n);
        void *userdata;
        char *headers_octet, *headers_json;
        char *stdin_target, *eof_target, *resize_target;
        HttpClient *client; /* owned by the thread */
} StdinPump;

/* POST on the pump's connection. The client resends once by itself when an
 * idle keep-alive connection was closed; a request that could not be sent is
 * tried once more on a fresh connection. Returns 0, or < 0 (not printed). */
static int pump_post(StdinPump *p, const char *target, const char *headers, const void *body, size_t n) {
        _cleanup_free_ char *ignored = NULL;
        const HttpHead *h = NULL;
        size_t m = 0;
        int r, status;

        for (int attempt = 0;; attempt++) {
                if (!p->client) {
                        r = http_client_new(cli_url(), &p->client);
                        if (r < 0)
                                return r;
                        http_client_set_timeout(p->client, CLI_PUMP_TIMEOUT_MSEC);
                }
                r = http_client_request(p->client, "POST", target, headers, body, n);
                if (r >= 0)
                        break;
                p->client = http_client_free(p->client);
                if (attempt > 0)
                        return r;
        }
        r = http_client_response(p->client, &h);
        if (r < 0) {
                p->client = http_client_free(p->client);
                return r;
        }
        status = h->status;
        r = http_client_read_body_all(p->client, CLI_PUMP_BUFFER, &ignored, &m);
        if (r < 0)
                p->client = http_client_free(p->client);
        return status >= 400 ? -EIO : 0;
}

static void pump_resize(StdinPump *p) {
        unsigned rows, cols;
        char body[64];

        if (cli_tty_size(&rows, &cols) < 0)
                return;
        snprintf(body, sizeof body, "{\"rows\":%u,\"cols\":%u}", rows, cols);
        (void) pump_post(p, p->resize_target, p->headers_json, body, strlen(body));
}

static void *pump_thread(void *userdata) {
        StdinPump *p = userdata;
        _cleanup_free_ char *buf = malloc(CLI_PUMP_BUFFER);
        bool in_open = true;
        sigset_t ss;

        /* Window changes are handled here, not in the thread that reads the stream. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGWINCH);
        pthread_sigmask(SIG_UNBLOCK, &ss, NULL);

        if (!buf)
                return NULL;
        for (;;) {
                struct pollfd fds[3] = {
                        { .fd = p->wake[0], .events = POLLIN },
                        { .fd = in_open ? p->in_fd : -1, .events = POLLIN },
                        { .fd = p->winch_fd, .events = POLLIN },
                };

                if (poll(fds, ELEMENTSOF(fds), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (fds[0].revents)
                        break;
                if (fds[2].revents & POLLIN) {
                        cli_tty_winch_drain(p->winch_fd);
                        pump_resize(p);
                }
                if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        ssize_t n = read(p->in_fd, buf, CLI_PUMP_BUFFER);
                        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (n <= 0) {
                                (void) pump_post(p, p->eof_target, p->headers_octet, "", 0);
                                in_open = false;
                                continue;
                        }
                        /* A refused write means the process is gone: its exit event follows. */
                        if (pump_post(p, p->stdin_target, p->headers_octet, buf, (size_t) n) < 0)
                                in_open = false;
                        else if (p->on_input)
                                p->on_input(p->userdata, (size_t) n);
                }
        }
        p->client = http_client_free(p->client);
        return NULL;
}

static void pump_stop(StdinPump *p) {
        if (p->started) {
                (void) !write(p->wake[1], "x", 1);
                pthread_join(p->thread, NULL);
                p->started = false;
        }
        p->wake[0] = safe_close(p->wake[0]);
        p->wake[1] = safe_close(p->wake[1]);
        p->headers_octet = mfree(p->headers_octet);
        p->headers_json = mfree(p->headers_json);
        p->stdin_target = mfree(p->stdin_target);
        p->eof_target = mfree(p->eof_target);
        p->resize_target = mfree(p->resize_target);
}

static int pump_start(StdinPump *p, const char *id_escaped, const char *exec_id, bool resize, int in_fd) {
        _cleanup_free_ char *eid = cli_escape(exec_id);
        sigset_t ss;
        int r;

        if (!eid)
                return cli_error_errno(-ENOMEM, "out of memory");
        p->stdin_target = strjoin("/v1/sandboxes/", id_escaped, "/exec/", eid, "/stdin");
        p->eof_target = strjoin("/v1/sandboxes/", id_escaped, "/exec/", eid, "/stdin?eof=1");
        p->resize_target = strjoin("/v1/sandboxes/", id_escaped, "/exec/", eid, "/resize");
        if (!p->stdin_target || !p->eof_target || !p->resize_target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_headers("Content-Type: application/octet-stream\r\n", &p->headers_octet);
        if (r < 0)
                return r;
        r = cli_headers("Content-Type: application/json\r\n", &p->headers_json);
        if (r < 0)
                return r;
        if (pipe2(p->wake, O_CLOEXEC) < 0)
                return cli_error_errno(negative_errno(), "pipe failed: %m");
        p->in_fd = in_fd > 0 ? in_fd : STDIN_FILENO;
        p->winch_fd = -1;
        if (resize && cli_tty_winch_fd(&p->winch_fd) < 0)
                p->winch_fd = -1;

        /* The stream reader keeps SIGWINCH blocked; the pump unblocks it for itself. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGWINCH);
        pthread_sigmask(SIG_BLOCK, &ss, NULL);
        (void) cli_url(); /* fill the cache before a second thread reads it */

        r = -pthread_create(&p->thread, NULL, pump_thread, p);
        if (r < 0)
                return cli_error_errno(r, "cannot start the stdin thread: %m");
        p->started = true;
        return 0;
}

/* Writes all of (p, n) to fd, also when fd is non-blocking. */
static int write_all(int fd, const char *p, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                                (void) poll(&pfd, 1, -1);
                                continue;
                        }
                        return negative_errno();
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

static int signal_from_name(const char *name) {
        const char *s = startswith(name, "SIG") ?: name;
        for (int sig = 1; sig < 65; sig++) {
                const char *abbrev = sigabbrev_np(sig);
                if (abbrev && streq(abbrev, s))
                        return sig;
        }
        return 0;
}

/* Exit code of an exit event: "code", else 128 + the signal. */
static int exit_code_of(const JsonValue *ev) {
        int64_t code;
        const char *sig = json_string(json_get(ev, "signal"));

        if (json_int64(json_get(ev, "code"), &code) >= 0 && code >= 0 && code <= 255)
                return (int) code;
        if (sig) {
                int s = signal_from_name(sig);
                if (s > 0)
                        return 128 + s;
        }
        return 255;
}

static bool looks_not_found(const char *message) {
        return message && (strstr(message, "No such file") || strstr(message, "not found"));
}

/* Raw events on stdout (--json), or the command's output. */
static bool events_json(const CliExecOptions *o) {
        return arg_json && !o->plain;
}

static int build_body(const CliExecOptions *o, bool stream_fields, char **ret, size_t *ret_len) {
        _cleanup_(json_w_done) JsonWriter w = {};

        json_w_init(&w);
        json_w_object_begin(&w);
        if (o->cmd) {
                json_w_key(&w, "cmd");
                json_w_array_begin(&w);
                for (char **s = o->cmd; *s; s++)
                        json_w_string(&w, *s);
                json_w_array_end(&w);
        } else
                json_w_kv_string(&w, "shell", o->shell);
        if (o->env) {
                json_w_key(&w, "env");
                json_w_object_begin(&w);
                for (char **s = o->env; *s; s++) {
                        _cleanup_free_ char *k = NULL;
                        const char *v;
                        int r = cli_parse_kv("env", *s, &k, &v);
                        if (r < 0)
                                return r;
                        json_w_kv_string(&w, k, v);
                }
                json_w_object_end(&w);
        }
        if (o->cwd)
                json_w_kv_string(&w, "cwd", o->cwd);
        if (o->user)
                json_w_kv_string(&w, "user", o->user);
        if (o->have_timeout) {
                json_w_key(&w, "timeout_s");
                json_w_uint(&w, o->timeout_s);
        }
        if (o->interactive)
                json_w_kv_bool(&w, "stdin", true); /* with background: open for 'space stdin' */
        if (o->background)
                json_w_kv_bool(&w, "background", true);
        /* exact bytes at 4/3 of their size (text would be up to 6x); --json shows what the server sends by default */
        if (!events_json(o) && stream_fields)
                json_w_kv_string(&w, "output", "base64");
        /* Interrupting space exec on a terminal ends its command (on a pty it gets SIGHUP, the
         * default). Into a pipe the command outlives a stalled or interrupted space exec (the server's
         * default, keep): space attach reads on. */
        if (o->on_disconnect && stream_fields)
                json_w_kv_string(&w, "on_disconnect", o->on_disconnect);
        else if (!o->pty && !o->background && isatty(STDOUT_FILENO) && stream_fields)
                json_w_kv_string(&w, "on_disconnect", "kill");
        if (o->pty) {
                unsigned rows, cols;
                json_w_key(&w, "pty");
                if (cli_tty_size(&rows, &cols) >= 0) {
                        json_w_object_begin(&w);
                        json_w_kv_int(&w, "rows", rows);
                        json_w_kv_int(&w, "cols", cols);
                        json_w_object_end(&w);
                } else
                        json_w_bool(&w, true);
        }
        json_w_object_end(&w);
        if (json_w_finish(&w, ret, ret_len) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");
        return 0;
}

/* Errors before the stream: a 404 that names the command (not the sandbox) counts as "not found". */
static int report_start_error(const CliExecOptions *o, int status, const char *body, size_t len) {
        if (o->quiet_not_found && status == 404 && o->cmd && body) {
                _cleanup_json_ JsonValue *v = NULL;
                if (json_parse(body, len, &v, NULL, 0) >= 0) {
                        const char *m = json_string(json_get(json_get(v, "error"), "message"));
                        if (m && strstr(m, o->cmd[0]))
                                return CLI_EXEC_NOT_FOUND;
                }
        }
        return cli_report_response(status, body, len);
}

/* Output of one stdout/stderr event; returns < 0 if our own output is gone. */
static int event_output(const JsonValue *ev, int fd, const CliExecOptions *o) {
        const JsonValue *data = json_get(ev, "data");
        const JsonValue *b64 = json_get(ev, "data_b64");

        bool count = o->on_output && fd != STDERR_FILENO;

        if (data && json_type(data) == JSON_STRING) {
                if (count)
                        o->on_output(o->userdata, json_string_len(data));
                return write_all(fd, json_string(data), json_string_len(data));
        }
        if (b64 && json_type(b64) == JSON_STRING) {
                _cleanup_free_ void *bytes = NULL;
                size_t n = 0;
                if (base64_decode(json_string(b64), json_string_len(b64), &bytes, &n) < 0) {
                        cli_tty_restore();
                        return cli_error("the server sent invalid base64 data");
                }
                if (count)
                        o->on_output(o->userdata, n);
                return write_all(fd, bytes, n);
        }
        return 0;
}

/* Reads the event stream of c (its response head read) to the exit: output
 * to stdout/stderr, or with --json the raw events. */
static int stream_events(HttpClient *c, CliExecOptions *o, const char *id_escaped, int *ret_code) {
        _cleanup_(cli_line_reader_done) CliLineReader lr = { .quiet_timeout = o->idle_msec > 0 };
        bool json = events_json(o);
        int out_fd = o->out_fd > 0 ? o->out_fd : STDOUT_FILENO;
        _cleanup_(pump_stop) StdinPump pump = { .wake = { -1, -1 }, .winch_fd = -1 };
        bool seen_output = false, not_found = false, done = false, warned_dropped = false;
        int r, code = 0;

        while (!done) {
                _cleanup_json_ JsonValue *ev = NULL;
                char errbuf[128] = "", *line;
                const char *type;
                size_t n;

                r = cli_line_reader_next(&lr, c, &line, &n);
                if (r == -ETIMEDOUT && o->idle_msec > 0) {
                        /* caught up with what the sandbox holds; the command runs on */
                        *ret_code = -1;
                        return 0;
                }
                if (r < 0) {
                        cli_tty_restore();
                        return r;
                }
                if (r == 0)
                        break;
                if (n == 0)
                        continue;
                r = json_parse(line, n, &ev, errbuf, sizeof errbuf);
                if (r < 0) {
                        cli_tty_restore();
                        return cli_error_errno(r, "the server sent an invalid event: %s", errbuf);
                }
                if (json) {
                        r = write_all(STDOUT_FILENO, line, n);
                        if (r >= 0)
                                r = write_all(STDOUT_FILENO, "\n", 1);
                        if (r < 0) {
                                *ret_code = 141; /* our reader went away: like a shell's SIGPIPE */
                                return 0;
                        }
                }
                type = strempty(json_string(json_get(ev, "type")));

                if (streq(type, "start")) {
                        const char *exec_id = json_string(json_get(ev, "exec_id"));
                        if (o->background && !isempty(exec_id) && !o->exec_id) {
                                o->exec_id = strdup(exec_id);
                                if (!o->exec_id)
                                        return cli_error_errno(-ENOMEM, "out of memory");
                        }
                        if (o->idle_msec > 0)
                                http_client_set_timeout(c, o->idle_msec);
                        if (o->background) {
                                *ret_code = 0;
                                return 0; /* a background exec's answer is its start line */
                        }
                        if (o->interactive && !pump.started && !isempty(exec_id)) {
                                bool raw = false;
                                if (o->raw) {
                                        r = cli_tty_raw_begin(STDIN_FILENO);
                                        if (r < 0)
                                                return cli_error_errno(r, "cannot set the terminal to raw mode: %m");
                                        raw = r > 0;
                                }
                                pump.on_input = o->on_input;
                                pump.userdata = o->userdata;
                                r = pump_start(&pump, id_escaped, exec_id, o->pty && raw, o->in_fd);
                                if (r < 0) {
                                        cli_tty_restore();
                                        return r;
                                }
                        }
                } else if (streq(type, "stdout") || streq(type, "stderr")) {
                        seen_output = true;
                        if (json)
                                continue;
                        r = event_output(ev, streq(type, "stdout") ? out_fd : STDERR_FILENO, o);
                        if (r == -EPIPE) {
                                *ret_code = 141;
                                return 0;
                        }
                        if (r < 0)
                                return r == CLI_EREPORTED || r == -EINVAL ? r : cli_error_errno(r, "write failed: %m");
                } else if (streq(type, "dropped")) {
                        uint64_t bytes = 0;
                        if (!json && !warned_dropped && json_uint64(json_get(ev, "bytes"), &bytes) >= 0) {
                                cli_tty_restore();
                                cli_error_errno(CLI_EREPORTED,
                                                "%" PRIu64 " bytes of output were lost (this reader fell behind the "
                                                "sandbox's output buffer)", bytes);
                                warned_dropped = true;
                        }
                } else if (streq(type, "error")) {
                        const char *message = json_string(json_get(ev, "message"));
                        if (o->quiet_not_found && !seen_output && looks_not_found(message))
                                not_found = true;
                        else if (!json) {
                                cli_tty_restore();
                                cli_error_errno(CLI_EREPORTED, "%s",
                                                message ?: strna(json_string(json_get(ev, "code"))));
                        }
                } else if (streq(type, "exit")) {
                        const char *reason = json_string(json_get(ev, "reason"));
                        const char *sig = json_string(json_get(ev, "signal"));
                        code = exit_code_of(ev);
                        done = true;
                        if (!json && !isempty(reason)) {
                                cli_tty_restore();
                                cli_error_errno(CLI_EREPORTED, "command %s%s%s", sig ? "killed by " : "stopped",
                                                strempty(sig),
                                                streq(reason, "timeout") ? " (timeout)"
                                                : streq(reason, "oom")   ? " (out of memory)"
                                                                         : "");
                        }
                }
        }

        pump_stop(&pump);
        cli_tty_restore();
        if (!done)
                return cli_error("the connection closed before the command finished");
        if (not_found)
                return CLI_EXEC_NOT_FOUND;
        *ret_code = code;
        return 0;
}

/* One request whose answer is an exec event stream. */
static int request_stream(HttpClient **ret, const char *method, const char *target, const char *body,
                          size_t body_len, const CliExecOptions *o) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *headers = NULL;
        const HttpHead *h = NULL;
        int r;

        r = cli_headers(body ? "Content-Type: application/json\r\n" : "", &headers);
        if (r < 0)
                return r;
        r = cli_connect(&c);
        if (r < 0)
                return r;
        r = http_client_request(c, method, target, headers, body, body_len);
        if (r >= 0)
                r = http_client_response(c, &h);
        if (r < 0)
                return cli_report_connect(r);
        if (h->status >= 400) {
                _cleanup_free_ char *err = NULL;
                size_t n = 0;
                int status = h->status;
                (void) http_client_read_body_all(c, CLI_RESPONSE_MAX, &err, &n);
                /* a server from before exec buffers: say so to the caller, who asks again without them */
                if (status == 400 && err && body &&
                    (strstr(err, "unknown field 'output'") || strstr(err, "unknown field 'on_disconnect'")))
                        return -EPROTO;
                return report_start_error(o, status, err, n);
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int cli_exec_run(const char *id, CliExecOptions *o, int *ret_code) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *body = NULL, *id_escaped = NULL, *target = NULL;
        size_t body_len = 0;
        int r;

        r = build_body(o, true, &body, &body_len);
        if (r < 0)
                return r;
        id_escaped = cli_escape(id);
        target = id_escaped ? strjoin("/v1/sandboxes/", id_escaped, "/exec") : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = request_stream(&c, "POST", target, body, body_len, o);
        if (r == -EPROTO) { /* an older server: the text form, its own disconnect rule */
                body = mfree(body);
                r = build_body(o, false, &body, &body_len);
                if (r >= 0)
                        r = request_stream(&c, "POST", target, body, body_len, o);
                if (r == -EPROTO)
                        r = cli_error("the server refused the exec request");
        }
        if (r < 0)
                return r;
        return stream_events(c, o, id_escaped, ret_code);
}

int cli_exec_output(const char *id, const char *exec_id, uint64_t from, CliExecOptions *o, int *ret_code) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *id_escaped = NULL, *eid = NULL, *target = NULL;
        char query[64];
        int r;

        id_escaped = cli_escape(id);
        eid = cli_escape(exec_id);
        snprintf(query, sizeof query, "/output?from=%" PRIu64 "%s", from, events_json(o) ? "" : "&output=base64");
        target = id_escaped && eid ? strjoin("/v1/sandboxes/", id_escaped, "/exec/", eid, query) : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = request_stream(&c, "GET", target, NULL, 0, o);
        if (r < 0)
                return r;
        return stream_events(c, o, id_escaped, ret_code);
}

/* space attach ID EXEC_ID [--from N]: an exec's output from offset N (default:
 * all that is kept), then on to its end; exits with its code. */
int cli_attach(int argc, char **argv) {
        static const CliOption attach_options[] = { { "from", 0, true, 1 }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        const char *arg = NULL;
        CliExecOptions o = {};
        uint64_t from = 0;
        int r, code = 0;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, attach_options, &arg)) > 0)
                if (cli_parse_u64("from", arg, &from) < 0)
                        return -EINVAL;
        r = cli_parser_end(&p, r, 2, 2);
        if (r <= 0)
                return r;
        r = cli_exec_output(p.pos[0], p.pos[1], from, &o, &code);
        free(o.exec_id);
        if (r < 0)
                return r;
        return code;
}

enum {
        OPT_TIMEOUT = 1,
        OPT_ENV,
        OPT_CWD,
        OPT_USER,
        OPT_TTY,
        OPT_INTERACTIVE,
        OPT_DETACH,
        OPT_ON_DISCONNECT,
};

static const CliOption options[] = {
        { "timeout", 0, true, OPT_TIMEOUT },
        { "env", 'e', true, OPT_ENV },
        { "cwd", 'w', true, OPT_CWD },
        { "user", 'u', true, OPT_USER },
        { "tty", 't', false, OPT_TTY },
        { "interactive", 'i', false, OPT_INTERACTIVE },
        { "detach", 'd', false, OPT_DETACH },
        { "on-disconnect", 0, true, OPT_ON_DISCONNECT },
        {},
};

int cli_exec(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_strv_free_ char **env = NULL, **cmd = NULL;
        CliExecOptions o = {};
        const char *arg = NULL;
        int r, code = 0;

        r = cli_parser_init(&p, argc, argv, 1);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, options, &arg)) > 0) {
                switch (r) {
                case OPT_TIMEOUT:
                        if (cli_parse_u64("timeout", arg, &o.timeout_s) < 0)
                                return -EINVAL;
                        o.have_timeout = true;
                        break;
                case OPT_ENV: {
                        _cleanup_free_ char *k = NULL;
                        const char *v;
                        if (cli_parse_kv("env", arg, &k, &v) < 0)
                                return -EINVAL;
                        if (strv_extend(&env, arg) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                        break;
                }
                case OPT_CWD:
                        o.cwd = arg;
                        break;
                case OPT_USER:
                        o.user = arg;
                        break;
                case OPT_TTY:
                        o.pty = true;
                        break;
                case OPT_INTERACTIVE:
                        o.interactive = true;
                        break;
                case OPT_DETACH:
                        o.background = true;
                        break;
                case OPT_ON_DISCONNECT:
                        if (!streq(arg, "keep") && !streq(arg, "hangup") && !streq(arg, "kill"))
                                return cli_usage_error("--on-disconnect: expected keep, hangup or kill, got '%s'", arg);
                        o.on_disconnect = arg;
                        break;
                }
        }
        if (r == CLI_OPT_HELP)
                return 0;
        if (r < 0)
                return r;
        if (p.n_pos < 1)
                return cli_usage_error("missing sandbox id (usage: space exec %s)", cli_current->usage);
        if (p.n_pos < 2)
                return cli_usage_error("missing command (usage: space exec %s)", cli_current->usage);
        for (size_t i = 1; i < p.n_pos; i++)
                if (strv_extend(&cmd, p.pos[i]) < 0)
                        return cli_error_errno(-ENOMEM, "out of memory");

        o.cmd = cmd;
        o.env = env;
        if (o.background && o.pty)
                return cli_usage_error("--detach does not go with --tty (read it with 'space attach' instead)");
        o.raw = o.pty && o.interactive;
        r = cli_exec_run(p.pos[0], &o, &code);
        if (r >= 0 && o.background) {
                if (!o.exec_id)
                        r = cli_error("the server's answer has no exec id");
                else if (!arg_json)
                        printf("%s\n", o.exec_id); /* with --json the start event was printed */
        }
        free(o.exec_id);
        if (r < 0)
                return r;
        return code;
}
