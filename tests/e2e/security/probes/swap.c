/* SPDX-License-Identifier: MIT */
/* The TOCTOU attacker of a file read: for SECONDS, keeps replacing PATH
 * (atomically, by rename) with either a regular file holding "decoy\n" or a
 * symlink to one of the TARGETs, as fast as it can.
 *   swap SECONDS PATH TARGET... */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
        char tmp_file[4200], tmp_link[4200];
        unsigned long swaps = 0;
        time_t end;

        if (argc < 4)
                return 2;
        end = time(NULL) + atoi(argv[1]);
        snprintf(tmp_file, sizeof tmp_file, "%s.f", argv[2]);
        snprintf(tmp_link, sizeof tmp_link, "%s.l", argv[2]);
        printf("swapping\n");
        fflush(stdout);
        for (int i = 0; time(NULL) < end; i++) {
                int fd = open(tmp_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd >= 0) {
                        (void) !write(fd, "decoy\n", 6);
                        close(fd);
                        rename(tmp_file, argv[2]);
                }
                unlink(tmp_link);
                if (symlink(argv[3 + i % (argc - 3)], tmp_link) == 0)
                        rename(tmp_link, argv[2]);
                swaps += 2;
        }
        printf("swaps %lu\n", swaps);
        return 0;
}
