/* SPDX-License-Identifier: MIT */
#pragma once

/* A vm guest's identity after a restore (RESTORED of src/proto: hostname,
 * machine-id, environment, network): built from the sandbox's spec and told
 * to its agent now (vm_identify), or kept by sandbox id until the guest
 * answers (put / take; deferred: a neutral base-snapshot boot's, told once
 * the worker has saved it). The JSON is wiped when it goes. */
#include <stdbool.h>
#include <stddef.h>

#include "runtime.h"

int vm_identify(const RuntimeSpec *spec, bool new_machine_id, char *errbuf, size_t errbuf_size);
int vm_identity_put(const RuntimeSpec *spec);
/* The JSON kept for id (the caller frees it), NULL if none. */
char *vm_identity_take(const char *id, bool deferred);
void vm_identity_drop(const char *id);
