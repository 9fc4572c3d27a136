/* SPDX-License-Identifier: MIT */
/* The worker's per-sandbox samples (worker-metrics.h) and the two ops that
 * hand them out: "metrics" (one sandbox's series since a time) and
 * "metrics_live" (the latest sample of every live sandbox, for /metrics). */
#include <inttypes.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc-util.h"
#include "cgroup.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"
#include "worker-internal.h"
#include "worker-metrics.h"

typedef struct MetricsRing {
        char id[STORE_ID_MAX];
        uint32_t cpu_millis;   /* its CPU limit as last applied (0: unlimited / not known) */
        uint64_t net_allowed, net_denied, net_unreported; /* the gateway's events so far */
        size_t head, count;    /* next slot to write; samples held */
        WorkerMetricSample s[WORKER_METRICS_RING];
} MetricsRing;

/* One worker per process: the rings are this file's. */
static MetricsRing **rings;
static size_t n_rings;
static int64_t last_sample_mono_usec;
/* what sampling cost this worker: CPU time (its thread's) and samples taken, since it started */
static uint64_t sampling_cpu_usec, samples_taken;

static int64_t thread_cpu_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static MetricsRing *ring_find(const char *id) {
        for (size_t i = 0; i < n_rings; i++)
                if (streq(rings[i]->id, id))
                        return rings[i];
        return NULL;
}

static const WorkerMetricSample *ring_latest(const MetricsRing *m) {
        if (m->count == 0)
                return NULL;
        return &m->s[(m->head + WORKER_METRICS_RING - 1) % WORKER_METRICS_RING];
}

/* Host-side counters of every link (/proc/self/net/dev: this netns, where the veths' host ends are). */
typedef struct NetDev {
        char name[IFNAMSIZ];
        uint64_t rx, tx;
} NetDev;

static int read_net_dev(NetDev **ret, size_t *ret_n) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/net/dev", "re");
        _cleanup_free_ NetDev *devs = NULL;
        size_t n = 0, allocated = 0;
        char line[512];

        if (!f)
                return negative_errno();
        while (fgets(line, sizeof line, f)) {
                unsigned long long rx, tx, skip[7];
                char *colon = strchr(line, ':'), *name = line;
                if (!colon)
                        continue;
                *colon = 0;
                while (*name == ' ')
                        name++;
                if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &rx, &skip[0], &skip[1],
                           &skip[2], &skip[3], &skip[4], &skip[5], &skip[6], &tx) != 9)
                        continue;
                if (n >= allocated) {
                        size_t na = allocated ? allocated * 2 : 32;
                        NetDev *nd = realloc(devs, na * sizeof *devs);
                        if (!nd)
                                return -ENOMEM;
                        devs = nd;
                        allocated = na;
                }
                if (strscpy(devs[n].name, sizeof devs[n].name, name) < 0)
                        continue;
                devs[n].rx = rx;
                devs[n].tx = tx;
                n++;
        }
        *ret = TAKE_PTR(devs);
        *ret_n = n;
        return 0;
}

static void sample_one(Worker *w, LiveSandbox *l, MetricsRing *m, const NetDev *devs, size_t n_devs) {
        WorkerMetricSample s = {
                .time_usec = now_usec(),
                .cpu_usec = WORKER_METRIC_NONE,
                .memory_bytes = WORKER_METRIC_NONE,
                .memory_limit_bytes = WORKER_METRIC_NONE,
                .oom_kills = WORKER_METRIC_NONE,
                .disk_bytes = WORKER_METRIC_NONE,
                .disk_limit_bytes = WORKER_METRIC_NONE,
                .net_rx_bytes = WORKER_METRIC_NONE,
                .net_tx_bytes = WORKER_METRIC_NONE,
                .cpu_percent = -1,
        };
        const WorkerMetricSample *prev = ring_latest(m);
        CgroupUsage u;
        uint64_t v, limit;

        if (cgroup_usage(l->id, &u) >= 0) {
                s.cpu_usec = u.cpu_usec;
                s.memory_bytes = u.memory_bytes;
                s.memory_limit_bytes = u.memory_max_bytes;
        }
        if (l->rt->oom_kills(l->id, &v) >= 0)
                s.oom_kills = v;
        /* the qgroup's figures, as statfs inside shows them (worker-statfs.c); else the pool's count */
        if (l->quota_fd >= 0 && pool_quota_read(l->quota_fd, &limit, &v) >= 0) {
                s.disk_bytes = v;
                s.disk_limit_bytes = limit > 0 ? limit : WORKER_METRIC_NONE;
        } else if (pool_sandbox_usage(w->pool, l->id, &v) >= 0)
                s.disk_bytes = v;
        if (l->net) {
                char link[IFNAMSIZ];
                if (worker_net_link_name(w, l->slot, link) >= 0)
                        for (size_t i = 0; i < n_devs; i++)
                                if (streq(devs[i].name, link)) {
                                        /* the host end: what it receives the sandbox sent */
                                        s.net_rx_bytes = devs[i].tx;
                                        s.net_tx_bytes = devs[i].rx;
                                        break;
                                }
        }
        if (prev && prev->cpu_usec != WORKER_METRIC_NONE && s.cpu_usec != WORKER_METRIC_NONE &&
            s.cpu_usec >= prev->cpu_usec && s.time_usec > prev->time_usec)
                s.cpu_percent = 100.0 * (double) (s.cpu_usec - prev->cpu_usec) /
                                (double) (s.time_usec - prev->time_usec);
        m->cpu_millis = l->limits_known ? l->limits.cpu_millis : 0;
        s.net_allowed = m->net_allowed;
        s.net_denied = m->net_denied;
        s.net_unreported = m->net_unreported;
        m->s[m->head] = s;
        m->head = (m->head + 1) % WORKER_METRICS_RING;
        if (m->count < WORKER_METRICS_RING)
                m->count++;
}

static MetricsRing *ring_get(const char *id) {
        MetricsRing *m = ring_find(id), **nr;

        if (m)
                return m;
        nr = realloc(rings, (n_rings + 1) * sizeof *rings);
        if (!nr)
                return NULL;
        rings = nr;
        m = new0(MetricsRing, 1);
        if (!m)
                return NULL;
        (void) strscpy(m->id, sizeof m->id, id);
        rings[n_rings++] = m;
        return m;
}

void worker_metrics_gateway_event(Worker *w, const char *sandbox, const char *type, const char *data_json) {
        LiveSandbox *l;
        MetricsRing *m;

        if (!sandbox || !type || !(l = worker_live_find(w, sandbox)) || l->reaping || !(m = ring_get(l->id)))
                return;
        if (streq(type, "network.allow"))
                m->net_allowed++;
        else if (streq(type, "network.deny"))
                m->net_denied++;
        else if (streq(type, "network.dropped") && data_json) {
                _cleanup_json_ JsonValue *v = NULL;
                uint64_t n;
                if (json_parse(data_json, strlen(data_json), &v, NULL, 0) >= 0 &&
                    json_uint64(json_get(v, "dropped"), &n) >= 0)
                        m->net_unreported += n;
        }
}

/* Rings of sandboxes that are no longer live here go. */
static void rings_prune(Worker *w) {
        for (size_t i = 0; i < n_rings;) {
                LiveSandbox *l = worker_live_find(w, rings[i]->id);
                if (l && !l->reaping) {
                        i++;
                        continue;
                }
                free(rings[i]);
                rings[i] = rings[--n_rings];
        }
}

void worker_metrics_sample(Worker *w) {
        _cleanup_free_ NetDev *devs = NULL;
        int64_t cpu0 = thread_cpu_usec();
        size_t n_devs = 0;

        rings_prune(w);
        if (read_net_dev(&devs, &n_devs) < 0)
                n_devs = 0;
        for (size_t i = 0; i < w->n_live; i++) {
                LiveSandbox *l = &w->live[i];
                MetricsRing *m;
                if (l->reaping)
                        continue;
                m = ring_get(l->id);
                if (!m)
                        continue;
                sample_one(w, l, m, devs, n_devs);
                samples_taken++;
        }
        sampling_cpu_usec += (uint64_t) (thread_cpu_usec() - cpu0);
}

void worker_metrics_tick(Worker *w) {
        int64_t now = mono_usec();

        if (last_sample_mono_usec != 0 && now - last_sample_mono_usec < WORKER_METRICS_INTERVAL_USEC) {
                rings_prune(w); /* a deleted sandbox's series goes within a tick */
                return;
        }
        last_sample_mono_usec = now;
        worker_metrics_sample(w);
}

void worker_metrics_done(void) {
        for (size_t i = 0; i < n_rings; i++)
                free(rings[i]);
        free(rings);
        rings = NULL;
        n_rings = 0;
}

static void kv_u64(JsonWriter *jw, const char *key, uint64_t v) {
        json_w_key(jw, key);
        if (v == WORKER_METRIC_NONE)
                json_w_null(jw);
        else
                json_w_uint(jw, v);
}

static void write_sample(JsonWriter *jw, const WorkerMetricSample *s) {
        json_w_object_begin(jw);
        json_w_kv_int(jw, "time_usec", s->time_usec);
        kv_u64(jw, "cpu_usec", s->cpu_usec);
        json_w_key(jw, "cpu_percent");
        if (s->cpu_percent < 0)
                json_w_null(jw);
        else
                json_w_double(jw, s->cpu_percent);
        kv_u64(jw, "memory_bytes", s->memory_bytes);
        kv_u64(jw, "memory_limit_bytes", s->memory_limit_bytes);
        kv_u64(jw, "oom_kills", s->oom_kills);
        kv_u64(jw, "disk_bytes", s->disk_bytes);
        kv_u64(jw, "disk_limit_bytes", s->disk_limit_bytes);
        kv_u64(jw, "net_rx_bytes", s->net_rx_bytes);
        kv_u64(jw, "net_tx_bytes", s->net_tx_bytes);
        kv_u64(jw, "net_allowed", s->net_allowed);
        kv_u64(jw, "net_denied", s->net_denied);
        kv_u64(jw, "net_unreported", s->net_unreported);
        json_w_object_end(jw);
}

/* {"op":"metrics","id":ID,"since_usec":N?} → {"ok":true,"cpu_millis":N,"samples":[...]}, oldest first.
 * A live sandbox not sampled yet is sampled now, so a series is never empty. */
void worker_op_metrics(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const char *id = json_string(json_get(req, "id"));
        const JsonValue *since_v = json_get(req, "since_usec");
        ApiError e = {};
        int64_t since = 0;
        LiveSandbox *l;
        MetricsRing *m;

        if (since_v && json_int64(since_v, &since) < 0) {
                api_error(&e, -EINVAL, API_BAD_REQUEST, "'since_usec' must be an integer");
                return worker_reply_error(jw, &e);
        }
        l = id_valid(id) ? worker_live_find(w, id) : NULL;
        if (!l || l->reaping) {
                api_error(&e, -ESRCH, API_SANDBOX_NOT_RUNNING, "sandbox %s is not running here", strna(id));
                return worker_reply_error(jw, &e);
        }
        m = ring_get(l->id);
        if (m && m->count == 0) {
                /* this one only: the others keep their cadence */
                _cleanup_free_ NetDev *devs = NULL;
                size_t n_devs = 0;
                int64_t cpu0 = thread_cpu_usec();
                if (read_net_dev(&devs, &n_devs) < 0)
                        n_devs = 0;
                sample_one(w, l, m, devs, n_devs);
                samples_taken++;
                sampling_cpu_usec += (uint64_t) (thread_cpu_usec() - cpu0);
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_kv_int(jw, "cpu_millis", m ? m->cpu_millis : 0);
        json_w_key(jw, "samples");
        json_w_array_begin(jw);
        for (size_t i = 0; m && i < m->count; i++) {
                const WorkerMetricSample *s =
                        &m->s[(m->head + WORKER_METRICS_RING - m->count + i) % WORKER_METRICS_RING];
                if (s->time_usec >= since)
                        write_sample(jw, s);
        }
        json_w_array_end(jw);
        json_w_object_end(jw);
}

/* {"op":"metrics_live"} → {"ok":true,"sandboxes":[{"id":ID,"cpu_millis":N,"sample":{...}}]} */
void worker_op_metrics_live(Worker *w, const JsonValue *req, JsonWriter *jw) {
        (void) req;
        rings_prune(w);
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "sandboxes");
        json_w_array_begin(jw);
        for (size_t i = 0; i < n_rings; i++) {
                const WorkerMetricSample *s = ring_latest(rings[i]);
                if (!s)
                        continue;
                json_w_object_begin(jw);
                json_w_kv_string(jw, "id", rings[i]->id);
                json_w_kv_int(jw, "cpu_millis", rings[i]->cpu_millis);
                json_w_key(jw, "sample");
                write_sample(jw, s);
                json_w_object_end(jw);
        }
        json_w_array_end(jw);
        json_w_key(jw, "sampling");
        json_w_object_begin(jw);
        json_w_key(jw, "cpu_usec");
        json_w_uint(jw, sampling_cpu_usec);
        json_w_key(jw, "samples");
        json_w_uint(jw, samples_taken);
        json_w_object_end(jw);
        /* the host's pool (its size and what is free) and slots, for the pool gauges */
        {
                _cleanup_free_ char *pool = NULL;
                if (pool_info_json(w->pool, &pool) >= 0) {
                        json_w_key(jw, "pool");
                        json_w_raw(jw, pool);
                }
        }
        json_w_kv_string(jw, "worker", streq(w->config->role, "worker") ? w->config->worker_name : "local");
        json_w_kv_int(jw, "slots_used", (int64_t) w->n_live);
        json_w_kv_int(jw, "slots_max", (int64_t) w->config->slots_max);
        json_w_kv_int(jw, "teardowns_pending", (int64_t) worker_teardown_pending(w));
        json_w_kv_int(jw, "root_spares", (int64_t) pool_spare_count(w->pool, NULL));
        json_w_object_end(jw);
}
