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
