/* SPDX-License-Identifier: MIT */
#pragma once

/* The worker: owns this host's sandboxes (runtimes, pool, cgroups). It runs
 * in its own process, started before any thread exists, and stays
 * single-threaded because it clones sandboxes. It serves the worker protocol
 * (newline-delimited JSON requests and responses, see worker-proto.h) on a
 * unix socket, watches every sandbox's PID 1, and reconciles host and store
 * at start. */

#include "config.h"

/* Runs the worker in this process until SIGTERM/SIGINT. Writes one byte to
 * ready_fd (if >= 0) once it serves requests, then closes it. restarted: a
 * start by spaced's supervisor after the worker died (the API process has
 * lived on: requests of it may be in flight); false: the daemon's start. */
int worker_main(const Config *config, int ready_fd, bool restarted);

/* The paths it serves on: see worker-client.h (worker_socket_path, worker_agent_dir). */
