/* SPDX-License-Identifier: MIT */
/* space events [ID] [--type T] [--limit N] [--since TIME] [--after SEQ] [--follow]:
 * GET /v1/events. Without --since/--after the newest --limit events (default
 * CLI_EVENTS_TAIL), newest last, and --follow starts now; with them a replay
 * from there. The API lists oldest first from a sequence number, so the tail
 * is found by a search over `after` (a page of N from after=X is full exactly
 * while X is below the start of the newest N): O(log events) small requests. */

#include <inttypes.h>
#include <time.h>

#include "cli-common.h"
#include "cli-verbs.h"

#define CLI_EVENTS_TAIL 20U
#define CLI_EVENTS_PAGE 1000U /* the API's largest page */
#define CLI_EVENTS_PROBES 200 /* requests a tail search may take (2 per bit of the sequence) */

enum {
        OPT_TYPE = 1,
        OPT_FOLLOW,
        OPT_LIMIT,
        OPT_SINCE,
        OPT_AFTER,
};

static const CliOption options[] = {
        { "type", 0, true, OPT_TYPE },
        { "follow", 'f', false, OPT_FOLLOW },
        { "limit", 'n', true, OPT_LIMIT },
        { "since", 0, true, OPT_SINCE },
        { "after", 0, true, OPT_AFTER },
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

/* With --json a listing is printed as the API's {"events":[...],"next":SEQ}, collected here;
 * a followed stream as NDJSON, one event a line (collect NULL). */
static JsonWriter *collect = NULL;

/* Prints one event. */
static int event_emit(const JsonValue *e) {
        if (arg_json) {
                _cleanup_free_ char *s = NULL;
                size_t n = 0;
                if (json_serialize(e, &s, &n) < 0)
                        return cli_error_errno(-ENOMEM, "out of memory");
                if (collect) {
                        json_w_raw(collect, s);
                        return 0;
                }
                if (fwrite(s, 1, n, stdout) != n || fputc('\n', stdout) == EOF)
                        return -EPIPE;
        } else
                event_print(e);
        return 0;
}

static void collect_begin(JsonWriter *w) {
        json_w_init(w);
        json_w_object_begin(w);
        json_w_key(w, "events");
        json_w_array_begin(w);
        collect = w;
}

static int collect_end(JsonWriter *w, uint64_t last) {
        _cleanup_free_ char *s = NULL;
        size_t n = 0;

        collect = NULL;
        json_w_array_end(w);
        json_w_key(w, "next");
        json_w_uint(w, last);
        json_w_object_end(w);
        if (json_w_finish(w, &s, &n) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");
        return cli_print_raw(s, n);
}

typedef struct EventsQuery {
        char *base; /* "/v1/events?sandbox=..&type=..&since=..&" */
} EventsQuery;

/* One page: the events after seq `after`, at most `limit`. */
static int events_page(const EventsQuery *q, uint64_t after, uint64_t limit, CliResponse *ret,
                       const JsonValue **ret_list) {
        _cleanup_free_ char *target = strdup_printf("%safter=%" PRIu64 "&limit=%" PRIu64, q->base, after, limit);
        const JsonValue *list;
        int r;

        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        cli_response_done(ret);
        r = cli_call("GET", target, NULL, ret);
        if (r < 0)
                return r;
        list = json_get(ret->json, "events");
        if (json_type(list) != JSON_ARRAY)
                return cli_error("the server's answer has no event list");
        *ret_list = list;
        return (int) MIN(json_array_size(list), (size_t) INT32_MAX);
}

static int64_t event_seq(const JsonValue *e) {
        int64_t seq = 0;
        return json_int64(json_get(e, "seq"), &seq) >= 0 ? seq : 0;
}

/* The `after` from which the newest n events (n >= 1) are one page. */
static int events_tail_start(const EventsQuery *q, uint64_t n, uint64_t *ret) {
        _cleanup_(cli_response_done) CliResponse resp = {};
        const JsonValue *list = NULL;
        uint64_t lo = 0, hi, step = 1024;
        int r, probes = 0;

        r = events_page(q, 0, n, &resp, &list);
        if (r < 0)
                return r;
        if ((uint64_t) r < n) {
                *ret = 0; /* all there are */
                return 0;
        }
        /* full(lo) holds; grow hi until the page from hi is short. */
        for (;;) {
                hi = lo + step;
                if (++probes > CLI_EVENTS_PROBES)
                        return cli_error("the event log keeps growing faster than it can be searched");
                r = events_page(q, hi, n, &resp, &list);
                if (r < 0)
                        return r;
                if ((uint64_t) r < n)
                        break;
                lo = hi;
                if (step < UINT64_C(1) << 60)
                        step *= 2;
        }
        while (hi - lo > 1) {
                uint64_t mid = lo + (hi - lo) / 2;
                if (++probes > CLI_EVENTS_PROBES)
                        return cli_error("the event log keeps growing faster than it can be searched");
                r = events_page(q, mid, n, &resp, &list);
                if (r < 0)
                        return r;
                if ((uint64_t) r < n)
                        hi = mid;
                else
                        lo = mid;
        }
        *ret = lo;
        return 0;
}

/* The seq of the newest event (0 if there is none). */
static int events_newest_seq(const EventsQuery *q, uint64_t *ret) {
        _cleanup_(cli_response_done) CliResponse resp = {};
        const JsonValue *list = NULL;
        uint64_t start = 0;
        int r;

        r = events_tail_start(q, 1, &start);
        if (r < 0)
                return r;
        r = events_page(q, start, 1, &resp, &list);
        if (r < 0)
                return r;
        *ret = r > 0 ? (uint64_t) MAX(event_seq(json_array_at(list, 0)), (int64_t) 0) : start;
        return 0;
}

/* Prints the newest n events, newest last; *ret_last: the newest seq (0 if none). */
static int events_tail(const EventsQuery *q, uint64_t n, uint64_t *ret_last) {
        _cleanup_(cli_response_done) CliResponse resp = {};
        const JsonValue *list = NULL;
        uint64_t start = 0;
        int r;

        r = events_tail_start(q, n, &start);
        if (r < 0)
                return r;
        r = events_page(q, start, n, &resp, &list);
        if (r < 0)
                return r;
        *ret_last = start;
        for (size_t i = 0; i < json_array_size(list); i++) {
                r = event_emit(json_array_at(list, i));
                if (r < 0)
                        return r;
                *ret_last = (uint64_t) MAX(event_seq(json_array_at(list, i)), (int64_t) 0);
        }
        return 0;
}

/* Prints every event after `after` (at most limit; 0 = all), oldest first. */
static int events_replay(const EventsQuery *q, uint64_t after, uint64_t limit, uint64_t *ret_last) {
        uint64_t printed = 0;
        int r;

        for (;;) {
                _cleanup_(cli_response_done) CliResponse resp = {};
                const JsonValue *list = NULL;
                uint64_t want = CLI_EVENTS_PAGE;

                if (limit > 0)
                        want = MIN(want, limit - printed);
                if (want == 0)
                        break;
                r = events_page(q, after, want, &resp, &list);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < json_array_size(list); i++) {
                        r = event_emit(json_array_at(list, i));
                        if (r < 0)
                                return r;
                        after = (uint64_t) MAX(event_seq(json_array_at(list, i)), (int64_t) 0);
                        printed++;
                }
                if ((uint64_t) r < want)
                        break;
        }
        *ret_last = after;
        return 0;
}

static int events_follow(const EventsQuery *q, uint64_t after) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_(cli_line_reader_done) CliLineReader lr = {};
        _cleanup_free_ char *target = strdup_printf("%sfollow=1&after=%" PRIu64, q->base, after);
        const HttpHead *h = NULL;
        int r;

        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_connect(&c);
        if (r < 0)
                return r;
        r = cli_start(c, "GET", target, NULL, NULL, 0, &h);
        if (r < 0)
                return r;
        if (fflush(stdout) != 0)
                return -EPIPE;
        for (;;) {
                _cleanup_json_ JsonValue *e = NULL;
                char errbuf[128] = "", *line;
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
                        r = json_parse(line, n, &e, errbuf, sizeof errbuf);
                        if (r < 0)
                                return cli_error_errno(r, "the server sent an invalid event: %s", errbuf);
                        if (streq(strempty(json_string(json_get(e, "type"))), "error"))
                                return cli_fail(CLI_EXIT_UNAVAILABLE, json_string(json_get(e, "code")), -EIO, "%s",
                                                strna(json_string(json_get(e, "message"))));
                        event_print(e);
                }
                if (fflush(stdout) != 0)
                        return -EPIPE; /* the reader went away */
        }
}

/* "2026-11-30T01:02:03Z" as is; "90s", "10m", "2h", "7d" as that long ago. */
static int parse_since(const char *s, char **ret) {
        uint64_t n = 0, mult;
        size_t len = strlen(s);
        _cleanup_free_ char *digits = NULL;

        if (len >= 2 && strchr("smhd", s[len - 1])) {
                digits = memdup_suffix0(s, len - 1);
                if (!digits)
                        return cli_error_errno(-ENOMEM, "out of memory");
                if (safe_atou64(digits, &n) >= 0) {
                        mult = s[len - 1] == 's' ? 1 : s[len - 1] == 'm' ? 60 : s[len - 1] == 'h' ? 3600 : 86400;
                        time_t now = time(NULL), t;
                        struct tm tm;
                        char buf[64];

                        if (n > (uint64_t) now / mult)
                                return cli_usage_error("--since: '%s' is before 1970", s);
                        t = now - (time_t) (n * mult);
                        if (!gmtime_r(&t, &tm) || strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                                return cli_error("--since: cannot format the time");
                        *ret = strdup(buf);
                        return *ret ? 0 : cli_error_errno(-ENOMEM, "out of memory");
                }
        }
        /* The server checks the RFC 3339 form and names what is wrong. */
        if (len < 10 || !(s[0] >= '0' && s[0] <= '9'))
                return cli_usage_error("--since: expected an RFC 3339 time (2026-11-30T01:02:03Z) or an age "
                                       "such as 10m, 2h, 7d; got '%s'", s);
        *ret = strdup(s);
        return *ret ? 0 : cli_error_errno(-ENOMEM, "out of memory");
}

int cli_events_show(const char *sandbox, uint64_t limit) {
        _cleanup_free_ char *esc = sandbox ? cli_escape(sandbox) : NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        EventsQuery q = {};
        uint64_t last = 0;
        int r;

        q.base = strjoin("/v1/events?", esc ? "sandbox=" : "", strempty(esc), esc ? "&" : "");
        if (!q.base)
                return cli_error_errno(-ENOMEM, "out of memory");
        if (arg_json)
                collect_begin(&w);
        r = events_tail(&q, limit, &last);
        free(q.base);
        if (arg_json) {
                int k = collect_end(&w, last);
                if (r >= 0)
                        r = k;
        }
        return r;
}

int cli_events(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_free_ char *sandbox = NULL, *type = NULL, *since = NULL, *since_q = NULL, *base = NULL;
        const char *arg = NULL;
        bool follow = false, have_limit = false, have_after = false;
        uint64_t limit = 0, after = 0, last = 0;
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
                        if (limit < 1 || limit > CLI_EVENTS_PAGE)
                                return cli_usage_error("--limit: must be 1 to %u, got '%s'", CLI_EVENTS_PAGE, arg);
                        have_limit = true;
                        break;
                case OPT_SINCE:
                        since = mfree(since);
                        if (parse_since(arg, &since) < 0)
                                return -EINVAL;
                        break;
                case OPT_AFTER:
                        if (cli_parse_u64("after", arg, &after) < 0)
                                return -EINVAL;
                        have_after = true;
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
        if (since) {
                since_q = cli_escape(since);
                if (!since_q)
                        return cli_error_errno(-ENOMEM, "out of memory");
        }
        base = strjoin("/v1/events?", sandbox ? "sandbox=" : "", strempty(sandbox), sandbox ? "&" : "",
                       type ? "type=" : "", strempty(type), type ? "&" : "", since_q ? "since=" : "",
                       strempty(since_q), since_q ? "&" : "");
        if (!base)
                return cli_error_errno(-ENOMEM, "out of memory");
        EventsQuery q = { .base = base };
        _cleanup_(json_w_done) JsonWriter w = {};

        if (arg_json && !follow)
                collect_begin(&w);
        if (since || have_after)
                /* a replay from there, oldest first (all, or the first --limit) */
                r = events_replay(&q, after, have_limit ? limit : 0, &last);
        else if (follow && !have_limit)
                r = events_newest_seq(&q, &last); /* starting now */
        else
                r = events_tail(&q, have_limit ? limit : CLI_EVENTS_TAIL, &last);
        if (arg_json && !follow) {
                int k = collect_end(&w, last);
                return r < 0 ? r : k;
        }
        if (r < 0)
                return r;
        if (!follow)
                return 0;
        return events_follow(&q, last);
}
