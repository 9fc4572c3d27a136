/* SPDX-License-Identifier: MIT */
/* space top [--interval S] [--once]: the sandboxes with their state, limits and
 * activity, redrawn every S seconds on a terminal. The API has no per-sandbox
 * usage (CPU, memory in use) to show: top says so and shows what there is,
 * never a number it made up. */

#include <inttypes.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "cli-common.h"
#include "cli-verbs.h"

#define CLI_TOP_PAGE 1000U
#define CLI_TOP_PROCS_MAX 64U /* running sandboxes whose processes are counted (one call each) */

static volatile sig_atomic_t top_stop = 0;

static void top_sigint(int sig) {
        top_stop = 1;
}

static char *limit_mb(const JsonValue *e, const char *key) {
        uint64_t mb = 0;
        char buf[32];
        if (json_uint64(json_get(e, key), &mb) < 0 || mb == 0)
                return strdup("-");
        cli_format_size(mb * 1024 * 1024, buf, sizeof buf);
        return strdup(buf);
}

/* The number of running execs of a sandbox (GET .../exec), or "-". */
static char *procs_text(const char *id) {
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *e = cli_escape(id), *target = NULL;
        const JsonValue *list;

        target = e ? strjoin("/v1/sandboxes/", e, "/exec") : NULL;
        if (!target)
                return NULL;
        /* a sandbox that changed state since the listing is not an error of top's */
        if (cli_call_quiet(target, &resp) < 0)
                return strdup("-");
        list = json_get(resp.json, "processes");
        return json_type(list) == JSON_ARRAY ? strdup_printf("%zu", json_array_size(list)) : strdup("-");
}

static int top_once(bool clear) {
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(cli_table_done) CliTable t = {};
        static const char *const header[] = { "SANDBOX", "STATE", "TEMPLATE", "CPU", "MEMORY", "DISK", "EXECS",
                                              "IDLE_S", "LAST_ACTIVITY" };
        _cleanup_free_ char *target = strdup_printf("/v1/sandboxes?limit=%u", CLI_TOP_PAGE);
        const JsonValue *list;
        size_t counts[4] = {}, counted = 0;
        int r;

        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("GET", target, NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        list = json_get(resp.json, "sandboxes");
        if (json_type(list) != JSON_ARRAY)
                return cli_error("the server's answer has no sandbox list");
        r = cli_table_new(&t, header, ELEMENTSOF(header));
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_array_size(list); i++) {
                const JsonValue *e = json_array_at(list, i);
                const char *state = strempty(json_string(json_get(e, "state")));
                counts[streq(state, "running") ? 0 : streq(state, "paused") ? 1 : streq(state, "suspended") ? 2 : 3]++;
                const char *id = json_string(json_get(e, "id"));
                bool count = streq(state, "running") && !isempty(id) && counted++ < CLI_TOP_PROCS_MAX;
                char *row[] = {
                        cli_field_text(e, "id"),       strdup(state),            cli_field_text(e, "template"),
                        cli_field_text(e, "cpu"),      limit_mb(e, "memory_mb"), limit_mb(e, "disk_mb"),
                        count ? procs_text(id) : strdup("-"),
                        cli_field_text(e, "idle_s"),   cli_time_text(json_get(e, "last_activity_at")),
                };
                r = cli_table_add(&t, row);
                if (r < 0)
                        return r;
        }
        if (clear)
                fputs("\033[H\033[2J", stdout);
        printf("%zu sandboxes: %zu running, %zu paused, %zu suspended, %zu other%s\n", json_array_size(list), counts[0],
               counts[1], counts[2], counts[3],
               json_get(resp.json, "next") && json_type(json_get(resp.json, "next")) != JSON_NULL
                       ? " (the first page only)"
                       : "");
        printf("CPU, MEMORY and DISK are each sandbox's limits: this server reports no per-sandbox usage\n"
               "(no GET /v1/sandboxes/{id}/metrics), so none is shown. EXECS: its running execs (space ps).\n\n");
        cli_table_print(&t, stdout);
        return fflush(stdout) == 0 ? 0 : -EPIPE;
}

int cli_top(int argc, char **argv) {
        static const CliOption options[] = { { "interval", 0, true, 1 }, { "once", 0, false, 2 }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        const char *arg = NULL;
        uint64_t interval = 2;
        bool once = false;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, options, &arg)) > 0) {
                if (r == 1) {
                        if (cli_parse_u64("interval", arg, &interval) < 0)
                                return -EINVAL;
                        if (interval < 1 || interval > 3600)
                                return cli_usage_error("--interval: must be 1 to 3600 seconds, got '%s'", arg);
                } else
                        once = true;
        }
        r = cli_parser_end(&p, r, 0, 0);
        if (r <= 0)
                return r;
        /* Refreshing only where someone watches; into a pipe one listing. */
        if (once || arg_json || !isatty(STDOUT_FILENO))
                return top_once(false);

        struct sigaction sa = { .sa_handler = top_sigint };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        while (!top_stop) {
                r = top_once(true);
                if (r < 0)
                        return r;
                for (uint64_t i = 0; i < interval * 10 && !top_stop; i++) {
                        struct timespec ts = { .tv_nsec = 100 * 1000 * 1000 };
                        nanosleep(&ts, NULL);
                }
        }
        return 0;
}
