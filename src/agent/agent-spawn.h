/* SPDX-License-Identifier: MIT */
#pragma once

/* Starting one process: fork, then in the child (no allocation, no logging)
 * reset signals, setsid, stdio or pty, close every other fd, drop to the user,
 * chdir and execve with a PATH search. A failing step travels to the parent as
 * {step, errno} over a CLOEXEC pipe and becomes the error of agent_spawn(). */

#include <sys/types.h>

#include "macros.h"

#define AGENT_ENV_ENTRIES_MAX 16384U

typedef struct SpawnParams {
        char *const *argv;
        char *const *envp;
        const char *cwd;
        bool cwd_fallback; /* cwd was not asked for: fall back to "/" if it fails */
        uid_t uid;
        gid_t gid;
        const gid_t *groups;
        size_t n_groups;
        bool stdin_pipe; /* else stdin is /dev/null (unless pty) */
        bool pty;
        uint16_t rows, cols;
} SpawnParams;

typedef struct Spawned {
        pid_t pid;
        int stdin_fd;  /* pipe write end, or a dup of the pty master; -EBADF if none */
        int stdout_fd; /* pipe read end, or the pty master */
        int stderr_fd; /* pipe read end; -EBADF with a pty */
} Spawned;

/* Returns 0 once the child has exec'd; -errno with a message in errbuf otherwise
 * (the child is reaped). Parent ends are O_CLOEXEC and non-blocking. */
int agent_spawn(const SpawnParams *p, Spawned *ret, char *errbuf, size_t errbuf_size);

/* The environment of a process: base (the agent's own), then PATH and LANG if
 * missing, HOME/USER/LOGNAME of the user, the request's entries, and with a pty
 * TERM if still missing. */
int agent_env_build(char *const *base, const char *home, const char *user, char *const *req_env, bool pty,
                    char ***ret);
