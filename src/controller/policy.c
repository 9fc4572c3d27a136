/* SPDX-License-Identifier: MIT */
/* The idle policy and the timeout warning (see policy.h). A state change is
 * a compare-and-set in the store around the worker's step, ordered as the
 * API orders it (src/api/lifecycle.c): "paused" or "suspended" is recorded
 * first, so a user's call that comes in between finds the new state. */

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "controller-util.h"
#include "log.h"
#include "policy.h"
#include "str-util.h"

#define USEC_PER_SEC INT64_C(1000000)

int64_t policy_warn_lead_usec(uint64_t timeout_s) {
        int64_t tenth;

        if (timeout_s == 0 || timeout_s > (uint64_t) INT64_MAX / USEC_PER_SEC)
                return POLICY_WARN_LEAD_USEC;
        tenth = (int64_t) timeout_s * USEC_PER_SEC / 10;
        return MIN(tenth, POLICY_WARN_LEAD_USEC);
}

static int warn_timeout(Store *s, const Sandbox *sb, int64_t now) {
        char reason[160], data[96], when[32];
        int64_t left = (sb->expires_usec - now) / USEC_PER_SEC;
        time_t t = (time_t) (sb->expires_usec / USEC_PER_SEC);
        struct tm tm;
        int r;

        r = store_sandbox_set_timeout_warned(s, sb->id);
        if (r < 0)
                return r == -ESTALE ? 0 : r; /* warned already (or by someone else) */
        if (left < 0)
                left = 0;
        if (gmtime_r(&t, &tm))
                strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        else
                snprintf(when, sizeof when, "1970-01-01T00:00:00");
        snprintf(reason, sizeof reason,
                 "the timeout deletes this sandbox in %" PRIi64 " s; extend it with PATCH timeout_s", left);
        snprintf(data, sizeof data, "{\"expires_at\":\"%s.%03dZ\",\"seconds_left\":%" PRIi64 "}", when,
                 (int) (sb->expires_usec % USEC_PER_SEC / 1000), left);
        controller_event(s, sb, "sandbox.timeout_warning", reason, data);
        log_info("Sandbox %s times out in %" PRIi64 " s", sb->id, left);
        return 1;
}

/* Pauses or suspends an idle sandbox. */
static int act_idle(Store *s, WorkerClient *w, const Sandbox *listed, int64_t now) {
        _cleanup_(sandbox_done) Sandbox sb = {};
        char reason[128], data[96];
        SandboxState to;
        ApiError e = {};
        bool preserved = false;
        int64_t idle;
        int r;

        /* again, right before acting: a call may have come in since the listing */
        r = store_sandbox_get(s, NULL, listed->id, &sb);
        if (r < 0)
                return r == -ENOENT ? 0 : r;
        idle = now - sb.last_activity_usec;
        if (sb.state != SANDBOX_RUNNING || sb.idle_s == 0 || sb.idle_action == IDLE_ACTION_NONE ||
            idle < (int64_t) sb.idle_s * USEC_PER_SEC)
                return 0;
        to = sb.idle_action == IDLE_ACTION_SUSPEND ? SANDBOX_SUSPENDED : SANDBOX_PAUSED;
        snprintf(reason, sizeof reason, "idle for %" PRIi64 " s (idle_s %" PRIu64 ")", idle / USEC_PER_SEC,
                 sb.idle_s);
        r = store_sandbox_set_state(s, sb.id, SANDBOX_RUNNING, to, reason);
        if (r < 0)
                return r == -ESTALE ? 0 : r;

        if (to == SANDBOX_PAUSED) {
                r = worker_sandbox_pause(w, sb.id, true, &e);
                if (r < 0) {
                        log_warning("Pausing idle sandbox %s failed: %s", sb.id, e.message);
                        (void) store_sandbox_set_state(s, sb.id, SANDBOX_PAUSED, SANDBOX_RUNNING, "idle pause failed");
                        return r;
                }
                /* resumed by someone meanwhile (they thawed before we froze): thaw again */
                _cleanup_(sandbox_done) Sandbox now_sb = {};
                if (store_sandbox_get(s, NULL, sb.id, &now_sb) >= 0 && now_sb.state == SANDBOX_RUNNING) {
                        ApiError ignored = {};
                        (void) worker_sandbox_pause(w, sb.id, false, &ignored);
                        return 0;
                }
                snprintf(data, sizeof data, "{\"idle_s\":%" PRIu64 "}", sb.idle_s);
                controller_event(s, &sb, "sandbox.paused", reason, data);
                log_info("Paused idle sandbox %s", sb.id);
                return 1;
        }

        r = worker_sandbox_suspend(w, sb.id, &preserved, &e);
        if (r < 0 && e.code == API_WORKER_UNAVAILABLE) {
                /* back to what it was: the next worker adopts it, the next round tries again */
                (void) store_sandbox_set_state(s, sb.id, SANDBOX_SUSPENDED, (int) sb.state,
                                               "idle suspend not done: the worker was unavailable");
                return r;
        }
        if (r < 0) {
                char why[STORE_REASON_MAX];
                log_warning("Suspending idle sandbox %s failed: %s", sb.id, e.message);
                snprintf(why, sizeof why, "idle suspend failed: %s", e.message);
                if (store_sandbox_set_state(s, sb.id, SANDBOX_SUSPENDED, SANDBOX_ERROR, why) >= 0)
                        controller_event(s, &sb, "sandbox.error", why, NULL);
                return r;
        }
        (void) store_sandbox_set_runtime(s, sb.id, 0, 0, NULL);
        (void) store_sandbox_set_processes_preserved(s, sb.id, preserved);
        snprintf(data, sizeof data, "{\"idle_s\":%" PRIu64 ",\"processes_preserved\":%s}", sb.idle_s,
                 preserved ? "true" : "false");
        controller_event(s, &sb, "sandbox.suspended", reason, data);
        log_info("Suspended idle sandbox %s", sb.id);
        return 1;
}

int policy_run_once(Store *store, WorkerClient *worker, int64_t now) {
        Sandbox *list = NULL;
        size_t n = 0;
        int r, acted = 0;

        r = controller_list_live(store, &list, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                const Sandbox *sb = &list[i];

                if (sb->warm_pool[0])
                        continue; /* unclaimed: no policy yet */
                if (sb->expires_usec > 0 && !sb->timeout_warned &&
                    (sb->state == SANDBOX_RUNNING || sb->state == SANDBOX_PAUSED || sb->state == SANDBOX_SUSPENDED ||
                     sb->state == SANDBOX_ERROR) &&
                    now >= sb->expires_usec - policy_warn_lead_usec(sb->timeout_s))
                        acted += warn_timeout(store, sb, now) > 0;
                if (sb->state == SANDBOX_RUNNING && sb->idle_s > 0 && sb->idle_action != IDLE_ACTION_NONE &&
                    now - sb->last_activity_usec >= (int64_t) sb->idle_s * USEC_PER_SEC)
                        acted += act_idle(store, worker, sb, now) > 0;
        }
        sandbox_array_free(list, n);
        return acted;
}
