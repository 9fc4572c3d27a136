/* SPDX-License-Identifier: MIT */
#pragma once

/* The internal listener of a worker host (role worker): API servers and
 * controllers on other hosts reach the worker process and the sandboxes'
 * agents through it (protocol: cluster-net.h). Every connection must first
 * show the cluster token; a wrong one is refused and logged. Runs as
 * threads of the spaced process, never in the worker process (which clones
 * sandboxes and stays single-threaded). */

#include "config.h"

typedef struct ClusterListener ClusterListener;

/* Listens on config->worker_listen and serves until freed. */
int cluster_listener_start(const Config *config, const char *token, ClusterListener **ret);
ClusterListener *cluster_listener_free(ClusterListener *g);
/* Serves one connection (fd, taken) from peer (a name for the logs) on the
 * caller's thread, to its end, as if accepted: what each accepted one runs
 * on a thread of its own (here for the fuzz target). */
int cluster_listener_serve(ClusterListener *g, int fd, const char *peer);
