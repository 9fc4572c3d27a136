/* SPDX-License-Identifier: MIT */
/* A sandbox root's quota and usage as the kernel enforces them, for what
 * statfs() shows inside (statfs-notify.h): read from the qgroup's sysfs
 * directory, which the kernel keeps current between transaction commits
 * (reservations included), at a few microseconds a read. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "pool-internal.h"
#include "str-util.h"

#define QGROUP_SYSFS_VALUE_MAX 32u /* a u64 in decimal and a newline */
#define QGROUP_LIMIT_MAX_EXCL (UINT64_C(1) << 1) /* BTRFS_QGROUP_LIMIT_MAX_EXCL */

int pool_sandbox_quota_open(Pool *p, const char *id, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF, dfd = -EBADF;
        char uuid[37], path[128];
        uint64_t subvolid;
        int r;

        if (!ret_fd)
                return -EINVAL;
        r = pool_sandbox_quota_root(p, id, &fd, &subvolid);
        if (r < 0)
                return r;
        r = btrfs_fs_uuid(fd, uuid);
        if (r < 0)
                return r;
        snprintf(path, sizeof path, "/sys/fs/btrfs/%s/qgroups/0_%" PRIu64, uuid, subvolid);
        dfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return errno == ENOENT ? -EOPNOTSUPP : negative_errno(); /* a kernel before 5.9 */
        *ret_fd = TAKE_FD(dfd);
        return 0;
}

int pool_sandbox_set_quota(Pool *p, const char *id, uint64_t disk_mb) {
        _cleanup_close_ int fd = -EBADF;
        uint64_t subvolid;
        int r;

        if (disk_mb > (UINT64_MAX >> 20))
                return -ERANGE;
        r = pool_sandbox_quota_root(p, id, &fd, &subvolid);
        if (r < 0)
                return r;
        return btrfs_qgroup_limit_exclusive(fd, BTRFS_QGROUPID(subvolid), disk_mb << 20);
}

static int read_u64_at(int dfd, const char *name, uint64_t *ret) {
        _cleanup_close_ int fd = -EBADF;
        char buf[QGROUP_SYSFS_VALUE_MAX + 1];
        ssize_t n;
        char *nl;

        fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, QGROUP_SYSFS_VALUE_MAX);
        if (n < 0)
                return negative_errno();
        buf[n] = 0;
        nl = strchr(buf, '\n');
        if (nl)
                *nl = 0;
        return safe_atou64(buf, ret);
}

int pool_quota_read(int dfd, uint64_t *ret_limit_bytes, uint64_t *ret_used_bytes) {
        static const char *const reserved[] = { "rsv_data", "rsv_meta_pertrans", "rsv_meta_prealloc" };
        uint64_t flags, limit, used, v;
        int r;

        r = read_u64_at(dfd, "limit_flags", &flags);
        if (r >= 0)
                r = read_u64_at(dfd, "max_exclusive", &limit);
        if (r >= 0)
                r = read_u64_at(dfd, "exclusive", &used);
        if (r < 0)
                return r;
        /* the limit is checked against exclusive bytes plus what is reserved for writes not yet
         * committed (btrfs qgroup_check_limits): the same sum, so `df` moves as soon as data is written */
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (read_u64_at(dfd, reserved[i], &v) >= 0 && used + v >= used)
                        used += v;
        *ret_limit_bytes = (flags & QGROUP_LIMIT_MAX_EXCL) ? limit : 0;
        *ret_used_bytes = used;
        return 0;
}
