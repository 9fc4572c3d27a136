/* SPDX-License-Identifier: MIT */
#pragma once

/* The API ↔ worker boundary. The API server never touches host resources
 * itself: it asks a worker. Today the worker is a local process reached over
 * a unix socket; the scale-out issue makes the same calls a network hop.
 * One WorkerClient is used by one thread at a time. */

#include "api-error.h"
#include "config.h"
#include "store.h"

typedef struct WorkerClient WorkerClient;

/* Where the local worker serves (<state>/run/worker.sock) and where sandbox
 * agents listen (<state>/run/sandboxes/<id>/agent.sock). */
int worker_socket_path(const Config *config, char *buf, size_t n);
int worker_agent_dir(const Config *config, char *buf, size_t n);

/* address: "unix:/var/lib/space/run/worker.sock" */
int worker_client_new(const char *address, const char *agent_dir, WorkerClient **ret);
WorkerClient *worker_client_free(WorkerClient *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(WorkerClient *, worker_client_free);

/* Creates and starts the sandbox described by sb (id, slot, template, limits,
 * env). On success returns the host pid and its start time. A failed create
 * leaves nothing behind. */
int worker_sandbox_create(WorkerClient *w, const Sandbox *sb, int64_t *ret_pid, uint64_t *ret_starttime,
                          ApiError *e);
/* Stops the sandbox and removes every host resource it had (idempotent: a
 * sandbox the worker does not know is fine). */
int worker_sandbox_destroy(WorkerClient *w, const char *id, ApiError *e);
/* Opens a connection to the sandbox's agent: the returned fd speaks the agent
 * protocol (src/proto/proto.h) and the agent's HELLO has already been read. */
int worker_agent_connect(WorkerClient *w, const char *id, int *ret_fd, ApiError *e);
/* Imports a template from a tar file readable by the worker. */
int worker_template_import(WorkerClient *w, const char *name, const char *tar_path, uint64_t *ret_size_bytes,
                           ApiError *e);
int worker_template_remove(WorkerClient *w, const char *name, ApiError *e);
/* What the worker offers: JSON object {"runtimes":[...],"storage":"btrfs",...}. */
int worker_info(WorkerClient *w, char **ret_json, ApiError *e);
