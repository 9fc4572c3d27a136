/* SPDX-License-Identifier: MIT */
/* Boots that take a while (a vm guest: seconds under TCG) end in the event
 * loop instead of blocking it: the create's runtime is spawned, the request
 * waits (its connection reads nothing more meanwhile), and every other
 * request, PID 1 death and gateway event is served as usual. When the
 * guest's agent answers (sync_fd readable), its VMM exits (pidfd readable) or
 * the deadline passes (checked every tick), the boot is finished and the
 * reply written. A delete of a booting sandbox, or the worker stopping,
 * ends the boot first (the VMM is killed; the create fails). The same for
 * starts (resume, restore in place) and for a branch's children, which end
 * as one group. vm creates that arrive while the runtime probes KVM with
 * another boot wait here for its verdict. */
#include <assert.h>
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
#include "time-util.h"
#include "worker-internal.h"

struct WorkerBoot {
        WorkerPending p;
        void *client;          /* where the reply goes; NULL once that connection is gone */
        bool cancelled;        /* deleted (or the worker stops) while booting */
        WorkerBootGroup *group; /* a branch's child: the group replies, once all its children ended */
        size_t index;          /* ... as its index-th child */
};

/* A branch's children, restored or booted at once: one reply, once every
 * child has ended; all or nothing (a child that fails takes its siblings
 * down then). */
struct WorkerBootGroup {
        void *client;          /* NULL once that connection is gone */
        char source[64];
        bool with_memory, failed, released;
        bool deletion_told;    /* e names a child deleted while starting: the cause of any other failure */
        size_t n, open;        /* children; children still booting (+1 until released) */
        ApiError e;            /* the first failure, or the deletion of a child */
        WorkerBranchChild kids[]; /* live: finished, it runs (undone if the group fails) */
};

/* A create held back until the KVM probe has spoken. */
typedef struct WorkerProbeWait WorkerProbeWait;
struct WorkerProbeWait {
        char id[64];
        void *client; /* NULL once that connection is gone */
        JsonValue *spec;
};

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

WorkerBootGroup *worker_boot_group_new(Worker *w, const char *source, const WorkerSpec *specs, size_t n,
                                       bool with_memory) {
        WorkerBootGroup *g;

        if (!w->current_client || GREEDY_REALLOC(w->boots, w->allocated_boots, w->n_boots + n) < 0)
                return NULL;
        g = calloc(1, sizeof *g + n * sizeof g->kids[0]);
        if (!g)
                return NULL;
        g->client = w->current_client;
        (void) strscpy(g->source, sizeof g->source, source);
        g->with_memory = with_memory;
        g->n = n;
        g->open = n + 1;
        for (size_t i = 0; i < n; i++) {
                (void) strscpy(g->kids[i].id, sizeof g->kids[i].id, specs[i].id);
                g->kids[i].made = true; /* its disk is there (the branch made them all before) */
        }
        return g;
}

static void group_reply(WorkerBootGroup *g, JsonWriter *jw) {
        if (g->failed)
                return worker_reply_error(jw, &g->e);
        worker_branch_reply(jw, g->kids, g->n, g->with_memory);
}

/* One child of g ended (i; GROUP_HOLD: the caller released it), r: finished, or why not (e). The
 * last one settles the group: any failure undoes every child (processes and disks). Returns true
 * when g is settled (to be replied to and freed). */
#define GROUP_HOLD SIZE_MAX
static bool group_child_done(Worker *w, WorkerBootGroup *g, size_t i, int r, const ApiError *e) {
        if (r < 0 && !g->failed) {
                g->failed = true;
                g->e = *e;
        }
        if (r >= 0 && i != GROUP_HOLD)
                g->kids[i].live = true;
        if (--g->open > 0)
                return false;
        if (!g->client && !g->failed) {
                g->failed = true; /* nobody will record them: they must not run unknown */
                api_error(&g->e, -ECANCELED, API_CONFLICT, "the branch of %s was abandoned", g->source);
        }
        for (size_t k = 0; !g->failed && k < g->n; k++)
                if (!worker_live_find(w, g->kids[k].id)) { /* deleted while its siblings started */
                        g->failed = true;
                        api_error(&g->e, -ECANCELED, API_CONFLICT, "sandbox %s was deleted while it was starting",
                                  g->kids[k].id);
                }
        if (g->failed)
                worker_branch_undo(w, g->kids, g->n);
        if (g->failed)
                log_warning("Sandbox %s: the branch failed (%s); none of its %zu children is kept", g->source,
                            g->e.message, g->n);
        else
                log_info("Sandbox %s branched into %zu%s", g->source, g->n, g->with_memory ? " with its memory" : "");
        return true;
}

static void group_settled(Worker *w, WorkerBootGroup *g) {
        if (g->client) {
                JsonWriter jw;
                json_w_init(&jw);
                group_reply(g, &jw);
                worker_client_reply_deferred(w, g->client, &jw);
                json_w_done(&jw);
        }
        free(g);
}

int worker_boot_defer_child(Worker *w, WorkerBootGroup *g, size_t i, WorkerPending *p) {
        struct epoll_event ev = { .events = EPOLLIN };
        WorkerBoot *b;
        int r = -ENOMEM;

        assert(i < g->n && !g->released);
        (void) strscpy(g->kids[i].id, sizeof g->kids[i].id, p->id);
        b = new0(WorkerBoot, 1);
        if (b) {
                b->p = *p;
                b->client = g->client;
                b->group = g;
                b->index = i;
                ev.data.u64 = WORKER_TAG_BOOT | (uint64_t) (uintptr_t) b;
                if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, b->p.p.sync_fd, &ev) >= 0 &&
                    epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, b->p.p.pidfd, &ev) >= 0) {
                        w->boots[w->n_boots++] = b; /* room made by worker_boot_group_new */
                        return 0;
                }
                r = negative_errno();
                (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, b->p.p.sync_fd, NULL);
                free(b);
        }
        /* it cannot be waited for: it ends now, failed (the group learns at its release) */
        ApiError e = {};
        int64_t pid;
        uint64_t st;
        (void) syscall(SYS_pidfd_send_signal, p->p.pidfd, SIGKILL, NULL, 0);
        (void) worker_finish_runtime(w, p, &pid, &st, &(ApiError){});
        api_error(&e, r, API_INTERNAL, "cannot wait for the guest of %s: %s", p->id, strerror(-r));
        (void) group_child_done(w, g, i, r, &e);
        return r;
}

void worker_boot_group_release(Worker *w, WorkerBootGroup *g, size_t spawned, const ApiError *e, JsonWriter *jw) {
        assert(!g->released);
        g->released = true;
        for (size_t i = spawned; i < g->n; i++) /* never spawned: failed with e */
                (void) group_child_done(w, g, i, -ECANCELED, e);
        if (!group_child_done(w, g, GROUP_HOLD, 0, NULL)) {
                w->reply_deferred = true; /* the last child to end replies */
                log_debug("Sandbox %s: %zu children starting; the worker serves other requests meanwhile", g->source,
                          g->open);
                return;
        }
        group_reply(g, jw); /* every child ended already: the reply goes now */
        free(g);
}

int worker_boot_wait_probe(Worker *w, const char *id, const JsonValue *spec) {
        WorkerProbeWait *q;

        if (!w->current_client || GREEDY_REALLOC(w->probe_waits, w->allocated_probe_waits, w->n_probe_waits + 1) < 0)
                return -ENOMEM;
        q = &w->probe_waits[w->n_probe_waits];
        *q = (WorkerProbeWait){ .client = w->current_client, .spec = worker_json_copy(spec) };
        if (!q->spec || strscpy(q->id, sizeof q->id, id) < 0) {
                json_free(q->spec);
                return -ENOMEM;
        }
        w->n_probe_waits++;
        w->reply_deferred = true;
        log_info("Sandbox %s: waits for the KVM probe's verdict; the worker serves other requests meanwhile", id);
        return 0;
}

static void reply_to(Worker *w, void *client, int r, const ApiError *e, int64_t pid, uint64_t st) {
        JsonWriter jw;

        json_w_init(&jw);
        if (r < 0)
                worker_reply_error(&jw, e);
        else {
                json_w_object_begin(&jw);
                json_w_kv_bool(&jw, "ok", true);
                json_w_kv_int(&jw, "pid", pid);
                json_w_key(&jw, "starttime");
                json_w_uint(&jw, st);
                json_w_object_end(&jw);
        }
        worker_client_reply_deferred(w, client, &jw);
        json_w_done(&jw);
}

/* The probe has spoken (or was cut short: then the first of them probes again): the creates that
 * waited for it run now, as if they had just arrived. */
static void probe_waits_run(Worker *w) {
        WorkerProbeWait *waits = TAKE_PTR(w->probe_waits);
        size_t n = w->n_probe_waits;

        w->n_probe_waits = w->allocated_probe_waits = 0;
        for (size_t i = 0; i < n; i++) {
                void *saved_client = w->current_client;
                bool saved_deferred = w->reply_deferred;
                ApiError e = {};
                int64_t pid = 0;
                uint64_t st = 0;
                int r;

                if (waits[i].client) {
                        w->current_client = waits[i].client;
                        w->reply_deferred = false;
                        r = worker_create_sandbox(w, waits[i].spec, &pid, &st, &e);
                        if (!w->reply_deferred)
                                reply_to(w, waits[i].client, r, &e, pid, st);
                        w->current_client = saved_client;
                        w->reply_deferred = saved_deferred;
                }
                json_free(waits[i].spec);
        }
        free(waits);
}

/* A waiting create of id (deleted) or of every one (the worker stops) fails; true if there was one. */
static bool probe_waits_cancel(Worker *w, const char *id) {
        bool found = false;

        for (size_t i = 0; i < w->n_probe_waits;) {
                WorkerProbeWait q = w->probe_waits[i];
                if (id && !streq(q.id, id)) {
                        i++;
                        continue;
                }
                w->probe_waits[i] = w->probe_waits[--w->n_probe_waits];
                if (q.client) {
                        ApiError e = {};
                        api_error(&e, -ECANCELED, API_CONFLICT, "sandbox %s was deleted while it was starting", q.id);
                        reply_to(w, q.client, -ECANCELED, &e, 0, 0);
                }
                json_free(q.spec);
                found = true;
        }
        return found;
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
        bool probe = b->p.p.accel_probe; /* its verdict lets the creates waiting for it go on */
        int r;

        boot_remove(w, b);
        memcpy(id, b->p.id, sizeof id);
        if (b->cancelled) /* the VMM dies; finish unwinds at once */
                (void) syscall(SYS_pidfd_send_signal, b->p.p.pidfd, SIGKILL, NULL, 0);
        r = worker_finish_runtime(w, &b->p, &pid, &st, &e);
        if (b->group) {
                WorkerBootGroup *g = b->group;
                if (b->cancelled && r >= 0)
                        (void) worker_cleanup_sandbox(w, id, false);
                if (b->cancelled) {
                        r = api_error(&e, -ECANCELED, API_CONFLICT, "sandbox %s was deleted while it was starting",
                                      id);
                        /* a sibling that failed meanwhile (its guest stalled while this delete waited) is
                         * not what the caller did: the deletion is told */
                        if (!g->deletion_told) {
                                g->failed = g->deletion_told = true;
                                g->e = e;
                        }
                }
                if (r >= 0) {
                        g->kids[b->index].pid = pid;
                        g->kids[b->index].starttime = st;
                }
                if (group_child_done(w, g, b->index, r, &e))
                        group_settled(w, g);
                free(b);
                return;
        }
        if (r >= 0 && (b->cancelled || !b->client)) {
                /* nobody will record it: it must not run unknown */
                (void) worker_cleanup_sandbox(w, id, false);
                r = api_error(&e, -ECANCELED, API_CONFLICT, "sandbox %s was deleted while it was starting", id);
        }
        if (b->p.start_op && b->p.state_path && !b->p.keep_state && (r >= 0 || b->cancelled || !b->client))
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
        if (r == -EAGAIN && probe && !b->cancelled && b->client && b->p.retry_spec) {
                /* KVM does not work here: the runtime uses TCG from now on, and the create runs again */
                void *saved_client = w->current_client;
                bool saved_deferred = w->reply_deferred;
                log_warning("Sandbox %s: %s", id, e.message);
                e = (ApiError){};
                w->current_client = b->client;
                w->reply_deferred = false;
                r = worker_create_sandbox(w, b->p.retry_spec, &pid, &st, &e);
                if (w->reply_deferred)
                        b->client = NULL; /* the new boot replies */
                w->current_client = saved_client;
                w->reply_deferred = saved_deferred;
        } else if (r < 0 && !b->cancelled && b->client && b->p.retry_spec &&
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
        if (probe)
                probe_waits_run(w);
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

/* id is a child of a branch whose siblings still start, and it has ended already (failed, say its
 * guest stalled): its deletion is what the caller is told, not that failure. */
static void group_tell_deletion(Worker *w, const char *id) {
        for (size_t i = 0; i < w->n_boots; i++) {
                WorkerBootGroup *g = w->boots[i]->group;
                if (!g || g->deletion_told)
                        continue;
                for (size_t k = 0; k < g->n; k++)
                        if (streq(g->kids[k].id, id)) {
                                g->failed = g->deletion_told = true;
                                api_error(&g->e, -ECANCELED, API_CONFLICT,
                                          "sandbox %s was deleted while it was starting", id);
                                return;
                        }
        }
}

bool worker_boot_cancel(Worker *w, const char *id) {
        if (probe_waits_cancel(w, id))
                return true;
        for (size_t i = 0; i < w->n_boots; i++)
                if (streq(w->boots[i]->p.id, id)) {
                        w->boots[i]->cancelled = true;
                        boot_done(w, w->boots[i]);
                        return true;
                }
        group_tell_deletion(w, id);
        return false;
}

bool worker_boot_pending(Worker *w, const char *id) {
        for (size_t i = 0; i < w->n_boots; i++)
                if (streq(w->boots[i]->p.id, id))
                        return true;
        for (size_t i = 0; i < w->n_probe_waits; i++)
                if (streq(w->probe_waits[i].id, id))
                        return true;
        return false;
}

void worker_boot_client_gone(Worker *w, void *client) {
        for (size_t i = 0; i < w->n_boots; i++) {
                if (w->boots[i]->client == client)
                        w->boots[i]->client = NULL;
                if (w->boots[i]->group && w->boots[i]->group->client == client)
                        w->boots[i]->group->client = NULL;
        }
        for (size_t i = 0; i < w->n_probe_waits; i++)
                if (w->probe_waits[i].client == client)
                        w->probe_waits[i].client = NULL;
}

void worker_boot_cancel_all(Worker *w) {
        (void) probe_waits_cancel(w, NULL);
        w->probe_waits = mfree(w->probe_waits);
        w->allocated_probe_waits = 0;
        while (w->n_boots > 0) {
                w->boots[0]->cancelled = true;
                boot_done(w, w->boots[0]);
        }
        w->boots = mfree(w->boots);
        w->allocated_boots = 0;
}
