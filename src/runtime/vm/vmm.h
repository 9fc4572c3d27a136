/* SPDX-License-Identifier: MIT */
#pragma once

/* A VMM driver: starts one microVM per sandbox and controls it. Small on
 * purpose, so that a Firecracker or cloud-hypervisor driver can sit beside
 * QEMU's: start from files given as fds, pause/resume, save the whole
 * machine to a file and start from one, quit. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum VmmAccel {
        VMM_ACCEL_KVM,
        VMM_ACCEL_TCG, /* software emulation: development and tests only */
        _VMM_ACCEL_MAX,
        _VMM_ACCEL_INVALID = -22,
} VmmAccel;

const char *vmm_accel_to_string(VmmAccel a);
VmmAccel vmm_accel_from_string(const char *s);

#define VMM_FS_MAX 16

typedef struct VmmConfig {
        const char *binary;     /* the VMM's executable */
        const char *id;
        VmmAccel accel;
        uint32_t vcpus;
        uint64_t memory_mb;
        uid_t uid;              /* the VMM drops to this uid/gid */
        gid_t kvm_gid;          /* and keeps this supplementary group under KVM ((gid_t) -1: none) */
        int cgroup_fd;          /* started inside this cgroup (v2), or -1 */
        int kernel_fd;          /* ELF vmlinux (PVH) */
        int initrd_fd;
        int disk_fd;            /* raw root disk, read-write (opened again by the VMM as uid) */
        const char *cmdline;
        int agent_link_fd;      /* one end of a stream socket: the guest's agent port */
        int control_fd;         /* a listening unix socket: the VMM's control channel (QMP) */
        int log_fd;             /* the VMM's stdout/stderr and the guest console */
        int incoming_fd;        /* start from a machine saved to this file (-1: boot); the VM stays paused */
        int net_fd;             /* a tap device: the guest's virtio-net NIC (-1: no network) */
        uint8_t net_mac[6];     /* the NIC's MAC address */
        bool cmdline_devices;   /* no ACPI tables: the guest finds its devices on its command line */
        /* vhost-user-fs devices (virtiofs), tag "space<i>": each fd a stream socket connected to its
         * virtiofsd. The guest's memory is then a shared memfd (what vhost-user needs). */
        size_t n_fs;
        int fs_fd[VMM_FS_MAX];
} VmmConfig;

typedef struct VmmDriver {
        const char *name;
        /* The version of the VMM at binary ("QEMU 7.2.22"), or -ENOENT. */
        int (*available)(const char *binary, char *version, size_t version_size);
        /* Starts the VMM; *ret_pid and *ret_pidfd (owned by the caller). */
        int (*start)(const VmmConfig *c, pid_t *ret_pid, int *ret_pidfd, char *err, size_t err_size);
        /* Over the control socket at control_path: */
        int (*pause)(const char *control_path, bool pause);
        /* Stops the guest and writes the machine (memory and devices) to fd; the VMM stays, stopped. */
        int (*save)(const char *control_path, int fd);
        /* After a start from incoming_fd: waits until the machine is loaded, then
         * runs it. control_fd: connected to the control socket (taken, closed).
         * The agent relay calls it (vm-runtime.c), not the worker: loading
         * takes seconds under TCG, which the worker's event loop must not wait.
         * err: why not (QEMU's error, or empty). */
        int (*resume_incoming)(int control_fd, char *err, size_t err_size);
        int (*quit)(const char *control_path);
} VmmDriver;

extern const VmmDriver vmm_qemu;
