/* SPDX-License-Identifier: MIT */
/* The reviewed seccomp policy of the ns runtime: data only.
 *
 * Default action ALLOW; the rows below deny what a sandbox has no business
 * calling. The rest of the ns isolation must already hold without this list
 * (user namespace with an unprivileged host uid range, pid/mount/net/ipc/uts/
 * cgroup namespaces, reduced capabilities, no_new_privs, masked /proc and
 * /sys): the filter narrows the kernel surface reachable from inside, it is
 * not the wall. Outside the table, seccomp.c kills the process for any
 * syscall made through a non-native ABI (ia32 int 0x80/sysenter, x32,
 * aarch64's compat entry), since every row is resolved for the native ABI
 * only.
 *
 * One row a syscall: { name, verdict, argument condition, reason[, gate] }.
 * Names are resolved by libseccomp for the build's architecture; a name it
 * does not know, or one absent on this architecture (vm86 on x86-64, iopl on
 * aarch64), is skipped. tests/unit/test-seccomp.c probes every row against
 * the real kernel; a new row needs a probe there. */
#include <linux/personality.h>
#include <sched.h>

#include "macros.h"
#include "seccomp-filter.h"

/* clone(2)'s flags argument: arg0 on x86-64 and aarch64, arg1 on s390. */
#if defined(__s390__) || defined(__s390x__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

/* Every namespace flag clone() accepts. CLONE_NEWTIME is not one: it exists
 * only for clone3/unshare, in clone()'s flags its bit is part of the exit
 * signal (CSIGNAL). */
#define CLONE_NAMESPACE_FLAGS                                                 \
        (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |       \
         CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)

#define ALLOWED         SECCOMP_ALLOW_REVIEWED
#define DENY_EPERM      SECCOMP_DENY_EPERM
#define DENY_ENOSYS     SECCOMP_DENY_ENOSYS
#define ALWAYS          { .test = SECCOMP_ARG_ALWAYS }
#define ANY_BIT(i, m)   { .test = SECCOMP_ARG_ANY_BIT, .index = (i), .value = (m) }
#define MIXED_BITS32(i) { .test = SECCOMP_ARG_MIXED_BITS32, .index = (i) }
#define IO_URING        SECCOMP_GATE_IO_URING
#define USER_NOTIF      SECCOMP_USER_NOTIF
#define STATFS          SECCOMP_GATE_STATFS

const SeccompRule seccomp_policy[] = {
        /* syscall             verdict      condition  reason */

        /* Kernel keyrings: keys are owned per uid, but quotas and the keyring tree are shared with the host. */
        { "keyctl",            DENY_EPERM,  ALWAYS,    "keyrings are not isolated per sandbox (shared quotas, host uid keyrings); rarely needed by workloads" },
        { "add_key",           DENY_EPERM,  ALWAYS,    "creates keys in the kernel keyring service, see keyctl" },
        { "request_key",       DENY_EPERM,  ALWAYS,    "asks the keyring service and may spawn host upcalls (/sbin/request-key), see keyctl" },

        /* Large kernel attack surfaces with a long exploit history. */
        { "bpf",               DENY_EPERM,  ALWAYS,    "verifier, maps and JIT are a large attack surface; classic BPF for sockets stays available via setsockopt" },
        { "perf_event_open",   DENY_EPERM,  ALWAYS,    "exposes host-wide performance data and kernel addresses; frequent source of kernel CVEs" },
        { "userfaultfd",       DENY_EPERM,  ALWAYS,    "lets a process stall the kernel on a page fault at will, the usual tool for winning kernel races" },
        { "io_uring_setup",    DENY_EPERM,  ALWAYS,    "io_uring is a fast-moving kernel surface with many CVEs; off unless the sandbox asks for it", IO_URING },
        { "io_uring_enter",    DENY_EPERM,  ALWAYS,    "see io_uring_setup (a ring fd could be passed in from outside)", IO_URING },
        { "io_uring_register", DENY_EPERM,  ALWAYS,    "see io_uring_setup", IO_URING },
        { "fanotify_init",     DENY_EPERM,  ALWAYS,    "filesystem-wide event and permission hooks over mounts the sandbox shares with the host" },

        /* The host kernel itself: modules, kexec, reboot. */
        { "kexec_load",        DENY_EPERM,  ALWAYS,    "replaces the running host kernel" },
        { "kexec_file_load",   DENY_EPERM,  ALWAYS,    "replaces the running host kernel" },
        { "init_module",       DENY_EPERM,  ALWAYS,    "loads code into the host kernel" },
        { "finit_module",      DENY_EPERM,  ALWAYS,    "loads code into the host kernel" },
        { "delete_module",     DENY_EPERM,  ALWAYS,    "unloads host kernel modules" },
        { "reboot",            DENY_EPERM,  ALWAYS,    "host power state (in a pid namespace it kills the sandbox's init; the API stops sandboxes)" },
        { "syslog",            DENY_EPERM,  ALWAYS,    "the kernel log is the host's: host activity and kernel addresses (dmesg)" },
        { "lookup_dcookie",    DENY_EPERM,  ALWAYS,    "oprofile's dentry cookies name host paths" },
        { "acct",              DENY_EPERM,  ALWAYS,    "process accounting is host-wide and writes a host file on every exit" },
        { "uselib",            DENY_EPERM,  ALWAYS,    "obsolete a.out library loader, only attack surface today" },
        { "nfsservctl",        DENY_EPERM,  ALWAYS,    "removed kernel NFS server control" },
        { "vhangup",           DENY_EPERM,  ALWAYS,    "hangs up the controlling terminal, which may be a host pty" },

        /* Hardware, time and host-wide resources: not namespaced. */
        { "iopl",              DENY_EPERM,  ALWAYS,    "raw I/O port access to host hardware (x86)" },
        { "ioperm",            DENY_EPERM,  ALWAYS,    "raw I/O port access to host hardware (x86)" },
        { "pciconfig_read",    DENY_EPERM,  ALWAYS,    "PCI configuration space of host devices (alpha/arm/powerpc/sparc)" },
        { "pciconfig_write",   DENY_EPERM,  ALWAYS,    "PCI configuration space of host devices" },
        { "pciconfig_iobase",  DENY_EPERM,  ALWAYS,    "PCI bus I/O bases of host devices" },
        { "swapon",            DENY_EPERM,  ALWAYS,    "host swap configuration" },
        { "swapoff",           DENY_EPERM,  ALWAYS,    "host swap configuration" },
        { "settimeofday",      DENY_EPERM,  ALWAYS,    "the realtime clock is the host's (time namespaces only offset monotonic/boottime)" },
        { "clock_settime",     DENY_EPERM,  ALWAYS,    "sets a host clock, see settimeofday" },
        { "clock_adjtime",     DENY_EPERM,  ALWAYS,    "adjusts a host clock, see settimeofday; read-only queries are refused too" },
        { "adjtimex",          DENY_EPERM,  ALWAYS,    "adjusts the host clock, see settimeofday; read-only queries (ntp_gettime) are refused too" },
        { "quotactl",          DENY_EPERM,  ALWAYS,    "quota administration of host filesystems" },
        { "quotactl_fd",       DENY_EPERM,  ALWAYS,    "quota administration of host filesystems" },

        /* The mount tree is built by the runtime; changing it could uncover masked /proc and /sys paths
         * and would expose filesystem code (overlay, FUSE, ...) to unprivileged users. */
        { "mount",             DENY_EPERM,  ALWAYS,    "the sandbox's mount tree is final once space-agent runs" },
        { "umount",            DENY_EPERM,  ALWAYS,    "unmounting would uncover masked paths (arches that still have umount)" },
        { "umount2",           DENY_EPERM,  ALWAYS,    "unmounting would uncover masked paths" },
        { "pivot_root",        DENY_EPERM,  ALWAYS,    "the root is set by the runtime" },
        { "move_mount",        DENY_EPERM,  ALWAYS,    "new mount API, see mount" },
        { "fsopen",            DENY_EPERM,  ALWAYS,    "new mount API, see mount" },
        { "fsconfig",          DENY_EPERM,  ALWAYS,    "new mount API, see mount" },
        { "fsmount",           DENY_EPERM,  ALWAYS,    "new mount API, see mount" },
        { "fspick",            DENY_EPERM,  ALWAYS,    "new mount API, see mount" },
        { "open_tree",         DENY_EPERM,  ALWAYS,    "clones mounts, see mount" },
        { "mount_setattr",     DENY_EPERM,  ALWAYS,    "changes mount flags (could drop nosuid/noexec/ro), see mount" },
        { "open_by_handle_at", DENY_EPERM,  ALWAYS,    "opens files by handle, bypassing the mount tree (the 'shocker' container escape)" },
        { "name_to_handle_at", DENY_EPERM,  ALWAYS,    "hands out the handles open_by_handle_at takes" },

        /* No nested namespaces: a user namespace inside gives root-only kernel code to the workload. */
        { "unshare",           DENY_EPERM,  ALWAYS,    "no nested namespaces; refused whatever the flags, even unshare(0) or CLONE_FILES" },
        { "setns",             DENY_EPERM,  ALWAYS,    "joining other namespaces" },
        { "clone",             DENY_EPERM,  ANY_BIT(CLONE_FLAGS_ARG, CLONE_NAMESPACE_FLAGS), "creating namespaces; plain fork and threads stay allowed" },
        { "clone3",            DENY_ENOSYS, ALWAYS,    "its flags are in memory, out of a filter's reach; on ENOSYS glibc falls back to clone, which is filtered" },

        /* Execution domains. */
        { "personality",       DENY_EPERM,  MIXED_BITS32(0), "only PER_LINUX (0) and the query 0xffffffff: others weaken ASLR or W^X (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE)" },
        { "vm86",              DENY_EPERM,  ALWAYS,    "virtual 8086 mode (x86-32 only)" },
        { "vm86old",           DENY_EPERM,  ALWAYS,    "virtual 8086 mode (x86-32 only)" },

        /* Answered by the worker (statfs-notify.c), not by the kernel: on the pool, the sandbox's own
         * quota and usage instead of the whole pool's size and free space (other tenants' usage).
         * Rows only where the pool has quotas. A filter with a listener means that processes inside
         * cannot install one of their own (seccomp says EBUSY): nested user-notification
         * supervisors (container runtimes) do not work, which nested namespaces already rule out. */
        { "statfs",            USER_NOTIF,  ALWAYS,    "df: the pool's figures would show every other sandbox's disk use", STATFS },
        { "fstatfs",           USER_NOTIF,  ALWAYS,    "see statfs (an fd of the root, of /proc/self/cwd, ...)", STATFS },

        /* Considered and allowed: debugging inside the sandbox. The kernel checks ptrace access (same
         * user namespace, or CAP_SYS_PTRACE over the target's), the pid namespace hides every host
         * process, and since Linux 4.8 seccomp re-checks a syscall a tracer rewrote, so a tracee
         * cannot be used to get around this filter. */
        { "ptrace",            ALLOWED,     ALWAYS,    "debuggers and strace; confined to the sandbox by its pid and user namespaces" },
        { "process_vm_readv",  ALLOWED,     ALWAYS,    "same access check as ptrace attach, same confinement" },
        { "process_vm_writev", ALLOWED,     ALWAYS,    "same access check as ptrace attach, same confinement" },
        { "kcmp",              ALLOWED,     ALWAYS,    "compares two processes' kernel objects; needs ptrace read access to both" },
};

const size_t seccomp_policy_len = ELEMENTSOF(seccomp_policy);
