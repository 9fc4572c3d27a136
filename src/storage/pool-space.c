/* SPDX-License-Identifier: MIT */
/* What the pool holds and what it promised (pool.h: PoolSpace): statfs of
 * the pool, and the quota of every sandbox in it, read in one pass (one
 * qgroup tree search for all roots, a stat per sandbox), so that admission
 * costs little even with a thousand sandboxes. The volumes' quotas count
 * as promises like the sandboxes'. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "pool-internal.h"
#include "str-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

static uint64_t add_sat(uint64_t a, uint64_t b) {
        return a + b < a ? UINT64_MAX : a + b;
}

/* The quota and what is left of it of sandboxes/<id> (dfd): 0 if it has neither a
 * limited root nor a disk image (a sandbox made without quota, or half removed). */
static int sandbox_quota(Pool *p, int dfd, const BtrfsQgroup *q, size_t n, uint64_t *ret_quota,
                         uint64_t *ret_left) {
        _cleanup_close_ int root_fd = -EBADF;
        struct stat st;

        *ret_quota = *ret_left = 0;
        if (p->kind == POOL_BTRFS && p->quota) {
                root_fd = openat(dfd, POOL_SANDBOX_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (root_fd >= 0) {
                        const BtrfsQgroup *g;
                        uint64_t id;
                        if (btrfs_subvol_get_id(root_fd, &id) < 0 || !(g = btrfs_qgroup_find(q, n, id)))
                                return 0;
                        *ret_quota = g->max_exclusive;
                        *ret_left = g->max_exclusive - MIN(g->exclusive, g->max_exclusive);
                        return 0;
                }
        }
        /* a vm sandbox: its image's size is its quota */
        if (fstatat(dfd, POOL_SANDBOX_DISK, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
                uint64_t size = (uint64_t) st.st_size, used = (uint64_t) st.st_blocks * 512;
                *ret_quota = size;
                *ret_left = size - MIN(used, size);
        }
        return 0;
}

/* The volumes' quotas (volumes/<id>, pool-volume.c) are promises too: what they may still write. */
static int volumes_add(Pool *p, const BtrfsQgroup *q, size_t n, PoolSpace *s) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int fd;

        if (p->kind != POOL_BTRFS || !p->quota)
                return 0; /* there are none (pool-volume.c) */
        fd = pool_open_subdir(p, POOL_VOLUMES_DIR);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        while ((errno = 0, de = readdir(d))) {
                _cleanup_close_ int vfd = -EBADF;
                const BtrfsQgroup *g;
                uint64_t id;

                if (!pool_sandbox_id_valid(de->d_name))
                        continue;
                vfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (vfd < 0 || btrfs_subvol_get_id(vfd, &id) < 0 || !(g = btrfs_qgroup_find(q, n, id)))
                        continue;
                s->promised_bytes = add_sat(s->promised_bytes, g->max_exclusive);
                s->outstanding_bytes = add_sat(s->outstanding_bytes,
                                               g->max_exclusive - MIN(g->exclusive, g->max_exclusive));
        }
        return errno != 0 ? negative_errno() : 0;
}

int pool_space_read(Pool *p, const char *self_id, PoolSpace *ret) {
        _cleanup_free_ BtrfsQgroup *q = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_close_ int sb_fd = -EBADF;
        struct statvfs sv;
        struct dirent *de;
        PoolSpace s = {};
        size_t n = 0;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!ret)
                return -EINVAL;
        if (statvfs(p->path, &sv) < 0)
                return negative_errno();
        s.size_bytes = (uint64_t) sv.f_blocks * sv.f_frsize;
        s.free_bytes = (uint64_t) sv.f_bavail * sv.f_frsize;

        sb_fd = pool_open_subdir(p, POOL_SANDBOXES_DIR);
        if (sb_fd < 0)
                return sb_fd;
        if (p->kind == POOL_BTRFS && p->quota) {
                r = btrfs_qgroup_all(sb_fd, &q, &n);
                if (r < 0)
                        return r;
                s.quota_known = true;
        }
        d = fdopendir(sb_fd);
        if (!d)
                return negative_errno();
        TAKE_FD(sb_fd);
        while ((errno = 0, de = readdir(d))) {
                _cleanup_close_ int dfd = -EBADF;
                uint64_t quota, left;

                if (!pool_sandbox_id_valid(de->d_name))
                        continue;
                dfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0)
                        continue; /* removed meanwhile, or not a directory */
                (void) sandbox_quota(p, dfd, q, n, &quota, &left);
                if (quota == 0)
                        continue;
                s.quota_known = true;
                if (self_id && streq(de->d_name, self_id)) {
                        s.self_promised_bytes = quota;
                        s.self_outstanding_bytes = left;
                        continue;
                }
                s.promised_bytes = add_sat(s.promised_bytes, quota);
                s.outstanding_bytes = add_sat(s.outstanding_bytes, left);
                s.sandboxes++;
        }
        if (errno != 0)
                return negative_errno();
        r = volumes_add(p, q, n, &s);
        if (r < 0)
                return r;
        *ret = s;
        return 0;
}

int pool_space_sync(Pool *p) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (p->kind != POOL_BTRFS)
                return 0;
        fd = open(p->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        return btrfs_sync(fd);
}
