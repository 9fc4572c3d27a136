/* SPDX-License-Identifier: MIT */
/* statfs()/fstatfs() of sandbox processes answered by the worker: the steps
 * and what they guard against are in statfs-notify.h. */
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "fd-util.h"
#include "statfs-notify.h"

#if defined(__x86_64__)
#define NS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "statfs-notify: the native audit arch of this architecture is not known"
#endif

/* The kernel's struct statfs on a 64-bit architecture (x86-64 and aarch64
 * alike), which glibc's is: written as is into the caller's buffer. */
_Static_assert(sizeof(struct statfs) == 120, "struct statfs is not the kernel's 64-bit layout");

/* openat2() with RESOLVE_IN_ROOT says EAGAIN when a rename raced with "..": tries then give up. */
#define NS_STATFS_OPEN_TRIES 4

static void on_alarm(int sig) {
        (void) sig; /* only there to interrupt a receive */
}

int ns_statfs_setup(void) {
        struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART: the ioctl returns EINTR */

        sigemptyset(&sa.sa_mask);
        return sigaction(SIGALRM, &sa, NULL) < 0 ? negative_errno() : 0;
}

int ns_statfs_listener_take(int pidfd, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        char link[64], target[64];
        ssize_t n;

        fd = (int) syscall(SYS_pidfd_getfd, pidfd, NS_NOTIFY_FD, 0);
        if (fd < 0)
                return errno == EBADF ? -ENOENT : negative_errno();
        /* root inside may have put anything at that number: only the kernel names an anon inode so */
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        n = readlink(link, target, sizeof target - 1);
        if (n < 0)
                return negative_errno();
        target[n] = 0;
        if (!streq(target, "anon_inode:seccomp notify"))
                return -EBADF;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static bool notif_valid(int listener, uint64_t id) {
        return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Receives one notification, waiting at most NS_STATFS_RECV_TIMEOUT_USEC: 1, or
 * 0 if there was none after all, or -errno. */
static int notif_recv(int listener, struct seccomp_notif *req) {
        struct itimerval arm = { .it_value = { .tv_usec = NS_STATFS_RECV_TIMEOUT_USEC } }, off = {};
        struct pollfd pfd = { .fd = listener, .events = POLLIN };
        int r, k;

        r = poll(&pfd, 1, 0);
        if (r < 0)
                return errno == EINTR ? 0 : negative_errno();
        if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))
                return -ENOTCONN; /* every process of the filter is gone */
        if (r == 0 || !(pfd.revents & POLLIN))
                return 0;

        memset(req, 0, sizeof *req); /* the kernel insists */
        if (setitimer(ITIMER_REAL, &arm, NULL) < 0)
                return negative_errno();
        r = ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req);
        k = errno;
        (void) setitimer(ITIMER_REAL, &off, NULL);
        if (r == 0)
                return 1;
        /* EINTR: someone else took it (the timer), ENOENT: the caller was interrupted first */
        return k == EINTR || k == ENOENT ? 0 : -k;
}

/* Reads the NUL-terminated path at addr in the caller's memory: 0 or the
 * errno the kernel's getname() would give. */
static int read_path(int memfd, uint64_t addr, char *buf, size_t size) {
        ssize_t n;

        if (addr > (uint64_t) INT64_MAX)
                return -EFAULT;
        n = pread(memfd, buf, size, (off_t) addr);
        if (n <= 0)
                return -EFAULT;
        if (!memchr(buf, 0, (size_t) n))
                return (size_t) n == size ? -ENAMETOOLONG : -EFAULT;
        return buf[0] ? 0 : -ENOENT;
}

static int open_in_sandbox(int procfd, const char *path) {
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int base = -EBADF;
        int fd = -1;

        /* root: the caller's root directory, which may be a chroot inside the sandbox */
        base = openat(procfd, path[0] == '/' ? "root" : "cwd", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (base < 0)
                return errno == ENOENT ? -ESRCH : negative_errno();
        for (int i = 0; i < NS_STATFS_OPEN_TRIES; i++) {
                fd = (int) syscall(SYS_openat2, base, path, &how, sizeof how);
                if (fd >= 0 || errno != EAGAIN)
                        break;
        }
        if (fd < 0)
                return errno == EAGAIN || errno == EXDEV ? -ENOENT : negative_errno();
        return fd;
}

static void apply_view(struct statfs *st, const NsStatfsView *v) {
        uint64_t limit = 0, used = 0, unit, total, free_units;
        uint32_t k0 = (uint32_t) st->f_fsid.__val[0], k1 = (uint32_t) st->f_fsid.__val[1];

        unit = st->f_frsize > 0 ? (uint64_t) st->f_frsize : (uint64_t) st->f_bsize;
        if (unit == 0)
                unit = 4096;
        if (!v->quota || v->quota(v->userdata, &limit, &used) < 0) {
                /* no figures: a full, empty-handed file system rather than the pool's */
                limit = used = 0;
                st->f_blocks = 0;
        }
        total = limit > 0 ? limit / unit : (uint64_t) st->f_blocks; /* no quota: the pool's size, static */
        free_units = used / unit >= total ? 0 : total - used / unit;
        st->f_blocks = total;
        st->f_bfree = free_units;
        st->f_bavail = free_units;
        /* btrfs has no inode table: it says 0 and 0 (kept) */
        st->f_fsid.__val[0] = (int) (v->fsid[0] ^ k0 ^ v->root_fsid[0]);
        st->f_fsid.__val[1] = (int) (v->fsid[1] ^ k1 ^ v->root_fsid[1]);
}

/* The statfs of the notification's call into *st: 0 or the errno the caller gets. */
static int emulate(const struct seccomp_notif *req, const NsStatfsView *v, int procfd, int memfd,
                   struct statfs *st) {
        _cleanup_close_ int fd = -EBADF;
        char path[NS_STATFS_PATH_MAX];
        int r;

        if (req->data.nr == __NR_statfs) {
                r = read_path(memfd, req->data.args[0], path, sizeof path);
                if (r < 0)
                        return r;
                fd = open_in_sandbox(procfd, path);
        } else {
                char name[32];
                unsigned nr = (unsigned) req->data.args[0]; /* the kernel takes an unsigned int */

                snprintf(name, sizeof name, "fd/%u", nr);
                fd = openat(procfd, name, O_PATH | O_CLOEXEC);
                if (fd < 0)
                        fd = errno == ENOENT ? -EBADF : negative_errno();
        }
        if (fd < 0)
                return fd;
        if (fstatfs(fd, st) < 0)
                return negative_errno();
        if (st->f_type == BTRFS_SUPER_MAGIC)
                apply_view(st, v);
        return 0;
}

int ns_statfs_handle(int listener, const NsStatfsView *v) {
        _cleanup_close_ int procfd = -EBADF, memfd = -EBADF;
        struct seccomp_notif req;
        struct seccomp_notif_resp resp = {};
        struct statfs st = {};
        char proc[32];
        int r;

        r = notif_recv(listener, &req);
        if (r <= 0)
                return r;
        resp.id = req.id;

        if (req.data.arch != NS_AUDIT_ARCH || (req.data.nr != __NR_statfs && req.data.nr != __NR_fstatfs)) {
                resp.error = -ENOSYS; /* the policy sends nothing else here */
                goto answer;
        }
        /* the caller's /proc directory, then proof that the pid still is the caller: from here on
         * every access goes through procfd, bound to that task even if the pid is reused */
        snprintf(proc, sizeof proc, "/proc/%u", req.pid);
        procfd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (!notif_valid(listener, req.id))
                return 0; /* gone (and the pid maybe someone else's): nobody waits for an answer */
        if (procfd >= 0)
                memfd = openat(procfd, "mem", O_RDWR | O_CLOEXEC);
        if (procfd < 0 || memfd < 0) {
                /* the caller waits: a failure of ours (EMFILE, ...) is an errno statfs may give */
                resp.error = -ENOMEM;
                goto answer;
        }

        r = emulate(&req, v, procfd, memfd, &st);
        if (r >= 0) {
                uint64_t addr = req.data.args[1];
                ssize_t n = addr > (uint64_t) INT64_MAX ? -1 : pwrite(memfd, &st, sizeof st, (off_t) addr);
                r = n == (ssize_t) sizeof st ? 0 : -EFAULT;
        }
        resp.error = r < 0 ? r : 0;
        resp.val = 0;

answer:
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
                return negative_errno();
        return 1;
}
