/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <sys/mount.h>

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
