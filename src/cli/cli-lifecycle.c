/* SPDX-License-Identifier: MIT */
/* space pause | resume | suspend ID..., checkpoint ID [--name N],
 * checkpoints ID, restore ID CKPT, branch ID [--count N] [--from CKPT]:
 * the lifecycle calls of /v1/sandboxes/{id}/... */

#include <inttypes.h>

#include "cli-common.h"
#include "cli-verbs.h"

/* "/v1/sandboxes/<id escaped><suffix>" */
static char *sandbox_target(const char *id, const char *suffix) {
        _cleanup_free_ char *e = cli_escape(id);
        return e ? strjoin("/v1/sandboxes/", e, suffix) : NULL;
}

/* POSTs the object w holds to /v1/sandboxes/<id escaped><suffix>. */
static int sandbox_post(const char *id, const char *suffix, JsonWriter *w, CliResponse *resp) {
        _cleanup_free_ char *body = NULL, *target = NULL;

        if (json_w_finish(w, &body, NULL) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");
        target = sandbox_target(id, suffix);
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        return cli_call("POST", target, body, resp);
}

/* POST /v1/sandboxes/{id}/<verb> for each id; prints "ID STATE"; goes on after a failure. */
static int state_verb(int argc, char **argv, const char *verb) {
        _cleanup_(cli_parser_done) CliParser p = {};
        int r, ret = 0;

        r = cli_parser_positionals(&p, argc, argv, 1, SIZE_MAX);
        if (r <= 0)
                return r;
        for (size_t i = 0; i < p.n_pos; i++) {
                _cleanup_(cli_response_done) CliResponse resp = {};
                _cleanup_free_ char *suffix = strjoin("/", verb), *target = NULL;

                target = suffix ? sandbox_target(p.pos[i], suffix) : NULL;
                if (!target)
                        return cli_error_errno(-ENOMEM, "out of memory");
                r = cli_call("POST", target, "{}", &resp);
                if (r < 0) {
                        ret = r;
                        continue;
                }
                if (arg_json) {
                        (void) cli_print_raw(resp.body, resp.body_len);
                        continue;
                }
                _cleanup_free_ char *state = cli_field_text(resp.json, "state");
                bool preserved = false;
                (void) json_bool(json_get(resp.json, "processes_preserved"), &preserved);
                if (streq(verb, "pause"))
                        printf("%s %s\n", p.pos[i], strna(state));
                else
                        printf("%s %s (processes preserved: %s)\n", p.pos[i], strna(state), preserved ? "yes" : "no");
                fflush(stdout);
        }
        return ret;
}

int cli_pause(int argc, char **argv) {
        return state_verb(argc, argv, "pause");
}

int cli_resume(int argc, char **argv) {
        return state_verb(argc, argv, "resume");
}

int cli_suspend(int argc, char **argv) {
        return state_verb(argc, argv, "suspend");
}

/* ---- checkpoints ---- */

enum {
        OPT_NAME = 1,
        OPT_COUNT,
        OPT_FROM,
        OPT_WITH_MEMORY,
        OPT_WITHOUT_MEMORY,
};

/* space checkpoint rm ID CKPT...: DELETE .../checkpoints/{id-or-name}. */
static int checkpoint_rm(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_free_ char *id = NULL, *prefix = NULL;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 2, SIZE_MAX);
        if (r <= 0)
                return r;
        id = cli_escape(p.pos[0]);
        prefix = id ? strjoin("/v1/sandboxes/", id, "/checkpoints/") : NULL;
        if (!prefix)
                return cli_error_errno(-ENOMEM, "out of memory");
        return cli_call_each(&p, 1, "DELETE", prefix, false);
}

int cli_checkpoint(int argc, char **argv) {
        static const CliOption options[] = {
                { "name", 'n', true, OPT_NAME },
                { "with-memory", 0, false, OPT_WITH_MEMORY },
                { "without-memory", 0, false, OPT_WITHOUT_MEMORY },
                {},
        };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *id = NULL;
        const char *arg = NULL, *name = NULL;
        int r, memory = -1;

        /* Sandbox ids are never "rm" or "ls": these are subcommands. */
        if (argc >= 2 && streq(argv[1], "rm"))
                return checkpoint_rm(argc - 1, argv + 1);
        if (argc >= 2 && streq(argv[1], "ls"))
                return cli_checkpoints(argc - 1, argv + 1);
        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, options, &arg)) > 0) {
                if (r == OPT_NAME)
                        name = arg;
                else
                        memory = r == OPT_WITH_MEMORY;
        }
        r = cli_parser_end(&p, r, 1, 1);
        if (r <= 0)
                return r;

        json_w_init(&w);
        json_w_object_begin(&w);
        if (name)
                json_w_kv_string(&w, "name", name);
        if (memory >= 0)
                json_w_kv_bool(&w, "with_memory", memory);
        json_w_object_end(&w);
        r = sandbox_post(p.pos[0], "/checkpoints", &w, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        id = cli_field_text(resp.json, "id");
        printf("%s\n", strna(id));
        return 0;
}

static int checkpoint_row(CliTable *t, const JsonValue *c) {
        char size[32] = "-";
        uint64_t bytes;
        bool automatic = false;

        if (json_uint64(json_get(c, "size_bytes"), &bytes) >= 0)
                cli_format_size(bytes, size, sizeof size);
        (void) json_bool(json_get(c, "auto"), &automatic);
        char *row[] = {
                cli_field_text(c, "id"),
                cli_field_text(c, "name"),
                cli_time_text(json_get(c, "created_at")),
                strdup(size),
                strdup(automatic ? "yes" : "no"),
        };
        return cli_table_add(t, row);
}

/* Prints the checkpoint table of a sandbox (nothing if it has none and quiet_empty). */
static int print_checkpoints(const char *id, bool quiet_empty) {
        static const char *const header[] = { "CHECKPOINT", "NAME", "CREATED", "SIZE", "AUTO" };
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(cli_table_done) CliTable t = {};
        _cleanup_free_ char *target = sandbox_target(id, "/checkpoints");
        const JsonValue *list;
        int r;

        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("GET", target, NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        list = json_get(resp.json, "checkpoints");
        if (json_type(list) != JSON_ARRAY)
                return cli_error("the server's answer has no checkpoint list");
        if (json_array_size(list) == 0 && quiet_empty)
                return 0;
        r = cli_table_new(&t, header, ELEMENTSOF(header));
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_array_size(list); i++) {
                r = checkpoint_row(&t, json_array_at(list, i));
                if (r < 0)
                        return r;
        }
        cli_table_print(&t, stdout);
        return 0;
}

int cli_checkpoints(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, 1);
        if (r <= 0)
                return r;
        return print_checkpoints(p.pos[0], false);
}

int cli_show_checkpoints(const char *id) {
        printf("\n");
        return print_checkpoints(id, true);
}

int cli_restore(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        int r;

        r = cli_parser_positionals(&p, argc, argv, 2, 2);
        if (r <= 0)
                return r;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "checkpoint", p.pos[1]);
        json_w_object_end(&w);
        r = sandbox_post(p.pos[0], "/restore", &w, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        printf("%s restored to %s\n", p.pos[0], p.pos[1]);
        return 0;
}

int cli_branch(int argc, char **argv) {
        static const CliOption options[] = {
                { "count", 'n', true, OPT_COUNT },
                { "from", 0, true, OPT_FROM },
                { "with-memory", 0, false, OPT_WITH_MEMORY },
                {},
        };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        const char *arg = NULL, *from = NULL;
        const JsonValue *list;
        uint64_t count = 1;
        bool with_memory = false;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, options, &arg)) > 0) {
                switch (r) {
                case OPT_WITH_MEMORY:
                        with_memory = true;
                        break;
                case OPT_COUNT:
                        r = cli_parse_u64("--count", arg, &count);
                        if (r < 0)
                                return r;
                        break;
                case OPT_FROM:
                        from = arg;
                        break;
                }
        }
        r = cli_parser_end(&p, r, 1, 1);
        if (r <= 0)
                return r;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "count");
        json_w_uint(&w, count);
        if (from)
                json_w_kv_string(&w, "from", from);
        if (with_memory)
                json_w_kv_bool(&w, "with_memory", true);
        json_w_object_end(&w);
        r = sandbox_post(p.pos[0], "/branch", &w, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        list = json_get(resp.json, "sandboxes");
        if (json_type(list) != JSON_ARRAY)
                return cli_error("the server's answer has no sandbox list");
        for (size_t i = 0; i < json_array_size(list); i++) {
                _cleanup_free_ char *id = cli_field_text(json_array_at(list, i), "id");
                printf("%s\n", strna(id));
        }
        return 0;
}
