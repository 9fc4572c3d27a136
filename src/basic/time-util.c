/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "time-util.h"

int64_t mono_usec(void) {
        struct timespec ts;

        /* CLOCK_MONOTONIC cannot fail with a valid pointer */
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t mono_msec(void) {
        return mono_usec() / 1000;
}
