/* SPDX-License-Identifier: MIT */
/* Worker liveness: see liveness.h. The store marks worker and sandboxes in
 * one transaction; the events follow. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "alloc-util.h"
#include "controller-util.h"
#include "liveness.h"
#include "log.h"
#include "str-util.h"

/* No worker is judged before this (one per process: the controller thread
 * judges, it and the lease thread hold). */
static _Atomic int64_t judge_from_usec;

void liveness_hold(uint64_t lost_timeout_s, int64_t now) {
        int64_t until = now + (int64_t) lost_timeout_s * 1000000;
        int64_t was = atomic_load(&judge_from_usec);

        while (until > was)
                if (atomic_compare_exchange_weak(&judge_from_usec, &was, until)) {
                        if (was <= now)
                                log_info("The store failed: no worker is judged lost until %" PRIu64
                                         " s after it answers again", lost_timeout_s);
                        break;
                }
}

int liveness_run_once(Store *store, uint64_t lost_timeout_s, int64_t now) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        int64_t stale_before, local = now;
        size_t n = 0;
        int r, lost = 0;

        /* heartbeats are stamped by the store's clock, and judged by it */
        r = store_worker_list(store, &nodes, &n);
        if (r >= 0)
                r = store_clock(store, &now);
        if (r < 0) {
                liveness_hold(lost_timeout_s, local);
                return r;
        }
        if (local < atomic_load(&judge_from_usec))
                return 0; /* the workers had no store to beat on until lately */
        stale_before = now - (int64_t) lost_timeout_s * 1000000;
        for (size_t i = 0; i < n; i++) {
                const WorkerNode *w = &nodes[i];
                _cleanup_free_ SandboxRef *refs = NULL;
                size_t n_refs = 0;
                char reason[STORE_REASON_MAX], data[STORE_NAME_MAX + 64];
                Event ev = {};

                if (w->state != WORKER_LIVE || w->heartbeat_usec >= stale_before)
                        continue;
                snprintf(reason, sizeof reason, "worker %s sent no heartbeat for %" PRIi64 " s", w->name,
                         (now - w->heartbeat_usec) / 1000000);
                r = store_worker_mark_lost(store, w->name, stale_before, reason, &refs, &n_refs);
                if (r == -ESTALE)
                        continue; /* it came back meanwhile, or another controller was first */
                if (r < 0) {
                        log_warning_errno(r, "Cannot mark worker %s suspect: %m", w->name);
                        continue;
                }
                lost++;
                log_warning("Worker %s is suspect (%s): its %zu sandboxes are unreachable", w->name, reason, n_refs);
                (void) strscpy(ev.type, sizeof ev.type, "worker.suspect");
                (void) strscpy(ev.actor, sizeof ev.actor, CONTROLLER_ACTOR);
                (void) strscpy(ev.reason, sizeof ev.reason, reason);
                snprintf(data, sizeof data, "{\"worker\":\"%s\",\"sandboxes\":%zu}", w->name, n_refs);
                ev.data_json = data;
                if (store_event_append(store, &ev) < 0)
                        log_warning("Cannot record the loss of worker %s", w->name);
                for (size_t j = 0; j < n_refs; j++) {
                        Sandbox sb = {};
                        (void) strscpy(sb.id, sizeof sb.id, refs[j].id);
                        (void) strscpy(sb.tenant_id, sizeof sb.tenant_id, refs[j].tenant_id);
                        snprintf(data, sizeof data, "{\"worker\":\"%s\"}", w->name);
                        controller_event(store, &sb, "sandbox.unreachable", reason, data);
                }
        }
        return lost;
}
