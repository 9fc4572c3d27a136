/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

/* spaced's log in a file (log-file.c): opened over stdout and stderr now;
 * *ret_child_fd is what children (the worker) log into (a pipe copied into
 * the file by a thread). Renamed to PATH.1 and begun anew once larger than
 * max_bytes (0: never). Starts a thread: call it before fork-only children
 * are made, never in a process that must stay single-threaded. */
int log_file_open(const char *path, uint64_t max_bytes, int *ret_child_fd);
/* Reopens the file (it was moved away): async-signal-safe (a SIGHUP handler). */
void log_file_reopen_request(void);
