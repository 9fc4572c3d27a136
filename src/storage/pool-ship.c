/* SPDX-License-Identifier: MIT */
/* Shipping templates and checkpoints between pools as btrfs send streams:
 * see pool.h. The streams are made and applied by btrfs-progs (`btrfs send`,
 * `btrfs receive`); this file picks the subvolumes, names the parents, and
 * moves a verified receive into place. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "pool-internal.h"
#include "spawn.h"
#include "str-util.h"

#define SHIP_RECV_PREFIX POOL_SHIP_RECV_PREFIX
#define SHIP_RECV_SUFFIX_LEN 12U

int pool_attach(const char *path, Pool **ret) {
        _cleanup_(pool_freep) Pool *p = NULL;
        _cleanup_close_ int fd = -EBADF;

        if (isempty(path) || !ret)
                return -EINVAL;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (!btrfs_is_fs_fd(fd))
                return -EMEDIUMTYPE;
        p = new0(Pool, 1);
        if (!p)
                return -ENOMEM;
        p->kind = POOL_BTRFS;
        p->path = realpath(path, NULL);
        if (!p->path)
                return negative_errno();
        p->quota = btrfs_quota_enabled(fd) > 0;
        *ret = TAKE_PTR(p);
        return 0;
}

static int item_valid(const Pool *p, const PoolShipItem *it) {
        int r = pool_usable(p);
        if (r < 0)
                return r;
        if (p->kind != POOL_BTRFS)
                return -EOPNOTSUPP;
        if (!it || !it->name)
                return -EINVAL;
        if (it->sandbox_id)
                return pool_sandbox_id_valid(it->sandbox_id) &&
                                       (pool_sandbox_id_valid(it->name) || pool_volume_copy_name_valid(it->name))
                               ? 0
                               : -EINVAL;
        return pool_template_name_valid(it->name) ? 0 : -EINVAL;
}

/* The directory the item lives in: templates/ or checkpoints/<sandbox>/
 * (made, mode 0700, if create). */
static int open_parent(Pool *p, const PoolShipItem *it, bool create) {
        _cleanup_close_ int fd = -EBADF;
        int owner_fd;

        if (!it->sandbox_id)
                return pool_open_subdir(p, POOL_TEMPLATES_DIR);
        fd = pool_open_subdir(p, POOL_CHECKPOINTS_DIR);
        if (fd < 0)
                return fd;
        if (create && mkdirat(fd, it->sandbox_id, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        owner_fd = openat(fd, it->sandbox_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return owner_fd < 0 ? negative_errno() : owner_fd;
}

static bool uuid_is_null(const uint8_t u[BTRFS_UUID_SIZE]) {
        for (size_t i = 0; i < BTRFS_UUID_SIZE; i++)
                if (u[i])
                        return false;
        return true;
}

static void uuid_format(const uint8_t u[BTRFS_UUID_SIZE], char *buf) {
        snprintf(buf, POOL_UUID_STRING_MAX,
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
                 u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* Opens the item's subvolume and reads what it is. -ENOENT if it is not a
 * complete (read-only) subvolume. */
static int open_item(Pool *p, const PoolShipItem *it, struct btrfs_ioctl_get_subvol_info_args *ret_info) {
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;
        int r;

        r = item_valid(p, it);
        if (r < 0)
                return r;
        dfd = open_parent(p, it, false);
        if (dfd < 0)
                return dfd;
        fd = openat(dfd, it->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (btrfs_is_subvol_fd(fd) <= 0)
                return -ENOENT;
        *ret_info = (struct btrfs_ioctl_get_subvol_info_args){};
        if (ioctl(fd, BTRFS_IOC_GET_SUBVOL_INFO, ret_info) < 0)
                return negative_errno();
        if (btrfs_subvol_is_readonly(fd) <= 0)
                return -ENOENT; /* not complete */
        return TAKE_FD(fd);
}

int pool_ship_ident(Pool *p, const PoolShipItem *it, char **ret_path, char *ret_ident, int64_t *ret_otime_usec) {
        struct btrfs_ioctl_get_subvol_info_args info;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *path = NULL;

        if (!ret_path || !ret_ident)
                return -EINVAL;
        fd = open_item(p, it, &info);
        if (fd < 0)
                return fd;
        path = it->sandbox_id ? pool_subpath(p, POOL_CHECKPOINTS_DIR, it->sandbox_id, it->name)
                              : pool_subpath(p, POOL_TEMPLATES_DIR, it->name, NULL);
        if (!path)
                return -ENOMEM;
        uuid_format(uuid_is_null(info.received_uuid) ? info.uuid : info.received_uuid, ret_ident);
        if (ret_otime_usec)
                *ret_otime_usec = (int64_t) info.otime.sec * 1000000 + info.otime.nsec / 1000;
        *ret_path = TAKE_PTR(path);
        return 0;
}

int pool_ship_has(Pool *p, const PoolShipItem *it, const char *ident) {
        struct btrfs_ioctl_get_subvol_info_args info;
        _cleanup_close_ int fd = -EBADF;
        char a[POOL_UUID_STRING_MAX], b[POOL_UUID_STRING_MAX];

        if (isempty(ident))
                return 0;
        fd = open_item(p, it, &info);
        if (fd < 0)
                return fd == -ENOENT ? 0 : fd;
        uuid_format(info.uuid, a);
        uuid_format(info.received_uuid, b);
        return streq(a, ident) || (!uuid_is_null(info.received_uuid) && streq(b, ident));
}

int pool_ship_receive_start(Pool *p, int in_fd, int err_fd, char **ret_dir, pid_t *ret_pid) {
        _cleanup_free_ char *btrfs = NULL, *name = NULL, *dir = NULL;
        _cleanup_close_ int tmp_fd = -EBADF, null_fd = -EBADF;
        char suffix[SHIP_RECV_SUFFIX_LEN + 1];
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (p->kind != POOL_BTRFS)
                return -EOPNOTSUPP;
        if (in_fd < 0 || !ret_dir || !ret_pid)
                return -EINVAL;
        r = spawn_find_binary("btrfs", &btrfs);
        if (r < 0)
                return r;
        r = random_alnum(suffix, SHIP_RECV_SUFFIX_LEN);
        if (r < 0)
                return r;
        name = strjoin(SHIP_RECV_PREFIX, suffix);
        dir = name ? pool_subpath(p, POOL_TMP_DIR, name, NULL) : NULL;
        if (!dir)
                return -ENOMEM;
        tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        if (tmp_fd < 0)
                return tmp_fd;
        if (mkdirat(tmp_fd, name, 0700) < 0)
                return negative_errno();
        null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (null_fd < 0)
                r = negative_errno();
        else {
                /* -q: quiet; --chroot: the stream's paths cannot lead out of dir
                 * (its parent is still found by uuid anywhere in the pool); every
                 * error ends the receive (the default --max-errors 1) */
                char *argv[] = { btrfs, (char *) "receive", (char *) "-q", (char *) "--chroot", (char *) "--", dir,
                                 NULL };
                r = spawn_start(argv, in_fd, null_fd, err_fd, ret_pid);
        }
        if (r < 0) {
                (void) pool_ship_remove_dir(p, tmp_fd, name);
                return r;
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

/* dir must be tmp/recv.<suffix>: its name in tmp/. */
static const char *recv_name(const Pool *p, const char *dir) {
        const char *rest = startswith(dir, p->path), *name;

        if (!rest || !(rest = startswith(rest, "/" POOL_TMP_DIR "/")))
                return NULL;
        name = startswith(rest, SHIP_RECV_PREFIX);
        if (!name || strlen(name) != SHIP_RECV_SUFFIX_LEN || strchr(name, '/'))
                return NULL;
        return rest;
}

int pool_ship_remove_dir(const Pool *p, int tmp_fd, const char *name) {
        _cleanup_(closedirp_) DIR *d = NULL;
        int fd, r = 0;

        fd = openat(tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        /* the subvolume(s) a receive made, then the directory */
        r = pool_remove_entries(p, d);
        if (r < 0)
                return r;
        if (unlinkat(tmp_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

int pool_ship_receive_abort(Pool *p, const char *dir) {
        _cleanup_close_ int tmp_fd = -EBADF;
        const char *name;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!dir || !(name = recv_name(p, dir)))
                return -EINVAL;
        tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        if (tmp_fd < 0)
                return tmp_fd;
        r = pool_ship_remove_dir(p, tmp_fd, name);
        if (r >= 0)
                (void) btrfs_sync(tmp_fd); /* the cleaner drops the subvolume now, not in ~30 s */
        return r;
}

/* Moves dfd/name (a read-only subvolume) to to_fd/to_name. btrfs refuses to
 * rename a read-only subvolume (EROFS): it is made writable for the rename
 * only (it sits in our tmp/ meanwhile; its received uuid stays). */
static int move_readonly(int fd, int dfd, const char *name, int to_fd, const char *to_name) {
        int r;

        r = btrfs_subvol_set_readonly(fd, false);
        if (r < 0)
                return r;
        r = renameat2(dfd, name, to_fd, to_name, RENAME_NOREPLACE) < 0 ? negative_errno() : 0;
        if (btrfs_subvol_set_readonly(fd, true) < 0 && r >= 0)
                r = -EIO;
        return r;
}

static int commit_one(Pool *p, int recv_fd, const PoolShipItem *it) {
        struct btrfs_ioctl_get_subvol_info_args info = {};
        _cleanup_(closedirp_) DIR *d = NULL;
        _cleanup_close_ int fd = -EBADF, to_fd = -EBADF;
        struct dirent *de;
        unsigned n = 0;
        int dfd;

        dfd = fcntl(recv_fd, F_DUPFD_CLOEXEC, 3);
        if (dfd < 0)
                return negative_errno();
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        while ((errno = 0, de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        if (errno != 0)
                return negative_errno();
        if (n != 1) {
                log_debug("The stream made %u entries, not one", n);
                return -EBADMSG;
        }
        fd = openat(recv_fd, it->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                log_debug_errno(negative_errno(), "The stream did not make '%s': %m", it->name);
                return -EBADMSG;
        }
        if (btrfs_is_subvol_fd(fd) <= 0 || ioctl(fd, BTRFS_IOC_GET_SUBVOL_INFO, &info) < 0 ||
            btrfs_subvol_is_readonly(fd) <= 0 || uuid_is_null(info.received_uuid)) {
                log_debug("The stream's '%s' is not a finished received subvolume", it->name);
                return -EBADMSG;
        }
        to_fd = open_parent(p, it, true);
        if (to_fd < 0)
                return to_fd;
        return move_readonly(fd, recv_fd, it->name, to_fd, it->name);
}

int pool_ship_receive_commit(Pool *p, const char *dir, const PoolShipItem *it) {
        _cleanup_close_ int tmp_fd = -EBADF, recv_fd = -EBADF;
        const char *name;
        int r, k;

        r = item_valid(p, it);
        if (r < 0)
                return r;
        if (!dir || !(name = recv_name(p, dir)))
                return -EINVAL;
        tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        if (tmp_fd < 0)
                return tmp_fd;
        recv_fd = openat(tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (recv_fd < 0)
                return negative_errno();
        r = commit_one(p, recv_fd, it);
        k = pool_ship_remove_dir(p, tmp_fd, name);
        if (k < 0)
                log_debug_errno(k, "Failed to remove '%s' (removed at the next open): %m", dir);
        return r;
}
