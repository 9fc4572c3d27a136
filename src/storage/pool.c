/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "loop.h"
#include "mountinfo.h"
#include "overlay.h"
#include "pool-internal.h"
#include "str-util.h"

#define POOL_IMAGE_NAME "pool.img"
#define POOL_MOUNT_NAME "pool"
#define POOL_FS_LABEL "space-pool"
#define POOL_LOCK_NAME "pool.lock"
/* a sandbox's last mount namespace may let go of the pool a moment after its
 * processes are reaped: an unmount that finds the pool busy is tried again */
#define POOL_UMOUNT_BUSY_TRIES 100 /* 10 s: a loaded host can hold a just-closed mount a while */
#define POOL_UMOUNT_BUSY_SLEEP_MSEC 100

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

static const char *const pool_kind_table[_POOL_KIND_MAX] = {
        [POOL_BTRFS] = "btrfs",
        [POOL_OVERLAY] = "overlay",
};

const char *pool_kind_to_string(PoolKind k) {
        return k >= 0 && k < _POOL_KIND_MAX ? pool_kind_table[k] : NULL;
}

PoolKind pool_kind_from_string(const char *s) {
        for (int k = 0; k < _POOL_KIND_MAX; k++)
                if (s && streq(s, pool_kind_table[k]))
                        return (PoolKind) k;
        return _POOL_KIND_INVALID;
}

int pool_usable(const Pool *p) {
        if (!p)
                return -EINVAL;
        return p->released ? -ESTALE : 0;
}

char *pool_subpath(const Pool *p, const char *a, const char *b, const char *c) {
        if (!b)
                return strjoin(p->path, "/", a);
        if (!c)
                return strjoin(p->path, "/", a, "/", b);
        return strjoin(p->path, "/", a, "/", b, "/", c);
}

int pool_open_subdir(const Pool *p, const char *sub) {
        _cleanup_free_ char *path = pool_subpath(p, sub, NULL, NULL);
        int fd;

        if (!path)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

int pool_remove_entry(const Pool *p, int dirfd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *path = NULL;
        char fdpath[64];
        struct stat st;
        int r;

        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_PATH);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        /* a symlink is removed itself: the path of its fd resolves to its target, which may
         * be anywhere (never a tree to remove) */
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISLNK(st.st_mode))
                return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? negative_errno() : 0;
        snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
        path = realpath(fdpath, NULL);
        if (!path)
                return negative_errno();
        if (p->kind == POOL_BTRFS) {
                r = btrfs_subvol_remove(dirfd, name);
                /* the kernel refuses while a send reads it: the removal wins */
                if (r == -EPERM && pool_ship_sends_cancel(path) > 0)
                        r = btrfs_subvol_remove(dirfd, name);
                if (r != -ENOTTY && r != -ENOTDIR)
                        return r == -ENOENT ? 0 : r;
        }
        /* A plain directory or file: remove the tree (rm_rf does not cross mounts). */
        return rm_rf(path);
}

int pool_remove_entries(const Pool *p, DIR *d) {
        struct dirent *de;
        int r = 0;

        while ((errno = 0, de = readdir(d))) {
                int k;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                k = pool_remove_entry(p, dirfd(d), de->d_name);
                if (k < 0 && r >= 0)
                        r = k;
        }
        if (errno != 0 && r >= 0)
                r = negative_errno();
        return r;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int pool_list_names(const Pool *p, const char *sub, bool (*valid)(const char *), char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        size_t n = 0;
        int fd, r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        fd = pool_open_subdir(p, sub);
        if (fd < 0)
                return fd;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        l = new0(char *, 1);
        if (!l)
                return -ENOMEM;
        while ((errno = 0, de = readdir(d))) {
                if (!valid(de->d_name))
                        continue;
                r = strv_extend(&l, de->d_name);
                if (r < 0)
                        return r;
                n++;
        }
        if (errno != 0)
                return negative_errno();
        qsort(l, n, sizeof *l, cmp_str);
        *ret = TAKE_PTR(l);
        return 0;
}

Pool *pool_free(Pool *p) {
        if (!p)
                return NULL;
        free(p->path);
        free(p->image);
        free(p->loop);
        pool_spares_free(p);
        return mfree(p);
}

bool pool_has_quota(const Pool *p) {
        return p && p->kind == POOL_BTRFS && p->quota;
}

PoolKind pool_kind(const Pool *p) {
        return p ? p->kind : _POOL_KIND_INVALID;
}

const char *pool_mount_path(const Pool *p) {
        return p ? p->path : NULL;
}

/* Creates (or fixes the mode of) <pool>/<name>. */
static int pool_make_dir(const char *pool, const char *name, mode_t mode) {
        _cleanup_free_ char *path = name ? strjoin(pool, "/", name) : strdup(pool);
        _cleanup_close_ int fd = -EBADF;

        if (!path)
                return -ENOMEM;
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return negative_errno();
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        /* Templates keep their image's ids (a uid 1000 or a setuid root file in
         * them means nothing on the host): only root may walk into the pool. */
        if (fchmod(fd, mode) < 0)
                return negative_errno();
        return 0;
}

/* Removes what crashed imports left in tmp/. */
static void pool_clean_tmp(Pool *p) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int fd;

        fd = pool_open_subdir(p, POOL_TMP_DIR);
        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d))) {
                int r;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (startswith(de->d_name, POOL_SHIP_RECV_PREFIX) && p->kind == POOL_BTRFS)
                        r = pool_ship_remove_dir(p, dirfd(d), de->d_name); /* a receive cut short */
                else
                        r = pool_remove_entry(p, dirfd(d), de->d_name);
                if (r < 0)
                        log_debug_errno(r, "Failed to remove stale import '%s': %m", de->d_name);
        }
}

static int pool_setup_layout(Pool *p, bool own_root) {
        static const struct {
                const char *name;
                mode_t mode;
        } dirs[] = {
                { POOL_TEMPLATES_DIR, 0700 },
                { POOL_SANDBOXES_DIR, 0700 },
                { POOL_CHECKPOINTS_DIR, 0700 },
                { POOL_TMP_DIR, 0700 },
                { POOL_LAYERS_DIR, 0700 },
                { POOL_VOLUMES_DIR, 0700 },
        };
        int r;

        if (own_root) {
                r = pool_make_dir(p->path, NULL, 0700);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                r = pool_make_dir(p->path, dirs[i].name, dirs[i].mode);
                if (r < 0)
                        return r;
        }
        pool_clean_tmp(p);
        return 0;
}

static int pool_setup_quota(Pool *p) {
        _cleanup_close_ int fd = open(p->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r;

        if (fd < 0)
                return negative_errno();
        r = btrfs_quota_enable(fd);
        if (r < 0)
                return r;
        p->quota = true;
        r = btrfs_qgroup_remove_stale(fd);
        if (r > 0)
                log_debug("Removed %d stale qgroups in '%s'", r, p->path);
        return 0;
}

/* The pool is an image file we format, loop-attach and mount at mount_path;
 * an existing mount there (after a restart) is reused. */
static int pool_attach_image(Pool *p, const char *image, const char *mount_path, uint64_t size_mb) {
        _cleanup_free_ char *fstype = NULL, *source = NULL, *dev = NULL;
        _cleanup_close_ int img_fd = -EBADF, dev_fd = -EBADF;
        bool created = false;
        struct stat st;
        int r;

        if (mkdir(mount_path, 0700) < 0 && errno != EEXIST)
                return negative_errno();

        r = mountinfo_lookup(mount_path, &fstype, &source);
        if (r >= 0) {
                if (!streq(fstype, "btrfs"))
                        return log_debug_errno(-EBUSY, "'%s' is a %s mount, not our pool", mount_path, fstype);
                /* Mounted by an earlier run: reuse it (ours only if it is our image). */
                if (loop_backs(source, image)) {
                        p->owned = true;
                        p->loop = TAKE_PTR(source);
                }
                log_debug("Reusing the btrfs mount at '%s'", mount_path);
                return 0;
        }
        if (r != -ENOENT)
                return r;

        img_fd = open(image, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (img_fd >= 0)
                created = true;
        else if (errno == EEXIST)
                img_fd = open(image, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (img_fd < 0)
                return negative_errno();

        if (fstat(img_fd, &st) < 0) {
                r = negative_errno();
                goto fail;
        }
        if (!S_ISREG(st.st_mode)) {
                r = -EINVAL;
                goto fail;
        }
        if (created && ftruncate(img_fd, (off_t) (size_mb << 20)) < 0) {
                r = negative_errno();
                goto fail;
        }

        r = loop_find_backing(image, &dev);
        if (r < 0 && r != -ENOENT)
                goto fail;
        if (!btrfs_image_has_fs(img_fd)) {
                if (dev) {
                        /* Never format under a device someone is using. */
                        r = log_debug_errno(-EBUSY, "'%s' has no file system but is attached to %s", image, dev);
                        goto fail;
                }
                log_debug("Formatting '%s' (%" PRIu64 " MB)", image, (uint64_t) st.st_size >> 20);
                r = btrfs_mkfs(image, POOL_FS_LABEL);
                if (r < 0) {
                        log_debug_errno(r, "mkfs.btrfs '%s' failed: %m", image);
                        goto fail;
                }
        }

        if (dev) {
                /* Attached but not mounted (e.g. by hand): use that device. */
                dev_fd = open(dev, O_RDWR | O_CLOEXEC | O_NOCTTY);
                if (dev_fd < 0) {
                        r = negative_errno();
                        goto fail;
                }
        } else {
                r = loop_attach(img_fd, &dev_fd, &dev);
                if (r < 0) {
                        log_debug_errno(r, "Failed to attach '%s' to a loop device: %m", image);
                        goto fail;
                }
        }

        if (mount(dev, mount_path, "btrfs", MS_NOATIME, NULL) < 0) {
                r = log_debug_errno(negative_errno(), "Failed to mount %s at '%s': %m", dev, mount_path);
                goto fail; /* closing dev_fd detaches a device we attached (autoclear) */
        }
        /* From now on the mount holds the device; autoclear detaches it at umount. */
        p->owned = true;
        p->loop = TAKE_PTR(dev);
        return 0;

fail:
        if (created)
                (void) unlink(image);
        return r;
}

/* A directory that holds files but is no mount: an overlay pool of an earlier run. */
static bool dir_is_populated(const char *path) {
        _cleanup_(closedirp) DIR *d = opendir(path);
        struct dirent *de;

        if (!d)
                return false;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        return mountinfo_lookup(path, NULL, NULL) == -ENOENT;
        return false;
}

/* Serialises pool_open()/pool_release() of one state directory between
 * processes (two starts at once would attach the image twice). Held until
 * the returned fd is closed. */
static int pool_lock(const char *state_dir) {
        _cleanup_free_ char *path = strjoin(state_dir, "/" POOL_LOCK_NAME);
        _cleanup_close_ int fd = -EBADF;

        if (!path)
                return -ENOMEM;
        fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return negative_errno();
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return negative_errno();
        return TAKE_FD(fd);
}

static int pool_open_overlay(Pool *p, const char *path) {
        p->kind = POOL_OVERLAY;
        p->path = strdup(path);
        if (!p->path)
                return -ENOMEM;
        return 0;
}

int pool_open(const PoolConfig *cfg, Pool **ret) {
        _cleanup_(pool_freep) Pool *p = NULL;
        _cleanup_free_ char *state = NULL, *image = NULL, *mount_path = NULL;
        _cleanup_close_ int lock_fd = -EBADF;
        const char *storage;
        bool own_root = false;
        int r;

        if (!cfg || !ret || isempty(cfg->state_dir) || cfg->state_dir[0] != '/')
                return -EINVAL;
        storage = isempty(cfg->storage) ? "auto" : cfg->storage;
        if (!streq(storage, "auto") && !streq(storage, "btrfs") && !streq(storage, "overlay"))
                return log_error_errno(-EINVAL, "Unknown storage '%s' (auto, btrfs or overlay)", storage);
        if (isempty(cfg->pool_path) && !streq(storage, "overlay") &&
            (cfg->size_mb < POOL_SIZE_MB_MIN || cfg->size_mb > POOL_SIZE_MB_MAX))
                return log_error_errno(-EINVAL, "Pool size %" PRIu64 " MB out of range [%u, %" PRIu64 "]",
                                       cfg->size_mb, POOL_SIZE_MB_MIN, (uint64_t) POOL_SIZE_MB_MAX);

        r = mkdir_p(cfg->state_dir, 0700);
        if (r < 0)
                return log_error_errno(r, "Failed to create state directory '%s': %m", cfg->state_dir);
        state = realpath(cfg->state_dir, NULL);
        if (!state)
                return log_error_errno(negative_errno(), "Failed to resolve '%s': %m", cfg->state_dir);
        lock_fd = pool_lock(state);
        if (lock_fd < 0)
                return log_error_errno(lock_fd, "Failed to lock '%s/" POOL_LOCK_NAME "': %m", state);

        p = new0(Pool, 1);
        if (!p || pool_spares_init(p) < 0)
                return -ENOMEM;
        p->disk_overcommit_permille = cfg->disk_overcommit_permille ?: 1000;
        p->reserve_mb = cfg->reserve_mb;

        if (!isempty(cfg->pool_path)) {
                _cleanup_free_ char *path = realpath(cfg->pool_path, NULL);
                _cleanup_close_ int fd = -EBADF;

                if (!path)
                        return log_error_errno(negative_errno(), "Pool path '%s': %m", cfg->pool_path);
                fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return log_error_errno(negative_errno(), "Pool path '%s': %m", path);
                if (!streq(storage, "overlay") && btrfs_is_fs_fd(fd)) {
                        p->kind = POOL_BTRFS;
                        p->path = TAKE_PTR(path);
                } else if (streq(storage, "btrfs"))
                        return log_error_errno(-EMEDIUMTYPE, "Pool path '%s' is not on btrfs (storage=btrfs)", path);
                else {
                        if (streq(storage, "auto"))
                                log_warning("Pool path '%s' is not on btrfs; using overlayfs there", path);
                        r = pool_open_overlay(p, path);
                        if (r < 0)
                                return r;
                }
        } else {
                image = strjoin(state, "/" POOL_IMAGE_NAME);
                mount_path = strjoin(state, "/" POOL_MOUNT_NAME);
                if (!image || !mount_path)
                        return -ENOMEM;
                own_root = true;

                if (streq(storage, "overlay"))
                        r = pool_open_overlay(p, mount_path);
                else if (streq(storage, "auto") && access(image, F_OK) < 0 && dir_is_populated(mount_path)) {
                        log_info("Keeping the overlayfs pool at '%s' (it holds data; no btrfs image)", mount_path);
                        r = pool_open_overlay(p, mount_path);
                } else {
                        r = pool_attach_image(p, image, mount_path, cfg->size_mb);
                        if (r >= 0) {
                                p->kind = POOL_BTRFS;
                                p->path = TAKE_PTR(mount_path);
                                p->image = TAKE_PTR(image);
                        } else if (streq(storage, "btrfs"))
                                return log_error_errno(r, "Failed to set up the btrfs pool image '%s': %m", image);
                        else {
                                log_warning_errno(r, "btrfs pool unavailable (%m); falling back to overlayfs");
                                r = pool_open_overlay(p, mount_path);
                        }
                }
                if (r < 0)
                        return r;
        }

        if (p->kind == POOL_OVERLAY && !overlay_path_valid(p->path))
                return log_error_errno(-EINVAL, "Overlay pool path '%s' contains ',', ':' or '\\' (overlayfs options)",
                                       p->path);

        r = pool_setup_layout(p, own_root);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the pool layout in '%s': %m", p->path);
        if (p->kind == POOL_BTRFS) {
                r = pool_setup_quota(p);
                if (r < 0)
                        log_warning_errno(r, "btrfs quota unavailable in '%s' (%m): disk limits are not enforced",
                                          p->path);
        }

        log_info("Storage pool kind=%s path=%s loop=%s quota=%s", pool_kind_to_string(p->kind), p->path,
                 p->loop ?: "none", p->quota ? "yes" : "no");
        *ret = TAKE_PTR(p);
        return 0;
}

int pool_release(Pool *p) {
        _cleanup_free_ char *state = NULL;
        _cleanup_close_ int lock_fd = -EBADF;
        const char *slash;
        int r;

        if (!p)
                return 0;
        if (p->released)
                return 0;
        pool_spare_drop_all(p);
        if (p->kind != POOL_BTRFS || !p->owned) {
                p->released = true;
                return 0;
        }
        slash = p->image ? strrchr(p->image, '/') : NULL;
        if (slash) {
                state = strndup(p->image, (size_t) (slash - p->image));
                if (!state)
                        return -ENOMEM;
                lock_fd = pool_lock(state);
                if (lock_fd < 0)
                        return lock_fd;
        }
        for (unsigned attempt = 0;; attempt++) {
                if (umount2(p->path, UMOUNT_NOFOLLOW) >= 0 || errno == EINVAL)
                        break;
                r = negative_errno();
                if (r != -EBUSY || attempt + 1 >= POOL_UMOUNT_BUSY_TRIES)
                        return log_debug_errno(r, "Failed to unmount the pool '%s': %m", p->path);
                (void) poll(NULL, 0, POOL_UMOUNT_BUSY_SLEEP_MSEC);
        }
        p->released = true;
        if (p->loop) {
                /* Autoclear detaches the device once the mount let go of it; if
                 * something else still holds it, ask for the detach explicitly. */
                r = loop_wait_released(p->loop, p->image, LOOP_DETACH_TIMEOUT_MSEC / 5);
                if (r < 0 && loop_backs(p->loop, p->image)) {
                        r = loop_detach(p->loop);
                        if (r < 0)
                                return log_debug_errno(r, "Loop device %s stays attached: %m", p->loop);
                }
        }
        return 0;
}

int pool_info_json(const Pool *p, char **ret) {
        JsonWriter w;
        struct statvfs sv = {};
        PoolSpace space;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (statvfs(p->path, &sv) < 0)
                return negative_errno();

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "kind", pool_kind_to_string(p->kind));
        json_w_kv_string(&w, "path", p->path);
        json_w_kv_bool(&w, "quota", p->quota);
        json_w_key(&w, "size_bytes");
        json_w_uint(&w, (uint64_t) sv.f_blocks * sv.f_frsize);
        json_w_key(&w, "free_bytes");
        json_w_uint(&w, (uint64_t) sv.f_bavail * sv.f_frsize);
        json_w_kv_string(&w, "loop", p->loop); /* NULL writes null */
        /* How checkpoints, branches and restores are made: O(1) snapshots, or full copies. */
        json_w_kv_string(&w, "checkpoints", p->kind == POOL_BTRFS ? "snapshot" : "copy");
        if (pool_space_read((Pool *) p, NULL, &space) >= 0) {
                PoolAdmitPolicy pol = { .overcommit_permille = p->disk_overcommit_permille,
                                        .reserve_bytes = pool_admit_reserve_bytes(space.size_bytes, p->reserve_mb) };
                PoolAdmitResult res = {};
                char ratio[POOL_ADMIT_RATIO_MAX];
                (void) pool_admit(&space, &pol, 0, 0, &res);
                (void) pool_admit_ratio(pol.overcommit_permille, ratio);
                json_w_key(&w, "admission");
                json_w_object_begin(&w);
                json_w_kv_string(&w, "disk_overcommit", ratio);
                json_w_key(&w, "reserve_bytes");
                json_w_uint(&w, pol.reserve_bytes);
                json_w_key(&w, "admits_bytes");
                json_w_uint(&w, res.capacity_bytes);
                json_w_key(&w, "promised_bytes");
                json_w_uint(&w, space.promised_bytes);
                json_w_key(&w, "outstanding_bytes");
                json_w_uint(&w, space.outstanding_bytes);
                json_w_kv_int(&w, "sandboxes", (int64_t) space.sandboxes);
                json_w_object_end(&w);
        }
        json_w_object_end(&w);
        return json_w_finish(&w, ret, NULL);
}
