/* SPDX-License-Identifier: MIT */
/* A connection to a TCP port of a sandbox of this host (net-dial.h). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include "fd-util.h"
#include "firewall.h"
#include "net-dial.h"
#include "sock-io.h"

int net_dial_sandbox_start(const AddrPool *pool, uint32_t slot, uint16_t port, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
        unsigned mark = FIREWALL_INGRESS_MARK;
        int one = 1, r, k = 0;
        AddrPair pair;

        if (port == 0)
                return -EINVAL;
        r = addr_pool_slot(pool, slot, &pair);
        if (r < 0)
                return r;
        sa.sin_addr = pair.peer;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        /* the mark is what the firewall lets through (needs CAP_NET_ADMIN): without it, no answer comes back */
        if (setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) < 0)
                return negative_errno();
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                if (errno != EINPROGRESS)
                        return negative_errno();
                k = 1;
        }
        *ret_fd = TAKE_FD(fd);
        return k;
}

int net_dial_sandbox(const AddrPool *pool, uint32_t slot, uint16_t port, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = net_dial_sandbox_start(pool, slot, port, &fd);
        if (r < 0)
                return r;
        if (r > 0) {
                r = sock_wait(fd, POLLOUT, NET_DIAL_TIMEOUT_MSEC);
                if (r < 0)
                        return r;
                r = sock_connect_result(fd);
                if (r < 0)
                        return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}
