/* SPDX-License-Identifier: MIT */
/* The per-sandbox families of /metrics: the latest sample of every live
 * sandbox (the workers' rings, src/worker/worker-metrics.c), labelled by
 * sandbox and tenant. Only live sandboxes are shown, so the labels are
 * bounded by what runs; and only to a scrape with a key: an admin key sees
 * every sandbox, a tenant's key its own, a scrape without a key none (ids
 * and tenant names are not for whoever reaches the port). */
#include <inttypes.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "str-util.h"

typedef struct Family {
        const char *name, *type, *help;
        const char *key;   /* the sample's field */
        double scale;      /* value = field * scale */
        const char *extra; /* one more label, NULL: none */
} Family;

static const Family families[] = {
        { "space_sandbox_cpu_seconds_total", "counter", "CPU time the sandbox's processes used.", "cpu_usec", 1e-6, NULL },
        { "space_sandbox_memory_bytes", "gauge", "Memory the sandbox uses now (its cgroup's count).", "memory_bytes", 1, NULL },
        { "space_sandbox_memory_limit_bytes", "gauge", "The sandbox's memory limit.", "memory_limit_bytes", 1, NULL },
        { "space_sandbox_oom_kills_total", "counter", "Processes the kernel's OOM killer ended in the sandbox.", "oom_kills", 1, NULL },
        { "space_sandbox_disk_bytes", "gauge", "Bytes the sandbox's root holds beyond its template.", "disk_bytes", 1, NULL },
        { "space_sandbox_disk_limit_bytes", "gauge", "The sandbox's disk quota.", "disk_limit_bytes", 1, NULL },
        { "space_sandbox_network_bytes_total", "counter", "Bytes through the sandbox's network link, by direction as the sandbox sees it.", "net_rx_bytes", 1, "direction=\"rx\"" },
        { "space_sandbox_network_bytes_total", NULL, NULL, "net_tx_bytes", 1, "direction=\"tx\"" },
        { "space_sandbox_network_decisions_total", "counter", "The gateway's decisions on the sandbox's connections, lookups and datagrams, by verdict (unreported: past the gateway's event rate limit, verdict not known).", "net_allowed", 1, "verdict=\"allow\"" },
        { "space_sandbox_network_decisions_total", NULL, NULL, "net_denied", 1, "verdict=\"deny\"" },
        { "space_sandbox_network_decisions_total", NULL, NULL, "net_unreported", 1, "verdict=\"unreported\"" },
};

/* A label value: sandbox ids and tenant names are [a-z0-9-_] but escaped all the same. */
static void put_label(FILE *f, const char *s) {
        for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                        fputc('\\', f);
                if (*s == '\n') {
                        fputs("\\n", f);
                        continue;
                }
                fputc(*s, f);
        }
}

/* space_pool_{size,free}_bytes{worker}, space_worker_{sandboxes,slots,teardowns_pending,root_spares}{worker}. */
static void print_pools(FILE *f, JsonValue **replies, size_t n) {
        static const struct {
                const char *name, *help, *from, *key;
        } gauges[] = {
                { "space_pool_size_bytes", "Size of the worker's storage pool.", "pool", "size_bytes" },
                { "space_pool_free_bytes", "Bytes free in the worker's storage pool.", "pool", "free_bytes" },
                { "space_worker_sandboxes", "Sandboxes live on the worker (their processes run or are paused).", NULL,
                  "slots_used" },
                { "space_worker_slots", "Sandboxes the worker may hold (slots_max).", NULL, "slots_max" },
                { "space_worker_teardowns_pending",
                  "Deleted sandboxes whose teardown (cgroups, link, firewall element, root) still runs in the "
                  "background; their slots are held until it ends.", NULL, "teardowns_pending" },
                { "space_worker_root_spares",
                  "Sandbox roots made ahead of creates (snapshots of the templates used lately, config root_spares).",
                  NULL, "root_spares" },
        };

        for (size_t g = 0; g < ELEMENTSOF(gauges); g++) {
                fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", gauges[g].name, gauges[g].help, gauges[g].name);
                for (size_t i = 0; i < n; i++) {
                        const JsonValue *o = gauges[g].from ? json_get(replies[i], gauges[g].from) : replies[i];
                        const char *worker = json_string(json_get(replies[i], "worker"));
                        uint64_t v;
                        if (!worker || json_uint64(json_get(o, gauges[g].key), &v) < 0)
                                continue;
                        fprintf(f, "%s{worker=\"", gauges[g].name);
                        put_label(f, worker);
                        fprintf(f, "\"} %" PRIu64 "\n", v);
                }
        }
}

void api_metrics_print_sandboxes(ApiRequest *r, FILE *f) {
        JsonValue **replies = NULL;
        size_t n_replies = 0;
        ApiError e = {};
        char **tenants = NULL;
        const JsonValue **items = NULL;
        size_t n_items = 0;

        fprintf(f, "# HELP space_sandbox_metrics_up Whether the workers answered for their sandboxes' usage.\n"
                   "# TYPE space_sandbox_metrics_up gauge\n");
        if (api_get_worker(r, &e) < 0 || worker_metrics_live(r->worker, &replies, &n_replies, &e) < 0) {
                fprintf(f, "space_sandbox_metrics_up 0\n");
                return;
        }
        fprintf(f, "space_sandbox_metrics_up 1\n");
        {
                uint64_t cpu = 0, samples = 0, v;
                for (size_t i = 0; i < n_replies; i++) {
                        const JsonValue *s = json_get(replies[i], "sampling");
                        if (json_uint64(json_get(s, "cpu_usec"), &v) >= 0)
                                cpu += v;
                        if (json_uint64(json_get(s, "samples"), &v) >= 0)
                                samples += v;
                }
                fprintf(f, "# HELP space_sandbox_sampling_cpu_seconds_total CPU time the workers spent sampling "
                           "sandboxes' usage.\n"
                           "# TYPE space_sandbox_sampling_cpu_seconds_total counter\n"
                           "space_sandbox_sampling_cpu_seconds_total %.6f\n"
                           "# HELP space_sandbox_samples_total Usage samples the workers took (one per sandbox per "
                           "5 s).\n"
                           "# TYPE space_sandbox_samples_total counter\n"
                           "space_sandbox_samples_total %" PRIu64 "\n",
                        (double) cpu / 1e6, samples);
        }
        print_pools(f, replies, n_replies);
        for (size_t i = 0; i < n_replies; i++)
                n_items += json_array_size(json_get(replies[i], "sandboxes"));
        items = new0(const JsonValue *, n_items + 1);
        tenants = new0(char *, n_items + 1);
        if (!items || !tenants)
                goto out;
        n_items = 0;
        for (size_t i = 0; i < n_replies; i++) {
                const JsonValue *arr = json_get(replies[i], "sandboxes");
                for (size_t j = 0; j < json_array_size(arr); j++) {
                        const JsonValue *it = json_array_at(arr, j);
                        const char *id = json_string(json_get(it, "id"));
                        Sandbox sb = {};
                        if (!id || !api_sandbox_id_valid(id))
                                continue;
                        /* a sandbox the store no longer has running (deleted meanwhile) is left out */
                        if (!r->store || store_sandbox_get(r->store, NULL, id, &sb) < 0)
                                continue;
                        if (sb.state == SANDBOX_DELETED || sb.state == SANDBOX_DELETING || !r->key.id[0] ||
                            (!r->key.admin && !streq(sb.tenant_id, r->key.tenant_id))) {
                                sandbox_done(&sb);
                                continue;
                        }
                        tenants[n_items] = strdup(api_tenant_name(r, sb.tenant_id));
                        sandbox_done(&sb);
                        if (!tenants[n_items])
                                continue;
                        items[n_items++] = it;
                }
        }
        for (size_t k = 0; k < ELEMENTSOF(families); k++) {
                const Family *fm = &families[k];
                if (fm->type)
                        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fm->name, fm->help, fm->name, fm->type);
                for (size_t i = 0; i < n_items; i++) {
                        const JsonValue *s = json_get(items[i], "sample");
                        uint64_t v;
                        if (json_uint64(json_get(s, fm->key), &v) < 0)
                                continue; /* not known on this host */
                        fprintf(f, "%s{sandbox=\"", fm->name);
                        put_label(f, json_string(json_get(items[i], "id")));
                        fprintf(f, "\",tenant=\"");
                        put_label(f, tenants[i]);
                        fprintf(f, "\"%s%s} ", fm->extra ? "," : "", strempty(fm->extra));
                        if (fm->scale == 1)
                                fprintf(f, "%" PRIu64 "\n", v);
                        else
                                fprintf(f, "%.6f\n", (double) v * fm->scale);
                }
        }
out:
        for (size_t i = 0; tenants && i < n_items; i++)
                free(tenants[i]);
        free(tenants);
        free(items);
        for (size_t i = 0; i < n_replies; i++)
                json_free(replies[i]);
        free(replies);
}
