/* SPDX-License-Identifier: MIT */
#pragma once

/* Per-sandbox policies, one pass a tick:
 * - idle: a running sandbox without exec or file calls for idle_s seconds is
 *   paused or suspended (idle_action), with an event saying why;
 * - timeout warning: POLICY_WARN_LEAD_USEC (or 10 % of timeout_s, whichever
 *   is smaller) before the reaper deletes a sandbox, an event
 *   "sandbox.timeout_warning", once (timeout_warned; a new expiry re-arms it).
 * Run it before reaper_run_once, so a warning comes before the kill. */

#include "store.h"
#include "worker-client.h"

#define POLICY_WARN_LEAD_USEC (60 * INT64_C(1000000))

/* One pass at time now_usec; returns how many sandboxes it acted on. */
int policy_run_once(Store *store, WorkerClient *worker, int64_t now);
/* How long before expiry the warning goes out for a timeout of timeout_s. */
int64_t policy_warn_lead_usec(uint64_t timeout_s);
