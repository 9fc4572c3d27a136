/* SPDX-License-Identifier: MIT */
#pragma once

/* What the controllers share: events, the list of live sandboxes, ids. */

#include "store.h"
#include "worker-client.h"

#define CONTROLLER_ACTOR "controller"
#define CONTROLLER_LIST_MAX 100000U   /* sandboxes one pass looks at */
#define CONTROLLER_ID_LEN 16U         /* sandbox and checkpoint ids: [a-z][a-z0-9]{15}, as the API's */

/* Records an event about sb (its tenant) with actor "controller"; data may be NULL. Failures are logged. */
void controller_event(Store *s, const Sandbox *sb, const char *type, const char *reason, const char *data);
/* Every sandbox not in state deleted. */
int controller_list_live(Store *s, Sandbox **ret, size_t *ret_n);
/* The newest version of a template: 0 if it has none (a bundled one) or the store failed. */
uint64_t controller_template_newest(Store *s, const char *template_name);
/* A fresh id like the API's: [a-z][a-z0-9]{15}. */
int controller_id_generate(char ret[static CONTROLLER_ID_LEN + 1]);
/* Takes a checkpoint of sb: a row (not restorable), the worker's snapshot,
 * then the row restorable with its size. On failure nothing is left.
 * max_mb: worker_checkpoint_create()'s (-ENOSPC when it refuses). */
int controller_checkpoint_take(Store *s, WorkerClient *w, const Sandbox *sb, bool automatic, uint64_t max_mb,
                               Checkpoint *ret);
/* Gives a checkpoint up: not restorable, removed from the pool, row deleted. */
int controller_checkpoint_drop(Store *s, WorkerClient *w, const Checkpoint *c);
