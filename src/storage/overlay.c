/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "fd-util.h"
#include "mountinfo.h"
#include "overlay.h"
#include "str-util.h"

bool overlay_path_valid(const char *path) {
        return !isempty(path) && path[0] == '/' && !strpbrk(path, ",:\\");
}

int overlay_mount(const char *lower, const char *upper, const char *work, const char *target) {
        _cleanup_free_ char *opts = NULL;

        if (!overlay_path_valid(lower) || !overlay_path_valid(upper) || !overlay_path_valid(work))
                return -EINVAL;
        opts = strdup_printf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
        if (!opts)
                return -ENOMEM;
        return mount("overlay", target, "overlay", 0, opts) < 0 ? negative_errno() : 0;
}

int overlay_is_mounted(const char *target) {
        _cleanup_free_ char *fstype = NULL;
        int r;

        r = mountinfo_lookup(target, &fstype, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        return streq(fstype, "overlay");
}

int overlay_umount(const char *target) {
        int r = overlay_is_mounted(target);
        if (r <= 0)
                return r;
        if (umount2(target, UMOUNT_NOFOLLOW) >= 0)
                return 0;
        if (errno != EBUSY)
                return negative_errno();
        return umount2(target, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 ? negative_errno() : 0;
}

/* Calls fn(fd_arg, name) for every entry of the directory dir_fd (other than
 * . and ..); stops at the first error. */
static int for_each_entry(int dir_fd, int (*fn)(int, const char *), int fd_arg) {
        _cleanup_(closedirp_) DIR *d = NULL;
        struct dirent *de;
        int fd;

        /* A fresh open: fdopendir() of a dup would share the caller's offset. */
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        while ((errno = 0, de = readdir(d))) {
                int r;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = fn(fd_arg, de->d_name);
                if (r < 0)
                        return r;
        }
        return errno != 0 ? negative_errno() : 0;
}

/* upper_fd/name: if a directory (not a symlink to one), mark it opaque. */
static int make_opaque(int upper_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (fstatat(upper_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return 0;
        fd = openat(upper_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        return fsetxattr(fd, OVERLAY_XATTR_OPAQUE, "y", 1, 0) < 0 ? negative_errno() : 0;
}

/* A lower entry called name: hide it unless upper has its own. */
static int whiteout_missing(int upper_fd, const char *name) {
        struct stat st;

        if (fstatat(upper_fd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                return 0;
        if (errno != ENOENT)
                return negative_errno();
        if (mknodat(upper_fd, name, S_IFCHR, makedev(OVERLAY_WHITEOUT_DEV, OVERLAY_WHITEOUT_DEV)) < 0)
                return negative_errno();
        return 0;
}

int overlay_seal_upper(int upper_fd, int lower_fd) {
        int r;

        if (upper_fd < 0 || lower_fd < 0)
                return -EBADF;
        /* The kernel ignores the opaque mark on the root of the upper layer, so
         * the top needs whiteouts; below it opaque directories do the rest. */
        r = for_each_entry(upper_fd, make_opaque, upper_fd);
        if (r < 0)
                return r;
        return for_each_entry(lower_fd, whiteout_missing, upper_fd);
}
