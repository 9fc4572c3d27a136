/* SPDX-License-Identifier: MIT */
#pragma once

/* The storage pool: where templates and sandbox roots live.
 *
 * btrfs (preferred): an existing btrfs mount (pool_path), or a sparse image
 * file <state_dir>/pool.img loop-mounted at <state_dir>/pool by spaced and
 * re-attached after a restart (an already-mounted pool is reused).
 * Layout inside the pool:
 *   templates/<name>          read-only subvolume (the template's root fs)
 *   sandboxes/<id>/root       writable snapshot of the template (the sandbox's root)
 *   checkpoints/<id>/<ckpt>   read-only snapshot of sandboxes/<id>/root at a moment
 *   tmp/                      imports (and overlay checkpoint copies) in progress
 *   layers/<key>              read-only subvolume: an image layer applied over its
 *                             parent's (oci-import.c), shared by the images on it
 * Quotas: btrfs quota is enabled on the pool; each sandbox root's qgroup gets
 * a limit of disk_mb (writes past it fail with EDQUOT inside the sandbox).
 *
 * overlay (fallback where btrfs cannot be had, chosen and logged at open):
 *   templates/<name> is a plain directory, a sandbox root is an overlayfs
 *   mount (lower = template, upper/work under sandboxes/<id>/) at
 *   sandboxes/<id>/root; no disk quota (reported in pool_info). A checkpoint
 *   is a plain directory holding a full copy of the merged root.
 *
 * Files of templates are stored with their image's own ids (root = 0); the
 * runtime maps them per sandbox with an idmapped mount. So that a host user
 * with uid 1000, or a setuid-root file of a template, means nothing on the
 * host, templates/, sandboxes/, checkpoints/ and tmp/ (and the pool root of the
 * image) are mode 0700: open sandbox roots as host root, before entering a user
 * namespace.
 *
 * Fallible calls return >= 0 or -errno; library code logs at debug only,
 * except pool_open() which logs its choice (info) and failures (error). */

#include <inttypes.h>
#include <sys/types.h>

#include "macros.h"

/* Bounds of PoolConfig.size_mb (mkfs.btrfs needs some room; 1 PiB is plenty). */
#define POOL_SIZE_MB_MIN 256U
#define POOL_SIZE_MB_MAX (UINT64_C(1) << 30)
#define POOL_TEMPLATE_BASE_NAME_MAX 64U
#define POOL_TEMPLATE_NAME_MAX (POOL_TEMPLATE_BASE_NAME_MAX + 22U) /* name@vN */
#define POOL_SANDBOX_ID_MAX 63U

typedef enum PoolKind {
        POOL_BTRFS,
        POOL_OVERLAY,
        _POOL_KIND_MAX,
        _POOL_KIND_INVALID = -EINVAL,
} PoolKind;

typedef struct PoolConfig {
        const char *state_dir;   /* absolute */
        const char *pool_path;   /* existing btrfs mount, or NULL/"" for the loop image */
        uint64_t size_mb;        /* size of a new sparse image */
        const char *storage;     /* "auto" | "btrfs" | "overlay" (NULL/"" = "auto") */
        /* what pool_info_json() reports of disk admission (pool_admit): 0 = 1.0, 0 = automatic */
        uint64_t disk_overcommit_permille;
        uint64_t reserve_mb;
} PoolConfig;

typedef struct Pool Pool;

/* Opens (creating, formatting, mounting as needed) the pool. Logs which kind it chose.
 * auto: pool_path if it is on btrfs (else overlay inside pool_path); without
 * pool_path the image <state_dir>/pool.img (created sparse, formatted on first
 * use, loop-attached, mounted at <state_dir>/pool; a mount already there is
 * reused, an image already attached to a loop device is not attached twice);
 * overlay under <state_dir>/pool if any of that fails. btrfs: the same but
 * failing (-EMEDIUMTYPE, or the error of the image set-up) instead of falling
 * back. overlay: always the fallback. Quota is enabled on btrfs pools. Leftovers
 * of crashed imports (tmp/) and qgroups of deleted subvolumes are removed. */
int pool_open(const PoolConfig *cfg, Pool **ret);
/* Forgets the handle; the pool stays mounted. */
Pool *pool_free(Pool *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(Pool *, pool_free);
/* Unmounts the pool and detaches its loop device if we attached it (only if
 * we created the mount: an operator's pool_path is never unmounted). Waits
 * until the loop device is gone. -EBUSY if the pool is still in use (sandbox
 * roots mounted or open); the pool is then left as it was. Does not free p:
 * pool_free() it afterwards; every other call on it then fails with -ESTALE. */
int pool_release(Pool *p);

PoolKind pool_kind(const Pool *p);
/* btrfs with quota groups on: sandbox roots have quotas. */
bool pool_has_quota(const Pool *p);
const char *pool_kind_to_string(PoolKind k);
PoolKind pool_kind_from_string(const char *s);
const char *pool_mount_path(const Pool *p);  /* where the pool is mounted */
/* JSON object for /v1/info: {"kind":"btrfs","path":"...","quota":true,"size_bytes":N,"free_bytes":N,
 * "loop":"/dev/loopN"|null,"checkpoints":"snapshot"|"copy","admission":{...}}: checkpoints, branches
 * and restores are O(1) snapshots (btrfs) or full copies of the root (overlay); admission:
 * {"disk_overcommit":"1.0","reserve_bytes":N,"admits_bytes":N,"promised_bytes":N,
 * "outstanding_bytes":N,"sandboxes":N} (pool_space_read, pool_admit). */
int pool_info_json(const Pool *p, char **ret);

/* What the pool holds and what it promised (pool-space.c): the file
 * system's size and free space (statfs: btrfs's estimate of the data that
 * still fits, deleted subvolumes not yet dropped by the cleaner counted as
 * used), and the disk quotas of the sandboxes it holds, live or not (every
 * sandboxes/<id>: a root's qgroup limit, or a vm disk image's size), with what
 * each may still write (its quota less the exclusive bytes of its root as of
 * the last commit, or a vm image's unallocated bytes). self_id (may be NULL)
 * is counted apart: an op that changes that sandbox's quota. Quotas are known
 * only on btrfs with qgroups and for vm images: elsewhere promised and
 * outstanding are 0 and quota_known is false. */
typedef struct PoolSpace {
        uint64_t size_bytes;
        uint64_t free_bytes;
        uint64_t promised_bytes;    /* sum of the disk quotas, self_id's not included */
        uint64_t outstanding_bytes; /* what those sandboxes may still write */
        uint64_t self_promised_bytes, self_outstanding_bytes;
        size_t sandboxes;           /* counted in promised_bytes */
        bool quota_known;
} PoolSpace;
int pool_space_read(Pool *p, const char *self_id, PoolSpace *ret);
/* Commits the pool's file system and wakes the cleaner (deleted subvolumes
 * free their space; qgroup figures catch up): what pool_space_read() sees
 * next is current. */
int pool_space_sync(Pool *p);

/* Admission of disk quotas (pool-admit.c, pure). An op that makes or
 * changes sandboxes asks for promise_bytes of quota (the sum of the new
 * quotas of those sandboxes) and outstanding_bytes (what they may write right
 * after it: their quota less what their roots already hold). Admitted when
 *   promised + promise  <= size x overcommit - reserve     (the promises fit)
 *   (outstanding + outstanding_new) / overcommit <= free - reserve
 *                                          (and so does what they may still write)
 * with overcommit in thousandths (1000 = 1.0). The second check sees the pool
 * as it is: filled by checkpoints, templates or metadata, it refuses even
 * when the promises alone would fit. promise_bytes 0: only the second check
 * (a checkpoint, which lets its sandbox write its quota again). */
typedef enum PoolAdmitVerdict {
        POOL_ADMIT_OK,
        POOL_ADMIT_PROMISED,   /* the quotas would not fit the pool */
        POOL_ADMIT_FREE,       /* its free space would not hold what may be written */
        _POOL_ADMIT_VERDICT_MAX,
        _POOL_ADMIT_VERDICT_INVALID = -EINVAL,
} PoolAdmitVerdict;

typedef struct PoolAdmitPolicy {
        uint64_t overcommit_permille; /* >= 1 */
        uint64_t reserve_bytes;
} PoolAdmitPolicy;

typedef struct PoolAdmitResult {
        PoolAdmitVerdict verdict;
        uint64_t capacity_bytes;  /* size x overcommit - reserve (0 if the reserve is larger) */
        uint64_t room_bytes;      /* free - reserve (0 if less) */
        uint64_t need_bytes;      /* what the free check asked for: (outstanding + new) / overcommit */
} PoolAdmitResult;

/* The reserve kept for the daemon's own writes when none is configured:
 * 5 % of the pool, at most POOL_RESERVE_AUTO_MAX_MB. */
#define POOL_RESERVE_AUTO_PERCENT 5U
#define POOL_RESERVE_AUTO_MAX_MB 1024U
uint64_t pool_admit_reserve_bytes(uint64_t size_bytes, uint64_t reserve_mb);
/* 0 and *ret filled (verdict OK) if admitted, -ENOSPC (verdict says which check) if not. */
int pool_admit(const PoolSpace *s, const PoolAdmitPolicy *pol, uint64_t promise_bytes, uint64_t outstanding_bytes,
               PoolAdmitResult *ret);
/* permille as a decimal ("1.0", "1.5", "0.125"), in buf. */
#define POOL_ADMIT_RATIO_MAX 32U
const char *pool_admit_ratio(uint64_t permille, char buf[static POOL_ADMIT_RATIO_MAX]);
/* One line for the user: which pool (name), its size, reserve and overcommit, what is
 * reserved, what was asked for (what: "create", "branch of 3", ...). */
void pool_admit_describe(const PoolSpace *s, const PoolAdmitPolicy *pol, const PoolAdmitResult *res,
                         const char *name, const char *what, uint64_t promise_bytes, uint64_t outstanding_bytes,
                         char *buf, size_t size);

/* Templates. Names: [a-z0-9][a-z0-9._-]{0,63}; anything else is -EINVAL. */
bool pool_template_name_valid(const char *name);
bool pool_template_exists(Pool *p, const char *name);
/* Extracts the tar file at tar_path (numeric owners kept, no paths outside the
 * new root) into a new template and makes it read-only. -EEXIST if present.
 * A failed import leaves nothing behind. GNU tar does the extraction (it
 * refuses absolute and ".." member names and links that would lead outside);
 * compressed archives are fine. Device nodes are dropped (the runtime
 * provides /dev). -EBADMSG if tar fails (corrupt archive), -ENOSPC if the
 * pool is full,
 * -ENOENT if tar_path is missing, -EINVAL if it is not a regular file.
 * *ret_size_bytes (may be NULL) is the disk usage of the tree (du). */
int pool_template_import_tar(Pool *p, const char *name, const char *tar_path, uint64_t *ret_size_bytes);
/* A template from an archive: an OCI layout in a tar, a docker/podman save
 * archive (tag picks an image; NULL: the only one) or a root file system tar
 * (oci-import.c). *ret_defaults: the image config's exec defaults as JSON
 * (malloc'd, NULL for a root fs). */
struct ApiError;
/* Whether the layer cache holds layers/<key> (oci_layer_key()): 1, 0 (also
 * on an overlay pool, which has no cache), -errno. */
int pool_layer_cached(Pool *p, const char *key);
int pool_template_import(Pool *p, const char *name, const char *path, const char *tag, uint64_t *ret_size_bytes,
                         char **ret_defaults, struct ApiError *reterr);
/* -ENOENT if missing. The caller checks that no sandbox uses it. */
int pool_template_remove(Pool *p, const char *name);
/* Versions: a template name may be name@vN, a version kept beside templates/<name>.
 * promote makes templates/<name> a read-only copy of name@vN (which stays):
 * -ENOENT if name@vN is not here; on an overlay pool -EBUSY while a sandbox's
 * root lies on name (its lower directory). */
int pool_template_promote(Pool *p, const char *name, uint64_t version);
/* Sorted names. */
int pool_template_list(Pool *p, char ***ret_names);
/* Path of the template's root directory (malloc'd). */
int pool_template_path(Pool *p, const char *name, char **ret);

/* Sandbox roots. Ids: [a-z0-9]{1,63}. create is O(1) on btrfs (a snapshot).
 * disk_mb = 0 means no quota. *ret_root is the root directory (malloc'd).
 * -EINVAL for a bad name/id, -ENOENT if the template is missing, -EEXIST if
 * the sandbox exists. The qgroup limit is on exclusive bytes: only what the
 * sandbox writes beyond its template counts; writes past it fail with EDQUOT. */
bool pool_sandbox_id_valid(const char *id);
/* Spare roots (btrfs; spare.c): snapshots of the templates creates used
 * lately (the POOL_SPARE_TEMPLATES_MAX last), made ahead by the caller's
 * low-priority thread, taken by pool_sandbox_create() in place of a snapshot.
 * Each is made of its template and nothing else, and given only while that
 * template is the same subvolume. Thread-safe. make: one more for the wanted
 * template with the fewest below per_template: 1 made, 0 none short,
 * -EOPNOTSUPP on overlay pools. drop_all: every spare removed (shutdown). */
#define POOL_SPARES_MAX 64U
#define POOL_SPARE_TEMPLATES_MAX 8U
int pool_spare_make(Pool *p, unsigned per_template);
void pool_spare_want(Pool *p, const char *template_name);
unsigned pool_spare_count(Pool *p, const char *template_name); /* NULL: all */
void pool_spare_drop_all(Pool *p);
int pool_sandbox_create(Pool *p, const char *template_name, const char *id, uint64_t disk_mb, char **ret_root);
/* Removes the root (unmounting the overlay if any), everything under
 * sandboxes/<id> and every checkpoint of the sandbox (pool_checkpoint_remove_all:
 * no residue is possible); a sandbox that does not exist is fine (returns 0). */
int pool_sandbox_remove(Pool *p, const char *id);
/* -ENOENT if there is no such sandbox. overlay: mounts the root again if it is
 * not mounted (after a reboot). */
int pool_sandbox_root_path(Pool *p, const char *id, char **ret);
/* Where pool_sandbox_create() puts the root of sandbox id (nothing checked on disk). */
int pool_sandbox_root_path_planned(Pool *p, const char *id, char **ret);
bool pool_sandbox_exists(Pool *p, const char *id);
/* Ids of every sandbox root present (for the orphan scan), sorted. */
int pool_sandbox_list(Pool *p, char ***ret_ids);
/* Bytes used by a sandbox root beyond its template (qgroup exclusive, as of the
 * last transaction commit: up to ~30 s behind), or -EOPNOTSUPP (overlay, or
 * btrfs without quota). */
int pool_sandbox_usage(Pool *p, const char *id, uint64_t *ret_bytes);
/* What statfs() inside the sandbox shows (sandbox-quota.c): *ret_fd is the
 * sysfs directory of its root's qgroup; -EOPNOTSUPP on overlay, without
 * quota or without that directory (Linux < 5.9). The root is replaced by a
 * restore: open it again then. */
int pool_sandbox_quota_open(Pool *p, const char *id, int *ret_fd);
/* Changes the disk quota of sandbox id's root to disk_mb (0: none); a quota
 * below what the root holds lets it write nothing more until it deletes.
 * -EOPNOTSUPP on overlay or without quota, -ENOENT: no such root. */
int pool_sandbox_set_quota(Pool *p, const char *id, uint64_t disk_mb);
/* Its limit on exclusive bytes (0: none) and the bytes counted against it
 * (exclusive plus reservations of writes in flight), now. */
int pool_quota_read(int dfd, uint64_t *ret_limit_bytes, uint64_t *ret_used_bytes);

/* Checkpoints: read-only copies of a sandbox's root at a moment, kept under
 * checkpoints/<sandbox id>/<checkpoint id>. Checkpoint ids follow the sandbox
 * id rules. Calls on one sandbox are serialised by the caller (the worker's
 * per-sandbox lock): they create and drop checkpoints/<sandbox id>.
 *
 * btrfs: a read-only snapshot of the root subvolume, O(1) whatever the data
 *   size (no data is copied; writes to the root afterwards unshare blocks, and
 *   what only the checkpoint still holds is its usage). Subvolumes nested in
 *   the root are not part of it (they show as empty directories).
 * overlay: a full copy of the merged root (cp --archive --reflink=auto, no
 *   shell): time and space grow with the whole root, template included. The
 *   copy is a plain directory, not write-protected (only root may reach it).
 *
 * The caller freezes (or stops) the sandbox around create, and around a branch
 * from its live root: besides consistency, on overlay the copy walks a tree
 * that running sandbox code could otherwise rearrange (symlink swaps) under it.
 *
 * All: -EINVAL for a bad id. */

/* -ENOENT: no such sandbox; -EEXIST: that checkpoint exists. */
int pool_checkpoint_create(Pool *p, const char *sandbox_id, const char *checkpoint_id);
/* -ENOENT: no such checkpoint. The last one takes checkpoints/<sandbox id> with it. */
int pool_checkpoint_remove(Pool *p, const char *sandbox_id, const char *checkpoint_id);
/* Removes every checkpoint of a sandbox and its directory (pool_sandbox_remove
 * calls it; the orphan scan calls it for owners without a sandbox). None is
 * fine (returns 0). */
int pool_checkpoint_remove_all(Pool *p, const char *sandbox_id);
bool pool_checkpoint_exists(Pool *p, const char *sandbox_id, const char *checkpoint_id);
/* Sorted ids of a sandbox's checkpoints (empty if it has none); -ENOENT if
 * there is neither the sandbox nor a checkpoint of it. */
int pool_checkpoint_list(Pool *p, const char *sandbox_id, char ***ret_ids);
/* Bytes only this checkpoint holds: its qgroup's exclusive bytes, as of the
 * last transaction commit like pool_sandbox_usage (~0 right after creation).
 * -ENOENT if missing; -EOPNOTSUPP on overlay or btrfs without quota. */
int pool_checkpoint_usage(Pool *p, const char *sandbox_id, const char *checkpoint_id, uint64_t *ret_bytes);
/* The sum of pool_checkpoint_usage over the sandbox's checkpoints (data that
 * several of its checkpoints share, but not its root, counts for none of
 * them). -EOPNOTSUPP like pool_checkpoint_usage. */
int pool_checkpoint_usage_total(Pool *p, const char *sandbox_id, uint64_t *ret_bytes);
/* Sorted sandbox ids that have a checkpoint directory (for the orphan scan). */
int pool_checkpoint_owners(Pool *p, char ***ret_ids);

/* A new sandbox root as a writable copy of another sandbox's current root
 * (from_checkpoint NULL; the caller freezes the source) or of one of its
 * checkpoints. btrfs: a writable snapshot, O(1), its own qgroup limited to
 * disk_mb like pool_sandbox_create. overlay: a new upper directory holding a
 * full copy of the source (checkpoint, or merged root) over the source's
 * template, O(size of the root). The new sandbox is independent of the
 * source: either may be removed. -ENOENT: no such source sandbox or
 * checkpoint; -EEXIST if new_id exists; -ERANGE for a disk_mb too large.
 * A failed branch leaves nothing behind. */
int pool_sandbox_branch(Pool *p, const char *src_id, const char *from_checkpoint, const char *new_id,
                        uint64_t disk_mb, char **ret_root);
/* Replaces a sandbox's root with a writable copy of one of its checkpoints
 * (the sandbox must not be running; the checkpoint stays). The new root is
 * made beside the old one (btrfs: sandboxes/<id>/root.new, a snapshot with the
 * disk_mb quota; overlay: upper.new, a copy) and swapped with it in one
 * renameat2(RENAME_EXCHANGE); then the old one is deleted. So at every moment,
 * a crash included, the root is either the old or the new one, never a mix or
 * nothing; a leftover is removed by the next restore or with the sandbox.
 * overlay: the root is unmounted for the swap and mounted again (on a failed
 * mount the old upper is swapped back). *ret_root: the same path as before.
 * btrfs: a sandbox without a root here but with the checkpoint (shipped from
 * another worker: pool_ship_*) gets its root made from it.
 * -ENOENT: no such sandbox or checkpoint; -ERANGE for a disk_mb too large. */
int pool_sandbox_restore(Pool *p, const char *id, const char *checkpoint_id, uint64_t disk_mb, char **ret_root);

/* Disk images (the vm runtime), in disk-image.c. A template's raw ext4 image,
 * images/<name>.ext4, made on first use with mkfs.ext4 -d from its tree (at
 * least 256 MiB, the tree plus a quarter plus 128 MiB free); *ret_path is
 * malloc'd. -ENOENT: no such template; -ENOSPC if the pool is full;
 * -EMEDIUMTYPE if mkfs.ext4 refused the template's files (say, an extended
 * attribute larger than ext4 holds): why (may be NULL) gets mkfs.ext4's
 * reason, one line; -EIO for other failures of mkfs.ext4. */
int pool_template_image_why(Pool *p, const char *name, char *why, size_t why_size, char **ret_path);
int pool_template_image(Pool *p, const char *name, char **ret_path);
/* Removes the image of a template, if any (pool_template_remove calls it). */
int pool_template_image_remove(Pool *p, const char *name);
/* sandboxes/<id>/disk.img: a reflink clone of the template's image (O(1) on
 * btrfs, a copy elsewhere), grown to disk_mb MiB (file system included) if
 * that is larger: the image's size is the sandbox's disk quota. Owned by
 * owner (the VMM opens it as that uid), mode 0600. -EEXIST if the sandbox
 * exists; a failure leaves nothing behind. pool_sandbox_remove removes it. */
int pool_sandbox_disk_create(Pool *p, const char *template_name, const char *id, uint64_t disk_mb, uid_t owner,
                             char **ret_path);
/* -ENOENT if the sandbox has no disk image. */
int pool_sandbox_disk_path(Pool *p, const char *id, char **ret);
/* sandboxes/<id>/memory.state: where a suspended vm sandbox's machine is saved
 * (whether it exists or not; removed with the sandbox). */
int pool_sandbox_memory_path(Pool *p, const char *id, char **ret);

/* Shipping between pools (pool-ship.c), btrfs only (-EOPNOTSUPP on overlay):
 * a template or a checkpoint travels as a `btrfs send` stream (btrfs-progs),
 * incremental against a parent both pools hold (the template, an earlier
 * checkpoint), and is received by `btrfs receive` into tmp/recv.<random>/ on
 * the other side. Only once the stream is complete and verified does the
 * received subvolume move to its place (templates/<name>,
 * checkpoints/<sandbox>/<id>), read-only, keeping its received uuid so that
 * later streams can be incremental against it. A receive cut short leaves
 * only its tmp/ directory, removed by pool_ship_receive_abort() or at the
 * next pool_open(). */
#define POOL_UUID_STRING_MAX 37U /* 36 characters and the NUL */

typedef struct PoolShipItem {
        const char *sandbox_id; /* NULL: a template */
        const char *name;       /* the template's name, or the checkpoint's id */
} PoolShipItem;

/* A handle on the pool another process of this host opened (the worker's),
 * at path: nothing is created, cleaned or mounted. -EMEDIUMTYPE if path is
 * not a btrfs file system. */
int pool_attach(const char *path, Pool **ret);
/* Path of the item's subvolume (malloc'd) and its identity as a parent of a
 * stream: its received uuid if it has one, else its uuid; *ret_otime_usec
 * (may be NULL): its creation time. -ENOENT if the pool does not hold it
 * complete (read-only). */
int pool_ship_ident(Pool *p, const PoolShipItem *it, char **ret_path, char *ret_ident, int64_t *ret_otime_usec);
/* 1 if the pool holds the item complete with identity ident (its uuid or
 * received uuid), else 0. */
int pool_ship_has(Pool *p, const PoolShipItem *it, const char *ident);
/* Starts `btrfs send [-p parent_path] path` writing the stream to out_fd and
 * its messages to err_fd (pool-ship-send.c); spawn_wait() the pid. Removing
 * either path cancels the send (SIGKILL; it then exits non-zero), from this
 * process or from a child of it such as the worker: the kernel refuses to
 * delete a subvolume a send reads. */
int pool_ship_send_start(Pool *p, const char *path, const char *parent_path, int out_fd, int err_fd,
                         pid_t *ret_pid);
/* Makes tmp/recv.<random> (*ret_dir, malloc'd) and starts `btrfs receive`
 * into it reading the stream from in_fd, messages to err_fd. */
int pool_ship_receive_start(Pool *p, int in_fd, int err_fd, char **ret_dir, pid_t *ret_pid);
/* After the receive exited well and the stream was verified: the one
 * subvolume the stream made (named it->name, read-only, with a received
 * uuid; anything else is -EBADMSG) moves to its place. -EEXIST if the
 * place is taken. The directory is removed in any case. */
int pool_ship_receive_commit(Pool *p, const char *dir, const PoolShipItem *it);
/* Removes the directory with whatever the receive made in it. */
int pool_ship_receive_abort(Pool *p, const char *dir);
/* dst becomes a copy of src: a reflink (FICLONE) where the pool can share extents, else a copy. */
int pool_clone_file(int src, int dst);
/* True if the sandbox has a disk image (a vm sandbox). */
bool pool_sandbox_is_vm(Pool *p, const char *id);

/* Checkpoints of vm sandboxes (disk-checkpoint.c): checkpoints/<id>/<ckpt>/
 * is a directory holding disk.img (a reflink of the sandbox's disk) and, if
 * taken with memory, memory.state (the machine saved at the same moment).
 * pool_checkpoint_remove/_exists/_list/_usage work on them as on any other.
 * *ret paths are malloc'd. */
/* checkpoints/<id>/<ckpt>[/file] (whether it exists or not). */
int pool_disk_checkpoint_path(Pool *p, const char *sandbox_id, const char *checkpoint_id, const char *file,
                              char **ret);
/* Makes the empty checkpoint directory; -EEXIST if the checkpoint exists. The
 * caller fills it (memory.state, then pool_disk_checkpoint_take_disk) and
 * removes it with pool_checkpoint_remove on failure. */
int pool_disk_checkpoint_create(Pool *p, const char *sandbox_id, const char *checkpoint_id, char **ret_dir);
/* Reflinks the sandbox's disk into the checkpoint (the machine must be
 * stopped); saved_memory: also its memory.state of a suspend, if it has one. */
int pool_disk_checkpoint_take_disk(Pool *p, const char *sandbox_id, const char *checkpoint_id, bool saved_memory);
bool pool_disk_checkpoint_has_memory(Pool *p, const char *sandbox_id, const char *checkpoint_id);
/* The sandbox's disk becomes a reflink of the checkpoint's (made beside it,
 * then renamed over it: the old or the new disk at every moment), owned by
 * owner; a memory.state of a suspend goes (it belonged to the old disk). */
int pool_sandbox_disk_restore(Pool *p, const char *id, const char *checkpoint_id, uid_t owner, char **ret_disk);
/* A new sandbox id whose disk is a reflink of src_path (owned by owner).
 * -EEXIST if the sandbox exists; a failure leaves nothing behind. */
int pool_sandbox_disk_clone(Pool *p, const char *src_path, const char *id, uid_t owner, char **ret_path);
/* A new sandbox whose disk is a reflink of another's current disk (the
 * caller stops that machine) or of one of its checkpoints. */
int pool_sandbox_disk_branch(Pool *p, const char *src_id, const char *from_checkpoint, const char *new_id, uid_t owner,
                             char **ret_path);

/* Base snapshots (disk-base.c): a booted, idle VM of a template saved once,
 * so that creates restore it instead of booting. Kept per template and
 * variant (memory, vCPUs, disk size: a saved machine only fits a VM of the
 * same shape) under images/base/<template>/<variant>/: disk.img,
 * memory.state and key, the text that says what it was made from (kernel,
 * agent, VMM, accelerator, template image); a lookup with another key finds
 * nothing and removes the stale one. Removed with the template's image. */
#define POOL_BASE_VARIANT_MAX 64U
#define POOL_BASE_KEY_MAX 1024U
/* 0 and the variant's directory if a base snapshot with this key exists; -ENOENT if not. */
int pool_base_lookup(Pool *p, const char *template_name, const char *variant, const char *key, char **ret_dir);
/* A fresh, empty directory to make one in (the tmp/ of the pool); *ret_dir. */
int pool_base_begin(Pool *p, const char *template_name, const char *variant, char **ret_dir);
/* Writes the key into the directory made by pool_base_begin and moves it into
 * place (replacing an older one). On failure the directory is removed. */
int pool_base_commit(Pool *p, const char *template_name, const char *variant, const char *dir, const char *key);
/* Removes a directory of pool_base_begin that is not to be committed. */
void pool_base_abandon(Pool *p, const char *dir);
/* Identity of the template's disk image for keys: "<inode>-<size>-<mtime ns>"; -ENOENT if none. */
int pool_template_image_stamp(Pool *p, const char *template_name, char *buf, size_t size);
/* Every base snapshot: JSON array [{"template","variant","size_bytes"}] for /v1/info. */
int pool_base_list_json(Pool *p, char **ret);
/* Removes a template's base snapshots (pool_template_image_remove calls it). */
int pool_base_remove(Pool *p, const char *template_name);

/* Volumes (pool-volume.c): volumes/<id> (id as pool_sandbox_id_valid), a
 * subvolume limited to size_mb MiB of exclusive bytes, owned by 0:0 as the
 * sandbox sees it, mode 0777. btrfs with quotas only (-EOPNOTSUPP). remove: a missing
 * one is fine. */
int pool_volume_create(Pool *p, const char *id, uint64_t size_mb);
/* volumes/<id>: a snapshot of volumes/<src_id> (O(1); only changed blocks cost), limited to size_mb;
 * read_only: a read-only subvolume (nothing writes it, whoever mounts it). */
int pool_volume_clone(Pool *p, const char *src_id, const char *id, uint64_t size_mb, bool read_only);
int pool_volume_remove(Pool *p, const char *id);
int pool_volume_open(Pool *p, const char *id, int *ret_fd);
int pool_volume_path(Pool *p, const char *id, char **ret);
/* Exclusive bytes it holds (as the qgroup counts them). */
int pool_volume_usage(Pool *p, const char *id, uint64_t *ret_used_bytes);
/* The ids of the volumes here, sorted. */
int pool_volume_list(Pool *p, char ***ret);
/* A volumes/<id> this pool holds while the volume lives elsewhere (it moved
 * to another worker with a restore there): moved aside as
 * <id>.stale-<seconds>, not removed, since it may hold what was written
 * after the copy the volume moved with; its name is no volume id, so
 * nothing mounts, counts or lists it. Logged with its path. 1 if it was
 * moved, 0 if there is none. */
int pool_volume_set_aside(Pool *p, const char *id);

/* A volume's copy with a checkpoint (volume-copy.c): checkpoints/<sandbox>/
 * <ck>.<volume>, a read-only snapshot of volumes/<volume> taken with
 * checkpoint ck, shipped with it (a PoolShipItem of the sandbox named so).
 * pool_checkpoint_remove() and _remove_all() remove it with its checkpoint.
 * from_copy: volumes/<volume> becomes a writable snapshot of the copy,
 * limited to size_mb (a restore on this worker of a sandbox that mounts
 * it); a volumes/<volume> already here (stale: the volume moved away once)
 * is moved aside and kept, never removed. */
int pool_volume_copy_name(const char *checkpoint_id, const char *volume_id, char *buf, size_t size);
bool pool_volume_copy_name_valid(const char *name);
int pool_volume_copy_create(Pool *p, const char *sandbox_id, const char *checkpoint_id, const char *volume_id);
bool pool_volume_copy_exists(Pool *p, const char *sandbox_id, const char *checkpoint_id, const char *volume_id);
int pool_volume_copies_remove(Pool *p, const char *sandbox_id, const char *checkpoint_id);
/* The names (<ck>.<volume>) of the volume's copies with the sandbox's checkpoints; NULL if none. */
int pool_volume_copy_list(Pool *p, const char *sandbox_id, const char *volume_id, char ***ret);
int pool_volume_from_copy(Pool *p, const char *sandbox_id, const char *checkpoint_id, const char *volume_id,
                          uint64_t size_mb);
