/* SPDX-License-Identifier: MIT */
/* Forks up to N children that sleep (pause) and prints how far it got:
 * "forked K of N" and, if a fork failed, "fork errno=E". Then holds them
 * for SECONDS (children die with the parent: PDEATHSIG) and exits.
 *   procs N SECONDS */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
        long n = argc > 1 ? atol(argv[1]) : 100, k;
        unsigned secs = argc > 2 ? (unsigned) atoi(argv[2]) : 10;
        int e = 0;
        for (k = 0; k < n; k++) {
                pid_t pid = fork();
                if (pid < 0) {
                        e = errno;
                        break;
                }
                if (pid == 0) {
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        if (getppid() == 1)
                                _exit(0);
                        for (;;)
                                pause();
                }
        }
        printf("forked %ld of %ld\n", k, n);
        if (e)
                printf("fork errno=%d (%s)\n", e, strerror(e));
        fflush(stdout);
        sleep(secs);
        return 0;
}
