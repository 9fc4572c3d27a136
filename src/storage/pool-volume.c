/* SPDX-License-Identifier: MIT */
/* Volumes: a tenant's persistent subvolumes at volumes/<id>, each with a
 * qgroup limit of its own (its size), that outlive the sandboxes mounting
 * them. Their files are stored with the ids the sandbox sees (0 = its root):
 * the runtime mounts them idmapped into each sandbox's user namespace, as it
 * does the sandbox's root. btrfs with quotas only: a volume without a quota
 * that holds would be a way around the pool's admission. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "pool-internal.h"

static int volumes_dir(Pool *p, const char *id) {
        int r = pool_usable(p);

        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(id))
                return -EINVAL;
        if (p->kind != POOL_BTRFS || !p->quota)
                return -EOPNOTSUPP;
        return pool_open_subdir(p, POOL_VOLUMES_DIR);
}

int pool_volume_limit(Pool *p, int dfd, const char *id, uint64_t size_mb, bool open_to_all) {
        _cleanup_close_ int fd = openat(dfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        uint64_t subvolid;
        int r = fd < 0 ? negative_errno() : 0;

        if (r >= 0)
                r = btrfs_subvol_get_id(fd, &subvolid);
        if (r >= 0) /* its own limit: a snapshot inherits none it should keep */
                r = btrfs_qgroup_limit_exclusive(fd, BTRFS_QGROUPID(subvolid), size_mb << 20);
        /* root of the sandbox owns it, and every user in it may write there (an E2B
         * sandbox's commands run as "user"); below, files are whoever made them */
        if (r >= 0 && open_to_all && (fchown(fd, 0, 0) < 0 || fchmod(fd, 0777) < 0))
                r = negative_errno();
        if (r < 0) {
                int k = pool_remove_entry(p, dfd, id);
                if (k < 0)
                        log_debug_errno(k, "Failed to undo volume '%s': %m", id);
        }
        return r;
}

int pool_volume_create(Pool *p, const char *id, uint64_t size_mb) {
        _cleanup_close_ int dfd = -EBADF;
        int r;

        if (size_mb == 0 || size_mb > (UINT64_MAX >> 20))
                return -ERANGE;
        dfd = volumes_dir(p, id);
        if (dfd < 0)
                return dfd;
        r = btrfs_subvol_create(dfd, id);
        if (r < 0)
                return r;
        return pool_volume_limit(p, dfd, id, size_mb, true);
}

int pool_volume_clone(Pool *p, const char *src_id, const char *id, uint64_t size_mb, bool read_only) {
        _cleanup_close_ int dfd = -EBADF, src = -EBADF;
        int r;

        if (!pool_sandbox_id_valid(src_id))
                return -EINVAL;
        if (size_mb == 0 || size_mb > (UINT64_MAX >> 20))
                return -ERANGE;
        dfd = volumes_dir(p, id);
        if (dfd < 0)
                return dfd;
        src = openat(dfd, src_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0)
                return negative_errno();
        r = btrfs_subvol_snapshot(src, dfd, id, read_only);
        if (r < 0)
                return r;
        return pool_volume_limit(p, dfd, id, size_mb, false);
}

int pool_volume_set_aside_at(Pool *p, int vdfd, const char *id) {
        char aside[POOL_SANDBOX_ID_MAX + 32];
        struct timespec ts;
        struct stat st;

        if (fstatat(vdfd, id, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        (void) clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(aside, sizeof aside, "%s.stale-%lld", id, (long long) ts.tv_sec);
        if (renameat2(vdfd, id, vdfd, aside, RENAME_NOREPLACE) < 0)
                return negative_errno();
        log_warning("Volume %s: the copy this pool held is stale (the volume moved to another worker); kept as "
                    "%s/%s/%s, remove it when it is not needed", id, p->path, POOL_VOLUMES_DIR, aside);
        return 1;
}

int pool_volume_set_aside(Pool *p, const char *id) {
        _cleanup_close_ int dfd = volumes_dir(p, id);

        if (dfd < 0)
                return dfd;
        return pool_volume_set_aside_at(p, dfd, id);
}

int pool_volume_list(Pool *p, char ***ret) {
        return pool_list_names(p, POOL_VOLUMES_DIR, pool_sandbox_id_valid, ret);
}

int pool_volume_remove(Pool *p, const char *id) {
        _cleanup_close_ int dfd = volumes_dir(p, id);
        struct stat st;

        if (dfd < 0)
                return dfd;
        if (fstatat(dfd, id, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        return pool_remove_entry(p, dfd, id);
}

int pool_volume_open(Pool *p, const char *id, int *ret_fd) {
        _cleanup_close_ int dfd = volumes_dir(p, id);
        int fd;

        if (dfd < 0)
                return dfd;
        if (!ret_fd)
                return -EINVAL;
        fd = openat(dfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        *ret_fd = fd;
        return 0;
}

int pool_volume_path(Pool *p, const char *id, char **ret) {
        char *path;
        int r = pool_usable(p);

        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(id) || !ret)
                return -EINVAL;
        path = pool_subpath(p, POOL_VOLUMES_DIR, id, NULL);
        if (!path)
                return -ENOMEM;
        *ret = path;
        return 0;
}

int pool_volume_usage(Pool *p, const char *id, uint64_t *ret_used_bytes) {
        _cleanup_close_ int fd = -EBADF;
        uint64_t subvolid, referenced, exclusive;
        int r;

        r = pool_volume_open(p, id, &fd);
        if (r < 0)
                return r;
        r = btrfs_subvol_get_id(fd, &subvolid);
        if (r < 0)
                return r;
        r = btrfs_qgroup_get(fd, BTRFS_QGROUPID(subvolid), &referenced, &exclusive);
        if (r < 0)
                return r;
        *ret_used_bytes = exclusive;
        return 0;
}
