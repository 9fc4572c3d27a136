/* SPDX-License-Identifier: MIT */
/* space files ls|stat|rm|mv|mkdir ID PATH: the files API on one path
 * (GET ?list=1 / ?stat=1, DELETE, POST files/move, PUT ?type=dir). */

#include <inttypes.h>

#include "cli-common.h"
#include "cli-verbs.h"

static char *files_target(const char *id, const char *suffix, const char *path, const char *extra) {
        _cleanup_free_ char *eid = cli_escape(id), *epath = path ? cli_escape(path) : NULL;
        if (!eid || (path && !epath))
                return NULL;
        return strjoin("/v1/sandboxes/", eid, suffix, epath ? "?path=" : "", strempty(epath), strempty(extra));
}

static char *mode_text(const JsonValue *e) {
        uint64_t m = 0;
        if (json_uint64(json_get(e, "mode"), &m) < 0)
                return cli_field_text(e, "mode");
        return strdup_printf("%04" PRIo64, m & 07777);
}

static char *size_text(const JsonValue *e) {
        uint64_t n = 0;
        char buf[32];
        if (json_uint64(json_get(e, "size"), &n) < 0)
                return strdup("-");
        cli_format_size(n, buf, sizeof buf);
        return strdup(buf);
}

static char *name_text(const JsonValue *e) {
        _cleanup_free_ char *name = cli_field_text(e, "name");
        const char *type = json_string(json_get(e, "type"));
        const char *target = json_string(json_get(e, "target"));

        if (type && streq(type, "dir"))
                return strjoin(strempty(name), "/");
        if (target)
                return strjoin(strempty(name), " -> ", target);
        return TAKE_PTR(name);
}

static int files_ls(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(cli_table_done) CliTable t = {};
        _cleanup_free_ char *target = NULL;
        static const char *const header[] = { "MODE", "SIZE", "MTIME", "NAME" };
        const JsonValue *list;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, 2);
        if (r <= 0)
                return r;
        target = files_target(p.pos[0], "/files", p.n_pos > 1 ? p.pos[1] : "/", "&list=1");
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("GET", target, NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        list = json_get(resp.json, "entries");
        if (json_type(list) != JSON_ARRAY)
                return cli_error("the server's answer has no entry list");
        r = cli_table_new(&t, header, ELEMENTSOF(header));
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_array_size(list); i++) {
                const JsonValue *e = json_array_at(list, i);
                char *row[] = { mode_text(e), size_text(e), cli_time_text(json_get(e, "mtime")), name_text(e) };
                r = cli_table_add(&t, row);
                if (r < 0)
                        return r;
        }
        cli_table_print(&t, stdout);
        return 0;
}

static int files_stat(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *target = NULL;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 2, 2);
        if (r <= 0)
                return r;
        target = files_target(p.pos[0], "/files", p.pos[1], "&stat=1");
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("GET", target, NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        cli_print_object(resp.json, NULL);
        return 0;
}

static int files_rm(int argc, char **argv) {
        static const CliOption rm_options[] = { { "recursive", 'r', false, 1 }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        const char *arg = NULL;
        bool recursive = false;
        int r, ret = 0;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, rm_options, &arg)) > 0)
                recursive = true;
        r = cli_parser_end(&p, r, 2, SIZE_MAX);
        if (r <= 0)
                return r;
        for (size_t i = 1; i < p.n_pos; i++) {
                _cleanup_(cli_response_done) CliResponse resp = {};
                _cleanup_free_ char *target =
                        files_target(p.pos[0], "/files", p.pos[i], recursive ? "&recursive=1" : NULL);
                if (!target)
                        return cli_error_errno(-ENOMEM, "out of memory");
                r = cli_call("DELETE", target, NULL, &resp);
                if (r < 0)
                        ret = r;
        }
        return ret;
}

static int files_mv(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *target = NULL, *body = NULL;
        size_t n = 0;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 3, 3);
        if (r <= 0)
                return r;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "from", p.pos[1]);
        json_w_kv_string(&w, "to", p.pos[2]);
        json_w_object_end(&w);
        target = files_target(p.pos[0], "/files/move", NULL, NULL);
        if (!target || json_w_finish(&w, &body, &n) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");
        return cli_call("POST", target, body, &resp);
}

static int files_mkdir(int argc, char **argv) {
        static const CliOption mkdir_options[] = { { "parents", 'p', false, 1 }, { "mode", 'm', true, 2 }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        const char *arg = NULL, *mode = NULL;
        bool parents = false;
        int r, ret = 0;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, mkdir_options, &arg)) > 0) {
                if (r == 1)
                        parents = true;
                else {
                        uint64_t m;
                        char *end = NULL;
                        m = strtoull(arg, &end, 8);
                        if (isempty(arg) || !end || *end || m > 07777)
                                return cli_usage_error("--mode: expected octal permissions such as 0755, got '%s'", arg);
                        mode = arg;
                }
        }
        r = cli_parser_end(&p, r, 2, SIZE_MAX);
        if (r <= 0)
                return r;
        for (size_t i = 1; i < p.n_pos; i++) {
                _cleanup_(cli_response_done) CliResponse resp = {};
                _cleanup_free_ char *extra = strjoin("&type=dir", parents ? "&parents=1" : "", mode ? "&mode=" : "",
                                                     strempty(mode));
                _cleanup_free_ char *target = extra ? files_target(p.pos[0], "/files", p.pos[i], extra) : NULL;
                if (!target)
                        return cli_error_errno(-ENOMEM, "out of memory");
                r = cli_call("PUT", target, "", &resp);
                if (r < 0)
                        ret = r;
        }
        return ret;
}

int cli_files(int argc, char **argv) {
        static const CliSubcommand subs[] = {
                { "ls", files_ls },       { "stat", files_stat },   { "rm", files_rm },
                { "mv", files_mv },       { "mkdir", files_mkdir },
        };
        return cli_run_subcommand("files", subs, ELEMENTSOF(subs), argc, argv);
}
