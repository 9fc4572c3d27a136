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

/* The runtime a create that names none gets: the host's setting, the
 * caller's tenant's, and what applies (a template may still name its own). */
static int default_runtime_object(ApiRequest *r, JsonWriter *w, ApiError *e) {
        char buf[8];
        const char *tenant, *applies;
        int k;

        k = api_tenant_default_runtime(r, r->key.tenant_id, buf, sizeof buf, e);
        if (k < 0)
                return k;
        tenant = buf[0] ? buf : NULL;
        applies = tenant ?: api_config(r->api)->default_runtime;
        json_w_key(w, "default_runtime");
        json_w_object_begin(w);
        json_w_kv_string(w, "host", api_config(r->api)->default_runtime);
        json_w_key(w, "tenant");
        if (tenant)
                json_w_string(w, tenant);
        else
                json_w_null(w);
        json_w_kv_string(w, "setting", applies);
        json_w_kv_string(w, "applies", api_runtime_resolve(r, applies));
        json_w_object_end(w);
        return 0;
}

int api_info(ApiRequest *r, ApiError *e) {
        static const char *const ours[] = { "version",         "limits", "default_template", "upload_max_mb",
                                            "default_runtime", "caller", NULL };
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
        k = default_runtime_object(r, &w, e);
        if (k < 0)
                return k;
        /* who asks: what a client (the dashboard) may show this key */
        json_w_key(&w, "caller");
        json_w_object_begin(&w);
        json_w_kv_string(&w, "key", r->key.id);
        json_w_kv_string(&w, "tenant", r->tenant_name);
        json_w_kv_bool(&w, "admin", r->key.admin);
        json_w_object_end(&w);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

/* A ping of the worker answered within this, or it is "not responding" (a
 * stopped or hung worker): /healthz and /readyz never wait longer. */
#define API_WORKER_PING_MSEC 1000

typedef struct Health {
        bool store_ok;
        char store_message[API_ERROR_MESSAGE_MAX];
        bool worker_ok;                 /* serving and answering (always true in a cluster: not ours) */
        const char *worker_state;       /* ok, starting, down, not_responding, stopping, cluster */
        char worker_message[API_ERROR_MESSAGE_MAX];
        JsonValue *worker_health;       /* the worker's own view (worker_health()), NULL if it did not answer */
} Health;

static void health_done(Health *h) {
        json_free(h->worker_health);
}

static void health_check(ApiRequest *r, Health *h) {
        ApiWorkerStatus *st = r->api->worker_status;
        ApiError e = {};
        int k;

        k = api_get_store(r, &e);
        if (k >= 0) {
                k = store_schema_version(r->store);
                if (k < 0)
                        (void) api_store_error(&e, k, "health check");
        }
        h->store_ok = k >= 0;
        if (!h->store_ok)
                (void) strscpy(h->store_message, sizeof h->store_message, e.message);

        if (r->api->cluster_token) {
                h->worker_ok = true;
                h->worker_state = "cluster";
                return;
        }
        if (st && atomic_load(&st->phase) != API_WORKER_UP) {
                ApiWorkerPhase p = atomic_load(&st->phase);
                h->worker_state = p == API_WORKER_DOWN ? "down" : api_worker_phase_to_string(p);
                pthread_mutex_lock(&st->lock);
                snprintf(h->worker_message, sizeof h->worker_message, "%s%s",
                         p == API_WORKER_DOWN ? "it died: " : "", p == API_WORKER_DOWN ? st->last_exit : "");
                pthread_mutex_unlock(&st->lock);
                return;
        }
        /* a ping with a short deadline: a stopped worker accepts connections and answers nothing */
        _cleanup_(worker_client_freep) WorkerClient *wc = NULL;
        _cleanup_free_ char *json = NULL;
        e = (ApiError) {};
        k = worker_client_new(r->api->worker_address, r->api->agent_dir, &wc);
        if (k >= 0) {
                worker_client_set_reply_timeout(wc, API_WORKER_PING_MSEC);
                k = worker_health(wc, &json, &e);
        }
        if (k >= 0 && json_parse(json, strlen(json), &h->worker_health, NULL, 0) >= 0) {
                h->worker_ok = true;
                h->worker_state = "ok";
                return;
        }
        h->worker_state = k == -ETIMEDOUT ? "not_responding" : "down";
        if (k == -ETIMEDOUT)
                snprintf(h->worker_message, sizeof h->worker_message, "no answer within %d ms",
                         API_WORKER_PING_MSEC);
        else
                (void) strscpy(h->worker_message, sizeof h->worker_message, e.message[0] ? e.message : strerror(-k));
}

/* A part the worker reports on (pool, gateway, spawner): its object, or "unknown". */
static void health_part(JsonWriter *w, const Health *h, const char *key) {
        const JsonValue *v = json_get(h->worker_health, key);
        _cleanup_free_ char *text = NULL;
        size_t n;

        json_w_key(w, key);
        if (json_type(v) == JSON_OBJECT && json_serialize(v, &text, &n) >= 0) {
                json_w_raw(w, text);
                return;
        }
        json_w_object_begin(w);
        json_w_kv_string(w, "status", h->worker_state && streq(h->worker_state, "cluster") ? "cluster" : "unknown");
        json_w_object_end(w);
}

static void health_components(JsonWriter *w, ApiRequest *r, const Health *h) {
        ApiWorkerStatus *st = r->api->worker_status;
        int64_t v;

        json_w_key(w, "components");
        json_w_object_begin(w);
        json_w_key(w, "store");
        json_w_object_begin(w);
        json_w_kv_string(w, "status", h->store_ok ? "ok" : "error");
        if (!h->store_ok)
                json_w_kv_string(w, "message", h->store_message);
        json_w_object_end(w);

        json_w_key(w, "worker");
        json_w_object_begin(w);
        json_w_kv_string(w, "status", h->worker_state);
        if (h->worker_message[0])
                json_w_kv_string(w, "message", h->worker_message);
        if (st) {
                json_w_kv_int(w, "pid", atomic_load(&st->pid));
                json_w_kv_int(w, "restarts", (int64_t) atomic_load(&st->restarts));
                pthread_mutex_lock(&st->lock);
                if (st->last_exit[0])
                        json_w_kv_string(w, "last_exit", st->last_exit);
                pthread_mutex_unlock(&st->lock);
                if (atomic_load(&st->phase) == API_WORKER_DOWN && (v = atomic_load(&st->next_start_usec)) > 0)
                        json_w_kv_int(w, "next_start_ms", MAX((v - now_usec()) / 1000, (int64_t) 0));
        }
        if (json_int64(json_get(h->worker_health, "sandboxes_running"), &v) >= 0)
                json_w_kv_int(w, "sandboxes_running", v);
        json_w_object_end(w);

        health_part(w, h, "pool");
        health_part(w, h, "gateway");
        health_part(w, h, "spawner");
        json_w_object_end(w);
}

/* Liveness: this process answers (200 whatever its parts say), with each part's state. */
int api_healthz(ApiRequest *r, ApiError *e) {
        _cleanup_(health_done) Health h = {};
        _cleanup_(json_w_done) JsonWriter w;

        (void) e;
        json_w_init(&w);
        health_check(r, &h);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "status", h.store_ok && h.worker_ok ? "ok" : "degraded");
        health_components(&w, r, &h);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

/* Readiness (for load balancers): 200 only while the store and the worker answer. */
int api_readyz(ApiRequest *r, ApiError *e) {
        _cleanup_(health_done) Health h = {};
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        health_check(r, &h);
        if (!h.worker_ok)
                return api_error(e, -EAGAIN, API_WORKER_UNAVAILABLE, "not ready: the worker is %s%s%s%s",
                                 streq(h.worker_state, "not_responding") ? "not responding" : h.worker_state,
                                 h.worker_message[0] ? " (" : "", h.worker_message, h.worker_message[0] ? ")" : "");
        if (!h.store_ok)
                return api_error(e, -EAGAIN, API_UNAVAILABLE, "not ready: the store is unavailable (%s)",
                                 h.store_message);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "status", "ready");
        health_components(&w, r, &h);
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
        char tls[512];
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
        if (r->api->worker_status) {
                ApiWorkerStatus *st = r->api->worker_status;
                fprintf(f, "# HELP space_worker_up Whether the local worker process is serving (its supervisor's view).\n"
                           "# TYPE space_worker_up gauge\n"
                           "space_worker_up %d\n"
                           "# HELP space_worker_restarts_total Times the local worker process was started again after "
                           "it died.\n"
                           "# TYPE space_worker_restarts_total counter\n"
                           "space_worker_restarts_total %" PRIu64 "\n",
                        atomic_load(&st->phase) == API_WORKER_UP, (uint64_t) atomic_load(&st->restarts));
        }
        fprintf(f, "# HELP space_http_requests_total HTTP requests answered, by status class.\n"
                   "# TYPE space_http_requests_total counter\n");
        for (unsigned c = 1; c <= 5; c++)
                fprintf(f, "space_http_requests_total{code=\"%uxx\"} %" PRIu64 "\n", c,
                        (uint64_t) atomic_load(&r->api->requests_by_class[c]));
        api_metrics_print_sandboxes(r, f);
        if (worker_client_tls_metrics(tls, sizeof tls) >= 0) /* after the sandboxes' round: its handshakes counted */
                fputs(tls, f);
        api_hist_print(f);
        fprintf(f, "# HELP space_http_requests_in_flight HTTP requests being answered.\n"
                   "# TYPE space_http_requests_in_flight gauge\n"
                   "space_http_requests_in_flight %" PRIu64 "\n",
                (uint64_t) atomic_load(&r->api->requests_in_flight));
        fprintf(f, "# HELP space_http_requests_limited_total Requests refused by a key's or tenant's request limits.\n"
                   "# TYPE space_http_requests_limited_total counter\n"
                   "space_http_requests_limited_total %" PRIu64 "\n",
                api_limits_refused(r->api->limits));
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
