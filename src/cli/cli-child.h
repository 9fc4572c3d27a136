/* SPDX-License-Identifier: MIT */
#pragma once

/* A local helper process (tar) joined to us by a pipe: we read its stdout, or
 * write its stdin. Killed and reaped by cli_child_done() unless waited for. */

#include <stdbool.h>
#include <sys/types.h>

typedef struct CliChild {
        pid_t pid;
        const char *name; /* for messages, e.g. "tar" */
} CliChild;

/* Runs argv (looked up on $PATH); *ret_fd is the read end of its stdout, or
 * with write_stdin the write end of its stdin. Errors printed. */
int cli_child_spawn(char *const argv[], bool write_stdin, CliChild *child, int *ret_fd);
/* Waits for it: 0 if it exited 0, else the reason printed. */
int cli_child_wait(CliChild *child);
void cli_child_done(CliChild *child);
