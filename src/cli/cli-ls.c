/* SPDX-License-Identifier: MIT */
/* space ls / show: GET /v1/sandboxes[/{id}]. */

#include <inttypes.h>

#include "cli-common.h"
#include "cli-verbs.h"

#define CLI_LS_PAGE 100
#define CLI_LS_PAGES_MAX 10000 /* a bound on pagination against a looping server */

enum {
        OPT_ALL = 1,
        OPT_STATE,
        OPT_QUIET,
};

static const CliOption ls_options[] = {
        { "all", 'a', false, OPT_ALL },
        { "state", 0, true, OPT_STATE },
        { "quiet", 'q', false, OPT_QUIET },
        {},
};

static char *memory_text(const JsonValue *sb) {
        uint64_t mb;
        if (json_uint64(json_get(sb, "memory_mb"), &mb) < 0)
                return strdup("-");
        return strdup_printf("%" PRIu64 "M", mb);
}

static int ls_add_row(CliTable *t, const JsonValue *sb) {
        char *row[] = {
                cli_field_text(sb, "id"),     cli_field_text(sb, "state"),
                cli_field_text(sb, "template"), cli_field_text(sb, "cpu"),
                memory_text(sb),              cli_time_text(json_get(sb, "created_at")),
        };
        return cli_table_add(t, row);
}

int cli_ls(int argc, char **argv) {
        static const char *const header[] = { "ID", "STATE", "TEMPLATE", "CPU", "MEM", "CREATED" };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_table_done) CliTable t = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *after = NULL, *state = NULL;
        const char *arg = NULL;
        bool all = false, quiet = false;
        size_t pages = 0, hidden = 0;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, ls_options, &arg)) > 0) {
                switch (r) {
                case OPT_ALL:
                        all = true;
                        break;
                case OPT_QUIET:
                        quiet = true;
                        break;
                case OPT_STATE:
                        free(state);
                        state = cli_escape(arg);
                        if (!state)
                                return cli_error_errno(-ENOMEM, "out of memory");
                        break;
                }
        }
        r = cli_parser_end(&p, r, 0, 0);
        if (r <= 0)
                return r;

        r = cli_table_new(&t, header, ELEMENTSOF(header));
        if (r < 0)
                return r;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "sandboxes");
        json_w_array_begin(&w);

        for (;;) {
                _cleanup_(cli_response_done) CliResponse resp = {};
                _cleanup_free_ char *target = NULL;
                const JsonValue *list, *next;

                target = strdup_printf("/v1/sandboxes?limit=%d%s%s%s%s", CLI_LS_PAGE, state ? "&state=" : "",
                                       strempty(state), after ? "&after=" : "", strempty(after));
                if (!target)
                        return cli_error_errno(-ENOMEM, "out of memory");
                r = cli_call("GET", target, NULL, &resp);
                if (r < 0)
                        return r;
                list = json_get(resp.json, "sandboxes");
                if (json_type(list) != JSON_ARRAY)
                        return cli_error("the server's answer has no sandbox list");
                next = json_get(resp.json, "next");

                if (arg_json && !quiet && pages == 0 && (!next || json_is_null(next)))
                        return cli_print_raw(resp.body, resp.body_len); /* one page: unchanged */

                for (size_t i = 0; i < json_array_size(list); i++) {
                        const JsonValue *sb = json_array_at(list, i);
                        if (quiet) {
                                const char *id = json_string(json_get(sb, "id"));
                                if (!isempty(id) && (all || state ||
                                                     !streq(strempty(json_string(json_get(sb, "state"))), "error")))
                                        printf("%s\n", id);
                                continue;
                        }
                        if (arg_json) {
                                _cleanup_free_ char *s = NULL;
                                size_t n;
                                if (json_serialize(sb, &s, &n) < 0)
                                        return cli_error_errno(-ENOMEM, "out of memory");
                                json_w_raw(&w, s);
                                continue;
                        }
                        if (!all && !state && streq(strempty(json_string(json_get(sb, "state"))), "error")) {
                                hidden++;
                                continue;
                        }
                        r = ls_add_row(&t, sb);
                        if (r < 0)
                                return r;
                }

                if (!next || json_is_null(next) || isempty(json_string(next)))
                        break;
                if (++pages >= CLI_LS_PAGES_MAX)
                        return cli_error("the server keeps sending pages; giving up after %d", CLI_LS_PAGES_MAX);
                free(after);
                after = cli_escape(json_string(next));
                if (!after)
                        return cli_error_errno(-ENOMEM, "out of memory");
        }

        if (quiet)
                return 0;
        if (arg_json) {
                _cleanup_free_ char *s = NULL;
                size_t n;
                json_w_array_end(&w);
                json_w_key(&w, "next");
                json_w_null(&w);
                json_w_object_end(&w);
                if (json_w_finish(&w, &s, &n) < 0)
                        return cli_error_errno(-ENOMEM, "out of memory");
                return cli_print_raw(s, n);
        }
        cli_table_print(&t, stdout);
        if (hidden > 0) {
                /* on stderr: stdout stays the table */
                fflush(stdout);
                fprintf(stderr, "%zu sandbox%s in state error hidden; space ls --all shows them\n", hidden,
                        hidden == 1 ? "" : "es");
        }
        return 0;
}

int cli_show(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *id = NULL, *target = NULL;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, 1);
        if (r <= 0)
                return r;

        id = cli_escape(p.pos[0]);
        target = id ? strjoin("/v1/sandboxes/", id) : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("GET", target, NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        if (json_type(resp.json) != JSON_OBJECT)
                return cli_error("the server's answer is not a sandbox object");
        cli_print_object(resp.json, NULL);
        {
                uint64_t n = 0;
                if (json_uint64(json_get(resp.json, "checkpoints"), &n) >= 0 && n > 0)
                        return cli_show_checkpoints(p.pos[0]);
        }
        return 0;
}
