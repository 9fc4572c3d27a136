/* SPDX-License-Identifier: MIT */
/* space-agent main: options, the listening socket, signals and the event loop. */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "agent.h"
#include "space-build.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"

#define AGENT_EPOLL_EVENTS 64
#define AGENT_LISTEN_BACKLOG 64

uint64_t agent_now_msec(void) {
        return (uint64_t) mono_msec();
}

int agent_source_set(Agent *a, Source *s, uint32_t events) {
        struct epoll_event ev = { .events = events, .data.ptr = s };
        int op;

        if (s->fd < 0 || s->events == events)
                return 0;
        op = s->events == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
        if (epoll_ctl(a->epoll_fd, op, s->fd, &ev) < 0)
                return log_debug_errno(errno, "epoll_ctl(%d) failed: %m", s->fd);
        s->events = events;
        return 0;
}

void agent_source_close(Agent *a, Source *s) {
        (void) agent_source_set(a, s, 0);
        s->fd = safe_close(s->fd);
        s->events = 0;
}

static void agent_accept(Agent *a) {
        for (;;) {
                int fd = accept4(a->listen_src.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno != EAGAIN)
                                log_warning_errno(errno, "accept failed: %m");
                        return;
                }
                if (a->n_conns >= AGENT_CONN_MAX) {
                        log_warning("too many connections (%u), refusing one", a->n_conns);
                        safe_close(fd);
                        continue;
                }
                (void) agent_conn_new(a, fd);
        }
}

static void agent_reap(Agent *a) {
        struct signalfd_siginfo si;
        bool terminate = false;

        for (;;) {
                ssize_t k = read(a->signal_src.fd, &si, sizeof si);
                if (k != (ssize_t) sizeof si)
                        break;
                if (si.ssi_signo != SIGCHLD)
                        terminate = true;
        }
        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);
                if (pid <= 0)
                        break;
                agent_proc_reaped(a, pid, status);
        }
        if (terminate && !a->pid1) {
                log_debug("terminating on signal");
                a->quit = true;
        }
}

static int agent_signals_setup(Agent *a) {
        struct sigaction ign = { .sa_handler = SIG_IGN };
        sigset_t mask;
        int fd;

        (void) sigaction(SIGPIPE, &ign, NULL);
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        if (a->pid1) {
                /* PID 1 of a pid namespace: nothing from inside may stop us. */
                (void) sigaction(SIGTERM, &ign, NULL);
                (void) sigaction(SIGINT, &ign, NULL);
                (void) sigaction(SIGHUP, &ign, NULL);
        } else {
                /* An ordinary process: terminate cleanly, taking our processes along. */
                sigaddset(&mask, SIGTERM);
                sigaddset(&mask, SIGINT);
                sigaddset(&mask, SIGHUP);
        }
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "sigprocmask failed: %m");
        fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0)
                return log_error_errno(errno, "signalfd failed: %m");
        a->signal_src = (Source){ .kind = SOURCE_SIGNAL, .obj = a, .fd = fd };
        return agent_source_set(a, &a->signal_src, EPOLLIN);
}

static int agent_listen_path(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (strscpy(sa.sun_path, sizeof sa.sun_path, path) < 0)
                return log_error_errno(ENAMETOOLONG, "socket path too long: %s", path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(errno, "socket failed: %m");
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
                (void) unlink(path); /* a stale socket of an earlier run */
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return log_error_errno(errno, "bind(%s) failed: %m", path);
        if (listen(fd, AGENT_LISTEN_BACKLOG) < 0)
                return log_error_errno(errno, "listen failed: %m");
        return TAKE_FD(fd);
}

/* An inherited fd: a listening socket, or one connection (socketpair, vsock, serial). */
static int agent_adopt_fd(Agent *a, int fd) {
        int listening = 0;
        socklen_t l = sizeof listening;

        if (fcntl(fd, F_GETFD) < 0)
                return log_error_errno(errno, "fd %d is not open: %m", fd);
        (void) fd_cloexec(fd, true);
        (void) fd_nonblock(fd, true);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l) < 0 || !listening) {
                a->single = true;
                return agent_conn_new(a, fd);
        }
        a->listen_src = (Source){ .kind = SOURCE_LISTEN, .obj = a, .fd = fd };
        return agent_source_set(a, &a->listen_src, EPOLLIN);
}

/* PID 1 may start without stdin/stdout/stderr; fds 0-2 must never be handed out. */
static void agent_ensure_stdio(void) {
        for (int fd = 0; fd < 3; fd++) {
                if (fcntl(fd, F_GETFD) >= 0)
                        continue;
                int n = open("/dev/null", O_RDWR | O_NOCTTY);
                if (n >= 0 && n != fd) {
                        (void) dup2(n, fd);
                        (void) close(n);
                }
        }
}

/* Not dumpable: code in the sandbox, even root of its user namespace, can then neither ptrace
 * PID 1 nor read its /proc/1/{mem,environ,fd,maps,...} (the kernel wants CAP_SYS_PTRACE over the
 * sandbox's user namespace for a process that is not dumpable, and the sandbox has none), and
 * no core dump of it is written. Set before anything is served, and kept: the agent never execs
 * and never changes its credentials (either would reset the flag); the processes it forks inherit
 * it until their execve, where the kernel makes them dumpable again, so debuggers work on the
 * user's own processes. Fails closed: an agent that cannot set it does not start. */
static int agent_no_dump(void) {
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return log_error_errno(errno, "prctl(PR_SET_DUMPABLE) failed: %m");
        if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
                return log_error_errno(EPERM, "space-agent is still dumpable");
        return 0;
}

static void agent_help(void) {
        printf("Usage: space-agent [--listen-fd N | --listen PATH]\n"
               "\n"
               "The space sandbox agent (PID 1 in every sandbox). Serves the agent protocol on\n"
               "a listening socket (default: inherited as fd 3) or on one inherited connection.\n"
               "\n"
               "  --listen-fd N   serve the socket on fd N\n"
               "  --listen PATH   create a unix socket at PATH and listen on it\n"
               "  --help          show this help\n"
               "  --version       show the version\n");
}

static void agent_loop(Agent *a) {
        struct epoll_event events[AGENT_EPOLL_EVENTS];

        while (!a->quit) {
                uint64_t now = agent_now_msec(), next = UINT64_MAX;
                int timeout = -1, n;

                /* flush and pump, then resume paused processes and run timers (which may
                 * queue EXIT frames), then flush again and set every connection's events */
                agent_conns_service(a);
                agent_procs_service(a, now, &next);
                agent_conns_service(a);
                if (a->single && a->n_conns == 0 && !a->pid1)
                        break;
                if (next != UINT64_MAX) {
                        now = agent_now_msec();
                        timeout = next <= now ? 0 : (int) MIN(next - now, (uint64_t) 60000);
                }

                n = epoll_wait(a->epoll_fd, events, AGENT_EPOLL_EVENTS, timeout);
                if (n < 0) {
                        if (errno != EINTR)
                                log_error_errno(errno, "epoll_wait failed: %m");
                        continue;
                }
                for (int i = 0; i < n; i++) {
                        Source *s = events[i].data.ptr;
                        switch (s->kind) {
                        case SOURCE_LISTEN:
                                agent_accept(a);
                                break;
                        case SOURCE_SIGNAL:
                                agent_reap(a);
                                break;
                        case SOURCE_CONN:
                                agent_conn_event(a, s->obj, events[i].events);
                                break;
                        case SOURCE_PROC_OUT:
                        case SOURCE_PROC_ERR:
                        case SOURCE_PROC_IN:
                                agent_proc_event(a, s, events[i].events);
                                break;
                        case SOURCE_WATCH:
                                agent_watch_event(a, s->obj, events[i].events);
                                break;
                        }
                }
        }
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "listen-fd", required_argument, NULL, 'f' },
                { "listen", required_argument, NULL, 'l' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'v' },
                {},
        };
        Agent agent = { .epoll_fd = -EBADF, .listen_src.fd = -EBADF, .signal_src.fd = -EBADF, .next_exec_id = 1 };
        const char *listen_path = NULL;
        int listen_fd = 3, c, r;
        bool vm = false;
        unsigned u;

        agent_ensure_stdio();
        log_set_prefix("agent");

        while (!agent_vm_is_init(argv[0]) && (c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'f':
                        if (safe_atou(optarg, &u) < 0 || u > INT32_MAX) {
                                log_error("invalid --listen-fd: %s", optarg);
                                return 1;
                        }
                        listen_fd = (int) u;
                        break;
                case 'l':
                        listen_path = optarg;
                        break;
                case 'h':
                        agent_help();
                        return 0;
                case 'v':
                        printf("space-agent %s\n", SPACE_VERSION);
                        return 0;
                default:
                        return 1;
                }
        if (optind < argc && !agent_vm_is_init(argv[0])) {
                log_error("unexpected argument: %s", argv[optind]);
                return 1;
        }

        if (agent_no_dump() < 0)
                return 1;
        agent.pid1 = getpid() == 1;
        vm = agent_vm_is_init(argv[0]);
        agent.vm = vm;
        if (vm && agent_vm_boot(&listen_path) < 0) {
                /* nothing to serve: stop the VM rather than hang (the host sees QEMU exit) */
                log_error("vm boot failed");
                return 1;
        }
        agent.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (agent.epoll_fd < 0)
                return log_error_errno(errno, "epoll_create1 failed: %m"), 1;
        if (agent_signals_setup(&agent) < 0)
                return 1;

        if (listen_path) {
                r = agent_listen_path(listen_path);
                if (r < 0)
                        return 1;
                agent.listen_src = (Source){ .kind = SOURCE_LISTEN, .obj = &agent, .fd = r };
                r = agent_source_set(&agent, &agent.listen_src, EPOLLIN);
        } else
                r = agent_adopt_fd(&agent, listen_fd);
        if (r < 0)
                return 1;
        if (vm && agent_vm_start_mux() < 0)
                return 1;

        log_debug("space-agent %s serving (pid %d)", SPACE_VERSION, (int) getpid());
        agent_loop(&agent);

        /* Only an ordinary process gets here: leave nothing behind. */
        agent_procs_kill_all(&agent);
        for (Conn *conn = agent.conns; conn; conn = conn->next)
                agent_conn_close(&agent, conn);
        agent_conns_service(&agent);
        agent_procs_free_all(&agent);
        agent_source_close(&agent, &agent.listen_src);
        agent_source_close(&agent, &agent.signal_src);
        safe_close(agent.epoll_fd);
        if (listen_path)
                (void) unlink(listen_path);
        return 0;
}
