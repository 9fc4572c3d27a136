/* SPDX-License-Identifier: MIT */
/* The `btrfs send` processes that ship a pool's subvolumes, and their
 * cancellation: see pool.h. While a send reads a subvolume (the item it
 * streams, or the parent of an incremental stream), the kernel refuses to
 * delete that subvolume (-EPERM: "attempt to delete subvolume during send").
 * A delete must win (the user asked for it; a copy on another host can be
 * shipped again), so pool_remove_entry() cancels the sends that read what it
 * removes before it tries again.
 *
 * The sends run in the node's process (its gateway thread answers the
 * controller's ship requests) while removals run in the worker process it
 * forked, so a send is found where the kernel shows it: a process whose
 * parent is this process or its parent, running `btrfs send` with an argument
 * within the path removed. A send of the same subvolume that someone else
 * started (an operator's backup) is never touched: the removal fails. */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "pool-internal.h"
#include "spawn.h"
#include "str-util.h"
#include "time-util.h"

/* How long cancelled sends may take to exit (they were sent SIGKILL). */
#define SHIP_SEND_CANCEL_WAIT_MSEC 5000
/* At most this many sends cancelled in one call (a pool ships a handful at once). */
#define SHIP_SEND_CANCEL_MAX 32U
/* A send's command line: the binary, its options and two paths in the pool. */
#define SHIP_SEND_CMDLINE_MAX (3U * PATH_MAX + 64U)

int pool_ship_send_start(Pool *p, const char *path, const char *parent_path, int out_fd, int err_fd,
                         pid_t *ret_pid) {
        _cleanup_free_ char *btrfs = NULL;
        _cleanup_close_ int null_fd = -EBADF;
        char *argv[8];
        size_t n = 0;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (p->kind != POOL_BTRFS)
                return -EOPNOTSUPP;
        if (isempty(path) || !ret_pid)
                return -EINVAL;
        r = spawn_find_binary("btrfs", &btrfs);
        if (r < 0)
                return r;
        /* pool_ship_sends_cancel() recognises a send by this command line */
        argv[n++] = btrfs;
        argv[n++] = (char *) "send";
        argv[n++] = (char *) "-q";
        if (parent_path) {
                argv[n++] = (char *) "-p";
                argv[n++] = (char *) parent_path;
        }
        argv[n++] = (char *) "--";
        argv[n++] = (char *) path;
        argv[n] = NULL;
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (null_fd < 0)
                return negative_errno();
        return spawn_start(argv, null_fd, out_fd, err_fd, ret_pid);
}

/* true if arg (a path a send reads) is path or within it */
static bool within(const char *arg, const char *path) {
        _cleanup_free_ char *real = realpath(arg, NULL);
        const char *rest = real ? startswith(real, path) : NULL;
        return rest && (rest[0] == '\0' || rest[0] == '/');
}

static bool started_by_us(pid_t pid) {
        char fn[64], buf[512];
        _cleanup_close_ int fd = -EBADF;
        const char *close_paren;
        ssize_t k;
        int ppid;

        snprintf(fn, sizeof fn, "/proc/%d/stat", (int) pid);
        fd = open(fn, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        k = read(fd, buf, sizeof buf - 1);
        if (k <= 0)
                return false;
        buf[k] = '\0';
        /* "pid (comm) state ppid ...": comm may hold anything, the last ')' ends it */
        close_paren = strrchr(buf, ')');
        if (!close_paren || sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
                return false;
        return ppid == (int) getpid() || ppid == (int) getppid();
}

/* true if pid is a send this process or its parent started that reads path */
static bool is_our_send_of(pid_t pid, const char *path) {
        char fn[64], buf[SHIP_SEND_CMDLINE_MAX + 1];
        _cleanup_close_ int fd = -EBADF;
        const char *argv[8] = {}, *base;
        size_t argc = 0, len;
        ssize_t k;

        if (!started_by_us(pid))
                return false;
        snprintf(fn, sizeof fn, "/proc/%d/cmdline", (int) pid);
        fd = open(fn, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        k = loop_read(fd, buf, sizeof buf);
        if (k <= 0 || (size_t) k >= sizeof buf || buf[k - 1] != '\0')
                return false;
        len = (size_t) k;
        for (size_t i = 0; i < len && argc < ELEMENTSOF(argv); i += strlen(buf + i) + 1)
                argv[argc++] = buf + i;
        if (argc < 5 || argc >= ELEMENTSOF(argv) || !streq(argv[1], "send") || !streq(argv[2], "-q"))
                return false;
        base = strrchr(argv[0], '/');
        if (!streq(base ? base + 1 : argv[0], "btrfs"))
                return false;
        if (argc == 5) /* btrfs send -q -- path */
                return streq(argv[3], "--") && within(argv[4], path);
        if (argc == 7) /* btrfs send -q -p parent -- path */
                return streq(argv[3], "-p") && streq(argv[5], "--") &&
                       (within(argv[4], path) || within(argv[6], path));
        return false;
}

int pool_ship_sends_cancel(const char *path) {
        _cleanup_(closedirp_) DIR *d = NULL;
        int pidfds[SHIP_SEND_CANCEL_MAX];
        size_t n = 0;
        struct dirent *de;
        int64_t end;

        if (isempty(path))
                return -EINVAL;
        d = opendir("/proc");
        if (!d)
                return negative_errno();
        while (n < ELEMENTSOF(pidfds) && (de = readdir(d))) {
                char *e;
                long pid = strtol(de->d_name, &e, 10);
                int pidfd;

                if (*e != '\0' || pid <= 0 || pid == getpid())
                        continue;
                /* the pidfd first: what is checked next is this process, or it is gone and signalling it is a no-op */
                pidfd = (int) syscall(SYS_pidfd_open, (pid_t) pid, 0);
                if (pidfd < 0)
                        continue;
                if (!is_our_send_of((pid_t) pid, path)) {
                        safe_close(pidfd);
                        continue;
                }
                log_info("Cancelling the btrfs send (pid %ld) reading %s: it is being removed", pid, path);
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                pidfds[n++] = pidfd;
        }
        /* readable once the process exited: its ioctl is over */
        end = mono_msec() + SHIP_SEND_CANCEL_WAIT_MSEC;
        for (size_t i = 0; i < n; i++) {
                struct pollfd pfd = { .fd = pidfds[i], .events = POLLIN };
                if (poll(&pfd, 1, (int) MAX(end - mono_msec(), (int64_t) 0)) <= 0)
                        log_warning("A cancelled btrfs send reading %s has not exited yet", path);
                safe_close(pidfds[i]);
        }
        return (int) n;
}
