/* SPDX-License-Identifier: MIT */
#pragma once

#include "config.h"

/* spaced rotate-master-key --new-key FILE [--config F] [--KEY=VALUE]...:
 * re-seals every credential of every tenant under the key in FILE, in one
 * transaction of the store, and records that key's fingerprint as the
 * store's (the one it replaces as the previous). The keys it opens the
 * values with are config's master_key_file (default <state_dir>/master.key)
 * and master_key_previous_file. Running processes that hold the new key
 * (as master_key_file, or as master_key_previous_file while it waited for
 * this) seal under it from the commit on; see docs/operations.md. Deletes no
 * key file. stall_after >= 0 (tests): stop after re-sealing that many
 * credentials, inside the transaction, until killed (a crash mid-way) or
 * sent SIGUSR1 (then go on to the commit). Returns the exit
 * status (0, 1: refused or failed, nothing changed). */
int rotate_master_key(const Config *config, const char *new_key_path, long stall_after);
