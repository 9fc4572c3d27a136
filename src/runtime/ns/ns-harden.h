/* SPDX-License-Identifier: MIT */
#pragma once

/* Hardening steps run in the sandbox's child between clone() and execve():
 * no allocation, no logging, no libc call that sets errno (ns-sys.h); each
 * returns 0 or -errno. */

#include "runtime.h"

/* The capabilities root inside a sandbox keeps (everything else is dropped
 * from the bounding, permitted, effective, inheritable and ambient sets):
 * CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP
 * NET_BIND_SERVICE SYS_CHROOT AUDIT_WRITE SETFCAP. Not kept, among others:
 * SYS_ADMIN (mount, namespaces), NET_RAW (raw sockets), MKNOD (devices),
 * SYS_PTRACE, SYS_MODULE, SYS_TIME, SYS_BOOT, DAC_READ_SEARCH
 * (open_by_handle_at), SYS_RESOURCE (rlimits), SYSLOG, NET_ADMIN. */
extern const unsigned ns_caps_allowed[];
extern const size_t ns_caps_allowed_count;

/* Masks /proc below rootfd: files that leak the host or touch the kernel
 * become /dev/null, directories become empty read-only tmpfs, /proc/sys and
 * friends read-only. */
int ns_mask_proc(int rootfd);
/* Masks the host's firmware and energy counters in the sysfs below rootfd
 * (sys/firmware, sys/devices/virtual/powercap: an empty read-only tmpfs
 * each; a path this kernel lacks is left alone). */
int ns_mask_sys(int rootfd);
/* A boot id of the sandbox's own: a random UUID bound read-only over
 * /proc/sys/kernel/random/boot_id (below rootfd, /proc mounted), from a
 * scratch tmpfs mounted on the directory scratch (relative to rootfd) and
 * detached again. The host's boot id tells sandboxes apart from the host's
 * boots and links them to each other. */
int ns_fake_boot_id(int rootfd, const char *scratch);
/* A fresh /etc/machine-id (32 hex digits from getrandom). No /etc: nothing. */
int ns_write_machine_id(void);
/* /etc/resolv.conf with content (a symlink there is replaced by the file;
 * no /etc, or a directory in its place: nothing). Inside the sandbox's own
 * root, after pivot_root, so no path of the host is ever followed. */
int ns_write_resolv_conf(const char *content);
/* nofile, nproc, core = 0, fsize. */
int ns_set_rlimits(const RuntimeLimits *l);
/* Drops capabilities to ns_caps_allowed, clears ambient, locks securebits,
 * sets no_new_privs. */
int ns_drop_privileges(void);
