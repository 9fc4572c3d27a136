/* SPDX-License-Identifier: MIT */
#pragma once

/* Shipping state between workers (a cluster), one pass per controller round:
 *   - every restorable checkpoint of a sandbox that runs (or is paused or
 *     suspended) on a live worker gets copies on ship_checkpoints other live
 *     workers (btrfs send/receive, worker_ship()); a copy's row says
 *     "receiving" during the ship and "available", with the stream's sha256
 *     and size, once the receiver verified it (event sandbox.checkpoint_shipped);
 *   - every ready template reaches every live worker that lacks it (from a
 *     live worker that has it: its heartbeat lists what it holds);
 *   - copies of checkpoints that are gone are removed from their workers.
 * At most SHIPPER_SHIPS_PER_PASS ships per pass, so a round stays short. */

#include "config.h"
#include "store.h"
#include "worker-client.h"

#define SHIPPER_SHIPS_PER_PASS 4U

/* Returns how many ships succeeded. */
int shipper_run_once(Store *store, WorkerClient *wc, const Config *config, int64_t now);
