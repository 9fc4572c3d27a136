/* SPDX-License-Identifier: MIT */
#pragma once

/* Runs a helper program (tar, mkfs.btrfs) by fork+exec and waits for it. No
 * shell: argv goes to execve() as is, with a fixed environment. */

#include <sys/types.h>

#include "macros.h"

/* Bytes of the helper's stderr/stdout kept for error messages. */
#define SPAWN_OUTPUT_MAX 4096U

/* Finds name in /usr/sbin, /usr/bin, /sbin, /bin (malloc'd path) or -ENOENT. */
int spawn_find_binary(const char *name, char **ret);

/* Runs argv[0] (an absolute path) with stdin from stdin_fd (or /dev/null if
 * < 0), stdout and stderr captured; waits for it. Returns 0 if it exited 0,
 * -EPROTO if it exited non-zero or died of a signal, -errno if it could not
 * be started. If output is given, the first output_size-1 bytes of what it
 * printed are stored there (NUL-terminated) in any case. */
int spawn_and_wait(char *const argv[], int stdin_fd, char *output, size_t output_size);

/* Starts argv[0] (an absolute path) with the given stdin, stdout and stderr
 * (all required) and returns at once (after execve() succeeded, or with the
 * errno of the step that failed). The caller must spawn_wait() it. */
int spawn_start(char *const argv[], int stdin_fd, int stdout_fd, int stderr_fd, pid_t *ret_pid);
/* Waits for a spawn_start()ed child: 0 if it exited 0, -EPROTO otherwise. */
int spawn_wait(pid_t pid);
