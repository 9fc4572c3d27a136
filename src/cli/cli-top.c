/* SPDX-License-Identifier: MIT */
/* space top [--interval S] [--once]: the sandboxes with their state, their
 * use of CPU, memory and disk against their limits (the last sample of GET
 * /v1/sandboxes/{id}/metrics, taken by the worker every 5 s), OOM kills and
 * running execs, redrawn every S seconds on a terminal. A figure the server
 * does not know is "-", never a number made up. */

#include <inttypes.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "cli-common.h"
#include "cli-verbs.h"

#define CLI_TOP_PAGE 1000U
#define CLI_TOP_PROCS_MAX 64U /* (the legend says 64)  running sandboxes whose usage and execs are shown (two calls each) */
#define CLI_TOP_SAMPLE_AGE_S 30 /* a sample older than this says nothing of now */

typedef struct TopUsage {
        char *cpu, *memory, *disk, *oom;
} TopUsage;

static void top_usage_done(TopUsage *u) {
        free(u->cpu);
        free(u->memory);
        free(u->disk);
        free(u->oom);
}

static volatile sig_atomic_t top_stop = 0;

static void top_sigint(int sig) {
        top_stop = 1;
}

static char *size_text(uint64_t bytes) {
        char buf[32];
        cli_format_size(bytes, buf, sizeof buf);
        return strdup(buf);
}

/* "USED/LIMIT", "USED", "-/LIMIT" or "-" from a sample's fields (bytes) and the sandbox's limit (MiB). */
static char *use_of(const JsonValue *sample, const char *used_key, const char *limit_key, uint64_t limit_mb) {
        _cleanup_free_ char *used = NULL, *limit = NULL;
        uint64_t v;

        if (json_uint64(json_get(sample, used_key), &v) >= 0)
                used = size_text(v);
        if (json_uint64(json_get(sample, limit_key), &v) >= 0 && v > 0)
                limit = size_text(v);
        else if (limit_mb > 0)
                limit = size_text(limit_mb * 1024 * 1024);
        if (!used && !limit)
                return strdup("-");
        return strdup_printf("%s/%s", used ?: "-", limit ?: "-");
}

/* The last sample of a running sandbox's metrics, as text; "-" where there is none. */
static void usage_of(const char *id, uint64_t memory_mb, uint64_t disk_mb, TopUsage *u) {
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *e = cli_escape(id), *target = NULL;
        const JsonValue *list, *last = NULL;
        char since[32];
        struct tm tm;
        time_t t = time(NULL) - CLI_TOP_SAMPLE_AGE_S;
        double pct;
        uint64_t n;

        if (gmtime_r(&t, &tm) && strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm) > 0 && e)
                target = strjoin("/v1/sandboxes/", e, "/metrics?since=", since);
        /* a sandbox that changed state since the listing is not an error of top's */
        if (target && cli_call_quiet(target, &resp) >= 0) {
                list = json_get(resp.json, "metrics");
                if (json_type(list) == JSON_ARRAY && json_array_size(list) > 0)
                        last = json_array_at(list, json_array_size(list) - 1);
        }
        u->cpu = last && json_double(json_get(last, "cpu_percent"), &pct) >= 0 ? strdup_printf("%.1f", pct)
                                                                              : strdup("-");
        u->memory = use_of(last, "memory_bytes", "memory_limit_bytes", memory_mb);
        u->disk = use_of(last, "disk_bytes", "disk_limit_bytes", disk_mb);
        u->oom = last && json_uint64(json_get(last, "oom_kills"), &n) >= 0 ? strdup_printf("%" PRIu64, n)
                                                                            : strdup("-");
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
        static const char *const header[] = { "SANDBOX", "STATE", "TEMPLATE", "CPUS", "CPU%", "MEMORY", "DISK",
                                              "OOM", "EXECS", "LAST_ACTIVITY" };
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
                bool live = streq(state, "running") && !isempty(id) && counted++ < CLI_TOP_PROCS_MAX;
                _cleanup_(top_usage_done) TopUsage u = {};
                uint64_t memory_mb = 0, disk_mb = 0;
                (void) json_uint64(json_get(e, "memory_mb"), &memory_mb);
                (void) json_uint64(json_get(e, "disk_mb"), &disk_mb);
                if (live)
                        usage_of(id, memory_mb, disk_mb, &u);
                else
                        u = (TopUsage){ .cpu = strdup("-"), .memory = use_of(NULL, "", "", memory_mb),
                                        .disk = use_of(NULL, "", "", disk_mb), .oom = strdup("-") };
                char *row[] = {
                        cli_field_text(e, "id"),  strdup(state), cli_field_text(e, "template"), cli_field_text(e, "cpu"),
                        TAKE_PTR(u.cpu),          TAKE_PTR(u.memory), TAKE_PTR(u.disk), TAKE_PTR(u.oom),
                        live ? procs_text(id) : strdup("-"), cli_time_text(json_get(e, "last_activity_at")),
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
        printf("CPU%%: of one CPU over the last 5 s; MEMORY, DISK: in use/limit (disk beyond its template);\n"
               "OOM: processes the kernel's OOM killer ended; EXECS: its running execs (space ps).%s\n\n",
               counted > CLI_TOP_PROCS_MAX ? " Usage of the first 64 running only." : "");
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
