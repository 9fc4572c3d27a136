/* SPDX-License-Identifier: MIT */
/* Allocates and touches MB mebibytes, one at a time, printing progress
 * every 16 MiB; prints "done" if it got them all.  memhog MB */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int main(int argc, char **argv) {
        long mb = argc > 1 ? atol(argv[1]) : 1024;
        for (long i = 1; i <= mb; i++) {
                char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED) {
                        printf("mmap failed at %ld MiB\n", i);
                        return 1;
                }
                memset(p, 0x5a, 1 << 20);
                if (i % 16 == 0) {
                        printf("%ld MiB\n", i);
                        fflush(stdout);
                }
        }
        printf("done\n");
        return 0;
}
