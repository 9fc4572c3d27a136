/* SPDX-License-Identifier: MIT */
/* Automatic checkpoints, retention and GC (see checkpointer.h). */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "checkpointer.h"
#include "controller-util.h"
#include "log.h"
#include "str-util.h"

#define USEC_PER_SEC INT64_C(1000000)
#define USEC_PER_HOUR (3600 * USEC_PER_SEC)
#define USEC_PER_DAY (24 * USEC_PER_HOUR)
#define RETAIN_HOURS 24
#define RETAIN_DAYS 7
#define CHECKPOINTER_SKIPPED_MAX 64

/* Buckets of wall-clock hours and days: the newest checkpoint of each stays. */
void checkpointer_retain(const Checkpoint *a, size_t n, uint64_t keep_last, int64_t now, bool *keep) {
        int64_t last_hour = INT64_MIN, last_day = INT64_MIN;

        for (size_t i = 0; i < n; i++) {
                int64_t age = now - a[i].created_usec;
                int64_t hour = a[i].created_usec / USEC_PER_HOUR, day = a[i].created_usec / USEC_PER_DAY;

                keep[i] = false;
                if (i < keep_last)
                        keep[i] = true;
                else if (age <= RETAIN_HOURS * USEC_PER_HOUR)
                        keep[i] = hour != last_hour;
                else if (age <= RETAIN_DAYS * USEC_PER_DAY)
                        keep[i] = day != last_day;
                if (keep[i]) {
                        /* newest first: a kept one covers its hour and its day */
                        last_hour = hour;
                        last_day = day;
                }
        }
}

/* The automatic, restorable checkpoints of one sandbox, newest first (all is
 * newest first), into out (room for max). */
static size_t autos_of(const Checkpoint *all, size_t n_all, const char *sandbox_id, Checkpoint *out, size_t max) {
        size_t n = 0;

        for (size_t i = 0; i < n_all && n < max; i++)
                if (all[i].automatic && all[i].restorable && streq(all[i].sandbox_id, sandbox_id))
                        out[n++] = all[i];
        return n;
}

static int prune(Store *s, WorkerClient *w, const Sandbox *sb, const Checkpoint *autos, size_t n, uint64_t keep_last,
                 int64_t now) {
        _cleanup_free_ bool *keep = NULL;
        int dropped = 0;

        if (n == 0)
                return 0;
        keep = new0(bool, n);
        if (!keep)
                return -ENOMEM;
        checkpointer_retain(autos, n, keep_last, now, keep);
        for (size_t i = 0; i < n; i++) {
                char data[STORE_ID_MAX + 32];
                if (keep[i])
                        continue;
                if (controller_checkpoint_drop(s, w, &autos[i]) < 0)
                        continue;
                snprintf(data, sizeof data, "{\"checkpoint\":\"%s\"}", autos[i].id);
                controller_event(s, sb, "sandbox.checkpoint_deleted", "pruned by the retention of automatic checkpoints",
                                 data);
                dropped++;
        }
        return dropped;
}

static bool due(const Sandbox *sb, const Checkpoint *autos, size_t n, int64_t now) {
        if (sb->checkpoint_every_s == 0 || (sb->state != SANDBOX_RUNNING && sb->state != SANDBOX_PAUSED) ||
            sb->warm_pool[0])
                return false;
        if (sb->checkpoint_every_s > (uint64_t) INT64_MAX / USEC_PER_SEC)
                return false;
        /* the first one an interval after the policy began (creation, or the last activity before it) */
        int64_t last = n > 0 ? autos[0].created_usec : sb->created_usec;
        return now - last >= (int64_t) sb->checkpoint_every_s * USEC_PER_SEC;
}

/* Sandboxes whose automatic checkpoint was skipped (at their caps), and
 * when: the next try, and event, waits an interval. The controller is one
 * thread. */
static struct {
        char id[STORE_ID_MAX];
        int64_t at;
} skipped[CHECKPOINTER_SKIPPED_MAX];

static int64_t skipped_at(const char *id) {
        for (size_t i = 0; i < ELEMENTSOF(skipped); i++)
                if (streq(skipped[i].id, id))
                        return skipped[i].at;
        return INT64_MIN;
}

static void skip(Store *s, const Sandbox *sb, const char *why, int64_t now) {
        size_t slot = 0;

        for (size_t i = 0; i < ELEMENTSOF(skipped); i++) {
                if (streq(skipped[i].id, sb->id)) {
                        slot = i;
                        break;
                }
                if (skipped[i].at < skipped[slot].at)
                        slot = i; /* the oldest entry goes */
        }
        (void) strscpy(skipped[slot].id, sizeof skipped[slot].id, sb->id);
        skipped[slot].at = now;
        controller_event(s, sb, "sandbox.checkpoint_skipped", why, NULL);
        log_debug("Automatic checkpoint of sandbox %s skipped: %s", sb->id, why);
}

static int drop_oldest(Store *s, WorkerClient *w, const Sandbox *sb, const Checkpoint *autos, size_t *n,
                       const char *why) {
        char data[STORE_ID_MAX + 32];
        int r;

        if (*n == 0)
                return -ENOENT;
        r = controller_checkpoint_drop(s, w, &autos[*n - 1]);
        if (r < 0)
                return r;
        snprintf(data, sizeof data, "{\"checkpoint\":\"%s\"}", autos[*n - 1].id);
        controller_event(s, sb, "sandbox.checkpoint_deleted", why, data);
        (*n)--;
        return 1;
}

/* An automatic checkpoint within the sandbox's caps: at checkpoints_max the
 * oldest automatic ones make room; over checkpoints_mb the oldest automatic
 * one goes and the next pass tries again; with none left to drop, the
 * checkpoint is skipped (an event, and a pause of an interval). */
static int take(Store *s, WorkerClient *w, const Config *cfg, const Sandbox *sb, const Checkpoint *autos, size_t k,
                size_t held, int64_t now) {
        char reason[160], data[STORE_ID_MAX + 48];
        uint64_t max_count, max_mb;
        int64_t last_skip;
        Checkpoint c;
        int r, dropped = 0;

        last_skip = skipped_at(sb->id);
        if (last_skip != INT64_MIN && now - last_skip < (int64_t) sb->checkpoint_every_s * USEC_PER_SEC)
                return 0;
        config_checkpoint_caps(cfg, sb->checkpoints_max, sb->checkpoints_mb, sb->disk_mb, &max_count, &max_mb);
        while (held >= max_count && drop_oldest(s, w, sb, autos, &k, "dropped to stay within checkpoints_max") > 0) {
                held--;
                dropped++;
        }
        if (held >= max_count) {
                snprintf(reason, sizeof reason,
                         "automatic checkpoint skipped: the sandbox holds %zu checkpoints (checkpoints_max %" PRIu64
                         ") and none is automatic",
                         held, max_count);
                skip(s, sb, reason, now);
                return dropped;
        }
        r = controller_checkpoint_take(s, w, sb, true, max_mb, &c);
        if (r == -ENOSPC) {
                if (drop_oldest(s, w, sb, autos, &k, "dropped to stay within checkpoints_mb") > 0)
                        return dropped + 1; /* the next pass tries again */
                snprintf(reason, sizeof reason,
                         "automatic checkpoint skipped: the sandbox's checkpoints hold its checkpoints_mb (%" PRIu64
                         " MiB) and none is automatic",
                         max_mb);
                skip(s, sb, reason, now);
                return dropped;
        }
        if (r < 0)
                return dropped > 0 ? dropped : r;
        snprintf(reason, sizeof reason, "automatic (every %" PRIu64 " s)", sb->checkpoint_every_s);
        snprintf(data, sizeof data, "{\"checkpoint\":\"%s\",\"name\":null,\"auto\":true}", c.id);
        controller_event(s, sb, "sandbox.checkpointed", reason, data);
        log_debug("Automatic checkpoint %s of sandbox %s", c.id, sb->id);
        return dropped + 1;
}

/* Checkpoints given up, or left by a take a crash interrupted. */
static int collect_garbage(Store *s, WorkerClient *w, const Checkpoint *all, size_t n, int64_t now) {
        int dropped = 0;
        uint64_t orphans = 0;

        for (size_t i = 0; i < n; i++)
                if (!all[i].restorable && now - all[i].created_usec >= CHECKPOINT_PENDING_GRACE_USEC &&
                    controller_checkpoint_drop(s, w, &all[i]) >= 0)
                        dropped++;
        if (store_checkpoint_delete_orphans(s, &orphans) >= 0 && orphans > 0)
                log_debug("Forgot %" PRIu64 " checkpoints of deleted sandboxes", orphans);
        return dropped;
}

/* How many checkpoints (of any kind and state) sandbox_id has in all. */
static size_t count_of(const Checkpoint *all, size_t n_all, const char *sandbox_id) {
        size_t n = 0;

        for (size_t i = 0; i < n_all; i++)
                if (streq(all[i].sandbox_id, sandbox_id))
                        n++;
        return n;
}

int checkpointer_run_once(Store *store, WorkerClient *worker, const Config *cfg, int64_t now) {
        uint64_t keep_last = cfg->checkpoint_keep_last;
        _cleanup_free_ Checkpoint *all = NULL, *autos = NULL;
        Sandbox *list = NULL;
        size_t n = 0, n_all = 0;
        int r, done = 0;

        r = store_checkpoint_list(store, NULL, &all, &n_all);
        if (r < 0)
                return r;
        r = controller_list_live(store, &list, &n);
        if (r < 0)
                return r;
        autos = new0(Checkpoint, n_all + 1);
        if (!autos) {
                sandbox_array_free(list, n);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                const Sandbox *sb = &list[i];
                size_t k;

                if (sb->state == SANDBOX_CREATING || sb->state == SANDBOX_DELETING)
                        continue;
                k = autos_of(all, n_all, sb->id, autos, n_all);
                if (due(sb, autos, k, now) &&
                    take(store, worker, cfg, sb, autos, k, count_of(all, n_all, sb->id), now) > 0) {
                        /* the new one counts for retention: read them again */
                        _cleanup_free_ Checkpoint *mine = NULL, *mine_autos = NULL;
                        size_t m = 0;

                        done++;
                        if (store_checkpoint_list(store, sb->id, &mine, &m) >= 0 &&
                            (mine_autos = new0(Checkpoint, m))) {
                                k = autos_of(mine, m, sb->id, mine_autos, m);
                                r = prune(store, worker, sb, mine_autos, k, keep_last, now);
                                if (r > 0)
                                        done += r;
                        }
                        continue;
                }
                r = prune(store, worker, sb, autos, k, keep_last, now);
                if (r > 0)
                        done += r;
        }
        sandbox_array_free(list, n);
        done += collect_garbage(store, worker, all, n_all, now);
        return done;
}
