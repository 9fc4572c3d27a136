/* SPDX-License-Identifier: MIT */
#pragma once

#include "api.h"

/* Role all: the worker process, started again whenever it dies (supervise.c). */
typedef struct Supervisor Supervisor;

#define SUPERVISE_KEEP_FDS_MAX 4

/* Starts the worker ("spaced worker-process" with daemon_argv's options and
 * c's instance settings, which spaced derived and the worker must share;
 * log_fd: its stdout and stderr, -EBADF for spaced's; keep_fds: spaced's
 * locks (the flocked spaced.pid, the instance's registry entry), which the
 * worker holds too as fds 4.., so that no new spaced starts on the state dir
 * or over the instance's settings while a worker of the old one lives) and
 * returns once it serves, or fails if it died or hung before that (spaced
 * does not start then). From then on a thread starts it again whenever it
 * dies. */
int supervise_start(char **daemon_argv, const Config *c, int log_fd, const int *keep_fds, size_t n_keep,
                    Supervisor **ret);
/* What the API reads (valid until supervise_stop). */
ApiWorkerStatus *supervise_status(Supervisor *s);
/* Stops the worker (SIGTERM, waits for it) and the supervision; NULL. */
Supervisor *supervise_stop(Supervisor *s);
