/* SPDX-License-Identifier: MIT */
#pragma once

/* Worker liveness (a cluster): a live worker whose last heartbeat is older
 * than lost_timeout_s is marked lost, and so is every sandbox it held, with
 * an event each ("worker.lost", "sandbox.lost"). */

#include "store.h"

/* One pass at time now; returns how many workers it marked lost. */
int liveness_run_once(Store *store, uint64_t lost_timeout_s, int64_t now);
