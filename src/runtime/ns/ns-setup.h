/* SPDX-License-Identifier: MIT */
#pragma once

/* The steps a new ns sandbox runs inside its namespaces, between clone() and
 * execve() of space-agent: no allocation, no logging, no libc system-call
 * wrapper (the child shares its parent's memory, errno included: ns-clone.h,
 * ns-sys.h); a failure is reported to the parent as {step, errno} over the
 * sync socket. One function a step,
 * in the order of ns_child_steps[] (nsjail's contain list). */

#include "runtime.h"

typedef enum NsStep {
        NS_STEP_SYNC,
        NS_STEP_IDENTITY,
        NS_STEP_MOUNT_PRIVATE,
        NS_STEP_STAGE,
        NS_STEP_ROOT,
        NS_STEP_VOLUMES,
        NS_STEP_PROC,
        NS_STEP_DEV,
        NS_STEP_SYS,
        NS_STEP_CGROUP,
        NS_STEP_RUN,
        NS_STEP_PIVOT,
        NS_STEP_HOSTNAME,
        NS_STEP_LOOPBACK,
        NS_STEP_RESOLV_CONF,
        NS_STEP_MACHINE_ID,
        NS_STEP_RLIMITS,
        NS_STEP_FDS,
        NS_STEP_PRIVILEGES,
        NS_STEP_SECCOMP,
        NS_STEP_EXEC,
        _NS_STEP_MAX,
} NsStep;

const char *ns_step_to_string(NsStep s);

/* An empty directory named after the agent's socket (<socket>.stage). Once
 * its id maps are written (the parent sends "m"), the child stacks a tmpfs on
 * it in its own mount namespace and mounts /proc (with its masks), /dev, /sys
 * and /run there, while the worker still makes its root; once the root comes,
 * each is moved (MS_MOVE, with what is mounted below it) onto the root's
 * directory of that name. */
#define NS_STAGE_SUFFIX ".stage"

/* What the parent reports after the child failed: sent as this struct. */
typedef struct NsChildError {
        int32_t step;
        int32_t error; /* positive errno */
} NsChildError;

typedef struct NsChildArgs {
        const RuntimeSpec *spec;
        int sync_fd;     /* child's end of the sync socketpair */
        int parent_fd;   /* the parent's end: the child closes its copy first (EOF when the parent is gone) */
        int listen_fd;   /* agent listening socket, becomes fd 3 */
        int settle_fd;   /* settle_later: read end of a pipe, 'c' once PID 1 is in its cgroups (else -1) */
        int settle_wfd;  /* ... its write end, the parent's: the child closes its copy first */
        const char *stage_path; /* host path of the staging directory (<socket>.stage) */
        char *const *envp;
} NsChildArgs;

/* Runs in the child; never returns. */
_noreturn_ void ns_child_main(const NsChildArgs *a);

/* Parent side helpers. */
int ns_write_id_maps(pid_t pid, uid_t base);
int ns_idmapped_root(const char *root_path, pid_t pid, int *ret_fd);
/* A volume's directory as a detached mount, idmapped into the child's user
 * namespace, nosuid, nodev (read-only if asked). */
int ns_idmapped_volume(const char *host_path, bool read_only, pid_t pid, int *ret_fd);
/* A volume to the child after its root: the mount's fd and the path inside
 * ('V' and the NUL-terminated path, in one message). */
int ns_send_volume(int sock, int fd, const char *path);
int send_fd(int sock, int fd);
int recv_fd(int sock, int *ret_fd);
