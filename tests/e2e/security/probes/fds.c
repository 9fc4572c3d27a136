/* SPDX-License-Identifier: MIT */
/* File descriptors.
 *   fds list [PID]        "N -> target" for every open fd of PID (default: this
 *                         process, without the directory fd the listing uses)
 *   fds exhaust SECONDS   open /dev/null until it fails; print "opened N errno=E",
 *                         then hold them for SECONDS */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
        if (argc >= 2 && !strcmp(argv[1], "list")) {
                char dir[64];
                snprintf(dir, sizeof dir, "/proc/%s/fd", argc > 2 ? argv[2] : "self");
                DIR *d = opendir(dir);
                if (!d) {
                        printf("opendir errno=%d (%s)\n", errno, strerror(errno));
                        return 1;
                }
                for (struct dirent *de; (de = readdir(d));) {
                        char p[PATH_MAX], t[PATH_MAX];
                        if (de->d_name[0] == '.')
                                continue;
                        if (argc <= 2 && atoi(de->d_name) == dirfd(d))
                                continue;
                        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
                        ssize_t n = readlink(p, t, sizeof t - 1);
                        t[n > 0 ? n : 0] = 0;
                        printf("%s -> %s\n", de->d_name, n > 0 ? t : "?");
                }
                closedir(d);
                return 0;
        }
        if (argc >= 3 && !strcmp(argv[1], "exhaust")) {
                long n = 0;
                int e = 0;
                for (;;) {
                        int fd = open("/dev/null", O_RDONLY);
                        if (fd < 0) {
                                e = errno;
                                break;
                        }
                        n++;
                }
                printf("opened %ld errno=%d (%s)\n", n, e, strerror(e));
                fflush(stdout);
                sleep((unsigned) atoi(argv[2]));
                return 0;
        }
        return 2;
}
