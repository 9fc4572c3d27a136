/* SPDX-License-Identifier: MIT */
/* The spawner: a small process, forked by the worker before it has grown,
 * that clones the ns sandboxes for it (ns_runtime_ops.spawn with
 * clone_parent, so every PID 1 is still the worker's child, reaped through
 * its pidfd). A clone copies the address space of the process that makes it
 * and write-protects every page of it until the child execs; done by the
 * worker, each sandbox cost it a clone of its whole memory and a copy-on-write
 * fault on every page it wrote afterwards (most of its time per sandbox).
 * The spawner's memory is small and it writes little.
 *
 * Protocol (SOCK_SEQPACKET, one message each way per spawn): a SpawnRequest
 * then the strings it counts, NUL-terminated; the answer is a SpawnReply
 * with [pidfd, sync_fd] attached on success. A worker whose spawner is gone
 * spawns in process again. */
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "alloc-util.h"
#include "cgroup.h"
#include "fd-util.h"
#include "log.h"
#include "sock-io.h"
#include "str-util.h"
#include "worker-internal.h"

#define SPAWN_MSG_MAX (256U * 1024U) /* a request larger than this (a huge env) is spawned in process */
#define SPAWN_ENV_MAX 4096U

typedef struct SpawnRequest {
        uint32_t uid_base;
        uint32_t n_env;
        bool has_resolv_conf;
        bool seccomp_notify;
        bool root_later;
        uint32_t n_volumes;
        uint32_t volumes_read_only; /* bit i: volume i is mounted read-only */
        RuntimeLimits limits;
        /* then: id, root_path, hostname, agent_socket, resolv_conf (if any), env[n_env], then each
         * volume's host path and path inside, each NUL-terminated */
} SpawnRequest;

typedef struct SpawnReply {
        int32_t r;        /* 0 or -errno */
        int32_t pid;      /* on failure: a killed PID 1 for the worker to reap, or 0 */
        char err[512];
} SpawnReply;

static int put_str(char *buf, size_t size, size_t *at, const char *s) {
        size_t n = strlen(s) + 1;
        if (n > size - *at)
                return -E2BIG;
        memcpy(buf + *at, s, n);
        *at += n;
        return 0;
}

static const char *get_str(const char *buf, size_t size, size_t *at) {
        const char *s = buf + *at, *end;
        if (*at >= size)
                return NULL;
        end = memchr(s, 0, size - *at);
        if (!end)
                return NULL;
        *at += (size_t) (end - s) + 1;
        return s;
}

/* ---- the spawner process ---- */

static void spawner_serve(Worker *w, const char *buf, size_t n) {
        const SpawnRequest *rq = (const SpawnRequest *) buf;
        _cleanup_free_ char **env = NULL;
        RuntimePending p = { .pidfd = -EBADF, .sync_fd = -EBADF };
        SpawnReply rep = {};
        size_t at = sizeof *rq;
        const char *id, *root, *hostname, *sock, *resolv = NULL;
        RuntimeVolume vols[RUNTIME_VOLUMES_MAX] = {};

        if (n < sizeof *rq || rq->n_env > SPAWN_ENV_MAX || rq->n_volumes > RUNTIME_VOLUMES_MAX) {
                rep.r = -EBADMSG;
                goto reply;
        }
        env = new0(char *, rq->n_env + 1);
        id = get_str(buf, n, &at);
        root = get_str(buf, n, &at);
        hostname = get_str(buf, n, &at);
        sock = get_str(buf, n, &at);
        if (rq->has_resolv_conf)
                resolv = get_str(buf, n, &at);
        if (!env || !id || !root || !hostname || !sock || (rq->has_resolv_conf && !resolv)) {
                rep.r = env ? -EBADMSG : -ENOMEM;
                goto reply;
        }
        for (uint32_t i = 0; i < rq->n_env; i++)
                if (!(env[i] = (char *) get_str(buf, n, &at))) {
                        rep.r = -EBADMSG;
                        goto reply;
                }
        for (uint32_t i = 0; i < rq->n_volumes; i++) {
                vols[i].host_path = get_str(buf, n, &at);
                vols[i].path = get_str(buf, n, &at);
                vols[i].read_only = (rq->volumes_read_only >> i) & 1;
                if (!vols[i].host_path || !vols[i].path) {
                        rep.r = -EBADMSG;
                        goto reply;
                }
        }
        RuntimeSpec rs = {
                .id = id,
                .root_path = root,
                .hostname = hostname,
                .uid_base = (uid_t) rq->uid_base,
                .limits = rq->limits,
                .env = env,
                .agent_socket = sock,
                .agent_exe_fd = w->agent_exe_fd,
                .seccomp = &w->seccomp,
                .seccomp_notify = rq->seccomp_notify,
                .resolv_conf = resolv,
                .clone_parent = true,
                .settle_later = w->runtime->settle != NULL,
                .root_later = rq->root_later,
                .volumes = vols,
                .n_volumes = rq->n_volumes,
        };
        rep.r = w->runtime->spawn(&rs, &p, rep.err, sizeof rep.err);
        if (rep.r >= 0) {
                int fds[2] = { p.pidfd, p.sync_fd };
                rep.pid = p.pid;
                if (sock_send_fds(w->spawner_fd, &rep, sizeof rep, fds, 2) < 0) {
                        /* the worker is gone: so is this sandbox */
                        (void) kill(p.pid, SIGKILL);
                        if (p.settle_pending)
                                p.settle_fd = safe_close(p.settle_fd); /* its setup fails */
                } else if (p.settle_pending) {
                        /* its cgroup v1 moves (an RCU grace period each) while the worker gives it its
                         * root and makes its network; PID 1 waits for them before its cgroup namespace */
                        char err[sizeof rep.err] = "";
                        if (w->runtime->settle(&p, err, sizeof err) < 0)
                                log_warning("Sandbox %s: %s (its setup fails)", id, err);
                }
                safe_close(p.pidfd);
                safe_close(p.sync_fd);
                return;
        }
        rep.pid = p.pid; /* set after a clone (clone_parent): dead, for the worker to reap */
reply:
        (void) sock_send_fds(w->spawner_fd, &rep, sizeof rep, NULL, 0);
}

/* Shared libraries a spawn uses (and the sanitizers' runtime); the spawner
 * calls nothing in the others (the store's, TLS, nftables and what they
 * pull in). */
static const char *const spawner_libs_kept[] = {
        "libc.so", "ld-linux", "libm.so", "libasan.so", "libubsan.so", "libgcc_s.so", "libstdc++.so",
};

/* Unmaps the libraries the spawner never calls: every clone copies the
 * spawner's mappings and every sandbox's exec tears its copy down again,
 * and those libraries are most of them (from ~190 mappings to ~30). The
 * spawner exits with _exit() and never forks through libc, so nothing
 * of theirs runs again (no atexit, atfork or TLS destructor). */
static void spawner_trim(void) {
        _cleanup_free_ char *maps = NULL;
        size_t n = 0;

        if (read_full_file("/proc/self/maps", 1U << 20, &maps, &n) < 0)
                return;
        for (char *line = maps, *next; line && *line; line = next) {
                unsigned long lo, hi;
                const char *path, *base;
                bool keep = false;

                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                path = strchr(line, '/');
                if (!path || sscanf(line, "%lx-%lx", &lo, &hi) != 2 || hi <= lo)
                        continue;
                base = strrchr(path, '/') + 1;
                if (!startswith(base, "lib") || !strstr(base, ".so"))
                        continue; /* our binary, or not a library */
                for (size_t i = 0; i < ELEMENTSOF(spawner_libs_kept) && !keep; i++)
                        keep = startswith(base, spawner_libs_kept[i]);
                if (!keep)
                        (void) munmap((void *) lo, hi - lo);
        }
}

_noreturn_ static void spawner_main(Worker *w) {
        _cleanup_free_ char *buf = malloc(SPAWN_MSG_MAX);

        (void) prctl(PR_SET_NAME, "space-spawner");
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1 || !buf)
                _exit(EXIT_FAILURE);
        /* nothing of the worker's but what a spawn needs (its readiness pipe, sockets, store: not ours) */
        {
                unsigned lo = (unsigned) MIN(w->spawner_fd, w->agent_exe_fd), hi = (unsigned) MAX(w->spawner_fd, w->agent_exe_fd);
                (void) syscall(SYS_close_range, 3U, lo - 1, 0U);
                (void) syscall(SYS_close_range, lo + 1, hi - 1, 0U);
                (void) syscall(SYS_close_range, hi + 1, ~0U, 0U);
        }
        spawner_trim();
        for (;;) {
                ssize_t k = recv(w->spawner_fd, buf, SPAWN_MSG_MAX, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        _exit(k == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
                spawner_serve(w, buf, (size_t) k);
        }
}

/* ---- the worker's side ---- */

int worker_spawner_start(Worker *w) {
        int sv[2];
        pid_t pid;

        w->spawner_fd = -EBADF;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return log_warning_errno(errno, "Cannot make the spawner's socket: %m; spawning in process");
        /* a request is one message: room for the largest */
        int size = (int) SPAWN_MSG_MAX + 4096;
        (void) setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        (void) setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
        pid = fork();
        if (pid < 0) {
                safe_close(sv[0]);
                safe_close(sv[1]);
                return log_warning_errno(errno, "Cannot fork the spawner: %m; spawning in process");
        }
        if (pid == 0) {
                safe_close(sv[0]);
                w->spawner_fd = sv[1];
                spawner_main(w);
        }
        safe_close(sv[1]);
        w->spawner_fd = sv[0];
        w->spawner_pid = pid;
        log_debug("Spawner started (pid %d)", (int) pid);
        return 0;
}

void worker_spawner_stop(Worker *w) {
        w->spawner_outstanding = 0;
        if (w->spawner_pid <= 0)
                return;
        /* its EOF even where a fork of ours holds a copy of the socket */
        (void) shutdown(w->spawner_fd, SHUT_RDWR);
        w->spawner_fd = safe_close(w->spawner_fd);
        while (waitpid(w->spawner_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        w->spawner_pid = 0;
}

static int request_build(const RuntimeSpec *rs, char **ret, size_t *ret_n) {
        _cleanup_free_ char *buf = malloc(SPAWN_MSG_MAX);
        SpawnRequest rq = {
                .uid_base = (uint32_t) rs->uid_base,
                .has_resolv_conf = rs->resolv_conf != NULL,
                .seccomp_notify = rs->seccomp_notify,
                .root_later = rs->root_later,
                .n_volumes = (uint32_t) rs->n_volumes,
                .limits = rs->limits,
        };
        size_t at = sizeof rq;
        int r;

        if (!buf)
                return -ENOMEM;
        if (rs->n_volumes > RUNTIME_VOLUMES_MAX)
                return -E2BIG;
        for (char **e = rs->env; e && *e; e++)
                rq.n_env++;
        if (rq.n_env > SPAWN_ENV_MAX)
                return -E2BIG;
        if ((r = put_str(buf, SPAWN_MSG_MAX, &at, rs->id)) < 0 ||
            (r = put_str(buf, SPAWN_MSG_MAX, &at, rs->root_path)) < 0 ||
            (r = put_str(buf, SPAWN_MSG_MAX, &at, rs->hostname)) < 0 ||
            (r = put_str(buf, SPAWN_MSG_MAX, &at, rs->agent_socket)) < 0 ||
            (rs->resolv_conf && (r = put_str(buf, SPAWN_MSG_MAX, &at, rs->resolv_conf)) < 0))
                return r;
        for (char **e = rs->env; e && *e; e++)
                if ((r = put_str(buf, SPAWN_MSG_MAX, &at, *e)) < 0)
                        return r;
        for (size_t i = 0; i < rs->n_volumes; i++) {
                if ((r = put_str(buf, SPAWN_MSG_MAX, &at, rs->volumes[i].host_path)) < 0 ||
                    (r = put_str(buf, SPAWN_MSG_MAX, &at, rs->volumes[i].path)) < 0)
                        return r;
                if (rs->volumes[i].read_only)
                        rq.volumes_read_only |= UINT32_C(1) << i;
        }
        memcpy(buf, &rq, sizeof rq);
        *ret = TAKE_PTR(buf);
        *ret_n = at;
        return 0;
}

static int reply_recv(int sock, int flags, SpawnReply *rep, int fds[static 2]) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(2 * sizeof(int))];
        } u = {};
        struct iovec iov = { .iov_base = rep, .iov_len = sizeof *rep };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        ssize_t k;

        fds[0] = fds[1] = -EBADF;
        do
                k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return negative_errno();
        if (k == 0)
                return -ECONNRESET;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        int got[2] = { -EBADF, -EBADF };
                        memcpy(got, CMSG_DATA(c), MIN(nfd, (size_t) 2) * sizeof(int));
                        for (size_t i = 2; i < nfd; i++) { /* never: more than we asked for */
                                int extra;
                                memcpy(&extra, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                                safe_close(extra);
                        }
                        fds[0] = got[0];
                        fds[1] = got[1];
                }
        if ((size_t) k != sizeof *rep || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                safe_close(fds[0]);
                safe_close(fds[1]);
                fds[0] = fds[1] = -EBADF;
                return -EBADMSG;
        }
        return 0;
}

/* The spawner died or broke its protocol: spawns are made in process from now on. */
static void spawner_lost(Worker *w, int r) {
        log_warning_errno(r, "The spawner (pid %d) is gone: %m; sandboxes are cloned by the worker itself",
                          (int) w->spawner_pid);
        (void) kill(w->spawner_pid, SIGKILL);
        while (waitpid(w->spawner_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        /* answers it gave that nobody read (a branch sends ahead): their PID 1s, ours and
         * waiting for a root that will not come, go (they would stay zombies) */
        for (unsigned i = 0; i < w->spawner_outstanding; i++) {
                SpawnReply rep = {};
                int fds[2];
                if (reply_recv(w->spawner_fd, MSG_DONTWAIT, &rep, fds) < 0)
                        break;
                if (rep.pid > 0) {
                        (void) kill(rep.pid, SIGKILL);
                        (void) waitpid(rep.pid, NULL, 0);
                }
                safe_close(fds[0]);
                safe_close(fds[1]);
        }
        w->spawner_pid = 0; /* reaped */
        w->spawner_outstanding = 0;
        w->spawner_fd = safe_close(w->spawner_fd);
        worker_restarts_died(&w->spawner_restarts, now_usec(), strerror(-r));
}

void worker_spawner_tick(Worker *w) {
        siginfo_t si = {};

        /* died while idle: nobody sent it anything since */
        if (w->spawner_pid > 0 && w->spawner_outstanding == 0 &&
            waitid(P_PID, (id_t) w->spawner_pid, &si, WEXITED | WNOHANG | WNOWAIT) >= 0 && si.si_pid == w->spawner_pid)
                spawner_lost(w, si.si_code == CLD_EXITED ? -ECHILD : -EINTR);
        if (w->spawner_pid > 0 || !worker_restarts_due(&w->spawner_restarts, now_usec()))
                return;
        /* a fork of the grown worker now (its first was forked while the worker was small) */
        if (worker_spawner_start(w) < 0) {
                worker_restarts_died(&w->spawner_restarts, now_usec(), "it could not be started");
                return;
        }
        worker_restarts_started(&w->spawner_restarts, now_usec());
        log_info("Spawner restarted (pid %d, restart #%u)", (int) w->spawner_pid, w->spawner_restarts.restarts);
}

/* A request the lost spawner never answered: it may have cloned PID 1
 * before it died (our child, CLONE_PARENT; born in the sandbox's cgroup,
 * CLONE_INTO_CGROUP). Waiting for a root nobody will send, it exits, and
 * nobody knows its pid: find it among our children by its cgroup, kill and
 * reap it, so that it is neither a zombie nor alive in the cgroup that the
 * in-process spawn makes again. */
static void spawner_orphan_reap(const char *id) {
        _cleanup_free_ char *kids = NULL;
        char path[64];
        size_t n = 0;

        snprintf(path, sizeof path, "/proc/self/task/%d/children", (int) getpid());
        if (read_full_file(path, 1U << 20, &kids, &n) < 0)
                return;
        for (char *p = kids, *end; p && *p; p = end) {
                long pid = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (pid <= 0 || pid > INT32_MAX || !cgroup_contains(id, (pid_t) pid))
                        continue;
                log_warning("Sandbox %s: the lost spawner's PID 1 (pid %ld) is killed and reaped", id, pid);
                (void) kill((pid_t) pid, SIGKILL);
                while (waitpid((pid_t) pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
}

int worker_spawner_send(Worker *w, const RuntimeSpec *rs) {
        _cleanup_free_ char *req = NULL;
        size_t n;
        int r;

        if (w->spawner_pid <= 0 || rs->root_path == NULL)
                return -ENOTCONN;
        r = request_build(rs, &req, &n);
        if (r < 0)
                return r;
        r = sock_send_fds(w->spawner_fd, req, n, NULL, 0);
        if (r < 0) {
                spawner_lost(w, r);
                return r;
        }
        w->spawner_outstanding++;
        return 0;
}

int worker_spawner_recv(Worker *w, bool sent, const RuntimeSpec *rs, RuntimePending *ret, char *errbuf,
                        size_t errbuf_size) {
        SpawnReply rep = {};
        int fds[2], r;

        if (!sent || w->spawner_pid <= 0 || w->spawner_outstanding == 0) {
                if (sent)
                        spawner_orphan_reap(rs->id); /* lost with the spawner */
                return w->runtime->spawn(rs, ret, errbuf, errbuf_size);
        }
        w->spawner_outstanding--;
        if (strscpy(ret->id, sizeof ret->id, rs->id) < 0 ||
            strscpy(ret->agent_socket, sizeof ret->agent_socket, rs->agent_socket) < 0)
                return -ENAMETOOLONG; /* never: the request carried them */
        r = reply_recv(w->spawner_fd, 0, &rep, fds);
        if (r < 0) {
                spawner_lost(w, r);
                /* whatever it did not answer for is killed with it; cgroups and socket are made again */
                spawner_orphan_reap(rs->id);
                return w->runtime->spawn(rs, ret, errbuf, errbuf_size);
        }
        if (rep.r >= 0 && (fds[0] < 0 || fds[1] < 0 || rep.pid <= 0)) {
                /* an answer without its fds: the sandbox cannot be watched; it goes */
                if (rep.pid > 0) {
                        (void) kill(rep.pid, SIGKILL);
                        (void) waitpid(rep.pid, NULL, 0);
                }
                safe_close(fds[0]);
                safe_close(fds[1]);
                spawner_lost(w, -EBADMSG);
                snprintf(errbuf, errbuf_size, "the spawner's answer had no pidfd");
                return -EBADMSG;
        }
        if (rep.r < 0) {
                safe_close(fds[0]);
                safe_close(fds[1]);
                if (rep.pid > 0)
                        (void) waitpid(rep.pid, NULL, 0); /* killed by the spawner; ours to reap */
                rep.err[sizeof rep.err - 1] = 0;
                snprintf(errbuf, errbuf_size, "%s", rep.err[0] ? rep.err : strerror(-rep.r));
                return rep.r;
        }
        ret->pid = rep.pid;
        ret->pidfd = fds[0];
        ret->sync_fd = fds[1];
        return 0;
}

int worker_spawner_spawn(Worker *w, const RuntimeSpec *rs, RuntimePending *ret, char *errbuf, size_t errbuf_size) {
        bool sent = worker_spawner_send(w, rs) >= 0; /* else spawned in process */
        return worker_spawner_recv(w, sent, rs, ret, errbuf, errbuf_size);
}
