/* SPDX-License-Identifier: MIT */
/* The worker process: set-up and the event loop (requests: worker-dispatch.c). */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "alloc-util.h"
#include "cgroup.h"
#include "seccomp-filter.h"
#include "fd-util.h"
#include "log.h"
#include "sock-io.h"
#include "str-util.h"
#include "worker-internal.h"
#include "worker-proto.h"
#include "worker-client.h"
#include "worker.h"

#define WORKER_CLIENTS_MAX 1024
#define TAG_LISTEN 1
#define TAG_SIGNAL 2
#define WORKER_TICK_MSEC 1000
#define WORKER_STOP_REAP_MSEC 30000 /* at stop, for deleted sandboxes the kernel is still tearing down */

typedef struct Client {
        int fd;
        char *buf;
        size_t n, allocated;
        bool waiting; /* for a deferred reply (a booting create): reads nothing more until then */
} Client;

/* space-agent copied into a sealed memfd: what every sandbox executes, so
 * nothing in a sandbox can reach (or replace) the binary on the host. */
static int agent_memfd(const char *path, int *ret_fd) {
        _cleanup_close_ int in = -EBADF, fd = -EBADF;
        struct stat st;
        off_t off = 0;

        in = open(path, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return log_error_errno(errno, "Cannot open space-agent at %s: %m", path);
        if (fstat(in, &st) < 0)
                return negative_errno();
        fd = memfd_create("space-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING | 0x0010U /* MFD_EXEC */);
        if (fd < 0 && errno == EINVAL)
                fd = memfd_create("space-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return negative_errno();
        while (off < st.st_size) {
                ssize_t k = sendfile(fd, in, &off, (size_t) (st.st_size - off));
                if (k <= 0)
                        return k < 0 ? negative_errno() : -EIO;
        }
        if (fchmod(fd, 0555) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static void client_free(Worker *w, Client *c) {
        worker_boot_client_gone(w, c);
        safe_close(c->fd);
        free(c->buf);
        free(c);
}

static int client_write(Client *c, const char *out, size_t outlen) {
        int r;

        /* responses are small; the client reads them at once */
        (void) fd_nonblock(c->fd, false);
        r = loop_write(c->fd, out, outlen);
        if (r >= 0)
                r = loop_write(c->fd, "\n", 1);
        (void) fd_nonblock(c->fd, true);
        return r;
}

/* Handles each complete line buffered (until a reply is deferred). */
static int client_handle_lines(Worker *w, Client *c) {
        char *nl;

        while (!c->waiting && (nl = memchr(c->buf, '\n', c->n))) {
                JsonWriter jw;
                _cleanup_free_ char *out = NULL;
                size_t len = (size_t) (nl - c->buf), outlen = 0;
                int r;

                json_w_init(&jw);
                w->current_client = c;
                w->reply_deferred = false;
                worker_dispatch(w, c->buf, len, &jw);
                w->current_client = NULL;
                memmove(c->buf, nl + 1, c->n - len - 1);
                c->n -= len + 1;
                if (w->reply_deferred) {
                        struct epoll_event ev = { .events = 0, .data.ptr = c };
                        json_w_done(&jw); /* nothing in it */
                        w->reply_deferred = false;
                        c->waiting = true; /* hangups are still reported */
                        (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
                        return 0;
                }
                r = json_w_finish(&jw, &out, &outlen);
                if (r < 0)
                        return r;
                r = client_write(c, out, outlen);
                if (r < 0)
                        return r;
        }
        return 0;
}

void worker_client_reply_deferred(Worker *w, void *client, JsonWriter *jw) {
        struct epoll_event ev = { .events = EPOLLIN };
        _cleanup_free_ char *out = NULL;
        Client *c = client;
        size_t outlen = 0;

        c->waiting = false;
        ev.data.ptr = c;
        (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
        /* a failure shows as a hangup of the connection in the loop, which drops it */
        if (json_w_finish(jw, &out, &outlen) < 0 || client_write(c, out, outlen) < 0 ||
            client_handle_lines(w, c) < 0)
                (void) shutdown(c->fd, SHUT_RDWR);
}

/* Reads what is there; handles each complete line. Returns <0 to drop the client. */
static int client_read(Worker *w, Client *c) {
        if (c->waiting)
                return -ECONNRESET; /* only a hangup wakes a waiting connection */
        for (;;) {
                ssize_t k;
                int r;

                if (GREEDY_REALLOC(c->buf, c->allocated, c->n + 65536) < 0)
                        return -ENOMEM;
                k = read(c->fd, c->buf + c->n, c->allocated - c->n);
                if (k < 0)
                        return errno == EAGAIN ? 0 : negative_errno();
                if (k == 0)
                        return -ECONNRESET;
                c->n += (size_t) k;
                r = client_handle_lines(w, c);
                if (r < 0)
                        return r;
                if (c->waiting)
                        return 0;
                if (c->n > WORKER_LINE_MAX)
                        return -EMSGSIZE;
        }
}

static int setup_dirs(const Config *c, char *agent_dir, size_t n) {
        char p[PATH_MAX];
        int r;

        snprintf(p, sizeof p, "%s/run", c->state_dir);
        r = mkdir_p(p, 0700);
        if (r < 0)
                return log_error_errno(r, "Cannot create %s: %m", p);
        r = worker_agent_dir(c, agent_dir, n);
        if (r < 0)
                return r;
        r = mkdir_p(agent_dir, 0700);
        if (r < 0)
                return log_error_errno(r, "Cannot create %s: %m", agent_dir);
        return 0;
}

static int worker_loop(Worker *w, int lfd, int sfd) {
        Client **clients = NULL;
        size_t n_clients = 0;
        int64_t last_tick = now_usec();
        int r = 0;

        for (;;) {
                struct epoll_event evs[64];
                int n = epoll_wait(w->epoll_fd, evs, ELEMENTSOF(evs), WORKER_TICK_MSEC);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = negative_errno();
                        break;
                }
                if (now_usec() - last_tick >= WORKER_TICK_MSEC * 1000) {
                        worker_tick(w);
                        worker_net_tick(w);
                        worker_spawner_tick(w);
                        worker_boot_tick(w);
                        worker_statfs_tick(w);
                        worker_metrics_tick(w);
                        worker_adopt_tick(w);
                        last_tick = now_usec();
                }
                for (int i = 0; i < n; i++) {
                        uint64_t tag = evs[i].data.u64;
                        if (tag == TAG_SIGNAL) {
                                struct signalfd_siginfo si;
                                if (read(sfd, &si, sizeof si) == (ssize_t) sizeof si &&
                                    (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)) {
                                        log_info("Worker stopping on %s", sigabbrev_np((int) si.ssi_signo));
                                        goto out;
                                }
                        } else if (tag == WORKER_TAG_GATEWAY) {
                                worker_net_gateway_readable(w);
                        } else if (tag == WORKER_TAG_TEARDOWN) {
                                worker_teardown_collect(w);
                        } else if ((tag >> 62) == 1) {
                                worker_boot_ready(w, tag);
                        } else if ((tag >> 61) == 1) {
                                worker_statfs_readable(w, (int) (tag & 0xffffffffU));
                        } else if (tag == TAG_LISTEN) {
                                int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                                Client *c;
                                if (cfd < 0)
                                        continue;
                                if (n_clients >= WORKER_CLIENTS_MAX || !(c = calloc(1, sizeof *c))) {
                                        safe_close(cfd);
                                        continue;
                                }
                                c->fd = cfd;
                                Client **nc = realloc(clients, sizeof *clients * (n_clients + 1));
                                if (!nc) {
                                        client_free(w, c);
                                        continue;
                                }
                                clients = nc;
                                clients[n_clients++] = c;
                                struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
                                if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, cfd, &ev) < 0) {
                                        clients[--n_clients] = NULL;
                                        client_free(w, c);
                                }
                        } else if (tag >> 63) {
                                int pidfd = (int) (tag & 0xffffffffU);
                                for (size_t j = 0; j < w->n_live; j++)
                                        if (w->live[j].pidfd == pidfd) {
                                                if (w->live[j].reaping)
                                                        worker_reap_finish(w, &w->live[j]);
                                                else
                                                        worker_sandbox_died(w, &w->live[j]);
                                                break;
                                        }
                        } else {
                                Client *c = evs[i].data.ptr;
                                if (client_read(w, c) < 0) {
                                        (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
                                        for (size_t j = 0; j < n_clients; j++)
                                                if (clients[j] == c) {
                                                        clients[j] = clients[--n_clients];
                                                        break;
                                                }
                                        client_free(w, c);
                                }
                        }
                }
                /* the gateway's events that came with a reply (a policy change's cuts): now,
                 * not whenever the gateway next writes */
                worker_net_gateway_flush(w);
        }
out:
        worker_boot_cancel_all(w); /* their requests fail; the guests go */
        worker_metrics_done();
        for (size_t j = 0; j < n_clients; j++)
                client_free(w, clients[j]);
        free(clients);
        return r;
}

int worker_main(const Config *config, int ready_fd, bool restarted) {
        _cleanup_close_ int lfd = -EBADF, sfd = -EBADF;
        char sockpath[PATH_MAX];
        Worker w = { .config = config, .agent_exe_fd = -EBADF, .epoll_fd = -EBADF, .self_netns_fd = -EBADF,
                     .spawner_fd = -EBADF, .roots_fd = -EBADF, .restarted = restarted };
        sigset_t mask;
        int r;

        log_set_prefix("worker");
        (void) prctl(PR_SET_NAME, "space-worker");
        /* if spaced dies, stop too (sandboxes keep running; the next start adopts them) */
        (void) prctl(PR_SET_PDEATHSIG, SIGTERM);

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        sigdelset(&mask, SIGCHLD); /* children are reaped through pidfds */
        sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                return log_error_errno(errno, "signalfd: %m");

        r = worker_dispatch_check();
        if (r < 0)
                return r;
        r = setup_dirs(config, w.agent_dir, sizeof w.agent_dir);
        if (r < 0)
                return r;
        {
                char kdir[PATH_MAX];
                if (isempty(config->vm_kernel_dir))
                        snprintf(kdir, sizeof kdir, "%s/vm/kernel", config->state_dir);
                else
                        (void) strscpy(kdir, sizeof kdir, config->vm_kernel_dir);
                r = agent_memfd(config->agent_path, &w.agent_exe_fd);
                if (r < 0)
                        return r;
                RuntimeHost host = { .state_dir = config->state_dir, .run_dir = w.agent_dir, .vm_kernel_dir = kdir,
                                     .vm_accel = config->vm_accel, .vm_qemu = config->vm_qemu,
                                     .vm_kvm_device = config->vm_kvm_device,
                                     .agent_exe_fd = w.agent_exe_fd };
                /* the default must run here; another is offered where its probe passes */
                for (size_t i = 0; i < RUNTIMES_MAX; i++) {
                        const RuntimeOps *rt = runtime_nth(i);
                        r = rt->probe(&host, w.runtime_why[i], sizeof w.runtime_why[i]);
                        if (r < 0 && i == 0)
                                return r;
                        if (r >= 0)
                                w.runtimes[i] = rt;
                }
                w.runtime = w.runtimes[0];
        }
        r = cgroup_setup(config->cgroup_root);
        if (r < 0)
                return r;
        r = store_open(config->store_url, &w.store);
        if (r < 0) {
                log_error_errno(r, "Cannot open store %s: %m", config->store_url);
                goto finish;
        }
        PoolConfig pc = { .state_dir = config->state_dir, .pool_path = config->pool_path,
                          .size_mb = config->pool_size_mb, .storage = config->storage,
                          .disk_overcommit_permille = config->disk_overcommit_permille,
                          .reserve_mb = config->pool_reserve_mb };
        r = pool_open(&pc, &w.pool);
        if (r < 0) {
                log_error_errno(r, "Cannot open the storage pool: %m");
                goto finish;
        }
        r = worker_statfs_setup(&w);
        if (r < 0)
                goto finish;
        SeccompOptions so = { .allow_io_uring = config->seccomp_io_uring != 0, .emulate_statfs = w.statfs_emulate };
        r = seccomp_build(&so, &w.seccomp);
        if (r < 0) {
                log_error_errno(r, "Cannot build the seccomp filter: %m");
                goto finish;
        }
        /* now, while the worker is small: everything a spawn needs is here (agent, filter, cgroup
         * layout); it keeps no fd of the store's or the pool's */
        if (worker_spawner_start(&w) >= 0)
                worker_restarts_started(&w.spawner_restarts, now_usec());
        (void) worker_roots_start(&w);
        w.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (w.epoll_fd < 0) {
                r = negative_errno();
                goto finish;
        }
        r = worker_net_setup(&w);
        if (r < 0)
                goto finish;
        r = worker_reconcile(&w);
        if (r < 0)
                goto finish;
        (void) worker_teardown_start(&w);
        (void) worker_import_bundled_templates(&w);

        r = worker_socket_path(config, sockpath, sizeof sockpath);
        if (r >= 0)
                r = sock_listen_unix(sockpath, SOCK_NONBLOCK, 256, &lfd);
        if (r < 0) {
                log_error_errno(r, "Cannot listen on %s: %m", sockpath);
                goto finish;
        }
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_LISTEN };
        struct epoll_event sev = { .events = EPOLLIN, .data.u64 = TAG_SIGNAL };
        if (epoll_ctl(w.epoll_fd, EPOLL_CTL_ADD, lfd, &ev) < 0 || epoll_ctl(w.epoll_fd, EPOLL_CTL_ADD, sfd, &sev) < 0) {
                r = negative_errno();
                goto finish;
        }
        if (ready_fd >= 0) {
                (void) !write(ready_fd, "R", 1);
                ready_fd = safe_close(ready_fd);
        }
        log_info("Worker ready: runtime %s, storage %s, %zu sandboxes running", w.runtime->name,
                 pool_kind_to_string(pool_kind(w.pool)), w.n_live);

        r = worker_loop(&w, lfd, sfd);
        (void) unlink(sockpath);

finish:
        safe_close(ready_fd);
        worker_spawner_stop(&w);
        worker_roots_stop(&w); /* before the pool is released */
        worker_reap_all(&w, WORKER_STOP_REAP_MSEC);
        worker_teardown_stop(&w); /* what is queued is torn down first */
        worker_net_done(&w);
        if (w.pool && w.n_live == 0) {
                /* nothing runs: leave no mount or loop device behind */
                int k = pool_release(w.pool);
                if (k < 0)
                        log_warning_errno(k, "Failed to release the pool: %m");
                (void) cgroup_teardown();
        }
        for (size_t i = 0; i < w.n_live; i++) {
                safe_close(w.live[i].pidfd);
                safe_close(w.live[i].statfs_fd);
                safe_close(w.live[i].quota_fd);
        }
        free(w.live);
        pool_free(w.pool);
        store_close(w.store);
        safe_close(w.agent_exe_fd);
        safe_close(w.epoll_fd);
        seccomp_fprog_done(&w.seccomp);
        return r;
}
