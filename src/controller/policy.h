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
/* At start, before the API serves: makes every sandbox's freezer agree with
 * its recorded state. A crash of the worker while it froze a sandbox for a
 * checkpoint or a branch leaves it frozen though "running" (the reconcile
 * assumes running ones are thawed), and one during a pause may leave a
 * "paused" one running; so running ones are frozen and thawed, paused ones
 * thawed and frozen (a no-op for the processes if they already were).
 * Returns how many sandboxes it went through. */
int policy_reconcile_freezer(Store *store, WorkerClient *worker);
/* How long before expiry the warning goes out for a timeout of timeout_s. */
int64_t policy_warn_lead_usec(uint64_t timeout_s);
