/* SPDX-License-Identifier: MIT */
/* A stand-in for space-agent in the runtime tests: accepts on fd 3 and
 * reports what it sees from inside the sandbox, one line per connection. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
        for (;;) {
                char host[128] = "", buf[8192], map[256] = "";
                int c = accept(3, NULL, NULL), n, f;
                if (c < 0)
                        return 1;
                gethostname(host, sizeof host - 1);
                f = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
                if (f >= 0) {
                        ssize_t k = read(f, map, sizeof map - 1);
                        if (k > 0)
                                map[k] = 0;
                        close(f);
                }
                for (char *p = map; *p; p++)
                        if (*p == '\n' || *p == ' ')
                                *p = ',';
                n = snprintf(buf, sizeof buf, "pid=%d uid=%d host=%s map=%s fds=", (int) getpid(), (int) getuid(), host,
                             map);
                for (int fd = 0; fd < 1024; fd++)
                        if (fd != c && fcntl(fd, F_GETFD) >= 0)
                                n += snprintf(buf + n, sizeof buf - (size_t) n, "%d,", fd);
                n += snprintf(buf + n, sizeof buf - (size_t) n, " passwd=%s",
                              access("/etc/passwd", F_OK) == 0 ? "yes" : "no");
                n += snprintf(buf + n, sizeof buf - (size_t) n, " devnull=%s\n",
                              access("/dev/null", W_OK) == 0 ? "yes" : "no");
                (void) !write(c, buf, (size_t) n);
                close(c);
        }
}
