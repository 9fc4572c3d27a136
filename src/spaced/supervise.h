/* SPDX-License-Identifier: MIT */
#pragma once

#include "api.h"

/* Role all: the worker process, started again whenever it dies (supervise.c). */
typedef struct Supervisor Supervisor;

/* Starts the worker ("spaced worker-process" with daemon_argv's options;
 * log_fd: its stdout and stderr, -EBADF for spaced's; lock_fd: spaced's
 * flocked spaced.pid, which the worker holds too, so that no new spaced
 * starts on the state dir while a worker of the old one lives) and returns once it
 * serves, or fails if it died or hung before that (spaced does not start
 * then). From then on a thread starts it again whenever it dies. */
int supervise_start(char **daemon_argv, int log_fd, int lock_fd, Supervisor **ret);
/* What the API reads (valid until supervise_stop). */
ApiWorkerStatus *supervise_status(Supervisor *s);
/* Stops the worker (SIGTERM, waits for it) and the supervision; NULL. */
Supervisor *supervise_stop(Supervisor *s);
