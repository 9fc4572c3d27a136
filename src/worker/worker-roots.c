/* SPDX-License-Identifier: MIT */
/* The roots helper: a small process, forked by the worker at its start (as
 * the spawner is), that makes the roots of a branch's children side by side
 * (pool_sandbox_branch, a thread each, up to ROOTS_PARALLEL at once). btrfs
 * puts snapshots taken at the same time into one transaction; the worker
 * cannot take them itself (it is single-threaded and must stay so), and a
 * process forked per snapshot from the grown worker cost it a copy of its
 * page tables, a copy-on-write fault on every page written after and the
 * teardown of the copy at exit (most of a branch child's worker time on a
 * paravirtualised host). The helper is forked once, while the worker is
 * small, and its threads copy nothing.
 *
 * Protocol (SOCK_SEQPACKET): a RootsRequest per root; a RootsReply per
 * request, in the order the snapshots finish (the tag says which). A worker
 * whose helper is gone makes the roots one after the other in process. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "worker-internal.h"

/* Snapshots in flight at once (each a thread of the helper). */
#define ROOTS_PARALLEL 16U
/* A thread's stack: pool_sandbox_branch needs little (paths are allocated). */
#define ROOTS_THREAD_STACK (256U * 1024U)

typedef struct RootsRequest {
        uint32_t tag;
        uint64_t disk_mb;
        char source[64];
        char checkpoint[64]; /* "": the source's current root */
        char id[64];
} RootsRequest;

typedef struct RootsReply {
        uint32_t tag;
        int32_t result; /* 0 or -errno */
} RootsReply;

/* ---- the helper ---- */

typedef struct RootsJob {
        Worker *w;
        RootsRequest rq;
} RootsJob;

static pthread_mutex_t roots_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t roots_cond = PTHREAD_COND_INITIALIZER;
static unsigned roots_running;

static void *roots_thread(void *arg) {
        RootsJob *job = arg;
        char *root = NULL;
        RootsReply rep = { .tag = job->rq.tag };
        int r;

        r = pool_sandbox_branch(job->w->pool, job->rq.source, job->rq.checkpoint[0] ? job->rq.checkpoint : NULL,
                                job->rq.id, job->rq.disk_mb, &root);
        free(root);
        rep.result = r < 0 ? r : 0;
        /* a worker that is gone: EPIPE, and the helper ends at its next recv */
        (void) send(job->w->roots_fd, &rep, sizeof rep, MSG_NOSIGNAL);
        free(job);
        pthread_mutex_lock(&roots_lock);
        roots_running--;
        pthread_cond_signal(&roots_cond);
        pthread_mutex_unlock(&roots_lock);
        return NULL;
}

static void roots_serve(Worker *w, const RootsRequest *rq) {
        RootsReply rep = { .tag = rq->tag };
        pthread_attr_t attr;
        pthread_t t;
        RootsJob *job;
        int r;

        if (memchr(rq->source, 0, sizeof rq->source) == NULL || memchr(rq->checkpoint, 0, sizeof rq->checkpoint) == NULL ||
            memchr(rq->id, 0, sizeof rq->id) == NULL) {
                rep.result = -EINVAL;
                (void) send(w->roots_fd, &rep, sizeof rep, MSG_NOSIGNAL);
                return;
        }
        job = new0(RootsJob, 1);
        if (!job) {
                rep.result = -ENOMEM;
                (void) send(w->roots_fd, &rep, sizeof rep, MSG_NOSIGNAL);
                return;
        }
        *job = (RootsJob){ .w = w, .rq = *rq };
        pthread_mutex_lock(&roots_lock);
        while (roots_running >= ROOTS_PARALLEL)
                pthread_cond_wait(&roots_cond, &roots_lock);
        roots_running++;
        pthread_mutex_unlock(&roots_lock);
        (void) pthread_attr_init(&attr);
        (void) pthread_attr_setstacksize(&attr, ROOTS_THREAD_STACK);
        (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&t, &attr, roots_thread, job);
        (void) pthread_attr_destroy(&attr);
        if (r < 0) {
                free(job);
                pthread_mutex_lock(&roots_lock);
                roots_running--;
                pthread_mutex_unlock(&roots_lock);
                rep.result = r;
                (void) send(w->roots_fd, &rep, sizeof rep, MSG_NOSIGNAL);
        }
}

_noreturn_ static void roots_main(Worker *w) {
        (void) prctl(PR_SET_NAME, "space-roots");
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
                _exit(EXIT_FAILURE);
        /* nothing of the worker's but its socket: the pool is reached by path */
        if (w->roots_fd > 3)
                (void) syscall(SYS_close_range, 3U, (unsigned) w->roots_fd - 1, 0U);
        (void) syscall(SYS_close_range, (unsigned) w->roots_fd + 1, ~0U, 0U);
        for (;;) {
                RootsRequest rq;
                ssize_t k = recv(w->roots_fd, &rq, sizeof rq, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                if ((size_t) k != sizeof rq)
                        continue; /* not ours */
                roots_serve(w, &rq);
        }
        /* the worker is gone or stops: the snapshots in flight finish first (it removes what they make) */
        pthread_mutex_lock(&roots_lock);
        while (roots_running > 0)
                pthread_cond_wait(&roots_cond, &roots_lock);
        pthread_mutex_unlock(&roots_lock);
        _exit(EXIT_SUCCESS);
}

/* ---- the worker's side ---- */

int worker_roots_start(Worker *w) {
        int sv[2];
        pid_t pid;

        w->roots_fd = -EBADF;
        w->roots_pid = 0;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return log_warning_errno(errno, "Cannot make the roots helper's socket: %m; branch roots made in "
                                         "process");
        pid = fork();
        if (pid < 0) {
                safe_close(sv[0]);
                safe_close(sv[1]);
                return log_warning_errno(errno, "Cannot fork the roots helper: %m; branch roots made in process");
        }
        if (pid == 0) {
                safe_close(sv[0]);
                w->roots_fd = sv[1];
                roots_main(w);
        }
        safe_close(sv[1]);
        w->roots_fd = sv[0];
        w->roots_pid = pid;
        log_debug("Roots helper started (pid %d)", (int) pid);
        return 0;
}

void worker_roots_stop(Worker *w) {
        if (w->roots_pid <= 0)
                return;
        /* its EOF even where a fork of ours holds a copy of the socket */
        (void) shutdown(w->roots_fd, SHUT_RDWR);
        w->roots_fd = safe_close(w->roots_fd);
        while (waitpid(w->roots_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        w->roots_pid = 0;
}

/* A helper that broke the protocol or died during a branch: gone (its
 * snapshots in flight are over once it is reaped); the next branch starts
 * another. */
static void roots_lost(Worker *w) {
        if (w->roots_pid <= 0)
                return;
        log_warning("The roots helper (pid %d) is gone during a branch", (int) w->roots_pid);
        (void) kill(w->roots_pid, SIGKILL);
        worker_roots_stop(w);
}

bool worker_roots_ready(Worker *w) {
        siginfo_t si = {};

        if (w->roots_pid > 0 && waitid(P_PID, (id_t) w->roots_pid, &si, WEXITED | WNOHANG) >= 0 && si.si_pid != 0) {
                log_warning("The roots helper (pid %d) exited (%s %d); starting another", (int) w->roots_pid,
                            si.si_code == CLD_EXITED ? "status" : "signal", si.si_status);
                w->roots_pid = 0; /* reaped */
                w->roots_fd = safe_close(w->roots_fd);
        }
        /* a fork of the grown worker, once: the helper lives on */
        if (w->roots_pid <= 0 && !w->roots_failed && worker_roots_start(w) < 0)
                w->roots_failed = true;
        return w->roots_pid > 0;
}

int worker_roots_send(Worker *w, uint32_t tag, const char *source, const char *checkpoint, const char *id,
                      uint64_t disk_mb) {
        RootsRequest rq = { .tag = tag, .disk_mb = disk_mb };

        if (w->roots_pid <= 0)
                return -ESRCH;
        if (strscpy(rq.source, sizeof rq.source, source) < 0 || strscpy(rq.id, sizeof rq.id, id) < 0 ||
            (checkpoint && strscpy(rq.checkpoint, sizeof rq.checkpoint, checkpoint) < 0))
                return -ENAMETOOLONG;
        if (send(w->roots_fd, &rq, sizeof rq, MSG_NOSIGNAL) != (ssize_t) sizeof rq) {
                int r = errno > 0 ? -errno : -EIO;
                roots_lost(w);
                return r;
        }
        return 0;
}

int worker_roots_recv(Worker *w, uint32_t *ret_tag, int *ret_result) {
        RootsReply rep;
        ssize_t k;

        if (w->roots_pid <= 0)
                return -ESRCH;
        do
                k = recv(w->roots_fd, &rep, sizeof rep, 0);
        while (k < 0 && errno == EINTR);
        if (k != (ssize_t) sizeof rep || rep.result > 0) {
                roots_lost(w);
                return -EIO;
        }
        *ret_tag = rep.tag;
        *ret_result = rep.result;
        return 0;
}
