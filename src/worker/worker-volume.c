/* SPDX-License-Identifier: MIT */
/* Volumes on this worker: made and removed at the API's request (the store
 * holds their rows), and found for a sandbox that starts: the rows of the
 * sandbox's mounts name them, this pool holds them. Whatever starts a
 * sandbox (create, start after suspend, restore, branch) mounts what the
 * store says, so a restore mounts the same volumes again. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "pool.h"
#include "str-util.h"
#include "worker-internal.h"

void worker_volumes_prep_done(WorkerSpawnPrep *prep) {
        for (size_t i = 0; i < prep->n_volumes; i++)
                prep->volume_host[i] = mfree(prep->volume_host[i]);
        prep->n_volumes = 0;
}

int worker_volumes_prepare(Worker *w, const char *id, bool restore, WorkerSpawnPrep *prep, ApiError *e) {
        _cleanup_free_ VolumeMount *m = NULL;
        size_t n = 0;
        int r;

        if (!w->store)
                return 0;
        r = store_volume_mounts(w->store, id, &m, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "cannot read the sandbox's volumes: %s", strerror(-r));
        if (n == 0)
                return 0;
        /* a saved machine's (vm) volumes are served by a virtiofsd each; QEMU cannot save such a
         * machine (its memory is shared with them), so it boots, from its disk, whenever it starts */
        if (restore)
                return api_error(e, -EOPNOTSUPP, API_UNSUPPORTED,
                                 "a vm sandbox with volumes cannot start from a saved machine");
        if (n > RUNTIME_VOLUMES_MAX)
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "more than %d volumes", RUNTIME_VOLUMES_MAX);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *host = NULL;
                int fd;

                r = pool_volume_open(w->pool, m[i].volume_id, &fd);
                if (r >= 0) {
                        safe_close(fd);
                        r = pool_volume_path(w->pool, m[i].volume_id, &host);
                }
                if (r < 0)
                        return api_error(e, r, r == -ENOENT ? API_CONFLICT : API_INTERNAL,
                                         "volume '%s' is not on this worker: %s", m[i].volume_name, strerror(-r));
                if (strscpy(prep->volume_path[i], RUNTIME_VOLUME_PATH_MAX, m[i].path) < 0)
                        return api_error(e, -ENAMETOOLONG, API_INVALID_ARGUMENT, "bad volume path");
                prep->volume_host[i] = TAKE_PTR(host);
                prep->volumes[i] = (RuntimeVolume){ .host_path = prep->volume_host[i],
                                                    .path = prep->volume_path[i],
                                                    .read_only = m[i].read_only };
                prep->n_volumes = i + 1;
        }
        return 0;
}

bool worker_sandbox_has_volumes(Worker *w, const char *id) {
        _cleanup_free_ VolumeMount *m = NULL;
        size_t n = 0;

        return w->store && id && store_volume_mounts(w->store, id, &m, &n) >= 0 && n > 0;
}

int worker_vm_volumes_refuse_save(Worker *w, const char *id, const char *what, ApiError *e) {
        if (!worker_sandbox_has_volumes(w, id))
                return 0;
        return api_error(e, -EOPNOTSUPP, API_UNSUPPORTED,
                         "sandbox %s is a vm with volumes, whose memory cannot be saved (its virtiofs devices keep "
                         "no state QEMU can save): %s is not supported; %s",
                         id, what, "use with_memory false");
}

/* {"op":"volume_create","id":ID,"size_mb":N[,"source":ID[,"read_only":true]]}: empty, or a
 * snapshot of source (writable, or read-only) */
void worker_op_volume_create(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const char *id = json_string(json_get(req, "id"));
        ApiError e = {};
        uint64_t size_mb = 0;
        int r;

        if (json_uint64(json_get(req, "size_mb"), &size_mb) < 0 || size_mb == 0) {
                api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "bad volume size");
                return worker_reply_error(jw, &e);
        }
        const char *source = json_string(json_get(req, "source"));
        bool read_only = false;

        if (json_get(req, "read_only") && json_bool(json_get(req, "read_only"), &read_only) < 0) {
                api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "bad read_only");
                return worker_reply_error(jw, &e);
        }
        if (read_only && !source) {
                api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "a read-only volume is a snapshot of another");
                return worker_reply_error(jw, &e);
        }
        /* its quota is a promise of the pool's like a sandbox's (a clone may write all of it too): 507 if it cannot keep it */
        if (size_mb > (UINT64_MAX >> 20)) {
                api_error(&e, -ERANGE, API_INVALID_ARGUMENT, "bad volume size");
                return worker_reply_error(jw, &e);
        }
        r = worker_admit_disk(w, source ? "volume clone" : "volume create", NULL, size_mb << 20, size_mb << 20, &e);
        if (r < 0)
                return worker_reply_error(jw, &e);
        r = source ? pool_volume_clone(w->pool, source, id, size_mb, read_only) : pool_volume_create(w->pool, id, size_mb);
        if (r == -EOPNOTSUPP)
                api_error(&e, r, API_UNSUPPORTED, "volumes need a btrfs pool with quotas (this one is %s)",
                          pool_kind_to_string(pool_kind(w->pool)));
        else if (r == -ENOENT && source)
                api_error(&e, r, API_NOT_FOUND, "volume %s is not on this worker", source);
        else if (r == -EEXIST)
                api_error(&e, r, API_ALREADY_EXISTS, "volume %s exists on this worker", strna(id));
        else if (r < 0)
                (void) worker_storage_error(w, r, &e, api_error_code_from_errno(r), "cannot create the volume: %s",
                                            strerror(-r));
        if (r < 0)
                return worker_reply_error(jw, &e);
        log_info("Created volume %s (%" PRIu64 " MiB)", id, size_mb);
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_object_end(jw);
}

/* {"op":"volume_remove","id":ID}: one that is not here is fine */
void worker_op_volume_remove(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const char *id = json_string(json_get(req, "id"));
        ApiError e = {};
        int r;

        r = pool_volume_remove(w->pool, id);
        if (r < 0) {
                api_error(&e, r, API_INTERNAL, "cannot remove the volume: %s", strerror(-r));
                return worker_reply_error(jw, &e);
        }
        log_info("Removed volume %s", id);
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_object_end(jw);
}

/* {"op":"volume_usage","id":ID} → {"ok":true,"used_bytes":N} */
void worker_op_volume_usage(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const char *id = json_string(json_get(req, "id"));
        ApiError e = {};
        uint64_t used = 0;
        int r;

        r = pool_volume_usage(w->pool, id, &used);
        if (r < 0) {
                api_error(&e, r, r == -ENOENT ? API_NOT_FOUND : API_INTERNAL, "cannot measure the volume: %s",
                          strerror(-r));
                return worker_reply_error(jw, &e);
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "used_bytes");
        json_w_uint(jw, used);
        json_w_object_end(jw);
}
