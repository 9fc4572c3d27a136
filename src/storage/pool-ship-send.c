/* SPDX-License-Identifier: MIT */
/* The `btrfs send` processes of this process, and their cancellation: see
 * pool.h. While a send reads a subvolume (the item it streams, or the parent
 * of an incremental stream), the kernel refuses to delete that subvolume
 * (-EPERM: "attempt to delete subvolume during send"). A delete must win (the
 * user asked for it; a copy on another host can be shipped again), so every
 * send is registered here with the paths it reads, and pool_remove_entry()
 * cancels the sends that read what it removes before trying again. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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

/* How long a cancelled send may take to exit (it was sent SIGKILL). */
#define SHIP_SEND_CANCEL_WAIT_MSEC 5000

typedef struct ShipSend {
        struct ShipSend *next;
        pid_t pid;
        int pidfd;
        char *paths[2]; /* realpath()s: the item, its parent (or NULL) */
} ShipSend;

static pthread_mutex_t sends_lock = PTHREAD_MUTEX_INITIALIZER;
static ShipSend *sends;

static int64_t monotonic_msec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void ship_send_free(ShipSend *s) {
        if (!s)
                return;
        safe_close(s->pidfd);
        free(s->paths[0]);
        free(s->paths[1]);
        free(s);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ShipSend *, ship_send_free);

/* path is what or within what a removal takes away. */
static bool reads_within(const ShipSend *s, const char *path) {
        for (size_t i = 0; i < ELEMENTSOF(s->paths); i++) {
                const char *rest = s->paths[i] ? startswith(s->paths[i], path) : NULL;
                if (rest && (rest[0] == '\0' || rest[0] == '/'))
                        return true;
        }
        return false;
}

static int ship_send_new(const char *path, const char *parent_path, ShipSend **ret) {
        _cleanup_(ship_send_freep) ShipSend *s = new0(ShipSend, 1);

        if (!s)
                return -ENOMEM;
        s->pidfd = -EBADF;
        s->paths[0] = realpath(path, NULL);
        if (!s->paths[0])
                return negative_errno();
        if (parent_path) {
                s->paths[1] = realpath(parent_path, NULL);
                if (!s->paths[1])
                        return negative_errno();
        }
        *ret = TAKE_PTR(s);
        return 0;
}

int pool_ship_send_start(Pool *p, const char *path, const char *parent_path, int out_fd, int err_fd,
                         pid_t *ret_pid) {
        _cleanup_(ship_send_freep) ShipSend *s = NULL;
        _cleanup_free_ char *btrfs = NULL;
        _cleanup_close_ int null_fd = -EBADF;
        char *argv[8];
        size_t n = 0;
        pid_t pid;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (p->kind != POOL_BTRFS)
                return -EOPNOTSUPP;
        if (isempty(path) || !ret_pid)
                return -EINVAL;
        r = ship_send_new(path, parent_path, &s);
        if (r < 0)
                return r;
        r = spawn_find_binary("btrfs", &btrfs);
        if (r < 0)
                return r;
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
        r = spawn_start(argv, null_fd, out_fd, err_fd, &pid);
        if (r < 0)
                return r;
        /* Ours and not reaped yet: the pid is this process. */
        s->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (s->pidfd < 0) {
                r = negative_errno();
                (void) kill(pid, SIGKILL); /* a send nothing could cancel does not run */
                (void) spawn_wait(pid);
                return r;
        }
        s->pid = pid;
        pthread_mutex_lock(&sends_lock);
        s->next = sends;
        sends = TAKE_PTR(s);
        pthread_mutex_unlock(&sends_lock);
        *ret_pid = pid;
        return 0;
}

int pool_ship_send_wait(pid_t pid) {
        int r = spawn_wait(pid);

        pthread_mutex_lock(&sends_lock);
        for (ShipSend **i = &sends; *i; i = &(*i)->next)
                if ((*i)->pid == pid) {
                        ShipSend *s = *i;
                        *i = s->next;
                        ship_send_free(s);
                        break;
                }
        pthread_mutex_unlock(&sends_lock);
        return r;
}

int pool_ship_sends_cancel(const char *path) {
        int64_t end;
        int n = 0;

        if (isempty(path))
                return -EINVAL;
        /* The lock is held until the sends have exited: their owners only
         * take it after reaping them, to forget them. */
        pthread_mutex_lock(&sends_lock);
        for (ShipSend *s = sends; s; s = s->next)
                if (reads_within(s, path)) {
                        log_info("Cancelling the send of %s: it is being removed", s->paths[0]);
                        (void) syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
                        n++;
                }
        end = monotonic_msec() + SHIP_SEND_CANCEL_WAIT_MSEC;
        for (ShipSend *s = sends; s && n > 0; s = s->next) {
                struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };
                int64_t left = end - monotonic_msec();
                if (!reads_within(s, path))
                        continue;
                /* readable once the process exited: its ioctl is over */
                if (poll(&pfd, 1, (int) MAX(left, (int64_t) 0)) <= 0)
                        log_warning("The cancelled send of %s (pid %d) has not exited yet", s->paths[0],
                                    (int) s->pid);
        }
        pthread_mutex_unlock(&sends_lock);
        return n;
}
