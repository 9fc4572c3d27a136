/* SPDX-License-Identifier: MIT */
/* GET /v1/sandboxes/{id}/metrics?since=RFC3339: a sandbox's usage series as
 * its worker sampled it (src/worker/worker-metrics.c), oldest first; and the
 * same series for the E2B surface (e2b-metrics.c). */
#include <inttypes.h>

#include "api-internal.h"
#include "str-util.h"

int api_metrics_series(ApiRequest *r, const Sandbox *sb, int64_t since_usec, JsonValue **ret, ApiError *e) {
        int k;

        if (sb->state != SANDBOX_RUNNING && sb->state != SANDBOX_PAUSED) {
                *ret = NULL; /* nothing runs, nothing is sampled: an empty series */
                return 0;
        }
        k = api_get_worker(r, e);
        if (k < 0)
                return k;
        k = worker_sandbox_metrics(r->worker, sb->id, since_usec, ret, e);
        if (k < 0 && e->code == API_SANDBOX_NOT_RUNNING) {
                /* it stopped between the store's answer and the worker's */
                *e = (ApiError) {};
                *ret = NULL;
                return 0;
        }
        return k;
}

static void kv_copy(JsonWriter *w, const char *key, const JsonValue *sample, const char *from) {
        const JsonValue *v = json_get(sample, from);
        uint64_t u;
        double d;

        json_w_key(w, key);
        if (v && json_uint64(v, &u) >= 0)
                json_w_uint(w, u);
        else if (v && json_double(v, &d) >= 0)
                json_w_double(w, d);
        else
                json_w_null(w);
}

int api_sandbox_metrics(ApiRequest *r, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_json_ JsonValue *reply = NULL;
        _cleanup_free_ char *since = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        const JsonValue *samples;
        int64_t since_usec = 0;
        int k;

        json_w_init(&w);
        k = api_query_string(r, "since", &since, e);
        if (k < 0)
                return k;
        if (since && api_parse_time(since, &since_usec) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "since must be an RFC 3339 time such as 2026-11-30T01:02:03Z, not '%.40s'", since);
        k = api_sandbox_lookup(r, r->params[0], false, &sb, e);
        if (k < 0)
                return k;
        k = api_metrics_series(r, &sb, since_usec, &reply, e);
        if (k < 0)
                return k;
        samples = json_get(reply, "samples");
        json_w_object_begin(&w);
        json_w_key(&w, "metrics");
        json_w_array_begin(&w);
        for (size_t i = 0; samples && i < json_array_size(samples); i++) {
                const JsonValue *s = json_array_at(samples, i);
                char ts[JSON_OUT_TIME_MAX];
                int64_t t = 0;
                uint64_t cpu_u;

                (void) json_int64(json_get(s, "time_usec"), &t);
                json_out_time(t, ts);
                json_w_object_begin(&w);
                json_w_kv_string(&w, "time", ts);
                json_w_key(&w, "cpu_usage_s");
                if (json_uint64(json_get(s, "cpu_usec"), &cpu_u) >= 0)
                        json_w_double(&w, (double) cpu_u / 1e6);
                else
                        json_w_null(&w);
                kv_copy(&w, "cpu_percent", s, "cpu_percent");
                kv_copy(&w, "memory_bytes", s, "memory_bytes");
                kv_copy(&w, "memory_limit_bytes", s, "memory_limit_bytes");
                kv_copy(&w, "oom_kills", s, "oom_kills");
                kv_copy(&w, "disk_bytes", s, "disk_bytes");
                kv_copy(&w, "disk_limit_bytes", s, "disk_limit_bytes");
                kv_copy(&w, "net_rx_bytes", s, "net_rx_bytes");
                kv_copy(&w, "net_tx_bytes", s, "net_tx_bytes");
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}
