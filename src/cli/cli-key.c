/* SPDX-License-Identifier: MIT */
/* space key create | ls | rm: /v1/keys. */

#include "cli-common.h"
#include "cli-verbs.h"

enum {
        OPT_TENANT = 1,
        OPT_NAME,
        OPT_ADMIN,
};

static const CliOption create_options[] = {
        { "tenant", 0, true, OPT_TENANT },
        { "name", 0, true, OPT_NAME },
        { "admin", 0, false, OPT_ADMIN },
        {},
};

static int key_create(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *body = NULL;
        const char *tenant = NULL, *name = NULL, *arg = NULL;
        bool admin = false;
        size_t n;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, create_options, &arg)) > 0) {
                switch (r) {
                case OPT_TENANT:
                        tenant = arg;
                        break;
                case OPT_NAME:
                        name = arg;
                        break;
                case OPT_ADMIN:
                        admin = true;
                        break;
                }
        }
        r = cli_parser_end(&p, r, 0, 0);
        if (r <= 0)
                return r;

        json_w_init(&w);
        json_w_object_begin(&w);
        if (name)
                json_w_kv_string(&w, "name", name);
        if (tenant)
                json_w_kv_string(&w, "tenant", tenant);
        if (admin)
                json_w_kv_bool(&w, "admin", true);
        json_w_object_end(&w);
        if (json_w_finish(&w, &body, &n) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");

        r = cli_call("POST", "/v1/keys", body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);

        const char *secret = json_string(json_get(resp.json, "key"));
        if (isempty(secret))
                return cli_error("the server's answer has no key");
        /* The secret alone on stdout (for $(space key create)); the rest for humans on stderr. */
        printf("%s\n", secret);
        fflush(stdout);
        fprintf(stderr, "created key %s for tenant %s%s; the secret is shown only this once\n",
                strna(json_string(json_get(resp.json, "id"))), strna(json_string(json_get(resp.json, "tenant"))),
                admin ? " (admin)" : "");
        return 0;
}

static int key_ls(int argc, char **argv) {
        static const char *const header[] = { "ID", "TENANT", "NAME", "ADMIN", "CREATED" };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(cli_table_done) CliTable t = {};
        const JsonValue *keys;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 0, 0);
        if (r <= 0)
                return r;

        r = cli_call("GET", "/v1/keys", NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        keys = json_get(resp.json, "keys");
        if (json_type(keys) != JSON_ARRAY)
                return cli_error("the server's answer has no key list");

        r = cli_table_new(&t, header, ELEMENTSOF(header));
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_array_size(keys); i++) {
                const JsonValue *k = json_array_at(keys, i);
                char *row[] = {
                        cli_field_text(k, "id"),    cli_field_text(k, "tenant"),
                        cli_field_text(k, "name"),  cli_field_text(k, "admin"),
                        cli_time_text(json_get(k, "created_at")),
                };
                r = cli_table_add(&t, row);
                if (r < 0)
                        return r;
        }
        cli_table_print(&t, stdout);
        return 0;
}

static int key_rm(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, SIZE_MAX);
        if (r <= 0)
                return r;
        return cli_call_each(&p, 0, "DELETE", "/v1/keys/", false);
}

int cli_key(int argc, char **argv) {
        static const CliSubcommand sub[] = {
                { "create", key_create },
                { "ls", key_ls },
                { "rm", key_rm },
        };

        return cli_run_subcommand("key", sub, ELEMENTSOF(sub), argc, argv);
}
