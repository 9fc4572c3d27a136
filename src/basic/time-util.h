/* SPDX-License-Identifier: MIT */
#pragma once

/* The monotonic clock (CLOCK_MONOTONIC), for deadlines and durations. */
#include <stdint.h>

int64_t mono_usec(void);
int64_t mono_msec(void);
