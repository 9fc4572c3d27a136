/* SPDX-License-Identifier: MIT */
/* The processes of a sandbox: space ps ID (GET .../exec), space kill ID
 * EXEC_ID [--signal S] (POST .../exec/EXEC_ID/signal) and space logs ID
 * [EXEC_ID] (the sandbox's events and what its running execs' buffers hold,
 * GET .../exec/EXEC_ID/output). */

#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli-exec.h"
#include "cli-verbs.h"

#define CLI_LOGS_IDLE_MSEC 1000 /* without --follow: the output is read until it is this quiet */
#define CLI_LOGS_EVENTS 20U

static char *sandbox_target(const char *id, const char *suffix) {
        _cleanup_free_ char *e = cli_escape(id);
        return e ? strjoin("/v1/sandboxes/", e, suffix) : NULL;
}

static char *argv_text(const JsonValue *argv) {
        _cleanup_free_ char *out = strdup("");

        for (size_t i = 0; out && i < json_array_size(argv); i++) {
                const char *a = json_string(json_array_at(argv, i));
                char *n = strjoin(out, i > 0 ? " " : "", strempty(a));
                free(out);
                out = n;
        }
        return TAKE_PTR(out);
}

/* GET .../exec: the list of running processes. */
static int processes_get(const char *id, CliResponse *resp, const JsonValue **ret) {
        _cleanup_free_ char *target = sandbox_target(id, "/exec");
        const JsonValue *list;
        int r;

        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("GET", target, NULL, resp);
        if (r < 0)
                return r;
        list = json_get(resp->json, "processes");
        if (json_type(list) != JSON_ARRAY)
                return cli_error("the server's answer has no process list");
        *ret = list;
        return 0;
}

int cli_ps(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(cli_table_done) CliTable t = {};
        static const char *const header[] = { "EXEC_ID", "PID", "PTY", "COMMAND" };
        const JsonValue *list = NULL;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, 1);
        if (r <= 0)
                return r;
        r = processes_get(p.pos[0], &resp, &list);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        r = cli_table_new(&t, header, ELEMENTSOF(header));
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_array_size(list); i++) {
                const JsonValue *e = json_array_at(list, i);
                bool pty = false;
                (void) json_bool(json_get(e, "pty"), &pty);
                char *row[] = {
                        cli_field_text(e, "exec_id"),
                        cli_field_text(e, "pid"),
                        strdup(pty ? "yes" : "no"),
                        argv_text(json_get(e, "argv")),
                };
                r = cli_table_add(&t, row);
                if (r < 0)
                        return r;
        }
        cli_table_print(&t, stdout);
        return 0;
}

/* "TERM", "SIGTERM", "15" → "SIGTERM". */
static int signal_name(const char *s, char *buf, size_t size) {
        const char *name = startswith(s, "SIG") ?: s;
        uint64_t n;

        if (safe_atou64(s, &n) >= 0) {
                const char *abbrev = n > 0 && n < 65 ? sigabbrev_np((int) n) : NULL;
                if (!abbrev)
                        return cli_usage_error("--signal: no signal number %s", s);
                snprintf(buf, size, "SIG%s", abbrev);
                return 0;
        }
        for (int sig = 1; sig < 65; sig++) {
                const char *abbrev = sigabbrev_np(sig);
                if (abbrev && streq(abbrev, name)) {
                        snprintf(buf, size, "SIG%s", abbrev);
                        return 0;
                }
        }
        return cli_usage_error("--signal: unknown signal '%s' (e.g. TERM, KILL, INT, HUP, 9)", s);
}

int cli_kill(int argc, char **argv) {
        static const CliOption kill_options[] = { { "signal", 's', true, 1 }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *eid = NULL, *suffix = NULL, *target = NULL, *body = NULL;
        const char *arg = NULL, *sig = "TERM";
        char name[32];
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, kill_options, &arg)) > 0)
                sig = arg;
        r = cli_parser_end(&p, r, 2, 2);
        if (r <= 0)
                return r;
        r = signal_name(sig, name, sizeof name);
        if (r < 0)
                return r;
        eid = cli_escape(p.pos[1]);
        suffix = eid ? strjoin("/exec/", eid, "/signal") : NULL;
        target = suffix ? sandbox_target(p.pos[0], suffix) : NULL;
        body = strjoin("{\"signal\":\"", name, "\"}");
        if (!target || !body)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("POST", target, body, &resp);
        if (r < 0)
                return r;
        if (!arg_json)
                printf("%s\n", p.pos[1]);
        return 0;
}

/* space stdin ID EXEC_ID [--eof]: our stdin to an exec started with stdin open
 * (space exec -d -i), one POST .../stdin a chunk; --eof closes its stdin after. */
int cli_stdin(int argc, char **argv) {
        static const CliOption stdin_options[] = { { "eof", 0, false, 1 }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_free_ char *eid = NULL, *suffix = NULL, *target = NULL, *eof_target = NULL, *headers = NULL;
        _cleanup_free_ char *buf = NULL;
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        const char *arg = NULL;
        bool eof = false;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, stdin_options, &arg)) > 0)
                eof = true;
        r = cli_parser_end(&p, r, 2, 2);
        if (r <= 0)
                return r;
        eid = cli_escape(p.pos[1]);
        suffix = eid ? strjoin("/exec/", eid, "/stdin") : NULL;
        target = suffix ? sandbox_target(p.pos[0], suffix) : NULL;
        eof_target = target ? strjoin(target, "?eof=1") : NULL;
        buf = malloc(CLI_IO_BUFFER);
        if (!eof_target || !buf)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_connect(&c);
        if (r < 0)
                return r;
        for (;;) {
                ssize_t n = read(STDIN_FILENO, buf, CLI_IO_BUFFER);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return cli_error_errno(negative_errno(), "reading stdin failed: %m");
                if (n == 0 && !eof)
                        return 0;
                r = cli_start(c, "POST", n == 0 ? eof_target : target, "application/octet-stream", buf, (size_t) n,
                              NULL);
                if (r < 0)
                        return r;
                _cleanup_free_ char *ignored = NULL;
                size_t m = 0;
                r = http_client_read_body_all(c, CLI_RESPONSE_MAX, &ignored, &m);
                if (r < 0)
                        return cli_error_errno(r, "reading the answer from %s failed: %m", cli_url());
                if (n == 0)
                        return 0;
        }
}

/* One exec's output: all the sandbox keeps, then (follow) on to its end. */
static int logs_exec(const char *id, const char *exec_id, bool follow) {
        CliExecOptions o = { .idle_msec = follow ? 0 : CLI_LOGS_IDLE_MSEC };
        int code = 0, r;

        r = cli_exec_output(id, exec_id, 0, &o, &code);
        return r < 0 ? r : 0;
}

int cli_logs(int argc, char **argv) {
        static const CliOption logs_options[] = { { "follow", 'f', false, 1 }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        const JsonValue *list = NULL;
        const char *arg = NULL;
        bool follow = false;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, logs_options, &arg)) > 0)
                follow = true;
        r = cli_parser_end(&p, r, 1, 2);
        if (r <= 0)
                return r;
        if (p.n_pos == 2)
                return logs_exec(p.pos[0], p.pos[1], follow);
        if (follow)
                return cli_usage_error("--follow needs an EXEC_ID (space logs ID EXEC_ID --follow)");

        /* The sandbox's history (its events), then each running exec's output. */
        if (!arg_json)
                printf("==> events of %s (newest last) <==\n", p.pos[0]);
        r = cli_events_show(p.pos[0], CLI_LOGS_EVENTS);
        if (r < 0)
                return r;
        r = processes_get(p.pos[0], &resp, &list);
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_array_size(list); i++) {
                const JsonValue *e = json_array_at(list, i);
                const char *eid = json_string(json_get(e, "exec_id"));
                _cleanup_free_ char *cmd = argv_text(json_get(e, "argv"));
                _cleanup_free_ char *pid = cli_field_text(e, "pid");

                if (isempty(eid))
                        continue;
                if (!arg_json) {
                        printf("\n==> exec %s (pid %s): %s <==\n", eid, strna(pid), strna(cmd));
                        fflush(stdout);
                }
                r = logs_exec(p.pos[0], eid, false);
                if (r < 0)
                        return r;
                fflush(stdout);
        }
        return 0;
}
