/* SPDX-License-Identifier: MIT */
#pragma once

/* Warm pools: for each "template:count" of config warm_pool, keep count
 * sandboxes of the template created and paused under the system tenant
 * (STORE_SYSTEM_TENANT_ID, warm_pool = template), refilled in the background
 * (at most WARM_POOL_CREATES_PER_PASS a pass, so the other controllers are
 * not held up). A create of the API claims one atomically
 * (store_sandbox_claim_warm); a claimed sandbox leaves the pool for good, so
 * none serves two users. Surplus ones (a smaller count, a template no longer
 * listed) and broken ones (error) are deleted. */

#include "config.h"
#include "store.h"
#include "worker-client.h"

#define WARM_POOL_CREATES_PER_PASS 2U

/* One pass; returns how many sandboxes it created or deleted. */
int warm_pool_run_once(Store *store, WorkerClient *worker, const Config *config, int64_t now);
