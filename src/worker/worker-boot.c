/* SPDX-License-Identifier: MIT */
/* Boots that take a while (a vm guest: seconds under TCG) end in the event
 * loop instead of blocking it: the create's runtime is spawned, the request
 * waits (its connection reads nothing more meanwhile), and every other
 * request, PID 1 death and gateway event is served as usual. When the
 * guest's agent answers (sync_fd readable), its VMM exits (pidfd readable) or
 * the deadline passes (checked every tick), the boot is finished and the
 * reply written. A delete of a booting sandbox, or the worker stopping,
 * ends the boot first (the VMM is killed; the create fails). */
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "worker-internal.h"

struct WorkerBoot {
        WorkerPending p;
        void *client;          /* where the reply goes; NULL once that connection is gone */
        bool cancelled;        /* deleted (or the worker stops) while booting */
};

static uint64_t mono_usec(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000U + (uint64_t) ts.tv_nsec / 1000U;
}

JsonValue *worker_json_copy(const JsonValue *v) {
        _cleanup_free_ char *text = NULL;
        JsonValue *copy = NULL;
        size_t n = 0;

        if (!v || json_serialize(v, &text, &n) < 0 || json_parse(text, n, &copy, NULL, 0) < 0)
                return NULL;
        return copy;
}

int worker_boot_defer(Worker *w, WorkerPending *p) {
        struct epoll_event ev = { .events = EPOLLIN };
        WorkerBoot *b;

        if (!w->current_client || GREEDY_REALLOC(w->boots, w->allocated_boots, w->n_boots + 1) < 0)
                return -ENOMEM;
        b = new0(WorkerBoot, 1);
        if (!b)
                return -ENOMEM;
        b->p = *p;
        b->client = w->current_client;
        ev.data.u64 = WORKER_TAG_BOOT | (uint64_t) (uintptr_t) b;
        if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, b->p.p.sync_fd, &ev) < 0 ||
            epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, b->p.p.pidfd, &ev) < 0) {
                int r = negative_errno();
                (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, b->p.p.sync_fd, NULL);
                free(b);
                return r;
        }
        w->boots[w->n_boots++] = b;
        w->reply_deferred = true;
        log_debug("Sandbox %s: booting; the worker serves other requests meanwhile", p->id);
        return 0;
}

static void boot_remove(Worker *w, WorkerBoot *b) {
        for (size_t i = 0; i < w->n_boots; i++)
                if (w->boots[i] == b) {
                        w->boots[i] = w->boots[--w->n_boots];
                        break;
                }
        (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, b->p.p.sync_fd, NULL);
        (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, b->p.p.pidfd, NULL);
}

/* Finishes the boot (it is readable, past its deadline, or cancelled) and replies. */
static void boot_done(Worker *w, WorkerBoot *b) {
        ApiError e = {};
        JsonWriter jw;
        int64_t pid = 0;
        uint64_t st = 0;
        char id[sizeof b->p.id];
        int r;

        boot_remove(w, b);
        memcpy(id, b->p.id, sizeof id);
        if (b->cancelled) /* the VMM dies; finish unwinds at once */
                (void) syscall(SYS_pidfd_send_signal, b->p.p.pidfd, SIGKILL, NULL, 0);
        r = worker_finish_runtime(w, &b->p, &pid, &st, &e);
        if (r >= 0 && (b->cancelled || !b->client)) {
                /* nobody will record it: it must not run unknown */
                (void) worker_cleanup_sandbox(w, id, false);
                r = api_error(&e, -ECANCELED, API_CONFLICT, "sandbox %s was deleted while it was starting", id);
        }
        if (b->p.start_op && b->p.state_path && (r >= 0 || b->cancelled || !b->client))
                (void) unlink(b->p.state_path); /* its disk has moved on: that machine cannot run again */
        if (b->p.start_op) {
                /* the CA saved with its memory: put back at spawn, or of a machine that did not resume */
                _cleanup_free_ char *saved = NULL;
                char ca_saved[PATH_MAX];
                if (pool_sandbox_memory_path(w->pool, id, &saved) >= 0 &&
                    snprintf(ca_saved, sizeof ca_saved, "%s" WORKER_CA_SAVED_SUFFIX, saved) < (int) sizeof ca_saved)
                        (void) unlink(ca_saved);
        }
        if (r < 0 && !b->p.start_op)
                (void) pool_sandbox_remove(w->pool, id); /* a create's: nothing of it stays */
        if (b->cancelled && r < 0)
                api_error(&e, -ECANCELED, API_CONFLICT, "sandbox %s was deleted while it was starting", id);
        if (r < 0 && !b->cancelled && b->client && b->p.retry_spec &&
            (!b->p.start_op || b->p.state_path)) {
                /* a create's base snapshot, or a start's saved machine, would not load: the base
                 * snapshot goes and the create boots; the start boots the sandbox's disk (its processes
                 * are lost, the reply says so). Deferred again: the new boot takes the client over. */
                void *saved_client = w->current_client;
                bool saved_deferred = w->reply_deferred;
                if (b->p.start_op)
                        log_warning("Sandbox %s: restoring its saved memory failed (%s); booting it on its disk",
                                    id, e.message);
                else
                        log_warning("Sandbox %s: the base snapshot of its template would not restore (%s); booting",
                                    id, e.message);
                e = (ApiError){};
                w->current_client = b->client;
                w->reply_deferred = false;
                r = b->p.start_op ? worker_vm_start_on_disk(w, b->p.retry_spec, &pid, &st, &e)
                                  : worker_vm_create_cold(w, b->p.retry_spec, &pid, &st, &e);
                if (w->reply_deferred)
                        b->client = NULL; /* the new boot replies */
                w->current_client = saved_client;
                w->reply_deferred = saved_deferred;
                b->p.state_path = mfree(b->p.state_path); /* an immediate answer comes from a boot on disk */
        }
        b->p.retry_spec = json_free(b->p.retry_spec);
        if (b->client) {
                json_w_init(&jw);
                if (r < 0)
                        worker_reply_error(&jw, &e);
                else {
                        json_w_object_begin(&jw);
                        json_w_kv_bool(&jw, "ok", true);
                        json_w_kv_int(&jw, "pid", pid);
                        json_w_key(&jw, "starttime");
                        json_w_uint(&jw, st);
                        if (b->p.start_op)
                                json_w_kv_bool(&jw, "processes_preserved", b->p.state_path != NULL);
                        json_w_object_end(&jw);
                }
                worker_client_reply_deferred(w, b->client, &jw);
                json_w_done(&jw);
        }
        free(b->p.state_path);
        free(b);
}

void worker_boot_ready(Worker *w, uint64_t tag) {
        WorkerBoot *b = (WorkerBoot *) (uintptr_t) (tag & ~WORKER_TAG_BOOT);

        for (size_t i = 0; i < w->n_boots; i++)
                if (w->boots[i] == b)
                        return boot_done(w, b);
}

void worker_boot_tick(Worker *w) {
        uint64_t now = mono_usec();

        for (size_t i = 0; i < w->n_boots;) {
                WorkerBoot *b = w->boots[i];
                if (b->p.p.deadline_usec != 0 && now >= b->p.p.deadline_usec)
                        boot_done(w, b); /* removes entry i */
                else
                        i++;
        }
}

bool worker_boot_cancel(Worker *w, const char *id) {
        for (size_t i = 0; i < w->n_boots; i++)
                if (streq(w->boots[i]->p.id, id)) {
                        w->boots[i]->cancelled = true;
                        boot_done(w, w->boots[i]);
                        return true;
                }
        return false;
}

bool worker_boot_pending(Worker *w, const char *id) {
        for (size_t i = 0; i < w->n_boots; i++)
                if (streq(w->boots[i]->p.id, id))
                        return true;
        return false;
}

void worker_boot_client_gone(Worker *w, void *client) {
        for (size_t i = 0; i < w->n_boots; i++)
                if (w->boots[i]->client == client)
                        w->boots[i]->client = NULL;
}

void worker_boot_cancel_all(Worker *w) {
        while (w->n_boots > 0) {
                w->boots[0]->cancelled = true;
                boot_done(w, w->boots[0]);
        }
        w->boots = mfree(w->boots);
        w->allocated_boots = 0;
}
