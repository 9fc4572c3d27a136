/* SPDX-License-Identifier: MIT */
#pragma once

/* Per-sandbox usage sampled by the worker (worker-metrics.c): every
 * WORKER_METRICS_INTERVAL_USEC each live sandbox's cgroup (CPU, memory, OOM
 * kills), disk (its qgroup) and network link (its veth's counters) are read
 * into a ring of the last WORKER_METRICS_RING samples (an hour at 5 s). The
 * ring goes with the sandbox: only live sandboxes have series. */

#include <stdint.h>

#define WORKER_METRICS_INTERVAL_USEC (5 * 1000000LL)
#define WORKER_METRICS_RING 720U

#define WORKER_METRIC_NONE UINT64_MAX /* a figure this host cannot tell */

typedef struct WorkerMetricSample {
        int64_t time_usec;       /* CLOCK_REALTIME */
        uint64_t cpu_usec;       /* CPU time used since the sandbox's processes started */
        uint64_t memory_bytes, memory_limit_bytes;
        uint64_t oom_kills;
        uint64_t disk_bytes, disk_limit_bytes;
        uint64_t net_rx_bytes, net_tx_bytes; /* as the sandbox sees them: rx = received by it */
        /* the gateway's decisions on its connections, lookups and datagrams as its events reported them,
         * and those its event rate limit left unreported (network.dropped) */
        uint64_t net_allowed, net_denied, net_unreported;
        double cpu_percent;      /* of one CPU, over the interval before this sample; < 0: unknown */
} WorkerMetricSample;
