/* SPDX-License-Identifier: MIT */
/* space webhook create URL [--event PATTERN]... [--name N] [--secret S] | ls |
 * show ID | rm ID... | test ID | enable ID | disable ID: /v1/webhooks. The
 * secret (made by the server unless given) is printed once, at create. */

#include "cli-common.h"
#include "cli-verbs.h"

enum {
        OPT_EVENT = 1,
        OPT_NAME,
        OPT_SECRET,
};

static const CliOption create_options[] = {
        { "event", 'e', true, OPT_EVENT },
        { "name", 0, true, OPT_NAME },
        { "secret", 0, true, OPT_SECRET },
        {},
};

static int webhook_create(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *body = NULL;
        const char *arg = NULL, *name = NULL, *secret = NULL, *events[64];
        size_t n_events = 0, body_len;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, create_options, &arg)) > 0)
                switch (r) {
                case OPT_EVENT:
                        if (n_events >= ELEMENTSOF(events))
                                return cli_usage_error("--event: at most %zu patterns", ELEMENTSOF(events));
                        events[n_events++] = arg;
                        break;
                case OPT_NAME:
                        name = arg;
                        break;
                case OPT_SECRET:
                        secret = arg;
                        break;
                }
        r = cli_parser_end(&p, r, 1, 1);
        if (r <= 0)
                return r;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "url", p.pos[0]);
        if (name)
                json_w_kv_string(&w, "name", name);
        if (secret)
                json_w_kv_string(&w, "secret", secret);
        if (n_events > 0) {
                json_w_key(&w, "events");
                json_w_array_begin(&w);
                for (size_t i = 0; i < n_events; i++)
                        json_w_string(&w, events[i]);
                json_w_array_end(&w);
        }
        json_w_object_end(&w);
        r = json_w_finish(&w, &body, &body_len);
        if (r < 0)
                return cli_error_errno(r, "out of memory");
        r = cli_call("POST", "/v1/webhooks", body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        printf("%s\n", strna(json_string(json_get(resp.json, "id"))));
        printf("secret: %s   (shown once: deliveries carry X-Space-Signature: sha256=HMAC(secret, ts.body))\n",
               strna(json_string(json_get(resp.json, "secret"))));
        return 0;
}

static void webhook_row(const JsonValue *v, char **c) {
        const JsonValue *d = json_get(v, "delivery");
        c[0] = cli_field_text(v, "id");
        c[1] = cli_field_text(v, "name");
        c[2] = cli_field_text(v, "url");
        c[3] = cli_field_text(v, "events");
        c[4] = cli_field_text(v, "enabled");
        c[5] = cli_field_text(d, "failures");
        c[6] = cli_field_text(d, "last_error");
}

static int webhook_ls(int argc, char **argv) {
        static const char *const header[] = { "ID", "NAME", "URL", "EVENTS", "ENABLED", "FAILURES", "LAST_ERROR" };
        return cli_list_verb(argc, argv, "/v1/webhooks", "webhooks", "webhook", header, ELEMENTSOF(header),
                             webhook_row, NULL);
}

static int webhook_show(int argc, char **argv) {
        return cli_object_verb(argc, argv, "GET", "/v1/webhooks/", NULL, NULL);
}

static int webhook_test(int argc, char **argv) {
        return cli_object_verb(argc, argv, "POST", "/v1/webhooks/", "/test", NULL);
}

static int webhook_enable(int argc, char **argv) {
        return cli_object_verb(argc, argv, "PATCH", "/v1/webhooks/", NULL, "{\"enabled\":true}");
}

static int webhook_disable(int argc, char **argv) {
        return cli_object_verb(argc, argv, "PATCH", "/v1/webhooks/", NULL, "{\"enabled\":false}");
}

static int webhook_rm(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, SIZE_MAX);
        if (r <= 0)
                return r;
        return cli_call_each(&p, 0, "DELETE", "/v1/webhooks/", false);
}

int cli_webhook(int argc, char **argv) {
        static const CliSubcommand sub[] = {
                { "create", webhook_create }, { "ls", webhook_ls },         { "show", webhook_show },
                { "rm", webhook_rm },         { "test", webhook_test },     { "enable", webhook_enable },
                { "disable", webhook_disable },
        };

        return cli_run_subcommand("webhook", sub, ELEMENTSOF(sub), argc, argv);
}
