/* SPDX-License-Identifier: MIT */
#pragma once

/* statfs() and fstatfs() of a sandbox's processes, answered by the worker.
 *
 * The kernel's answer for a file on the pool is the whole pool's size and
 * free space, i.e. every other sandbox's disk use (what `df /` shows). The
 * seccomp policy sends both calls to the filter's user-notification listener
 * instead (seccomp-policy.c, rows gated by SeccompOptions.emulate_statfs);
 * PID 1 holds the listener as fd NS_NOTIFY_FD and the worker takes a copy
 * through PID 1's pidfd (after a create, and again after its own restart).
 *
 * For each notification the worker, never trusting the sandbox:
 *   1. opens /proc/<tid> of the caller and checks that the notification is
 *      still pending (SECCOMP_IOCTL_NOTIF_ID_VALID), so every later step
 *      works on that directory fd, bound to that very task, never on a pid
 *      that could have been reused;
 *   2. statfs: reads the path once from the caller's memory through its
 *      /proc/<tid>/mem (bounded by the kernel's PATH_MAX; a thread that
 *      changes the buffer meanwhile changes nothing but which of the
 *      sandbox's own paths is answered) and opens it O_PATH with
 *      openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from the caller's
 *      root (absolute) or working directory (relative), so no symlink, ".."
 *      or magic link leads out of the sandbox; fstatfs: opens the caller's
 *      /proc/<tid>/fd/N (O_PATH);
 *   3. fstatfs() of that, and if it is on btrfs (the only btrfs a sandbox can
 *      see is its root on the pool: it cannot mount), replaces the sizes with
 *      the sandbox's quota and usage (NsStatfsView.quota) and its f_fsid with
 *      one of the sandbox's own (the pool's UUID is in the kernel's);
 *   4. writes the struct into the caller's buffer through /proc/<tid>/mem
 *      and answers with 0, or fails the call with the errno the kernel's own
 *      statfs would have given (EFAULT, ENOENT, ENAMETOOLONG, EBADF, ...).
 *      Never with a figure of the pool, and never CONTINUE (the kernel would
 *      read the path again: a swapped buffer would then reach the pool).
 *
 * Differences from the kernel's statfs, all confined to the sandbox: magic
 * links (/proc/N/root, /proc/N/fd/M) are refused with ELOOP, /proc/self is
 * not the caller (ENOENT), ".." in a relative path stops at the working
 * directory, and permissions are not checked (statfs reveals no file data).
 *
 * The worker is single-threaded: nothing here blocks on the sandbox. Receiving
 * is bounded by a timer (another holder of the listener, e.g. sandbox root that
 * took PID 1's copy, may have taken the notification epoll announced), and
 * reading a sandbox process's memory or paths touches only its memory and the
 * sandbox's own mounts (no FUSE, no network file system: it cannot mount). */

#include <stdint.h>

#define NS_NOTIFY_FD 4                 /* PID 1's fd of its filter's listener */
#define NS_STATFS_PATH_MAX 4096u       /* the kernel's PATH_MAX, NUL included */
#define NS_STATFS_RECV_TIMEOUT_USEC 20000 /* a receive that finds nothing gives up then */

typedef struct NsStatfsView {
        /* The sandbox's quota (0: none) and what it uses against it, in bytes. */
        int (*quota)(void *userdata, uint64_t *ret_limit_bytes, uint64_t *ret_used_bytes);
        void *userdata;
        /* f_fsid shown for the root: the kernel's f_fsid is replaced by
         * fsid ^ (kernel's ^ root_fsid), so the root shows fsid and a nested
         * subvolume something else, but nothing of the pool's UUID. */
        uint32_t fsid[2];
        uint32_t root_fsid[2];         /* the kernel's f_fsid of the sandbox's root */
} NsStatfsView;

/* A copy of the listener that PID 1 (pidfd) holds as NS_NOTIFY_FD: -ENOENT if
 * it holds none (a sandbox from before this filter, or root inside closed
 * it), -EBADF if that fd is something else than a seccomp listener. */
int ns_statfs_listener_take(int pidfd, int *ret_fd);

/* Handles one notification of listener: 1 answered, 0 nothing to answer (it
 * was withdrawn, taken by another reader, or the caller is gone), -errno if
 * the listener itself failed (drop it). */
int ns_statfs_handle(int listener, const NsStatfsView *v);

/* Done once per worker: SIGALRM gets a handler that interrupts a receive. */
int ns_statfs_setup(void);
