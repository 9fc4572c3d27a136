/* SPDX-License-Identifier: MIT */
#pragma once

/* cgroups for sandboxes, on pure cgroup v2 and on hybrid/v1 hosts.
 * Every sandbox gets <root>/<id> in each hierarchy we use: on v2 one
 * directory with memory, cpu, pids (and io) limits; on v1 one directory per
 * controller (memory, cpu, pids, freezer) plus, where cgroup v2 is mounted
 * without controllers (hybrid), one in the v2 tree for cgroup.kill and
 * cgroup.freeze. */

#include <sys/types.h>

#include "runtime.h"

typedef enum CgroupMode {
        CGROUP_MODE_V2,     /* unified only */
        CGROUP_MODE_HYBRID, /* v1 controllers + v2 without controllers */
        CGROUP_MODE_V1,     /* v1 only */
        _CGROUP_MODE_MAX,
        _CGROUP_MODE_INVALID = -EINVAL,
} CgroupMode;

const char *cgroup_mode_to_string(CgroupMode m);

/* Detects the layout and creates <root> in each hierarchy (enabling the
 * controllers we need on v2). Call once per process before anything else. */
int cgroup_setup(const char *root);
CgroupMode cgroup_mode(void);

/* Creates the sandbox's cgroups with the limits. *ret_v2_fd: an O_DIRECTORY fd
 * of its v2 cgroup (for CLONE_INTO_CGROUP) or -EBADF where there is none. */
int cgroup_create(const char *id, const RuntimeLimits *limits, int *ret_v2_fd);
/* Moves pid into the sandbox's v1 cgroups (v2 is done by CLONE_INTO_CGROUP). */
int cgroup_attach_v1(const char *id, pid_t pid);
/* True if pid is in the sandbox's cgroup. */
bool cgroup_contains(const char *id, pid_t pid);
/* Kills every process in the sandbox's cgroups and waits until they are gone. */
int cgroup_kill(const char *id);
/* SIGKILL to every process of the sandbox once, without waiting for them to
 * die (a large pid namespace takes the kernel minutes to tear down). */
int cgroup_kill_now(const char *id);
/* Removes the sandbox's cgroups (after cgroup_kill). Missing ones are fine. */
int cgroup_remove(const char *id);
/* Freezes or thaws every process of the sandbox and waits until it took
 * effect (cgroup v2's cgroup.freeze where a v2 tree exists, even without
 * controllers; else the v1 freezer). */
int cgroup_freeze(const char *id, bool frozen);
/* How many processes the kernel's OOM killer ended in the sandbox so far. */
int cgroup_oom_kills(const char *id, uint64_t *ret);
/* What a sandbox's cgroups count now (its metrics). A figure the host's
 * cgroups do not keep is UINT64_MAX. */
typedef struct CgroupUsage {
        uint64_t cpu_usec;          /* CPU time used (v2 cpu.stat usage_usec, which a v2 tree keeps even without
                                     * the cpu controller; v1 cpuacct.usage) */
        uint64_t memory_bytes;      /* v2 memory.current, v1 memory.usage_in_bytes */
        uint64_t memory_max_bytes;  /* v2 memory.max, v1 memory.limit_in_bytes; UINT64_MAX: no limit */
} CgroupUsage;
int cgroup_usage(const char *id, CgroupUsage *ret);
/* Applies limits to an existing sandbox cgroup. */
int cgroup_set_limits(const char *id, const RuntimeLimits *limits);
/* Removes <root> from each hierarchy if it is empty (when nothing runs). */
int cgroup_teardown(void);
/* Ids of all sandbox cgroups present. */
int cgroup_list(char ***ret_ids);
