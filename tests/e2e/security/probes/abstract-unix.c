/* SPDX-License-Identifier: MIT */
/* Abstract unix sockets across sandboxes.
 *   abstract-unix listen NAME SECONDS   bind @NAME, print "listening", answer
 *                                       every connection with "hello from NAME"
 *   abstract-unix connect NAME          print "connected: <reply>" or "connect errno=E" */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static socklen_t addr(const char *name, struct sockaddr_un *sa) {
        size_t n = strlen(name);
        memset(sa, 0, sizeof *sa);
        sa->sun_family = AF_UNIX;
        if (n > sizeof sa->sun_path - 1)
                n = sizeof sa->sun_path - 1;
        memcpy(sa->sun_path + 1, name, n); /* sun_path[0] = 0: abstract */
        return (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int main(int argc, char **argv) {
        struct sockaddr_un sa;
        socklen_t len;
        int fd;

        if (argc < 3)
                return 2;
        len = addr(argv[2], &sa);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                printf("socket errno=%d (%s)\n", errno, strerror(errno));
                return 1;
        }
        if (!strcmp(argv[1], "listen")) {
                int secs = argc > 3 ? atoi(argv[3]) : 60;
                time_t end = time(NULL) + secs;
                if (bind(fd, (struct sockaddr *) &sa, len) < 0 || listen(fd, 16) < 0) {
                        printf("bind errno=%d (%s)\n", errno, strerror(errno));
                        return 1;
                }
                printf("listening\n");
                fflush(stdout);
                while (time(NULL) < end) {
                        struct pollfd p = { .fd = fd, .events = POLLIN };
                        if (poll(&p, 1, 200) <= 0)
                                continue;
                        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
                        if (c < 0)
                                continue;
                        char msg[200];
                        int n = snprintf(msg, sizeof msg, "hello from %s", argv[2]);
                        (void) !write(c, msg, (size_t) n);
                        close(c);
                }
                return 0;
        }
        if (connect(fd, (struct sockaddr *) &sa, len) < 0) {
                printf("connect errno=%d (%s)\n", errno, strerror(errno));
                return 0;
        }
        char buf[256];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = 0;
        printf("connected: %s\n", buf);
        return 0;
}
