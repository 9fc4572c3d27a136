/* SPDX-License-Identifier: MIT */
/* /v1/events: the audit and lifecycle log, with filters; follow=1 streams new
 * events as NDJSON by polling the store, until the client goes away. */

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>

#include "api-internal.h"
#include "log.h"

#define EVENTS_POLL_MSEC 200
#define EVENT_TYPE_MAX 63U

typedef struct EventQuery {
        EventFilter filter;
        char *sandbox;
        char *type;
        bool follow;
} EventQuery;

static void event_query_done(EventQuery *q) {
        free(q->sandbox);
        free(q->type);
}

static bool event_type_valid(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > EVENT_TYPE_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '.' || s[i] == '_'))
                        return false;
        return true;
}

static int parse_query(ApiRequest *r, EventQuery *q, ApiError *e) {
        _cleanup_free_ char *since = NULL;
        uint64_t after = 0, limit = API_LIST_LIMIT_DEFAULT;
        int k;

        k = api_query_string(r, "sandbox", &q->sandbox, e);
        if (k < 0)
                return k;
        if (q->sandbox && !api_sandbox_id_valid(q->sandbox))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "sandbox must be a sandbox id");
        k = api_query_string(r, "type", &q->type, e);
        if (k < 0)
                return k;
        if (q->type && !event_type_valid(q->type))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "type must be an event type (sandbox.created) or a prefix ending in '.' (sandbox.)");
        k = api_query_u64(r, "after", 0, INT64_MAX, &after, e);
        if (k < 0)
                return k;
        k = api_query_string(r, "since", &since, e);
        if (k < 0)
                return k;
        if (since && api_parse_time(since, &q->filter.since_usec) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "since must be an RFC 3339 time such as 2026-11-30T01:02:03Z, not '%.40s'", since);
        k = api_query_u64(r, "limit", 1, API_LIST_LIMIT_MAX, &limit, e);
        if (k < 0)
                return k;
        k = api_query_bool(r, "follow", &q->follow, e);
        if (k < 0)
                return k;

        q->filter.tenant_id = r->key.admin ? NULL : r->key.tenant_id; /* admins see every tenant's events */
        q->filter.sandbox_id = q->sandbox;
        q->filter.type = q->type;
        q->filter.after_seq = (int64_t) after;
        q->filter.limit = limit;
        return 0;
}

static bool client_gone(ApiRequest *r, int timeout_msec) {
        struct pollfd p = { .fd = http_conn_fd(r->conn), .events = POLLRDHUP };
        int k = poll(&p, 1, timeout_msec);
        return k > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static int follow(ApiRequest *r, EventQuery *q) {
        int k;

        k = api_stream_begin(r, 200, "application/x-ndjson");
        if (k < 0)
                return 0;
        for (;;) {
                Event *list = NULL;
                size_t n = 0;

                k = store_event_list(r->store, &q->filter, &list, &n);
                if (k < 0) {
                        _cleanup_(json_w_done) JsonWriter w;
                        log_warning_errno(k, "Listing events failed while following: %m");
                        json_w_init(&w);
                        json_w_object_begin(&w);
                        json_w_kv_string(&w, "type", "error");
                        json_w_kv_string(&w, "code", "unavailable");
                        json_w_kv_string(&w, "message", "the store failed while following events");
                        json_w_object_end(&w);
                        if (api_stream_line(r, &w) < 0 || http_conn_stream_end(r->conn) < 0)
                                http_conn_set_close(r->conn);
                        return 0;
                }
                for (size_t i = 0; i < n; i++) {
                        _cleanup_(json_w_done) JsonWriter w;
                        json_w_init(&w);
                        json_out_event(&w, &list[i], api_tenant_name(r, list[i].tenant_id));
                        q->filter.after_seq = list[i].seq;
                        if (api_stream_line(r, &w) < 0) {
                                event_array_free(list, n);
                                http_conn_set_close(r->conn);
                                return 0;
                        }
                }
                event_array_free(list, n);
                if (n >= q->filter.limit)
                        continue; /* more are waiting */
                if (client_gone(r, EVENTS_POLL_MSEC)) {
                        http_conn_set_close(r->conn);
                        return 0;
                }
        }
}

int api_events_list(ApiRequest *r, ApiError *e) {
        _cleanup_(event_query_done) EventQuery q = {};
        _cleanup_(json_w_done) JsonWriter w;
        Event *list = NULL;
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = parse_query(r, &q, e);
        if (k < 0)
                return k;
        if (q.follow)
                return follow(r, &q);

        k = store_event_list(r->store, &q.filter, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing events");
        json_w_object_begin(&w);
        json_w_key(&w, "events");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++)
                json_out_event(&w, &list[i], api_tenant_name(r, list[i].tenant_id));
        json_w_array_end(&w);
        json_w_kv_int(&w, "next", n > 0 ? list[n - 1].seq : q.filter.after_seq);
        json_w_object_end(&w);
        event_array_free(list, n);
        return api_reply_json(r, 200, &w);
}
