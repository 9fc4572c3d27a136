/* SPDX-License-Identifier: MIT */
#pragma once

/* role controller: a small HTTP listener (controller_listen) for probes and
 * scrapes, on a thread of its own:
 *   GET /healthz  200 while the controller loop turns (it turned within
 *                 controller_stall_s), else 503: a loop stuck in a call is a
 *                 controller to restart (its lease ends meanwhile: the
 *                 standby leads);
 *   GET /metrics  Prometheus text: leader, lease token, seconds since the
 *                 loop turned, checkpoints without a copy on a live worker.
 * Anything else is 404; a request line that is not GET 405. */

#include <stdbool.h>
#include <stdint.h>

typedef struct ControllerProbe ControllerProbe;

/* What the probe reads (set by the controller's threads). */
typedef struct ControllerProbeState {
        _Atomic int64_t loop_turn_usec; /* CLOCK_MONOTONIC of the loop's last turn */
        _Atomic int64_t lease_token;    /* while leading, else 0 */
} ControllerProbeState;

int controller_probe_start(const char *address, uint64_t stall_s, ControllerProbeState *state,
                           ControllerProbe **ret);
void controller_probe_stop(ControllerProbe *p);
