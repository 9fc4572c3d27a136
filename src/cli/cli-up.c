/* SPDX-License-Identifier: MIT */
/* space up / down: start spaced in the background for a state directory and
 * wait until GET /healthz answers; stop it by the pid in <state>/spaced.pid.
 * spaced writes its pid file and key itself; up only creates the state
 * directory if needed; spaced writes its log to <state>/spaced.log (--log-file:
 * reopened on SIGHUP, renamed to spaced.log.1 once larger than log_max_mb),
 * and up sends what spaced prints before it opened the file there too. */

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "cli-common.h"
#include "cli-verbs.h"
#include "fd-util.h"
#include "time-util.h"

#define CLI_UP_TIMEOUT_S 30
#define CLI_UP_TIMEOUT_MAX_S 3600
#define CLI_DOWN_TIMEOUT_MSEC 30000
#define CLI_KILL_TIMEOUT_MSEC 5000
#define CLI_POLL_MSEC 100
#define CLI_HEALTH_TIMEOUT_MSEC 1000
#define CLI_LOG_TAIL_BYTES 4096
#define CLI_LOG_TAIL_LINES 20
#define CLI_ADDR_MAX 512

static void sleep_msec(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* Whether pid is a live (not zombie) process called spaced. */
static bool pid_is_spaced(pid_t pid) {
        _cleanup_free_ char *comm = NULL, *stat = NULL;
        char proc[64];
        size_t n = 0;

        if (pid <= 1 || (kill(pid, 0) < 0 && errno != EPERM))
                return false;
        snprintf(proc, sizeof proc, "/proc/%d/comm", (int) pid);
        if (read_full_file(proc, 64, &comm, &n) < 0 || !startswith(comm, "spaced") ||
            (comm[6] != '\n' && comm[6] != 0))
                return false;
        /* A zombie nobody reaped yet has exited. */
        snprintf(proc, sizeof proc, "/proc/%d/stat", (int) pid);
        if (read_full_file(proc, 4096, &stat, &n) >= 0) {
                const char *e = strrchr(stat, ')');
                if (e && e[1] == ' ' && (e[2] == 'Z' || e[2] == 'X'))
                        return false;
        }
        return true;
}

/* The pid in <state>/spaced.pid if that process is alive and is spaced; 0 if not. */
static pid_t spaced_running(const char *state_dir) {
        _cleanup_free_ char *path = cli_path_join(state_dir, "spaced.pid"), *text = NULL;
        size_t n = 0;
        int pid;

        if (!path || read_full_file(path, 64, &text, &n) < 0)
                return 0;
        while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
                text[--n] = 0;
        if (safe_atoi(text, &pid) < 0 || !pid_is_spaced((pid_t) pid))
                return 0;
        return (pid_t) pid;
}

/* "http://HOST:PORT/..." → "HOST:PORT". */
static int listen_from_url(const char *url, char *buf, size_t size) {
        const char *rest = startswith(url, "http://");
        size_t n;

        if (!rest)
                return -EINVAL;
        n = strcspn(rest, "/");
        if (n == 0 || n >= size)
                return -EINVAL;
        memcpy(buf, rest, n);
        buf[n] = 0;
        const char *host_end = buf[0] == '[' ? strchr(buf, ']') : buf;
        if (!host_end || !strchr(host_end, ':'))
                return -EINVAL; /* no port */
        return 0;
}

/* The URL to reach a listen address (wildcards reached over loopback). */
static char *url_for_listen(const char *listen) {
        const char *port;

        if (startswith(listen, "unix:"))
                return strdup(listen);
        if ((port = startswith(listen, "0.0.0.0:")))
                return strjoin("http://127.0.0.1:", port);
        if ((port = startswith(listen, "[::]:")))
                return strjoin("http://[::1]:", port);
        if (listen[0] == ':')
                return strjoin("http://127.0.0.1", listen);
        return strjoin("http://", listen);
}

static bool healthy(const char *url) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *body = NULL;
        const HttpHead *h = NULL;
        size_t n = 0;

        if (http_client_new(url, &c) < 0)
                return false;
        http_client_set_timeout(c, CLI_HEALTH_TIMEOUT_MSEC);
        if (http_client_request(c, "GET", "/healthz", NULL, NULL, 0) < 0 || http_client_response(c, &h) < 0)
                return false;
        if (h->status != 200)
                return false;
        (void) http_client_read_body_all(c, 4096, &body, &n);
        return true;
}

static bool is_executable_file(const char *path) {
        struct stat st;
        return stat(path, &st) >= 0 && S_ISREG(st.st_mode) && access(path, X_OK) >= 0;
}

/* spaced beside this binary (or in the build tree's src/spaced, or an installed ../sbin), else on $PATH. */
static int find_spaced(char **ret) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

        if (n > 0) {
                self[n] = 0;
                char *slash = strrchr(self, '/');
                if (slash) {
                        *slash = 0;
                        static const char *const rel[] = { "spaced", "../spaced/spaced", "../sbin/spaced" };
                        for (size_t i = 0; i < ELEMENTSOF(rel); i++) {
                                _cleanup_free_ char *p = cli_path_join(self, rel[i]);
                                if (p && is_executable_file(p)) {
                                        *ret = TAKE_PTR(p);
                                        return 0;
                                }
                        }
                }
        }

        const char *path = secure_getenv("PATH");
        if (isempty(path))
                path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        while (*path) {
                size_t len = strcspn(path, ":");
                _cleanup_free_ char *dir = len > 0 ? memdup_suffix0(path, len) : strdup(".");
                _cleanup_free_ char *p = dir ? cli_path_join(dir, "spaced") : NULL;
                if (p && is_executable_file(p)) {
                        *ret = TAKE_PTR(p);
                        return 0;
                }
                path += len;
                if (*path == ':')
                        path++;
        }
        return cli_error("cannot find spaced beside %s or on $PATH", n > 0 ? self : "space");
}

/* Prints the log lines written since offset (at most the last few). */
static void print_log_tail(const char *log_path, off_t offset) {
        _cleanup_close_ int fd = open(log_path, O_RDONLY | O_CLOEXEC);
        char buf[CLI_LOG_TAIL_BYTES + 1];
        struct stat st;
        ssize_t n;
        off_t from;
        size_t lines = 0;
        char *p;

        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= offset)
                return;
        from = MAX(offset, st.st_size - (off_t) CLI_LOG_TAIL_BYTES);
        n = pread(fd, buf, CLI_LOG_TAIL_BYTES, from);
        if (n <= 0)
                return;
        buf[n] = 0;
        /* Keep the last CLI_LOG_TAIL_LINES lines. */
        p = buf + n;
        while (p > buf) {
                p--;
                if (*p == '\n' && p + 1 < buf + n && ++lines > CLI_LOG_TAIL_LINES) {
                        p++;
                        break;
                }
        }
        fprintf(stderr, "--- %s ---\n%s%s", log_path, p, buf[n - 1] == '\n' ? "" : "\n");
}

static int wait_gone(pid_t pid, unsigned timeout_msec) {
        int64_t deadline = mono_msec() + (int64_t) timeout_msec;

        while (mono_msec() < deadline) {
                /* Our own child (space up giving up) is reaped here; any other pid is gone when not running. */
                (void) waitpid(pid, NULL, WNOHANG);
                if (!pid_is_spaced(pid))
                        return 0;
                sleep_msec(CLI_POLL_MSEC);
        }
        return -ETIMEDOUT;
}

/* Stops our own child after a failed start. */
static void stop_child(pid_t pid) {
        int64_t deadline = mono_msec() + CLI_KILL_TIMEOUT_MSEC;

        (void) kill(pid, SIGTERM);
        while (mono_msec() < deadline) {
                if (waitpid(pid, NULL, WNOHANG) == pid)
                        return;
                sleep_msec(CLI_POLL_MSEC);
        }
        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);
}

enum {
        OPT_LISTEN = 1,
        OPT_TIMEOUT,
};

static const CliOption up_options[] = {
        { "listen", 0, true, OPT_LISTEN },
        { "timeout", 0, true, OPT_TIMEOUT },
        {},
};

int cli_up(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_free_ char *spaced = NULL, *url = NULL, *log_path = NULL, **args = NULL;
        _cleanup_close_ int log_fd = -EBADF, null_fd = -EBADF;
        const char *arg = NULL, *state_dir, *listen = NULL;
        char listen_buf[CLI_ADDR_MAX];
        int errpipe[2] = { -1, -1 }, status, r;
        struct stat st;
        uint64_t timeout_s = CLI_UP_TIMEOUT_S;
        off_t log_offset = 0;
        pid_t pid;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, up_options, &arg)) > 0) {
                switch (r) {
                case OPT_LISTEN:
                        listen = arg;
                        break;
                case OPT_TIMEOUT:
                        if (cli_parse_u64("timeout", arg, &timeout_s) < 0)
                                return -EINVAL;
                        if (timeout_s == 0 || timeout_s > CLI_UP_TIMEOUT_MAX_S)
                                return cli_usage_error("--timeout: must be between 1 and %d seconds", CLI_UP_TIMEOUT_MAX_S);
                        break;
                }
        }
        if (r == CLI_OPT_HELP)
                return 0;
        if (r < 0)
                return r;
        if (p.n_pos > 0 && (!p.saw_dashdash || p.dashdash_at > 0))
                return cli_usage_error("unexpected argument '%s' (spaced flags go after '--')", p.pos[0]);

        state_dir = cli_state_dir();
        if (!listen) {
                if (listen_from_url(cli_url(), listen_buf, sizeof listen_buf) < 0)
                        r = strscpy(listen_buf, sizeof listen_buf, "127.0.0.1:7070");
                listen = listen_buf;
        }
        if (isempty(listen))
                return cli_usage_error("--listen needs an address (HOST:PORT)");

        pid = spaced_running(state_dir);
        if (pid > 0) {
                printf("space is already running (pid %d, state %s)\n", (int) pid, state_dir);
                return 0;
        }

        url = url_for_listen(listen);
        if (!url)
                return cli_error_errno(-ENOMEM, "out of memory");
        if (healthy(url))
                return cli_error("something already answers at %s (another spaced?); choose --listen", url);

        r = find_spaced(&spaced);
        if (r < 0)
                return r;

        r = mkdir_p(state_dir, 0700);
        if (r < 0)
                return cli_error_errno(r, "cannot create %s: %m", state_dir);
        log_path = cli_path_join(state_dir, "spaced.log");
        if (!log_path)
                return cli_error_errno(-ENOMEM, "out of memory");
        log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
        if (log_fd < 0)
                return cli_error_errno(negative_errno(), "cannot open %s: %m", log_path);
        if (fstat(log_fd, &st) >= 0)
                log_offset = st.st_size;
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (null_fd < 0)
                return cli_error_errno(negative_errno(), "/dev/null: %m");

        /* argv prepared before fork: the child only dup2s and execs. */
        size_t n_extra = p.n_pos, k = 0;
        args = new0(char *, 8 + n_extra + 1);
        if (!args)
                return cli_error_errno(-ENOMEM, "out of memory");
        args[k++] = spaced;
        args[k++] = (char *) "--state-dir";
        args[k++] = (char *) state_dir;
        args[k++] = (char *) "--listen";
        args[k++] = (char *) listen;
        /* spaced writes it itself: reopened on SIGHUP, rotated to .1 past log_max_mb (64 MiB) */
        args[k++] = (char *) "--log-file";
        args[k++] = log_path;
        for (size_t i = 0; i < n_extra; i++)
                args[k++] = p.pos[i];
        args[k] = NULL;

        if (pipe2(errpipe, O_CLOEXEC) < 0)
                return cli_error_errno(negative_errno(), "pipe failed: %m");
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0) {
                r = negative_errno();
                safe_close(errpipe[0]);
                safe_close(errpipe[1]);
                return cli_error_errno(r, "fork failed: %m");
        }
        if (pid == 0) {
                /* Between fork and exec: no allocation, no stdio; errors go to the pipe. */
                sigset_t none;
                int err;

                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                signal(SIGPIPE, SIG_DFL);
                if (setsid() < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(log_fd, STDOUT_FILENO) < 0 ||
                    dup2(log_fd, STDERR_FILENO) < 0) {
                        err = errno;
                        (void) !write(errpipe[1], &err, sizeof err);
                        _exit(127);
                }
                execv(args[0], args);
                err = errno;
                (void) !write(errpipe[1], &err, sizeof err);
                _exit(127);
        }
        safe_close(errpipe[1]);
        int child_errno = 0;
        ssize_t got = loop_read(errpipe[0], &child_errno, sizeof child_errno);
        safe_close(errpipe[0]);
        if (got == (ssize_t) sizeof child_errno) {
                (void) waitpid(pid, NULL, 0);
                return cli_error_errno(-child_errno, "cannot run %s: %m", spaced);
        }

        int64_t deadline = mono_msec() + (int64_t) timeout_s * 1000;
        for (;;) {
                pid_t w = waitpid(pid, &status, WNOHANG);
                if (w == pid) {
                        print_log_tail(log_path, log_offset);
                        if (WIFEXITED(status))
                                return cli_error("spaced exited with code %d during start-up (log: %s)",
                                                 WEXITSTATUS(status), log_path);
                        return cli_error("spaced was killed by signal %d during start-up (log: %s)",
                                         WTERMSIG(status), log_path);
                }
                if (healthy(url))
                        break;
                if (mono_msec() >= deadline) {
                        stop_child(pid);
                        print_log_tail(log_path, log_offset);
                        return cli_error("spaced did not become healthy within %" PRIu64
                                         " s; stopped it (log: %s; a first start may need a longer --timeout)",
                                         timeout_s, log_path);
                }
                sleep_msec(CLI_POLL_MSEC);
        }

        if (arg_json) {
                _cleanup_(json_w_done) JsonWriter w = {};
                _cleanup_free_ char *text = NULL;
                size_t len;

                json_w_init(&w);
                json_w_object_begin(&w);
                json_w_kv_string(&w, "url", url);
                json_w_kv_string(&w, "state_dir", state_dir);
                json_w_kv_int(&w, "pid", pid);
                json_w_object_end(&w);
                if (json_w_finish(&w, &text, &len) < 0)
                        return cli_error_errno(-ENOMEM, "out of memory");
                return cli_print_raw(text, len);
        } else
                printf("space is up at %s (state %s)\n", url, state_dir);
        return 0;
}

int cli_down(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        const char *state_dir;
        pid_t pid;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 0, 0);
        if (r <= 0)
                return r;

        state_dir = cli_state_dir();
        pid = spaced_running(state_dir);
        if (pid <= 0) {
                printf("space is not running (state %s)\n", state_dir);
                return 0;
        }
        if (kill(pid, SIGTERM) < 0)
                return cli_error_errno(negative_errno(), "cannot stop spaced (pid %d): %m", (int) pid);
        if (wait_gone(pid, CLI_DOWN_TIMEOUT_MSEC) < 0) {
                fprintf(stderr, "space: spaced (pid %d) did not stop within %d s; killing it\n", (int) pid,
                        CLI_DOWN_TIMEOUT_MSEC / 1000);
                (void) kill(pid, SIGKILL);
                if (wait_gone(pid, CLI_KILL_TIMEOUT_MSEC) < 0)
                        return cli_error("spaced (pid %d) is still running", (int) pid);
        }
        printf("space is down\n");
        return 0;
}
