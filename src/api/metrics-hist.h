/* SPDX-License-Identifier: MIT */
#pragma once

/* Latency histograms of this API server (metrics-hist.c), for /metrics:
 * requests by route (the route's pattern, ids never in a label) and the
 * phases users wait on (create, exec start, checkpoint, branch). Counters are
 * atomics: any connection thread observes, /metrics reads. */

#include <stdint.h>
#include <stdio.h>

typedef enum ApiPhase {
        API_PHASE_CREATE,
        API_PHASE_EXEC_START,
        API_PHASE_CHECKPOINT,
        API_PHASE_BRANCH,
        _API_PHASE_MAX,
        _API_PHASE_INVALID = -22,
} ApiPhase;

/* route: the route table's pattern ("/v1/sandboxes/{id}"), "e2b" or "unmatched" (a string that
 * lives as long as the process: the label is bounded by the route table). */
void api_hist_observe_route(const char *method, const char *route, int64_t usec);
void api_hist_observe_phase(ApiPhase p, int64_t usec);
/* Writes space_http_request_duration_seconds and space_operation_duration_seconds. */
void api_hist_print(FILE *f);
