/* SPDX-License-Identifier: MIT */
/* Warm pools (see warm-pool.h). A warm sandbox is made like the API's create
 * (row in state creating, the worker's create, the runtime facts), then
 * frozen and recorded paused: only then can a claim find it. A crash in
 * between leaves a creating row, which the worker's reconcile deletes. */

#include <inttypes.h>
#include <stdio.h>

#include "controller-util.h"
#include "log.h"
#include "str-util.h"
#include "warm-pool.h"

#define WARM_ID_ATTEMPTS 5U
#define WARM_WORKER_NAME "local"

static void remove_warm(Store *s, WorkerClient *w, const Sandbox *sb, const char *why) {
        ApiError e = {};
        int r;

        r = store_sandbox_set_state(s, sb->id, (int) sb->state, SANDBOX_DELETING, why);
        if (r < 0)
                return; /* claimed or changed meanwhile: not ours to remove */
        r = worker_sandbox_destroy(w, sb->id, &e);
        if (r < 0) {
                char reason[STORE_REASON_MAX];
                log_warning("Removing warm sandbox %s failed: %s", sb->id, e.message);
                if (e.code == API_WORKER_UNAVAILABLE)
                        return; /* stays deleting: the worker finishes it at its start */
                snprintf(reason, sizeof reason, SANDBOX_REASON_DELETE_FAILED "%s", e.message);
                (void) store_sandbox_set_state(s, sb->id, SANDBOX_DELETING, SANDBOX_ERROR, reason);
                return;
        }
        if (store_sandbox_set_state(s, sb->id, SANDBOX_DELETING, SANDBOX_DELETED, why) >= 0)
                controller_event(s, sb, "sandbox.deleted", why, NULL);
}

/* newest: the template's newest version (0: it has none) */
static int create_warm(Store *s, WorkerClient *w, const Config *c, const char *template_name, uint64_t newest) {
        Sandbox sb = {
                .state = SANDBOX_CREATING,
                .cpu_millis = (uint32_t) c->default_cpu_millis,
                .memory_mb = c->default_memory_mb,
                .disk_mb = c->default_disk_mb,
                .pids_max = (uint32_t) c->default_pids_max,
                .processes_preserved = true,
        };
        char reason[STORE_NAME_MAX + 32], data[STORE_NAME_MAX + 48];
        int64_t pid = 0;
        uint64_t starttime = 0;
        ApiError e = {};
        int r = -EEXIST;

        (void) strscpy(sb.tenant_id, sizeof sb.tenant_id, STORE_SYSTEM_TENANT_ID);
        (void) strscpy(sb.template_name, sizeof sb.template_name, template_name);
        (void) strscpy(sb.runtime, sizeof sb.runtime, "ns");
        (void) strscpy(sb.worker, sizeof sb.worker, WARM_WORKER_NAME);
        (void) strscpy(sb.warm_pool, sizeof sb.warm_pool, template_name);
        /* the newest version: the insert takes whichever is newest in its transaction */
        sb.template_version = newest;
        sb.template_newest = newest > 0;
        for (unsigned i = 0; i < WARM_ID_ATTEMPTS && r == -EEXIST; i++) {
                char id[CONTROLLER_ID_LEN + 1];
                r = controller_id_generate(id);
                if (r < 0)
                        return r;
                (void) strscpy(sb.id, sizeof sb.id, id);
                r = store_sandbox_insert_max(s, &sb, (uint32_t) c->slots_max);
        }
        if (r < 0)
                return r;

        snprintf(reason, sizeof reason, "warm pool of %s", template_name);
        r = worker_sandbox_create(w, &sb, &pid, &starttime, &e);
        if (r >= 0)
                r = store_sandbox_set_runtime(s, sb.id, pid, starttime, NULL); /* worker: as placed */
        if (r >= 0)
                r = worker_sandbox_pause(w, sb.id, true, &e);
        if (r >= 0)
                r = store_sandbox_set_state(s, sb.id, SANDBOX_CREATING, SANDBOX_PAUSED, reason);
        if (r < 0) {
                ApiError ignored = {};
                log_warning("Creating a warm sandbox of %s failed: %s", template_name,
                            e.message[0] ? e.message : strerror(-r));
                (void) worker_sandbox_destroy(w, sb.id, &ignored);
                if (store_sandbox_set_state(s, sb.id, SANDBOX_CREATING, SANDBOX_DELETED, "warm create failed") >= 0)
                        controller_event(s, &sb, "sandbox.create_failed", e.message, NULL);
                return r;
        }
        snprintf(data, sizeof data, "{\"template\":\"%s\",\"warm_pool\":true}", template_name);
        controller_event(s, &sb, "sandbox.created", reason, data);
        log_info("Warm sandbox %s of %s ready", sb.id, template_name);
        return 0;
}

static const ConfigWarmPool *pool_of(const ConfigWarmPool *pools, size_t n, const char *template_name) {
        for (size_t i = 0; i < n; i++)
                if (streq(pools[i].template_name, template_name))
                        return &pools[i];
        return NULL;
}

int warm_pool_run_once(Store *store, WorkerClient *worker, const Config *config, int64_t now) {
        ConfigWarmPool pools[CONFIG_WARM_POOLS_MAX];
        uint64_t have[CONFIG_WARM_POOLS_MAX] = {}, newest[CONFIG_WARM_POOLS_MAX] = {};
        Sandbox *list = NULL;
        size_t n = 0, n_pools = 0, live = 0;
        unsigned created = 0;
        char err[128];
        int r, done = 0;

        (void) now;
        if (config_warm_pools(config->warm_pool, pools, &n_pools, err, sizeof err) < 0)
                n_pools = 0; /* config_finish refused a bad one: cannot happen */
        for (size_t i = 0; i < n_pools; i++)
                newest[i] = controller_template_newest(store, pools[i].template_name);
        r = controller_list_live(store, &list, &n);
        if (r < 0)
                return r;

        /* what the pools hold; the surplus, the broken and those of an older version go (a
         * create from the name is made from its newest version, and claims only such) */
        for (size_t i = 0; i < n; i++) {
                const Sandbox *sb = &list[i];
                const ConfigWarmPool *p;
                size_t idx;

                live++;
                if (!sb->warm_pool[0] || !streq(sb->tenant_id, STORE_SYSTEM_TENANT_ID))
                        continue;
                p = pool_of(pools, n_pools, sb->warm_pool);
                idx = p ? (size_t) (p - pools) : 0;
                if (sb->state == SANDBOX_ERROR) {
                        remove_warm(store, worker, sb, "broken warm sandbox");
                        done++;
                } else if (!p || (sb->state == SANDBOX_PAUSED && have[idx] >= p->count)) {
                        remove_warm(store, worker, sb, "no longer wanted in the warm pool");
                        done++;
                } else if (sb->state == SANDBOX_PAUSED && newest[idx] > 0 && sb->template_version != newest[idx]) {
                        remove_warm(store, worker, sb, "made from an older version of the template");
                        done++;
                } else
                        have[idx]++;
        }
        sandbox_array_free(list, n);

        for (size_t i = 0; i < n_pools && created < WARM_POOL_CREATES_PER_PASS; i++) {
                Template t;

                if (have[i] >= pools[i].count)
                        continue;
                if (store_template_get(store, pools[i].template_name, &t) < 0 || t.state != TEMPLATE_READY)
                        continue; /* not (yet) there */
                while (have[i] < pools[i].count && created < WARM_POOL_CREATES_PER_PASS &&
                       live < config->max_sandboxes) {
                        r = create_warm(store, worker, config, pools[i].template_name, newest[i]);
                        created++;
                        if (r < 0)
                                break;
                        have[i]++;
                        live++;
                        done++;
                }
        }
        return done;
}
