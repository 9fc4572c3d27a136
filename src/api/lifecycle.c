/* SPDX-License-Identifier: MIT */
/* The lifecycle of a sandbox: pause, resume, suspend, its policy (PATCH),
 * restore, branch, and creates served from a warm pool.
 *
 * Every transition is a compare-and-set in the store and an event with the
 * actor and a reason. The order of store and host steps is chosen so that a
 * crash between them leaves something the worker's reconcile makes
 * consistent: pause records "paused" before freezing (a crash leaves a
 * paused sandbox whose processes run; resume thaws what is not frozen);
 * resume thaws before recording "running" (never "running" while frozen);
 * suspend records "suspended" first (on restart the worker ends the
 * processes of a suspended sandbox as orphans); a start, restore or branch
 * is recorded after the host step (a crash leaves the old state, creating
 * rows become deleted, a lost process becomes error). An invalid transition
 * changes nothing and answers 409. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "api-internal.h"
#include "log.h"
#include "str-util.h"

#define API_BRANCH_MAX 64U      /* the bound of config max_branch */

static void event(ApiRequest *r, const Sandbox *sb, const char *type, const char *reason, const char *data) {
        api_event_tenant(r, sb->tenant_id, sb->id, type, reason, data);
}

static int reply_sandbox(ApiRequest *r, int status, const char *id, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w;
        int k;

        json_w_init(&w);
        k = store_sandbox_get(r->store, r->key.tenant_id, id, &sb);
        if (k < 0)
                return api_store_error(e, k, "reading the sandbox back");
        json_out_sandbox(&w, &sb, r->tenant_name);
        return api_reply_json(r, status, &w);
}

/* Reads *sb again from the store. */
static int reread(ApiRequest *r, Sandbox *sb, ApiError *e) {
        Sandbox fresh = {};
        int k = store_sandbox_get(r->store, sb->tenant_id, sb->id, &fresh);

        if (k < 0)
                return api_store_error(e, k, "reading the sandbox back");
        sandbox_done(sb);
        *sb = fresh;
        return 0;
}

static int worker_failed(ApiError *e, int k) {
        if (e->code == API_OK)
                (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
        return k;
}

static int set_state(ApiRequest *r, const Sandbox *sb, SandboxState from, SandboxState to, const char *reason,
                     ApiError *e) {
        int k = store_sandbox_set_state(r->store, sb->id, (int) from, to, reason);

        if (k == -ESTALE)
                return api_error(e, k, API_CONFLICT, "sandbox '%s' changed state meanwhile; look and try again",
                                 sb->id);
        if (k < 0)
                return api_store_error(e, k, "recording the new state");
        return 0;
}

static const char *state_name(const Sandbox *sb) {
        return sandbox_state_to_string(sb->state) ?: "in an unknown state";
}

/* The body of pause, resume and suspend: none, or an empty object. */
static int read_no_fields(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { NULL };
        _cleanup_json_ JsonValue *body = NULL;
        const char *unknown = NULL;
        int k = api_read_json_optional(r, &body, e);

        if (k < 0)
                return k;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        return 0;
}

/* ---- pause ---- */

int api_sandbox_pause_locked(ApiRequest *r, Sandbox *sb, const char *reason, ApiError *e) {
        int k;

        if (sb->state == SANDBOX_PAUSED)
                return api_error(e, -EBUSY, API_CONFLICT, "sandbox '%s' is already paused", sb->id);
        if (sb->state != SANDBOX_RUNNING)
                return api_error(e, -EBUSY, API_SANDBOX_NOT_RUNNING,
                                 "sandbox '%s' is %s: only a running sandbox can be paused", sb->id, state_name(sb));
        k = set_state(r, sb, SANDBOX_RUNNING, SANDBOX_PAUSED, reason, e);
        if (k < 0)
                return k;
        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_sandbox_pause(r->worker, sb->id, true, e);
        if (k < 0) {
                (void) worker_failed(e, k);
                log_warning("Pausing sandbox %s failed: %s", sb->id, e->message);
                (void) store_sandbox_set_state(r->store, sb->id, SANDBOX_PAUSED, SANDBOX_RUNNING, "pause failed");
                return k;
        }
        event(r, sb, "sandbox.paused", reason, NULL);
        log_info("Paused sandbox %s", sb->id);
        return reread(r, sb, e);
}

/* POST /v1/sandboxes/{id}/VERB with an empty body: the sandbox locked and
 * looked up, op (one of the *_locked operations) applied with the reason
 * "<done> by <actor>", the sandbox in the reply. */
static int by_request(ApiRequest *r, const char *done,
                      int (*op)(ApiRequest *r, Sandbox *sb, const char *reason, ApiError *e), ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        char reason[STORE_REASON_MAX];
        const char *id = r->params[0];
        int k;

        k = read_no_fields(r, e);
        if (k < 0)
                return k;
        lock = api_sandbox_lock(id);
        k = api_sandbox_lookup(r, id, false, &sb, e);
        if (k < 0)
                return k;
        snprintf(reason, sizeof reason, "%s by %s", done, r->actor);
        k = op(r, &sb, reason, e);
        if (k < 0)
                return k;
        return reply_sandbox(r, 200, id, e);
}

int api_sandbox_pause(ApiRequest *r, ApiError *e) {
        return by_request(r, "paused", api_sandbox_pause_locked, e);
}

/* ---- resume ---- */

static int resume_paused_locked(ApiRequest *r, Sandbox *sb, const char *reason, ApiError *e) {
        int k;

        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_sandbox_pause(r->worker, sb->id, false, e);
        if (k < 0)
                return worker_failed(e, k);
        k = set_state(r, sb, SANDBOX_PAUSED, SANDBOX_RUNNING, reason, e);
        if (k < 0)
                return k;
        event(r, sb, "sandbox.resumed", reason, "{\"processes_preserved\":true}");
        log_info("Resumed sandbox %s", sb->id);
        return reread(r, sb, e);
}

/* A suspended sandbox (or one in error) starts again on its files. */
static int start_again_locked(ApiRequest *r, Sandbox *sb, const char *reason, ApiError *e) {
        int64_t pid = 0;
        uint64_t starttime = 0;
        bool preserved = false;
        int k;

        k = api_get_worker(r, e);
        if (k < 0)
                return k;
        if (sb->state == SANDBOX_ERROR) {
                /* whatever is left of its processes ends first; the files stay */
                ApiError ignored = {};
                (void) worker_sandbox_suspend(r->worker, sb->id, NULL, &ignored);
        }
        k = worker_sandbox_start(r->worker, sb, &pid, &starttime, &preserved, e);
        if (k < 0)
                return worker_failed(e, k);
        k = store_sandbox_set_runtime(r->store, sb->id, pid, starttime, NULL);
        if (k < 0)
                (void) api_store_error(e, k, "recording the started sandbox");
        else
                k = set_state(r, sb, sb->state, SANDBOX_RUNNING, reason, e);
        if (k < 0) {
                ApiError ignored = {};
                (void) worker_sandbox_suspend(r->worker, sb->id, NULL, &ignored); /* not left running unrecorded */
                return k;
        }
        (void) store_sandbox_set_processes_preserved(r->store, sb->id, preserved);
        event(r, sb, "sandbox.resumed", reason,
              preserved ? "{\"processes_preserved\":true}" : "{\"processes_preserved\":false}");
        log_info("Started sandbox %s again (pid %" PRIi64 ")", sb->id, pid);
        if (!preserved)
                api_sandbox_restart_command(r, sb);
        return reread(r, sb, e);
}

int api_sandbox_resume_paused(ApiRequest *r, Sandbox *sb, const char *why, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = api_sandbox_lock(sb->id);
        int k;

        k = reread(r, sb, e);
        if (k < 0)
                return k;
        if (sb->state == SANDBOX_RUNNING)
                return 0; /* someone else resumed it */
        if (sb->state != SANDBOX_PAUSED)
                return api_error(e, -EBUSY, API_SANDBOX_NOT_RUNNING, "sandbox '%s' is %s, not running", sb->id,
                                 state_name(sb));
        return resume_paused_locked(r, sb, why, e);
}

int api_sandbox_wake_locked(ApiRequest *r, Sandbox *sb, bool reboot, const char *why, ApiError *e) {
        int k;

        if (sb->state == SANDBOX_RUNNING)
                return 0;
        if (reboot && sb->state == SANDBOX_PAUSED) {
                /* its memory goes: the processes end, and it starts again on its files */
                k = api_sandbox_suspend_locked(r, sb, why, e);
                if (k < 0)
                        return k;
        }
        if (sb->state == SANDBOX_PAUSED)
                k = resume_paused_locked(r, sb, why, e);
        else if (sb->state == SANDBOX_SUSPENDED)
                k = start_again_locked(r, sb, why, e);
        else
                return api_error(e, -EBUSY, API_SANDBOX_NOT_RUNNING, "sandbox '%s' is %s: it cannot be resumed",
                                 sb->id, state_name(sb));
        return k < 0 ? k : 1;
}

/* A paused sandbox thawed, a suspended (or failed) one started again. */
static int resume_locked(ApiRequest *r, Sandbox *sb, const char *reason, ApiError *e) {
        switch (sb->state) {
        case SANDBOX_PAUSED:
                return resume_paused_locked(r, sb, reason, e);
        case SANDBOX_SUSPENDED:
        case SANDBOX_ERROR:
                return start_again_locked(r, sb, reason, e);
        case SANDBOX_RUNNING:
                return api_error(e, -EBUSY, API_CONFLICT, "sandbox '%s' is already running", sb->id);
        default:
                return api_error(e, -EBUSY, API_CONFLICT, "sandbox '%s' is %s: it cannot be resumed", sb->id,
                                 state_name(sb));
        }
}

int api_sandbox_resume(ApiRequest *r, ApiError *e) {
        return by_request(r, "resumed", resume_locked, e);
}

/* ---- suspend ---- */

/* a vm's machine with volumes (virtiofs) cannot be saved: refused before anything changes */
bool api_vm_has_volumes(ApiRequest *r, const Sandbox *sb) {
        _cleanup_free_ VolumeMount *m = NULL;
        size_t n = 0;

        return streq(sb->runtime, "vm") && store_volume_mounts(r->store, sb->id, &m, &n) >= 0 && n > 0;
}

int api_vm_volumes_refuse_save(ApiRequest *r, const Sandbox *sb, const char *what, ApiError *e) {
        if (!api_vm_has_volumes(r, sb))
                return 0;
        return api_error(e, -EOPNOTSUPP, API_UNSUPPORTED,
                         "sandbox '%s' is a vm with volumes, whose memory cannot be saved (QEMU saves no "
                         "virtiofs device): %s is not supported",
                         sb->id, what);
}

int api_sandbox_suspend_locked(ApiRequest *r, Sandbox *sb, const char *reason, ApiError *e) {
        char data[64];
        bool preserved = false;
        SandboxState from = sb->state;
        int k;

        if (sb->state == SANDBOX_SUSPENDED)
                return api_error(e, -EBUSY, API_CONFLICT, "sandbox '%s' is already suspended", sb->id);
        if (sb->state != SANDBOX_RUNNING && sb->state != SANDBOX_PAUSED)
                return api_error(e, -EBUSY, API_SANDBOX_NOT_RUNNING,
                                 "sandbox '%s' is %s: only a running or paused sandbox can be suspended", sb->id,
                                 state_name(sb));
        k = set_state(r, sb, from, SANDBOX_SUSPENDED, reason, e);
        if (k < 0)
                return k;
        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_sandbox_suspend(r->worker, sb->id, &preserved, e);
        if (k < 0 && e->code == API_WORKER_UNAVAILABLE) {
                /* back to what it was: the next worker adopts it (or finds it gone: error) */
                log_warning("Suspending sandbox %s waits for the worker: %s", sb->id, e->message);
                (void) store_sandbox_set_state(r->store, sb->id, SANDBOX_SUSPENDED, from,
                                               "suspend not done: the worker was unavailable");
                return k;
        }
        if (k < 0) {
                char why[STORE_REASON_MAX];
                (void) worker_failed(e, k);
                snprintf(why, sizeof why, "suspend failed: %s", e->message);
                log_error("Suspending sandbox %s failed: %s", sb->id, e->message);
                /* its processes may be gone: error (resume starts it again on its files) */
                if (store_sandbox_set_state(r->store, sb->id, SANDBOX_SUSPENDED, SANDBOX_ERROR, why) >= 0)
                        event(r, sb, "sandbox.error", why, NULL);
                return k;
        }
        (void) store_sandbox_set_runtime(r->store, sb->id, 0, 0, NULL);
        (void) store_sandbox_set_processes_preserved(r->store, sb->id, preserved);
        snprintf(data, sizeof data, "{\"processes_preserved\":%s}", preserved ? "true" : "false");
        event(r, sb, "sandbox.suspended", reason, data);
        log_info("Suspended sandbox %s", sb->id);
        return reread(r, sb, e);
}

int api_sandbox_suspend(ApiRequest *r, ApiError *e) {
        return by_request(r, "suspended", api_sandbox_suspend_locked, e);
}

/* ---- policy ---- */

int api_sandbox_patch(ApiRequest *r, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        char reason[STORE_REASON_MAX], data[256];
        const char *id = r->params[0];
        SandboxPolicy p;
        int k;

        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        lock = api_sandbox_lock(id);
        k = api_sandbox_lookup(r, id, false, &sb, e);
        if (k < 0)
                return k;
        k = api_validate_sandbox_patch(body, api_config(r->api), &sb, now_usec(), &p, e);
        if (k < 0)
                return k;
        if (p.disk_mb > 0) {
                /* a new disk quota: the worker admits it against the pool (507) and sets it */
                Sandbox resized = sb;
                if (sb.state != SANDBOX_RUNNING && sb.state != SANDBOX_PAUSED)
                        return api_error(e, -EBUSY, API_CONFLICT,
                                         "sandbox '%s' is %s: its disk_mb changes while it runs or is paused", id,
                                         state_name(&sb));
                resized.disk_mb = p.disk_mb;
                k = api_get_worker(r, e);
                if (k >= 0)
                        k = worker_sandbox_set_limits(r->worker, &resized, e);
                if (k < 0)
                        return worker_failed(e, k);
                log_info("Sandbox %s: disk_mb %" PRIu64 " (was %" PRIu64 ")", id, p.disk_mb, sb.disk_mb);
        }
        k = store_sandbox_set_policy(r->store, id, &p);
        if (k == -ESTALE || k == -ENOENT)
                return api_error(e, -ENOENT, API_NOT_FOUND, "no sandbox '%s'", id);
        if (k < 0)
                return api_store_error(e, k, "changing the policy");

        snprintf(reason, sizeof reason, "policy changed by %s", r->actor);
        snprintf(data, sizeof data,
                 "{\"timeout_s\":%" PRIu64 ",\"idle_s\":%" PRIu64 ",\"idle_action\":\"%s\",\"checkpoint_every_s\":%" PRIu64
                 ",\"disk_mb\":%" PRIu64 "}",
                 p.timeout_s, p.idle_s, idle_action_to_string(p.idle_action) ?: "", p.checkpoint_every_s,
                 p.disk_mb ?: sb.disk_mb);
        event(r, &sb, "sandbox.updated", reason, data);
        return reply_sandbox(r, 200, id, e);
}

/* ---- restore ---- */

/* After a failed recovery: a row the try placed elsewhere names its old
 * worker again, in a compare-and-set (it may have been taken back or
 * deleted meanwhile: then it is left as it is). */
static void lost_back_home(ApiRequest *r, const Sandbox *sb) {
        _cleanup_(sandbox_done) Sandbox now = {};

        if (store_sandbox_get(r->store, NULL, sb->id, &now) < 0 || now.state != SANDBOX_UNREACHABLE ||
            streq(now.worker, sb->worker))
                return;
        (void) store_sandbox_take_over(r->store, sb->id, SANDBOX_UNREACHABLE, now.worker, SANDBOX_UNREACHABLE, 0, 0, sb->worker,
                                       now.reason);
}

/* A volume lives in one worker's pool, and its sandbox is placed there. A
 * lost sandbox that mounts one comes back on another worker with the copy
 * of it its worker took with the checkpoint (and shipped with it): the
 * volume moves there, as it was at that moment (worker-volume.c; refused
 * there while another sandbox mounts it). A vm's checkpoints take no such
 * copies: it waits for its worker, which keeps everything of it. */
static int recover_refused_for_volumes(ApiRequest *r, const Sandbox *sb, ApiError *e) {
        _cleanup_free_ VolumeMount *m = NULL;
        size_t n = 0;
        Volume v = {};
        int k;

        if (!streq(sb->runtime, "vm"))
                return 0;
        k = store_volume_mounts(r->store, sb->id, &m, &n);
        if (k < 0)
                return api_store_error(e, k, "reading the sandbox's volumes");
        if (n == 0)
                return 0;
        if (store_volume_get(r->store, sb->tenant_id, m[0].volume_name, &v) < 0 || isempty(v.worker))
                (void) strscpy(v.worker, sizeof v.worker, sb->worker);
        return api_error(e, -EXDEV, API_CONFLICT,
                         "sandbox '%s' is a vm that mounts volume '%s', which lives on worker '%s' (suspect): it "
                         "cannot come back on another worker; it runs again when that worker returns (nothing of "
                         "it is deleted meanwhile), or delete it",
                         sb->id, m[0].volume_name, v.worker);
}

/* A lost sandbox (its worker stopped heartbeating) comes back on another
 * worker that holds a shipped copy of the checkpoint: a new root from it
 * there, its processes start afresh. */
static int recover_lost(ApiRequest *r, Sandbox *sb, const Checkpoint *ck, ApiError *e) {
        char reason[STORE_REASON_MAX], worker[STORE_NAME_MAX] = "";
        _cleanup_free_ char *data = NULL;
        JsonWriter jw;
        size_t len;
        int64_t pid = 0;
        uint64_t starttime = 0;
        int k;

        k = api_get_worker(r, e);
        if (k < 0)
                return k;
        if (!worker_client_is_cluster(r->worker))
                return api_error(e, -EBUSY, API_CONFLICT, "sandbox '%s' is unreachable: it can only be deleted", sb->id);
        k = recover_refused_for_volumes(r, sb, e);
        if (k < 0)
                return k;
        k = worker_sandbox_recover(r->worker, sb, ck->id, worker, &pid, &starttime, e);
        if (k < 0) {
                (void) worker_failed(e, k);
                log_error("Recovering unreachable sandbox %s from checkpoint %s failed: %s", sb->id, ck->id, e->message);
                /* it stays lost, on its old worker (where its files may be), and can be tried again */
                lost_back_home(r, sb);
                return k;
        }
        snprintf(reason, sizeof reason, "recovered on worker %s from checkpoint %s (worker %s was suspect) by %s", worker,
                 ck->id, sb->worker, r->actor);
        /* its row names the new worker since the try began: its old one cannot take it back meanwhile */
        k = store_sandbox_take_over(r->store, sb->id, SANDBOX_UNREACHABLE, worker, SANDBOX_RUNNING, pid, starttime, worker,
                                    reason);
        if (k == -ESTALE)
                return api_error(e, k, API_CONFLICT, "sandbox '%s' changed state meanwhile; look and try again",
                                 sb->id);
        if (k < 0)
                return api_store_error(e, k, "recording the recovered sandbox");
        (void) store_sandbox_set_processes_preserved(r->store, sb->id, false);
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "checkpoint", ck->id);
        json_w_kv_int(&jw, "pid", pid);
        json_w_kv_string(&jw, "worker", worker);
        json_w_kv_string(&jw, "from_worker", sb->worker);
        json_w_object_end(&jw);
        if (json_w_finish(&jw, &data, &len) >= 0)
                event(r, sb, "sandbox.recovered", reason, data);
        log_info("Recovered unreachable sandbox %s on worker %s from checkpoint %s", sb->id, worker, ck->id);
        return reply_sandbox(r, 200, sb->id, e);
}

/* A restore the pool had no room for (507) is refused before anything is
 * touched, unless the pool filled up on the way: whether its agent still
 * answers tells the two apart. */
static bool restore_left_it_running(ApiRequest *r, const Sandbox *sb, const ApiError *e) {
        ApiError ignored = {};
        int fd = -EBADF;

        if (e->code != API_INSUFFICIENT_STORAGE || sb->state != SANDBOX_RUNNING ||
            worker_agent_connect(r->worker, sb->id, &fd, &ignored) < 0)
                return false;
        safe_close(fd);
        return true;
}

int api_sandbox_restore(ApiRequest *r, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        char reason[STORE_REASON_MAX], data[256];
        const char *id = r->params[0], *ref = NULL;
        int64_t pid = 0;
        uint64_t starttime = 0;
        bool preserved = false;
        Checkpoint ck;
        int k;

        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        k = api_validate_restore(body, &ref, e);
        if (k < 0)
                return k;
        lock = api_sandbox_lock(id);
        k = api_sandbox_lookup(r, id, false, &sb, e);
        if (k < 0)
                return k;
        if (sb.state != SANDBOX_RUNNING && sb.state != SANDBOX_PAUSED && sb.state != SANDBOX_SUSPENDED &&
            sb.state != SANDBOX_ERROR && sb.state != SANDBOX_UNREACHABLE)
                return api_error(e, -EBUSY, API_CONFLICT, "sandbox '%s' is %s: it cannot be restored now", id,
                                 state_name(&sb));
        k = api_checkpoint_find(r, &sb, ref, &ck, e);
        if (k < 0)
                return k;
        if (sb.state == SANDBOX_UNREACHABLE)
                return recover_lost(r, &sb, &ck, e);

        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_sandbox_restore(r->worker, &sb, ck.id, &pid, &starttime, &preserved, e);
        if (k < 0) {
                char why[STORE_REASON_MAX];
                (void) worker_failed(e, k);
                log_error("Restoring sandbox %s to %s failed: %s", id, ck.id, e->message);
                if (e->code != API_NOT_FOUND && !restore_left_it_running(r, &sb, e)) {
                        /* its processes ended on the way: error until resumed or restored again */
                        snprintf(why, sizeof why, "restore failed: %s", e->message);
                        if (store_sandbox_set_state(r->store, id, (int) sb.state, SANDBOX_ERROR, why) >= 0)
                                event(r, &sb, "sandbox.error", why, NULL);
                }
                return k;
        }

        snprintf(reason, sizeof reason, "restored to checkpoint %s by %s", ck.id, r->actor);
        k = store_sandbox_set_runtime(r->store, id, pid, starttime, NULL);
        if (k < 0)
                return api_store_error(e, k, "recording the restored sandbox");
        k = set_state(r, &sb, sb.state, SANDBOX_RUNNING, reason, e);
        if (k < 0)
                return k;
        /* a checkpoint with memory brings its processes back, else they start afresh on its files */
        (void) store_sandbox_set_processes_preserved(r->store, id, preserved);
        snprintf(data, sizeof data, "{\"checkpoint\":\"%s\",\"pid\":%" PRIi64 ",\"processes_preserved\":%s}", ck.id,
                 pid, preserved ? "true" : "false"); /* ids: [a-z0-9] */
        event(r, &sb, "sandbox.restored", reason, data);
        log_info("Restored sandbox %s to checkpoint %s", id, ck.id);
        if (!preserved)
                api_sandbox_restart_command(r, &sb);
        return reply_sandbox(r, 200, id, e);
}

/* ---- branch ---- */

static void child_init(Sandbox *c, const Sandbox *src, const Checkpoint *ck, bool with_memory, int64_t now) {
        *c = (Sandbox){
                .state = SANDBOX_CREATING,
                .cpu_millis = src->cpu_millis,
                .memory_mb = src->memory_mb,
                .disk_mb = src->disk_mb,
                .pids_max = src->pids_max,
                .io_weight = src->io_weight,
                .timeout_s = src->timeout_s,
                .created_usec = now,
                .updated_usec = now,
                .expires_usec = src->timeout_s > 0 ? now + (int64_t) src->timeout_s * 1000000 : 0,
                .env_json = src->env_json,           /* borrowed */
                .metadata_json = src->metadata_json, /* borrowed */
                .network_json = src->network_json,   /* borrowed */
                .idle_s = src->idle_s,
                .idle_action = src->idle_action,
                .checkpoint_every_s = src->checkpoint_every_s,
                .checkpoints_max = src->checkpoints_max,
                .checkpoints_mb = src->checkpoints_mb,
                .auto_resume = src->auto_resume,
                .public_traffic = src->public_traffic,
                .template_version = src->template_version, /* its files come from that version too */
                .processes_preserved = with_memory,  /* it continues the source's processes, or starts afresh */
        };
        (void) strscpy(c->tenant_id, sizeof c->tenant_id, src->tenant_id);
        (void) strscpy(c->template_name, sizeof c->template_name, src->template_name);
        (void) strscpy(c->runtime, sizeof c->runtime, src->runtime);
        (void) strscpy(c->worker, sizeof c->worker, src->worker); /* a branch lives beside its source */
        (void) strscpy(c->parent_id, sizeof c->parent_id, src->id);
        (void) strscpy(c->ingress_host, sizeof c->ingress_host, src->ingress_host); /* its masked Host too */
        if (ck)
                (void) strscpy(c->parent_checkpoint, sizeof c->parent_checkpoint, ck->id);
}

typedef struct GrantList {
        Credential *a;
        size_t n;
} GrantList;

static void grant_list_done(GrantList *g) {
        credential_array_free(g->a, g->n);
}

/* The branch failed (e): its children go. One a caller deleted meanwhile is the cause the caller is
 * told (its guest may have failed in its own way as it was torn down): e says so then. */
static void children_failed(ApiRequest *r, Sandbox *kids, size_t n, const Credential *grants, size_t n_grants,
                            ApiError *e) {
        const char *deleted = NULL;

        for (size_t i = 0; i < n; i++) {
                api_credentials_inherit_undo(r, kids[i].id, grants, n_grants);
                if (api_sandbox_create_failed(r, &kids[i], e) && !deleted)
                        deleted = kids[i].id;
        }
        if (deleted && e->code != API_CONFLICT)
                (void) api_error(e, -ECANCELED, API_CONFLICT, "sandbox %s was deleted while it was starting",
                                 deleted);
}

static int reply_children(ApiRequest *r, const Sandbox *kids, size_t n, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "sandboxes");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++) {
                _cleanup_sandbox_ Sandbox got = {};
                int k = store_sandbox_get(r->store, r->key.tenant_id, kids[i].id, &got);
                if (k < 0)
                        return api_store_error(e, k, "reading the new sandboxes back");
                json_out_sandbox(&w, &got, r->tenant_name);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        return api_reply_json(r, 201, &w);
}

/* src's env with over's entries laid over it (both JSON objects of strings). */
static int env_overlay(const char *src, const char *over, char **ret) {
        _cleanup_json_ JsonValue *a = NULL, *b = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        size_t n;
        int k;

        if (src && (k = json_parse(src, strlen(src), &a, NULL, 0)) < 0)
                return k;
        k = json_parse(over, strlen(over), &b, NULL, 0);
        if (k < 0)
                return k;
        json_w_init(&w);
        json_w_object_begin(&w);
        for (size_t i = 0; a && i < json_object_size(a); i++)
                if (!json_get(b, json_object_key(a, i)))
                        json_w_kv_string(&w, json_object_key(a, i), json_string(json_object_value(a, i)));
        for (size_t i = 0; i < json_object_size(b); i++)
                json_w_kv_string(&w, json_object_key(b, i), json_string(json_object_value(b, i)));
        json_w_object_end(&w);
        return json_w_finish(&w, ret, &n);
}

int api_sandbox_branch_do(ApiRequest *r, const char *id, uint64_t count, const char *from, bool with_memory,
                          const BranchOverrides *ov, Sandbox **ret_kids, size_t *ret_n, ApiError *e) {
        const Config *c = api_config(r->api);
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_free_ Sandbox *kids = NULL;
        _cleanup_free_ char *data = NULL, *env = NULL;
        _cleanup_(grant_list_done) GrantList grants = {};
        int64_t pids[API_BRANCH_MAX] = {}, now;
        uint64_t sts[API_BRANCH_MAX] = {}, live;
        int recorded[API_BRANCH_MAX] = {}, q;
        char reason[STORE_REASON_MAX];
        Checkpoint ck = {};
        size_t made = 0, ok = 0;
        FILE *f;
        size_t data_len = 0;
        int k;

        if (count == 0 || count > API_BRANCH_MAX)
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT, "count must be at most %u", API_BRANCH_MAX);
        lock = api_sandbox_lock(id);
        k = api_sandbox_lookup(r, id, false, &sb, e);
        if (k < 0)
                return k;
        if (sb.state != SANDBOX_RUNNING && sb.state != SANDBOX_PAUSED && sb.state != SANDBOX_SUSPENDED &&
            !(from && sb.state == SANDBOX_ERROR))
                return api_error(e, -EBUSY, API_SANDBOX_NOT_RUNNING, "sandbox '%s' is %s: it cannot be branched now",
                                 id, state_name(&sb));
        if (with_memory && !streq(sb.runtime, "vm"))
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "sandbox '%s' runs on the %s runtime, which cannot branch memory: with_memory needs "
                                 "the vm runtime", id, sb.runtime[0] ? sb.runtime : "ns");
        if (from) {
                k = api_checkpoint_find(r, &sb, from, &ck, e);
                if (k < 0)
                        return k;
                if (with_memory && !ck.memory)
                        return api_error(e, -ENODATA, API_INVALID_ARGUMENT,
                                         "checkpoint '%s' of sandbox '%s' holds no memory: branch from it without "
                                         "with_memory", ck.id, id);
        } else if (with_memory && sb.state == SANDBOX_SUSPENDED && !sb.processes_preserved)
                return api_error(e, -ENODATA, API_SANDBOX_NOT_RUNNING,
                                 "sandbox '%s' is suspended without its memory: it cannot be branched with memory", id);
        if (with_memory && !from && (k = api_vm_volumes_refuse_save(r, &sb, "a branch with its memory", e)) < 0)
                return k;
        k = api_sandbox_count(r, NULL, &live, e);
        if (k < 0)
                return k;
        if (live + count > c->max_sandboxes)
                return api_error(e, -EAGAIN, API_UNAVAILABLE,
                                 "%" PRIu64 " more sandboxes would pass this host's maximum of %" PRIu64, count,
                                 c->max_sandboxes);

        if (ov && ov->env_json && env_overlay(sb.env_json, ov->env_json, &env) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "cannot lay the new env over the sandbox's");
        kids = new0(Sandbox, count);
        if (!kids)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        /* each child gets its own copy of the parent's grants (as they are
         * now, whether it branches from now or from a checkpoint): in the
         * store before the worker starts it, which hands them to its gateway */
        k = store_grant_list(r->store, sb.id, &grants.a, &grants.n);
        if (k < 0)
                return api_store_error(e, k, "listing the sandbox's credentials");
        now = now_usec();
        /* the rows in one commit */
        k = store_batch_begin(r->store);
        if (k < 0)
                return api_store_error(e, k, "recording the new sandboxes");
        for (; made < count; made++) {
                child_init(&kids[made], &sb, from ? &ck : NULL, with_memory, now);
                if (env)
                        kids[made].env_json = env; /* borrowed, as the source's */
                if (ov && ov->metadata_json)
                        kids[made].metadata_json = (char *) ov->metadata_json; /* borrowed */
                k = api_sandbox_insert_new(r, &kids[made], count - made, e);
                if (k < 0)
                        break;
                k = api_credentials_inherit(r, &sb, kids[made].id, grants.a, grants.n, e);
                if (k < 0) {
                        made++; /* its row is there */
                        break;
                }
        }
        q = store_batch_end(r->store);
        if (q < 0) /* none of them was recorded */
                return k < 0 ? k : api_store_error(e, q, "recording the new sandboxes");
        if (k < 0) {
                children_failed(r, kids, made, grants.a, grants.n, e);
                return k;
        }

        /* their volumes, as the source's mounts say (the worker mounts what the store holds) */
        k = api_get_worker(r, e);
        if (k >= 0)
                k = api_volume_branch(r, sb.id, kids, count, ov ? ov->volumes : API_BRANCH_VOLUMES_SHARE_RO, e);
        if (k < 0) {
                children_failed(r, kids, count, grants.a, grants.n, e);
                return k;
        }
        k = worker_sandbox_branch(r->worker, id, from ? ck.id : NULL, with_memory, kids, count, pids, sts, e);
        if (k < 0) {
                (void) worker_failed(e, k);
                children_failed(r, kids, count, grants.a, grants.n, e);
                return k;
        }

        snprintf(reason, sizeof reason, "branched from %s%s%s by %s", id, from ? " checkpoint " : "",
                 from ? ck.id : "", r->actor);
        /* the children's rows in one transaction; one that cannot be recorded goes */
        k = store_batch_begin(r->store);
        for (size_t i = 0; k >= 0 && i < count; i++) {
                char cdata[224];
                q = store_sandbox_set_runtime(r->store, kids[i].id, pids[i], sts[i], NULL);
                if (q >= 0)
                        q = store_sandbox_set_state(r->store, kids[i].id, SANDBOX_CREATING, SANDBOX_RUNNING, "");
                if (q < 0) {
                        recorded[i] = q;
                        continue;
                }
                snprintf(cdata, sizeof cdata,
                         "{\"template\":\"%s\",\"parent\":\"%s\",\"checkpoint\":%s%s%s,\"with_memory\":%s}",
                         kids[i].template_name, id, from ? "\"" : "", from ? ck.id : "null", from ? "\"" : "",
                         with_memory ? "true" : "false");
                event(r, &kids[i], "sandbox.created", reason, cdata);
                api_credentials_inherit_events(r, &sb, kids[i].id, grants.a, grants.n);
                recorded[i] = 1;
        }
        if (k >= 0)
                k = store_batch_end(r->store);
        for (size_t i = 0; i < count; i++) {
                if (k >= 0 && recorded[i] > 0) {
                        kids[ok++] = kids[i];
                        continue;
                }
                ApiError ignored = {};
                (void) worker_sandbox_destroy(r->worker, kids[i].id, &ignored);
                (void) api_store_error(&ignored, k < 0 ? k : recorded[i], "recording the new sandbox");
                api_credentials_inherit_undo(r, kids[i].id, grants.a, grants.n);
                api_sandbox_create_failed(r, &kids[i], &ignored);
        }
        if (ok == 0)
                return api_error(e, -EIO, API_UNAVAILABLE, "none of the new sandboxes could be recorded");

        /* the parent's event lists its children */
        f = open_memstream(&data, &data_len);
        if (f) {
                fprintf(f, "{\"checkpoint\":%s%s%s,\"children\":[", from ? "\"" : "", from ? ck.id : "null",
                        from ? "\"" : "");
                for (size_t i = 0; i < ok; i++)
                        fprintf(f, "%s\"%s\"", i ? "," : "", kids[i].id);
                fputs("]}", f);
                if (fclose(f) != 0)
                        data = mfree(data);
        }
        snprintf(reason, sizeof reason, "branched into %zu by %s", ok, r->actor);
        event(r, &sb, "sandbox.branched", reason, data);
        log_info("Branched sandbox %s into %zu", id, ok);
        for (size_t i = 0; !with_memory && i < ok; i++)
                api_sandbox_restart_command(r, &kids[i]);
        for (size_t i = 0; i < ok; i++)
                kids[i].env_json = kids[i].metadata_json = kids[i].network_json = NULL; /* borrowed from sb, freed with it */
        *ret_kids = TAKE_PTR(kids);
        *ret_n = ok;
        return 0;
}

int api_sandbox_branch(ApiRequest *r, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_free_ Sandbox *kids = NULL;
        const char *from = NULL;
        uint64_t count = 1;
        int with_memory = -1;
        size_t n = 0;
        int k;

        k = api_read_json_optional(r, &body, e);
        if (k < 0)
                return k;
        k = api_validate_branch(body, api_config(r->api), &count, &from, e);
        if (k >= 0)
                k = api_validate_with_memory(body, &with_memory, e);
        if (k < 0)
                return k;
        {
                const JsonValue *v = json_get(body, "volumes");
                BranchOverrides ov = {};
                if (v && !json_is_null(v)) {
                        int m = api_branch_volumes_from_string(json_string(v));
                        if (m < 0)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "volumes must be \"share_ro\", \"snapshot\" or \"none\"");
                        ov.volumes = (ApiBranchVolumes) m;
                }
                k = api_sandbox_branch_do(r, r->params[0], count, from, with_memory > 0, &ov, &kids, &n, e);
        }
        if (k < 0)
                return k;
        return reply_children(r, kids, n, e);
}

/* ---- warm pools ---- */

static bool warm_pool_configured(const Config *c, const char *template_name) {
        ConfigWarmPool pools[CONFIG_WARM_POOLS_MAX];
        char err[128];
        size_t n = 0;

        if (isempty(c->warm_pool) || config_warm_pools(c->warm_pool, pools, &n, err, sizeof err) < 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (streq(pools[i].template_name, template_name) && pools[i].count > 0)
                        return true;
        return false;
}

/* A claimed warm sandbox is this tenant's now, but broken: it goes (with an
 * event), and the caller creates one the usual way. */
static void warm_failed(ApiRequest *r, const Sandbox *sb, const ApiError *we) {
        ApiError ignored = {};

        log_warning("Warm sandbox %s failed, creating one instead: %s", sb->id, we->message);
        if (r->worker)
                (void) worker_sandbox_destroy(r->worker, sb->id, &ignored);
        (void) store_sandbox_set_state(r->store, sb->id, -1, SANDBOX_DELETED, "warm sandbox failed");
        event(r, sb, "sandbox.create_failed", we->message, NULL);
}

int api_sandbox_create_warm(ApiRequest *r, Sandbox *req, const char *via, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        char data[STORE_NAME_MAX + 80];
        StoreAdmission adm;
        ApiError we = {};
        int k;

        /* a warm pool holds the newest version only */
        if (!streq(req->runtime, "ns") || req->template_pool[0] ||
            !warm_pool_configured(api_config(r->api), req->template_name))
                return 0;
        k = api_tenant_admission(r, req->tenant_id, &adm, e);
        if (k < 0)
                return k;
        k = store_sandbox_claim_warm_admit(r->store, req->template_name, req, &adm, &sb);
        if (k == -ENOENT)
                return 0;
        if (k == -EDQUOT)
                return api_quota_error(r, &adm, "a new sandbox", e);
        if (k < 0) {
                log_warning_errno(k, "Claiming a warm sandbox of %s failed, creating one: %m", req->template_name);
                return 0;
        }
        api_log_sandbox(r, sb.id);
        lock = api_sandbox_lock(sb.id);

        /* the request's limits, then its processes run again (one worker call) */
        k = api_get_worker(r, &we);
        if (k >= 0)
                k = worker_sandbox_take_warm(r->worker, &sb, &we);
        if (k < 0) {
                (void) worker_failed(&we, k);
                warm_failed(r, &sb, &we);
                return 0;
        }
        /* running, and its event, in one transaction */
        /* validated template name and a fixed `via`: no escaping needed */
        if (via)
                snprintf(data, sizeof data, "{\"template\":\"%s\",\"warm_pool\":true,\"via\":\"%s\"}",
                         sb.template_name, via);
        else
                snprintf(data, sizeof data, "{\"template\":\"%s\",\"warm_pool\":true}", sb.template_name);
        k = store_batch_begin(r->store);
        if (k >= 0) {
                k = set_state(r, &sb, SANDBOX_PAUSED, SANDBOX_RUNNING, "", &we);
                if (k >= 0)
                        event(r, &sb, "sandbox.created", "from the warm pool", data);
                k = store_batch_end(r->store) ?: k;
        }
        if (k < 0) {
                if (we.code == API_OK)
                        (void) api_store_error(&we, k, "recording the warm sandbox");
                warm_failed(r, &sb, &we);
                return 0;
        }
        log_info("Created sandbox %s from the warm pool of %s%s", sb.id, sb.template_name, via ? " (E2B API)" : "");
        (void) strscpy(req->id, sizeof req->id, sb.id);
        return 1;
}
