/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "alloc-util.h"
#include "fd-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -EBADF;
}

void iovec_advance(struct iovec **iov, size_t *n_iov, size_t k) {
        while (k > 0 && *n_iov > 0) {
                size_t m = MIN(k, (*iov)->iov_len);
                (*iov)->iov_base = (uint8_t *) (*iov)->iov_base + m;
                (*iov)->iov_len -= m;
                k -= m;
                if ((*iov)->iov_len == 0) {
                        (*iov)++;
                        (*n_iov)--;
                }
        }
}

int socket_connect_unix(const char *path, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        size_t n = strlen(path);

        if (n >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, n + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int loop_write(int fd, const void *buf, size_t n) {
        const char *p = buf;
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

ssize_t loop_read(int fd, void *buf, size_t n) {
        char *p = buf;
        size_t done = 0;
        while (done < n) {
                ssize_t k = read(fd, p + done, n - done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                done += (size_t) k;
        }
        return (ssize_t) done;
}

int fd_nonblock(int fd, bool nonblock) {
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0)
                return negative_errno();
        flags = nonblock ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
        return RET_NERRNO(fcntl(fd, F_SETFL, flags)) < 0 ? negative_errno() : 0;
}

int fd_cloexec(int fd, bool cloexec) {
        int flags = fcntl(fd, F_GETFD);
        if (flags < 0)
                return negative_errno();
        flags = cloexec ? (flags | FD_CLOEXEC) : (flags & ~FD_CLOEXEC);
        return fcntl(fd, F_SETFD, flags) < 0 ? negative_errno() : 0;
}

int read_full_file(const char *path, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, allocated = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        for (;;) {
                ssize_t k;
                if (GREEDY_REALLOC(buf, allocated, n + 4096 + 1) < 0)
                        return -ENOMEM;
                k = read(fd, buf + n, allocated - n - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > max)
                        return -EFBIG;
        }
        if (!buf && !(buf = malloc(1)))
                return -ENOMEM;
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = n;
        return 0;
}

int write_string_file(const char *path, const char *s) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        return loop_write(fd, s, strlen(s));
}

int write_file_atomic(const char *path, const void *data, size_t n, mode_t mode) {
        char tmp[PATH_MAX];
        _cleanup_close_ int fd = -EBADF;
        int r;

        if ((size_t) snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int) getpid()) >= sizeof tmp)
                return -ENAMETOOLONG;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return negative_errno();
        r = loop_write(fd, data, n);
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = negative_errno();
        if (r >= 0 && fsync(fd) < 0)
                r = negative_errno();
        if (r >= 0 && rename(tmp, path) < 0)
                r = negative_errno();
        if (r < 0)
                (void) unlink(tmp);
        return r;
}

int mkdir_p(const char *path, mode_t mode) {
        char buf[PATH_MAX];
        size_t len = strlen(path);

        if (len == 0 || len >= sizeof buf)
                return -EINVAL;
        memcpy(buf, path, len + 1);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(buf, mode) < 0 && errno != EEXIST)
                        return negative_errno();
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

static int rm_rf_at(int dfd, dev_t dev) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r = 0;

        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = negative_errno();
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        int sub;
                        if (st.st_dev != dev) /* never cross into another mount */
                                continue;
                        sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0) {
                                r = negative_errno();
                                continue;
                        }
                        (void) rm_rf_at(sub, dev);
                        if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                                r = negative_errno();
                } else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
                        r = negative_errno();
        }
        return r;
}

int rm_rf(const char *path) {
        struct stat st;
        int fd;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISDIR(st.st_mode))
                return unlink(path) < 0 ? negative_errno() : 0;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        (void) rm_rf_at(fd, st.st_dev);
        if (rmdir(path) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}
