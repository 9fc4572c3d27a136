/* SPDX-License-Identifier: MIT */
/* GET /v2/sandboxes/{id}/logs (and the older /sandboxes/{id}/logs): a
 * sandbox's log in E2B's shape, made of space's event history of it (its
 * create, starts, pauses, resumes, checkpoints, credential grants, network
 * changes, errors, delete: src/api/events.c), one entry per event:
 * {timestamp, level, message: "<type>: <reason>", fields: {type, actor,
 * seq}}. level: error for failures, info otherwise. Query (v2): cursor (ms:
 * forward from it, or backward from it), limit (1..1000, default 1000),
 * direction (forward|backward), level (the minimum), search (a
 * case-sensitive substring of the message). A deleted sandbox's log stays
 * readable while its row does. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "e2b.h"
#include "str-util.h"

#define E2B_LOGS_LIMIT_MAX 1000U
#define E2B_LOGS_SCAN_MAX 10000U /* events of one sandbox read at most */

typedef enum LogLevel { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR, _LOG_LEVEL_MAX } LogLevel;

static const char *const level_names[_LOG_LEVEL_MAX] = { "debug", "info", "warn", "error" };

static LogLevel event_level(const Event *ev) {
        static const char *const failures[] = { ".error", "_failed", ".oom", ".unavailable" };
        size_t n = strlen(ev->type);

        for (size_t i = 0; i < ELEMENTSOF(failures); i++) {
                size_t m = strlen(failures[i]);
                if (n >= m && streq(ev->type + n - m, failures[i]))
                        return LOG_LEVEL_ERROR;
        }
        return LOG_LEVEL_INFO;
}

static char *event_message(const Event *ev) {
        return isempty(ev->reason) ? strdup(ev->type) : strdup_printf("%s: %s", ev->type, ev->reason);
}

static void write_entry(JsonWriter *w, const Event *ev, const char *msg, bool v1) {
        char ts[JSON_OUT_TIME_MAX], seq[24];

        json_out_time(ev->time_usec, ts);
        json_w_object_begin(w);
        json_w_kv_string(w, "timestamp", ts);
        if (v1) {
                json_w_kv_string(w, "line", msg);
                json_w_object_end(w);
                return;
        }
        json_w_kv_string(w, "level", level_names[event_level(ev)]);
        json_w_kv_string(w, "message", msg);
        json_w_key(w, "fields");
        json_w_object_begin(w);
        json_w_kv_string(w, "type", ev->type);
        json_w_kv_string(w, "actor", ev->actor);
        snprintf(seq, sizeof seq, "%" PRId64, ev->seq);
        json_w_kv_string(w, "seq", seq);
        json_w_object_end(w);
        json_w_object_end(w);
}

typedef struct LogsQuery {
        bool has_cursor;
        uint64_t cursor_ms;
        uint64_t limit;
        bool backward;
        LogLevel level;
        char *search;
} LogsQuery;

static int parse_query(ApiRequest *r, bool v1, LogsQuery *q, ApiError *e) {
        _cleanup_free_ char *dir = NULL, *level = NULL, *cursor = NULL;
        int k;

        q->limit = E2B_LOGS_LIMIT_MAX;
        q->level = LOG_LEVEL_DEBUG;
        k = api_query_u64(r, "limit", 0, E2B_LOGS_LIMIT_MAX, &q->limit, e);
        if (k >= 0)
                k = api_query_string(r, v1 ? "start" : "cursor", &cursor, e);
        if (k >= 0 && !v1)
                k = api_query_string(r, "direction", &dir, e);
        if (k >= 0 && !v1)
                k = api_query_string(r, "level", &level, e);
        if (k >= 0 && !v1)
                k = api_query_string(r, "search", &q->search, e);
        if (k < 0)
                return k;
        if (cursor) {
                if (isempty(cursor) || strlen(cursor) > 15 || strspn(cursor, "0123456789") != strlen(cursor))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "%s must be a time in milliseconds since the epoch", v1 ? "start" : "cursor");
                q->cursor_ms = strtoull(cursor, NULL, 10);
                q->has_cursor = true;
        }
        if (dir && !streq(dir, "forward") && !streq(dir, "backward"))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "direction must be forward or backward");
        q->backward = dir && streq(dir, "backward");
        if (level) {
                size_t i;
                for (i = 0; i < _LOG_LEVEL_MAX && !streq(level, level_names[i]); i++)
                        ;
                if (i == _LOG_LEVEL_MAX)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "level must be one of debug, info, warn, error");
                q->level = (LogLevel) i;
        }
        return 0;
}

static bool entry_wanted(const LogsQuery *q, const Event *ev, const char *msg) {
        int64_t ms = ev->time_usec / 1000;

        if (event_level(ev) < q->level)
                return false;
        if (q->search && !strstr(msg, q->search))
                return false;
        if (q->has_cursor && (q->backward ? ms > (int64_t) q->cursor_ms : ms < (int64_t) q->cursor_ms))
                return false;
        return true;
}

int e2b_sandbox_logs(ApiRequest *r, const char *id, bool v1, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        LogsQuery q = {};
        Sandbox sb = {};
        EventFilter f = {};
        Event *list = NULL;
        size_t n = 0, shown = 0;
        int k;

        k = parse_query(r, v1, &q, e);
        if (k < 0)
                goto finish;
        k = api_sandbox_id_valid(id) ? store_sandbox_get(r->store, r->key.tenant_id, id, &sb) : -ENOENT;
        sandbox_done(&sb);
        if (k == -ENOENT) {
                k = api_error(e, k, API_NOT_FOUND, "sandbox '%.64s' not found", id);
                goto finish;
        }
        if (k < 0) {
                k = api_store_error(e, k, "looking up the sandbox");
                goto finish;
        }
        f.tenant_id = r->key.tenant_id;
        f.sandbox_id = id;
        f.limit = E2B_LOGS_SCAN_MAX;
        k = store_event_list(r->store, &f, &list, &n);
        if (k < 0) {
                k = api_store_error(e, k, "listing the sandbox's events");
                goto finish;
        }
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "logs");
        json_w_array_begin(&w);
        for (size_t j = 0; j < n && shown < q.limit; j++) {
                const Event *ev = &list[q.backward ? n - 1 - j : j];
                _cleanup_free_ char *msg = event_message(ev);
                if (!msg) {
                        k = api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        goto finish;
                }
                if (!entry_wanted(&q, ev, msg))
                        continue;
                write_entry(&w, ev, msg, v1);
                shown++;
        }
        json_w_array_end(&w);
        if (v1) { /* the older shape has both */
                json_w_key(&w, "logEntries");
                json_w_array_begin(&w);
                shown = 0;
                for (size_t j = 0; j < n && shown < q.limit; j++) {
                        _cleanup_free_ char *msg = event_message(&list[j]);
                        if (!msg || !entry_wanted(&q, &list[j], msg))
                                continue;
                        write_entry(&w, &list[j], msg, false);
                        shown++;
                }
                json_w_array_end(&w);
        }
        json_w_object_end(&w);
        k = e2b_reply_json(r, 200, &w, NULL);
finish:
        event_array_free(list, n);
        free(q.search);
        return k;
}
