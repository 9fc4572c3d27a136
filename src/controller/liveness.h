/* SPDX-License-Identifier: MIT */
#pragma once

/* Worker liveness (a cluster): a live worker whose last heartbeat is older
 * than lost_timeout_s is marked lost, and so is every sandbox it held, with
 * an event each ("worker.suspect", "sandbox.unreachable"). */

#include "store.h"

/* One pass; now is this host's time (for liveness_hold); the heartbeats are
 * judged by the store's clock (store_clock). Returns how many workers it
 * marked lost. */
int liveness_run_once(Store *store, uint64_t lost_timeout_s, int64_t now);
/* The store failed this controller at now (any call): heartbeats missed
 * during a store outage say nothing of the workers, so none is judged until
 * lost_timeout_s after the store answers again. */
void liveness_hold(uint64_t lost_timeout_s, int64_t now);
