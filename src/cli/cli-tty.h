/* SPDX-License-Identifier: MIT */
#pragma once

/* The local terminal for space shell / exec --tty: raw mode that is restored
 * on every exit path (normal return, exit(), SIGTERM/SIGHUP/SIGINT/SIGQUIT),
 * the window size, and SIGWINCH as a readable fd. */

#include "macros.h"

/* Puts fd (a terminal) in raw mode. Returns 1 if it did, 0 if fd is not a terminal. */
int cli_tty_raw_begin(int fd);
/* Restores the saved mode; safe to call more than once and from signal handlers. */
void cli_tty_restore(void);

/* The size of the first of stdin/stdout/stderr that is a terminal; -ENOTTY if none. */
int cli_tty_size(unsigned *ret_rows, unsigned *ret_cols);

/* Installs a SIGWINCH handler and returns a non-blocking fd that becomes
 * readable on every window change (drain it with cli_tty_winch_drain). */
int cli_tty_winch_fd(int *ret_fd);
void cli_tty_winch_drain(int fd);
