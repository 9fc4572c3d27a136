/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli-common.h"
#include "cli-progress.h"
#include "time-util.h"

#define CLI_PROGRESS_REDRAW_MSEC 100
#define CLI_PROGRESS_WIDTH 30

static void progress_draw(CliProgress *p) {
        char done[32], total[32];

        cli_format_size(p->done, done, sizeof done);
        if (p->total == CLI_PROGRESS_UNKNOWN) {
                fprintf(stderr, "\r%s  %s sent\033[K", p->label, done);
        } else {
                uint64_t pct = p->total > 0 ? MIN(p->done, p->total) * 100 / p->total : 100;
                size_t fill = (size_t) (pct * CLI_PROGRESS_WIDTH / 100);
                char bar[CLI_PROGRESS_WIDTH + 1];

                for (size_t i = 0; i < CLI_PROGRESS_WIDTH; i++)
                        bar[i] = i < fill ? '#' : '.';
                bar[CLI_PROGRESS_WIDTH] = 0;
                cli_format_size(p->total, total, sizeof total);
                fprintf(stderr, "\r%s [%s] %3u%%  %s / %s\033[K", p->label, bar, (unsigned) pct, done, total);
        }
        fflush(stderr);
        p->last_draw_msec = mono_msec();
}

void cli_progress_begin(CliProgress *p, const char *label, uint64_t total) {
        *p = (CliProgress){
                .label = label,
                .total = total,
                .on = !arg_json && isatty(STDERR_FILENO) &&
                      (total == CLI_PROGRESS_UNKNOWN || total >= CLI_PROGRESS_MIN),
        };
        if (p->on)
                progress_draw(p);
}

void cli_progress_add(CliProgress *p, uint64_t n) {
        if (!p || !p->on)
                return;
        p->done += n;
        if (mono_msec() - p->last_draw_msec >= CLI_PROGRESS_REDRAW_MSEC)
                progress_draw(p);
}

void cli_progress_callback(void *userdata, size_t n) {
        cli_progress_add(userdata, n);
}

void cli_progress_end(CliProgress *p) {
        if (!p->on)
                return;
        progress_draw(p);
        fputc('\n', stderr);
        fflush(stderr);
        p->on = false;
}
