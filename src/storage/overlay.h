/* SPDX-License-Identifier: MIT */
#pragma once

/* overlayfs mounts for sandbox roots where btrfs cannot be had. */

#include "macros.h"

/* Whether path can go into overlay mount options (no ',', ':' or '\\'). */
bool overlay_path_valid(const char *path);
/* Mounts an overlay at target: lower (read-only), upper and work (same fs). */
int overlay_mount(const char *lower, const char *upper, const char *work, const char *target);
/* 1 if an overlay is mounted at target, 0 if not. */
int overlay_is_mounted(const char *target);
/* Unmounts the overlay at target (lazily if it is busy); nothing mounted is fine. */
int overlay_umount(const char *target);

/* The xattr that makes an upper directory hide the lower one of the same name,
 * and the device number of a whiteout (a character device that hides a lower
 * entry). */
#define OVERLAY_XATTR_OPAQUE "trusted.overlay.opaque"
#define OVERLAY_WHITEOUT_DEV 0

/* Makes the plain tree in upper_fd (a full copy of a root, as made for a
 * restore or branch) the whole merged view over lower_fd: every directory at
 * its top is marked opaque, and every entry of lower's top that upper lacks
 * gets a whiteout. Without this, files deleted in the copy would show through
 * from the template again. Run before the overlay is mounted. */
int overlay_seal_upper(int upper_fd, int lower_fd);
