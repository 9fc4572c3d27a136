/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fd-util.h"
#include "spawn.h"
#include "str-util.h"

static const char *const binary_dirs[] = { "/usr/sbin", "/usr/bin", "/sbin", "/bin" };

int spawn_find_binary(const char *name, char **ret) {
        if (isempty(name) || strchr(name, '/'))
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(binary_dirs); i++) {
                _cleanup_free_ char *p = strjoin(binary_dirs[i], "/", name);
                if (!p)
                        return -ENOMEM;
                if (access(p, X_OK) == 0) {
                        *ret = TAKE_PTR(p);
                        return 0;
                }
        }
        return -ENOENT;
}

/* What the child reports over the CLOEXEC pipe if it fails before execve(). */
typedef struct SpawnFailure {
        int step;
        int error;
} SpawnFailure;

enum {
        SPAWN_STEP_DUP,
        SPAWN_STEP_SIGNALS,
        SPAWN_STEP_EXEC,
};

_noreturn_ static void child(char *const argv[], int stdin_fd, int out_fd, int err_fd, int report_fd) {
        /* Between fork() and execve(): no allocation, no logging. */
        static char *const envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *) "LC_ALL=C", NULL };
        SpawnFailure f = { SPAWN_STEP_DUP, 0 };
        sigset_t all;

        if (dup2(stdin_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0)
                goto fail;
        f.step = SPAWN_STEP_SIGNALS;
        /* a helper (tar, btrfs) dies with the worker: nothing writes into the pool behind the
         * back of the next worker, which removes what the dead one left half-made */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                goto fail;
        for (int sig = 1; sig < _NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void) signal(sig, SIG_DFL);
        if (sigemptyset(&all) < 0 || sigprocmask(SIG_SETMASK, &all, NULL) < 0)
                goto fail;
        f.step = SPAWN_STEP_EXEC;
        execve(argv[0], argv, envp);
fail:
        f.error = errno;
        (void) !write(report_fd, &f, sizeof f);
        _exit(127);
}

int spawn_and_wait(char *const argv[], int stdin_fd, char *output, size_t output_size) {
        _cleanup_close_ int null_fd = -EBADF, report_r = -EBADF, report_w = -EBADF, out_r = -EBADF, out_w = -EBADF;
        SpawnFailure f = {};
        size_t n_out = 0;
        ssize_t k;
        pid_t pid;
        int status, fds[2];

        if (!argv || !argv[0] || argv[0][0] != '/')
                return -EINVAL;
        if (output && output_size > 0)
                output[0] = 0;

        if (stdin_fd < 0) {
                null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (null_fd < 0)
                        return negative_errno();
                stdin_fd = null_fd;
        }
        if (pipe2(fds, O_CLOEXEC) < 0)
                return negative_errno();
        report_r = fds[0];
        report_w = fds[1];
        if (pipe2(fds, O_CLOEXEC) < 0)
                return negative_errno();
        out_r = fds[0];
        out_w = fds[1];

        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0)
                child(argv, stdin_fd, out_w, out_w, report_w);

        report_w = safe_close(report_w);
        out_w = safe_close(out_w);

        /* Drain the output (bounded copy, the rest is discarded) until the child closes it. */
        for (;;) {
                char buf[1024];
                k = read(out_r, buf, sizeof buf);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                if (output && output_size > 0 && n_out < output_size - 1) {
                        size_t c = MIN((size_t) k, output_size - 1 - n_out);
                        memcpy(output + n_out, buf, c);
                        n_out += c;
                        output[n_out] = 0;
                }
        }

        do
                k = read(report_r, &f, sizeof f);
        while (k < 0 && errno == EINTR);

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();

        if (k == (ssize_t) sizeof f)
                return f.error > 0 ? -f.error : -EIO;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EPROTO;
        return 0;
}

int spawn_start(char *const argv[], int stdin_fd, int stdout_fd, int stderr_fd, pid_t *ret_pid) {
        _cleanup_close_ int report_r = -EBADF, report_w = -EBADF;
        SpawnFailure f = {};
        ssize_t k;
        pid_t pid;
        int fds[2];

        if (!argv || !argv[0] || argv[0][0] != '/' || stdin_fd < 0 || stdout_fd < 0 || stderr_fd < 0 || !ret_pid)
                return -EINVAL;
        if (pipe2(fds, O_CLOEXEC) < 0)
                return negative_errno();
        report_r = fds[0];
        report_w = fds[1];
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0)
                child(argv, stdin_fd, stdout_fd, stderr_fd, report_w);
        report_w = safe_close(report_w);
        do
                k = read(report_r, &f, sizeof f);
        while (k < 0 && errno == EINTR);
        if (k == (ssize_t) sizeof f) {
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                return f.error > 0 ? -f.error : -EIO;
        }
        *ret_pid = pid;
        return 0;
}

int spawn_wait(pid_t pid) {
        int status;

        if (pid <= 0)
                return -EINVAL;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EPROTO;
        return 0;
}
