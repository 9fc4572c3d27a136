/* SPDX-License-Identifier: MIT */
/* /v1/info (what this deployment offers), /healthz, /metrics (Prometheus). */

#include <inttypes.h>
#include <stdio.h>

#include "api-internal.h"
#include "metrics-hist.h"
#include "fd-util.h"
#include "log.h"
#include "space-build.h"


static void limits_object(JsonWriter *w, const char *key, uint64_t cpu_millis, uint64_t memory_mb, uint64_t disk_mb,
                          uint64_t pids, uint64_t timeout_s) {
        json_w_key(w, key);
        json_w_object_begin(w);
        json_w_key(w, "cpu");
        json_w_double(w, cpu_millis / 1000.0);
        json_w_key(w, "memory_mb");
        json_w_uint(w, memory_mb);
        json_w_key(w, "disk_mb");
        json_w_uint(w, disk_mb);
        json_w_key(w, "pids_max");
        json_w_uint(w, pids);
        json_w_key(w, "timeout_s");
        json_w_uint(w, timeout_s);
        json_w_object_end(w);
}

int api_info(ApiRequest *r, ApiError *e) {
        static const char *const ours[] = { "version", "limits", "default_template", "upload_max_mb", NULL };
        const Config *c = api_config(r->api);
        _cleanup_json_ JsonValue *winfo = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *text = NULL;
        int k;

        json_w_init(&w);
        k = api_get_worker(r, e);
        if (k < 0)
                return k;
        k = worker_info(r->worker, &text, e);
        if (k < 0) {
                if (e->code == API_OK)
                        (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
                return k;
        }
        if (json_parse(text, strlen(text), &winfo, NULL, 0) < 0 || json_type(winfo) != JSON_OBJECT)
                return api_error(e, -EBADMSG, API_INTERNAL, "the worker sent malformed information");

        json_w_object_begin(&w);
        json_w_kv_string(&w, "version", SPACE_VERSION);
        if (!json_get(winfo, "runtimes")) {
                json_w_key(&w, "runtimes");
                json_w_raw(&w, "[\"ns\"]");
        }
        /* what the worker knows: runtimes, storage, cgroup, acceleration, ... */
        for (size_t i = 0; i < json_object_size(winfo); i++) {
                const char *key = json_object_key(winfo, i);
                _cleanup_free_ char *value = NULL;
                bool skip = false;

                for (size_t j = 0; ours[j]; j++)
                        skip = skip || streq(key, ours[j]);
                if (skip || json_serialize(json_object_value(winfo, i), &value, NULL) < 0)
                        continue;
                json_w_key(&w, key);
                json_w_raw(&w, value);
        }
        json_w_key(&w, "limits");
        json_w_object_begin(&w);
        limits_object(&w, "default", c->default_cpu_millis, c->default_memory_mb, c->default_disk_mb,
                      c->default_pids_max, c->default_timeout_s);
        limits_object(&w, "max", c->max_cpu_millis, c->max_memory_mb, c->max_disk_mb, c->max_pids, c->max_timeout_s);
        json_w_key(&w, "sandboxes");
        json_w_uint(&w, c->max_sandboxes);
        json_w_object_end(&w);
        json_w_key(&w, "upload_max_mb");
        json_w_uint(&w, c->upload_max_mb);
        json_w_kv_string(&w, "default_template", c->default_template);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

int api_healthz(ApiRequest *r, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        int k;

        json_w_init(&w);
        k = api_get_store(r, e);
        if (k >= 0) {
                k = store_schema_version(r->store);
                if (k < 0)
                        return api_store_error(e, k, "health check");
        }
        if (k < 0)
                return k;
        json_w_object_begin(&w);
        json_w_kv_string(&w, "status", "ok");
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

static int count_states(ApiRequest *r, uint64_t counts[static _SANDBOX_STATE_MAX]) {
        for (int st = 0; st < _SANDBOX_STATE_MAX; st++) {
                SandboxFilter f = { .state = st };
                int k;

                if (st == SANDBOX_DELETED)
                        continue;
                k = store_sandbox_count(r->store, &f, &counts[st]);
                if (k < 0)
                        return k;
        }
        return 0;
}

/* space_warm_pool_size{template}: paused sandboxes ready to be claimed, per configured pool. */
static void print_warm_pools(ApiRequest *r, FILE *f) {
        ConfigWarmPool pools[CONFIG_WARM_POOLS_MAX];
        char err[128];
        size_t n = 0;

        if (config_warm_pools(api_config(r->api)->warm_pool, pools, &n, err, sizeof err) < 0 || n == 0)
                return;
        fprintf(f, "# HELP space_warm_pool_size Sandboxes ready in a template's warm pool.\n"
                   "# TYPE space_warm_pool_size gauge\n");
        for (size_t i = 0; i < n; i++) {
                uint64_t ready = 0;
                (void) store_sandbox_warm_count(r->store, pools[i].template_name, &ready, NULL);
                fprintf(f, "space_warm_pool_size{template=\"%s\"} %" PRIu64 "\n", pools[i].template_name, ready);
        }
}

int api_metrics(ApiRequest *r, ApiError *e) {
        uint64_t counts[_SANDBOX_STATE_MAX] = {};
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        bool store_up;
        FILE *f;
        int k;

        store_up = api_get_store(r, NULL) >= 0 && count_states(r, counts) >= 0;
        /* /metrics needs no key; one that is sent must be good: it shows that key's sandboxes (all for
         * an admin key), which a scrape without one does not see */
        if (http_head_header(r->head, "Authorization")) {
                if (!store_up)
                        return api_error(e, -EIO, API_UNAVAILABLE, "the store is unavailable");
                k = api_auth(r, e);
                if (k < 0)
                        return k;
        }

        f = open_memstream(&text, &size);
        if (!f)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        fprintf(f, "# HELP space_build_info Version of this spaced.\n"
                   "# TYPE space_build_info gauge\n"
                   "space_build_info{version=\"%s\"} 1\n", SPACE_VERSION);
        fprintf(f, "# HELP space_store_up Whether the store answered.\n"
                   "# TYPE space_store_up gauge\n"
                   "space_store_up %d\n", store_up);
        if (store_up) {
                fprintf(f, "# HELP space_sandboxes Sandboxes by state (deleted ones are not counted).\n"
                           "# TYPE space_sandboxes gauge\n");
                for (int s = 0; s < _SANDBOX_STATE_MAX; s++)
                        if (s != SANDBOX_DELETED)
                                fprintf(f, "space_sandboxes{state=\"%s\"} %" PRIu64 "\n",
                                        sandbox_state_to_string((SandboxState) s) ?: "unknown", counts[s]);
                print_warm_pools(r, f);
        }
        fprintf(f, "# HELP space_http_requests_total HTTP requests answered, by status class.\n"
                   "# TYPE space_http_requests_total counter\n");
        for (unsigned c = 1; c <= 5; c++)
                fprintf(f, "space_http_requests_total{code=\"%uxx\"} %" PRIu64 "\n", c,
                        (uint64_t) atomic_load(&r->api->requests_by_class[c]));
        api_metrics_print_sandboxes(r, f);
        api_hist_print(f);
        fprintf(f, "# HELP space_http_requests_in_flight HTTP requests being answered.\n"
                   "# TYPE space_http_requests_in_flight gauge\n"
                   "space_http_requests_in_flight %" PRIu64 "\n",
                (uint64_t) atomic_load(&r->api->requests_in_flight));
        k = fflush(f) == 0 && !ferror(f) ? 0 : -ENOMEM;
        fclose(f);
        if (k < 0)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");

        {
                char hdr[64];
                snprintf(hdr, sizeof hdr, "X-Request-Id: %s\r\n", r->req_id);
                r->status = 200;
                return http_conn_respond(r->conn, 200, "text/plain; version=0.0.4; charset=utf-8", text, size, hdr);
        }
}
