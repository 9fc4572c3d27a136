/* SPDX-License-Identifier: MIT */
/* Creates empty files in DIR until creation fails, MAX files are made or
 * SECONDS pass; prints "created N errno=E" (errno 0: stopped by MAX or time).
 *   inodes DIR MAX SECONDS */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
        long max, n = 0;
        time_t end;
        int e = 0;
        if (argc < 4)
                return 2;
        max = atol(argv[2]);
        end = time(NULL) + atoi(argv[3]);
        if (mkdir(argv[1], 0755) < 0 && errno != EEXIST) {
                printf("mkdir errno=%d (%s)\n", errno, strerror(errno));
                return 1;
        }
        for (; n < max; n++) {
                char p[4200];
                if ((n & 1023) == 0 && time(NULL) >= end)
                        break;
                /* a subdirectory per 10000 files keeps directories small */
                if (n % 10000 == 0) {
                        snprintf(p, sizeof p, "%s/d%ld", argv[1], n / 10000);
                        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
                                e = errno;
                                break;
                        }
                }
                snprintf(p, sizeof p, "%s/d%ld/f%ld", argv[1], n / 10000, n);
                int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (fd < 0) {
                        e = errno;
                        break;
                }
                close(fd);
        }
        printf("created %ld errno=%d (%s)\n", n, e, strerror(e));
        return 0;
}
