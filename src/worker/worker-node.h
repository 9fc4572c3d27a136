/* SPDX-License-Identifier: MIT */
#pragma once

/* A worker host in a cluster (role worker): its row in the store. It
 * registers with its capacity (CPU, memory, disk, runtimes, accelerators),
 * the templates it holds and the address of its internal listener, then
 * heartbeats; the controller marks it lost when the heartbeats stop. */

#include "config.h"
#include "store.h"

/* The worker's instance id: random, made at its first start and kept in
 * <state_dir>/worker.instance. One process at a time holds a state dir (its
 * instance lock), so a registration under the same id is this worker started
 * again (it takes its name over at once, live heartbeat or not) and another
 * id under the same name is a second worker (refused while the first lives). */
#define WORKER_NODE_INSTANCE_FILE "worker.instance"
int worker_node_instance(const char *state_dir, char *buf, size_t size);
/* The disk quota (MiB) this host's pool admits in all: pool_size_mb x
 * disk_overcommit less the reserve (never 0, which would mean "not limited"). */
uint64_t worker_node_disk_mb(const Config *config);
/* What this host offers. */
int worker_node_capacity(const Config *config, WorkerNode *ret);
/* -EEXIST: another live worker holds config->worker_name. runtimes and
 * accelerators: what the worker process reported ("ns,vm", "kvm"); NULL or
 * "" before it runs ("ns", none). */
int worker_node_register(Store *s, const Config *config, const char *instance, const char *templates,
                         const char *runtimes, const char *accelerators);
/* A heartbeat; re-registers if the controller marked this worker lost
 * meanwhile (-EEXIST if another took the name). */
int worker_node_heartbeat(Store *s, const Config *config, const char *instance, const char *templates,
                          const char *runtimes, const char *accelerators);
