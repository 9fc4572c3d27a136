/* SPDX-License-Identifier: MIT */
#pragma once

/* A daemon's identity on its host. Everything a spaced makes outside its
 * state directory carries names and ranges of its instance, so several run
 * side by side without touching each other's things:
 *
 *   instance         config `instance`; else "space" for /var/lib/space and
 *                    "space-<6 hex of a hash of the state dir's real path>"
 *                    for any other state dir; kept in <state_dir>/instance.json
 *   cgroup_root      the instance name                 (instance space: space)
 *   net_table        the instance name                 (space)
 *   net_link_prefix  "sp<6 hex>-"                      (sp-)
 *   uid_base         chosen at the first start: a range of slots_max × 65536
 *                    ids no other registered instance holds, kept in
 *                    instance.json (the pool's files are owned by them)
 *                                                      (1000000000)
 *   net_pool         chosen at the first start likewise, from 10.201.0.0 up
 *                                                      (10.200.0.0/16)
 *
 * A setting given in the configuration wins over its derived value. The host
 * registry (instance-registry.h) refuses a start whose settings, given or
 * derived, overlap those of a live daemon. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "instance-registry.h"

#define INSTANCE_DEFAULT_NAME "space"
#define INSTANCE_DEFAULT_STATE_DIR "/var/lib/space"
#define INSTANCE_FILE "instance.json"
#define INSTANCE_DEFAULT_UID_BASE UINT64_C(1000000000)
#define INSTANCE_DEFAULT_UID_COUNT (UINT64_C(4096) * INSTANCE_ID_RANGE) /* what the default slots_max takes */
#define INSTANCE_DEFAULT_NET_POOL "10.200.0.0/16"
#define INSTANCE_DEFAULT_LINK_PREFIX "sp-"
/* Where ranges for other instances are chosen from. */
#define INSTANCE_UID_FIRST (INSTANCE_DEFAULT_UID_BASE + INSTANCE_DEFAULT_UID_COUNT)
#define INSTANCE_UID_STEP (UINT64_C(1024) * INSTANCE_ID_RANGE)
#define INSTANCE_UID_END (UINT64_C(1) << 32) - INSTANCE_ID_RANGE /* (uid_t) -1 and its neighbours stay out */
#define INSTANCE_NET_FIRST ((UINT32_C(10) << 24) | (UINT32_C(201) << 16))
#define INSTANCE_NET_END (UINT32_C(11) << 24)

typedef struct Instance Instance;

/* 1-INSTANCE_NAME_MAX lowercase letters, digits, '-' or '_', starting with a
 * letter: it names a cgroup, an nft table and a file. */
bool instance_name_is_valid(const char *name);
/* The name of the instance of a state directory (its real path). */
int instance_name_from_state_dir(const char *state_dir, char *buf, size_t size);
/* net_link_prefix of an instance: "sp-" for space, "sp<hex>-" else (the
 * hex of a space-<hex> name, else 6 hex of a hash of the name). */
int instance_link_prefix(const char *name, char *buf, size_t size);

/* The instance name kept in <state_dir>/instance.json; -ENOENT if none. */
int instance_kept_name(const char *state_dir, char *buf, size_t size);

/* Fills c's unset host settings (instance, cgroup_root, net_table,
 * net_link_prefix, uid_base, net_pool) from the instance, checks them
 * against the live daemons in the registry at registry_dir, registers this
 * one (a lock held while *ret lives, by this process and its children) and
 * keeps the identity in the state directory. -EADDRINUSE / -EBUSY on an
 * overlap with a live daemon, -ENOSPC when no free range is left, -EINVAL
 * on a bad setting; errbuf says which and names the other daemon. */
int instance_setup(Config *c, const char *registry_dir, Instance **ret, char *errbuf, size_t errbuf_size);
Instance *instance_free(Instance *i);
/* The registry entry's locked fd: a process that must hold the registration
 * too (role all's exec'd worker) inherits it. */
int instance_lock_fd(const Instance *i);
DEFINE_TRIVIAL_CLEANUP_FUNC(Instance *, instance_free);
