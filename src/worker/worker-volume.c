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

static bool in_cluster(Worker *w) {
        return w->store && streq(w->config->role, "worker") && !isempty(w->config->worker_name);
}

int worker_volume_copies_take(Worker *w, const char *id, const char *ck, ApiError *e) {
        _cleanup_free_ VolumeMount *m = NULL;
        size_t n = 0;
        int r;

        if (!in_cluster(w))
                return 0; /* one host: a restore mounts the volume itself */
        r = store_volume_mounts(w->store, id, &m, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "cannot read the sandbox's volumes: %s", strerror(-r));
        for (size_t i = 0; i < n; i++) {
                r = pool_volume_copy_create(w->pool, id, ck, m[i].volume_id);
                if (r < 0) {
                        int k = pool_volume_copies_remove(w->pool, id, ck);
                        if (k < 0)
                                log_warning_errno(k, "Failed to remove the volume copies of checkpoint %s: %m", ck);
                        return api_error(e, r, api_error_code_from_errno(r),
                                         "cannot copy volume '%s' with checkpoint %s: %s", m[i].volume_name, ck,
                                         strerror(-r));
                }
        }
        return 0;
}

void worker_volumes_move_back(Worker *w, const WorkerSpec *s, const WorkerVolumeMoves *moves) {
        for (size_t i = 0; i < moves->n; i++) {
                int k = store_volume_move(w->store, moves->id[i], s->id, w->config->worker_name, moves->from[i]);
                if (k < 0) {
                        log_error_errno(k, "Volume %s: cannot name worker %s again after a failed restore here; "
                                        "its copy here stays: %m", moves->id[i], moves->from[i]);
                        continue;
                }
                k = pool_volume_remove(w->pool, moves->id[i]);
                if (k < 0)
                        log_warning_errno(k, "Failed to remove volume %s made for a failed restore: %m", moves->id[i]);
        }
}

static int volume_move_in(Worker *w, const WorkerSpec *s, const char *ck, const VolumeMount *m,
                          WorkerVolumeMoves *moves, ApiError *e) {
        const char *me = w->config->worker_name;
        Volume v = {};
        int r;

        r = store_volume_get_by_id(w->store, m->volume_id, &v);
        if (r < 0)
                return api_error(e, r, r == -ENOENT ? API_CONFLICT : API_UNAVAILABLE,
                                 "cannot read volume '%s': %s", m->volume_name, strerror(-r));
        if (streq(v.worker, me))
                return 0; /* here already: mounted as it is */
        if (!pool_volume_copy_exists(w->pool, s->id, ck, v.id))
                return api_error(e, -ENOENT, API_CONFLICT,
                                 "volume '%s' lives on worker '%s' and worker '%s' holds no copy of it taken "
                                 "with checkpoint %s (checkpoints taken before it was mounted have none)",
                                 v.name, v.worker, me, ck);
        r = store_volume_move(w->store, v.id, s->id, v.worker, me);
        if (r == -EBUSY || r == -ESTALE)
                return api_error(e, r, API_CONFLICT,
                                 r == -EBUSY ? "volume '%s' is mounted by other sandboxes too: it moves to "
                                               "another worker only with its one sandbox"
                                             : "volume '%s' moved meanwhile; look and try again",
                                 v.name);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (moving volume '%s'): %s", v.name,
                                 strerror(-r));
        r = pool_volume_from_copy(w->pool, s->id, ck, v.id, v.size_mb);
        if (r < 0) {
                /* its row goes back to where it was: its files are still there, if anywhere */
                int k = store_volume_move(w->store, v.id, s->id, me, v.worker);
                if (k < 0)
                        log_error_errno(k, "Volume %s names worker %s, which failed to make it: %m", v.id, me);
                return api_error(e, r, api_error_code_from_errno(r),
                                 "cannot make volume '%s' from its copy with checkpoint %s: %s", v.name, ck,
                                 strerror(-r));
        }
        (void) strscpy(moves->id[moves->n], STORE_ID_MAX, v.id);
        (void) strscpy(moves->from[moves->n], STORE_NAME_MAX, v.worker);
        moves->n++;
        log_info("Volume %s (%s) moved here from worker %s with sandbox %s, as it was at checkpoint %s", v.id,
                 v.name, v.worker, s->id, ck);
        return 0;
}

int worker_volumes_move_in(Worker *w, const WorkerSpec *s, const char *ck, WorkerVolumeMoves *ret, ApiError *e) {
        _cleanup_free_ VolumeMount *m = NULL;
        size_t n = 0;
        int r;

        *ret = (WorkerVolumeMoves){};
        if (!in_cluster(w))
                return 0;
        r = store_volume_mounts(w->store, s->id, &m, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "cannot read the sandbox's volumes: %s", strerror(-r));
        if (n > RUNTIME_VOLUMES_MAX)
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "more than %d volumes", RUNTIME_VOLUMES_MAX);
        for (size_t i = 0; i < n; i++) {
                r = volume_move_in(w, s, ck, &m[i], ret, e);
                if (r < 0) {
                        worker_volumes_move_back(w, s, ret);
                        *ret = (WorkerVolumeMoves){};
                        return r;
                }
        }
        return 0;
}

/* Whether a sandbox live here mounts volume id (the store says; true when it cannot tell). */
static bool mounted_here(Worker *w, const char *id) {
        for (size_t i = 0; i < w->n_live; i++) {
                _cleanup_free_ VolumeMount *m = NULL;
                size_t n = 0;
                if (store_volume_mounts(w->store, w->live[i].id, &m, &n) < 0)
                        return true;
                for (size_t j = 0; j < n; j++)
                        if (streq(m[j].volume_id, id))
                                return true;
        }
        return false;
}

int worker_volumes_sweep_stale(Worker *w) {
        _cleanup_strv_free_ char **ids = NULL;
        const char *me = w->config->worker_name;
        int r;

        if (!in_cluster(w))
                return 0;
        r = pool_volume_list(w->pool, &ids);
        if (r < 0)
                return r == -EOPNOTSUPP ? 0 : r;
        for (char **i = ids; i && *i; i++) {
                Volume v = {};
                r = store_volume_get_by_id(w->store, *i, &v);
                if (r == -ENOENT)
                        continue; /* no row (a create's or a delete's half): not judged here */
                if (r < 0)
                        return r; /* the store is away: tried again later */
                if (isempty(v.worker) || streq(v.worker, me) || mounted_here(w, *i))
                        continue;
                r = pool_volume_set_aside(w->pool, *i);
                if (r < 0)
                        log_warning_errno(r, "Volume %s lives on worker %s now; cannot set this pool's stale copy "
                                          "aside: %m", *i, v.worker);
        }
        return 0;
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
