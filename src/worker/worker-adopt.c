/* SPDX-License-Identifier: MIT */
/* A cluster's lost sandboxes that still run here. The controller marks a
 * worker's sandboxes lost when its heartbeats stop (a crash, a stall, a
 * partition, a store outage); they are not gone: a worker that comes back,
 * restarted or resumed, finds them running and takes them back, unless a
 * recovery has moved them to another worker meanwhile. The store decides
 * which, in one compare-and-set on (state lost, worker = this one): the
 * adoption and the recovery cannot both win, and whoever loses undoes its
 * copy. Nothing is removed here while the row still names this worker. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "log.h"
#include "str-util.h"
#include "worker-internal.h"

#define WORKER_ADOPT_EVERY_USEC (5 * 1000000)

int worker_adopt_lost(Worker *w, Sandbox *sb, LiveSandbox *l) {
        SandboxState to = l->frozen ? SANDBOX_PAUSED : SANDBOX_RUNNING;
        const char *me = w->config->worker_name;
        char reason[STORE_REASON_MAX];
        int r;

        snprintf(reason, sizeof reason, "found %s on worker %s when it came back", l->frozen ? "paused" : "running",
                 me);
        r = store_sandbox_take_over(w->store, sb->id, SANDBOX_UNREACHABLE, me, to, (int64_t) l->pid, l->starttime, me,
                                    reason);
        if (r == -ESTALE || r == -ENOENT) {
                _cleanup_(sandbox_done) Sandbox now = {};
                int k = r == -ENOENT ? -ENOENT : store_sandbox_get(w->store, NULL, sb->id, &now);
                if (k < 0 && k != -ENOENT)
                        return k; /* the store is away: nothing is judged */
                if (k >= 0 && (now.state == SANDBOX_UNREACHABLE || streq(now.worker, me)))
                        return -EAGAIN; /* a recovery elsewhere is being tried (or it changed here): not yet */
                /* recovered on another worker, or deleted: this copy is stale */
                log_info("Sandbox %s was %s while this worker was suspect: removing its copy here", sb->id,
                         k == -ENOENT || now.state == SANDBOX_DELETED ? "deleted" : "recovered elsewhere");
                (void) worker_cleanup_sandbox(w, sb->id, true);
                sb->state = SANDBOX_DELETED; /* for this host's bookkeeping: nothing of it stays here */
                return -ESTALE;
        }
        if (r < 0)
                return log_warning_errno(r, "Sandbox %s: cannot take it back from unreachable: %m (tried again later)",
                                         sb->id);
        sb->state = to;
        l->lost_pending = false;
        worker_event(w, sb, "sandbox.found", reason, NULL);
        log_info("Sandbox %s: %s", sb->id, reason);
        return 0;
}

/* A live one whose row said lost but named another worker: decided now if
 * its row has moved on. True if its copy here was stale and is gone. */
static bool adopt_pending(Worker *w, LiveSandbox *l) {
        _cleanup_(sandbox_done) Sandbox sb = {};
        int r = store_sandbox_get(w->store, NULL, l->id, &sb);

        if (r < 0 && r != -ENOENT)
                return false;
        if (r >= 0 && sb.state == SANDBOX_UNREACHABLE) {
                if (streq(sb.worker, w->config->worker_name))
                        (void) worker_adopt_lost(w, &sb, l); /* the recovery failed: it came home */
                return false;
        }
        if (r >= 0 && sb.state != SANDBOX_DELETED && streq(sb.worker, w->config->worker_name)) {
                l->lost_pending = false; /* it is this worker's (taken back already) */
                return false;
        }
        log_info("Sandbox %s was %s while this worker was suspect: removing its copy here", l->id,
                 r == -ENOENT || sb.state == SANDBOX_DELETED ? "deleted" : "recovered elsewhere");
        (void) worker_cleanup_sandbox(w, l->id, true);
        return true;
}

int worker_slot_claim(Worker *w, const WorkerSpec *s, ApiError *e) {
        for (size_t i = 0; i < w->n_live; i++) {
                LiveSandbox *l = &w->live[i];
                char other[sizeof l->id];

                if (l->slot != s->slot || streq(l->id, s->id))
                        continue;
                if (l->reaping && !l->slot_held)
                        continue; /* killed, its network gone: it gave the slot up (reap_begin) */
                (void) strscpy(other, sizeof other, l->id);
                /* a copy left from a suspect spell whose row moved on: stale, removed now rather than at the tick */
                if (streq(w->config->role, "worker") && w->store && !l->reaping && adopt_pending(w, l))
                        return worker_slot_claim(w, s, e); /* the table changed under i */
                log_warning("Sandbox %s: its slot %" PRIu64 " is still held here by sandbox %s; refused", s->id,
                            s->slot, other);
                return api_error(e, -EBUSY, API_UNAVAILABLE,
                                 "slot %" PRIu64 " (uid range, address) is still held on this worker by sandbox %s; "
                                 "try again",
                                 s->slot, other);
        }
        return 0;
}

/* This worker's registration is live and beating: its gateway serves, the API reaches what it adopts. */
static bool registered_live(Worker *w) {
        WorkerNode node = {};
        int64_t now;

        if (store_worker_get(w->store, w->config->worker_name, &node) < 0)
                return false;
        now = store_now_usec(w->store); /* the heartbeat is in the store's time */
        return node.state == WORKER_LIVE &&
               node.heartbeat_usec >= now - (int64_t) w->config->worker_lost_timeout_s * 1000000;
}

static void adopt_sandboxes(Worker *w) {
        SandboxFilter f = { .state = SANDBOX_UNREACHABLE, .limit = 100000 };
        Sandbox *list = NULL;
        size_t n = 0;

        if (w->adopt_recheck) {
                /* back: whatever a recovery moved elsewhere meanwhile is a stale copy here (adopt_pending) */
                w->adopt_recheck = false;
                for (size_t i = 0; i < w->n_live; i++)
                        if (!w->live[i].reaping)
                                w->live[i].lost_pending = true;
        }
        if (store_sandbox_list(w->store, &f, &list, &n) < 0)
                return; /* the store is away: nothing is judged, tried at the next tick */
        for (size_t i = 0; i < n; i++) {
                LiveSandbox *l;
                if (!streq(list[i].worker, w->config->worker_name))
                        continue;
                l = worker_live_find(w, list[i].id);
                if (l && !l->reaping)
                        (void) worker_adopt_lost(w, &list[i], l);
        }
        sandbox_array_free(list, n);
        for (size_t i = 0; i < w->n_live;) {
                LiveSandbox *l = &w->live[i];
                size_t before = w->n_live;
                if (l->lost_pending && !l->reaping)
                        (void) adopt_pending(w, l);
                if (w->n_live == before)
                        i++; /* else removed: another one is at i now */
        }
}

static bool any_lost_pending(const Worker *w) {
        for (size_t i = 0; i < w->n_live; i++)
                if (w->live[i].lost_pending)
                        return true;
        return false;
}

void worker_adopt_tick(Worker *w) {
        static int64_t last_usec;
        int64_t now = now_usec();

        if (!streq(w->config->role, "worker") || now - last_usec < WORKER_ADOPT_EVERY_USEC)
                return;
        /* stalled (stopped, starved) for longer than the lost timeout: judged suspect, perhaps */
        if (last_usec > 0 && now - last_usec > (int64_t) w->config->worker_lost_timeout_s * 1000000) {
                w->adopt_recheck = true;
                w->volumes_swept = false;
        }
        last_usec = now;
        if (!registered_live(w)) {
                w->adopt_recheck = true;
                w->volumes_swept = false;
                return; /* still judged lost (its heartbeat has not registered it again yet) */
        }
        if (w->n_live > 0)
                adopt_sandboxes(w);
        else
                w->adopt_recheck = false; /* nothing runs here that a recovery could have moved */
        /* the volumes once the sandboxes are decided: a stale copy's mounts are gone with it */
        if (!w->volumes_swept && !any_lost_pending(w))
                w->volumes_swept = worker_volumes_sweep_stale(w) >= 0;
}
