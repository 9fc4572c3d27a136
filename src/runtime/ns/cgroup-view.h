/* SPDX-License-Identifier: MIT */
#pragma once

/* What a sandbox sees at /sys/fs/cgroup: its own cgroups, read-only, so that
 * `cat /sys/fs/cgroup/memory.max` (v2) or
 * `cat /sys/fs/cgroup/memory/memory.limit_in_bytes` (v1) shows its limit and
 * language runtimes size their heaps and thread pools from it.
 *
 * The sandbox's PID 1 unshares its cgroup namespace once it sits in its
 * cgroups (ns-setup.c), so every cgroup file system it mounts has the
 * sandbox's own cgroup as its root: other sandboxes' cgroups are not below
 * it, and nothing above it is reachable.
 *   - pure cgroup v2: cgroup2 at /sys/fs/cgroup;
 *   - v1 and hybrid, as Docker lays it out: a read-only tmpfs at
 *     /sys/fs/cgroup with one directory per v1 hierarchy that holds a
 *     sandbox cgroup (memory, cpu, pids, freezer, blkio, named after the
 *     hierarchy's controllers, "cpu,cpuacct" with symlinks "cpu" and
 *     "cpuacct" where they share one), and on a hybrid host cgroup2 at
 *     /sys/fs/cgroup/unified.
 * Hierarchies the sandbox has no cgroup of its own in (cpuset, devices,
 * name=systemd, ...) are not mounted: their namespace root would be the
 * daemon's cgroup. Every mount is read-only, nosuid, nodev, noexec.
 *
 * The view is worked out once per process, in the parent, from the
 * hierarchies of /proc/self/cgroup (cgroup_view_setup(), called by
 * cgroup_setup()); the sandbox's child only reads it (static storage, never
 * changed after set-up) and mounts it (ns_mount_cgroup_view()). */

#include <stdbool.h>
#include <stddef.h>

#include "cgroup.h"

#define CGROUP_VIEW_MOUNTS_MAX 16
#define CGROUP_VIEW_LINKS_MAX 16
#define CGROUP_VIEW_NAME_MAX 64

typedef struct CgroupViewMount {
        char dir[CGROUP_VIEW_NAME_MAX];     /* below /sys/fs/cgroup; "" = /sys/fs/cgroup itself */
        char type[8];                       /* "cgroup" or "cgroup2" */
        char options[CGROUP_VIEW_NAME_MAX]; /* v1: the hierarchy's controllers ("cpu,cpuacct"); v2: "" */
} CgroupViewMount;

typedef struct CgroupViewLink {
        char name[CGROUP_VIEW_NAME_MAX];   /* below /sys/fs/cgroup */
        char target[CGROUP_VIEW_NAME_MAX]; /* relative: a mount's dir */
} CgroupViewLink;

typedef struct CgroupView {
        bool tmpfs; /* a tmpfs at /sys/fs/cgroup holds the mounts' directories (v1, hybrid) */
        size_t n_mounts, n_links;
        CgroupViewMount mounts[CGROUP_VIEW_MOUNTS_MAX];
        CgroupViewLink links[CGROUP_VIEW_LINKS_MAX];
} CgroupView;

/* The view for a host in mode whose process's /proc/self/cgroup reads
 * text (n bytes, no NUL needed), where the sandbox has cgroups of its own
 * in the v1 controllers used[] (NULL-terminated). -EBADMSG for a line that
 * is no "ID:CONTROLLERS:PATH", -E2BIG past the bounds above. */
int cgroup_view_build(CgroupMode mode, const char *text, size_t n, const char *const *used, CgroupView *ret);
/* cgroup_view_build() of this process's /proc/self/cgroup into the view the
 * children mount. */
int cgroup_view_setup(CgroupMode mode, const char *const *used);
/* The view set up (an empty one before cgroup_view_setup()). */
const CgroupView *cgroup_view_get(void);

/* Child side (no allocation, no libc call that sets errno: ns-sys.h):
 * mounts view below the directory rootfd/sys/fs/cgroup (skipped where that
 * sysfs has no such directory), the sandbox's cgroup namespace unshared. */
int ns_mount_cgroup_view(int rootfd, const CgroupView *view);
