/* SPDX-License-Identifier: MIT */
#pragma once

/* The reaper: deletes sandboxes whose timeout has passed, with an event. */

#include "store.h"
#include "worker-client.h"

/* One pass at time now_usec; returns how many sandboxes it deleted. */
int reaper_run_once(Store *store, WorkerClient *worker, int64_t now);
