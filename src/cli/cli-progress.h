/* SPDX-License-Identifier: MIT */
#pragma once

/* A progress bar on stderr for long transfers (template imports, large
 * copies): "LABEL [#####.....]  45%  1.5M / 3.4M", redrawn in place. Only
 * when stderr is a terminal and --json is off, and only for transfers of at
 * least CLI_PROGRESS_MIN bytes (or of unknown size); otherwise every call is
 * a no-op. */

#include <stdbool.h>
#include <stdint.h>

#define CLI_PROGRESS_MIN (1024U * 1024U)
#define CLI_PROGRESS_UNKNOWN UINT64_MAX

typedef struct CliProgress {
        bool on;
        const char *label;
        uint64_t total; /* CLI_PROGRESS_UNKNOWN: bytes only */
        uint64_t done;
        int64_t last_draw_msec;
} CliProgress;

void cli_progress_begin(CliProgress *p, const char *label, uint64_t total);
void cli_progress_add(CliProgress *p, uint64_t n);
/* The last state and a newline (nothing if it was off). */
void cli_progress_end(CliProgress *p);
/* For callbacks: cli_progress_add with a CliProgress as userdata. */
void cli_progress_callback(void *userdata, size_t n);
