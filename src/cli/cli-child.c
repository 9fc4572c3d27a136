/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli-child.h"
#include "cli-common.h"
#include "fd-util.h"

void cli_child_done(CliChild *child) {
        if (child->pid > 0) {
                (void) kill(child->pid, SIGTERM);
                (void) waitpid(child->pid, NULL, 0);
                child->pid = 0;
        }
}

int cli_child_spawn(char *const argv[], bool write_stdin, CliChild *child, int *ret_fd) {
        int pipefd[2];
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return cli_error_errno(negative_errno(), "pipe failed: %m");
        pid = fork();
        if (pid < 0) {
                int r = negative_errno();
                safe_close(pipefd[0]);
                safe_close(pipefd[1]);
                return cli_error_errno(r, "fork failed: %m");
        }
        if (pid == 0) {
                /* Between fork and exec: no allocation, no stdio. */
                if (write_stdin ? dup2(pipefd[0], STDIN_FILENO) < 0 : dup2(pipefd[1], STDOUT_FILENO) < 0)
                        _exit(126);
                execvp(argv[0], argv);
                _exit(127);
        }
        safe_close(pipefd[write_stdin ? 0 : 1]);
        child->pid = pid;
        *ret_fd = pipefd[write_stdin ? 1 : 0];
        return 0;
}

int cli_child_wait(CliChild *child) {
        const char *name = child->name ?: "the helper";
        int status = 0;
        pid_t pid = child->pid;

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return cli_error_errno(negative_errno(), "waiting for %s failed: %m", name);
        child->pid = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
                return cli_error("could not run %s (is it installed?)", name);
        if (WIFEXITED(status))
                return cli_error("%s failed with exit code %d", name, WEXITSTATUS(status));
        return cli_error("%s was killed by signal %d", name, WTERMSIG(status));
}
