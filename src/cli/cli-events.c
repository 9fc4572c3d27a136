/* SPDX-License-Identifier: MIT */
/* space events [ID] [--type T] [--follow] [--limit N]: GET /v1/events,
 * with --follow a stream of NDJSON events printed as they come. */

#include <inttypes.h>

#include "cli-common.h"
#include "cli-verbs.h"

enum {
        OPT_TYPE = 1,
        OPT_FOLLOW,
        OPT_LIMIT,
};

static const CliOption options[] = {
        { "type", 0, true, OPT_TYPE },
        { "follow", 'f', false, OPT_FOLLOW },
        { "limit", 'n', true, OPT_LIMIT },
        {},
};

/* One human line: TIME TYPE SANDBOX ACTOR [REASON] [DATA]. */
static void event_print(const JsonValue *e) {
        _cleanup_free_ char *time = cli_time_text(json_get(e, "time"));
        _cleanup_free_ char *type = cli_field_text(e, "type");
        _cleanup_free_ char *sandbox = cli_field_text(e, "sandbox");
        _cleanup_free_ char *actor = cli_field_text(e, "actor");
        const char *reason = json_string(json_get(e, "reason"));
        const JsonValue *data = json_get(e, "data");
        _cleanup_free_ char *data_text = NULL;

        if (json_type(data) == JSON_OBJECT && json_object_size(data) > 0)
                data_text = cli_value_text(data);
        printf("%s  %-22s %-18s %s%s%s%s%s\n", strna(time), strna(type), strna(sandbox), strna(actor),
               isempty(reason) ? "" : "  ", strempty(reason), data_text ? "  " : "", strempty(data_text));
}

static int events_follow(const char *target) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_(cli_line_reader_done) CliLineReader lr = {};
        const HttpHead *h = NULL;
        int r;

        r = cli_connect(&c);
        if (r < 0)
                return r;
        r = cli_start(c, "GET", target, NULL, NULL, 0, &h);
        if (r < 0)
                return r;
        for (;;) {
                char *line;
                size_t n;

                r = cli_line_reader_next(&lr, c, &line, &n);
                if (r < 0)
                        return r;
                if (r == 0)
                        return 0;
                if (n == 0)
                        continue; /* keep-alive blank lines */
                if (arg_json) {
                        if (fwrite(line, 1, n, stdout) != n || fputc('\n', stdout) == EOF)
                                return -EPIPE;
                } else {
                        _cleanup_json_ JsonValue *e = NULL;
                        char errbuf[128] = "";
                        r = json_parse(line, n, &e, errbuf, sizeof errbuf);
                        if (r < 0)
                                return cli_error_errno(r, "the server sent an invalid event: %s", errbuf);
                        event_print(e);
                }
                if (fflush(stdout) != 0)
                        return -EPIPE; /* the reader went away */
        }
}

int cli_events(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *sandbox = NULL, *type = NULL, *target = NULL;
        const char *arg = NULL;
        bool follow = false;
        uint64_t limit = 0;
        bool have_limit = false;
        const JsonValue *list;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, options, &arg)) > 0) {
                switch (r) {
                case OPT_TYPE:
                        free(type);
                        type = cli_escape(arg);
                        if (!type)
                                return cli_error_errno(-ENOMEM, "out of memory");
                        break;
                case OPT_FOLLOW:
                        follow = true;
                        break;
                case OPT_LIMIT:
                        if (cli_parse_u64("limit", arg, &limit) < 0)
                                return -EINVAL;
                        have_limit = true;
                        break;
                }
        }
        r = cli_parser_end(&p, r, 0, 1);
        if (r <= 0)
                return r;
        if (p.n_pos == 1) {
                sandbox = cli_escape(p.pos[0]);
                if (!sandbox)
                        return cli_error_errno(-ENOMEM, "out of memory");
        }

        char limit_text[32] = "";
        if (have_limit)
                snprintf(limit_text, sizeof limit_text, "%" PRIu64, limit);
        target = strjoin("/v1/events?", sandbox ? "sandbox=" : "", strempty(sandbox), sandbox ? "&" : "",
                         type ? "type=" : "", strempty(type), type ? "&" : "", have_limit ? "limit=" : "",
                         limit_text, have_limit ? "&" : "", follow ? "follow=1" : "");
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        /* No dangling separator. */
        size_t n = strlen(target);
        if (target[n - 1] == '&' || target[n - 1] == '?')
                target[n - 1] = 0;

        if (follow)
                return events_follow(target);

        r = cli_call("GET", target, NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        list = json_get(resp.json, "events");
        if (json_type(list) != JSON_ARRAY)
                return cli_error("the server's answer has no event list");
        for (size_t i = 0; i < json_array_size(list); i++)
                event_print(json_array_at(list, i));
        return 0;
}
