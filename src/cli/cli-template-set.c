/* SPDX-License-Identifier: MIT */
/* space template set NAME ...: a template's settings (PATCH
 * /v1/templates/{name}): the runtime its sandboxes get when a create names
 * none, and the start command every one of them runs, with its ready check. */

#include <stdio.h>

#include "cli-common.h"
#include "cli-verbs.h"

enum {
        OPT_RUNTIME = 1,
        OPT_START,
        OPT_NO_START,
        OPT_READY_CMD,
        OPT_READY_PORT,
        OPT_READY_PATH,
        OPT_READY_TIMEOUT,
        OPT_START_CWD,
        OPT_START_USER,
};

static const CliOption set_options[] = {
        { "runtime", 0, true, OPT_RUNTIME },        { "start", 0, true, OPT_START },
        { "no-start", 0, false, OPT_NO_START },     { "ready-cmd", 0, true, OPT_READY_CMD },
        { "ready-port", 0, true, OPT_READY_PORT },  { "ready-path", 0, true, OPT_READY_PATH },
        { "ready-timeout", 0, true, OPT_READY_TIMEOUT }, { "start-cwd", 0, true, OPT_START_CWD },
        { "start-user", 0, true, OPT_START_USER },  {},
};

typedef struct SetArgs {
        const char *runtime, *start, *ready_cmd, *ready_path, *cwd, *user;
        uint64_t ready_port, timeout_s;
        bool no_start;
} SetArgs;

static int parse(CliParser *p, SetArgs *a) {
        const char *arg = NULL;
        int r;

        while ((r = cli_parser_next(p, set_options, &arg)) > 0)
                switch (r) {
                case OPT_RUNTIME:
                        if (!streq(arg, "ns") && !streq(arg, "vm") && !streq(arg, "auto") && !streq(arg, "default"))
                                return cli_error("--runtime must be ns, vm, auto or default (the tenant's or host's)");
                        a->runtime = arg;
                        break;
                case OPT_START:
                        a->start = arg;
                        break;
                case OPT_NO_START:
                        a->no_start = true;
                        break;
                case OPT_READY_CMD:
                        a->ready_cmd = arg;
                        break;
                case OPT_READY_PORT:
                        if (cli_parse_u64("--ready-port", arg, &a->ready_port) < 0)
                                return -EINVAL;
                        if (a->ready_port < 1 || a->ready_port > 65535)
                                return cli_error("--ready-port must be a port (1..65535)");
                        break;
                case OPT_READY_PATH:
                        a->ready_path = arg;
                        break;
                case OPT_READY_TIMEOUT:
                        if (cli_parse_u64("--ready-timeout", arg, &a->timeout_s) < 0)
                                return -EINVAL;
                        break;
                case OPT_START_CWD:
                        a->cwd = arg;
                        break;
                case OPT_START_USER:
                        a->user = arg;
                        break;
                }
        return r;
}

static void write_start(JsonWriter *w, const SetArgs *a) {
        json_w_key(w, "start");
        if (a->no_start) {
                json_w_null(w);
                return;
        }
        json_w_object_begin(w);
        json_w_kv_string(w, "command", a->start);
        if (a->cwd)
                json_w_kv_string(w, "cwd", a->cwd);
        if (a->user)
                json_w_kv_string(w, "user", a->user);
        if (a->ready_cmd || a->ready_port) {
                json_w_key(w, "ready");
                json_w_object_begin(w);
                if (a->ready_cmd)
                        json_w_kv_string(w, "command", a->ready_cmd);
                if (a->ready_port)
                        json_w_kv_int(w, "port", (int64_t) a->ready_port);
                if (a->ready_path)
                        json_w_kv_string(w, "path", a->ready_path);
                json_w_object_end(w);
        }
        if (a->timeout_s)
                json_w_kv_int(w, "timeout_s", (int64_t) a->timeout_s);
        json_w_object_end(w);
}

int cli_template_set(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *name = NULL, *target = NULL, *body = NULL;
        SetArgs a = {};
        size_t len;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        r = parse(&p, &a);
        if (r < 0)
                return r;
        r = cli_parser_end(&p, r, 1, 1);
        if (r <= 0)
                return r;
        if (a.no_start && a.start)
                return cli_error("give --start CMD or --no-start, not both");
        if (!a.start && (a.ready_cmd || a.ready_port || a.ready_path || a.timeout_s || a.cwd || a.user))
                return cli_error("--ready-*, --start-cwd and --start-user go with --start CMD");
        if (a.ready_cmd && a.ready_port)
                return cli_error("give --ready-cmd or --ready-port, not both");
        if (a.ready_path && !a.ready_port)
                return cli_error("--ready-path needs --ready-port");
        if (!a.runtime && !a.start && !a.no_start)
                return cli_error("give --runtime, --start CMD or --no-start");

        json_w_init(&w);
        json_w_object_begin(&w);
        if (a.runtime) {
                json_w_key(&w, "runtime");
                if (streq(a.runtime, "default"))
                        json_w_null(&w);
                else
                        json_w_string(&w, a.runtime);
        }
        if (a.start || a.no_start)
                write_start(&w, &a);
        json_w_object_end(&w);
        r = json_w_finish(&w, &body, &len);
        if (r < 0)
                return cli_error_errno(r, "out of memory");
        name = cli_escape(p.pos[0]);
        target = name ? strjoin("/v1/templates/", name) : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("PATCH", target, body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        cli_print_object(resp.json, NULL);
        return 0;
}
