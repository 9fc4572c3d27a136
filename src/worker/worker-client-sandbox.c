/* SPDX-License-Identifier: MIT */
/* The worker client's calls on a sandbox: create (placed first in a
 * cluster, worker-placement.c), start, limits, policy, credentials, pause,
 * suspend, checkpoints, restore, branch, destroy, and the recovery of a
 * sandbox lost with its worker. */
#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "json.h"
#include "log.h"
#include "str-util.h"
#include "worker-client-internal.h"
#include "worker-placement.h"

static void write_spec(JsonWriter *jw, const Sandbox *sb) {
        json_w_object_begin(jw);
        json_w_kv_string(jw, "id", sb->id);
        json_w_kv_string(jw, "tenant", sb->tenant_id); /* with "policy": the gateway registration */
        json_w_kv_int(jw, "slot", sb->slot);
        json_w_kv_string(jw, "template", sb->template_pool[0] ? sb->template_pool : sb->template_name);
        if (!isempty(sb->runtime))
                json_w_kv_string(jw, "runtime", sb->runtime);
        json_w_kv_int(jw, "cpu_millis", sb->cpu_millis);
        json_w_key(jw, "memory_mb");
        json_w_uint(jw, sb->memory_mb);
        json_w_key(jw, "disk_mb");
        json_w_uint(jw, sb->disk_mb);
        json_w_kv_int(jw, "pids_max", sb->pids_max);
        json_w_kv_int(jw, "io_weight", sb->io_weight);
        if (sb->env_json) {
                json_w_key(jw, "env");
                json_w_raw(jw, sb->env_json);
        }
        if (sb->network_json) { /* the egress policy, for the gateway */
                json_w_key(jw, "policy");
                json_w_raw(jw, sb->network_json);
        }
        json_w_object_end(jw);
}

static int reply_pid(const JsonValue *reply, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e) {
        int64_t pid = 0;
        uint64_t st = 0;
        if (json_int64(json_get(reply, "pid"), &pid) < 0 || json_uint64(json_get(reply, "starttime"), &st) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        *ret_pid = pid;
        *ret_starttime = st;
        return 0;
}

/* {"op":OP,"sandbox":{spec}[,"checkpoint":CK]} to the sandbox's worker (sb->worker) */
static int call_spec(WorkerClient *w, WorkerOpKind op, const Sandbox *sb, const char *checkpoint, JsonValue **ret,
                     ApiError *e) {
        WorkerCall call;
        int r = worker_client_select_worker(w, sb->worker, e);

        if (r < 0)
                return r;
        worker_client_request_begin(&call, op);
        json_w_key(&call.jw, "sandbox");
        write_spec(&call.jw, sb);
        if (checkpoint)
                json_w_kv_string(&call.jw, "checkpoint", checkpoint);
        json_w_object_end(&call.jw);
        return worker_client_call(w, &call, ret, e);
}

/* call_spec() of an op that starts the sandbox (create, start, restore): its
 * pid and start time; ret_preserved (may be NULL): whether its processes
 * continued rather than started afresh. */
static int call_spec_started(WorkerClient *w, WorkerOpKind op, const Sandbox *sb, const char *checkpoint,
                             int64_t *ret_pid, uint64_t *ret_starttime, bool *ret_preserved, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        bool preserved = false;
        int r = call_spec(w, op, sb, checkpoint, &reply, e);

        if (r < 0)
                return r;
        (void) json_bool(json_get(reply, "processes_preserved"), &preserved);
        if (ret_preserved)
                *ret_preserved = preserved;
        return reply_pid(reply, ret_pid, ret_starttime, e);
}

/* Cluster: the sandbox's row names worker before op (create, restore) is
 * tried there, so a delete finds the sandbox wherever the try got to. */
static int call_spec_placed(WorkerClient *w, WorkerOpKind op, const Sandbox *sb, const char *worker,
                            const char *checkpoint, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e) {
        Sandbox placed;
        int r;

        /* a lost one moves only if its row still names where it was (sb->worker): its worker may have
         * come back and taken it (worker-adopt.c), and then this recovery must not run a second copy */
        if (sb->state == SANDBOX_UNREACHABLE)
                r = store_sandbox_take_over(w->store, sb->id, SANDBOX_UNREACHABLE, sb->worker, SANDBOX_UNREACHABLE, 0, 0, worker,
                                            sb->reason);
        else
                r = store_sandbox_set_runtime(w->store, sb->id, 0, 0, worker);
        if (r == -ESTALE) {
                w->connect_failed = false;
                return api_error(e, r, API_CONFLICT,
                                 "sandbox '%s' is no longer unreachable on worker '%s' (its worker came back and took it, "
                                 "or it was deleted)", sb->id, sb->worker);
        }
        if (r < 0) {
                w->connect_failed = false; /* not the worker's failure: no other one is tried */
                return api_error(e, r, r == -ENOENT ? API_CONFLICT : API_UNAVAILABLE,
                                 "the store failed (placing the sandbox): %s", strerror(-r));
        }
        placed = *sb;
        (void) strscpy(placed.worker, sizeof placed.worker, worker);
        *e = (ApiError){};
        return call_spec_started(w, op, &placed, checkpoint, ret_pid, ret_starttime, NULL, e);
}

/* {"op":OP,"id":ID[,"checkpoint":CK]} to the worker selected last */
static int send_id(WorkerClient *w, WorkerOpKind op, const char *id, const char *checkpoint, JsonValue **ret,
                   ApiError *e) {
        WorkerCall call;

        worker_client_request_begin(&call, op);
        json_w_kv_string(&call.jw, "id", id);
        if (checkpoint)
                json_w_kv_string(&call.jw, "checkpoint", checkpoint);
        json_w_object_end(&call.jw);
        return worker_client_call(w, &call, ret, e);
}

/* send_id() to the worker that holds sandbox id */
static int call_id(WorkerClient *w, WorkerOpKind op, const char *id, const char *checkpoint, JsonValue **ret,
                   ApiError *e) {
        int r = worker_client_select_sandbox(w, id, e);
        if (r < 0)
                return r;
        return send_id(w, op, id, checkpoint, ret, e);
}

static uint64_t disk_room_max(const WorkerNode *nodes, size_t n, const size_t *order, size_t n_order) {
        uint64_t best = 0;

        for (size_t i = 0; i < n_order; i++) {
                const WorkerNode *w = &nodes[order[i]];
                if (order[i] < n && w->disk_mb > w->used_disk_mb && w->disk_mb - w->used_disk_mb > best)
                        best = w->disk_mb - w->used_disk_mb;
        }
        return best;
}

/* In a cluster a create from a versioned template names its exact version
 * (NAME@vN): a worker that was away while a version was published still
 * holds NAME with an older version's files until the controller ships it
 * the new one (shipper.c), and must not make the sandbox from those. */
static void exact_template(const Sandbox *sb, Sandbox *ret) {
        *ret = *sb;
        if (sb->template_version > 0 && !sb->template_pool[0])
                (void) snprintf(ret->template_pool, sizeof ret->template_pool, "%s@v%" PRIu64, sb->template_name,
                                sb->template_version);
}

/* Cluster: tries the workers in placement order (those that hold the
 * template first); one that cannot be reached (connect or hello failed: the
 * request never left) is skipped, and so is one that lacks the template (its
 * list in the store may be older than its pool). */
static int create_placed(WorkerClient *w, const Sandbox *req, int64_t *ret_pid, uint64_t *ret_starttime,
                         ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        _cleanup_free_ size_t *order = NULL;
        size_t n = 0, n_order = 0;
        Sandbox exact;
        const Sandbox *sb = &exact;
        int r;

        exact_template(req, &exact);

        r = worker_client_place(w, sb, &nodes, &n, &order, &n_order, e);
        if (r < 0)
                return r;
        /* pinned (its volumes live there, or a build runs there): that worker or none */
        if (!isempty(sb->worker) && !streq(sb->worker, "local")) {
                size_t kept = 0;
                for (size_t i = 0; i < n_order; i++)
                        if (streq(nodes[order[i]].name, sb->worker))
                                order[kept++] = order[i];
                if (kept == 0)
                        return api_error(e, -ENOSPC, API_UNAVAILABLE,
                                         "worker '%s', which holds the sandbox's volumes (or its build), cannot "
                                         "take it now",
                                         sb->worker);
                n_order = kept;
        }
        if (n_order == 0) {
                /* would one take it but for its disk quota? then that is the reason */
                Sandbox nodisk = *sb;
                nodisk.disk_mb = 0;
                worker_place(nodes, n, &nodisk, store_now_usec(w->store) - w->lost_timeout_usec, order, &n_order);
                if (n_order > 0)
                        return api_error(e, -ENOSPC, API_INSUFFICIENT_STORAGE,
                                         "no live worker's storage pool has room for disk_mb %" PRIu64
                                         " (%zu workers registered; the largest room is %" PRIu64 " MiB)",
                                         sb->disk_mb, n, disk_room_max(nodes, n, order, n_order));
                return api_error(e, -ENOSPC, API_UNAVAILABLE,
                                 "no live worker has room for this sandbox (%zu workers registered)", n);
        }
        for (size_t i = 0; i < n_order; i++) {
                const WorkerNode *node = &nodes[order[i]];

                r = call_spec_placed(w, WORKER_OP_CREATE, sb, node->name, NULL, ret_pid, ret_starttime, e);
                if (r >= 0)
                        return r;
                if (w->connect_failed)
                        log_warning("Worker %s (%s) is unreachable; placing sandbox %s elsewhere", node->name,
                                    node->address, sb->id);
                else if (e->code != API_NOT_FOUND)
                        return r;
                else if (i + 1 < n_order)
                        log_info("Worker %s does not hold template %s yet; placing sandbox %s elsewhere",
                                 node->name, sb->template_pool[0] ? sb->template_pool : sb->template_name, sb->id);
                else {
                        /* the template is in the store: a worker gets it from the controller (shipper.c) */
                        char why[sizeof e->message];
                        (void) strscpy(why, sizeof why, e->message);
                        return api_error(e, -EAGAIN, API_UNAVAILABLE,
                                         "no live worker that can take this sandbox holds its template yet (worker "
                                         "%s: %s); try again once the controller has shipped it", node->name, why);
                }
        }
        return r;
}

int worker_sandbox_create(WorkerClient *w, const Sandbox *sb, int64_t *ret_pid, uint64_t *ret_starttime,
                          ApiError *e) {
        if (w->store)
                return create_placed(w, sb, ret_pid, ret_starttime, e);
        return call_spec_started(w, WORKER_OP_CREATE, sb, NULL, ret_pid, ret_starttime, NULL, e);
}

int worker_sandbox_start(WorkerClient *w, const Sandbox *sb, int64_t *ret_pid, uint64_t *ret_starttime, bool *ret_preserved,
                         ApiError *e) {
        return call_spec_started(w, WORKER_OP_START, sb, NULL, ret_pid, ret_starttime, ret_preserved, e);
}

int worker_sandbox_restore(WorkerClient *w, const Sandbox *sb, const char *checkpoint_id, int64_t *ret_pid,
                           uint64_t *ret_starttime, bool *ret_preserved, ApiError *e) {
        return call_spec_started(w, WORKER_OP_RESTORE, sb, checkpoint_id, ret_pid, ret_starttime, ret_preserved, e);
}

int worker_sandbox_set_limits(WorkerClient *w, const Sandbox *sb, ApiError *e) {
        return call_spec(w, WORKER_OP_SET_LIMITS, sb, NULL, NULL, e);
}

int worker_sandbox_take_warm(WorkerClient *w, const Sandbox *sb, ApiError *e) {
        return call_spec(w, WORKER_OP_TAKE_WARM, sb, NULL, NULL, e);
}

/* {"op":"set_policy","id":ID,"policy":{...}|null} */
int worker_sandbox_set_network(WorkerClient *w, const Sandbox *sb, ApiError *e) {
        WorkerCall call;
        int r = worker_client_select_worker(w, sb->worker, e);

        if (r < 0)
                return r;
        worker_client_request_begin(&call, WORKER_OP_SET_POLICY);
        json_w_kv_string(&call.jw, "id", sb->id);
        json_w_key(&call.jw, "policy");
        if (sb->network_json)
                json_w_raw(&call.jw, sb->network_json);
        else
                json_w_null(&call.jw);
        json_w_object_end(&call.jw);
        return worker_client_call(w, &call, NULL, e);
}

/* {"op":"set_credentials","id":ID} */
int worker_sandbox_set_credentials(WorkerClient *w, const Sandbox *sb, ApiError *e) {
        int r = worker_client_select_worker(w, sb->worker, e);
        if (r < 0)
                return r;
        return send_id(w, WORKER_OP_SET_CREDENTIALS, sb->id, NULL, NULL, e);
}

int worker_sandbox_pause(WorkerClient *w, const char *id, bool pause, ApiError *e) {
        return call_id(w, pause ? WORKER_OP_PAUSE : WORKER_OP_RESUME, id, NULL, NULL, e);
}

int worker_sandbox_suspend(WorkerClient *w, const char *id, bool *ret_processes_preserved, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        bool kept = false;
        int r = call_id(w, WORKER_OP_SUSPEND, id, NULL, &reply, e);
        if (r < 0)
                return r;
        (void) json_bool(json_get(reply, "processes_preserved"), &kept);
        if (ret_processes_preserved)
                *ret_processes_preserved = kept;
        return 0;
}

int worker_checkpoint_create(WorkerClient *w, const char *id, const char *checkpoint_id, uint64_t max_mb,
                             bool with_memory, uint64_t *ret_size_bytes, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        WorkerCall call;
        int r;

        r = worker_client_select_sandbox(w, id, e);
        if (r < 0)
                return r;
        worker_client_request_begin(&call, WORKER_OP_CHECKPOINT);
        json_w_kv_string(&call.jw, "id", id);
        json_w_kv_string(&call.jw, "checkpoint", checkpoint_id);
        json_w_key(&call.jw, "max_mb");
        json_w_uint(&call.jw, max_mb);
        json_w_kv_bool(&call.jw, "with_memory", with_memory);
        json_w_object_end(&call.jw);
        r = worker_client_call(w, &call, &reply, e);
        if (r < 0)
                return r;
        if (ret_size_bytes && json_uint64(json_get(reply, "size_bytes"), ret_size_bytes) < 0)
                *ret_size_bytes = 0;
        return 0;
}

int worker_checkpoint_remove(WorkerClient *w, const char *id, const char *checkpoint_id, ApiError *e) {
        return call_id(w, WORKER_OP_CHECKPOINT_REMOVE, id, checkpoint_id, NULL, e);
}

int worker_checkpoint_remove_on(WorkerClient *w, const char *worker, const char *sandbox_id, const char *checkpoint_id,
                                ApiError *e) {
        int r = worker_client_select_worker(w, worker, e);
        if (r < 0)
                return r;
        return send_id(w, WORKER_OP_CHECKPOINT_REMOVE, sandbox_id, checkpoint_id, NULL, e);
}

int worker_checkpoint_sizes(WorkerClient *w, const char *id, JsonValue **ret, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        const JsonValue *sizes;
        int r;

        r = call_id(w, WORKER_OP_CHECKPOINT_SIZES, id, NULL, &reply, e);
        if (r < 0)
                return r;
        sizes = json_get(reply, "sizes");
        if (json_type(sizes) != JSON_OBJECT)
                return api_error(e, -EBADMSG, API_INTERNAL, "the worker sent no checkpoint sizes");
        *ret = TAKE_PTR(reply);
        return 0;
}

int worker_sandbox_oom_kills(WorkerClient *w, const char *id, uint64_t *ret, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        int r;

        r = call_id(w, WORKER_OP_OOM_KILLS, id, NULL, &reply, e);
        if (r < 0)
                return r;
        if (json_uint64(json_get(reply, "oom_kills"), ret) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "the worker sent no OOM count");
        return 0;
}

int worker_sandbox_branch(WorkerClient *w, const char *source_id, const char *checkpoint_id, bool with_memory,
                          const Sandbox *children, size_t n, int64_t *ret_pids, uint64_t *ret_starttimes, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        const JsonValue *arr;
        WorkerCall call;
        int r;

        r = worker_client_select_sandbox(w, source_id, e);
        if (r < 0)
                return r;
        worker_client_request_begin(&call, WORKER_OP_BRANCH);
        json_w_kv_string(&call.jw, "source", source_id);
        if (checkpoint_id)
                json_w_kv_string(&call.jw, "checkpoint", checkpoint_id);
        json_w_kv_bool(&call.jw, "with_memory", with_memory);
        json_w_key(&call.jw, "sandboxes");
        json_w_array_begin(&call.jw);
        for (size_t i = 0; i < n; i++)
                write_spec(&call.jw, &children[i]);
        json_w_array_end(&call.jw);
        json_w_object_end(&call.jw);
        r = worker_client_call(w, &call, &reply, e);
        if (r < 0)
                return r;
        arr = json_get(reply, "sandboxes");
        if (json_type(arr) != JSON_ARRAY || json_array_size(arr) != n)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        for (size_t i = 0; i < n; i++) {
                r = reply_pid(json_array_at(arr, i), &ret_pids[i], &ret_starttimes[i], e);
                if (r < 0)
                        return r;
        }
        return 0;
}

int worker_sandbox_destroy(WorkerClient *w, const char *id, ApiError *e) {
        int r = worker_client_select_sandbox(w, id, e);
        if (r == -ENOENT || r == -EHOSTDOWN || r == -ENXIO) {
                /* nothing reachable holds it: a worker that comes back removes
                 * what it has of a sandbox the store no longer gives it */
                log_info("Sandbox %s: %s; nothing to stop", id, e->message);
                *e = (ApiError){};
                return 0;
        }
        if (r < 0)
                return r;
        return send_id(w, WORKER_OP_DESTROY, id, NULL, NULL, e);
}

int worker_sandbox_recover(WorkerClient *w, const Sandbox *sb, const char *checkpoint_id, char *ret_worker,
                           int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e) {
        _cleanup_free_ CheckpointCopy *copies = NULL;
        size_t n = 0, tried = 0;
        int r;

        if (!w->store)
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED, "recovering an unreachable sandbox needs a cluster");
        r = store_checkpoint_copy_list(w->store, checkpoint_id, &copies, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (listing the checkpoint's copies): %s",
                                 strerror(-r));
        Sandbox cur = *sb; /* borrowed fields; worker: what its row names now (each try places it) */
        /* workers other than the lost one first */
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < n; i++) {
                        ApiError skip = {};
                        if (!copies[i].available || streq(copies[i].worker, sb->worker) != (pass == 1))
                                continue;
                        if (worker_client_select_worker(w, copies[i].worker, &skip) < 0)
                                continue;
                        tried++;
                        w->connect_failed = false;
                        r = call_spec_placed(w, WORKER_OP_RESTORE, &cur, copies[i].worker, checkpoint_id, ret_pid,
                                             ret_starttime, e);
                        if (r != -ESTALE)
                                (void) strscpy(cur.worker, sizeof cur.worker, copies[i].worker);
                        if (r >= 0) {
                                (void) strscpy(ret_worker, STORE_NAME_MAX, copies[i].worker);
                                return 0;
                        }
                        if (r != -ESTALE && e->code == API_NOT_FOUND) {
                                /* the store listed a copy its worker does not hold: the row goes, the
                                 * next holder is tried */
                                log_warning("Worker %s holds no copy of checkpoint %s after all: %s; trying another",
                                            copies[i].worker, checkpoint_id, e->message);
                                (void) store_checkpoint_copy_delete(w->store, checkpoint_id, copies[i].worker);
                                continue;
                        }
                        if (!w->connect_failed)
                                return r;
                        log_warning("Worker %s is unreachable; recovering sandbox %s elsewhere", copies[i].worker,
                                    sb->id);
                }
        if (tried > 0)
                return r;
        return api_error(e, -ENOENT, API_CONFLICT,
                         "sandbox '%s' is unreachable with worker '%s' and no live worker holds a copy of checkpoint '%s' "
                         "(checkpoints are shipped to other workers when ship_checkpoints > 0)",
                         sb->id, sb->worker, checkpoint_id);
}
