/* SPDX-License-Identifier: MIT */
#pragma once

/* A volume in a VM: one virtiofsd per volume, which serves the guest's
 * virtiofs over vhost-user. It runs in a user namespace mapped like an ns
 * sandbox of the same slot (0 inside = uid_base), on the volume's directory
 * idmapped into that namespace (nosuid, nodev, read-only if asked), mounted
 * in a mount namespace of its own where nothing else of the host is above
 * it; its own sandbox (namespace, else chroot) confines it to that
 * directory. It starts in the sandbox's cgroup: killing the cgroup ends it. */

#include <stdbool.h>
#include <sys/types.h>

#define VM_VIRTIOFSD_DEFAULT "/usr/lib/qemu/virtiofsd"

typedef struct VmVirtiofsd {
        const char *binary;
        const char *host_path;   /* the volume's directory (pool) */
        bool read_only;
        uid_t uid_base;
        int cgroup_fd;           /* v2 cgroup to start in, or -1 */
        int log_fd;              /* its stderr */
        const char *socket_path; /* a free path for a moment (the listening socket; unlinked before return) */
} VmVirtiofsd;

/* Starts it; *ret_pidfd (the caller reaps), *ret_vmm_fd: a stream socket
 * connected to it, for the VMM's vhost-user-fs device. */
int vm_virtiofsd_start(const VmVirtiofsd *a, pid_t *ret_pid, int *ret_pidfd, int *ret_vmm_fd, char *err,
                       size_t err_size);
