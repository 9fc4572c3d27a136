/* SPDX-License-Identifier: MIT */
/* Checkpoints: checkpoints/<sandbox id>/<checkpoint id>, a read-only btrfs
 * snapshot of the sandbox's root, or (overlay) a full copy of its merged root. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "pool-internal.h"
#include "spawn.h"
#include "str-util.h"

#define CHECKPOINT_TMP_SUFFIX_LEN 8U

int pool_copy_tree(const char *src, const char *dst) {
        _cleanup_free_ char *cp = NULL;
        char out[SPAWN_OUTPUT_MAX];
        int r;

        r = spawn_find_binary("cp", &cp);
        if (r < 0)
                return r;
        /* --archive: no symlink followed, owners, modes, times, hard links and
         * xattrs kept, special files recreated. --one-file-system: nothing
         * mounted inside the root is copied. --no-target-directory: dst is the
         * copy of src itself, never a directory to copy into. */
        char *argv[] = {
                cp,
                (char *) "--archive",
                (char *) "--one-file-system",
                (char *) "--reflink=auto",
                (char *) "--no-target-directory",
                (char *) "--",
                (char *) src,
                (char *) dst,
                NULL,
        };
        r = spawn_and_wait(argv, -EBADF, out, sizeof out);
        if (r != -EPROTO)
                return r;
        log_debug("cp '%s' '%s' failed: %s", src, dst, out);
        if (strstr(out, "No space left on device"))
                return -ENOSPC;
        if (strstr(out, "Disk quota exceeded"))
                return -EDQUOT;
        return -EIO;
}

int pool_checkpoint_owner_open(Pool *p, const char *sandbox_id) {
        _cleanup_close_ int fd = -EBADF;
        int owner_fd;

        fd = pool_open_subdir(p, POOL_CHECKPOINTS_DIR);
        if (fd < 0)
                return fd;
        owner_fd = openat(fd, sandbox_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return owner_fd < 0 ? negative_errno() : owner_fd;
}

/* Drops checkpoints/<sandbox_id> once it is empty. */
static void checkpoint_drop_owner_if_empty(Pool *p, const char *sandbox_id) {
        _cleanup_close_ int fd = pool_open_subdir(p, POOL_CHECKPOINTS_DIR);

        if (fd >= 0 && unlinkat(fd, sandbox_id, AT_REMOVEDIR) < 0 && errno != ENOTEMPTY && errno != EEXIST &&
            errno != ENOENT)
                log_debug_errno(negative_errno(), "Failed to remove checkpoints/%s: %m", sandbox_id);
}

static int checkpoint_validate(Pool *p, const char *sandbox_id, const char *checkpoint_id) {
        int r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(sandbox_id) || !pool_sandbox_id_valid(checkpoint_id))
                return -EINVAL;
        return 0;
}

/* Overlay: copies the merged root into tmp/ and moves the copy into place
 * (a half-made copy is never visible under the checkpoint's name). */
static int checkpoint_copy(Pool *p, const char *root, int owner_fd, const char *sandbox_id,
                           const char *checkpoint_id) {
        _cleanup_free_ char *tmpname = NULL, *tmppath = NULL;
        _cleanup_close_ int tmp_fd = -EBADF;
        char suffix[CHECKPOINT_TMP_SUFFIX_LEN + 1];
        int r;

        tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        if (tmp_fd < 0)
                return tmp_fd;
        r = random_alnum(suffix, CHECKPOINT_TMP_SUFFIX_LEN);
        if (r < 0)
                return r;
        tmpname = strjoin("checkpoint.", sandbox_id, ".", checkpoint_id, ".", suffix);
        tmppath = tmpname ? pool_subpath(p, POOL_TMP_DIR, tmpname, NULL) : NULL;
        if (!tmppath)
                return -ENOMEM;

        r = pool_copy_tree(root, tmppath);
        if (r >= 0 && renameat2(tmp_fd, tmpname, owner_fd, checkpoint_id, RENAME_NOREPLACE) < 0)
                r = negative_errno();
        if (r < 0) {
                int k = pool_remove_entry(p, tmp_fd, tmpname);
                if (k < 0)
                        log_debug_errno(k, "Failed to remove the failed checkpoint copy '%s': %m", tmppath);
        }
        return r;
}

int pool_checkpoint_create(Pool *p, const char *sandbox_id, const char *checkpoint_id) {
        _cleanup_close_ int ckpts_fd = -EBADF, owner_fd = -EBADF, root_fd = -EBADF;
        _cleanup_free_ char *root = NULL;
        bool created_owner = false;
        struct stat st;
        int r;

        r = checkpoint_validate(p, sandbox_id, checkpoint_id);
        if (r < 0)
                return r;
        /* -ENOENT without the sandbox; an overlay root is mounted if it is not. */
        r = pool_sandbox_root_path(p, sandbox_id, &root);
        if (r < 0)
                return r;
        root_fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root_fd < 0)
                return negative_errno();

        ckpts_fd = pool_open_subdir(p, POOL_CHECKPOINTS_DIR);
        if (ckpts_fd < 0)
                return ckpts_fd;
        if (mkdirat(ckpts_fd, sandbox_id, 0700) >= 0)
                created_owner = true;
        else if (errno != EEXIST)
                return negative_errno();
        owner_fd = openat(ckpts_fd, sandbox_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (owner_fd < 0)
                r = negative_errno();
        else if (fstatat(owner_fd, checkpoint_id, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                r = -EEXIST;
        else if (p->kind == POOL_BTRFS)
                r = btrfs_subvol_snapshot(root_fd, owner_fd, checkpoint_id, true);
        else
                r = checkpoint_copy(p, root, owner_fd, sandbox_id, checkpoint_id);
        if (r < 0 && created_owner)
                checkpoint_drop_owner_if_empty(p, sandbox_id);
        return r;
}

int pool_checkpoint_remove(Pool *p, const char *sandbox_id, const char *checkpoint_id) {
        _cleanup_close_ int owner_fd = -EBADF;
        struct stat st;
        int r;

        r = checkpoint_validate(p, sandbox_id, checkpoint_id);
        if (r < 0)
                return r;
        owner_fd = pool_checkpoint_owner_open(p, sandbox_id);
        if (owner_fd < 0)
                return owner_fd;
        if (fstatat(owner_fd, checkpoint_id, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        r = pool_volume_copies_remove(p, sandbox_id, checkpoint_id); /* the volumes' copies with it go first */
        if (r < 0)
                return r;
        r = pool_remove_entry(p, owner_fd, checkpoint_id);
        if (r < 0)
                return r;
        checkpoint_drop_owner_if_empty(p, sandbox_id);
        return 0;
}

int pool_checkpoint_remove_all(Pool *p, const char *sandbox_id) {
        _cleanup_(closedirp_) DIR *d = NULL;
        int owner_fd, r = 0;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(sandbox_id))
                return -EINVAL;
        owner_fd = pool_checkpoint_owner_open(p, sandbox_id);
        if (owner_fd == -ENOENT)
                return 0;
        if (owner_fd < 0)
                return owner_fd;
        d = fdopendir(owner_fd);
        if (!d) {
                safe_close(owner_fd);
                return negative_errno();
        }
        /* Every entry, whatever its name: nothing of the sandbox stays. */
        r = pool_remove_entries(p, d);
        if (r < 0)
                return r;
        checkpoint_drop_owner_if_empty(p, sandbox_id);
        return 0;
}

bool pool_checkpoint_exists(Pool *p, const char *sandbox_id, const char *checkpoint_id) {
        _cleanup_close_ int owner_fd = -EBADF;
        struct stat st;

        if (checkpoint_validate(p, sandbox_id, checkpoint_id) < 0)
                return false;
        owner_fd = pool_checkpoint_owner_open(p, sandbox_id);
        return owner_fd >= 0 && fstatat(owner_fd, checkpoint_id, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st.st_mode);
}

int pool_checkpoint_list(Pool *p, const char *sandbox_id, char ***ret_ids) {
        _cleanup_free_ char *sub = NULL;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(sandbox_id) || !ret_ids)
                return -EINVAL;
        sub = strjoin(POOL_CHECKPOINTS_DIR "/", sandbox_id);
        if (!sub)
                return -ENOMEM;
        r = pool_list_names(p, sub, pool_sandbox_id_valid, ret_ids);
        if (r != -ENOENT)
                return r;
        /* No checkpoint directory: none yet, or no such sandbox. */
        if (!pool_sandbox_exists(p, sandbox_id))
                return -ENOENT;
        *ret_ids = new0(char *, 1);
        return *ret_ids ? 0 : -ENOMEM;
}

int pool_checkpoint_usage(Pool *p, const char *sandbox_id, const char *checkpoint_id, uint64_t *ret_bytes) {
        _cleanup_close_ int owner_fd = -EBADF, fd = -EBADF;
        uint64_t subvolid;
        int r;

        r = checkpoint_validate(p, sandbox_id, checkpoint_id);
        if (r < 0)
                return r;
        if (!ret_bytes)
                return -EINVAL;
        owner_fd = pool_checkpoint_owner_open(p, sandbox_id);
        if (owner_fd >= 0)
                fd = openat(owner_fd, checkpoint_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* a vm sandbox's: a plain directory with its disk (and memory) */
        if (fd >= 0 && faccessat(fd, POOL_SANDBOX_DISK, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return pool_disk_checkpoint_usage(fd, ret_bytes);
        if (p->kind != POOL_BTRFS || !p->quota)
                return -EOPNOTSUPP;
        if (owner_fd < 0)
                return owner_fd;
        if (fd < 0)
                return negative_errno();
        r = btrfs_subvol_get_id(fd, &subvolid);
        if (r < 0)
                return r;
        return btrfs_qgroup_get(fd, BTRFS_QGROUPID(subvolid), NULL, ret_bytes);
}

int pool_checkpoint_owners(Pool *p, char ***ret_ids) {
        if (!ret_ids)
                return -EINVAL;
        return pool_list_names(p, POOL_CHECKPOINTS_DIR, pool_sandbox_id_valid, ret_ids);
}

int pool_checkpoint_usage_total(Pool *p, const char *sandbox_id, uint64_t *ret_bytes) {
        _cleanup_strv_free_ char **ids = NULL;
        uint64_t total = 0;
        int r;

        if (!ret_bytes)
                return -EINVAL;
        if ((p->kind != POOL_BTRFS || !p->quota) && !pool_sandbox_is_vm(p, sandbox_id))
                return -EOPNOTSUPP;
        r = pool_checkpoint_list(p, sandbox_id, &ids);
        if (r < 0)
                return r;
        for (char **i = ids; *i; i++) {
                uint64_t bytes = 0;
                r = pool_checkpoint_usage(p, sandbox_id, *i, &bytes);
                if (r == -ENOENT)
                        continue; /* removed meanwhile */
                if (r < 0)
                        return r;
                total = total + bytes < total ? UINT64_MAX : total + bytes;
        }
        *ret_bytes = total;
        return 0;
}
