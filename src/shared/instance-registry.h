/* SPDX-License-Identifier: MIT */
#pragma once

/* The host's registry of spaced instances: one file <dir>/<instance>.json per
 * instance (INSTANCE_REGISTRY_DIR), holding what it took on the host, and an
 * flock on that file held by the daemon (and its children) for its lifetime.
 * An entry whose lock nobody holds is of a stopped or crashed daemon: it
 * blocks a start only while sandboxes of it still run (a crash leaves them),
 * but its ranges stay reserved while its state directory still names it (it
 * will start again with them); otherwise the entry is removed. <dir>/.lock serialises starts (choose, check, register). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define INSTANCE_REGISTRY_DIR "/run/space/instances"
#define INSTANCE_NAME_MAX 32U
#define INSTANCE_ID_RANGE UINT64_C(65536) /* host ids per sandbox (RUNTIME_ID_RANGE) */
#define INSTANCE_REGISTRY_MAX 4096U       /* entries read; more is an error */
#define INSTANCE_REGISTRY_LOCK_TIMEOUT_MSEC 30000U
#define INSTANCE_CGROUP_FS "/sys/fs/cgroup"

typedef struct InstanceEntry {
        char name[INSTANCE_NAME_MAX + 1];
        char state_dir[CONFIG_STR_MAX]; /* real path */
        char role[16];
        int64_t pid;
        uint64_t netns;                 /* inode of its network namespace */
        uint64_t uid_base, uid_count;
        char net_pool[32];
        char net_table[40];
        char net_link_prefix[16];
        char cgroup_root[128];
        char listen[CONFIG_STR_MAX];    /* its API (role all) or internal (worker) listener */
        bool live;                      /* its lock is held */
} InstanceEntry;

/* Creates dir and takes its start lock (waiting up to
 * INSTANCE_REGISTRY_LOCK_TIMEOUT_MSEC, then -ETIMEDOUT); *ret_fd releases it. */
int instance_registry_lock(const char *dir, int *ret_fd);
/* Every entry, live or not; removes entries of stopped daemons whose state
 * directory no longer names them. Needs the start lock. */
int instance_registry_list(const char *dir, InstanceEntry **ret, size_t *ret_n);
/* Whether two instances overlap in anything both hold on the host (uid
 * range, cgroup root; in one network namespace: net pool, nft table, link
 * prefix, listener). what gets "<setting> <ours> is" or "<setting> <ours>
 * overlaps <theirs>,", to be followed by "that of instance ...". */
bool instance_entry_overlaps(const InstanceEntry *a, const InstanceEntry *b, char *what, size_t size);
/* Whether the uid ranges [base, base + count) overlap. */
bool instance_uid_ranges_overlap(uint64_t a_base, uint64_t a_count, uint64_t b_base, uint64_t b_count);
/* Whether two IPv4 CIDRs overlap (false if either does not parse). */
bool instance_cidrs_overlap(const char *a, const char *b);
/* Parses "a.b.c.d/len" into a host-order base and prefix length. */
int instance_cidr_parse(const char *s, uint32_t *ret_base, unsigned *ret_len);
/* Whether the cgroup root of e (a stopped daemon's) still holds sandboxes:
 * a crash leaves them running, and they are still its. */
bool instance_entry_has_sandboxes(const InstanceEntry *e);
/* Registers e: creates its entry and takes its lock. -EBUSY if a live daemon
 * holds that name (*ret_holder then describes it). */
int instance_registry_add(const char *dir, const InstanceEntry *e, int *ret_fd, InstanceEntry *ret_holder);
/* The inode of this process's network namespace. */
int instance_netns_id(uint64_t *ret);
