/* SPDX-License-Identifier: MIT */
/* Lifecycle on the host: pause/resume (freezer), suspend (processes end,
 * files stay), start on an existing root, checkpoints, restore, branch. The
 * API decides and records states; the worker acts on the host. */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "worker-internal.h"

static void reply_pid(JsonWriter *jw, int64_t pid, uint64_t starttime) {
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_kv_int(jw, "pid", pid);
        json_w_key(jw, "starttime");
        json_w_uint(jw, starttime);
        json_w_object_end(jw);
}

static int freeze(Worker *w, LiveSandbox *l, bool frozen, ApiError *e) {
        int r;
        if (l->frozen == frozen)
                return 0;
        r = l->rt->freeze(l->id, frozen);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot %s sandbox %s: %s", frozen ? "freeze" : "thaw", l->id,
                                 strerror(-r));
        l->frozen = frozen;
        return 0;
}

void worker_op_pause(Worker *w, const JsonValue *req, bool pause, JsonWriter *jw) {
        ApiError e = {};
        const char *id = worker_req_id(req, "id", &e);
        LiveSandbox *l;

        if (!id)
                return worker_reply_error(jw, &e);
        l = worker_live_find(w, id);
        if (!l) {
                api_error(&e, -ESRCH, API_SANDBOX_NOT_RUNNING, "sandbox %s is not running here", id);
                return worker_reply_error(jw, &e);
        }
        if (freeze(w, l, pause, &e) < 0)
                return worker_reply_error(jw, &e);
        worker_reply_ok(jw);
}

void worker_op_suspend(Worker *w, const JsonValue *req, JsonWriter *jw) {
        ApiError e = {};
        const char *id = worker_req_id(req, "id", &e);
        bool preserved = false;
        LiveSandbox *l;
        int r;

        if (!id)
                return worker_reply_error(jw, &e);
        l = worker_live_find(w, id);
        /* vm: the whole machine is saved beside its disk; resume continues it. Not one with volumes
         * (QEMU cannot save it): its processes end as on the ns runtime (the guest's dirty data
         * synced to its disk first), resume boots its disk */
        if (l && l->rt->suspend && worker_sandbox_has_volumes(w, id)) {
                char sock[PATH_MAX];
                if (l->frozen && l->rt->freeze(id, false) >= 0)
                        l->frozen = false;
                if (!l->frozen && l->rt->sync && worker_agent_socket(w, id, sock, sizeof sock) >= 0 &&
                    (r = l->rt->sync(sock)) < 0)
                        log_warning_errno(r, "Sandbox %s: its guest did not sync before the suspend: %m", id);
        } else if (l && l->rt->suspend) {
                _cleanup_free_ char *state = NULL;
                char ca_saved[PATH_MAX];
                r = pool_sandbox_memory_path(w->pool, id, &state);
                if (r >= 0)
                        r = l->rt->suspend(id, state);
                if (r < 0) {
                        api_error(&e, r, API_INTERNAL, "cannot save sandbox %s's memory: %s", id, strerror(-r));
                        return worker_reply_error(jw, &e);
                }
                /* its CA goes with its memory: the processes that resume trust it */
                snprintf(ca_saved, sizeof ca_saved, "%s" WORKER_CA_SAVED_SUFFIX, state);
                r = worker_cred_save(w, id, ca_saved);
                if (r < 0)
                        log_warning_errno(r, "Sandbox %s: cannot keep its CA with its memory (it gets a new one at "
                                          "resume): %m", id);
                preserved = true;
        }
        /* The ns runtime cannot keep process state: processes end, files stay; a veth goes after them,
         * in the background (its deletion waits for the kernel's RCU grace periods) */
        l = worker_live_find(w, id);
        bool link_later = l && l->net && l->rt->net == RUNTIME_NET_VETH && worker_teardown_available(w);
        uint64_t slot = l ? l->slot : 0;
        if (link_later)
                l->net = false;
        r = worker_cleanup_sandbox(w, id, false);
        if (link_later)
                worker_net_detach_later(w, id, slot);
        if (r < 0) {
                api_error(&e, r, API_INTERNAL, "cannot suspend %s completely: %s", id, strerror(-r));
                return worker_reply_error(jw, &e);
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_kv_bool(jw, "processes_preserved", preserved);
        json_w_object_end(jw);
}

int worker_start_runtime_deferred(Worker *w, WorkerSpec *s, const char *root, const char *state, bool keep_state,
                                  const JsonValue *spec, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e) {
        const RuntimeOps *rt = worker_runtime(w, s->runtime, &(ApiError){});
        WorkerPending p;
        int r;

        if (!rt || rt->start != RUNTIME_START_BOOT || !w->current_client)
                return worker_start_runtime(w, s, root, ret_pid, ret_starttime, e);
        r = worker_spawn_runtime(w, s, root, &p, e);
        if (r < 0)
                return r;
        if (p.created)
                return worker_finish_runtime(w, &p, ret_pid, ret_starttime, e);
        p.start_op = true;
        p.keep_state = keep_state;
        p.state_path = state ? strdup(state) : NULL;
        p.retry_spec = worker_json_copy(spec);
        if ((!state || p.state_path) && p.retry_spec && worker_boot_defer(w, &p) >= 0)
                return 0;
        p.state_path = mfree(p.state_path);
        p.retry_spec = json_free(p.retry_spec);
        (void) syscall(SYS_pidfd_send_signal, p.p.pidfd, SIGKILL, NULL, 0);
        (void) worker_finish_runtime(w, &p, ret_pid, ret_starttime, &(ApiError){});
        return api_error(e, -ENOMEM, API_INTERNAL, "cannot wait for the guest of %s", s->id);
}

void worker_op_start(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_(worker_spec_done) WorkerSpec s = {};
        _cleanup_free_ char *root = NULL, *state = NULL;
        const RuntimeOps *rt;
        ApiError e = {};
        int64_t pid = 0;
        uint64_t st = 0;
        int r;

        if (worker_spec_parse(w, json_get(req, "sandbox"), &s, &e) < 0)
                return worker_reply_error(jw, &e);
        rt = worker_runtime(w, s.runtime, &e);
        if (!rt)
                return worker_reply_error(jw, &e);
        if (rt->root == RUNTIME_ROOT_IMAGE) {
                /* its disk, and the machine saved at suspend if there is one */
                r = pool_sandbox_disk_path(w->pool, s.id, &root);
                if (r >= 0)
                        r = pool_sandbox_memory_path(w->pool, s.id, &state);
                if (r >= 0 && access(state, F_OK) < 0)
                        state = mfree(state);
        } else
                r = pool_sandbox_root_path(w->pool, s.id, &root);
        if (r < 0) {
                api_error(&e, r, r == -ENOENT ? API_NOT_FOUND : API_INTERNAL, "sandbox %s has no root here: %s", s.id,
                          strerror(-r));
                return worker_reply_error(jw, &e);
        }
        s.restore_path = state;
        r = worker_start_runtime_deferred(w, &s, root, state, false, json_get(req, "sandbox"), &pid, &st, &e);
        if (r >= 0 && w->reply_deferred)
                return; /* worker-boot.c replies */
        if (r < 0 && state) {
                /* the saved machine would not run again: boot on the disk (its processes are lost, and the
                 * reply says so) rather than leave the sandbox unusable */
                log_warning("Sandbox %s: restoring its saved memory failed (%s); booting it on its disk", s.id,
                            e.message);
                (void) unlink(state);
                state = mfree(state);
                s.restore_path = NULL;
                e = (ApiError){};
                r = worker_start_runtime(w, &s, root, &pid, &st, &e);
        }
        if (state || rt->root == RUNTIME_ROOT_IMAGE) {
                _cleanup_free_ char *saved = NULL;
                if (pool_sandbox_memory_path(w->pool, s.id, &saved) >= 0) {
                        char ca_saved[PATH_MAX];
                        snprintf(ca_saved, sizeof ca_saved, "%s" WORKER_CA_SAVED_SUFFIX, saved);
                        (void) unlink(ca_saved); /* put back, or of a machine that did not resume */
                }
        }
        if (r < 0)
                return worker_reply_error(jw, &e);
        if (state)
                (void) unlink(state); /* the disk has moved on: that machine cannot be started again */
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "pid");
        json_w_int(jw, pid);
        json_w_key(jw, "starttime");
        json_w_uint(jw, st);
        json_w_kv_bool(jw, "processes_preserved", state != NULL);
        json_w_object_end(jw);
}

void worker_op_checkpoint(Worker *w, const JsonValue *req, JsonWriter *jw) {
        ApiError e = {};
        const char *id = worker_req_id(req, "id", &e), *ck = id ? worker_req_id(req, "checkpoint", &e) : NULL;
        LiveSandbox *l;
        bool was_frozen, with_memory = false;
        uint64_t size = 0, max_mb = 0, held = 0;
        int r, k;

        if (!id || !ck)
                return worker_reply_error(jw, &e);
        if (json_get(req, "max_mb") && json_uint64(json_get(req, "max_mb"), &max_mb) < 0) {
                api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "bad 'max_mb'");
                return worker_reply_error(jw, &e);
        }
        (void) json_bool(json_get(req, "with_memory"), &with_memory);
        /* the root's data becomes the checkpoint's too: the sandbox may write its quota again */
        if (worker_admit_checkpoint(w, id, &e) < 0)
                return worker_reply_error(jw, &e);
        if (pool_sandbox_is_vm(w->pool, id)) {
                /* a vm checkpoint's files are counted as allocated (not as
                 * btrfs exclusive bytes): the cap is checked before it (a
                 * cap reached already) and after it (worker-vm.c) */
                if (max_mb > 0 && pool_checkpoint_usage_total(w->pool, id, &held) >= 0 && held >> 20 >= max_mb) {
                        api_error(&e, -ENOSPC, API_INSUFFICIENT_STORAGE,
                                  "the checkpoints of sandbox %s hold %" PRIu64 " MiB, its cap is %" PRIu64
                                  " MiB (checkpoints_mb); delete some first",
                                  id, held >> 20, max_mb);
                        return worker_reply_error(jw, &e);
                }
                return worker_vm_op_checkpoint(w, id, ck, with_memory, max_mb, jw);
        }
        if (with_memory) {
                api_error(&e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                          "sandbox %s runs on the ns runtime, which cannot save memory (with_memory needs the vm "
                          "runtime)", id);
                return worker_reply_error(jw, &e);
        }
        l = worker_live_find(w, id);
        was_frozen = l && l->frozen;
        /* processes briefly frozen so the snapshot is consistent */
        if (l && freeze(w, l, true, &e) < 0)
                return worker_reply_error(jw, &e);
        r = pool_checkpoint_create(w->pool, id, ck);
        /* the volumes' copies at the same moment, still frozen */
        if (r >= 0 && worker_volume_copies_take(w, id, ck, &e) < 0) {
                (void) pool_checkpoint_remove(w->pool, id, ck);
                ApiError thaw = {};
                if (l && !was_frozen && (l = worker_live_find(w, id)))
                        (void) freeze(w, l, false, &thaw);
                return worker_reply_error(jw, &e);
        }
        if (l && !was_frozen && (l = worker_live_find(w, id))) {
                k = freeze(w, l, false, &e);
                if (k < 0 && r >= 0) {
                        (void) pool_checkpoint_remove(w->pool, id, ck);
                        return worker_reply_error(jw, &e);
                }
        }
        if (r < 0) {
                worker_storage_error(w, r, &e, r == -EEXIST ? API_ALREADY_EXISTS : api_error_code_from_errno(r),
                                     "cannot checkpoint %s: %s", id, strerror(-r));
                return worker_reply_error(jw, &e);
        }
        (void) pool_checkpoint_usage(w->pool, id, ck, &size);
        /* The cap, measured after the snapshot: taking it flushed the root's
         * pending writes and committed the transaction, so the qgroups count
         * every write up to now (before it, they lag up to a commit interval
         * behind). The new checkpoint shares all its data with the root and
         * adds nothing; over the cap it goes again, so nothing is created.
         * A pool without qgroups cannot tell: only the count caps it there. */
        if (max_mb > 0 && pool_checkpoint_usage_total(w->pool, id, &held) >= 0) {
                held = held > size ? held - size : 0;
                if (held >= max_mb << 20) {
                        k = pool_checkpoint_remove(w->pool, id, ck);
                        if (k < 0)
                                log_warning_errno(k, "Failed to remove checkpoint %s of %s past its cap: %m", ck, id);
                        api_error(&e, -ENOSPC, API_INSUFFICIENT_STORAGE,
                                  "the checkpoints of sandbox %s hold %" PRIu64 " MiB (%" PRIu64
                                  " bytes only they keep), its cap is %" PRIu64
                                  " MiB (checkpoints_mb): delete some first",
                                  id, held >> 20, held, max_mb);
                        return worker_reply_error(jw, &e);
                }
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "size_bytes");
        json_w_uint(jw, size);
        json_w_object_end(jw);
}

/* The sandbox's count of processes the kernel killed for memory (cgroup v2
 * memory.events oom_kill, v1 memory.oom_control oom_kill). */
void worker_op_oom_kills(Worker *w, const JsonValue *req, JsonWriter *jw) {
        ApiError e = {};
        const char *id = worker_req_id(req, "id", &e);
        LiveSandbox *l;
        uint64_t n = 0;
        int r;

        if (!id)
                return worker_reply_error(jw, &e);
        l = worker_live_find(w, id);
        if (!l) {
                api_error(&e, -ESRCH, API_SANDBOX_NOT_RUNNING, "sandbox %s is not running here", id);
                return worker_reply_error(jw, &e);
        }
        r = l->rt->oom_kills(l->id, &n);
        if (r < 0) {
                api_error(&e, r, API_INTERNAL, "cannot read the OOM count of %s: %s", id, strerror(-r));
                return worker_reply_error(jw, &e);
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "oom_kills");
        json_w_uint(jw, n);
        json_w_object_end(jw);
}

void worker_op_checkpoint_sizes(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_strv_free_ char **ids = NULL;
        ApiError e = {};
        const char *id = worker_req_id(req, "id", &e);
        int r;

        if (!id)
                return worker_reply_error(jw, &e);
        r = pool_checkpoint_list(w->pool, id, &ids);
        if (r == -ENOENT)
                r = 0; /* neither root nor checkpoints: none */
        if (r < 0) {
                api_error(&e, r, API_INTERNAL, "cannot list the checkpoints of %s: %s", id, strerror(-r));
                return worker_reply_error(jw, &e);
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "sizes");
        json_w_object_begin(jw);
        for (char **i = ids; i && *i; i++) {
                uint64_t bytes;
                if (pool_checkpoint_usage(w->pool, id, *i, &bytes) < 0)
                        continue; /* removed meanwhile, or a pool that cannot tell */
                json_w_key(jw, *i);
                json_w_uint(jw, bytes);
        }
        json_w_object_end(jw);
        json_w_object_end(jw);
}

void worker_op_checkpoint_remove(Worker *w, const JsonValue *req, JsonWriter *jw) {
        ApiError e = {};
        const char *id = worker_req_id(req, "id", &e), *ck = id ? worker_req_id(req, "checkpoint", &e) : NULL;
        int r;

        if (!id || !ck)
                return worker_reply_error(jw, &e);
        r = pool_checkpoint_remove(w->pool, id, ck);
        if (r < 0 && r != -ENOENT) {
                api_error(&e, r, API_INTERNAL, "cannot remove checkpoint %s of %s: %s", ck, id, strerror(-r));
                return worker_reply_error(jw, &e);
        }
        worker_reply_ok(jw);
}

/* A restore's new root holds the checkpoint's data (shared) under the quota
 * disk_mb, and may write all of it; the old root's data goes with it, so what
 * that held is counted as given back. */
static int restore_admit(Worker *w, const WorkerSpec *s, ApiError *e) {
        PoolSpace sp;
        uint64_t quota = s->disk_mb << 20, held = 0;

        if (pool_space_read(w->pool, s->id, &sp) >= 0)
                held = sp.self_promised_bytes - MIN(sp.self_outstanding_bytes, sp.self_promised_bytes);
        return worker_admit_disk(w, "restore", s->id, quota, quota - MIN(held, quota), e);
}

void worker_op_restore(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_(worker_spec_done) WorkerSpec s = {};
        WorkerVolumeMoves moved;
        _cleanup_free_ char *root = NULL;
        const char *ck;
        ApiError e = {};
        int64_t pid = 0;
        uint64_t st = 0;
        int r;

        if (worker_spec_parse(w, json_get(req, "sandbox"), &s, &e) < 0)
                return worker_reply_error(jw, &e);
        ck = worker_req_id(req, "checkpoint", &e);
        if (!ck)
                return worker_reply_error(jw, &e);
        if (!pool_checkpoint_exists(w->pool, s.id, ck)) {
                api_error(&e, -ENOENT, API_NOT_FOUND, "no checkpoint %s of sandbox %s here", ck, s.id);
                return worker_reply_error(jw, &e);
        }
        if (restore_admit(w, &s, &e) < 0)
                return worker_reply_error(jw, &e);
        if (pool_sandbox_is_vm(w->pool, s.id))
                return worker_vm_op_restore(w, &s, json_get(req, "sandbox"), ck, jw);
        /* running processes end; the agent starts afresh on the restored files */
        (void) worker_cleanup_sandbox(w, s.id, false);
        /* a recovery here: its volumes come along, as they were at the checkpoint */
        if (worker_volumes_move_in(w, &s, ck, &moved, &e) < 0)
                return worker_reply_error(jw, &e);
        r = pool_sandbox_restore(w->pool, s.id, ck, s.disk_mb, &root);
        if (r < 0) {
                worker_volumes_move_back(w, &s, &moved);
                worker_storage_error(w, r, &e, api_error_code_from_errno(r), "cannot restore %s to %s: %s", s.id, ck,
                                     strerror(-r));
                return worker_reply_error(jw, &e);
        }
        if (worker_start_runtime(w, &s, root, &pid, &st, &e) < 0) {
                worker_volumes_move_back(w, &s, &moved);
                return worker_reply_error(jw, &e);
        }
        reply_pid(jw, pid, st);
}

/* A root the roots helper did not answer (it is gone): made in process. */
#define BRANCH_ROOT_IN_PROCESS 1

/* Waits for the roots helper's answers until the root of child i is
 * answered (or, i = n, all that were sent): each answer goes to its child's
 * slot. When the helper is gone (then none of its snapshots is in flight any
 * more), the roots it did not answer are BRANCH_ROOT_IN_PROCESS. */
static void branch_roots_await(Worker *w, size_t i, size_t sent, int *results, bool *answered, size_t *n_answered) {
        while (i < sent ? !answered[i] : *n_answered < sent) {
                uint32_t tag;
                int res;

                if (worker_roots_recv(w, &tag, &res) < 0) {
                        for (size_t j = 0; j < sent; j++)
                                if (!answered[j]) {
                                        answered[j] = true;
                                        results[j] = BRANCH_ROOT_IN_PROCESS;
                                        (*n_answered)++;
                                }
                        return;
                }
                if (tag >= sent || answered[tag])
                        continue; /* not one we wait for */
                answered[tag] = true;
                results[tag] = res;
                (*n_answered)++;
        }
}

/* The quotas of all the children of a branch at once: all or nothing, like the branch. */
static int branch_admit(Worker *w, const WorkerBranch *b, ApiError *e) {
        uint64_t total = 0;
        char what[64];

        for (size_t i = 0; i < b->n; i++) {
                uint64_t bytes = b->specs[i].disk_mb << 20;
                total = total + bytes < total ? UINT64_MAX : total + bytes;
        }
        snprintf(what, sizeof what, b->n == 1 ? "branch of %zu sandbox" : "branch of %zu sandboxes", b->n);
        return worker_admit_disk(w, what, NULL, total, total, e);
}

/* {"op":"branch","source":ID,"checkpoint":CK?,"sandboxes":[spec...]}: every
 * child gets a copy of the same moment (the source is frozen once around all
 * snapshots). All or nothing. */
void worker_op_branch(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_(worker_branch_done) WorkerBranch b = {};
        WorkerSpec *specs = b.specs;
        char *roots[WORKER_BRANCH_MAX] = {};
        WorkerPending pending[WORKER_BRANCH_MAX];
        WorkerSpawnPrep *preps = NULL; /* ns children: spawns sent ahead (worker_spawn_prepare) */
        size_t n, made = 0, spawned = 0, sent = 0, n_answered = 0;
        int results[WORKER_BRANCH_MAX] = {};
        bool answered[WORKER_BRANCH_MAX] = {}, helper = false;
        const char *src, *ck;
        LiveSandbox *l;
        bool was_frozen = false;
        ApiError e = {};
        int64_t t_start = now_usec(), t_roots = 0, t_spawn = 0, t_finish;
        int r = 0;

        if (worker_branch_parse(w, req, &b, &e) < 0 || branch_admit(w, &b, &e) < 0)
                return worker_reply_error(jw, &e);
        src = b.source;
        ck = b.checkpoint;
        n = b.n;
        if (pool_sandbox_is_vm(w->pool, src))
                return worker_vm_op_branch(w, &b, jw);
        if (b.with_memory) {
                api_error(&e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                          "sandbox %s runs on the ns runtime, which cannot branch memory (with_memory needs the vm "
                          "runtime)", src);
                return worker_reply_error(jw, &e);
        }

        /* The helper makes the roots; each child starts as soon as its root
         * is there (its setup runs while the next snapshot commits); all are
         * waited for at the end. */
        l = ck ? NULL : worker_live_find(w, src);
        was_frozen = l && l->frozen;
        if (l && freeze(w, l, true, &e) < 0) {
                r = -EIO;
                goto finish;
        }
        if (n > 1 && worker_roots_ready(w)) { /* one child has nothing to overlap */
                helper = true;
                for (; sent < n; sent++)
                        if (worker_roots_send(w, (uint32_t) sent, src, ck, specs[sent].id, specs[sent].disk_mb) < 0)
                                break; /* it is gone: the rest are made in process */
                for (size_t j = sent; j < n; j++) {
                        answered[j] = true;
                        results[j] = BRANCH_ROOT_IN_PROCESS;
                        n_answered++;
                }
                sent = n;
        }
        /* children the spawner clones are cloned while the helper makes their
         * roots, and the worker hands over each root and makes its link */
        const RuntimeOps *child_rt = worker_runtime(w, specs[0].runtime, &(ApiError){});
        if (helper && r >= 0 && child_rt && child_rt->start == RUNTIME_START_SPAWN && child_rt->give_root) {
                preps = new0(WorkerSpawnPrep, n);
                if (!preps) {
                        r = -ENOMEM;
                        api_error(&e, r, API_INTERNAL, "out of memory");
                }
                for (size_t i = 0; preps && i < n; i++)
                        preps[i].tap_fd = -EBADF;
                for (size_t i = 0; preps && i < n && r >= 0; i++) {
                        r = worker_spawn_prepare(w, &specs[i], NULL, &preps[i], &pending[i], &e);
                        if (r >= 0)
                                worker_spawn_send(w, &pending[i], &preps[i]);
                }
        }
        for (; r >= 0 && made < n; made++) {
                int64_t t = now_usec();
                if (helper) {
                        branch_roots_await(w, made, sent, results, answered, &n_answered);
                        t_roots += now_usec() - t;
                        r = results[made];
                        if (r == BRANCH_ROOT_IN_PROCESS) {
                                /* whatever the helper made of it before it went */
                                (void) pool_sandbox_remove(w->pool, specs[made].id);
                                r = pool_sandbox_branch(w->pool, src, ck, specs[made].id, specs[made].disk_mb,
                                                        &roots[made]);
                        } else if (r >= 0)
                                r = pool_sandbox_root_path(w->pool, specs[made].id, &roots[made]);
                } else
                        r = pool_sandbox_branch(w->pool, src, ck, specs[made].id, specs[made].disk_mb, &roots[made]);
                if (r < 0) {
                        worker_storage_error(w, r, &e, r == -ENOENT ? API_NOT_FOUND : api_error_code_from_errno(r),
                                             "cannot branch %s: %s", src, strerror(-r));
                        break;
                }
                t = now_usec();
                if (preps)
                        r = worker_spawn_complete(w, &specs[made], &preps[made], roots[made], &pending[made], &e);
                else
                        r = worker_spawn_runtime(w, &specs[made], roots[made], &pending[made], &e);
                t_spawn += now_usec() - t;
                if (r < 0) {
                        made++; /* its root is there */
                        break;
                }
                spawned++;
        }
        t_finish = now_usec();
        /* what was sent but not completed goes, in the order it was sent */
        for (size_t i = spawned; preps && i < n; i++)
                worker_spawn_cancel(w, &preps[i], &pending[i]);
        if (helper) {
                /* every snapshot sent is over before anything of the branch is undone */
                branch_roots_await(w, n, sent, results, answered, &n_answered);
                if (r < 0)
                        made = n; /* whatever it made goes (a missing one is fine) */
        }
        if (l && !was_frozen && (l = worker_live_find(w, src)))
                (void) freeze(w, l, false, &e);
        for (size_t i = 0; i < spawned; i++) {
                ApiError fe = {};
                int k = worker_finish_runtime(w, &pending[i], &b.kids[i].pid, &b.kids[i].starttime,
                                              r < 0 ? &fe : &e);
                if (k >= 0)
                        b.kids[i].live = true;
                else if (r >= 0)
                        r = k;
        }
        log_debug("Branch of %s: %zu sandboxes started in %" PRIi64 " us (roots awaited %" PRIi64 " us, spawns and "
                  "links %" PRIi64 " us, then their setups and the gateway awaited %" PRIi64 " us)", src, spawned,
                  now_usec() - t_start, t_roots, t_spawn, now_usec() - t_finish);

finish:
        if (r < 0) {
                for (size_t i = 0; i < made; i++)
                        b.kids[i].made = true;
                worker_branch_undo(w, b.kids, n);
                worker_reply_error(jw, &e);
        } else
                worker_branch_reply(jw, b.kids, n, false);
        for (size_t i = 0; i < WORKER_BRANCH_MAX; i++)
                free(roots[i]);
        for (size_t i = 0; preps && i < n; i++)
                worker_spawn_prep_done(&preps[i]);
        free(preps);
}

/* A new disk quota for a live sandbox (PATCH disk_mb): a larger one is
 * admitted like a create of the difference (what its root holds stays its
 * own), a smaller one always fits. */
static int resize_disk(Worker *w, LiveSandbox *l, const WorkerSpec *s, ApiError *e) {
        uint64_t quota = s->disk_mb << 20, held;
        PoolSpace sp;
        int r;

        if (l->limits_known && l->limits.fsize_bytes == quota)
                return 0; /* what it has (a taken warm sandbox, or limits without disk_mb changed) */
        r = pool_space_read(w->pool, s->id, &sp);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot read the storage pool's space: %s", strerror(-r));
        if (sp.self_promised_bytes == 0 || sp.self_promised_bytes == quota || s->disk_mb == 0)
                return 0; /* no quota to change (overlay, none set), or the same */
        if (l->rt->root != RUNTIME_ROOT_TREE)
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "the disk of a %s sandbox is an image of a fixed size: disk_mb cannot change",
                                 l->rt->name);
        if (quota > sp.self_promised_bytes) {
                held = sp.self_promised_bytes - MIN(sp.self_outstanding_bytes, sp.self_promised_bytes);
                r = worker_admit_disk(w, "resize", s->id, quota, quota - MIN(held, quota), e);
                if (r < 0)
                        return r;
        }
        r = pool_sandbox_set_quota(w->pool, s->id, s->disk_mb);
        if (r < 0)
                return worker_storage_error(w, r, e, API_INTERNAL, "cannot change the disk quota of %s: %s", s->id,
                                            strerror(-r));
        /* its largest file is its quota too (RLIMIT_FSIZE, ns-harden.c): PID 1's, which every new
         * process inherits (those running keep theirs) */
        if (prlimit(l->pid, RLIMIT_FSIZE, &(struct rlimit){ .rlim_cur = quota, .rlim_max = quota }, NULL) < 0)
                /* raising a hard limit needs CAP_SYS_RESOURCE: until it restarts, no one file of it
                 * grows past its old disk_mb (the quota, all its files together, is the new one) */
                log_info_errno(errno, "sandbox=%s Cannot set its file size limit to %" PRIu64 " MiB (%m): "
                               "single files stay within the old one until it restarts", s->id, s->disk_mb);
        log_info("Sandbox %s: disk quota %" PRIu64 " MiB (was %" PRIu64 " MiB)", s->id, s->disk_mb,
                 sp.self_promised_bytes >> 20);
        return 0;
}

/* The limits of a running sandbox; thaw: then its processes run again. */
static void set_limits(Worker *w, const JsonValue *req, bool thaw, JsonWriter *jw) {
        _cleanup_(worker_spec_done) WorkerSpec s = {};
        RuntimeLimits lim;
        LiveSandbox *l;
        ApiError e = {};
        int r;

        if (worker_spec_parse(w, json_get(req, "sandbox"), &s, &e) < 0)
                return worker_reply_error(jw, &e);
        l = worker_live_find(w, s.id);
        if (!l) {
                api_error(&e, -ESRCH, API_SANDBOX_NOT_RUNNING, "sandbox %s is not running here", s.id);
                return worker_reply_error(jw, &e);
        }
        lim = worker_spec_limits(&s);
        if (resize_disk(w, l, &s, &e) < 0)
                return worker_reply_error(jw, &e);
        /* a warm sandbox taken with the defaults it was made with: nothing to write */
        if (!l->limits_known || !runtime_limits_equal(&l->limits, &lim)) {
                l->limits_known = false; /* until all of them are written */
                r = w->runtime->set_limits(s.id, &lim);
                if (r < 0) {
                        api_error(&e, r, API_INTERNAL, "cannot change the limits of %s: %s", s.id, strerror(-r));
                        return worker_reply_error(jw, &e);
                }
                l->limits = lim;
                l->limits_known = true;
        }
        /* a taken warm sandbox: the taker's tenant and policy at the gateway before it runs (sent
         * before the thaw, not awaited: the gateway applies it before any decision after) */
        if (thaw && worker_net_reregister(w, s.id, l->slot, s.tenant, s.policy, &e) < 0)
                return worker_reply_error(jw, &e);
        if (thaw && freeze(w, l, false, &e) < 0)
                return worker_reply_error(jw, &e);
        worker_reply_ok(jw);
}

/* {"op":"set_policy","id":ID,"policy":{...}|null}: the egress policy of a
 * running sandbox, in effect at once (null: no egress). */
void worker_op_set_policy(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_free_ char *policy = NULL;
        const JsonValue *p = json_get(req, "policy");
        ApiError e = {};
        const char *id = worker_req_id(req, "id", &e);

        if (!id)
                return worker_reply_error(jw, &e);
        if (p && !json_is_null(p)) {
                if (json_type(p) != JSON_OBJECT || json_serialize(p, &policy, NULL) < 0) {
                        api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "'policy' must be an object or null");
                        return worker_reply_error(jw, &e);
                }
        }
        if (worker_net_set_policy(w, id, policy, &e) < 0)
                return worker_reply_error(jw, &e);
        worker_reply_ok(jw);
}

void worker_op_set_limits(Worker *w, const JsonValue *req, JsonWriter *jw) {
        set_limits(w, req, false, jw);
}

void worker_op_take_warm(Worker *w, const JsonValue *req, JsonWriter *jw) {
        set_limits(w, req, true, jw);
}

int worker_vm_start_on_disk(Worker *w, const JsonValue *spec, int64_t *ret_pid, uint64_t *ret_starttime,
                            ApiError *e) {
        _cleanup_(worker_spec_done) WorkerSpec s = {};
        _cleanup_free_ char *root = NULL, *state = NULL;
        int r;

        r = worker_spec_parse(w, spec, &s, e);
        if (r < 0)
                return r;
        r = pool_sandbox_disk_path(w->pool, s.id, &root);
        if (r < 0)
                return api_error(e, r, r == -ENOENT ? API_NOT_FOUND : API_INTERNAL,
                                 "sandbox %s has no disk here: %s", s.id, strerror(-r));
        if (pool_sandbox_memory_path(w->pool, s.id, &state) >= 0)
                (void) unlink(state); /* it would not load */
        return worker_start_runtime_deferred(w, &s, root, NULL, false, spec, ret_pid, ret_starttime, e);
}
