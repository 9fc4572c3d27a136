/* SPDX-License-Identifier: MIT */
/* New roots made from existing ones: a branch (a new sandbox from another's
 * root or checkpoint) and a restore (a sandbox's root replaced by one of its
 * checkpoints).
 *
 * btrfs: writable snapshots (O(1)), each with its own qgroup limit.
 * overlay: the source tree (a checkpoint, or a merged root) is copied whole
 * into a new upper directory over the sandbox's template, sealed so that the
 * template shows through nowhere (overlay_seal_upper): O(size of the root). */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "overlay.h"
#include "pool-internal.h"
#include "str-util.h"

static int open_dir_at(int dirfd, const char *name) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

/* Opens checkpoints/<sandbox_id>/<checkpoint_id>; its path in *ret_path. */
static int open_checkpoint(Pool *p, const char *sandbox_id, const char *checkpoint_id, char **ret_path) {
        _cleanup_free_ char *owner = strjoin(POOL_CHECKPOINTS_DIR "/", sandbox_id), *path = NULL;
        _cleanup_close_ int owner_fd = -EBADF;
        int fd;

        if (!owner)
                return -ENOMEM;
        path = pool_subpath(p, owner, checkpoint_id, NULL);
        if (!path)
                return -ENOMEM;
        owner_fd = pool_open_subdir(p, owner);
        if (owner_fd < 0)
                return owner_fd;
        fd = open_dir_at(owner_fd, checkpoint_id);
        if (fd < 0)
                return fd;
        *ret_path = TAKE_PTR(path);
        return fd;
}

/* Overlay: dfd/<upper_name> becomes a sealed copy of the tree at src over templates/<tpl>. */
static int overlay_make_upper(Pool *p, const char *src, const char *tpl, const char *id, int dfd,
                              const char *upper_name) {
        _cleanup_free_ char *upper = pool_subpath(p, POOL_SANDBOXES_DIR, id, upper_name);
        _cleanup_close_ int tpls_fd = -EBADF, lower_fd = -EBADF, upper_fd = -EBADF;
        int r;

        if (!upper)
                return -ENOMEM;
        tpls_fd = pool_open_subdir(p, POOL_TEMPLATES_DIR);
        if (tpls_fd < 0)
                return tpls_fd;
        lower_fd = open_dir_at(tpls_fd, tpl);
        if (lower_fd < 0)
                return lower_fd;
        r = pool_copy_tree(src, upper);
        if (r < 0)
                return r;
        upper_fd = open_dir_at(dfd, upper_name);
        if (upper_fd < 0)
                return upper_fd;
        return overlay_seal_upper(upper_fd, lower_fd);
}

int pool_sandbox_branch(Pool *p, const char *src_id, const char *from_checkpoint, const char *new_id,
                        uint64_t disk_mb, char **ret_root) {
        _cleanup_close_ int src_fd = -EBADF, sb_fd = -EBADF, dfd = -EBADF;
        _cleanup_free_ char *src = NULL, *tpl = NULL, *root = NULL;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(src_id) || !pool_sandbox_id_valid(new_id) || !ret_root ||
            (from_checkpoint && !pool_sandbox_id_valid(from_checkpoint)))
                return -EINVAL;
        if (disk_mb > (UINT64_MAX >> 20))
                return -ERANGE;

        if (from_checkpoint) {
                src_fd = open_checkpoint(p, src_id, from_checkpoint, &src);
                if (src_fd < 0)
                        return src_fd;
        } else {
                /* -ENOENT without the source; its overlay is mounted if it is not. */
                r = pool_sandbox_root_path(p, src_id, &src);
                if (r < 0)
                        return r;
                src_fd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (src_fd < 0)
                        return negative_errno();
        }
        if (p->kind == POOL_OVERLAY) {
                r = pool_sandbox_template_name(p, src_id, &tpl);
                if (r < 0)
                        return r;
        }
        sb_fd = pool_open_subdir(p, POOL_SANDBOXES_DIR);
        if (sb_fd < 0)
                return sb_fd;
        root = pool_subpath(p, POOL_SANDBOXES_DIR, new_id, POOL_SANDBOX_ROOT);
        if (!root)
                return -ENOMEM;

        if (mkdirat(sb_fd, new_id, 0700) < 0)
                return negative_errno(); /* -EEXIST: taken */
        /* Checkpoints under a fresh id are a crashed removal's: never the new sandbox's. */
        r = pool_checkpoint_remove_all(p, new_id);
        if (r >= 0) {
                dfd = open_dir_at(sb_fd, new_id);
                if (dfd < 0)
                        r = dfd;
                else if (p->kind == POOL_BTRFS)
                        r = pool_root_snapshot(p, src_fd, dfd, POOL_SANDBOX_ROOT, disk_mb);
                else {
                        r = overlay_make_upper(p, src, tpl, new_id, dfd, POOL_SANDBOX_UPPER);
                        if (r >= 0)
                                r = pool_sandbox_finish_overlay(p, new_id, dfd, tpl);
                }
        }
        if (r < 0) {
                int k = pool_sandbox_remove_dir(p, sb_fd, new_id);
                if (k < 0)
                        log_debug_errno(k, "Failed to undo the branch '%s': %m", root);
                return r;
        }
        *ret_root = TAKE_PTR(root);
        return 0;
}

/* Removes dfd/name if it is there (a leftover of a crashed restore, or the
 * old root after the swap). */
static int remove_aside(Pool *p, int dfd, const char *name) {
        int r = pool_remove_entry(p, dfd, name);
        if (r < 0)
                log_debug_errno(r, "Failed to remove '%s' of a restore (removed with the sandbox): %m", name);
        return r;
}

/* Swaps dfd/a and dfd/b in one step: there is no moment without either. */
static int exchange(int dfd, const char *a, const char *b) {
        return renameat2(dfd, a, dfd, b, RENAME_EXCHANGE) < 0 ? negative_errno() : 0;
}

/* btrfs: root.new = writable snapshot of the checkpoint (with the quota),
 * swapped with root; the old root goes. Both are writable subvolumes (a
 * read-only checkpoint is never renamed). */
static int restore_btrfs(Pool *p, int dfd, int ckpt_fd, uint64_t disk_mb) {
        int r;

        r = pool_root_snapshot(p, ckpt_fd, dfd, POOL_SANDBOX_ROOT_NEW, disk_mb);
        if (r >= 0)
                r = exchange(dfd, POOL_SANDBOX_ROOT_NEW, POOL_SANDBOX_ROOT);
        /* root.new is now the old root, or (on failure) the unused new one. */
        (void) remove_aside(p, dfd, POOL_SANDBOX_ROOT_NEW);
        return r;
}

/* Overlay work/ belongs to one upper: start it afresh (mounting makes it again). */
static int reset_work(Pool *p, int dfd) {
        int r = pool_remove_entry(p, dfd, POOL_SANDBOX_WORK);
        if (r < 0)
                return r;
        return mkdirat(dfd, POOL_SANDBOX_WORK, 0700) < 0 && errno != EEXIST ? negative_errno() : 0;
}

/* overlay: upper.new = sealed copy of the checkpoint; unmount, swap it with
 * upper, mount again; on a failed mount the old upper is swapped back. */
static int restore_overlay(Pool *p, const char *id, int dfd, const char *ckpt_path) {
        _cleanup_free_ char *tpl = NULL, *root = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_ROOT);
        int r, k;

        if (!root)
                return -ENOMEM;
        r = pool_sandbox_template_name(p, id, &tpl);
        if (r < 0)
                return r;
        r = overlay_make_upper(p, ckpt_path, tpl, id, dfd, POOL_SANDBOX_UPPER_NEW);
        if (r >= 0)
                r = overlay_umount(root);
        if (r < 0) {
                (void) remove_aside(p, dfd, POOL_SANDBOX_UPPER_NEW);
                return r;
        }
        r = exchange(dfd, POOL_SANDBOX_UPPER_NEW, POOL_SANDBOX_UPPER);
        if (r >= 0) {
                r = reset_work(p, dfd);
                if (r >= 0)
                        r = pool_sandbox_mount_overlay(p, id, tpl);
                if (r < 0) {
                        /* Back to the old upper. */
                        k = exchange(dfd, POOL_SANDBOX_UPPER_NEW, POOL_SANDBOX_UPPER);
                        if (k >= 0)
                                k = reset_work(p, dfd);
                        if (k < 0)
                                log_debug_errno(k, "Failed to put the old upper of '%s' back: %m", root);
                }
        }
        if (r < 0) {
                /* The old root, mounted again (as pool_sandbox_root_path would). */
                k = pool_sandbox_mount_overlay(p, id, tpl);
                if (k < 0)
                        log_debug_errno(k, "Failed to mount '%s' again: %m", root);
        }
        (void) remove_aside(p, dfd, POOL_SANDBOX_UPPER_NEW);
        return r;
}

int pool_sandbox_restore(Pool *p, const char *id, const char *checkpoint_id, uint64_t disk_mb, char **ret_root) {
        _cleanup_close_ int sb_fd = -EBADF, dfd = -EBADF, ckpt_fd = -EBADF;
        _cleanup_free_ char *ckpt_path = NULL, *root = NULL;
        const char *aside;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(id) || !pool_sandbox_id_valid(checkpoint_id) || !ret_root)
                return -EINVAL;
        if (disk_mb > (UINT64_MAX >> 20))
                return -ERANGE;

        sb_fd = pool_open_subdir(p, POOL_SANDBOXES_DIR);
        if (sb_fd < 0)
                return sb_fd;
        ckpt_fd = open_checkpoint(p, id, checkpoint_id, &ckpt_path);
        if (ckpt_fd < 0)
                return ckpt_fd;
        root = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_ROOT);
        if (!root)
                return -ENOMEM;
        dfd = open_dir_at(sb_fd, id);
        if (dfd == -ENOENT && p->kind == POOL_BTRFS) {
                /* a checkpoint shipped here from another worker: the sandbox's
                 * root is made from it (its first root on this host) */
                if (mkdirat(sb_fd, id, 0700) < 0)
                        return negative_errno();
                dfd = open_dir_at(sb_fd, id);
                r = dfd < 0 ? dfd : pool_root_snapshot(p, ckpt_fd, dfd, POOL_SANDBOX_ROOT, disk_mb);
                if (r < 0) {
                        int k = pool_sandbox_remove_dir(p, sb_fd, id);
                        if (k < 0)
                                log_debug_errno(k, "Failed to undo the restore of '%s': %m", root);
                        return r;
                }
                *ret_root = TAKE_PTR(root);
                return 0;
        }
        if (dfd < 0)
                return dfd;

        /* What a crash in an earlier restore left. */
        aside = p->kind == POOL_BTRFS ? POOL_SANDBOX_ROOT_NEW : POOL_SANDBOX_UPPER_NEW;
        r = pool_remove_entry(p, dfd, aside);
        if (r < 0)
                return r;

        if (p->kind == POOL_BTRFS)
                r = restore_btrfs(p, dfd, ckpt_fd, disk_mb);
        else
                r = restore_overlay(p, id, dfd, ckpt_path);
        if (r < 0)
                return r;
        *ret_root = TAKE_PTR(root);
        return 0;
}
