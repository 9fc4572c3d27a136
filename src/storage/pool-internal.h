/* SPDX-License-Identifier: MIT */
#pragma once

#include <dirent.h>

/* Shared by the pool's files (pool.c, template.c, sandbox.c, checkpoint.c,
 * sandbox-branch.c); not an interface. */

#include "pool.h"

#define POOL_TEMPLATES_DIR "templates"
#define POOL_SANDBOXES_DIR "sandboxes"
#define POOL_TMP_DIR "tmp"
#define POOL_CHECKPOINTS_DIR "checkpoints"
/* the layer cache of OCI imports: layers/<sha256 of the layer chain>, read-only */
#define POOL_LAYERS_DIR "layers"
/* volumes/<id>: a tenant's persistent volume, a subvolume with a quota of its own */
#define POOL_VOLUMES_DIR "volumes"
/* The just made subvolume dfd/id gets its own limit of size_mb (open_to_all:
 * owned by 0:0, mode 0777); on failure it is removed again. */
int pool_volume_limit(Pool *p, int dfd, const char *id, uint64_t size_mb, bool open_to_all);
/* Opens checkpoints/<sandbox_id>: -ENOENT if the sandbox has no checkpoint. */
int pool_checkpoint_owner_open(Pool *p, const char *sandbox_id);
/* pool_volume_set_aside() with volumes/ open as vdfd. */
int pool_volume_set_aside_at(Pool *p, int vdfd, const char *id);
#define POOL_SANDBOX_ROOT "root"
/* Restore builds the new root (btrfs) or upper dir (overlay) next to the live
 * one under this name, then swaps the two (RENAME_EXCHANGE): afterwards the
 * name holds the old one until it is deleted. A leftover of a crash is removed
 * by the next restore or with the sandbox. */
#define POOL_SANDBOX_ROOT_NEW "root.new"
#define POOL_SANDBOX_UPPER_NEW "upper.new"
/* Overlay only: sandboxes/<id>/{upper,work} and the template's name, so the
 * overlay can be mounted again after a reboot. */
#define POOL_SANDBOX_UPPER "upper"
#define POOL_SANDBOX_WORK "work"
#define POOL_SANDBOX_TEMPLATE "template"

typedef struct PoolSpares PoolSpares;

struct Pool {
        PoolKind kind;
        char *path;     /* the pool's root directory (mount point for btrfs) */
        char *image;    /* <state_dir>/pool.img when the pool lives in our image */
        char *loop;     /* "/dev/loopN" backing the pool, or NULL */
        bool owned;     /* mounted from our image: pool_release() unmounts it */
        bool quota;     /* btrfs quota groups are on */
        bool released;  /* pool_release() ran: every other call fails with -ESTALE */
        uint64_t disk_overcommit_permille; /* PoolConfig's, for pool_info_json */
        uint64_t reserve_mb;
        PoolSpares *spares; /* spare.c */
};

/* -ESTALE after pool_release(), -EINVAL for NULL. */
int pool_usable(const Pool *p);
/* <pool>/<a>[/<b>[/<c>]] (malloc'd), or NULL on OOM. */
char *pool_subpath(const Pool *p, const char *a, const char *b, const char *c);
/* Opens <pool>/<sub> as a directory. */
int pool_open_subdir(const Pool *p, const char *sub);
/* Sorted names of the entries of <pool>/<sub> that pass valid(). */
int pool_list_names(const Pool *p, const char *sub, bool (*valid)(const char *), char ***ret);
/* Removes dirfd/name whatever it is: a subvolume (with nested ones) or a tree. */
int pool_remove_entry(const Pool *p, int dirfd, const char *name);
/* pool_remove_entry() of every entry of d (whatever its name), going on
 * after a failure: the first error, or 0. */
int pool_remove_entries(const Pool *p, DIR *d);

/* template.c */
/* Drops device nodes and sums the disk usage (du) of the tree at path. */
int pool_template_scan(const char *path, uint64_t *ret);
/* Moves tmp/<tmpname> to templates/<name> (read-only on btrfs). */
int pool_template_commit(Pool *p, int tmp_fd, const char *tmpname, int tpl_fd, const char *name);

/* spare.c: made with the pool, freed with it */
int pool_spares_init(Pool *p);
void pool_spares_free(Pool *p);
/* The root of a create of template_name (tpl_fd: its subvolume) as dfd/name
 * from a spare made of that very subvolume: 0, or -ENOENT if none. Marks
 * the template wanted either way. */
int pool_spare_take(Pool *p, const char *template_name, int tpl_fd, int dfd, const char *name);

/* sandbox.c */
/* The root subvolume of sandbox id opened (O_DIRECTORY) and its subvolume id:
 * -EOPNOTSUPP unless the pool is btrfs with quotas on. */
int pool_sandbox_quota_root(Pool *p, const char *id, int *ret_fd, uint64_t *ret_subvolid);
/* Removes sandboxes/<id> (sb_fd: sandboxes/) with everything in it; only the
 * root directory, not the checkpoints. A missing one is fine. */
int pool_sandbox_remove_dir(Pool *p, int sb_fd, const char *id);
/* btrfs: dfd/name becomes a writable snapshot of the subvolume src_fd, its
 * qgroup limited to disk_mb MiB of exclusive bytes (0: no limit, whatever
 * limit the source had). */
int pool_root_snapshot(Pool *p, int src_fd, int dfd, const char *name, uint64_t disk_mb);
/* ... the qgroup limit of the subvolume dfd/name alone (a spare taken). */
int pool_root_limit(Pool *p, int dfd, const char *name, uint64_t disk_mb);
/* Overlay: creates work/ and root/ in sandboxes/<id> (dfd) if missing, records
 * the template's name there, and mounts the root (upper/ must exist). */
int pool_sandbox_finish_overlay(Pool *p, const char *id, int dfd, const char *template_name);
/* Overlay: the template name recorded in sandboxes/<id>/template (malloc'd). */
int pool_sandbox_template_name(Pool *p, const char *id, char **ret);
/* Overlay: mounts sandboxes/<id>/root over templates/<tpl> (work/ created if missing). */
int pool_sandbox_mount_overlay(Pool *p, const char *id, const char *tpl);

/* checkpoint.c */
/* cp --archive --one-file-system --reflink=auto src dst (dst must not exist;
 * no shell). -ENOSPC/-EDQUOT when the target fills up, -EIO for other failures. */
int pool_copy_tree(const char *src, const char *dst);

/* pool-ship.c */
/* Removes tmp/<name> (tmp_fd: tmp/), a receive's directory, with the
 * subvolumes in it. A missing one is fine. */
int pool_ship_remove_dir(const Pool *p, int tmp_fd, const char *name);
#define POOL_SHIP_RECV_PREFIX "recv."

/* pool-ship-send.c */
/* Cancels the sends (pool_ship_send_start()) of this process or of its parent
 * that read path (a realpath) or anything under it, and waits (bounded) until
 * they exited: the number cancelled. */
int pool_ship_sends_cancel(const char *path);

/* Disk images (disk-image.c): a sandbox's disk and saved machine in sandboxes/<id>/. */
#define POOL_IMAGES_DIR "images"
#define POOL_SANDBOX_DISK "disk.img"
#define POOL_SANDBOX_MEMORY "memory.state"
/* disk-checkpoint.c: the allocated bytes of the files in a vm checkpoint's directory. */
int pool_disk_checkpoint_usage(int dir_fd, uint64_t *ret_bytes);
