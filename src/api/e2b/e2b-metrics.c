/* SPDX-License-Identifier: MIT */
/* E2B's sandbox metrics, answered from the worker's samples (metrics-sandbox.c):
 * GET /sandboxes/{id}/metrics?start=&end= (unix seconds) → SandboxMetric[],
 * GET /sandboxes/metrics?sandbox_ids=a,b → {"sandboxes":{id: latest SandboxMetric}}. */
#include <inttypes.h>

#include "api-internal.h"
#include "e2b.h"
#include "str-util.h"

#define E2B_METRICS_IDS_MAX 100U /* sandbox_ids in one request */

static uint64_t u64_of(const JsonValue *s, const char *key) {
        uint64_t u;
        return json_uint64(json_get(s, key), &u) >= 0 ? u : 0;
}

/* One SandboxMetric: timestamp, timestampUnix, cpuCount, cpuUsedPct, memUsed, memTotal, memCache,
 * diskUsed, diskTotal. cpuUsedPct is of the sandbox's CPUs (cpu_percent is of one CPU). */
static void write_metric(JsonWriter *w, const JsonValue *s, uint64_t cpu_millis, const Sandbox *sb) {
        char ts[JSON_OUT_TIME_MAX];
        int64_t t = 0;
        double pct = 0, cpus = cpu_millis > 0 ? (double) cpu_millis / 1000.0 : 1.0;
        uint64_t count = cpu_millis > 0 ? (cpu_millis + 999) / 1000 : 1;
        uint64_t mem_total = u64_of(s, "memory_limit_bytes"), disk_total = u64_of(s, "disk_limit_bytes");

        (void) json_int64(json_get(s, "time_usec"), &t);
        (void) json_double(json_get(s, "cpu_percent"), &pct);
        if (mem_total == 0 && sb->memory_mb > 0)
                mem_total = sb->memory_mb << 20;
        if (disk_total == 0 && sb->disk_mb > 0)
                disk_total = sb->disk_mb << 20;
        json_out_time(t, ts);
        json_w_object_begin(w);
        json_w_kv_string(w, "timestamp", ts);
        json_w_kv_int(w, "timestampUnix", t / 1000000);
        json_w_kv_int(w, "cpuCount", (int64_t) count);
        json_w_key(w, "cpuUsedPct");
        json_w_double(w, pct / cpus);
        json_w_key(w, "memUsed");
        json_w_uint(w, u64_of(s, "memory_bytes"));
        json_w_key(w, "memTotal");
        json_w_uint(w, mem_total);
        json_w_kv_int(w, "memCache", 0);
        json_w_key(w, "diskUsed");
        json_w_uint(w, u64_of(s, "disk_bytes"));
        json_w_key(w, "diskTotal");
        json_w_uint(w, disk_total);
        json_w_object_end(w);
}

static int query_unix(ApiRequest *r, const char *key, int64_t *ret, ApiError *e) {
        uint64_t v;
        int k = api_query_u64(r, key, 0, INT64_MAX / 1000000, &v, e);
        if (k > 0)
                *ret = (int64_t) v * 1000000;
        return k;
}

int e2b_metrics(ApiRequest *r, const Sandbox *sb, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        const JsonValue *samples;
        int64_t start = 0, end = INT64_MAX;
        uint64_t cpu_millis = 0;
        int k;

        json_w_init(&w);
        k = query_unix(r, "start", &start, e);
        if (k >= 0)
                k = query_unix(r, "end", &end, e);
        if (k < 0)
                return k;
        k = api_metrics_series(r, sb, start, &reply, e);
        if (k < 0)
                return k;
        (void) json_uint64(json_get(reply, "cpu_millis"), &cpu_millis);
        if (cpu_millis == 0)
                cpu_millis = sb->cpu_millis;
        samples = json_get(reply, "samples");
        json_w_array_begin(&w);
        for (size_t i = 0; samples && i < json_array_size(samples); i++) {
                const JsonValue *s = json_array_at(samples, i);
                int64_t t = 0;
                (void) json_int64(json_get(s, "time_usec"), &t);
                if (t <= end)
                        write_metric(&w, s, cpu_millis, sb);
        }
        json_w_array_end(&w);
        return e2b_reply_json(r, 200, &w, NULL);
}

int e2b_metrics_many(ApiRequest *r, ApiError *e) {
        _cleanup_free_ char *ids = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = api_query_string(r, "sandbox_ids", &ids, e);
        if (k < 0)
                return k;
        if (k == 0 || isempty(ids))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "sandbox_ids is required (ids separated by commas)");
        json_w_object_begin(&w);
        json_w_key(&w, "sandboxes");
        json_w_object_begin(&w);
        for (char *p = ids, *next; p; p = next) {
                _cleanup_sandbox_ Sandbox sb = {};
                _cleanup_json_ JsonValue *reply = NULL;
                const JsonValue *samples;
                ApiError ignored = {};
                uint64_t cpu_millis = 0;
                size_t m;

                next = strchr(p, ',');
                if (next)
                        *next++ = 0;
                if (isempty(p))
                        continue;
                if (++n > E2B_METRICS_IDS_MAX)
                        return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "sandbox_ids names more than %u sandboxes",
                                         E2B_METRICS_IDS_MAX);
                /* an id that is not the caller's, or not there, is left out (as E2B does) */
                if (!api_sandbox_id_valid(p) || api_sandbox_lookup(r, p, false, &sb, &ignored) < 0)
                        continue;
                if (api_metrics_series(r, &sb, now_usec() - 60 * 1000000LL, &reply, &ignored) < 0)
                        continue;
                samples = json_get(reply, "samples");
                m = json_array_size(samples);
                if (m == 0)
                        continue;
                (void) json_uint64(json_get(reply, "cpu_millis"), &cpu_millis);
                json_w_key(&w, sb.id);
                write_metric(&w, json_array_at(samples, m - 1), cpu_millis ?: sb.cpu_millis, &sb);
        }
        json_w_object_end(&w);
        json_w_object_end(&w);
        return e2b_reply_json(r, 200, &w, NULL);
}
