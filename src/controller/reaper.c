/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>

#include "log.h"
#include "reaper.h"
#include "str-util.h"

/* A sandbox deleting this long is a delete whose caller gave up on the
 * worker (it was unavailable, or did not answer in time): tried again. */
#define REAPER_DELETING_RETRY_USEC (INT64_C(60) * 1000 * 1000)

static void event(Store *s, const Sandbox *sb, const char *type, const char *reason) {
        Event ev = {};
        (void) strscpy(ev.tenant_id, sizeof ev.tenant_id, sb->tenant_id);
        (void) strscpy(ev.sandbox_id, sizeof ev.sandbox_id, sb->id);
        (void) strscpy(ev.type, sizeof ev.type, type);
        (void) strscpy(ev.actor, sizeof ev.actor, "controller");
        (void) strscpy(ev.reason, sizeof ev.reason, reason);
        if (store_event_append(s, &ev) < 0)
                log_warning("Failed to record %s event for %s", type, sb->id);
}

int reaper_run_once(Store *store, WorkerClient *worker, int64_t now) {
        SandboxFilter f = { .state = -1, .limit = 100000 };
        Sandbox *list = NULL;
        size_t n = 0;
        int r, deleted = 0;

        r = store_sandbox_list(store, &f, &list, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                Sandbox *sb = &list[i];
                char reason[128];
                ApiError e = {};

                if (sb->state == SANDBOX_DELETING && sb->updated_usec > 0 &&
                    now - sb->updated_usec > REAPER_DELETING_RETRY_USEC) {
                        /* idempotent: a delete still in flight elsewhere finds it done */
                        if (worker_sandbox_destroy(worker, sb->id, &e) < 0)
                                continue; /* next round (or the worker's next start) */
                        if (store_sandbox_set_state(store, sb->id, SANDBOX_DELETING, SANDBOX_DELETED,
                                                    "a pending delete finished by the reaper") >= 0) {
                                event(store, sb, "sandbox.deleted", "a pending delete finished by the reaper");
                                log_info("Finished the pending delete of sandbox %s", sb->id);
                                deleted++;
                        }
                        continue;
                }
                if (sb->expires_usec == 0 || sb->expires_usec > now)
                        continue;
                if (sb->state != SANDBOX_RUNNING && sb->state != SANDBOX_PAUSED && sb->state != SANDBOX_ERROR &&
                    sb->state != SANDBOX_SUSPENDED)
                        continue;
                snprintf(reason, sizeof reason, "timeout of %" PRIu64 " s reached", sb->timeout_s);
                if (store_sandbox_set_state(store, sb->id, (int) sb->state, SANDBOX_DELETING, reason) < 0)
                        continue; /* someone else acted on it */
                r = worker_sandbox_destroy(worker, sb->id, &e);
                if (r < 0) {
                        char why[STORE_REASON_MAX];
                        log_warning("Failed to delete expired sandbox %s: %s", sb->id, e.message);
                        if (e.code == API_WORKER_UNAVAILABLE)
                                continue; /* stays deleting: the worker finishes it at its start */
                        snprintf(why, sizeof why, SANDBOX_REASON_DELETE_FAILED "%s", e.message);
                        (void) store_sandbox_set_state(store, sb->id, SANDBOX_DELETING, SANDBOX_ERROR, why);
                        continue;
                }
                if (store_sandbox_set_state(store, sb->id, SANDBOX_DELETING, SANDBOX_DELETED, reason) >= 0) {
                        event(store, sb, "sandbox.expired", reason);
                        log_info("Deleted expired sandbox %s", sb->id);
                        deleted++;
                }
        }
        sandbox_array_free(list, n);
        return deleted;
}
