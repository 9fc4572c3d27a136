/* SPDX-License-Identifier: MIT */
#pragma once

/* Looks up mounts in /proc/self/mountinfo. */

#include "macros.h"

#define MOUNTINFO_SIZE_MAX (16U * 1024U * 1024U)

/* If path (absolute, normalised) is a mount point, returns 0 and the file
 * system type and mount source of the topmost mount there (malloc'd; either
 * ret may be NULL). -ENOENT if nothing is mounted there. */
int mountinfo_lookup(const char *path, char **ret_fstype, char **ret_source);
