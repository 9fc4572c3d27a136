/* SPDX-License-Identifier: MIT */
/* spaced's log in a file (log_file; what space up sets): the file is opened
 * over stdout and stderr, so this process's lines (and a sanitizer's report)
 * go there; the worker's (and its gateway's and spawner's) come through a
 * pipe that a thread copies into it, so that theirs follow the file when it
 * is reopened or rotated. SIGHUP reopens it (after logrotate moved it away);
 * once it is larger than log_max_mb it is renamed to FILE.1 (one older file
 * is kept) and begun anew. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log-file.h"
#include "log.h"
#include "str-util.h"

#define LOG_FILE_CHECK_MSEC 1000         /* how often the size is looked at */
#define LOG_FILE_PIPE_BYTES (1024 * 1024) /* what the children may write ahead of the copier */

static char log_path[PATH_MAX];
static uint64_t log_max_bytes;
static int wake_fds[2] = { -EBADF, -EBADF };
static int pipe_read_fd = -EBADF;

/* Opens log_path over stdout and stderr (dup2 is atomic: a writer writes to
 * the old file or the new one, never to nothing). */
static int reopen(void) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return negative_errno();
        if (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) {
                int r = negative_errno();
                close(fd);
                return r;
        }
        close(fd);
        return 0;
}

static void rotate_if_large(void) {
        char old[PATH_MAX + 8];
        struct stat st;
        int r;

        if (log_max_bytes == 0 || fstat(STDERR_FILENO, &st) < 0 || (uint64_t) st.st_size <= log_max_bytes)
                return;
        snprintf(old, sizeof old, "%s.1", log_path);
        if (rename(log_path, old) < 0) {
                r = negative_errno();
                log_warning_errno(r, "Cannot rotate the log %s: %m", log_path);
                return;
        }
        r = reopen();
        if (r < 0)
                log_warning_errno(r, "Cannot open the log %s again: %m (still writing to %s)", log_path, old);
        else
                log_info("Log rotated: the earlier lines are in %s (log_max_mb reached)", old);
}

static void *copier(void *userdata) {
        _cleanup_free_ char *buf = malloc(65536);

        (void) userdata;
        if (!buf)
                return NULL;
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = pipe_read_fd, .events = POLLIN },
                        { .fd = wake_fds[0], .events = POLLIN },
                };
                int n = poll(p, 2, LOG_FILE_CHECK_MSEC);
                if (n < 0 && errno != EINTR)
                        return NULL;
                if (n > 0 && p[1].revents) {
                        char drain[64];
                        while (read(wake_fds[0], drain, sizeof drain) > 0)
                                ;
                        int r = reopen();
                        if (r < 0)
                                log_warning_errno(r, "Cannot reopen the log %s: %m", log_path);
                        else
                                log_info("Log reopened (SIGHUP)");
                }
                if (n > 0 && (p[0].revents & POLLIN)) {
                        ssize_t k = read(pipe_read_fd, buf, 65536);
                        if (k > 0)
                                (void) loop_write(STDERR_FILENO, buf, (size_t) k);
                }
                rotate_if_large();
        }
}

int log_file_open(const char *path, uint64_t max_bytes, int *ret_child_fd) {
        pthread_t t;
        int fds[2], r;

        if (strscpy(log_path, sizeof log_path, path) < 0)
                return -ENAMETOOLONG;
        log_max_bytes = max_bytes;
        r = reopen();
        if (r < 0)
                return r;
        if (pipe2(wake_fds, O_CLOEXEC | O_NONBLOCK) < 0)
                return negative_errno();
        if (pipe2(fds, O_CLOEXEC) < 0)
                return negative_errno();
        (void) fcntl(fds[1], F_SETPIPE_SZ, LOG_FILE_PIPE_BYTES);
        /* a writer never waits for the copier (a stopped spaced): a line that does not fit is lost */
        (void) fd_nonblock(fds[1], true);
        pipe_read_fd = fds[0];
        r = pthread_create(&t, NULL, copier, NULL);
        if (r != 0) {
                safe_close(fds[0]);
                safe_close(fds[1]);
                pipe_read_fd = -EBADF;
                return -r;
        }
        (void) pthread_detach(t);
        *ret_child_fd = fds[1];
        return 0;
}

void log_file_reopen_request(void) {
        if (wake_fds[1] >= 0)
                (void) !write(wake_fds[1], "h", 1);
}
