/* SPDX-License-Identifier: MIT */
#pragma once

/* Automatic checkpoints, retention and checkpoint garbage collection, one
 * pass a tick:
 * - a running or paused sandbox with checkpoint_every_s gets an automatic
 *   checkpoint when its newest automatic one is that old (one per interval;
 *   retention thins them);
 * - retention keeps, of each sandbox's automatic checkpoints, the newest
 *   keep_last, then the newest of each hour for 24 h, then the newest of each
 *   day for 7 days; the others are dropped. Named and user-taken ones are
 *   never pruned;
 * - within the sandbox's caps (checkpoints_max, checkpoints_mb): at the
 *   count cap, or over the bytes cap, the oldest automatic checkpoints go
 *   first; with only user-taken ones left, the automatic checkpoint is
 *   skipped (event sandbox.checkpoint_skipped, then one try an interval);
 * - GC removes checkpoints given up (not restorable) and older than
 *   CHECKPOINT_PENDING_GRACE_USEC (a take interrupted by a crash), and the
 *   rows of checkpoints whose sandbox is deleted (the pool removed them with it). */

#include "config.h"
#include "store.h"
#include "worker-client.h"

#define CHECKPOINT_PENDING_GRACE_USEC (10 * 60 * INT64_C(1000000))

/* One pass at time now; returns how many checkpoints it took or dropped. */
int checkpointer_run_once(Store *store, WorkerClient *worker, const Config *cfg, int64_t now);

/* The retention rule on one sandbox's automatic checkpoints, newest first
 * (a[i].created_usec descending): keep[i] says whether a[i] stays. */
void checkpointer_retain(const Checkpoint *a, size_t n, uint64_t keep_last, int64_t now, bool *keep);
