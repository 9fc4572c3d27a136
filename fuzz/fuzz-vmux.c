/* SPDX-License-Identifier: MIT */
/* vmux links as they arrive from a hostile peer: the header decoder on every
 * offset, then the whole multiplexer (vmux_run in a thread, on a socketpair)
 * fed the input as the other side's frames. The first byte picks the side
 * under attack: the host (frames from a guest, the usual direction of hostile
 * bytes) or the guest. The host side first sees a real HELLO and a real
 * connection on its listening socket, so the input reaches an open channel
 * (id 1) instead of bouncing off unknown ids. Properties: no crash or leak
 * (the sanitizers), vmux_run ends at the link's EOF with 0, or -EPROTO for
 * a broken protocol (or the link's own errors), and a decoded header is
 * always within the limits. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz-check.h"
#include "vmux.h"

#define FUZZ_VMUX_INPUT_MAX (512U * 1024U) /* past a channel's window */
#define FUZZ_VMUX_WAIT_MSEC 2000

typedef struct Run {
        VmuxConfig cfg;
        int r;
} Run;

static void *run_thread(void *p) {
        Run *run = p;
        run->r = vmux_run(&run->cfg);
        return NULL;
}

/* A unix listener at dir/s. */
static int listener(const char *dir, struct sockaddr_un *ret_sa) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        CHECK(fd >= 0);
        CHECK((size_t) snprintf(sa.sun_path, sizeof sa.sun_path, "%s/s", dir) < sizeof sa.sun_path);
        CHECK(bind(fd, (struct sockaddr *) &sa, sizeof sa) == 0);
        CHECK(listen(fd, 64) == 0);
        *ret_sa = sa;
        return fd;
}

static int acceptor_fd = -1;
static volatile int acceptor_stop;

/* The guest's agent: accepts each channel's connection and closes it (which
 * the guest reports as the channel's EOF), until told to stop (a flag, then
 * one more connection to wake it). */
static void *acceptor_thread(void *p) {
        (void) p;
        for (;;) {
                int fd = accept4(acceptor_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd >= 0)
                        close(fd);
                else if (errno != EINTR && errno != ECONNABORTED)
                        return NULL;
                if (__atomic_load_n(&acceptor_stop, __ATOMIC_SEQ_CST))
                        return NULL;
        }
}

/* Reads until a frame header of `type` has been seen on fd (the host's OPEN
 * of our connection), or the wait ran out. */
static bool wait_frame(int fd, uint32_t type) {
        uint8_t buf[VMUX_HEADER_SIZE + VMUX_DATA_MAX];
        size_t n = 0;

        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;
                if (poll(&p, 1, FUZZ_VMUX_WAIT_MSEC) <= 0)
                        return false;
                k = read(fd, buf + n, sizeof buf - n);
                if (k <= 0)
                        return false;
                n += (size_t) k;
                while (n >= VMUX_HEADER_SIZE) {
                        uint32_t id, t, len;
                        if (vmux_header_get(buf, n, &id, &t, &len) < 0 || n < VMUX_HEADER_SIZE + len)
                                break;
                        if (t == type)
                                return true;
                        memmove(buf, buf + VMUX_HEADER_SIZE + len, n - VMUX_HEADER_SIZE - len);
                        n -= VMUX_HEADER_SIZE + len;
                }
        }
}

static void check_headers(const uint8_t *data, size_t size) {
        for (size_t off = 0; off < size; off++) {
                uint32_t id, type, len;
                int r = vmux_header_get(data + off, size - off, &id, &type, &len);
                if (r == 0)
                        CHECK(type > 0 && type < _VMUX_TYPE_MAX && len <= VMUX_DATA_MAX);
                else
                        CHECK(r == -EAGAIN || r == -EBADMSG);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char dir[] = "/tmp/space-fuzz-vmux-XXXXXX";
        struct sockaddr_un sa;
        int link[2], lfd, client = -1;
        pthread_t t, acceptor;
        Run run = {};
        bool host;

        if (size < 1 || size > FUZZ_VMUX_INPUT_MAX)
                return 0;
        check_headers(data + 1, size - 1);
        host = (data[0] & 1) == 0;
        data++, size--;

        CHECK(mkdtemp(dir));
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link) == 0);
        lfd = listener(dir, &sa);
        run.cfg = (VmuxConfig){ .role = host ? VMUX_ROLE_HOST : VMUX_ROLE_GUEST, .link_fd = link[0],
                                .listen_fd = host ? lfd : -1, .connect_path = sa.sun_path, .ready_fd = -1 };
        if (!host) {
                acceptor_fd = lfd;
                __atomic_store_n(&acceptor_stop, 0, __ATOMIC_SEQ_CST);
                CHECK(pthread_create(&acceptor, NULL, acceptor_thread, NULL) == 0);
        }
        CHECK(pthread_create(&t, NULL, run_thread, &run) == 0);

        if (host) {
                uint8_t hello[VMUX_HEADER_SIZE];
                client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                CHECK(client >= 0);
                CHECK(connect(client, (struct sockaddr *) &sa, sizeof sa) == 0);
                vmux_header_put(hello, 0, VMUX_HELLO, 0);
                CHECK(send(link[1], hello, sizeof hello, MSG_NOSIGNAL) == (ssize_t) sizeof hello);
                (void) wait_frame(link[1], VMUX_OPEN); /* channel 1 is open */
        }
        for (size_t off = 0; off < size;) {
                ssize_t k = send(link[1], data + off, size - off, MSG_NOSIGNAL);
                if (k <= 0)
                        break; /* vmux ended (a protocol error) and closed its side */
                off += (size_t) k;
        }
        (void) shutdown(link[1], SHUT_WR);
        /* read what vmux sends until it closes the link, so it never waits on us */
        for (;;) {
                uint8_t buf[65536];
                if (read(link[1], buf, sizeof buf) <= 0)
                        break;
        }
        CHECK(pthread_join(t, NULL) == 0);
        CHECK(run.r == 0 || run.r == -EPROTO || run.r == -EPIPE || run.r == -ECONNRESET || run.r == -ENOMEM);

        if (!host) {
                int wake = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                __atomic_store_n(&acceptor_stop, 1, __ATOMIC_SEQ_CST);
                CHECK(wake >= 0 && connect(wake, (struct sockaddr *) &sa, sizeof sa) == 0);
                CHECK(pthread_join(acceptor, NULL) == 0);
                close(wake);
                close(lfd);
        }
        close(link[1]);
        if (client >= 0)
                close(client);
        (void) unlink(sa.sun_path);
        (void) rmdir(dir);
        return 0;
}
