/* SPDX-License-Identifier: MIT */
/* Stream-socket plumbing with deadlines (sock-io.h). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <time.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "macros.h"
#include "sock-io.h"
#include "time-util.h"

int sock_send_fds(int sock, const void *data, size_t n, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(SOCK_FDS_MAX * sizeof(int))];
        } u = {};
        struct iovec iov = { .iov_base = (void *) data, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > SOCK_FDS_MAX)
                return -E2BIG;
        if (n_fds > 0) {
                mh.msg_control = u.buf;
                mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
                memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
        }
        for (;;) {
                ssize_t k = sendmsg(sock, &mh, MSG_NOSIGNAL);
                if (k == (ssize_t) n)
                        return 0;
                if (k >= 0)
                        return -EMSGSIZE;
                if (errno != EINTR)
                        return negative_errno();
        }
}

int sock_listen_unix(const char *path, int flags, int backlog, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        size_t n = strlen(path);

        if (n >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, n + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
        if (fd < 0)
                return negative_errno();
        (void) unlink(path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return negative_errno();
        if (chmod(path, 0600) < 0 || listen(fd, backlog) < 0) {
                int r = negative_errno();
                (void) unlink(path);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int sock_connect_result(int fd) {
        int err = 0;
        socklen_t len = sizeof err;

        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                return negative_errno();
        return err != 0 ? -err : 0;
}

int sock_wait_until(int fd, short events, int64_t deadline_msec) {
        struct pollfd p = { .fd = fd, .events = events };

        for (;;) {
                int left = -1, k;
                if (deadline_msec >= 0) {
                        int64_t l = deadline_msec - mono_msec();
                        if (l <= 0)
                                return -ETIMEDOUT;
                        left = (int) MIN(l, (int64_t) INT32_MAX);
                }
                k = poll(&p, 1, left);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k > 0)
                        return 0;
        }
}

int sock_wait(int fd, short events, int timeout_msec) {
        return sock_wait_until(fd, events, timeout_msec >= 0 ? mono_msec() + timeout_msec : -1);
}

int sock_connect_until(int fd, const struct sockaddr *sa, socklen_t len, int64_t deadline_msec) {
        int r;

        if (connect(fd, sa, len) == 0)
                return 0;
        if (errno != EINPROGRESS && errno != EAGAIN && errno != EINTR)
                return negative_errno();
        r = sock_wait_until(fd, POLLOUT, deadline_msec);
        return r < 0 ? r : sock_connect_result(fd);
}

int sock_send_all(int fd, const void *p, size_t n, int timeout_msec) {
        const char *s = p;

        while (n > 0) {
                ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
                if (k < 0) {
                        int r;
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                return negative_errno();
                        r = sock_wait(fd, POLLOUT, timeout_msec);
                        if (r < 0)
                                return r;
                        continue;
                }
                s += k;
                n -= (size_t) k;
        }
        return 0;
}

ssize_t sock_recv_some(int fd, void *buf, size_t n, int timeout_msec) {
        for (;;) {
                ssize_t k = recv(fd, buf, n, 0);
                int r;
                if (k >= 0)
                        return k;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                        return negative_errno();
                r = sock_wait(fd, POLLIN, timeout_msec);
                if (r < 0)
                        return r;
        }
}

int sock_relay(int a, const void *a_pending, size_t a_pending_len, int b, const void *b_pending, size_t b_pending_len,
               size_t buffer_size, int idle_msec) {
        _cleanup_free_ char *buf = NULL;
        bool a_open = true, b_open = true;
        int r;

        r = sock_send_all(b, a_pending, a_pending_len, idle_msec);
        if (r >= 0)
                r = sock_send_all(a, b_pending, b_pending_len, idle_msec);
        if (r < 0)
                return r;
        buf = malloc(buffer_size);
        if (!buf)
                return -ENOMEM;
        while (a_open || b_open) {
                struct pollfd p[2] = { { .fd = a_open ? a : -1, .events = POLLIN },
                                       { .fd = b_open ? b : -1, .events = POLLIN } };
                int k = poll(p, 2, idle_msec);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        return -ETIMEDOUT;
                for (int i = 0; i < 2; i++) {
                        int from = i == 0 ? a : b, to = i == 0 ? b : a;
                        bool *open = i == 0 ? &a_open : &b_open;
                        ssize_t n;
                        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        n = recv(from, buf, buffer_size, MSG_DONTWAIT);
                        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                                continue;
                        if (n < 0)
                                return negative_errno();
                        if (n == 0) {
                                /* hung up both ways (closed, reset, or our own server shutting down),
                                 * not a half-close: nothing can reach it any more, so the relay ends */
                                if (p[i].revents & (POLLHUP | POLLERR))
                                        return 0;
                                *open = false;
                                (void) shutdown(to, SHUT_WR);
                                continue;
                        }
                        /* the writer stalls the reader: each direction holds one buffer at most */
                        r = sock_send_all(to, buf, (size_t) n, idle_msec);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}
