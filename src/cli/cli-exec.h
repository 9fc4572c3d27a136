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
} CliExecOptions;

/* Streams stdout/stderr (or with --json the raw events) and returns the
 * command's exit code in *ret_code. Errors are printed and returned < 0. */
int cli_exec_run(const char *id, const CliExecOptions *o, int *ret_code);
