/* SPDX-License-Identifier: MIT */
/* space update ID [--timeout S] [--idle S] [--idle-action A] [--checkpoint-every S]
 * [--auto-resume|--no-auto-resume]: PATCH /v1/sandboxes/{id}. */

#include "cli-common.h"
#include "cli-verbs.h"

enum {
        OPT_TIMEOUT = 1,
        OPT_IDLE,
        OPT_IDLE_ACTION,
        OPT_CHECKPOINT_EVERY,
        OPT_AUTO_RESUME,
        OPT_NO_AUTO_RESUME,
};

static const CliOption options[] = {
        { "timeout", 0, true, OPT_TIMEOUT },
        { "idle", 0, true, OPT_IDLE },
        { "idle-action", 0, true, OPT_IDLE_ACTION },
        { "checkpoint-every", 0, true, OPT_CHECKPOINT_EVERY },
        { "auto-resume", 0, false, OPT_AUTO_RESUME },
        { "no-auto-resume", 0, false, OPT_NO_AUTO_RESUME },
        {},
};

int cli_update(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *id = NULL, *target = NULL, *body = NULL;
        const char *arg = NULL;
        size_t n = 0, fields = 0;
        uint64_t u;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        json_w_init(&w);
        json_w_object_begin(&w);
        while ((r = cli_parser_next(&p, options, &arg)) > 0) {
                fields++;
                switch (r) {
                case OPT_TIMEOUT:
                case OPT_IDLE:
                case OPT_CHECKPOINT_EVERY: {
                        const char *opt = r == OPT_TIMEOUT ? "timeout" : r == OPT_IDLE ? "idle" : "checkpoint-every";
                        if (cli_parse_u64(opt, arg, &u) < 0)
                                return -EINVAL;
                        json_w_key(&w, r == OPT_TIMEOUT ? "timeout_s" : r == OPT_IDLE ? "idle_s" : "checkpoint_every_s");
                        json_w_uint(&w, u);
                        break;
                }
                case OPT_IDLE_ACTION:
                        if (streq(arg, "none") || isempty(arg))
                                json_w_kv_string(&w, "idle_action", "");
                        else if (streq(arg, "pause") || streq(arg, "suspend"))
                                json_w_kv_string(&w, "idle_action", arg);
                        else
                                return cli_usage_error("--idle-action: expected pause, suspend or none, got '%s'", arg);
                        break;
                case OPT_AUTO_RESUME:
                case OPT_NO_AUTO_RESUME:
                        json_w_kv_bool(&w, "auto_resume", r == OPT_AUTO_RESUME);
                        break;
                }
        }
        r = cli_parser_end(&p, r, 1, 1);
        if (r <= 0)
                return r;
        if (fields == 0)
                return cli_usage_error("nothing to change: give at least one option (see 'space update --help')");
        json_w_object_end(&w);
        id = cli_escape(p.pos[0]);
        target = id ? strjoin("/v1/sandboxes/", id) : NULL;
        if (!target || json_w_finish(&w, &body, &n) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("PATCH", target, body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        printf("%s\n", p.pos[0]);
        return 0;
}
