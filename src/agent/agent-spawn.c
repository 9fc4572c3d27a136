/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>

#include "agent-pty.h"
#include "agent-spawn.h"
#include "agent.h"
#include "alloc-util.h"
#include "fd-util.h"
#include "str-util.h"

typedef enum SpawnStep {
        STEP_SIGNALS,
        STEP_SETSID,
        STEP_TTY,
        STEP_STDIO,
        STEP_FDS,
        STEP_GROUPS,
        STEP_GID,
        STEP_UID,
        STEP_CHDIR,
        STEP_EXEC,
        _STEP_MAX,
} SpawnStep;

typedef struct SpawnError {
        int32_t step;
        int32_t err;
} SpawnError;

/* ---- child side: only async-signal-safe system calls from here to execve ---- */

_noreturn_ static void child_fail(int errfd, SpawnStep step, int err) {
        SpawnError e = { .step = step, .err = err > 0 ? err : EIO };
        (void) !write(errfd, &e, sizeof e);
        _exit(127);
}

static void child_reset_signals(void) {
        struct sigaction sa = { .sa_handler = SIG_DFL };
        sigset_t all;

        for (int sig = 1; sig < _NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void) sigaction(sig, &sa, NULL); /* glibc-internal signals fail: fine */
        sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
}

/* Marks every fd >= 3 close-on-exec (the error pipe already is). */
static int child_close_fds(void) {
        struct rlimit rl;

        if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
                return 0;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return errno;
        for (rlim_t fd = 3; fd < rl.rlim_cur && fd < 65536; fd++)
                (void) fcntl((int) fd, F_SETFD, FD_CLOEXEC);
        return 0;
}

static const char *child_env_path(char *const *envp) {
        for (char *const *e = envp; e && *e; e++)
                if (strncmp(*e, "PATH=", 5) == 0)
                        return *e + 5;
        return AGENT_DEFAULT_PATH;
}

/* execvpe() semantics with the PATH of the new environment, on a stack buffer. */
static int child_exec(char *const *argv, char *const *envp) {
        const char *file = argv[0], *path, *p;
        size_t flen = strlen(file);
        bool eacces = false;
        char buf[PATH_MAX];

        if (strchr(file, '/')) {
                execve(file, argv, envp);
                return errno;
        }
        path = child_env_path(envp);
        for (p = path;; p++) {
                const char *end = strchrnul(p, ':');
                size_t dlen = (size_t) (end - p);

                if (dlen == 0) { /* empty component: the current directory */
                        buf[0] = '.';
                        dlen = 1;
                } else if (dlen < sizeof buf)
                        memcpy(buf, p, dlen);
                if (dlen + 1 + flen < sizeof buf) {
                        buf[dlen] = '/';
                        memcpy(buf + dlen + 1, file, flen + 1);
                        execve(buf, argv, envp);
                        switch (errno) {
                        case EACCES:
                                eacces = true;
                                break;
                        case ENOENT:
                        case ENOTDIR:
                        case ESTALE:
                        case ENODEV:
                        case ETIMEDOUT:
                        case ELOOP:
                        case ENAMETOOLONG:
                                break;
                        default:
                                return errno;
                        }
                }
                if (*end == 0)
                        break;
                p = end;
        }
        return eacces ? EACCES : ENOENT;
}

_noreturn_ static void child_run(const SpawnParams *p, int errfd, int in_fd, int out_fd, int err_fd) {
        int r;

        child_reset_signals();
        if (setsid() < 0)
                child_fail(errfd, STEP_SETSID, errno);
        /* Processes the agent starts are the OOM killer's first choice (+500),
         * before the agent itself (the runtime also lowers PID 1 to -998 where
         * the host lets it) and before host daemons. Raising needs no privilege. */
        {
                int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
                if (fd >= 0) {
                        (void) !write(fd, "500", 3);
                        close(fd);
                }
        }

        if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0)
                child_fail(errfd, STEP_STDIO, errno);
        if (p->pty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0)
                child_fail(errfd, STEP_TTY, errno);

        r = child_close_fds();
        if (r != 0)
                child_fail(errfd, STEP_FDS, r);

        if (geteuid() == 0) {
                if (setgroups(p->n_groups, p->groups) < 0)
                        child_fail(errfd, STEP_GROUPS, errno);
                if (setresgid(p->gid, p->gid, p->gid) < 0)
                        child_fail(errfd, STEP_GID, errno);
                if (setresuid(p->uid, p->uid, p->uid) < 0)
                        child_fail(errfd, STEP_UID, errno);
        } else if (p->uid != geteuid() || p->gid != getegid()) {
                child_fail(errfd, p->gid != getegid() ? STEP_GID : STEP_UID, EPERM);
        }

        if (chdir(p->cwd) < 0) {
                if (!p->cwd_fallback || chdir("/") < 0)
                        child_fail(errfd, STEP_CHDIR, errno);
        }

        r = child_exec(p->argv, p->envp);
        child_fail(errfd, STEP_EXEC, r);
}

/* ---- parent side ---- */

static void spawn_message(const SpawnParams *p, const SpawnError *e, char *errbuf, size_t errbuf_size) {
        const char *err = strerror(e->err);

        if (!errbuf || errbuf_size == 0)
                return;
        switch (e->step) {
        case STEP_EXEC:
                snprintf(errbuf, errbuf_size, "Failed to execute '%.512s': %s", p->argv[0], err);
                break;
        case STEP_CHDIR:
                snprintf(errbuf, errbuf_size, "Failed to change directory to '%.512s': %s", p->cwd, err);
                break;
        case STEP_GROUPS:
        case STEP_GID:
        case STEP_UID:
                snprintf(errbuf, errbuf_size, "Failed to switch to uid %u gid %u: %s", (unsigned) p->uid,
                         (unsigned) p->gid, err);
                break;
        case STEP_TTY:
                snprintf(errbuf, errbuf_size, "Failed to set the controlling terminal: %s", err);
                break;
        default:
                snprintf(errbuf, errbuf_size, "Failed to set up the process: %s", err);
        }
}

static int pipe_pair(int fds[2]) {
        return pipe2(fds, O_CLOEXEC) < 0 ? negative_errno() : 0;
}

int agent_spawn(const SpawnParams *p, Spawned *ret, char *errbuf, size_t errbuf_size) {
        _cleanup_close_ int in_r = -EBADF, in_w = -EBADF, out_r = -EBADF, out_w = -EBADF, err_r = -EBADF,
                            err_w = -EBADF, master = -EBADF, slave = -EBADF, ep_r = -EBADF, ep_w = -EBADF;
        int fds[2], r;
        SpawnError e = {};
        ssize_t k;
        pid_t pid;

        if (!p || !p->argv || !p->argv[0] || !p->envp || !p->cwd || !ret)
                return -EINVAL;

        if (p->pty) {
                r = agent_pty_open(p->rows, p->cols, &master, &slave);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size, "Failed to allocate a pseudo terminal: %s", strerror(-r));
                        return r;
                }
                in_w = fcntl(master, F_DUPFD_CLOEXEC, 3);
                if (in_w < 0)
                        return negative_errno();
        } else {
                if ((r = pipe_pair(fds)) < 0)
                        return r;
                in_r = fds[0];
                in_w = fds[1];
                if ((r = pipe_pair(fds)) < 0)
                        return r;
                out_r = fds[0];
                out_w = fds[1];
                if ((r = pipe_pair(fds)) < 0)
                        return r;
                err_r = fds[0];
                err_w = fds[1];
                if (!p->stdin_pipe) {
                        /* /dev/null; without one in the sandbox an empty pipe reads EOF just the same */
                        int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
                        in_w = safe_close(in_w);
                        if (null_fd >= 0) {
                                safe_close(in_r);
                                in_r = null_fd;
                        }
                }
        }
        if ((r = pipe_pair(fds)) < 0)
                return r;
        ep_r = fds[0];
        ep_w = fds[1];

        pid = fork();
        if (pid < 0) {
                r = negative_errno();
                snprintf(errbuf, errbuf_size, "Failed to fork: %s", strerror(-r));
                return r;
        }
        if (pid == 0) {
                if (p->pty)
                        child_run(p, ep_w, slave, slave, slave);
                child_run(p, ep_w, in_r, out_w, err_w);
        }

        ep_w = safe_close(ep_w);
        slave = safe_close(slave);
        in_r = safe_close(in_r);
        out_w = safe_close(out_w);
        err_w = safe_close(err_w);

        do
                k = read(ep_r, &e, sizeof e);
        while (k < 0 && errno == EINTR);
        if (k != 0) {
                if (k != (ssize_t) sizeof e || e.step < 0 || e.step >= _STEP_MAX || e.err <= 0)
                        e = (SpawnError){ .step = STEP_FDS, .err = k < 0 ? errno : EIO };
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                spawn_message(p, &e, errbuf, errbuf_size);
                return -e.err;
        }

        if (p->pty) {
                out_r = TAKE_FD(master);
        }
        if (in_w >= 0)
                (void) fd_nonblock(in_w, true);
        if (out_r >= 0)
                (void) fd_nonblock(out_r, true);
        if (err_r >= 0)
                (void) fd_nonblock(err_r, true);
        *ret = (Spawned){
                .pid = pid,
                .stdin_fd = TAKE_FD(in_w),
                .stdout_fd = TAKE_FD(out_r),
                .stderr_fd = TAKE_FD(err_r),
        };
        return 0;
}

/* Sets "K=V" in *l, replacing an entry with the same key. Takes entry. */
static int env_set(char ***l, char *entry) {
        const char *eq = entry ? strchr(entry, '=') : NULL;
        size_t klen;

        if (!eq)
                return free(entry), -EINVAL;
        klen = (size_t) (eq - entry) + 1;
        for (char **e = *l; e && *e; e++)
                if (strncmp(*e, entry, klen) == 0) {
                        free(*e);
                        *e = entry;
                        return 0;
                }
        if (strv_length(*l) >= AGENT_ENV_ENTRIES_MAX)
                return free(entry), -E2BIG;
        return strv_push(l, entry);
}

static bool env_has(char *const *l, const char *key) {
        size_t n = strlen(key);
        for (char *const *e = l; e && *e; e++)
                if (strncmp(*e, key, n) == 0 && (*e)[n] == '=')
                        return true;
        return false;
}

static int env_set_kv(char ***l, const char *key, const char *value) {
        char *s = strjoin(key, "=", value);
        return s ? env_set(l, s) : -ENOMEM;
}

int agent_env_build(char *const *base, const char *home, const char *user, char *const *req_env, bool pty,
                    char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        int r;

        for (char *const *e = base; e && *e; e++) {
                if (!strchr(*e, '='))
                        continue;
                char *c = strdup(*e);
                if (!c)
                        return -ENOMEM;
                r = env_set(&l, c);
                if (r < 0)
                        return r;
        }
        if (!env_has(l, "PATH") && (r = env_set_kv(&l, "PATH", AGENT_DEFAULT_PATH)) < 0)
                return r;
        if (!env_has(l, "LANG") && (r = env_set_kv(&l, "LANG", "C.UTF-8")) < 0)
                return r;
        if (home && (r = env_set_kv(&l, "HOME", home)) < 0)
                return r;
        if (user && ((r = env_set_kv(&l, "USER", user)) < 0 || (r = env_set_kv(&l, "LOGNAME", user)) < 0))
                return r;
        for (char *const *e = req_env; e && *e; e++) {
                char *c = strdup(*e);
                if (!c)
                        return -ENOMEM;
                r = env_set(&l, c);
                if (r < 0)
                        return r;
        }
        if (pty && !env_has(l, "TERM") && (r = env_set_kv(&l, "TERM", "xterm-256color")) < 0)
                return r;
        if (!l && !(l = new0(char *, 1)))
                return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}
