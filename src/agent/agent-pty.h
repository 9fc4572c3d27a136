/* SPDX-License-Identifier: MIT */
#pragma once

/* Pseudo terminals for EXEC {"pty":true}: the agent keeps the master, the
 * child gets the slave as stdin/stdout/stderr and controlling terminal. */

#include "macros.h"

/* Opens a master/slave pair (both O_CLOEXEC, the master non-blocking) with the given size. */
int agent_pty_open(uint16_t rows, uint16_t cols, int *ret_master, int *ret_slave);
/* TIOCSWINSZ on the master; the kernel sends SIGWINCH to the foreground group. */
int agent_pty_resize(int master, uint16_t rows, uint16_t cols);
