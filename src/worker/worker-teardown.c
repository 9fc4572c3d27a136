/* SPDX-License-Identifier: MIT */
/* The teardown of deleted ns sandboxes, off the delete's path. A delete
 * kills the sandbox's processes (cgroup.kill), takes it out of the gateway
 * and answers; its slot (uid range, link, address) stays held in the store.
 * Once PID 1 is reaped, what is left (cgroups, network link, firewall
 * element, agent directory, root subvolume and checkpoints) goes on one
 * thread of its own at a lower CPU and I/O priority, which lets the requests
 * the worker is serving go first; the main thread then drops the sandbox's
 * entry and frees its slot. The queue is bounded: a delete that finds it
 * full tears down in line. A teardown cut short by a crash is finished by
 * the orphan scan of the next start (worker-reconcile.c), which then frees
 * the held slots. */
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"
#include "veth.h"
#include "worker-internal.h"

#define WORKER_TEARDOWN_QUEUE_MAX 64
#define WORKER_TEARDOWN_NICE 10 /* below the worker's own threads */
/* A step waits for the request the worker serves (a create's link and
 * cgroups take the same kernel locks) at most this long; not at all once the
 * queue is half full. */
#define WORKER_TEARDOWN_YIELD_MSEC 50
/* Roots removed since the last commit are committed at most this often: the
 * cleaner then frees their space as they go, not in bursts at the periodic
 * commit (~30 s), when a churning pool may have filled with them. */
#define WORKER_TEARDOWN_COMMIT_MSEC 1000
#define IOPRIO_CLASS_BE 2
#define IOPRIO_WHO_PROCESS 1
#define IOPRIO_PRIO_VALUE(class, data) (((class) << 13) | (data))

typedef struct TeardownItem {
        char id[STORE_ID_MAX];
        const RuntimeOps *rt;
        uint64_t slot;
        bool net;
        int link_index; /* > 0: only this link goes (a suspended sandbox's; its entry is gone already) */
        int64_t queued_usec;
        int result;
} TeardownItem;

struct WorkerTeardowns {
        Worker *w; /* its immutable parts only (config, pool, net_pool, agent_dir) */
        pthread_t thread;
        atomic_int tid;           /* the thread's, once it runs (0 before) */
        pthread_mutex_t lock;
        pthread_cond_t work;      /* queued, or stop */
        pthread_cond_t finished;  /* an item is done */
        TeardownItem queue[WORKER_TEARDOWN_QUEUE_MAX]; /* queue[head]: in progress */
        size_t head, n;
        TeardownItem done[WORKER_TEARDOWN_QUEUE_MAX]; /* for the main thread; n + n_done <= the max */
        size_t n_done;
        bool stop;
        bool spares_due; /* a request was served: the spare roots may be short */
        int event_fd;
        atomic_bool serving; /* the main thread handles a request */
        int64_t committed_msec; /* mono_msec() of the last commit the thread asked for */
        unsigned uncommitted;   /* roots removed since */
        Firewall *firewall;  /* the thread's own libnftables context */
};

static bool yield_to_requests(WorkerTeardowns *t) {
        int64_t end = now_usec() + WORKER_TEARDOWN_YIELD_MSEC * 1000;
        size_t n;

        pthread_mutex_lock(&t->lock);
        n = t->n;
        pthread_mutex_unlock(&t->lock);
        if (n > WORKER_TEARDOWN_QUEUE_MAX / 2)
                return false;
        while (atomic_load(&t->serving) && now_usec() < end)
                (void) usleep(500);
        return true;
}

static int teardown_run(WorkerTeardowns *t, const TeardownItem *it) {
        Worker *w = t->w;
        char sock[PATH_MAX], dir[PATH_MAX];
        int r = 0, k;

        (void) yield_to_requests(t);
        if (it->link_index > 0) {
                r = veth_delete_index(it->link_index);
                if (r < 0 && r != -ENODEV)
                        return log_warning_errno(r, "Cannot delete the network link (index %d) of suspended sandbox "
                                                 "%s: %m", it->link_index, it->id);
                return 0;
        }
        /* processes (dead: PID 1 was reaped) and cgroups, the socket */
        if (worker_agent_socket(w, it->id, sock, sizeof sock) < 0)
                return -ENAMETOOLONG;
        k = it->rt->destroy(it->id, sock);
        if (k < 0)
                r = k;
        if (it->net) {
                (void) yield_to_requests(t);
                worker_net_detach_link(w, t->firewall, it->id, it->slot);
        }
        snprintf(dir, sizeof dir, "%s/%s", w->agent_dir, it->id);
        (void) rm_rf(dir);
        (void) yield_to_requests(t);
        k = pool_sandbox_remove(w->pool, it->id);
        if (k < 0) {
                log_warning_errno(k, "Failed to remove root of sandbox %s: %m", it->id);
                if (r >= 0)
                        r = k;
        } else
                t->uncommitted++;
        return r;
}

/* Commits the roots removed since the last commit, at most once a
 * WORKER_TEARDOWN_COMMIT_MSEC (a burst of deletes costs one commit a
 * second, not one each). */
static void commit_removed(WorkerTeardowns *t) {
        int64_t now = mono_msec();
        int k;

        if (t->uncommitted == 0 || now - t->committed_msec < WORKER_TEARDOWN_COMMIT_MSEC)
                return;
        (void) yield_to_requests(t);
        k = pool_space_sync(t->w->pool);
        if (k < 0)
                log_debug_errno(k, "Teardowns: committing %u removed roots failed (the periodic commit will): %m",
                                t->uncommitted);
        t->committed_msec = now;
        t->uncommitted = 0;
}

/* The spare roots of the templates used lately topped up, one at a time,
 * each after the request being served (a snapshot commits a btrfs
 * transaction, which a create's writes would wait for), before the queued
 * teardowns (a create waits for a root, not for a teardown) unless they are
 * many; the stop comes first. */
static void make_spares(WorkerTeardowns *t) {
        unsigned per = (unsigned) t->w->config->root_spares;

        for (;;) {
                bool go;
                pthread_mutex_lock(&t->lock);
                go = t->n <= WORKER_TEARDOWN_QUEUE_MAX / 2 && !t->stop;
                pthread_mutex_unlock(&t->lock);
                if (!go)
                        return;
                (void) yield_to_requests(t);
                int r = pool_spare_make(t->w->pool, per);
                if (r <= 0) {
                        if (r < 0 && r != -EOPNOTSUPP)
                                log_debug_errno(r, "Teardowns: cannot make a spare root: %m");
                        return;
                }
        }
}

static void *teardown_thread(void *userdata) {
        WorkerTeardowns *t = userdata;
        uint64_t one = 1;

        /* below the requests' priority, on the CPU and the disk (until a drain: teardown_hurry) */
        pthread_mutex_lock(&t->lock);
        atomic_store(&t->tid, (int) syscall(SYS_gettid));
        if (!t->stop) {
                (void) setpriority(PRIO_PROCESS, (id_t) atomic_load(&t->tid), WORKER_TEARDOWN_NICE);
                (void) syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, 7));
        }
        pthread_mutex_unlock(&t->lock);
        if (firewall_new(&t->firewall) < 0)
                log_warning("Teardowns: no firewall context; the elements of deleted sandboxes stay until the "
                            "next start");
        pthread_mutex_lock(&t->lock);
        for (;;) {
                TeardownItem it;
                if (t->n <= WORKER_TEARDOWN_QUEUE_MAX / 2 && !t->stop && t->spares_due) {
                        t->spares_due = false;
                        pthread_mutex_unlock(&t->lock);
                        make_spares(t);
                        pthread_mutex_lock(&t->lock);
                        continue;
                }
                while (t->n == 0 && !t->stop && !t->spares_due && t->uncommitted > 0) {
                        /* idle with removals not committed: commit once the interval has passed */
                        int64_t due = t->committed_msec + WORKER_TEARDOWN_COMMIT_MSEC - mono_msec();
                        struct timespec ts;
                        if (due <= 0) {
                                pthread_mutex_unlock(&t->lock);
                                commit_removed(t);
                                pthread_mutex_lock(&t->lock);
                                continue;
                        }
                        clock_gettime(CLOCK_MONOTONIC, &ts); /* the condition's clock */
                        ts.tv_sec += due / 1000;
                        ts.tv_nsec += (due % 1000) * 1000000;
                        if (ts.tv_nsec >= 1000000000) {
                                ts.tv_sec++;
                                ts.tv_nsec -= 1000000000;
                        }
                        (void) pthread_cond_timedwait(&t->work, &t->lock, &ts);
                }
                while (t->n == 0 && !t->stop && !t->spares_due)
                        pthread_cond_wait(&t->work, &t->lock);
                if (t->n == 0 && t->stop)
                        break;
                if (t->n == 0)
                        continue;
                it = t->queue[t->head];
                pthread_mutex_unlock(&t->lock);
                it.result = teardown_run(t, &it);
                commit_removed(t);
                pthread_mutex_lock(&t->lock);
                t->head = (t->head + 1) % WORKER_TEARDOWN_QUEUE_MAX;
                t->n--;
                t->done[t->n_done++] = it;
                (void) !write(t->event_fd, &one, sizeof one);
                pthread_cond_broadcast(&t->finished);
        }
        pthread_mutex_unlock(&t->lock);
        pool_spare_drop_all(t->w->pool); /* drained: none outlives the worker */
        t->firewall = firewall_free(t->firewall);
        return NULL;
}

int worker_teardown_start(Worker *w) {
        _cleanup_free_ WorkerTeardowns *t = new0(WorkerTeardowns, 1);
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = WORKER_TAG_TEARDOWN };
        int r;

        if (!t)
                return -ENOMEM;
        t->w = w;
        t->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (t->event_fd < 0)
                return log_warning_errno(negative_errno(), "Teardowns: no eventfd (deletes tear down in line): %m");
        if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, t->event_fd, &ev) < 0) {
                r = negative_errno();
                safe_close(t->event_fd);
                return log_warning_errno(r, "Teardowns: cannot watch the eventfd (deletes tear down in line): %m");
        }
        pthread_mutex_init(&t->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&t->work, &ca);
        pthread_condattr_destroy(&ca);
        pthread_cond_init(&t->finished, NULL);
        r = -pthread_create(&t->thread, NULL, teardown_thread, t);
        if (r < 0) {
                (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, t->event_fd, NULL);
                safe_close(t->event_fd);
                return log_warning_errno(r, "Teardowns: no thread (deletes tear down in line): %m");
        }
        w->teardowns = TAKE_PTR(t);
        return 0;
}

bool worker_teardown_available(Worker *w) {
        return w->teardowns && !w->teardowns->stop;
}

void worker_teardown_serving(Worker *w, bool serving) {
        WorkerTeardowns *t = w->teardowns;

        if (!t)
                return;
        atomic_store(&t->serving, serving);
        if (!serving && w->config->root_spares > 0) {
                pthread_mutex_lock(&t->lock);
                t->spares_due = true;
                pthread_cond_signal(&t->work);
                pthread_mutex_unlock(&t->lock);
        }
}

/* The sandbox's entry goes and its slot is free. */
static void teardown_finished(Worker *w, const TeardownItem *it) {
        int64_t dt = now_usec() - it->queued_usec;
        int r;

        if (it->link_index > 0) {
                log_debug("Sandbox %s: its network link went in the background in %" PRIi64 " us", it->id, dt);
                return;
        }
        worker_live_remove(w, it->id);
        if (it->result < 0)
                log_warning_errno(it->result, "Teardown of deleted sandbox %s incomplete (the orphan scan of the "
                                  "next start finishes it): %m", it->id);
        else {
                log_debug("Sandbox %s torn down in the background in %" PRIi64 " us", it->id, dt);
                /* an incomplete one keeps its slot until the orphan scan has run */
                r = store_sandbox_hold_slot(w->store, it->id, false);
                if (r < 0 && r != -ENOENT)
                        log_warning_errno(r, "Sandbox %s: cannot free its slot (until the next start): %m", it->id);
        }
}

void worker_teardown_collect(Worker *w) {
        WorkerTeardowns *t = w->teardowns;
        TeardownItem done[WORKER_TEARDOWN_QUEUE_MAX];
        uint64_t v;
        size_t n;

        if (!t)
                return;
        (void) !read(t->event_fd, &v, sizeof v);
        pthread_mutex_lock(&t->lock);
        n = t->n_done;
        memcpy(done, t->done, n * sizeof *done);
        t->n_done = 0;
        pthread_mutex_unlock(&t->lock);
        for (size_t i = 0; i < n; i++)
                teardown_finished(w, &done[i]);
}

/* -EAGAIN when the queue is full. */
static int enqueue(WorkerTeardowns *t, const TeardownItem *it) {
        pthread_mutex_lock(&t->lock);
        if (t->n + t->n_done >= WORKER_TEARDOWN_QUEUE_MAX) {
                pthread_mutex_unlock(&t->lock);
                return -EAGAIN;
        }
        t->queue[(t->head + t->n) % WORKER_TEARDOWN_QUEUE_MAX] = *it;
        t->n++;
        pthread_cond_signal(&t->work);
        pthread_mutex_unlock(&t->lock);
        return 0;
}

int worker_teardown_queue(Worker *w, LiveSandbox *l) {
        TeardownItem it = { .rt = l->rt, .slot = l->slot, .net = l->net, .queued_usec = now_usec() };
        int r;

        if (!worker_teardown_available(w))
                return -EOPNOTSUPP;
        memcpy(it.id, l->id, sizeof it.id);
        r = enqueue(w->teardowns, &it);
        if (r < 0)
                return r;
        /* the thread has it: its PID 1 is reaped, nothing of it is the event loop's any more */
        (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, l->pidfd, NULL);
        l->pidfd = safe_close(l->pidfd);
        worker_statfs_detach(w, l);
        l->net = false;
        l->teardown = true;
        return 0;
}

int worker_teardown_queue_link(Worker *w, const char *id, int ifindex) {
        TeardownItem it = { .link_index = ifindex, .queued_usec = now_usec() };

        if (!worker_teardown_available(w) || ifindex <= 0)
                return -EOPNOTSUPP;
        if (strscpy(it.id, sizeof it.id, id) < 0)
                return -ENAMETOOLONG;
        return enqueue(w->teardowns, &it);
}

unsigned worker_teardown_pending(Worker *w) {
        unsigned n = 0;
        for (size_t i = 0; i < w->n_live; i++)
                if (w->live[i].reaping)
                        n++;
        return n;
}

/* While the worker waits for the backlog (a drain, its stop), the backlog is
 * all there is to do: the thread runs at the worker's own priority. Under
 * t->lock, so that a thread that is only starting sees the stop instead. */
static void teardown_hurry(WorkerTeardowns *t) {
        int tid = atomic_load(&t->tid);

        if (tid <= 0)
                return;
        (void) setpriority(PRIO_PROCESS, (id_t) tid, 0);
        (void) syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, 4));
}

/* Back below the requests once a drain the worker waited for is over. */
static void teardown_relax(WorkerTeardowns *t) {
        int tid = atomic_load(&t->tid);

        if (tid <= 0 || t->stop)
                return;
        (void) setpriority(PRIO_PROCESS, (id_t) tid, WORKER_TEARDOWN_NICE);
        (void) syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, 7));
}

/* How long a drain waits for the PID 1s of deleted sandboxes to be gone. */
#define WORKER_TEARDOWN_DRAIN_MSEC 2000

void worker_teardown_drain(Worker *w) {
        WorkerTeardowns *t = w->teardowns;
        int64_t end = now_usec() + WORKER_TEARDOWN_DRAIN_MSEC * 1000;

        /* killed ones whose PID 1 is still dying are queued once it is gone */
        for (size_t i = 0; i < w->n_live;) {
                LiveSandbox *l = &w->live[i];
                struct pollfd p = { .fd = l->pidfd, .events = POLLIN };
                size_t before = w->n_live;

                if (!l->reaping || l->teardown ||
                    poll(&p, 1, (int) MAX((end - now_usec()) / 1000, (int64_t) 0)) <= 0) {
                        i++;
                        continue;
                }
                worker_reap_finish(w, l); /* queued (i stays), or torn down in line (entry i is another now) */
                if (w->n_live == before)
                        i++;
        }
        if (!t)
                return;
        pthread_mutex_lock(&t->lock);
        teardown_hurry(t);
        while (t->n > 0)
                pthread_cond_wait(&t->finished, &t->lock);
        teardown_relax(t);
        pthread_mutex_unlock(&t->lock);
        worker_teardown_collect(w);
}

void worker_teardown_stop(Worker *w) {
        WorkerTeardowns *t = w->teardowns;

        if (!t)
                return;
        pthread_mutex_lock(&t->lock);
        t->stop = true;
        teardown_hurry(t);
        pthread_cond_signal(&t->work);
        pthread_mutex_unlock(&t->lock);
        (void) pthread_join(t->thread, NULL); /* the queue is empty then */
        worker_teardown_collect(w);
        (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, t->event_fd, NULL);
        safe_close(t->event_fd);
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->work);
        pthread_cond_destroy(&t->finished);
        w->teardowns = mfree(t);
}
