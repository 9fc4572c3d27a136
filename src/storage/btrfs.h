/* SPDX-License-Identifier: MIT */
#pragma once

/* btrfs subvolumes and quota groups through the kernel's ioctls (no
 * btrfs-progs at run time; mkfs.btrfs only to format a new pool image). */

#include "macros.h"

/* Nesting depth of subvolumes inside a subvolume that removal follows. */
#define BTRFS_NESTED_DEPTH_MAX 32U
/* Items asked for per BTRFS_IOC_TREE_SEARCH call. */
#define BTRFS_SEARCH_BATCH 512U

/* Level-0 qgroup id of a subvolume. */
#define BTRFS_QGROUPID(subvolid) ((uint64_t) (subvolid))

bool btrfs_is_fs_fd(int fd);
/* 1 if fd is the root directory of a btrfs subvolume, 0 if not. */
int btrfs_is_subvol_fd(int fd);
/* Whether the image file (fd) carries a btrfs superblock. */
bool btrfs_image_has_fs(int fd);
/* Formats the file or device at path with mkfs.btrfs. */
int btrfs_mkfs(const char *path, const char *label);

int btrfs_subvol_create(int dirfd, const char *name);
/* Snapshot of the subvolume src_fd as dirfd/name. */
int btrfs_subvol_snapshot(int src_fd, int dirfd, const char *name, bool readonly);
int btrfs_subvol_get_id(int fd, uint64_t *ret);
/* The file system's UUID as sysfs names it (/sys/fs/btrfs/<uuid>): 36 characters and a NUL. */
int btrfs_fs_uuid(int fd, char ret[static 37]);
int btrfs_subvol_set_readonly(int fd, bool readonly);
/* 1 if read-only, 0 if writable. */
int btrfs_subvol_is_readonly(int fd);
/* 1 if the subvolume's root item is still in the tree of tree roots (also while
 * a deleted subvolume waits for the cleaner), 0 if it is gone. */
int btrfs_subvol_exists(int fd, uint64_t subvolid);
/* Ids of the subvolumes directly inside subvolid (malloc'd array). */
int btrfs_subvol_children(int fd, uint64_t subvolid, uint64_t **ret_ids, size_t *ret_n);
/* Deletes the subvolume dirfd/name with every subvolume nested in it (read-only
 * ones too), then its qgroups where the kernel lets them go at once. */
int btrfs_subvol_remove(int dirfd, const char *name);

/* Commits the file system and wakes the cleaner, which drops deleted
 * subvolumes (otherwise it runs at the next periodic commit, ~30 s). */
int btrfs_sync(int fd);

/* Enables quota groups (a no-op if already on). */
int btrfs_quota_enable(int fd);
/* 1 if quota groups are enabled. */
int btrfs_quota_enabled(int fd);
/* Limits the exclusive bytes of a qgroup (0 removes the limit). */
int btrfs_qgroup_limit_exclusive(int fd, uint64_t qgroupid, uint64_t bytes);
/* The exclusive-bytes limit of a qgroup (0: none), as btrfs_qgroup_limit_exclusive set it. */
int btrfs_qgroup_limit_exclusive_get(int fd, uint64_t qgroupid, uint64_t *ret_bytes);
/* Accounted bytes of a qgroup as of the last transaction commit; -ENOENT if none. */
int btrfs_qgroup_get(int fd, uint64_t qgroupid, uint64_t *ret_referenced, uint64_t *ret_exclusive);
/* A level-0 qgroup as btrfs_qgroup_all() reads it. */
typedef struct BtrfsQgroup {
        uint64_t id;            /* the subvolume id */
        uint64_t exclusive;     /* bytes, as of the last transaction commit */
        uint64_t max_exclusive; /* its limit on them, 0: none */
} BtrfsQgroup;
/* Every level-0 qgroup with its exclusive bytes and limit, sorted by id (malloc'd
 * array; a few tree searches whatever their number). */
int btrfs_qgroup_all(int fd, BtrfsQgroup **ret, size_t *ret_n);
/* The entry of id in a sorted array of btrfs_qgroup_all(), or NULL. */
const BtrfsQgroup *btrfs_qgroup_find(const BtrfsQgroup *q, size_t n, uint64_t id);
/* Removes a qgroup; -EBUSY while its subvolume exists, -ENOENT if none. */
int btrfs_qgroup_remove(int fd, uint64_t qgroupid);
/* Ids of every level-0 qgroup (malloc'd array). */
int btrfs_qgroup_list(int fd, uint64_t **ret_ids, size_t *ret_n);
/* Removes level-0 qgroups whose subvolume is gone and whose numbers are zero
 * (removing one with numbers makes the pool's qgroups inconsistent); returns
 * how many. */
int btrfs_qgroup_remove_stale(int fd);
