/* SPDX-License-Identifier: MIT */
/* Role all: the worker process, supervised. A thread of spaced starts it
 * (fork and exec of this binary as "spaced worker-process": spaced has
 * threads by then, and a forked copy of a threaded process may hold a lock
 * of one; the exec gives the worker a fresh, single-threaded process), waits
 * for its ready byte, and when it dies, whatever the cause, starts it again:
 * after WORKER_BACKOFF_MIN_USEC, doubling up to WORKER_BACKOFF_MAX_USEC while
 * it keeps dying soon, back to the minimum once it ran WORKER_STABLE_USEC.
 * Sandboxes do not depend on the worker process: the new one adopts them
 * (worker_reconcile, as after a crash of spaced). Meanwhile the API answers
 * what needs the worker with 503 worker_unavailable and Retry-After. The
 * first start is the daemon's: if it fails, spaced does not start. */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "supervise.h"
#include "time-util.h"

#define WORKER_READY_TIMEOUT_USEC (INT64_C(5) * 60 * 1000 * 1000) /* a first start formats the pool, imports templates */
#define WORKER_BACKOFF_MIN_USEC (INT64_C(100) * 1000)
#define WORKER_BACKOFF_MAX_USEC (INT64_C(10) * 1000 * 1000)
#define WORKER_STABLE_USEC (INT64_C(30) * 1000 * 1000)
#define WORKER_READY_FD 3 /* in the worker process: where its ready byte goes */
#define WORKER_KEEP_FD 4  /* ... and from here its copies of spaced's locks (spaced.pid, the instance's entry) */
#define CHILD_SCRATCH_FD 16
#define SUPERVISE_DERIVED_MAX 6 /* the instance settings passed on explicitly */

struct Supervisor {
        char **argv;            /* spaced worker-process first|restart OPTIONS... */
        char **owned;           /* the strings of argv allocated here */
        int log_fd;             /* the worker's stdout and stderr; -EBADF: ours */
        int keep_fds[SUPERVISE_KEEP_FDS_MAX]; /* spaced's locks: the worker holds them too */
        size_t n_keep;
        int stop_fd;            /* eventfd: spaced stops */
        pthread_t thread;
        ApiWorkerStatus status;
        pthread_mutex_t lock;   /* first_* */
        pthread_cond_t cond;
        bool first_done;
        int first_result;
};

static void set_phase(Supervisor *s, ApiWorkerPhase p) {
        atomic_store(&s->status.phase, (int) p);
        atomic_store(&s->status.since_usec, now_usec());
}

static void first_report(Supervisor *s, int r) {
        pthread_mutex_lock(&s->lock);
        if (!s->first_done) {
                s->first_done = true;
                s->first_result = r;
                pthread_cond_broadcast(&s->cond);
        }
        pthread_mutex_unlock(&s->lock);
}

/* Starts the worker process: its pid, a pidfd and the read end of its ready socket. */
static int spawn_worker(Supervisor *s, bool restart, pid_t *ret_pid, int *ret_pidfd, int *ret_ready) {
        int sp[2], pidfd;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
                return negative_errno();
        s->argv[2] = (char *) (restart ? "restart" : "first");
        pid = fork();
        if (pid < 0) {
                int r = negative_errno();
                safe_close(sp[0]);
                safe_close(sp[1]);
                return r;
        }
        if (pid == 0) {
                /* between fork and exec: async-signal-safe calls only */
                sigset_t none;
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                int ready, keep[SUPERVISE_KEEP_FDS_MAX];
                if (s->log_fd >= 0 && (dup2(s->log_fd, STDOUT_FILENO) < 0 || dup2(s->log_fd, STDERR_FILENO) < 0))
                        _exit(127);
                /* out of the way first (any may sit at 3.. now), then into place, without CLOEXEC */
                ready = fcntl(sp[1], F_DUPFD, CHILD_SCRATCH_FD);
                if (ready < 0)
                        _exit(127);
                for (size_t i = 0; i < s->n_keep; i++)
                        if ((keep[i] = fcntl(s->keep_fds[i], F_DUPFD, CHILD_SCRATCH_FD)) < 0)
                                _exit(127);
                if (dup2(ready, WORKER_READY_FD) < 0)
                        _exit(127);
                for (size_t i = 0; i < s->n_keep; i++)
                        if (dup2(keep[i], WORKER_KEEP_FD + (int) i) < 0)
                                _exit(127);
                (void) syscall(SYS_close_range, (unsigned) WORKER_KEEP_FD + (unsigned) s->n_keep, ~0U, 0U);
                execv("/proc/self/exe", s->argv);
                _exit(127);
        }
        safe_close(sp[1]);
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) {
                int r = negative_errno();
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                safe_close(sp[0]);
                return r;
        }
        *ret_pid = pid;
        *ret_pidfd = pidfd;
        *ret_ready = sp[0];
        return 0;
}

static void describe_exit(int status, char *buf, size_t size) {
        if (WIFEXITED(status))
                snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
                snprintf(buf, size, "was killed by signal SIG%s%s", sigabbrev_np(WTERMSIG(status)) ?: "?",
                         WCOREDUMP(status) ? " (core dumped)" : "");
        else
                snprintf(buf, size, "ended (status 0x%x)", (unsigned) status);
}

/* Runs one life of the worker. Returns 1 if it became ready, 0 if it died
 * before, -ECANCELED if spaced stops (the worker is stopped then); *ret_why
 * says how it ended. */
static int one_life(Supervisor *s, bool restart, int64_t died_at, char *why, size_t why_size,
                    int64_t *ret_ready_usec) {
        _cleanup_close_ int pidfd = -EBADF, ready_fd = -EBADF;
        int64_t deadline = mono_usec() + WORKER_READY_TIMEOUT_USEC;
        bool ready = false, killed = false;
        pid_t pid;
        int status = 0, r;

        r = spawn_worker(s, restart, &pid, &pidfd, &ready_fd);
        if (r < 0) {
                snprintf(why, why_size, "could not be started: %s", strerror(-r));
                return 0;
        }
        atomic_store(&s->status.pid, pid);
        set_phase(s, API_WORKER_STARTING);
        log_info("Worker process started (pid %d%s)", (int) pid, restart ? ", a restart" : "");
        for (;;) {
                struct pollfd p[3] = {
                        { .fd = pidfd, .events = POLLIN },
                        { .fd = s->stop_fd, .events = POLLIN },
                        { .fd = ready_fd, .events = POLLIN },
                };
                int64_t left = (deadline - mono_usec()) / 1000;
                int n = poll(p, ready_fd >= 0 ? 3 : 2, ready || killed ? -1 : (int) MAX(left, (int64_t) 0));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n == 0 && !ready && !killed) {
                        log_error("The worker process (pid %d) is not ready after %" PRIi64 " s; killing it",
                                  (int) pid, WORKER_READY_TIMEOUT_USEC / 1000000);
                        (void) kill(pid, SIGKILL);
                        killed = true;
                        continue;
                }
                if (n > 0 && p[1].revents) {
                        set_phase(s, API_WORKER_STOPPING);
                        (void) kill(pid, SIGTERM);
                        (void) kill(pid, SIGCONT); /* a stopped worker gets to act on it */
                        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                        atomic_store(&s->status.pid, 0);
                        return -ECANCELED;
                }
                if (n > 0 && ready_fd >= 0 && p[2].revents) {
                        char b = 0;
                        ssize_t k = read(ready_fd, &b, 1);
                        ready_fd = safe_close(ready_fd); /* EOF without the byte: it is on its way out */
                        if (k == 1 && b == 'R') {
                                ready = true;
                                *ret_ready_usec = mono_usec();
                                set_phase(s, API_WORKER_UP);
                                if (restart)
                                        log_info("The worker process (pid %d) serves again, %.0f ms after the last "
                                                 "one died (restart #%" PRIu64 ")", (int) pid,
                                                 (double) (mono_usec() - died_at) / 1000.0,
                                                 (uint64_t) atomic_load(&s->status.restarts));
                                first_report(s, 0);
                        }
                        continue;
                }
                if (n > 0 && p[0].revents) {
                        while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
                                ;
                        atomic_store(&s->status.pid, 0);
                        describe_exit(r == pid ? status : 0, why, why_size);
                        return ready;
                }
        }
}

static void *supervise_thread(void *userdata) {
        Supervisor *s = userdata;
        int64_t delay = WORKER_BACKOFF_MIN_USEC, died_at = 0;
        bool restart = false;

        log_set_context(NULL, "supervisor");
        for (;;) {
                char why[128] = "";
                int64_t ready_at = 0;
                int r = one_life(s, restart, died_at, why, sizeof why, &ready_at);

                if (r == -ECANCELED)
                        break;
                died_at = mono_usec();
                if (!restart && r == 0) {
                        /* the daemon's own start failed: spaced says so and stops */
                        log_error("The worker process %s before it was ready (see the log above)", why);
                        first_report(s, -EIO);
                        break;
                }
                if (r > 0 && died_at - ready_at >= WORKER_STABLE_USEC)
                        delay = WORKER_BACKOFF_MIN_USEC; /* it ran well: the backoff starts over */
                pthread_mutex_lock(&s->status.lock);
                (void) strscpy(s->status.last_exit, sizeof s->status.last_exit, why);
                pthread_mutex_unlock(&s->status.lock);
                atomic_store(&s->status.next_start_usec, now_usec() + delay);
                set_phase(s, API_WORKER_DOWN);
                log_error("The worker process %s%s; starting it again in %" PRIi64 " ms (restart #%" PRIu64 ")", why,
                          r > 0 ? "" : " before it was ready", delay / 1000,
                          (uint64_t) atomic_load(&s->status.restarts) + 1);
                struct pollfd p = { .fd = s->stop_fd, .events = POLLIN };
                int n;
                while ((n = poll(&p, 1, (int) (delay / 1000))) < 0 && errno == EINTR)
                        ;
                if (n > 0)
                        break;
                delay = MIN(delay * 2, WORKER_BACKOFF_MAX_USEC);
                atomic_fetch_add(&s->status.restarts, 1);
                restart = true;
        }
        set_phase(s, API_WORKER_STOPPING);
        return NULL;
}

static void strv_free_n(char **v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

int supervise_start(char **daemon_argv, const Config *c, int log_fd, const int *keep_fds, size_t n_keep,
                    Supervisor **ret) {
        _cleanup_free_ Supervisor *s = new0(Supervisor, 1);
        size_t n = 0, k = 0;
        int r;

        if (!s)
                return -ENOMEM;
        if (n_keep > SUPERVISE_KEEP_FDS_MAX)
                return -E2BIG;
        while (daemon_argv[n])
                n++;
        s->argv = new0(char *, n + 3 + SUPERVISE_DERIVED_MAX);
        s->owned = new0(char *, SUPERVISE_DERIVED_MAX);
        if (!s->argv || !s->owned) {
                free(s->argv);
                free(s->owned);
                return -ENOMEM;
        }
        s->argv[k++] = daemon_argv[0];
        s->argv[k++] = (char *) "worker-process";
        s->argv[k++] = (char *) "first";
        for (size_t i = 1; i < n; i++)
                s->argv[k++] = daemon_argv[i];
        /* what spaced derived for its instance (instance.h): the worker's configuration must be
         * the same, and it reads only the command line, the environment and the file */
        s->owned[0] = strdup_printf("--instance=%s", c->instance);
        s->owned[1] = strdup_printf("--cgroup-root=%s", c->cgroup_root);
        s->owned[2] = strdup_printf("--net-table=%s", c->net_table);
        s->owned[3] = strdup_printf("--net-link-prefix=%s", c->net_link_prefix);
        s->owned[4] = strdup_printf("--uid-base=%" PRIu64, c->uid_base);
        s->owned[5] = strdup_printf("--net-pool=%s", c->net_pool);
        for (size_t i = 0; i < SUPERVISE_DERIVED_MAX; i++) {
                if (!s->owned[i]) {
                        strv_free_n(s->owned, SUPERVISE_DERIVED_MAX);
                        free(s->argv);
                        return -ENOMEM;
                }
                s->argv[k++] = s->owned[i];
        }
        s->log_fd = log_fd;
        memcpy(s->keep_fds, keep_fds, n_keep * sizeof *keep_fds);
        s->n_keep = n_keep;
        s->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (s->stop_fd < 0) {
                strv_free_n(s->owned, SUPERVISE_DERIVED_MAX);
                free(s->argv);
                return negative_errno();
        }
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        pthread_mutex_init(&s->status.lock, NULL);
        atomic_init(&s->status.phase, API_WORKER_STARTING);
        r = pthread_create(&s->thread, NULL, supervise_thread, s);
        if (r != 0) {
                safe_close(s->stop_fd);
                strv_free_n(s->owned, SUPERVISE_DERIVED_MAX);
                free(s->argv);
                return -r;
        }
        pthread_mutex_lock(&s->lock);
        while (!s->first_done)
                pthread_cond_wait(&s->cond, &s->lock);
        r = s->first_result;
        pthread_mutex_unlock(&s->lock);
        if (r < 0) {
                (void) pthread_join(s->thread, NULL);
                safe_close(s->stop_fd);
                strv_free_n(s->owned, SUPERVISE_DERIVED_MAX);
                free(s->argv);
                return r;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

ApiWorkerStatus *supervise_status(Supervisor *s) {
        return &s->status;
}

Supervisor *supervise_stop(Supervisor *s) {
        uint64_t one = 1;

        if (!s)
                return NULL;
        (void) !write(s->stop_fd, &one, sizeof one);
        (void) pthread_join(s->thread, NULL);
        safe_close(s->stop_fd);
        strv_free_n(s->owned, SUPERVISE_DERIVED_MAX);
        free(s->argv);
        free(s);
        return NULL;
}
