/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "overlay.h"
#include "pool-internal.h"
#include "str-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

bool pool_sandbox_id_valid(const char *id) {
        size_t n;

        if (!id)
                return false;
        n = strnlen(id, POOL_SANDBOX_ID_MAX + 1);
        if (n == 0 || n > POOL_SANDBOX_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9')))
                        return false;
        return true;
}

bool pool_sandbox_exists(Pool *p, const char *id) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (pool_usable(p) < 0 || !pool_sandbox_id_valid(id))
                return false;
        fd = pool_open_subdir(p, POOL_SANDBOXES_DIR);
        return fd >= 0 && fstatat(fd, id, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

int pool_sandbox_list(Pool *p, char ***ret_ids) {
        return pool_list_names(p, POOL_SANDBOXES_DIR, pool_sandbox_id_valid, ret_ids);
}

/* Removes sandboxes/<id>: unmounts an overlay root, deletes subvolumes
 * (the root, and any other one kept there, such as a restore's leftover) and files. */
int pool_sandbox_remove_dir(Pool *p, int sb_fd, const char *id) {
        _cleanup_(closedirp) DIR *d = NULL;
        int fd, r = 0;

        fd = openat(sb_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        if (p->kind == POOL_OVERLAY) {
                _cleanup_free_ char *root = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_ROOT);
                if (!root)
                        return -ENOMEM;
                r = overlay_umount(root);
                if (r < 0)
                        return r;
        }
        r = pool_remove_entries(p, d);
        if (r < 0)
                return r;
        if (unlinkat(sb_fd, id, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

int pool_sandbox_remove(Pool *p, const char *id) {
        _cleanup_close_ int sb_fd = -EBADF;
        int r, k;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(id))
                return -EINVAL;
        sb_fd = pool_open_subdir(p, POOL_SANDBOXES_DIR);
        if (sb_fd < 0)
                return sb_fd;
        r = pool_sandbox_remove_dir(p, sb_fd, id);
        /* The checkpoints go with the sandbox (tried even if the root stays). */
        k = pool_checkpoint_remove_all(p, id);
        return r < 0 ? r : k;
}

int pool_sandbox_mount_overlay(Pool *p, const char *id, const char *tpl) {
        _cleanup_free_ char *lower = pool_subpath(p, POOL_TEMPLATES_DIR, tpl, NULL),
                            *upper = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_UPPER),
                            *work = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_WORK),
                            *root = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_ROOT);

        if (!lower || !upper || !work || !root)
                return -ENOMEM;
        /* A restore empties work/ by removing it; a crash may have left it out. */
        if (mkdir(work, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        return overlay_mount(lower, upper, work, root);
}

int pool_sandbox_finish_overlay(Pool *p, const char *id, int dfd, const char *template_name) {
        _cleanup_close_ int tfd = -EBADF;
        int r;

        if ((mkdirat(dfd, POOL_SANDBOX_WORK, 0700) < 0 && errno != EEXIST) ||
            (mkdirat(dfd, POOL_SANDBOX_ROOT, 0755) < 0 && errno != EEXIST))
                return negative_errno();
        tfd = openat(dfd, POOL_SANDBOX_TEMPLATE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (tfd < 0)
                return negative_errno();
        r = loop_write(tfd, template_name, strlen(template_name));
        if (r < 0)
                return r;
        return pool_sandbox_mount_overlay(p, id, template_name);
}

static int sandbox_create_overlay(Pool *p, int tpl_fd, const char *template_name, const char *id, int dfd) {
        _cleanup_close_ int upper_fd = -EBADF;
        struct stat st;

        /* The overlay's root directory takes owner and mode from upper/. */
        if (fstat(tpl_fd, &st) < 0)
                return negative_errno();
        if (mkdirat(dfd, POOL_SANDBOX_UPPER, 0755) < 0)
                return negative_errno();
        upper_fd = openat(dfd, POOL_SANDBOX_UPPER, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (upper_fd < 0)
                return negative_errno();
        if (fchown(upper_fd, st.st_uid, st.st_gid) < 0 || fchmod(upper_fd, st.st_mode & 07777) < 0)
                return negative_errno();
        return pool_sandbox_finish_overlay(p, id, dfd, template_name);
}

int pool_root_snapshot(Pool *p, int src_fd, int dfd, const char *name, uint64_t disk_mb) {
        int r;

        r = btrfs_subvol_snapshot(src_fd, dfd, name, false);
        if (r < 0)
                return r;
        return pool_root_limit(p, dfd, name, disk_mb);
}

int pool_root_limit(Pool *p, int dfd, const char *name, uint64_t disk_mb) {
        _cleanup_close_ int root_fd = -EBADF;
        uint64_t subvolid;
        int r;

        if (!p->quota)
                return 0;
        /* Set even for disk_mb = 0 (which clears it): a snapshot inherits the
         * limit of its source (a sandbox root, or a checkpoint of one). */
        root_fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root_fd < 0)
                return negative_errno();
        r = btrfs_subvol_get_id(root_fd, &subvolid);
        if (r < 0)
                return r;
        return btrfs_qgroup_limit_exclusive(root_fd, BTRFS_QGROUPID(subvolid), disk_mb << 20);
}

int pool_sandbox_create(Pool *p, const char *template_name, const char *id, uint64_t disk_mb, char **ret_root) {
        _cleanup_close_ int tpls_fd = -EBADF, tpl_fd = -EBADF, sb_fd = -EBADF, dfd = -EBADF;
        _cleanup_free_ char *root = NULL;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_template_name_valid(template_name) || !pool_sandbox_id_valid(id) || !ret_root)
                return -EINVAL;
        if (disk_mb > (UINT64_MAX >> 20))
                return -ERANGE;

        tpls_fd = pool_open_subdir(p, POOL_TEMPLATES_DIR);
        if (tpls_fd < 0)
                return tpls_fd;
        tpl_fd = openat(tpls_fd, template_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tpl_fd < 0)
                return negative_errno();
        sb_fd = pool_open_subdir(p, POOL_SANDBOXES_DIR);
        if (sb_fd < 0)
                return sb_fd;
        root = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_ROOT);
        if (!root)
                return -ENOMEM;

        if (mkdirat(sb_fd, id, 0700) < 0)
                return negative_errno(); /* -EEXIST: taken */
        /* Checkpoints under a fresh id are a crashed removal's: never the new sandbox's. */
        r = pool_checkpoint_remove_all(p, id);
        if (r >= 0) {
                dfd = openat(sb_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0)
                        r = negative_errno();
                else if (p->kind == POOL_BTRFS && pool_spare_take(p, template_name, tpl_fd, dfd, POOL_SANDBOX_ROOT) >= 0) {
                        log_debug("Sandbox %s: its root is a spare of template %s", id, template_name);
                        r = pool_root_limit(p, dfd, POOL_SANDBOX_ROOT, disk_mb);
                } else if (p->kind == POOL_BTRFS)
                        r = pool_root_snapshot(p, tpl_fd, dfd, POOL_SANDBOX_ROOT, disk_mb);
                else
                        r = sandbox_create_overlay(p, tpl_fd, template_name, id, dfd);
        }
        if (r < 0) {
                int k = pool_sandbox_remove_dir(p, sb_fd, id);
                if (k < 0)
                        log_debug_errno(k, "Failed to undo the sandbox root '%s': %m", root);
                return r;
        }
        *ret_root = TAKE_PTR(root);
        return 0;
}

int pool_sandbox_template_name(Pool *p, const char *id, char **ret) {
        _cleanup_free_ char *tfile = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_TEMPLATE), *tpl = NULL;
        int r;

        if (!tfile)
                return -ENOMEM;
        r = read_full_file(tfile, POOL_TEMPLATE_NAME_MAX, &tpl, NULL);
        if (r < 0)
                return r;
        if (!pool_template_name_valid(tpl))
                return -EBADMSG;
        *ret = TAKE_PTR(tpl);
        return 0;
}

/* Overlay: reads sandboxes/<id>/template and mounts the root again. */
static int sandbox_remount_overlay(Pool *p, const char *id) {
        _cleanup_free_ char *tpl = NULL;
        int r;

        r = pool_sandbox_template_name(p, id, &tpl);
        if (r < 0)
                return r;
        return pool_sandbox_mount_overlay(p, id, tpl);
}

int pool_sandbox_root_path_planned(Pool *p, const char *id, char **ret) {
        char *root;

        if (!pool_sandbox_id_valid(id) || !ret)
                return -EINVAL;
        root = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_ROOT);
        if (!root)
                return -ENOMEM;
        *ret = root;
        return 0;
}

int pool_sandbox_root_path(Pool *p, const char *id, char **ret) {
        _cleanup_free_ char *root = NULL;
        struct stat st;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(id) || !ret)
                return -EINVAL;
        root = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_ROOT);
        if (!root)
                return -ENOMEM;
        if (lstat(root, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if (p->kind == POOL_OVERLAY) {
                r = overlay_is_mounted(root);
                if (r == 0)
                        r = sandbox_remount_overlay(p, id);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(root);
        return 0;
}

int pool_sandbox_quota_root(Pool *p, const char *id, int *ret_fd, uint64_t *ret_subvolid) {
        _cleanup_free_ char *root = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(id))
                return -EINVAL;
        if (p->kind != POOL_BTRFS || !p->quota)
                return -EOPNOTSUPP;
        root = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_ROOT);
        if (!root)
                return -ENOMEM;
        fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = btrfs_subvol_get_id(fd, ret_subvolid);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int pool_sandbox_usage(Pool *p, const char *id, uint64_t *ret_bytes) {
        _cleanup_close_ int fd = -EBADF;
        uint64_t subvolid;
        int r;

        if (!ret_bytes)
                return -EINVAL;
        r = pool_sandbox_quota_root(p, id, &fd, &subvolid);
        if (r < 0)
                return r;
        return btrfs_qgroup_get(fd, BTRFS_QGROUPID(subvolid), NULL, ret_bytes);
}
