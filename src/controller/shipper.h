/* SPDX-License-Identifier: MIT */
#pragma once

/* Shipping state between workers (a cluster), one pass per controller round:
 *   - every restorable checkpoint of a sandbox that runs (or is paused or
 *     suspended) on a live worker gets copies on ship_checkpoints other live
 *     workers (btrfs send/receive, worker_ship()); a copy's row says
 *     "receiving" during the ship and "available", with the stream's sha256
 *     and size, once the receiver verified it (event sandbox.checkpoint_shipped);
 *   - every ready template reaches every live worker that lacks it (from a
 *     live worker that has it: its heartbeat lists what it holds): each
 *     version still kept, the newest made the name's there too, so a worker
 *     that was away while a version was published catches up;
 *   - a copy of a checkpoint that is gone is unlisted (no longer available)
 *     before it is removed from its worker, and its row goes after that;
 *   - copies fall below the sandbox's own and ship_checkpoints others on live
 *     workers (a holder lost, a copy gone; the sandbox lost too): shipped again
 *     from a live holder;
 *   - a checkpoint no live worker holds is reported once (event
 *     sandbox.checkpoint_unavailable) and counted (shipper_checkpoints_unavailable).
 * At most SHIPPER_SHIPS_PER_PASS ships per pass, so a round stays short. */

#include "config.h"
#include "store.h"
#include "worker-client.h"

#define SHIPPER_SHIPS_PER_PASS 4U

/* Returns how many ships succeeded. */
int shipper_run_once(Store *store, WorkerClient *wc, const Config *config, int64_t now);
/* Checkpoints of live (or lost) sandboxes without a copy on a live worker, at the last pass. */
uint64_t shipper_checkpoints_unavailable(void);
