/* SPDX-License-Identifier: MIT */
#pragma once

#include "config.h"
#include "store.h"

/* On a store without keys: creates the tenant "default" and an admin key,
 * and writes the secret to <state_dir>/admin.key (mode 0600) for the CLI. */
int api_bootstrap(const Config *config, Store *store);
