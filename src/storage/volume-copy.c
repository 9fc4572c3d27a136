/* SPDX-License-Identifier: MIT */
/* A volume's copy with a checkpoint (a cluster's checkpoints): a read-only
 * snapshot of volumes/<volume> taken with checkpoint <ck> of a sandbox that
 * mounts it, kept beside the checkpoint as checkpoints/<sandbox>/<ck>.<volume>
 * and shipped with it. A restore on another worker makes the volume there
 * from it: the sandbox's files and its volume's as they were at the same
 * moment. The name is no checkpoint id ('.'), so listings of checkpoints
 * skip it, and it goes with its checkpoint or its sandbox's checkpoints. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "pool-internal.h"
#include "str-util.h"

int pool_volume_copy_name(const char *checkpoint_id, const char *volume_id, char *buf, size_t size) {
        if (!pool_sandbox_id_valid(checkpoint_id) || !pool_sandbox_id_valid(volume_id))
                return -EINVAL;
        if ((size_t) snprintf(buf, size, "%s.%s", checkpoint_id, volume_id) >= size)
                return -ENAMETOOLONG;
        return 0;
}

bool pool_volume_copy_name_valid(const char *name) {
        const char *dot = name ? strchr(name, '.') : NULL;
        char ck[POOL_SANDBOX_ID_MAX + 1];
        size_t n;

        if (!dot)
                return false;
        n = (size_t) (dot - name);
        if (n == 0 || n >= sizeof ck)
                return false;
        memcpy(ck, name, n);
        ck[n] = 0;
        return pool_sandbox_id_valid(ck) && pool_sandbox_id_valid(dot + 1);
}

static int copy_valid(Pool *p, const char *sandbox_id, const char *checkpoint_id, const char *volume_id) {
        int r = pool_usable(p);

        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(sandbox_id) || !pool_sandbox_id_valid(checkpoint_id) ||
            !pool_sandbox_id_valid(volume_id))
                return -EINVAL;
        if (p->kind != POOL_BTRFS || !p->quota)
                return -EOPNOTSUPP;
        return 0;
}

int pool_volume_copy_create(Pool *p, const char *sandbox_id, const char *checkpoint_id, const char *volume_id) {
        _cleanup_close_ int owner = -EBADF, vol = -EBADF;
        char name[2 * POOL_SANDBOX_ID_MAX + 2];
        int r;

        r = copy_valid(p, sandbox_id, checkpoint_id, volume_id);
        if (r < 0)
                return r;
        r = pool_volume_copy_name(checkpoint_id, volume_id, name, sizeof name);
        if (r < 0)
                return r;
        owner = pool_checkpoint_owner_open(p, sandbox_id); /* the checkpoint made it */
        if (owner < 0)
                return owner;
        r = pool_volume_open(p, volume_id, &vol);
        if (r < 0)
                return r;
        return btrfs_subvol_snapshot(vol, owner, name, true);
}

bool pool_volume_copy_exists(Pool *p, const char *sandbox_id, const char *checkpoint_id, const char *volume_id) {
        _cleanup_close_ int owner = -EBADF;
        char name[2 * POOL_SANDBOX_ID_MAX + 2];
        struct stat st;

        if (copy_valid(p, sandbox_id, checkpoint_id, volume_id) < 0 ||
            pool_volume_copy_name(checkpoint_id, volume_id, name, sizeof name) < 0)
                return false;
        owner = pool_checkpoint_owner_open(p, sandbox_id);
        return owner >= 0 && fstatat(owner, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISDIR(st.st_mode);
}

/* The copies (<ck>.<volume>) in checkpoints/<sandbox>: NULL if there is none. */
static int copy_names(Pool *p, const char *sandbox_id, char ***ret) {
        _cleanup_free_ char *sub = strjoin(POOL_CHECKPOINTS_DIR "/", sandbox_id);
        int r;

        *ret = NULL;
        if (!sub)
                return -ENOMEM;
        r = pool_list_names(p, sub, pool_volume_copy_name_valid, ret);
        return r == -ENOENT ? 0 : r;
}

int pool_volume_copies_remove(Pool *p, const char *sandbox_id, const char *checkpoint_id) {
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_close_ int owner = -EBADF;
        size_t n;
        int r;

        if (!pool_sandbox_id_valid(sandbox_id) || !pool_sandbox_id_valid(checkpoint_id))
                return -EINVAL;
        r = copy_names(p, sandbox_id, &names);
        if (r < 0 || !names || !names[0])
                return r;
        owner = pool_checkpoint_owner_open(p, sandbox_id);
        if (owner < 0)
                return owner == -ENOENT ? 0 : owner;
        n = strlen(checkpoint_id);
        for (char **i = names; *i; i++) {
                int k;
                if (strncmp(*i, checkpoint_id, n) != 0 || (*i)[n] != '.')
                        continue;
                k = pool_remove_entry(p, owner, *i);
                if (k < 0 && r >= 0)
                        r = k;
        }
        return r;
}

int pool_volume_copy_list(Pool *p, const char *sandbox_id, const char *volume_id, char ***ret) {
        _cleanup_strv_free_ char **names = NULL, **copies = NULL;
        size_t n;
        int r;

        if (!pool_sandbox_id_valid(sandbox_id) || !pool_sandbox_id_valid(volume_id) || !ret)
                return -EINVAL;
        *ret = NULL;
        r = copy_names(p, sandbox_id, &names);
        if (r < 0)
                return r;
        n = strlen(volume_id);
        for (char **i = names; i && *i; i++) {
                size_t l = strlen(*i);
                if (l <= n + 1 || (*i)[l - n - 1] != '.' || !streq(*i + l - n, volume_id))
                        continue;
                if (strv_extend(&copies, *i) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(copies);
        return 0;
}

int pool_volume_from_copy(Pool *p, const char *sandbox_id, const char *checkpoint_id, const char *volume_id,
                          uint64_t size_mb) {
        _cleanup_close_ int owner = -EBADF, src = -EBADF, vdfd = -EBADF;
        char name[2 * POOL_SANDBOX_ID_MAX + 2];
        int r;

        r = copy_valid(p, sandbox_id, checkpoint_id, volume_id);
        if (r < 0)
                return r;
        if (size_mb == 0 || size_mb > (UINT64_MAX >> 20))
                return -ERANGE;
        r = pool_volume_copy_name(checkpoint_id, volume_id, name, sizeof name);
        if (r < 0)
                return r;
        owner = pool_checkpoint_owner_open(p, sandbox_id);
        if (owner < 0)
                return owner;
        src = openat(owner, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0)
                return negative_errno();
        vdfd = pool_open_subdir(p, POOL_VOLUMES_DIR);
        if (vdfd < 0)
                return vdfd;
        r = pool_volume_set_aside_at(p, vdfd, volume_id);
        if (r < 0)
                return r;
        r = btrfs_subvol_snapshot(src, vdfd, volume_id, false);
        if (r < 0)
                return r;
        return pool_volume_limit(p, vdfd, volume_id, size_mb, false);
}
