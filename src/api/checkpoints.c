/* SPDX-License-Identifier: MIT */
/* /v1/sandboxes/{id}/checkpoints: take, list and delete checkpoints (O(1)
 * read-only snapshots of a sandbox's root on btrfs). A new checkpoint's row
 * is written first, not restorable; the worker takes the snapshot; then the
 * row becomes restorable with its size. A crash in between leaves a row the
 * checkpoint GC removes (with whatever snapshot exists). */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "log.h"
#include "str-util.h"

#define CHECKPOINT_ID_ATTEMPTS 5U

int api_checkpoint_find(ApiRequest *r, const Sandbox *sb, const char *ref, Checkpoint *ret, ApiError *e) {
        _cleanup_free_ Checkpoint *list = NULL;
        Checkpoint c;
        size_t n = 0;
        int k;

        if (!api_checkpoint_name_valid(ref))
                return api_error(e, -ENOENT, API_NOT_FOUND, "sandbox '%s' has no checkpoint '%.64s'", sb->id,
                                 strempty(ref));
        /* by id: of this sandbox (another sandbox's or tenant's is no checkpoint of it) */
        k = store_checkpoint_get(r->store, sb->tenant_id, ref, &c);
        if (k >= 0 && streq(c.sandbox_id, sb->id) && c.restorable) {
                *ret = c;
                return 0;
        }
        if (k < 0 && k != -ENOENT)
                return api_store_error(e, k, "looking up the checkpoint");
        /* by name */
        k = store_checkpoint_list(r->store, sb->id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing checkpoints");
        for (size_t i = 0; i < n; i++)
                if (list[i].restorable && streq(list[i].name, ref)) {
                        *ret = list[i];
                        return 0;
                }
        return api_error(e, -ENOENT, API_NOT_FOUND, "sandbox '%s' has no checkpoint '%s'", sb->id, ref);
}

static bool name_taken(const Checkpoint *list, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(list[i].name, name))
                        return true;
        return false;
}

int api_checkpoint_take(ApiRequest *r, const char *id, const char *name, int with_memory, Checkpoint *ret,
                        ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_free_ Checkpoint *list = NULL;
        char reason[STORE_REASON_MAX], data[STORE_NAME_MAX + 96];
        Checkpoint c = {};
        StoreAdmission adm;
        uint64_t size = 0, max_count, max_mb;
        size_t n = 0;
        int k;

        (void) strscpy(c.name, sizeof c.name, strempty(name));
        lock = api_sandbox_lock(id);
        k = api_sandbox_lookup(r, id, false, &sb, e);
        if (k < 0)
                return k;
        if (sb.state != SANDBOX_RUNNING && sb.state != SANDBOX_PAUSED && sb.state != SANDBOX_SUSPENDED)
                return api_error(e, -EBUSY, API_SANDBOX_NOT_RUNNING, "sandbox '%s' is %s: it cannot be checkpointed",
                                 id, sandbox_state_to_string(sb.state) ?: "in an unknown state");
        /* the machine's memory too: a vm sandbox's by default (while it has a machine to save) */
        if (with_memory < 0)
                with_memory = streq(sb.runtime, "vm") && (sb.state != SANDBOX_SUSPENDED || sb.processes_preserved) &&
                              !api_vm_has_volumes(r, &sb);
        else if (with_memory && (k = api_vm_volumes_refuse_save(r, &sb, "a checkpoint with its memory", e)) < 0)
                return k;
        if (with_memory && !streq(sb.runtime, "vm"))
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "sandbox '%s' runs on the %s runtime, which cannot save memory: with_memory needs the "
                                 "vm runtime", id, sb.runtime[0] ? sb.runtime : "ns");
        c.memory = with_memory;
        k = store_checkpoint_list(r->store, id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing checkpoints");
        config_checkpoint_caps(api_config(r->api), sb.checkpoints_max, sb.checkpoints_mb, sb.disk_mb, &max_count,
                               &max_mb);
        if (n >= max_count)
                return api_error(e, -ENOSPC, API_CONFLICT,
                                 "sandbox '%s' has %zu checkpoints, the most it may hold (checkpoints_max %" PRIu64
                                 "); delete some first",
                                 id, n, max_count);
        if (c.name[0] && name_taken(list, n, c.name))
                return api_error(e, -EEXIST, API_ALREADY_EXISTS, "sandbox '%s' has a checkpoint named '%s'", id,
                                 c.name);

        (void) strscpy(c.sandbox_id, sizeof c.sandbox_id, sb.id);
        (void) strscpy(c.tenant_id, sizeof c.tenant_id, sb.tenant_id);
        c.restorable = false; /* until the snapshot exists */
        c.created_usec = now_usec();
        k = api_tenant_admission(r, sb.tenant_id, &adm, e);
        if (k < 0)
                return k;
        k = -EEXIST;
        for (unsigned i = 0; i < CHECKPOINT_ID_ATTEMPTS && k == -EEXIST; i++) {
                char ckid[API_ID_LEN + 1];
                k = api_sandbox_id_generate(ckid);
                if (k < 0)
                        return api_error(e, k, API_INTERNAL, "cannot generate an id: %s", strerror(-k));
                (void) strscpy(c.id, sizeof c.id, ckid);
                k = store_checkpoint_insert_admit(r->store, &c, &adm);
        }
        if (k == -EDQUOT)
                return api_quota_error(r, &adm, "a checkpoint", e);
        if (k == -EEXIST)
                return api_error(e, k, API_ALREADY_EXISTS, "sandbox '%s' has a checkpoint named '%s'", id, c.name);
        if (k < 0)
                return api_store_error(e, k, "recording the checkpoint");

        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_checkpoint_create(r->worker, id, c.id, max_mb, c.memory, &size, e);
        if (k >= 0) {
                /* restorable, and its event, in one transaction */
                c.restorable = true;
                c.size_bytes = size;
                snprintf(reason, sizeof reason, "checkpoint taken by %s", r->actor);
                snprintf(data, sizeof data, "{\"checkpoint\":\"%s\",\"name\":%s%s%s,\"with_memory\":%s}", c.id,
                         c.name[0] ? "\"" : "", c.name[0] ? c.name : "null", c.name[0] ? "\"" : "",
                         c.memory ? "true" : "false"); /* validated name: nothing to escape */
                k = store_batch_begin(r->store);
                if (k >= 0) {
                        k = store_checkpoint_update(r->store, c.id, true, size);
                        if (k >= 0)
                                api_event_tenant(r, sb.tenant_id, id, "sandbox.checkpointed", reason, data);
                        k = store_batch_end(r->store) ?: k;
                }
                if (k < 0) {
                        ApiError ignored = {};
                        (void) api_store_error(e, k, "recording the checkpoint");
                        (void) worker_checkpoint_remove(r->worker, id, c.id, &ignored);
                }
        } else if (e->code == API_OK)
                (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
        if (k < 0) {
                log_warning("Checkpoint of sandbox %s failed: %s", id, e->message);
                (void) store_checkpoint_delete(r->store, c.id);
                return k;
        }
        if (worker_client_is_cluster(r->worker)) {
                /* the first copy: on the sandbox's worker (the controller ships it to others) */
                CheckpointCopy cc = { .available = true };
                (void) strscpy(cc.checkpoint_id, sizeof cc.checkpoint_id, c.id);
                (void) strscpy(cc.sandbox_id, sizeof cc.sandbox_id, id);
                (void) strscpy(cc.worker, sizeof cc.worker, sb.worker);
                k = store_checkpoint_copy_set(r->store, &cc);
                if (k < 0)
                        log_warning_errno(k, "Cannot record where checkpoint %s is: %m", c.id);
        }
        log_info("Checkpoint %s of sandbox %s taken", c.id, id);
        *ret = c;
        return 0;
}

int api_checkpoint_create(ApiRequest *r, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        char name[STORE_NAME_MAX] = "";
        int with_memory = -1;
        Checkpoint c;
        int k;

        json_w_init(&w);
        k = api_read_json_optional(r, &body, e);
        if (k < 0)
                return k;
        k = api_validate_checkpoint_create(body, name, e);
        if (k >= 0)
                k = api_validate_with_memory(body, &with_memory, e);
        if (k < 0)
                return k;
        k = api_checkpoint_take(r, r->params[0], name[0] ? name : NULL, with_memory, &c, e);
        if (k < 0)
                return k;
        json_out_checkpoint(&w, &c);
        return api_reply_json(r, 201, &w);
}

int api_checkpoint_list(ApiRequest *r, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ Checkpoint *list = NULL;
        _cleanup_json_ JsonValue *fresh = NULL;
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = api_sandbox_lookup(r, r->params[0], false, &sb, e);
        if (k < 0)
                return k;
        k = store_checkpoint_list(r->store, sb.id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing checkpoints");
        /* sizes as the pool counts them now (they grow as the root moves on);
         * the stored ones, measured when each was taken, where it cannot tell */
        if (n > 0) {
                ApiError ignored = {};
                if (api_get_worker(r, &ignored) >= 0 && worker_checkpoint_sizes(r->worker, sb.id, &fresh, &ignored) >= 0)
                        for (size_t i = 0; i < n; i++) {
                                uint64_t b;
                                if (json_uint64(json_get(json_get(fresh, "sizes"), list[i].id), &b) >= 0)
                                        list[i].size_bytes = b;
                        }
                else
                        log_debug("Checkpoint sizes of %s: %s", sb.id, ignored.message);
        }
        json_w_object_begin(&w);
        json_w_key(&w, "checkpoints");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++)
                if (list[i].restorable) /* the others are being taken or removed */
                        json_out_checkpoint(&w, &list[i]);
        json_w_array_end(&w);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

/* A cluster: the copies of a deleted checkpoint shipped to other workers go
 * too; one on a worker that cannot be reached now is removed by the
 * controller later (its row stays until then). */
static void remove_copies(ApiRequest *r, const Sandbox *sb, const char *checkpoint_id) {
        _cleanup_free_ CheckpointCopy *copies = NULL;
        size_t n = 0;

        if (!worker_client_is_cluster(r->worker) || store_checkpoint_copy_list(r->store, checkpoint_id, &copies, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                ApiError ignored = {};
                /* unlisted (no restore picks it) before its files go */
                if (copies[i].available) {
                        CheckpointCopy row = copies[i];
                        row.available = false;
                        (void) store_checkpoint_copy_set(r->store, &row);
                }
                if (!streq(copies[i].worker, sb->worker) &&
                    worker_checkpoint_remove_on(r->worker, copies[i].worker, sb->id, checkpoint_id, &ignored) < 0) {
                        log_info("Copy of checkpoint %s on worker %s stays for now: %s", checkpoint_id,
                                 copies[i].worker, ignored.message);
                        continue;
                }
                (void) store_checkpoint_copy_delete(r->store, checkpoint_id, copies[i].worker);
        }
}

int api_checkpoint_remove(ApiRequest *r, const char *id, const char *ref, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        char reason[STORE_REASON_MAX], data[STORE_ID_MAX + 32];
        Checkpoint c;
        int k;

        lock = api_sandbox_lock(id);
        k = api_sandbox_lookup(r, id, false, &sb, e);
        if (k < 0)
                return k;
        k = api_checkpoint_find(r, &sb, ref, &c, e);
        if (k < 0)
                return k;
        /* given up first, so that nothing restores it while it goes */
        k = store_checkpoint_update(r->store, c.id, false, c.size_bytes);
        if (k < 0)
                return api_store_error(e, k, "marking the checkpoint removed");
        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_checkpoint_remove(r->worker, id, c.id, e);
        if (k < 0) {
                if (e->code == API_OK)
                        (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
                (void) store_checkpoint_update(r->store, c.id, true, c.size_bytes);
                return k;
        }
        k = store_checkpoint_delete(r->store, c.id);
        if (k < 0 && k != -ENOENT)
                return api_store_error(e, k, "deleting the checkpoint");

        remove_copies(r, &sb, c.id);
        snprintf(reason, sizeof reason, "checkpoint deleted by %s", r->actor);
        snprintf(data, sizeof data, "{\"checkpoint\":\"%s\"}", c.id);
        api_event_tenant(r, sb.tenant_id, id, "sandbox.checkpoint_deleted", reason, data);
        return 0;
}

int api_checkpoint_delete(ApiRequest *r, ApiError *e) {
        int k = api_checkpoint_remove(r, r->params[0], r->params[1], e);
        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}
