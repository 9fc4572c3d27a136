/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <endian.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "spawn.h"
#include "str-util.h"

/* The primary superblock lives at 64 KiB; its magic at offset 0x40 in it. */
#define BTRFS_SUPER_OFFSET 65536
#define BTRFS_SUPER_MAGIC_OFFSET 0x40
#define BTRFS_SUPER_MAGIC_STR "_BHRfS_M"

bool btrfs_is_fs_fd(int fd) {
        struct statfs sfs;
        return fstatfs(fd, &sfs) == 0 && (unsigned long) sfs.f_type == (unsigned long) BTRFS_SUPER_MAGIC;
}

int btrfs_is_subvol_fd(int fd) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode) || st.st_ino != BTRFS_FIRST_FREE_OBJECTID)
                return 0;
        return btrfs_is_fs_fd(fd);
}

bool btrfs_image_has_fs(int fd) {
        char magic[STRLEN(BTRFS_SUPER_MAGIC_STR)];
        ssize_t k = pread(fd, magic, sizeof magic, BTRFS_SUPER_OFFSET + BTRFS_SUPER_MAGIC_OFFSET);
        return k == (ssize_t) sizeof magic && memcmp(magic, BTRFS_SUPER_MAGIC_STR, sizeof magic) == 0;
}

int btrfs_mkfs(const char *path, const char *label) {
        _cleanup_free_ char *mkfs = NULL;
        char out[SPAWN_OUTPUT_MAX];
        int r;

        r = spawn_find_binary("mkfs.btrfs", &mkfs);
        if (r < 0)
                return r;
        char *argv[] = { mkfs, (char *) "-q", (char *) "-L", (char *) label, (char *) path, NULL };
        r = spawn_and_wait(argv, -EBADF, out, sizeof out);
        if (r == -EPROTO) {
                log_debug("mkfs.btrfs '%s' failed: %s", path, out);
                return -EIO;
        }
        return r;
}

/* --- subvolumes --- */

int btrfs_subvol_create(int dirfd, const char *name) {
        struct btrfs_ioctl_vol_args args = {};

        if (strscpy(args.name, sizeof args.name, name) < 0)
                return -ENAMETOOLONG;
        return ioctl(dirfd, BTRFS_IOC_SUBVOL_CREATE, &args) < 0 ? negative_errno() : 0;
}

int btrfs_subvol_snapshot(int src_fd, int dirfd, const char *name, bool readonly) {
        struct btrfs_ioctl_vol_args_v2 args = {
                .fd = src_fd,
                .flags = readonly ? BTRFS_SUBVOL_RDONLY : 0,
        };

        if (strscpy(args.name, sizeof args.name, name) < 0)
                return -ENAMETOOLONG;
        return ioctl(dirfd, BTRFS_IOC_SNAP_CREATE_V2, &args) < 0 ? negative_errno() : 0;
}

int btrfs_subvol_get_id(int fd, uint64_t *ret) {
        struct btrfs_ioctl_ino_lookup_args args = {
                .treeid = 0,
                .objectid = BTRFS_FIRST_FREE_OBJECTID,
        };

        if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &args) < 0)
                return negative_errno();
        *ret = args.treeid;
        return 0;
}

int btrfs_fs_uuid(int fd, char ret[static 37]) {
        struct btrfs_ioctl_fs_info_args args = {};
        const uint8_t *u = args.fsid;

        if (ioctl(fd, BTRFS_IOC_FS_INFO, &args) < 0)
                return negative_errno();
        snprintf(ret, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
                 u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
        return 0;
}

int btrfs_subvol_is_readonly(int fd) {
        uint64_t flags;

        if (ioctl(fd, BTRFS_IOC_SUBVOL_GETFLAGS, &flags) < 0)
                return negative_errno();
        return !!(flags & BTRFS_SUBVOL_RDONLY);
}

int btrfs_subvol_set_readonly(int fd, bool readonly) {
        uint64_t flags;

        if (ioctl(fd, BTRFS_IOC_SUBVOL_GETFLAGS, &flags) < 0)
                return negative_errno();
        flags = readonly ? (flags | BTRFS_SUBVOL_RDONLY) : (flags & ~(uint64_t) BTRFS_SUBVOL_RDONLY);
        return ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags) < 0 ? negative_errno() : 0;
}

/* --- tree search --- */

typedef int (*BtrfsItemFn)(const struct btrfs_ioctl_search_header *h, const uint8_t *item, void *userdata);

/* Calls fn for every item of the given type with objectid and offset in the
 * ranges, in key order. A positive return of fn stops the walk (and is returned). */
static int btrfs_tree_search(int fd, uint64_t tree, uint64_t min_objectid, uint64_t max_objectid, uint32_t type,
                             uint64_t min_offset, uint64_t max_offset, BtrfsItemFn fn, void *userdata) {
        struct btrfs_ioctl_search_args args = {
                .key = {
                        .tree_id = tree,
                        .min_objectid = min_objectid,
                        .max_objectid = max_objectid,
                        .min_type = type,
                        .max_type = type,
                        .min_offset = min_offset,
                        .max_offset = max_offset,
                        .min_transid = 0,
                        .max_transid = UINT64_MAX,
                },
        };

        for (;;) {
                struct btrfs_ioctl_search_header h = {};
                size_t pos = 0;

                args.key.nr_items = BTRFS_SEARCH_BATCH;
                if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &args) < 0)
                        return negative_errno();
                if (args.key.nr_items == 0)
                        return 0;

                for (uint32_t i = 0; i < args.key.nr_items; i++) {
                        if (pos + sizeof h > sizeof args.buf)
                                return -EBADMSG;
                        memcpy(&h, args.buf + pos, sizeof h);
                        pos += sizeof h;
                        if (h.len > sizeof args.buf - pos)
                                return -EBADMSG;
                        /* The search range is a slice of the full key space: filter. */
                        if (h.type == type && h.objectid >= min_objectid && h.objectid <= max_objectid &&
                            h.offset >= min_offset && h.offset <= max_offset) {
                                int r = fn(&h, (const uint8_t *) args.buf + pos, userdata);
                                if (r != 0)
                                        return r;
                        }
                        pos += h.len;
                }

                /* Continue after the last key returned. */
                if (h.offset < UINT64_MAX)
                        args.key.min_offset = h.offset + 1, args.key.min_type = h.type, args.key.min_objectid = h.objectid;
                else if (h.type < UINT8_MAX)
                        args.key.min_offset = 0, args.key.min_type = h.type + 1, args.key.min_objectid = h.objectid;
                else if (h.objectid < UINT64_MAX)
                        args.key.min_offset = 0, args.key.min_type = 0, args.key.min_objectid = h.objectid + 1;
                else
                        return 0;
                if (args.key.min_objectid > max_objectid)
                        return 0;
                /* min_type/min_offset only bound the first objectid of the range: a new
                 * objectid starts again at the requested type. */
                if (args.key.min_type > type) {
                        if (args.key.min_objectid == UINT64_MAX)
                                return 0;
                        args.key.min_objectid++;
                        args.key.min_type = type;
                        args.key.min_offset = min_offset;
                }
        }
}

typedef struct IdArray {
        uint64_t *ids;
        size_t n, allocated;
} IdArray;

static int push_offset(const struct btrfs_ioctl_search_header *h, const uint8_t *item, void *userdata) {
        IdArray *a = userdata;
        if (GREEDY_REALLOC(a->ids, a->allocated, a->n + 1) < 0)
                return -ENOMEM;
        a->ids[a->n++] = h->offset;
        return 0;
}

static int found(const struct btrfs_ioctl_search_header *h, const uint8_t *item, void *userdata) {
        return 1;
}

int btrfs_subvol_exists(int fd, uint64_t subvolid) {
        return btrfs_tree_search(fd, BTRFS_ROOT_TREE_OBJECTID, subvolid, subvolid, BTRFS_ROOT_ITEM_KEY, 0,
                                 UINT64_MAX, found, NULL);
}

int btrfs_subvol_children(int fd, uint64_t subvolid, uint64_t **ret_ids, size_t *ret_n) {
        IdArray a = {};
        int r;

        /* (parent, ROOT_REF, child) in the tree of tree roots. */
        r = btrfs_tree_search(fd, BTRFS_ROOT_TREE_OBJECTID, subvolid, subvolid, BTRFS_ROOT_REF_KEY, 0, UINT64_MAX,
                              push_offset, &a);
        if (r < 0) {
                free(a.ids);
                return r;
        }
        *ret_ids = a.ids;
        *ret_n = a.n;
        return 0;
}

static int btrfs_destroy(int dirfd, const char *name, uint64_t subvolid) {
        struct btrfs_ioctl_vol_args_v2 args = {};

        if (name) {
                if (strscpy(args.name, sizeof args.name, name) < 0)
                        return -ENAMETOOLONG;
        } else {
                args.flags = BTRFS_SUBVOL_SPEC_BY_ID;
                args.subvolid = subvolid;
        }
        return ioctl(dirfd, BTRFS_IOC_SNAP_DESTROY_V2, &args) < 0 ? negative_errno() : 0;
}

/* Removes the level-0 qgroup of a subvolume that is gone, only once its numbers
 * (as of the last commit) are zero: the kernel marks every qgroup of the pool
 * inconsistent when one with numbers is removed, and quotas stop holding
 * until a full rescan. -EBUSY: not now (its subvolume is still being
 * dropped, or its numbers are not zero yet); a later sweep tries again. */
static int btrfs_qgroup_remove_if_empty(int fd, uint64_t qgroupid) {
        uint64_t referenced = 0, exclusive = 0;
        int r;

        r = btrfs_qgroup_get(fd, qgroupid, &referenced, &exclusive);
        if (r < 0 && r != -ENOENT)
                return r;
        if (referenced != 0 || exclusive != 0)
                return -EBUSY;
        return btrfs_qgroup_remove(fd, qgroupid);
}

/* Best effort: newer kernels refuse (-EBUSY) until the cleaner has dropped the
 * subvolume and then remove the qgroup themselves; the stale sweep at pool open
 * catches what older kernels keep. */
static void btrfs_qgroup_forget(int fd, uint64_t subvolid) {
        (void) btrfs_qgroup_remove_if_empty(fd, BTRFS_QGROUPID(subvolid));
}

static int btrfs_remove_nested(int fd, uint64_t subvolid, unsigned depth) {
        _cleanup_free_ uint64_t *ids = NULL;
        size_t n = 0;
        int r;

        if (depth >= BTRFS_NESTED_DEPTH_MAX)
                return -ELOOP;
        r = btrfs_subvol_children(fd, subvolid, &ids, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                r = btrfs_remove_nested(fd, ids[i], depth + 1);
                if (r < 0)
                        return r;
                r = btrfs_destroy(fd, NULL, ids[i]);
                if (r < 0 && r != -ENOENT)
                        return r;
                btrfs_qgroup_forget(fd, ids[i]);
        }
        return 0;
}

int btrfs_subvol_remove(int dirfd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        uint64_t id;
        int r;

        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = btrfs_is_subvol_fd(fd);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOTTY;
        r = btrfs_subvol_get_id(fd, &id);
        if (r < 0)
                return r;
        r = btrfs_remove_nested(fd, id, 0);
        if (r < 0)
                return r;

        r = btrfs_destroy(dirfd, name, 0);
        if (r == -EPERM || r == -EROFS || r == -EACCES) {
                /* Kernels that refuse to delete a read-only subvolume: clear the flag first. */
                if (btrfs_subvol_is_readonly(fd) > 0 && btrfs_subvol_set_readonly(fd, false) >= 0)
                        r = btrfs_destroy(dirfd, name, 0);
        }
        if (r < 0)
                return r;
        btrfs_qgroup_forget(dirfd, id);
        return 0;
}

int btrfs_sync(int fd) {
        return ioctl(fd, BTRFS_IOC_SYNC) < 0 ? negative_errno() : 0;
}

/* --- quota groups --- */

int btrfs_quota_enable(int fd) {
        struct btrfs_ioctl_quota_ctl_args args = { .cmd = BTRFS_QUOTA_CTL_ENABLE };

        if (btrfs_quota_enabled(fd) > 0)
                return 0;
        return ioctl(fd, BTRFS_IOC_QUOTA_CTL, &args) < 0 ? negative_errno() : 0;
}

int btrfs_quota_enabled(int fd) {
        int r = btrfs_tree_search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, 0, BTRFS_QGROUP_STATUS_KEY, 0, UINT64_MAX,
                                  found, NULL);
        if (r == -ENOENT)
                return 0; /* no quota tree */
        return r;
}

int btrfs_qgroup_limit_exclusive(int fd, uint64_t qgroupid, uint64_t bytes) {
        struct btrfs_ioctl_qgroup_limit_args args = {
                .qgroupid = qgroupid,
                .lim = {
                        .flags = BTRFS_QGROUP_LIMIT_MAX_EXCL,
                        .max_excl = bytes > 0 ? bytes : UINT64_MAX,
                },
        };

        return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &args) < 0 ? negative_errno() : 0;
}

typedef struct QgroupInfo {
        uint64_t referenced, exclusive;
} QgroupInfo;

static int read_qgroup_info(const struct btrfs_ioctl_search_header *h, const uint8_t *item, void *userdata) {
        struct btrfs_qgroup_info_item qi;
        QgroupInfo *info = userdata;

        if (h->len < sizeof qi)
                return -EBADMSG;
        memcpy(&qi, item, sizeof qi);
        info->referenced = le64toh(qi.rfer);
        info->exclusive = le64toh(qi.excl);
        return 1;
}

int btrfs_qgroup_get(int fd, uint64_t qgroupid, uint64_t *ret_referenced, uint64_t *ret_exclusive) {
        QgroupInfo info = {};
        int r;

        r = btrfs_tree_search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, 0, BTRFS_QGROUP_INFO_KEY, qgroupid, qgroupid,
                              read_qgroup_info, &info);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        if (ret_referenced)
                *ret_referenced = info.referenced;
        if (ret_exclusive)
                *ret_exclusive = info.exclusive;
        return 0;
}

static int read_qgroup_limit(const struct btrfs_ioctl_search_header *h, const uint8_t *item, void *userdata) {
        struct btrfs_qgroup_limit_item li;
        uint64_t *excl = userdata;

        if (h->len < sizeof li)
                return -EBADMSG;
        memcpy(&li, item, sizeof li);
        *excl = (le64toh(li.flags) & BTRFS_QGROUP_LIMIT_MAX_EXCL) && le64toh(li.max_excl) != UINT64_MAX
                        ? le64toh(li.max_excl)
                        : 0;
        return 1;
}

int btrfs_qgroup_limit_exclusive_get(int fd, uint64_t qgroupid, uint64_t *ret_bytes) {
        uint64_t excl = 0;
        int r;

        r = btrfs_tree_search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, 0, BTRFS_QGROUP_LIMIT_KEY, qgroupid, qgroupid,
                              read_qgroup_limit, &excl);
        if (r < 0)
                return r;
        *ret_bytes = excl; /* no limit item: no limit */
        return 0;
}

typedef struct QgroupArray {
        BtrfsQgroup *q;
        size_t n, allocated;
        size_t at; /* the limit pass: where the next id is looked for */
} QgroupArray;

static int push_qgroup_info(const struct btrfs_ioctl_search_header *h, const uint8_t *item, void *userdata) {
        struct btrfs_qgroup_info_item qi;
        QgroupArray *a = userdata;

        if (h->len < sizeof qi)
                return -EBADMSG;
        memcpy(&qi, item, sizeof qi);
        if (GREEDY_REALLOC(a->q, a->allocated, a->n + 1) < 0)
                return -ENOMEM;
        a->q[a->n++] = (BtrfsQgroup){ .id = h->offset, .exclusive = le64toh(qi.excl) };
        return 0;
}

static int set_qgroup_limit(const struct btrfs_ioctl_search_header *h, const uint8_t *item, void *userdata) {
        struct btrfs_qgroup_limit_item li;
        QgroupArray *a = userdata;

        if (h->len < sizeof li)
                return -EBADMSG;
        memcpy(&li, item, sizeof li);
        /* both passes walk the ids in order: the limit's info item is at or after the last one's */
        while (a->at < a->n && a->q[a->at].id < h->offset)
                a->at++;
        if (a->at < a->n && a->q[a->at].id == h->offset)
                a->q[a->at].max_exclusive = (le64toh(li.flags) & BTRFS_QGROUP_LIMIT_MAX_EXCL) &&
                                                            le64toh(li.max_excl) != UINT64_MAX
                                                    ? le64toh(li.max_excl)
                                                    : 0;
        return 0;
}

int btrfs_qgroup_all(int fd, BtrfsQgroup **ret, size_t *ret_n) {
        QgroupArray a = {};
        int r;

        if (!ret || !ret_n)
                return -EINVAL;
        r = btrfs_tree_search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, 0, BTRFS_QGROUP_INFO_KEY, 0, (UINT64_C(1) << 48) - 1,
                              push_qgroup_info, &a);
        if (r >= 0)
                r = btrfs_tree_search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, 0, BTRFS_QGROUP_LIMIT_KEY, 0,
                                      (UINT64_C(1) << 48) - 1, set_qgroup_limit, &a);
        if (r < 0) {
                free(a.q);
                return r;
        }
        *ret = a.q;
        *ret_n = a.n;
        return 0;
}

const BtrfsQgroup *btrfs_qgroup_find(const BtrfsQgroup *q, size_t n, uint64_t id) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (q[mid].id == id)
                        return &q[mid];
                if (q[mid].id < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

int btrfs_qgroup_remove(int fd, uint64_t qgroupid) {
        struct btrfs_ioctl_qgroup_create_args args = { .create = 0, .qgroupid = qgroupid };

        return ioctl(fd, BTRFS_IOC_QGROUP_CREATE, &args) < 0 ? negative_errno() : 0;
}

int btrfs_qgroup_list(int fd, uint64_t **ret_ids, size_t *ret_n) {
        IdArray a = {};
        int r;

        /* Level-0 qgroup ids are the subvolume ids: the top 16 bits are 0. */
        r = btrfs_tree_search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, 0, BTRFS_QGROUP_INFO_KEY, 0, (UINT64_C(1) << 48) - 1,
                              push_offset, &a);
        if (r < 0) {
                free(a.ids);
                return r;
        }
        *ret_ids = a.ids;
        *ret_n = a.n;
        return 0;
}

int btrfs_qgroup_remove_stale(int fd) {
        _cleanup_free_ uint64_t *ids = NULL;
        size_t n = 0;
        int r, removed = 0;

        /* a commit first: the numbers the removal checks are then the
         * in-memory ones, not those of a transaction still open */
        r = btrfs_sync(fd);
        if (r < 0)
                return r;
        r = btrfs_qgroup_list(fd, &ids, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (ids[i] < BTRFS_FIRST_FREE_OBJECTID)
                        continue; /* the top level (5) */
                r = btrfs_subvol_exists(fd, ids[i]);
                if (r != 0)
                        continue;
                if (btrfs_qgroup_remove_if_empty(fd, ids[i]) >= 0)
                        removed++;
        }
        return removed;
}
