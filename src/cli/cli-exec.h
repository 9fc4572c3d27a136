/* SPDX-License-Identifier: MIT */
#pragma once

/* Runs one exec and streams it: the engine behind space exec and space shell. */

#include "cli-common.h"

/* The command was not found and CliExecOptions.quiet_not_found was set. */
#define CLI_EXEC_NOT_FOUND (-ENOEXEC)

typedef struct CliExecOptions {
        char **cmd;          /* argv; or NULL and shell */
        const char *shell;   /* a string for /bin/sh -c */
        char **env;          /* "K=V" */
        const char *cwd;
        const char *user;
        uint64_t timeout_s;
        bool have_timeout;
        bool pty;            /* on a pseudo-terminal, sized like the local one */
        bool interactive;    /* forward our stdin ("stdin": true + .../stdin calls) */
        bool raw;            /* raw local terminal while it runs (if stdin is one) */
        bool quiet_not_found;/* report "command not found" as CLI_EXEC_NOT_FOUND, unprinted */
        bool background;     /* "background": true; returns at the start event */
        const char *on_disconnect; /* keep, hangup, kill; NULL: kill on a terminal without a pty, else the server's */
        bool plain;          /* output to the fds below even with --json (no raw events) */
        int in_fd;           /* > 0: with interactive, stdin is read from here (else STDIN) */
        int out_fd;          /* > 0: the command's stdout goes here (else STDOUT) */
        int idle_msec;       /* > 0: a stream quiet this long after its start ends the read (*ret_code -1) */
        void (*on_output)(void *userdata, size_t n); /* bytes of stdout written */
        void (*on_input)(void *userdata, size_t n);  /* bytes of stdin sent (called from the stdin thread) */
        void *userdata;
        char *exec_id;       /* out, with background: the start event's exec id (malloc'd; the caller frees) */
} CliExecOptions;

/* Streams stdout/stderr (or with --json the raw events) and returns the
 * command's exit code in *ret_code. Errors are printed and returned < 0. */
int cli_exec_run(const char *id, CliExecOptions *o, int *ret_code);
/* Reads an exec's output (GET .../output?from=N) like cli_exec_run. */
int cli_exec_output(const char *id, const char *exec_id, uint64_t from, CliExecOptions *o, int *ret_code);
