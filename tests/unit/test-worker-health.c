/* SPDX-License-Identifier: MIT */
/* src/worker/worker-health.c: when a helper that died (gateway, spawner)
 * may start again. At once after a stable run; while it keeps dying soon
 * after each start, a delay from the minimum doubling to the maximum. */
#include <limits.h>
#include <string.h>

#include "test.h"
#include "worker-internal.h"

#define S (INT64_C(1000000))

TEST(backoff_doubles_and_resets) {
        WorkerRestarts r = {};
        int64_t t = 1000 * S;

        worker_restarts_started(&r, t);
        ASSERT_EQ(r.restarts, 0U); /* the first start is no restart */
        /* died after a stable run: due at once */
        t += WORKER_HELPER_STABLE_USEC + S;
        worker_restarts_died(&r, t, "killed");
        ASSERT_TRUE(worker_restarts_due(&r, t));
        ASSERT_STREQ(r.last_exit, "killed");
        worker_restarts_started(&r, t);
        ASSERT_EQ(r.restarts, 1U);
        /* dies again at once: the minimum delay, then doubling */
        uint64_t want = WORKER_HELPER_BACKOFF_MIN_USEC;
        for (int i = 0; i < 12; i++) {
                worker_restarts_died(&r, t, "again");
                ASSERT_EQ(r.delay_usec, want);
                ASSERT_FALSE(worker_restarts_due(&r, t));
                ASSERT_FALSE(worker_restarts_due(&r, t + (int64_t) want - 1));
                ASSERT_TRUE(worker_restarts_due(&r, t + (int64_t) want));
                t += (int64_t) want;
                worker_restarts_started(&r, t);
                want = want * 2 > (uint64_t) WORKER_HELPER_BACKOFF_MAX_USEC ? WORKER_HELPER_BACKOFF_MAX_USEC : want * 2;
        }
        ASSERT_EQ(r.delay_usec, (uint64_t) WORKER_HELPER_BACKOFF_MAX_USEC);
        ASSERT_EQ(r.restarts, 13U);
        /* a stable run again: the backoff starts over */
        t += WORKER_HELPER_STABLE_USEC;
        worker_restarts_died(&r, t, NULL);
        ASSERT_TRUE(worker_restarts_due(&r, t));
        ASSERT_STREQ(r.last_exit, "again"); /* NULL keeps the last reason */
        worker_restarts_started(&r, t);
        worker_restarts_died(&r, t + 1, "soon");
        ASSERT_EQ(r.delay_usec, (uint64_t) WORKER_HELPER_BACKOFF_MIN_USEC);
}

TEST(never_started_dies_with_delay) {
        /* a start that failed counts as dying at once */
        WorkerRestarts r = {};
        worker_restarts_died(&r, 5 * S, "it could not be started");
        ASSERT_EQ(r.delay_usec, (uint64_t) WORKER_HELPER_BACKOFF_MIN_USEC);
        ASSERT_FALSE(worker_restarts_due(&r, 5 * S));
}
