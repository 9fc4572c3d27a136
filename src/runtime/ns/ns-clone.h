/* SPDX-License-Identifier: MIT */
#pragma once

/* The clone of a sandbox's PID 1. Where the architecture allows (x86-64,
 * aarch64) the child shares its parent's memory (CLONE_VM, as posix_spawn
 * does) and runs ns_child_main() on a stack of its own, from a block that
 * holds a copy of everything it reads: no page table is copied at the clone,
 * no copy-on-write fault follows it, and the agent's exec tears nothing down
 * (on this VM page-table changes are the dearest part of a spawn). Unlike
 * vfork the parent goes on at once, so several children set themselves up
 * side by side. The child touches nothing of the parent's but its block:
 * system calls without libc (ns-sys.h), no allocation, signal handlers reset
 * to default before the parent's mask is restored. A block is reused once
 * the kernel has zeroed its CLONE_CHILD_CLEARTID word (the child's exec or
 * exit). Elsewhere the child is a copy of the parent (a plain clone). */

#include "ns-setup.h"

/* Clones a child into new user, mount, pid, net, uts and ipc namespaces
 * (into the cgroup cgroup_fd unless < 0; a sibling of the caller with
 * clone_parent) that runs ns_child_main(a). Returns the pid (> 0) and the
 * pidfd in *ret_pidfd, or -errno. a->spec need not outlive the call. */
pid_t ns_clone_child(const NsChildArgs *a, int cgroup_fd, bool clone_parent, int *ret_pidfd);
